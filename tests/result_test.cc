#include "common/result.h"

#include <catch2/catch.hpp>

#include <memory>

using agentenv::Fail;
using agentenv::FailErrno;
using agentenv::Result;

namespace {
Result<int> Half(int x) {
  if (x % 2) return Fail("odd: " + std::to_string(x));
  return x / 2;
}
Result<int> Quarter(int x) {
  AE_ASSIGN(int h, Half(x));
  AE_ASSIGN(int q, Half(h));
  return q;
}
Result<void> CheckEven(int x) {
  AE_TRY(Half(x));
  return {};
}
}  // namespace

TEST_CASE("Result carries a value or an error and propagates errors") {
  REQUIRE(Quarter(8).value() == 2);
  auto r = Quarter(6);
  REQUIRE_FALSE(r);
  REQUIRE(r.error().message == "odd: 3");
  REQUIRE(CheckEven(4));
  REQUIRE(CheckEven(5).error().message == "odd: 5");
}

TEST_CASE("FailErrno formats path first, then the errno text") {
  Result<std::unique_ptr<int>> r = FailErrno("/x/y", ENOENT);
  REQUIRE(r.error().message == "/x/y: No such file or directory");
  REQUIRE(r.error().errno_value == ENOENT);
}

// common/read_all: a file read to its end or to a limit, errors with the path.
#include "common/read_all.h"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "common/unique_fd.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

TEST_CASE("read_all: a file is read to its end, or to the limit and no further", "[common]") {
  TempDir t;
  std::string path = t.str() + "/f";
  std::string data(200000, 'x');
  for (size_t i = 0; i < data.size(); i += 7) data[i] = char('a' + i % 26);
  {
    UniqueFd w(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    REQUIRE(w);
    REQUIRE(::write(w.get(), data.data(), data.size()) == ssize_t(data.size()));
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  CHECK(*ReadUpTo(fd.get(), path, SIZE_MAX) == data);
  REQUIRE(::lseek(fd.get(), 0, SEEK_SET) == 0);
  CHECK(*ReadUpTo(fd.get(), path, 70001) == data.substr(0, 70001));  // more than one read
  CHECK(*ReadUpTo(fd.get(), path, 0) == "");
  CHECK(*ReadUpTo(fd.get(), path, 1000) == data.substr(70001, 1000));  // from the offset
}

TEST_CASE("read_all: a read error names the path and keeps the errno", "[common]") {
  TempDir t;
  UniqueFd dir(::open(t.str().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(dir);
  auto r = ReadUpTo(dir.get(), "the/dir", 10);
  REQUIRE_FALSE(r);
  CHECK(r.error().errno_value == EISDIR);
  CHECK(r.error().message == "the/dir: " + std::string(std::strerror(EISDIR)));
}

TEST_CASE("read_all: a file by its path is read to the limit, a missing one is ENOENT with its path", "[common]") {
  TempDir t;
  const std::string path = t.str() + "/f";
  {
    UniqueFd w(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    REQUIRE(w);
    REQUIRE(::write(w.get(), "0123456789", 10) == 10);
  }
  CHECK(*ReadFileUpTo(path, SIZE_MAX) == "0123456789");
  CHECK(*ReadFileUpTo(path, 4) == "0123");
  auto missing = ReadFileUpTo(t.str() + "/none", 10);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().errno_value == ENOENT);
  CHECK(missing.error().message == t.str() + "/none: " + std::string(std::strerror(ENOENT)));
}

}  // namespace
}  // namespace agentenv::test

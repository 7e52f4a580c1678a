// registry/: image references as docker and podman spell them.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "failing_server.h"
#include "registry/registry.h"

namespace agentenv::registry {
namespace {

TEST_CASE("registry: references name a host, a repository and a tag or digest", "[registry]") {
  auto r = ParseReference("localhost:5000/agents/env:v1");
  REQUIRE(r);
  CHECK(r->host == "localhost:5000");
  CHECK(r->repository == "agents/env");
  CHECK(r->tag == "v1");
  CHECK(r->String() == "localhost:5000/agents/env:v1");

  r = ParseReference("registry.example.com/env");
  REQUIRE(r);
  CHECK(r->tag == "latest");

  std::string digest = "sha256:" + std::string(64, 'a');
  r = ParseReference("127.0.0.1:5000/env@" + digest);
  REQUIRE(r);
  CHECK(r->tag == digest);
  CHECK(r->String() == "127.0.0.1:5000/env@" + digest);
}

TEST_CASE("registry: references without a registry host or with bad names are refused", "[registry]") {
  for (const char* bad : {"env:v1", "agents/env:v1", "localhost:5000/Env:v1", "localhost:5000/env:v 1",
                          "localhost:5000/env@sha256:123", "localhost:5000/:v1", "localhost:5000/env:"}) {
    INFO(bad);
    auto r = ParseReference(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalid);
    CHECK(r.error().message.find(bad) != std::string::npos);
  }
}

// The backoff runs on an injected clock: the waits are recorded, not slept.
TEST_CASE("registry: a 503 or 429 is tried 4 times with doubling waits, then named with its count", "[registry]") {
  for (int status : {503, 429}) {
    INFO(status);
    FailingServer server(status);
    auto ref = ParseReference(server.address() + "/x/y:t");
    REQUIRE(ref);
    std::vector<int64_t> waits;
    Options opt;
    opt.insecure = true;
    opt.wait = [&](std::chrono::milliseconds ms) { waits.push_back(ms.count()); };
    auto t0 = std::chrono::steady_clock::now();
    auto r = HasBlob(*ref, opt, "sha256:" + std::string(64, 'a'));
    auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kIo);
    CHECK(r.error().message.find("answered " + std::to_string(status)) != std::string::npos);
    CHECK(r.error().message.find("4 times") != std::string::npos);
    CHECK(server.requests() == 4);
    CHECK(waits == std::vector<int64_t>{200, 400, 800});
    CHECK(took < std::chrono::milliseconds(1400));  // nothing slept the waits
  }
}

TEST_CASE("registry: a refused connection is retried the same way and says what to check", "[registry]") {
  auto ref = ParseReference("127.0.0.1:" + std::to_string(FreePort()) + "/x/y:t");
  REQUIRE(ref);
  std::vector<int64_t> waits;
  Options opt;
  opt.insecure = true;
  opt.attempts = 3;
  opt.backoff_ms = 50;
  opt.wait = [&](std::chrono::milliseconds ms) { waits.push_back(ms.count()); };
  auto r = HasBlob(*ref, opt, "sha256:" + std::string(64, 'a'));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kIo);
  CHECK(r.error().message.find("is a registry listening there") != std::string::npos);
  CHECK(r.error().message.find("tried 3 times") != std::string::npos);
  CHECK(waits == std::vector<int64_t>{50, 100});
}

}  // namespace
}  // namespace agentenv::registry

// registry/: image references as docker and podman spell them.
#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace agentenv::registry

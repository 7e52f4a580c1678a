// push and pull against a real registry (Debian's docker-registry, i.e.
// Distribution 2.8) started on a free loopback port: the tree arrives
// whole, an unchanged layer is never sent twice (counted in the
// registry's access log), and every failure is a clear error that records
// nothing.
#include <catch2/catch.hpp>

#include "cli_testutil.h"
#include "oci_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

// bcrypt (cost 4: each request checks it) of "pw", for user "user".
constexpr const char* kHtpasswd = "user:$2b$04$qU0it6GrumHG9c3XhRdBN.qT7OT4a1FyB6AUeA8vJsgWeLo8.EFgG\n";

void RequireRegistry() {
  if (!HaveRegistry()) Skip(std::string(kRegistryBin) + " is not installed (scripts/install-deps.sh)");
}

// Only the live tree is left under work/: no scratch layout survives.
void CheckNoScratch(const fs::path& root) {
  for (const auto& e : fs::directory_iterator(root / "work")) CHECK(e.path().filename() == "current");
}

TEST_CASE("cli registry: push then pull into a fresh repository gives the same tree, unchanged layers are never sent again",
          "[cli][oci][registry]") {
  RequireRegistry();
  TempDir tmp;
  fs::path root = MakeHistory(tmp);
  Manifest want = TreeManifest(Work(root));
  Registry reg(tmp / "registry");
  std::string image = reg.address() + "/agentenv/env:v1";

  json first = AgentenvJson(root, {"push", "HEAD", image, "--insecure"});
  REQUIRE(first["ok"] == true);
  CHECK(first["layers"] == 3);
  CHECK(first["blobs_sent"] == 4);  // three layers and the config
  CHECK(reg.Requests("POST", "/blobs/uploads/") == 4);
  CheckNoScratch(root);

  fs::path other = tmp / "other";
  json init = AgentenvJson(other, {"init", "--from-image", image, "--insecure"});
  REQUIRE(init["ok"] == true);
  CHECK(ManifestDiff(want, TreeManifest(Work(other))) == "");
  CHECK(Agentenv(other, {"fsck"}).code == 0);
  CHECK(Agentenv(root, {"fsck"}).code == 0);
  // History travels: three nodes from the root, the same ids, times, titles.
  CHECK(AgentenvJson(other, {"log"})["nodes"] == AgentenvJson(root, {"log"})["nodes"]);
  CheckNoScratch(other);

  // Unchanged: every blob is found by HEAD, none uploaded.
  json again = AgentenvJson(root, {"push", "HEAD", image, "--insecure"});
  CHECK(again["blobs_sent"] == 0);
  CHECK(again["blobs_skipped"] == 4);
  CHECK(again["manifest"] == first["manifest"]);
  CHECK(reg.Requests("POST", "/blobs/uploads/") == 4);

  // A child with 10 changed files: one small layer (and a config).
  for (int i = 0; i < 10; ++i) WriteFile(Work(root) / ("etc/changed-" + std::to_string(i)), "v" + std::to_string(i));
  MustAgentenv(root, {"snap", "-m", "ten files"});
  json child = AgentenvJson(root, {"push", "HEAD", reg.address() + "/agentenv/env:v2", "--insecure"});
  CHECK(child["blobs_sent"] == 2);
  CHECK(child["bytes_sent"].get<uint64_t>() < 64 * 1024);
  CHECK(reg.Requests("POST", "/blobs/uploads/") == 6);

  // pull records it as a new node of an existing repository.
  json pulled = AgentenvJson(other, {"pull", reg.address() + "/agentenv/env:v2", "--insecure"});
  REQUIRE(pulled["ok"] == true);
  MustAgentenv(other, {"restore", pulled["node"]});
  CHECK(ManifestDiff(TreeManifest(Work(root)), TreeManifest(Work(other))) == "");
  CHECK(Agentenv(other, {"fsck"}).code == 0);
}

TEST_CASE("cli registry: a registry that is down, credentials missing or wrong, a missing or corrupted blob are refused, nothing recorded",
          "[cli][oci][registry]") {
  RequireRegistry();
  TempDir tmp;
  fs::path root = MakeHistory(tmp);

  // Down: nothing listens on the port.
  std::string down = "127.0.0.1:" + std::to_string(FreePort()) + "/x/y:t";
  CmdResult r = Agentenv(root, {"push", "HEAD", down, "--insecure"});
  INFO(r.Describe());
  CHECK(r.code == 1);
  CHECK(r.err.find("Couldn't connect") != std::string::npos);
  CHECK(r.err.find("tried 4 times") != std::string::npos);
  r = Agentenv(tmp / "never", {"init", "--from-image", down, "--insecure"});
  CHECK(r.code == 1);
  CHECK(!fs::exists(tmp / "never"));
  CheckNoScratch(root);

  // Credentials: none, wrong, right.
  Registry reg(tmp / "registry", kHtpasswd);
  std::string image = reg.address() + "/agentenv/env:v1";
  WriteFile(tmp / "wrong.json", json{{"auths", {{reg.address(), {{"auth", "dXNlcjpub3Bl"}}}}}}.dump());  // user:nope
  WriteFile(tmp / "right.json", json{{"auths", {{"http://" + reg.address(), {{"username", "user"}, {"password", "pw"}}}}}}.dump());
  WriteFile(tmp / "none.json", json{{"auths", json::object()}}.dump());
  r = Agentenv(root, {"push", "HEAD", image, "--insecure", "--auth-file", (tmp / "none.json").string()});
  CHECK(r.code == 2);
  CHECK(r.err.find("no credentials for " + reg.address()) != std::string::npos);
  r = Agentenv(root, {"push", "HEAD", image, "--insecure", "--auth-file", (tmp / "wrong.json").string()});
  CHECK(r.code == 2);
  CHECK(r.err.find("were refused") != std::string::npos);
  json ok = AgentenvJson(root, {"push", "HEAD", image, "--insecure", "--auth-file", (tmp / "right.json").string()});
  REQUIRE(ok["ok"] == true);
  r = Agentenv(tmp / "fresh", {"init", "--from-image", image, "--insecure", "--auth-file", (tmp / "wrong.json").string()});
  CHECK(r.code == 2);
  CHECK(!fs::exists(tmp / "fresh"));

  // The registry lost a layer, or serves other bytes for one.
  json manifest = json::parse(RunCmd({"/usr/bin/skopeo", "inspect", "--raw", "--tls-verify=false", "--creds", "user:pw",
                                      "docker://" + image}).out);
  REQUIRE(manifest["layers"].size() == 3);
  std::string log_before = Agentenv(root, {"log"}).out;
  fs::path corrupt = reg.BlobData(manifest["layers"][1]["digest"]);
  std::string original = ReadFile(corrupt), bytes = original;
  bytes[bytes.size() / 2] ^= 1;
  WriteFile(corrupt, bytes);
  r = Agentenv(root, {"pull", image, "--insecure", "--auth-file", (tmp / "right.json").string()});
  INFO(r.Describe());
  CHECK(r.code == 2);
  CHECK(r.err.find("refusing the image") != std::string::npos);
  WriteFile(corrupt, original);
  fs::remove(reg.BlobData(manifest["layers"][2]["digest"]));
  r = Agentenv(root, {"pull", image, "--insecure", "--auth-file", (tmp / "right.json").string()});
  INFO(r.Describe());
  CHECK(r.code != 0);
  CHECK(r.err.find(manifest["layers"][2]["digest"].get<std::string>()) != std::string::npos);
  CHECK(Agentenv(root, {"log"}).out == log_before);
  CheckNoScratch(root);
}

}  // namespace
}  // namespace agentenv::test

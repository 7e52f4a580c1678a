// push and pull against a real registry (Debian's docker-registry, i.e.
// Distribution 2.8) started on a free loopback port: the tree arrives
// whole, an unchanged layer is never sent twice (counted in the
// registry's access log), and every failure is a clear error that records
// nothing.
#include <sys/file.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "cli_testutil.h"
#include "failing_server.h"
#include "oci_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

// bcrypt (cost 4: each request checks it) of "pw", for user "user".
constexpr const char* kHtpasswd = "user:$2b$04$qU0it6GrumHG9c3XhRdBN.qT7OT4a1FyB6AUeA8vJsgWeLo8.EFgG\n";

void RequireRegistry() {
  if (!HaveRegistry()) Skip(std::string(kRegistryBin) + " or curl is not installed (apt-get install docker-registry curl)");
}

// Only the live tree is left under work/: no scratch layout survives.
void CheckNoScratch(const fs::path& root) {
  for (const auto& e : fs::directory_iterator(root / "work")) CHECK(e.path().filename() == "current");
}

TEST_CASE("cli registry: push then pull into a fresh repository gives the same tree, unchanged layers are never sent again",
          "[cli][oci][registry][interop]") {
  RequireRegistry();
  TempDir tmp;
  fs::path root = MakeHistory(tmp);
  Manifest want = FullManifest(Work(root));
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
  CHECK(ManifestDiff(want, FullManifest(Work(other))) == "");
  CHECK(Agentenv(other, {"fsck"}).code == 0);
  CHECK(Agentenv(root, {"fsck"}).code == 0);
  // History travels: three nodes from the root, the same ids, times, titles.
  CHECK(AgentenvJson(other, {"log"})["nodes"] == AgentenvJson(root, {"log"})["nodes"]);
  CheckNoScratch(other);

  // What a killed push or pull left (unlocked, with or without its old
  // lock file) goes with the next one; a scratch directory in use (its
  // maker holds a lock on the directory itself) stays.
  for (const char* d : {"work/push-stale1", "work/pull-stale2", "work/push-busy01"}) {
    fs::create_directories(root / d / "layout");
  }
  WriteFile(root / "work/push-stale1/lock", "");
  UniqueFd busy(::open((root / "work/push-busy01").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(::flock(busy.get(), LOCK_EX) == 0);

  // Unchanged: every blob is found by HEAD, none uploaded.
  json again = AgentenvJson(root, {"push", "HEAD", image, "--insecure"});
  CHECK_FALSE(fs::exists(root / "work/push-stale1"));
  CHECK(fs::exists(root / "work/push-busy01"));
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
  json stale_pull = AgentenvJson(root, {"pull", reg.address() + "/agentenv/env:v2", "--insecure"});
  CHECK(stale_pull["ok"] == true);
  CHECK_FALSE(fs::exists(root / "work/pull-stale2"));
  busy.reset();
  fs::remove_all(root / "work/push-busy01");
  json pulled = AgentenvJson(other, {"pull", reg.address() + "/agentenv/env:v2", "--insecure"});
  REQUIRE(pulled["ok"] == true);
  MustAgentenv(other, {"restore", pulled["node"]});
  CHECK(ManifestDiff(FullManifest(Work(root)), FullManifest(Work(other))) == "");
  CHECK(Agentenv(other, {"fsck"}).code == 0);
}

TEST_CASE("cli registry: a registry that is down, credentials missing or wrong, a missing or corrupted blob are refused, nothing recorded",
          "[cli][oci][registry][interop]") {
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

TEST_CASE("cli registry: a registry answering 503 is retried with backoff, then a clear error, nothing recorded",
          "[cli][oci][registry]") {
  TempDir tmp;
  fs::path root = MakeHistory(tmp);
  FailingServer server(503);
  // The waits between attempts are timed by registry_test (an injected
  // clock); here, what the command says and that nothing changed.
  CmdResult r = Agentenv(root, {"push", "HEAD", server.address() + "/x/y:t", "--insecure"});
  INFO(r.Describe());
  CHECK(r.code == 1);
  CHECK(r.err.find("answered 503 (a server error) 4 times") != std::string::npos);
  CHECK(server.requests() == 4);  // the first HEAD, tried 4 times
  std::string log_before = Agentenv(root, {"log"}).out;
  r = Agentenv(root, {"pull", server.address() + "/x/y:t", "--insecure"});
  CHECK(r.code == 1);
  CHECK(r.err.find("answered 503 (a server error) 4 times: UNAVAILABLE: try later") != std::string::npos);  // a GET has a body
  CHECK(server.requests() == 8);
  CHECK(Agentenv(root, {"log"}).out == log_before);
  CheckNoScratch(root);
}

// What every command says when its repository's filesystem is full: the
// errno's text, the filesystem, the remedy; exit 1.
void CheckFullDiskError(const CmdResult& r, const fs::path& root) {
  INFO(r.Describe());
  CHECK(r.code == 1);
  CHECK(r.err.find(": No space left on device") != std::string::npos);
  CHECK(r.err.find("Success") == std::string::npos);
  CHECK(r.err.find("the filesystem holding " + root.string() + " is full: free space there "
                   "(`agentenv retain` then `agentenv gc` drop old history), then run the command again") !=
        std::string::npos);
}

std::string RandomText(size_t n, uint64_t seed) {
  std::vector<uint8_t> v = RandomBytes(n, seed);
  return std::string(v.begin(), v.end());
}

TEST_CASE("cli registry: a pull or push that fills the repository's disk says ENOSPC, the filesystem and the remedy, and records nothing",
          "[cli][oci][registry][interop]") {
  RequireRegistry();
  if (!IsRoot()) Skip("needs root to mount a size-limited tmpfs");
  TempDir tmp;
  fs::path src = MakeHistory(tmp);
  // 8 MiB that do not compress: more than the full filesystem below has left.
  WriteFile(Work(src) / "big", RandomText(8 << 20, 7));
  MustAgentenv(src, {"snap", "-m", "big"});
  Registry reg(tmp / "registry");
  std::string image = reg.address() + "/agentenv/big:v1";
  REQUIRE(AgentenvJson(src, {"push", "HEAD", image, "--insecure"})["ok"] == true);

  SmallTmpfs small(tmp / "mnt", "48m");
  REQUIRE(small.mounted());
  fs::path root = tmp / "mnt" / "repo";
  MustAgentenv(root, {"init", "-q"});
  std::string log_before = Agentenv(root, {"log"}).out;
  // Room for the config and the small layers, not for the big one: the
  // disk fills in the middle of a blob's download.
  FillUp(tmp / "mnt", 2 << 20);
  CmdResult r = Agentenv(root, {"pull", image, "--insecure"});
  CheckFullDiskError(r, root);
  CHECK(r.err.find(".partial: No space left on device") != std::string::npos);
  CHECK(Agentenv(root, {"log"}).out == log_before);
  CheckNoScratch(root);
  // With the space back the same pull works.
  fs::remove(tmp / "mnt" / "fill");
  REQUIRE(AgentenvJson(root, {"pull", image, "--insecure"})["ok"] == true);

  // push writes each layer the registry lacks into a scratch layout beside
  // the live tree first: a new 6 MiB node does not fit.
  WriteFile(Work(root) / "big2", RandomText(6 << 20, 8));
  MustAgentenv(root, {"snap", "-m", "big2"});
  log_before = Agentenv(root, {"log"}).out;
  size_t manifests = reg.Requests("PUT", "/manifests/");
  FillUp(tmp / "mnt", 2 << 20);
  r = Agentenv(root, {"push", "HEAD", reg.address() + "/agentenv/big:v2", "--insecure"});
  CheckFullDiskError(r, root);
  CHECK(reg.Requests("PUT", "/manifests/") == manifests);  // no tag names a partial image
  CHECK(Agentenv(root, {"log"}).out == log_before);
  CheckNoScratch(root);
  fs::remove(tmp / "mnt" / "fill");
  CHECK(AgentenvJson(root, {"push", "HEAD", reg.address() + "/agentenv/big:v2", "--insecure"})["ok"] == true);
  CHECK(Agentenv(root, {"fsck"}).code == 0);
}

}  // namespace
}  // namespace agentenv::test

// For the OCI tests: OCI image layouts built by hand (so that a test can
// make layers no image tool would: "..", whiteouts through symlinks,
// digests that lie) and a real registry (Debian's docker-registry, i.e.
// Distribution) on a free loopback port, stopped and removed after.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "cli_testutil.h"
#include "failing_server.h"
#include "testutil.h"

namespace agentenv::test {

inline std::string Sha256Of(const fs::path& p) {
  CmdResult r = RunCmd({"/usr/bin/sha256sum", p.string()});
  REQUIRE(r.code == 0);
  return "sha256:" + r.out.substr(0, 64);
}

// Puts `file` into layout `dir` as a blob; returns its descriptor.
inline json AddBlob(const fs::path& dir, const fs::path& file, const std::string& media_type) {
  fs::create_directories(dir / "blobs/sha256");
  std::string digest = Sha256Of(file);
  fs::copy_file(file, dir / "blobs/sha256" / digest.substr(7), fs::copy_options::overwrite_existing);
  return {{"mediaType", media_type}, {"digest", digest}, {"size", fs::file_size(file)}};
}

// An OCI image layout at `dir` whose image `tag` has these layer tarballs
// (bottom first); returns the layer descriptors in the manifest. The
// config's rootfs.diff_ids are the layers' digests unless `diff_ids` is
// given (an array: a damaged image).
inline std::vector<json> MakeLayout(const fs::path& dir, const std::vector<fs::path>& layers,
                                    const std::string& tag = "t", json diff_ids = nullptr) {
  fs::create_directories(dir);
  WriteFile(dir / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  std::vector<json> descs;
  bool given = !diff_ids.is_null();
  if (!given) diff_ids = json::array();
  for (const auto& l : layers) {
    descs.push_back(AddBlob(dir, l, "application/vnd.oci.image.layer.v1.tar"));
    if (!given) diff_ids.push_back(descs.back()["digest"]);
  }
  fs::path cfg = dir / "config.tmp";
  WriteFile(cfg, json{{"architecture", "amd64"}, {"os", "linux"}, {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}}
                     .dump());
  json cdesc = AddBlob(dir, cfg, "application/vnd.oci.image.config.v1+json");
  fs::remove(cfg);
  fs::path man = dir / "manifest.tmp";
  WriteFile(man, json{{"schemaVersion", 2}, {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                      {"config", cdesc}, {"layers", descs}}
                     .dump());
  json mdesc = AddBlob(dir, man, "application/vnd.oci.image.manifest.v1+json");
  fs::remove(man);
  mdesc["annotations"] = {{"org.opencontainers.image.ref.name", tag}};
  WriteFile(dir / "index.json", json{{"schemaVersion", 2}, {"manifests", {mdesc}}}.dump());
  return descs;
}

constexpr const char* kRegistryBin = "/usr/bin/docker-registry";

// A Distribution registry of its own (config and storage in a temp dir, a
// free port, its log in `log()`), killed when this goes out of scope. The
// packaged service is never touched.
class Registry {
 public:
  // `htpasswd`: "user:bcrypt-hash" lines; empty: no authentication.
  explicit Registry(const fs::path& dir, const std::string& htpasswd = "") : dir_(dir), port_(FreePort()) {
    fs::create_directories(dir / "storage");
    std::string auth;
    if (!htpasswd.empty()) {
      WriteFile(dir / "htpasswd", htpasswd);
      auth = "auth:\n  htpasswd:\n    realm: test\n    path: " + (dir / "htpasswd").string() + "\n";
    }
    WriteFile(dir / "config.yml", "version: 0.1\n"
                                  "log:\n  level: info\n  accesslog:\n    disabled: false\n"
                                  "storage:\n  filesystem:\n    rootdirectory: " +
                                      (dir / "storage").string() +
                                      "\n  delete:\n    enabled: true\n"
                                      "http:\n  addr: 127.0.0.1:" +
                                      std::to_string(port_) + "\n" + auth);
    // Its access log goes to stdout, the rest to stderr: both to log().
    child_.Start({"/bin/sh", "-c", "exec \"$0\" serve \"$1\" >>\"$2\" 2>&1", kRegistryBin,
                  (dir / "config.yml").string(), log().string()},
                 false, false);
    bool up = WaitFor(
        [&] {
          // Any HTTP answer (401 with authentication) means it is up.
          CmdResult r = RunCmd({"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://" + address() + "/v2/"}, "", 5000);
          return r.out == "200" || r.out == "401";
        },
        20000);
    INFO(ReadFile(log()));
    REQUIRE(up);
  }
  ~Registry() { child_.Kill(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  fs::path log() const { return dir_ / "registry.log"; }
  // The stored data of blob `digest` (Distribution's filesystem layout).
  fs::path BlobData(const std::string& digest) const {
    std::string hex = digest.substr(7);
    return dir_ / "storage/docker/registry/v2/blobs/sha256" / hex.substr(0, 2) / hex / "data";
  }
  // Requests in the log so far whose method and path match (e.g. "PUT",
  // "/blobs/uploads/").
  size_t Requests(const std::string& method, const std::string& path_part) const {
    std::istringstream in(ReadFile(log()));
    size_t n = 0;
    for (std::string line; std::getline(in, line);)
      if (line.find("\"" + method + " ") != std::string::npos && line.find(path_part) != std::string::npos) ++n;
    return n;
  }

 private:
  fs::path dir_;
  int port_;
  Child child_;
};

inline void MustRun(const std::vector<std::string>& argv) {
  CmdResult r = RunCmd(argv, "", 120000);
  INFO(r.Describe());
  REQUIRE(r.code == 0);
}

inline void MustAgentenv(const fs::path& root, const std::vector<std::string>& args) {
  CmdResult r = Agentenv(root, args, 120000);
  INFO(r.Describe());
  REQUIRE(r.code == 0);
}

// Three nodes: a tree, then additions, changes and deletions (a file, a
// whole directory, a file replaced by a directory).
inline fs::path MakeHistory(const TempDir& tmp) {
  fs::path src = tmp / "src", root = tmp / "repo";
  fs::create_directories(src / "etc/conf.d");
  fs::create_directories(src / "usr/share/doc");
  fs::create_directories(src / "gone/deep");
  WriteFile(src / "etc/hostname", "box\n");
  WriteFile(src / "etc/conf.d/a", "a\n");
  WriteFile(src / "usr/share/doc/readme", std::string(100000, 'r'));
  WriteFile(src / "gone/deep/f", "f\n");
  WriteFile(src / "becomes-dir", "file\n");
  fs::create_symlink("../etc/hostname", src / "usr/link");
  fs::create_hard_link(src / "etc/hostname", src / "usr/hard");
  REQUIRE(::chmod((src / "etc/conf.d").c_str(), 0750) == 0);
  REQUIRE(::setxattr((src / "etc/hostname").c_str(), "user.kind", "name", 4, 0) == 0);
  MustAgentenv(root, {"init", "--from", src.string()});
  WriteFile(Work(root) / "etc/conf.d/b", "b\n");
  WriteFile(Work(root) / "etc/hostname", "box2\n");
  fs::remove(Work(root) / "etc/conf.d/a");
  MustAgentenv(root, {"snap", "-m", "second"});
  fs::remove_all(Work(root) / "gone");
  fs::remove(Work(root) / "becomes-dir");
  fs::create_directories(Work(root) / "becomes-dir");
  WriteFile(Work(root) / "becomes-dir/inside", "in\n");
  MustAgentenv(root, {"snap", "-m", "third"});
  return root;
}

// TreeManifest plus owner and ns mtime of every entry: the fields a
// node keeps, compared one by one.
inline Manifest FullManifest(const fs::path& root) {
  Manifest m = TreeManifest(root);
  for (auto& [rel, d] : m) {
    struct stat st;
    REQUIRE(::lstat((root / rel).c_str(), &st) == 0);
    d += " " + std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid) + " " + std::to_string(st.st_mtim.tv_sec) +
         "." + std::to_string(st.st_mtim.tv_nsec);
  }
  return m;
}

// The registry, and curl, which asks it whether it is up.
inline bool HaveRegistry() { return ::access(kRegistryBin, X_OK) == 0 && ::access("/usr/bin/curl", X_OK) == 0; }

// Skips, naming the package, when the program a test drives is missing
// (the fast tier does not install them: scripts/install-deps.sh --fast).
inline void NeedProgram(const std::string& path, const std::string& package) {
  if (::access(path.c_str(), X_OK) != 0) Skip(path + " is not installed (apt-get install " + package + ")");
}

}  // namespace agentenv::test

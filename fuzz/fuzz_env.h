// What the fuzz targets share: a scratch directory per process, files in
// and out, and (when fuzzing as root) a mount namespace in which only the
// scratch, corpus and artifact directories are writable, so that a decoder
// bug that writes or removes outside its destination cannot reach the host.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace agentenv::fuzz {

// A finding the sanitizers cannot see (a broken invariant): print and
// abort, which libFuzzer reports as a crash with its input.
[[noreturn]] inline void Die(const std::string& why) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", why.c_str());
  std::abort();
}
#define FUZZ_CHECK(cond, why) \
  do {                        \
    if (!(cond)) ::agentenv::fuzz::Die(std::string(#cond) + ": " + (why)); \
  } while (0)

inline std::string TempBase() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// This process's scratch directory (made on first use, removed at exit).
inline const std::string& WorkDir() {
  // Never destroyed: the exit handler that removes it runs after the
  // destructors of statics made before it.
  static const std::string* dir = [] {
    auto* d = new std::string(TempBase() + "/agentenv-fuzz-XXXXXX");
    if (!::mkdtemp(d->data())) Die("mkdtemp under " + TempBase());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(WorkDir(), ec);
    });
    return d;
  }();
  return *dir;
}

inline void WriteFile(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), std::streamsize(data.size()));
  if (!out.flush()) Die("cannot write " + path);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Removes `path` and everything below it (nothing when it is absent).
inline void RemoveTree(const std::string& path) {
  std::error_code ec;
  // A layer may leave 0000 directories: remove_all needs search access.
  for (auto it = std::filesystem::recursive_directory_iterator(
           path, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0755);
  }
  std::filesystem::remove_all(path, ec);
  if (ec && std::filesystem::exists(std::filesystem::symlink_status(path, ec))) Die("cannot remove " + path);
}

inline void MakeDir(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) Die("cannot create " + path);
}

// "mount point" and "options" fields of /proc/self/mountinfo, octal
// escapes (\040 for a space) resolved.
inline std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out.push_back(char((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

inline bool Below(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         (dir == "/" || path[dir.size()] == '/'));
}

// As root, in a mount namespace of this process: every mount read-only but
// the scratch base ($TMPDIR), the current directory and the directories
// among `args` (libFuzzer's corpus directories, -artifact_prefix=...).
// Unprivileged, or built for replay, nothing is done: the file system
// permissions are the bound there.
inline void ConfineWrites(int argc, char** argv) {
#ifdef AGENTENV_FUZZING
  if (::geteuid() != 0) return;
  std::vector<std::string> writable = {TempBase()};
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd)) writable.push_back(cwd);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("-artifact_prefix=", 0) == 0) a = a.substr(17);
    else if (a.rfind("-exact_artifact_path=", 0) == 0) a = a.substr(21);
    else if (!a.empty() && a[0] == '-') continue;
    std::error_code ec;
    std::filesystem::path p(a);
    if (!std::filesystem::is_directory(p, ec)) p = p.parent_path();
    if (p.empty()) continue;
    auto canon = std::filesystem::canonical(p, ec);
    if (!ec) writable.push_back(canon.string());
  }
  for (auto& w : writable) {
    std::error_code ec;
    auto canon = std::filesystem::canonical(w, ec);
    if (!ec) w = canon.string();
  }
  if (::unshare(CLONE_NEWNS) != 0) Die("unshare(CLONE_NEWNS) failed");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) Die("making / private failed");
  for (const auto& w : writable)
    if (::mount(w.c_str(), w.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) Die("bind-mounting " + w + " failed");
  std::ifstream info("/proc/self/mountinfo");
  for (std::string line; std::getline(info, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point, opts;
    f >> id >> parent >> dev >> root >> point >> opts;
    point = Unescape(point);
    bool keep = false;
    for (const auto& w : writable) keep |= Below(point, w);
    if (keep) continue;
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
    std::istringstream o(opts);
    for (std::string opt; std::getline(o, opt, ',');) {
      if (opt == "nosuid") flags |= MS_NOSUID;
      else if (opt == "nodev") flags |= MS_NODEV;
      else if (opt == "noexec") flags |= MS_NOEXEC;
      else if (opt == "noatime") flags |= MS_NOATIME;
      else if (opt == "nodiratime") flags |= MS_NODIRATIME;
      else if (opt == "relatime") flags |= MS_RELATIME;
    }
    // A mount point this namespace cannot remount (gone, or a lazy
    // automount) keeps its flags: only a failure on "/" is fatal.
    if (::mount(nullptr, point.c_str(), nullptr, flags, nullptr) != 0 && point == "/") Die("remounting / read-only failed");
  }
#else
  (void)argc, (void)argv;
#endif
}

}  // namespace agentenv::fuzz

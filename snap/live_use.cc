#include "snap/live_use.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <utility>

#include "common/read_all.h"
#include "common/unique_fd.h"

namespace agentenv::snap {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out.push_back(char(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

// From this process's mountinfo: a mount point at or below `dir` (as
// "a mount at <path>"), and the device of the filesystem holding `dir`
// (the longest mount point above it): what /proc/<pid>/maps shows for a
// file on it, whichever subvolume.
struct Mounts {
  std::optional<std::string> below;
  std::pair<unsigned long, unsigned long> fs_dev{~0ul, ~0ul};  // major, minor
};

// "major:minor" in base 10 (mountinfo) or 16 (maps).
std::pair<unsigned long, unsigned long> ParseDev(const std::string& s, int base) {
  size_t colon = s.find(':');
  if (colon == std::string::npos) return {~0ul, ~0ul};
  return {std::strtoul(s.substr(0, colon).c_str(), nullptr, base),
          std::strtoul(s.substr(colon + 1).c_str(), nullptr, base)};
}
Mounts ReadMounts(const std::string& dir) {
  Mounts m;
  size_t best = 0;
  auto text = ReadFileUpTo("/proc/self/mountinfo", 64 << 20);
  std::istringstream in(text ? *text : std::string());
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    if (!(fields >> id >> parent >> devno >> root >> point)) continue;
    std::string p = Unescape(point);
    if (Under(p, dir) && !m.below) m.below = "a mount at " + p;
    if ((p == "/" || Under(dir, p)) && p.size() >= best) {
      best = p.size();
      m.fs_dev = ParseDev(devno, 10);
    }
  }
  return m;
}

std::string Comm(const std::string& pid) {
  auto text = ReadFileUpTo("/proc/" + pid + "/comm", 64);
  std::istringstream in(text ? *text : std::string());
  std::string name;
  std::getline(in, name);
  return name;
}

enum class Use { kNo, kYes, kUnknown };

// Does the file /proc/<pid>/<what> names live on device `dev`? A process
// that exited meanwhile uses nothing.
Use On(int pid_fd, const char* what, dev_t dev) {
  struct stat st;
  if (::fstatat(pid_fd, what, &st, 0) == 0) return st.st_dev == dev ? Use::kYes : Use::kNo;
  if (errno == ENOENT || errno == ESRCH) return Use::kNo;
  return Use::kUnknown;
}

// Every entry of directory `sub` (fd or map_files) of a process. A kernel
// thread has none; an entry closed meanwhile is skipped.
Use AnyOn(int pid_fd, const char* sub, dev_t dev, std::string* which) {
  int fd = ::openat(pid_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? Use::kNo : Use::kUnknown;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return Use::kUnknown;
  }
  Use use = Use::kNo;
  while (struct dirent* de = ::readdir(d)) {
    if (de->d_name[0] == '.') continue;
    struct stat st;
    if (::fstatat(fd, de->d_name, &st, 0) != 0) {
      if (errno == ENOENT || errno == ESRCH) continue;
      use = Use::kUnknown;
      *which = std::string(sub) + "/" + de->d_name;
      break;
    }
    if (st.st_dev == dev) {
      use = Use::kYes;
      *which = std::string(sub) + "/" + de->d_name;
      break;
    }
  }
  ::closedir(d);
  return use;
}

// Mapped files of a process: /proc/<pid>/maps names each mapping's
// filesystem (not its subvolume), so only those on `fs_dev` are statted
// through map_files/<range>; a process maps hundreds of libraries.
Use MapsOn(int pid_fd, std::pair<unsigned long, unsigned long> fs_dev, dev_t dev, std::string* which) {
  int fd = ::openat(pid_fd, "maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH ? Use::kNo : Use::kUnknown;
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  int e = errno;
  ::close(fd);
  if (n < 0) return e == ESRCH ? Use::kNo : Use::kUnknown;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string range, perms, offset, devno, inode;
    if (!(f >> range >> perms >> offset >> devno >> inode) || inode == "0" || ParseDev(devno, 16) != fs_dev) continue;
    std::string entry = "map_files/" + range;
    Use u = On(pid_fd, entry.c_str(), dev);
    if (u != Use::kNo) {
      *which = entry;
      return u;
    }
  }
  return Use::kNo;
}

}  // namespace

Result<std::optional<std::string>> FindSubvolumeUser(const std::string& dir) {
  char* real = ::realpath(dir.c_str(), nullptr);
  if (!real) return FailErrno(dir, errno);
  std::string path = real;
  ::free(real);
  struct stat target;
  if (::stat(path.c_str(), &target) != 0) return FailErrno(path, errno);
  Mounts mounts = ReadMounts(path);
  if (mounts.below) return mounts.below;
  DIR* proc = ::opendir("/proc");
  if (!proc) return FailErrno("/proc", errno);
  std::optional<std::string> found;
  while (!found) {
    struct dirent* de = ::readdir(proc);
    if (!de) break;
    if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
    std::string pid = de->d_name;
    UniqueFd pfd(::openat(::dirfd(proc), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!pfd) continue;  // exited
    auto say = [&](Use u, const std::string& what) {
      if (u == Use::kNo || (u == Use::kUnknown && pid == "1")) return false;
      found = "pid " + pid + " (" + Comm(pid) + "): " + what + (u == Use::kUnknown ? " cannot be inspected" : "");
      return true;
    };
    if (say(On(pfd.get(), "cwd", target.st_dev), "cwd")) break;
    if (say(On(pfd.get(), "root", target.st_dev), "root")) break;
    std::string which = "fd";
    Use fds = AnyOn(pfd.get(), "fd", target.st_dev, &which);
    if (say(fds, which)) break;
    which = "maps";
    Use maps = MapsOn(pfd.get(), mounts.fs_dev, target.st_dev, &which);
    if (say(maps, which)) break;
  }
  ::closedir(proc);
  return found;
}

}  // namespace agentenv::snap

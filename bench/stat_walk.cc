// stat_walk: the floor of a no-daemon snapshot on a filesystem that cannot
// say what changed: list every directory and lstat every entry, nothing
// else (no xattrs, no symlink targets, no stat cache, no hashing). Walks
// the way agentenv's scan does: one directory per task, fds relative to
// the parent, deepest first, THREADS workers (default: one per core).
//
// Usage: stat_walk DIR [THREADS]   prints "entries dirs" on stdout.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace {

struct Walk {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> stack;  // open directory fds not yet listed
  int busy = 0;
  std::atomic<uint64_t> entries{0}, dirs{0};

  void Worker() {
    alignas(8) char buf[32768];
    for (;;) {
      int fd;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return !stack.empty() || busy == 0; });
        if (stack.empty()) return;
        fd = stack.back();
        stack.pop_back();
        ++busy;
      }
      std::vector<int> subdirs;
      for (;;) {
        long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        for (long off = 0; off < n;) {
          auto* de = reinterpret_cast<struct dirent64*>(buf + off);
          off += de->d_reclen;
          std::string_view name = de->d_name;
          if (name == "." || name == "..") continue;
          struct stat st;
          if (::fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
          entries.fetch_add(1, std::memory_order_relaxed);
          if (!S_ISDIR(st.st_mode)) continue;
          int sub = ::openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub >= 0) subdirs.push_back(sub);
        }
      }
      ::close(fd);
      dirs.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard lock(mu);
      --busy;
      stack.insert(stack.end(), subdirs.begin(), subdirs.end());
      cv.notify_all();
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: stat_walk DIR [THREADS]\n");
    return 2;
  }
  unsigned threads = argc == 3 ? unsigned(std::atoi(argv[2])) : std::thread::hardware_concurrency();
  if (threads == 0) threads = 1;
  int root = ::open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) {
    std::fprintf(stderr, "stat_walk: %s: %s\n", argv[1], std::strerror(errno));
    return 1;
  }
  Walk w;
  w.stack.push_back(root);
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < threads; ++i) pool.emplace_back([&] { w.Worker(); });
  for (auto& t : pool) t.join();
  std::printf("%llu %llu\n", (unsigned long long)w.entries.load(), (unsigned long long)w.dirs.load());
  return 0;
}

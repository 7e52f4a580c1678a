// Small helpers shared by the tests: temporary directories on real
// filesystems, deterministic random bytes, privilege checks, skipping.
#pragma once

#include <poll.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace agentenv::test {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir() : TempDir(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") {}
  // A new directory under `base`.
  explicit TempDir(const std::string& base) {
    std::string tmpl = base + "/agentenv-test-XXXXXX";
    char* p = mkdtemp(tmpl.data());
    if (!p) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    // Tests make 0000 directories; give permission back before removing.
    for (auto it = std::filesystem::recursive_directory_iterator(
             path_, std::filesystem::directory_options::skip_permission_denied, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0755);
    }
    ::chmod(path_.c_str(), 0755);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = rng();
    for (int k = 0; k < 8; ++k) v[i + k] = uint8_t(x >> (8 * k));
  }
  for (; i < n; ++i) v[i] = uint8_t(rng());
  return v;
}

inline std::string RandomString(size_t n, uint64_t seed) {
  auto v = RandomBytes(n, seed);
  return std::string(v.begin(), v.end());
}

inline bool IsRoot() { return ::geteuid() == 0; }

// Runs `body` in a forked child that may not raise a priority back: no
// CAP_SYS_NICE (uid 65534 when the test runs as root) and RLIMIT_NICE 0.
// Returns whether it ran and returned true.
inline bool WithoutNicePrivilege(const std::function<bool()>& body) {
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    struct rlimit none {};
    if (::setrlimit(RLIMIT_NICE, &none) != 0) ::_exit(2);
    if (IsRoot() && (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)) ::_exit(3);
    ::_exit(body() ? 0 : 1);
  }
  int status = 0;
  return ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// kSanitizerSlowdown: how many times slower than a plain build this one
// runs, for a test that aims a kill at a phase of the work by waiting:
// ThreadSanitizer's is about 10x on this code, AddressSanitizer's about 2x.
// kSanitizerMemory: how many times more memory a buffer costs a process of
// this build, for a test that bounds a peak RSS (ThreadSanitizer's shadow,
// AddressSanitizer's shadow, redzones and quarantine of freed blocks).
#if defined(__SANITIZE_THREAD__)
inline constexpr int kSanitizerSlowdown = 10;
inline constexpr int kSanitizerMemory = 4;
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr int kSanitizerSlowdown = 2;
inline constexpr int kSanitizerMemory = 3;
#else
inline constexpr int kSanitizerSlowdown = 1;
inline constexpr int kSanitizerMemory = 1;
#endif

// A btrfs filesystem on a loop device (image made with fallocate) mounted
// at <dir>/mnt; unmounted and detached on destruction (declare it after
// its TempDir). ok() is false where it cannot be made (not root, no loop
// devices, no mkfs.btrfs): callers Skip().
class BtrfsMount {
 public:
  explicit BtrfsMount(const std::string& dir) : mnt_(dir + "/mnt") {
    if (!IsRoot()) return;
    std::string img = dir + "/btrfs.img";
    ::mkdir(mnt_.c_str(), 0755);
    if (std::system(("fallocate -l 512M " + img + " && mkfs.btrfs -q -f " + img + " >/dev/null 2>&1").c_str()) != 0)
      return;
    dev_ = Output("losetup --find --show " + img + " 2>/dev/null");
    if (dev_.empty()) return;
    mounted_ = ::mount(dev_.c_str(), mnt_.c_str(), "btrfs", 0, nullptr) == 0;
  }
  ~BtrfsMount() {
    if (mounted_ && ::umount(mnt_.c_str()) != 0) ::umount2(mnt_.c_str(), MNT_DETACH);
    if (!dev_.empty()) std::system(("losetup -d " + dev_).c_str());
  }
  BtrfsMount(const BtrfsMount&) = delete;
  BtrfsMount& operator=(const BtrfsMount&) = delete;
  bool ok() const { return mounted_; }
  const std::string& dir() const { return mnt_; }

 private:
  static std::string Output(const std::string& cmd) {
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[256];
      while (fgets(buf, sizeof buf, p)) out += buf;
      ::pclose(p);
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  std::string mnt_, dev_;
  bool mounted_ = false;
};

// What Skip() throws; only the translator in catch_main.cc catches it.
// Not a std::exception, so `catch (const std::exception&)` lets it pass.
struct SkipTest {
  std::string why;
};

// Ends the current test case as skipped, so that ctest says "Skipped" where
// a `WARN; return;` would have counted as a pass. Catch2 v2 has no skip: the
// translator in catch_main.cc prints "SKIPPED: <why>" and exits the process
// with 77, which agentenv_test() (tests/CMakeLists.txt) declares as
// SKIP_RETURN_CODE. It throws rather than exiting here so that the test's
// locals (temp dirs, mounts, daemons) are destroyed first. Call it from the
// test case's own thread and outside assertion macros, which would catch it.
// The exit ends the whole executable: a run of all test cases in one
// process (not through ctest) stops at the first skip, with status 77.
[[noreturn]] inline void Skip(const std::string& why) { throw SkipTest{why}; }

// The one way a test polls: `pred` until it holds or `timeout_ms` passes;
// whether it held. Only for a state nothing announces (a file another
// process writes, a line in its log, a count in /proc): where an event
// exists (a child's exit: WaitChild; a reply; a pipe), wait on that. The
// pause between polls starts at 1 ms and doubles up to `max_pause_ms`, so
// a condition already met costs no wait and a long one few wake-ups
// (max_pause_ms 1: aiming a kill at a phase as it begins).
inline bool WaitFor(const std::function<bool()>& pred, int timeout_ms, int max_pause_ms = 20) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int pause_ms = 1;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pause_ms = std::min(pause_ms * 2, std::max(max_pause_ms, 1));
  }
}

// Waits up to `timeout_ms` (-1: no limit) for our child `pid` to end, on
// its pidfd (no polling), and reaps it: true with its wait status in
// *status; false when it still runs.
inline bool WaitChild(pid_t pid, int timeout_ms, int* status) {
  int st = 0;
  if (::waitpid(pid, &st, WNOHANG) == pid) {
    *status = st;
    return true;
  }
  int fd = int(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return false;
  pollfd p{fd, POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int left = -1;
    if (timeout_ms >= 0) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      left = int(std::max<int64_t>(ms.count(), 0));
    }
    if (::poll(&p, 1, left) >= 0 || errno != EINTR) break;
  }
  ::close(fd);
  if (::waitpid(pid, &st, WNOHANG) != pid) return false;
  *status = st;
  return true;
}

// Waits until the kernel's coarse clock, which stamps file times, has
// passed the present (one to two of its ticks: 1 to 20 ms), and returns
// its time then. Every file changed before the call has a ctime before
// it, and every file changed after has one at or after it. The coarse
// clock may lag the real time by up to a tick even right after it moved,
// and a change to a file whose time was read since its last change is
// stamped with the fine-grained time (multigrain timestamps, Linux 6.13):
// so the wait is for the coarse clock to pass the fine-grained now, not
// merely to move.
inline int64_t NextClockTick() {
  auto read = [](clockid_t c) {
    struct timespec ts;
    ::clock_gettime(c, &ts);
    return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  const int64_t changed_by = read(CLOCK_REALTIME);
  int64_t now = read(CLOCK_REALTIME_COARSE);
  while (now <= changed_by) {
    struct timespec nap = {0, 200'000};
    ::nanosleep(&nap, nullptr);
    now = read(CLOCK_REALTIME_COARSE);
  }
  return now;
}

// A wait status as a shell says it: the exit code, or 128 + the signal.
inline int ExitCode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace agentenv::test

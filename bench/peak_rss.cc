// peak_rss: runs a command and prints its peak memory, split the way the
// kernel splits it: anonymous (heap, stacks: what the process owns) and
// file-backed (mapped files such as LMDB's map: page cache, shared and
// dropped under pressure without I/O). getrusage's ru_maxrss is their sum at
// its highest; the parts are sampled from /proc/PID/status every 2 ms, so a
// spike shorter than that can be missed (ru_maxrss never misses).
//
//   peak_rss CMD [ARGS...]
//   -> "maxrss_kb=N anon_kb=N file_kb=N" on stderr; CMD's stdout and
//      stderr pass through; exit status of CMD.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// Reads "RssAnon:" and "RssFile:" + "RssShmem:" (a mapped file on tmpfs
// is shmem) in kB; false once the process is gone.
bool Sample(int status_fd, long* anon, long* file) {
  char buf[4096];
  ssize_t n = ::pread(status_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* a = std::strstr(buf, "RssAnon:");
  const char* f = std::strstr(buf, "RssFile:");
  const char* m = std::strstr(buf, "RssShmem:");
  if (!a || !f || !m) return false;  // a zombie has no memory lines
  *anon = std::strtol(a + 8, nullptr, 10);
  *file = std::strtol(f + 8, nullptr, 10) + std::strtol(m + 9, nullptr, 10);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: peak_rss CMD [ARGS...]\n");
    return 2;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("fork");
    return 1;
  }
  if (pid == 0) {
    ::execvp(argv[1], argv + 1);
    std::fprintf(stderr, "peak_rss: %s: %s\n", argv[1], std::strerror(errno));
    _exit(127);
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/status", int(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  long max_anon = 0, max_file = 0;
  int status = 0;
  struct rusage ru {};
  for (;;) {
    long anon, file;
    if (fd >= 0 && Sample(fd, &anon, &file)) {
      if (anon > max_anon) max_anon = anon;
      if (file > max_file) max_file = file;
    }
    pid_t r = ::wait4(pid, &status, WNOHANG, &ru);
    if (r == pid) break;
    if (r < 0) {
      std::perror("wait4");
      return 1;
    }
    struct timespec ts {0, 2000000};
    ::nanosleep(&ts, nullptr);
  }
  std::fprintf(stderr, "maxrss_kb=%ld anon_kb=%ld file_kb=%ld\n", ru.ru_maxrss, max_anon, max_file);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

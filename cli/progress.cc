#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace agentenv::cli {

using Clock = std::chrono::steady_clock;

ProgressLine::ProgressLine(const Globals& g) : on_(!g.json && !g.quiet && ::isatty(STDERR_FILENO)) {
  if (!on_) return;
  thread_ = std::thread([this] {
    MutexLock lock(mu_);
    const char* phase = nullptr;
    Clock::time_point phase_start = Clock::now();
    // Quick commands stay quiet: the first line after half a second.
    if (WaitForStop(lock, std::chrono::milliseconds(500))) return;
    do {
      const char* now = p_.phase.load(std::memory_order_acquire);
      if (now != phase) phase = now, phase_start = Clock::now();
      Draw(phase_start);
    } while (!WaitForStop(lock, std::chrono::milliseconds(200)));
  });
}

bool ProgressLine::WaitForStop(MutexLock& lock, std::chrono::milliseconds d) {
  const Clock::time_point until = Clock::now() + d;
  while (!stop_ && cv_.wait_until(lock, until) == std::cv_status::no_timeout) {
  }
  return stop_;
}

ProgressLine::~ProgressLine() {
  if (!on_) return;
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (drawn_) std::fputs("\r\033[K", stderr);
}

void ProgressLine::Draw(Clock::time_point phase_start) {
  const char* phase = p_.phase.load(std::memory_order_acquire);
  if (!*phase) return;
  uint64_t files = p_.files.load(std::memory_order_relaxed), bytes = p_.bytes.load(std::memory_order_relaxed);
  uint64_t total_files = p_.total_files.load(std::memory_order_relaxed);
  uint64_t total_bytes = p_.total_bytes.load(std::memory_order_relaxed);
  double secs = std::chrono::duration<double>(Clock::now() - phase_start).count();
  std::string line = std::string(phase) + ": " + std::to_string(files) +
                     (total_files ? " of " + std::to_string(total_files) : "") + " files, " + HumanBytes(bytes);
  if (secs >= 0.5) {
    double rate = double(bytes) / secs;
    line += " (" + HumanBytes(uint64_t(rate)) + "/s";
    if (total_bytes > bytes && rate > 0) {
      uint64_t eta = uint64_t(double(total_bytes - bytes) / rate);
      char buf[32];
      std::snprintf(buf, sizeof buf, ", ETA %llu:%02llu", (unsigned long long)(eta / 60), (unsigned long long)(eta % 60));
      line += buf;
    }
    line += ")";
  }
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace agentenv::cli

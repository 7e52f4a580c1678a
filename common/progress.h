// Progress: counters a long operation advances as it works, for another
// thread to show (a progress line on a terminal). Libraries never print:
// they only add to these. Relaxed atomics: a reader sees recent values,
// not a consistent snapshot, which is all a progress line needs.
#pragma once

#include <atomic>
#include <cstdint>

namespace agentenv {

struct Progress {
  // What is being done now ("scanning", "writing", ...): a string literal.
  std::atomic<const char*> phase{""};
  std::atomic<uint64_t> files{0}, bytes{0};              // done in this phase
  std::atomic<uint64_t> total_files{0}, total_bytes{0};  // 0: not known

  // Starts a phase: counters back to 0, totals as known (0: unknown).
  void Begin(const char* what, uint64_t files_total = 0, uint64_t bytes_total = 0) {
    files.store(0, std::memory_order_relaxed);
    bytes.store(0, std::memory_order_relaxed);
    total_files.store(files_total, std::memory_order_relaxed);
    total_bytes.store(bytes_total, std::memory_order_relaxed);
    phase.store(what, std::memory_order_release);
  }
  void Add(uint64_t n_files, uint64_t n_bytes) {
    files.fetch_add(n_files, std::memory_order_relaxed);
    bytes.fetch_add(n_bytes, std::memory_order_relaxed);
  }
};

// Advances `p` when there is one (operations run with or without).
inline void Advance(Progress* p, uint64_t n_files, uint64_t n_bytes) {
  if (p) p->Add(n_files, n_bytes);
}
inline void BeginPhase(Progress* p, const char* what, uint64_t files_total = 0, uint64_t bytes_total = 0) {
  if (p) p->Begin(what, files_total, bytes_total);
}

}  // namespace agentenv

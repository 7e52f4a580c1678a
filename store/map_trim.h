// MapTrimmer: keeps the pages of an LMDB map that this process has mapped
// (file-backed RSS) within a budget during long scans.
//
// LMDB reads through a read-only MAP_SHARED mapping of its data file. Every
// page a process touches stays mapped in it (and fault-around maps up to 16
// neighbours per fault), so a walk over a million-entry table leaves the
// whole table in the process's RSS although the pages are page cache that
// the kernel could drop. Trim() unmaps them from this process with
// MADV_DONTNEED; the page cache keeps the data, and the next access faults
// the page back in (from memory, or from disk if it was evicted meanwhile).
//
// Why this is safe for the environments it is used on (opened without
// MDB_WRITEMAP, so the map is PROT_READ and LMDB writes with pwrite, never
// through it): MADV_DONTNEED on a shared file mapping only drops page table
// entries, never data. A pointer into the map held by another thread (an
// MDB_val, a cursor's page stack) stays a valid address of the same
// mapping; its next dereference faults in the same file page. LMDB never
// rewrites a page a live read transaction can see, so the re-read page
// holds the same bytes. The caller must only guarantee that the map is not
// moved or unmapped during Trim() (mdb_env_set_mapsize): madvise on an
// address range reused by something else would discard that memory.
#pragma once

#include <lmdb.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace agentenv::store {

class MapTrimmer {
 public:
  // file_budget: the process's file-backed RSS above which Tick trims.
  // AGENTENV_MAP_BUDGET_MB, when set, replaces the default budget (a test
  // that compares the peak RSS of small and large histories sets it low,
  // so that both pass it and what it compares is what else grows).
  explicit MapTrimmer(MDB_env* env, uint64_t file_budget = kDefaultBudget);
  ~MapTrimmer();
  MapTrimmer(const MapTrimmer&) = delete;
  MapTrimmer& operator=(const MapTrimmer&) = delete;

  // Counts one read of the map; every kCheckEvery reads, trims when the
  // process's file-backed RSS (/proc/self/statm) exceeds the budget and
  // has grown by half a budget since the last trim left it, or exceeds
  // twice the budget (the last trim's level counts other maps too).
  // Thread-safe; same precondition as Trim. Costs an atomic increment
  // between checks.
  void Tick() { Tick(1); }
  // Counts `reads` reads at once (a reader that groups its ticks).
  void Tick(uint64_t reads) {
    uint64_t before = count_.fetch_add(reads, std::memory_order_relaxed);
    if (before / kCheckEvery != (before + reads) / kCheckEvery) Check();
  }
  // Drops this process's mappings of every page of the map (found by
  // reading /proc/self/maps). Thread-safe. Precondition: no
  // mdb_env_set_mapsize on the env meanwhile. Best effort: without /proc,
  // or if madvise fails, the pages stay mapped (no error).
  void Trim();

  // About 1/5 of the 256 MB a command may use at peak (fsck has two maps
  // busy at once, and each may grow by half a budget past the other's
  // pages); fault-around adds at most kCheckEvery * 64 KiB (8 MiB) before
  // the next check. 64 MB left fsck at 1M objects within 2 MB of 256.
  static constexpr uint64_t kDefaultBudget = uint64_t{48} << 20;
  static constexpr uint64_t kCheckEvery = 128;

 private:
  void Check();
  MDB_env* env_;
  std::string data_path_;  // the env's data file, as /proc/self/maps names it
  uint64_t budget_pages_;
  int statm_fd_ = -1;
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> after_trim_{0};  // file-backed pages resident right after the last trim
};

}  // namespace agentenv::store

// snap/bulk_io: the file creation of a restore in batches. Creating,
// writing, closing, renaming and stat-ing many small files costs five
// syscalls each. With AGENTENV_URING=on a batch of them is one io_uring
// submission per step; by default, and where io_uring is unavailable
// (io_uring_queue_init fails: EPERM under a seccomp filter or
// kernel.io_uring_disabled, ENOSYS on old kernels), the same steps run as
// plain syscalls, which measured faster (each of these operations is
// punted to an io-wq worker). Both give the same files.
//
// Safety is the caller's as with single files: every directory fd must have
// been reached from the tree root component by component with O_NOFOLLOW,
// names are single components, temp files are created with
// O_CREAT|O_EXCL|O_NOFOLLOW (and RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS through
// io_uring), so nothing is ever written outside the tree.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace agentenv::snap {

// One file to create as `tmp` in `dirfd`, later renamed to `name`; or,
// `in_place`, created as `name` itself (tmp == name) and never renamed: in
// a new directory nothing is there to replace, and nobody sees the file
// half-written.
struct NewFile {
  int dirfd = -1;
  std::string tmp, name;
  bool in_place = false;
  std::string rel;            // tree-relative path of `name`, for messages
  std::vector<uint8_t> data;  // written right after creation (may be empty)
  UniqueFd fd;                // open after Create, until Close
  bool created = false;       // `tmp` exists (the caller removes it on failure)
  struct stat st = {};        // after Rename: the file as it is at `name`
};

class BulkIo {
 public:
  // Never fails: without io_uring it uses plain syscalls. Batches smaller
  // than `min_ring_batch` use plain syscalls too: a submission that waits
  // for io-wq workers costs more than a few direct calls.
  explicit BulkIo(size_t min_ring_batch = 8);
  ~BulkIo();
  BulkIo(const BulkIo&) = delete;
  BulkIo& operator=(const BulkIo&) = delete;

  // True when batches go through io_uring.
  bool uring() const { return ring_ != nullptr; }
  // Creates each `tmp` (mode 0600) and writes its `data` from offset 0.
  // Errors: the first failure, rel + errno text.
  Result<void> CreateAndWrite(std::span<NewFile* const> files);
  // Closes every open fd. Errors: the first failing close.
  Result<void> Close(std::span<NewFile* const> files);
  // Renames each `tmp` to `name` (replacing it; not when `in_place`) and
  // fills `st`.
  Result<void> RenameAndStat(std::span<NewFile* const> files);

 private:
  struct Ring;
  // The ring, when it is worth using for n files.
  Ring* RingFor(size_t n) const { return n >= min_ring_batch_ ? ring_.get() : nullptr; }
  std::unique_ptr<Ring> ring_;
  size_t min_ring_batch_;
};

}  // namespace agentenv::snap

// The Store implementation shared by store.cc, batch.cc and file_io.cc.
#pragma once

#include "common/durable.h"
#include "common/mutex.h"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "store/fastcdc.h"
#include "store/index.h"
#include "store/inspect.h"
#include "store/manifest.h"
#include "store/store.h"
#include "store/worker_pool.h"

namespace agentenv::store {

// Tunables recorded in the index at creation (meta "params") so that a
// store keeps chunking the same way for its whole life.
struct StoreParams {
  ChunkerParams chunker;
  uint64_t small_file_max = 256 * 1024;  // files up to this size are one chunk
  int zstd_level = 1;
};

inline constexpr uint64_t kPackTarget = uint64_t{64} << 20;  // roll to a new pack past this
inline constexpr int kFormatVersion = 1;

class StoreImpl final : public Store {
 public:
  StoreImpl(std::string dir, std::unique_ptr<Index> index, StoreParams params);

  Result<bool> Has(const ObjectId& id) const override;
  Result<std::vector<ObjectId>> Missing(std::span<const ObjectId> ids) const override;
  Result<ObjectInfo> Stat(const ObjectId& id) const override;
  Result<std::vector<uint8_t>> Get(const ObjectId& id) const override;
  Result<void> ReadFile(const FileRef& f, const ByteSink& sink) const override;
  Result<void> WriteFileTo(const FileRef& f, int fd) const override;
  Result<bool> CloneFileTo(const FileRef& f, int fd) const override;
  Result<void> ForEach(
      const std::function<Result<void>(const ObjectId&, const ObjectInfo&)>& fn) const override;
  Result<StoreStats> Stats() const override;
  Result<uint64_t> Removals() const override { return index_->Removals(); }
  Result<std::unique_ptr<Batch>> BeginBatch() override;
  std::unique_ptr<Batch> HashingBatch() override;
  Result<CompactResult> Compact(const CompactOptions& opts,
                                const std::function<void(const CompactProgress&)>& progress) override;
  const std::string& dir() const override { return dir_; }

  Index& index() const { return *index_; }
  const StoreParams& params() const { return params_; }
  // Reads and verifies one object record. Errors: kCorrupt naming the
  // object, pack and offset; I/O.
  Result<std::vector<uint8_t>> ReadObject(const ObjectId& id, const ObjectInfo& info) const;
  // The read-only fd of a pack, opened once and cached. Holding the
  // pointer keeps the fd open even after the cache lets go of it (a cached
  // fd whose pack was deleted by compaction is dropped within a second, so
  // its disk space is freed). Errors: I/O (ENOENT when the pack is gone).
  Result<std::shared_ptr<const UniqueFd>> PackFd(uint32_t pack) const;
  // Forgets the cached fd of `pack` (it is being deleted).
  void ForgetPack(uint32_t pack) const;
  // Takes the writer lock (blocking) and cleans up after killed writers.
  Result<UniqueFd> LockWriters();
  // With the writer lock held: truncates pack tails past their committed
  // length and removes pack files the index does not know.
  Result<void> CleanUpAfterWriters();
  // With the writer lock held: the number for a new pack file. Numbers are
  // never reused (meta "next_pack"), so a location (pack, offset) always
  // names the same bytes, even in another process's cached fd.
  Result<uint32_t> NextPackNumber() const;
  WorkerPool& pool();

 private:
  // The chunks of f in order (one entry for a single-chunk file).
  Result<std::vector<ManifestEntry>> ChunksOf(const FileRef& f) const;

  std::string dir_;
  std::unique_ptr<Index> index_;
  StoreParams params_;
  mutable Mutex fds_mu_;
  mutable std::map<uint32_t, std::shared_ptr<const UniqueFd>> pack_fds_ GUARDED_BY(fds_mu_);
  mutable std::chrono::steady_clock::time_point fds_swept_ GUARDED_BY(fds_mu_);
  Mutex pool_mu_;
  std::unique_ptr<WorkerPool> pool_ GUARDED_BY(pool_mu_);
};

// pwrite of all n bytes at off (retrying short writes). Errors: path + errno.
Result<void> PwriteFull(int fd, const uint8_t* p, size_t n, uint64_t off, const std::string& path);

// Starts a batch owning the already-locked `lock_fd`.
Result<std::unique_ptr<Batch>> MakeBatch(StoreImpl& s, UniqueFd lock_fd);
std::unique_ptr<Batch> MakeHashingBatch(StoreImpl& s);


// Where a record goes when appended at `end`: headers 8-byte aligned, raw
// payloads of at least one block 4 KiB aligned (reflinkable). A smaller raw
// payload would share a whole block for less than a block of data, so it
// is copied on restore and packed tight. Returns the header offset.
inline uint64_t RecordSlot(uint64_t end, Codec codec, uint64_t stored_size) {
  if (codec == Codec::kRaw && stored_size >= kRawAlign) {
    return ((end + kRecordHeaderSize + kRawAlign - 1) & ~(kRawAlign - 1)) - kRecordHeaderSize;
  }
  return (end + 7) & ~uint64_t{7};
}

}  // namespace agentenv::store

// Store: opening, creating, lookups and object reads.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "store/codec.h"
#include "store/inspect.h"
#include "store/store_impl.h"

namespace agentenv::store {
namespace {

std::string EncodeParams(const StoreParams& p) {
  return std::to_string(p.chunker.min_size) + "," + std::to_string(p.chunker.avg_size) + "," +
         std::to_string(p.chunker.max_size) + "," + std::to_string(p.small_file_max) + "," +
         std::to_string(p.zstd_level);
}

Result<StoreParams> DecodeParams(const std::string& dir, const std::string& s) {
  StoreParams p;
  unsigned long long small = 0;
  if (std::sscanf(s.c_str(), "%u,%u,%u,%llu,%d", &p.chunker.min_size, &p.chunker.avg_size,
                  &p.chunker.max_size, &small, &p.zstd_level) != 5 ||
      p.chunker.avg_size == 0 || (p.chunker.avg_size & (p.chunker.avg_size - 1)) ||
      p.chunker.min_size >= p.chunker.max_size) {
    return Fail(ErrorCode::kCorrupt, dir + ": bad store parameters \"" + s + "\"");
  }
  p.small_file_max = small;
  return p;
}

Result<std::unique_ptr<Store>> Create(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno == EEXIST) return Fail(ErrorCode::kExists, dir + ": already exists");
    return FailErrno(dir, errno);
  }
  if (::mkdir((dir + "/packs").c_str(), 0755) != 0) return FailErrno(dir + "/packs", errno);
  AE_ASSIGN(auto index, Index::Open(dir + "/index", true));
  StoreParams params;
  Index::Update u;
  u.meta = {{"format", std::to_string(kFormatVersion)}, {"params", EncodeParams(params)}};
  AE_TRY(index->Apply(u));
  AE_TRY(FsyncDir(dir));
  return std::unique_ptr<Store>(new StoreImpl(dir, std::move(index), params));
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const std::string& dir, Mode mode) {
  if (mode == Mode::kCreate) return Create(dir);
  struct stat st;
  if (::stat((dir + "/index").c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return Fail(ErrorCode::kNotFound, dir + ": not a store (no index directory)");
    }
    return FailErrno(dir + "/index", errno);
  }
  AE_ASSIGN(auto index, Index::Open(dir + "/index", false));
  AE_ASSIGN(auto format, index->GetMeta("format"));
  if (!format) return Fail(ErrorCode::kCorrupt, dir + ": not a store (no format version)");
  if (*format != std::to_string(kFormatVersion)) {
    return Fail(ErrorCode::kUnsupported, dir + ": unsupported store format version " + *format);
  }
  AE_ASSIGN(auto pstr, index->GetMeta("params"));
  if (!pstr) return Fail(ErrorCode::kCorrupt, dir + ": store parameters missing");
  AE_ASSIGN(StoreParams params, DecodeParams(dir, *pstr));
  auto s = std::make_unique<StoreImpl>(dir, std::move(index), params);
  // Clean up after a killed writer now if no writer is active; otherwise
  // the next BeginBatch does it.
  std::string lock = dir + "/lock";
  UniqueFd lfd(::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lfd && ::flock(lfd.get(), LOCK_EX | LOCK_NB) == 0) AE_TRY(s->CleanUpAfterWriters());
  return std::unique_ptr<Store>(std::move(s));
}

StoreImpl::StoreImpl(std::string dir, std::unique_ptr<Index> index, StoreParams params)
    : dir_(std::move(dir)), index_(std::move(index)), params_(params) {}

Result<bool> StoreImpl::Has(const ObjectId& id) const {
  AE_ASSIGN(auto info, index_->Lookup(id));
  return info.has_value();
}

Result<std::vector<ObjectId>> StoreImpl::Missing(std::span<const ObjectId> ids) const {
  return index_->Missing(ids);
}

Result<ObjectInfo> StoreImpl::Stat(const ObjectId& id) const {
  AE_ASSIGN(auto info, index_->Lookup(id));
  if (!info) return Fail(ErrorCode::kNotFound, "object " + id.Hex() + ": not found");
  return *info;
}

Result<std::vector<uint8_t>> StoreImpl::Get(const ObjectId& id) const {
  AE_ASSIGN(ObjectInfo info, Stat(id));
  auto data = ReadObject(id, info);
  if (data || data.error().errno_value != ENOENT) return data;
  // Compaction moved the object and deleted its pack after our lookup:
  // the index has its new location.
  AE_ASSIGN(ObjectInfo moved, Stat(id));
  if (moved.pack == info.pack && moved.offset == info.offset) return data;
  return ReadObject(id, moved);
}

Result<std::shared_ptr<const UniqueFd>> StoreImpl::PackFd(uint32_t pack) const {
  MutexLock lock(fds_mu_);
  auto now = std::chrono::steady_clock::now();
  if (now - fds_swept_ > std::chrono::seconds(1)) {
    // Let go of packs deleted by a compaction (in any process) so that
    // their space is freed; users still holding one keep it open.
    fds_swept_ = now;
    for (auto it = pack_fds_.begin(); it != pack_fds_.end();) {
      struct stat st;
      if (::fstat(it->second->get(), &st) == 0 && st.st_nlink == 0) {
        it = pack_fds_.erase(it);
      } else {
        ++it;
      }
    }
  }
  auto it = pack_fds_.find(pack);
  if (it != pack_fds_.end()) return it->second;
  std::string path = PackPath(dir_, pack);
  auto fd = std::make_shared<const UniqueFd>(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!*fd) return FailErrno(path, errno);
  pack_fds_.emplace(pack, fd);
  return fd;
}

void StoreImpl::ForgetPack(uint32_t pack) const {
  MutexLock lock(fds_mu_);
  pack_fds_.erase(pack);
}

Result<uint32_t> StoreImpl::NextPackNumber() const {
  AE_ASSIGN(auto packs, index_->Packs());
  AE_ASSIGN(auto next, index_->GetMeta("next_pack"));
  uint32_t n = packs.empty() ? 1 : packs.rbegin()->first + 1;
  if (next) n = std::max<uint32_t>(n, uint32_t(std::strtoul(next->c_str(), nullptr, 10)));
  return n;
}

Result<std::vector<uint8_t>> StoreImpl::ReadObject(const ObjectId& id,
                                                   const ObjectInfo& info) const {
  std::string where = "object " + id.Hex() + " (" + PackPath(dir_, info.pack) + " offset " +
                      std::to_string(info.offset) + ")";
  AE_ASSIGN(auto pack_fd, PackFd(info.pack));
  int fd = pack_fd->get();
  std::vector<uint8_t> rec(kRecordHeaderSize + info.stored_size);
  size_t done = 0;
  while (done < rec.size()) {
    ssize_t r = ::pread(fd, rec.data() + done, rec.size() - done, info.offset + done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return FailErrno(where, errno);
    if (r == 0) return Fail(ErrorCode::kCorrupt, where + ": pack file too short");
    done += r;
  }
  auto h = ParseRecordHeader(std::span<const uint8_t, kRecordHeaderSize>(rec.data(), kRecordHeaderSize));
  if (!h) return Fail(ErrorCode::kCorrupt, where + ": " + h.error().message);
  if (h->id != id || h->codec != info.codec || h->size != info.size ||
      h->stored_size != info.stored_size) {
    return Fail(ErrorCode::kCorrupt, where + ": record header does not match the index");
  }
  auto data = Decode(info.codec, std::span(rec).subspan(kRecordHeaderSize), info.size);
  if (!data) return Fail(ErrorCode::kCorrupt, where + ": " + data.error().message);
  if (ObjectId::Of(*data) != id) {
    return Fail(ErrorCode::kCorrupt, where + ": content does not match its id");
  }
  return std::move(*data);
}

Result<void> StoreImpl::ForEach(
    const std::function<Result<void>(const ObjectId&, const ObjectInfo&)>& fn) const {
  return index_->ForEach(fn);
}

Result<StoreStats> StoreImpl::Stats() const {
  AE_ASSIGN(auto packs, index_->Packs());
  StoreStats s;
  for (const auto& [n, p] : packs) {
    s.objects += p.objects - p.dead_objects;
    s.logical_bytes += p.logical_bytes - p.dead_logical_bytes;
    s.stored_bytes += p.stored_bytes - p.dead_stored_bytes;
    struct stat st;
    std::string path = PackPath(dir_, n);
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;  // compacted since we read the table
      return FailErrno(path, errno);
    }
    s.pack_bytes += st.st_size;
    ++s.packs;
  }
  return s;
}

Result<void> StoreImpl::CleanUpAfterWriters() {
  AE_ASSIGN(auto packs, index_->Packs());
  AE_ASSIGN(auto files, ListPackFiles(dir_));
  bool removed = false;
  for (uint32_t n : files) {
    std::string path = PackPath(dir_, n);
    auto it = packs.find(n);
    if (it == packs.end()) {
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) return FailErrno(path, errno);
      removed = true;
      continue;
    }
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return FailErrno(path, errno);
    if (uint64_t(st.st_size) > it->second.committed &&
        ::truncate(path.c_str(), off_t(it->second.committed)) != 0) {
      return FailErrno(path, errno);
    }
  }
  if (removed) AE_TRY(FsyncDir(dir_ + "/packs"));
  return {};
}

WorkerPool& StoreImpl::pool() {
  MutexLock lock(pool_mu_);
  if (!pool_) pool_ = std::make_unique<WorkerPool>(std::max(1u, std::thread::hardware_concurrency()));
  return *pool_;
}

Result<UniqueFd> StoreImpl::LockWriters() {
  std::string path = dir_ + "/lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return FailErrno(path, errno);
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return FailErrno(path, errno);
  }
  AE_TRY(CleanUpAfterWriters());
  return fd;
}

Result<std::unique_ptr<Batch>> StoreImpl::BeginBatch() {
  AE_ASSIGN(UniqueFd fd, LockWriters());
  return MakeBatch(*this, std::move(fd));
}

Result<std::vector<PackInfo>> ListPacks(const Store& s) {
  AE_ASSIGN(auto packs, static_cast<const StoreImpl&>(s).index().Packs());
  std::vector<PackInfo> out;
  for (const auto& [n, p] : packs) out.push_back(p);
  return out;
}

Result<std::unique_ptr<IndexView>> OpenIndexView(const Store& s) {
  return static_cast<const StoreImpl&>(s).index().OpenView();
}

}  // namespace agentenv::store

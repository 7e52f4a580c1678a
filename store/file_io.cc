// Reading files back: streaming, sparse writes and reflink clones.
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "store/inspect.h"
#include "store/store_impl.h"

namespace agentenv::store {
namespace {

constexpr size_t kBlock = 4096;

Result<void> PwriteFull(int fd, const uint8_t* p, size_t n, uint64_t off) {
  while (n > 0) {
    ssize_t r = ::pwrite(fd, p, n, off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return FailErrno("write", errno);  // the caller names the file
    p += r;
    n -= r;
    off += r;
  }
  return {};
}

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

// Writes data at file offset `off`, skipping whole 4 KiB file blocks that
// are all zero (they stay holes).
Result<void> WriteSparse(int fd, std::span<const uint8_t> data, uint64_t off) {
  size_t i = 0;
  while (i < data.size()) {
    size_t block_end = std::min<size_t>(data.size(), i + (kBlock - (off + i) % kBlock));
    size_t n = block_end - i;
    if (n == kBlock && AllZero(data.data() + i, n)) {
      i = block_end;
      continue;
    }
    // Extend the run over following non-zero blocks to write in one call.
    size_t j = block_end;
    while (j < data.size()) {
      size_t e = std::min<size_t>(data.size(), j + kBlock);
      if (e - j == kBlock && AllZero(data.data() + j, kBlock)) break;
      j = e;
    }
    AE_TRY(PwriteFull(fd, data.data() + i, j - i, off + i));
    i = j;
  }
  return {};
}

}  // namespace

Result<std::vector<ManifestEntry>> StoreImpl::ChunksOf(const FileRef& f) const {
  if (f.type == ObjectType::kChunk) return std::vector<ManifestEntry>{{f.id, f.size}};
  if (f.type != ObjectType::kManifest) {
    return Fail(ErrorCode::kInvalid, "object " + f.id.Hex() + ": not a file (chunk or manifest)");
  }
  AE_ASSIGN(auto payload, Get(f.id));
  auto chunks = DecodeManifest(payload);
  if (!chunks) return Wrap("object " + f.id.Hex(), chunks.error());
  uint64_t total = 0;
  for (const auto& c : *chunks) total += c.size;
  if (total != f.size) {
    return Fail(ErrorCode::kCorrupt, "object " + f.id.Hex() + ": manifest describes " +
                                         std::to_string(total) + " bytes, file has " +
                                         std::to_string(f.size));
  }
  return chunks;
}

Result<void> StoreImpl::ReadFile(const FileRef& f, const ByteSink& sink) const {
  AE_ASSIGN(auto chunks, ChunksOf(f));
  for (const auto& c : chunks) {
    AE_ASSIGN(auto data, Get(c.id));
    if (data.size() != c.size) {
      return Fail(ErrorCode::kCorrupt, "object " + c.id.Hex() + ": has " +
                                           std::to_string(data.size()) + " bytes, expected " +
                                           std::to_string(c.size));
    }
    AE_TRY(sink(data));
  }
  return {};
}

Result<void> StoreImpl::WriteFileTo(const FileRef& f, int fd) const {
  if (::ftruncate(fd, 0) != 0) return FailErrno("truncate", errno);
  uint64_t off = 0;
  AE_TRY(ReadFile(f, [&](std::span<const uint8_t> data) -> Result<void> {
    AE_TRY(WriteSparse(fd, data, off));
    off += data.size();
    return {};
  }));
  if (::ftruncate(fd, off_t(f.size)) != 0) {
    return FailErrno("truncate", errno);
  }
  return {};
}

Result<bool> StoreImpl::CloneFileTo(const FileRef& f, int fd) const {
  AE_ASSIGN(auto chunks, ChunksOf(f));
  std::vector<ObjectInfo> infos;
  std::vector<std::shared_ptr<const UniqueFd>> fds;  // pinned: compaction may delete packs
  for (const auto& c : chunks) {
    AE_ASSIGN(ObjectInfo info, Stat(c.id));
    auto fd = PackFd(info.pack);
    if (!fd && fd.error().errno_value == ENOENT) {  // moved by a compaction meanwhile
      AE_ASSIGN(info, Stat(c.id));
      fd = PackFd(info.pack);
    }
    if (!fd) return Unexpected<Error>(fd.error());
    fds.push_back(*fd);
    if (info.codec != Codec::kRaw || info.size != c.size) return false;
    infos.push_back(info);
  }
  if (f.size == 0) return false;
  // FICLONERANGE needs block-aligned source and destination offsets; its
  // length may run past the chunk (the bytes after it are overwritten by
  // the next chunk or cut by the final truncate) or stop at the pack's EOF.
  // Chunks at unaligned file offsets are copied.
  uint64_t off = 0;
  bool wrote = false;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ObjectInfo& info = infos[i];
    uint64_t src = info.offset + kRecordHeaderSize;
    if (off % kBlock == 0 && src % kBlock == 0) {
      int pfd = fds[i]->get();
      struct stat st;
      if (::fstat(pfd, &st) != 0) return FailErrno(PackPath(dir_, info.pack), errno);
      uint64_t len = std::min<uint64_t>((info.size + kBlock - 1) & ~(kBlock - 1), st.st_size - src);
      file_clone_range r{pfd, src, len, off};
      if (::ioctl(fd, FICLONERANGE, &r) != 0) {
        int e = errno;
        if (!wrote && (e == EOPNOTSUPP || e == EXDEV || e == EINVAL || e == ENOTTY || e == EPERM)) {
          return false;
        }
        return FailErrno("clone from " + PackPath(dir_, info.pack), e);
      }
    } else {
      AE_ASSIGN(auto data, Get(chunks[i].id));
      AE_TRY(PwriteFull(fd, data.data(), data.size(), off));
    }
    wrote = true;
    off += info.size;
  }
  if (::ftruncate(fd, off_t(f.size)) != 0) {
    return FailErrno("truncate", errno);
  }
  return true;
}

}  // namespace agentenv::store

// Pack record headers and sequential pack scanning (see inspect.h).
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/unique_fd.h"
#include "store/inspect.h"
#include "store/le.h"

namespace agentenv::store {
namespace {

constexpr uint32_t kMagic = 0x424f4541;  // "AEOB" little-endian
constexpr uint8_t kVersion = 1;

uint32_t Fnv1a(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

}  // namespace

std::array<uint8_t, kRecordHeaderSize> EncodeRecordHeader(const RecordHeader& h) {
  std::array<uint8_t, kRecordHeaderSize> b{};
  Put32(&b[0], kMagic);
  b[4] = kVersion;
  b[5] = uint8_t(h.type);
  b[6] = uint8_t(h.codec);
  Put64(&b[8], h.size);
  Put64(&b[16], h.stored_size);
  std::memcpy(&b[24], h.id.bytes.data(), 32);
  Put32(&b[60], Fnv1a(b.data(), 60));
  return b;
}

Result<RecordHeader> ParseRecordHeader(std::span<const uint8_t, kRecordHeaderSize> b) {
  if (Get32(&b[0]) != kMagic) return Fail(ErrorCode::kCorrupt, "bad record magic");
  if (Get32(&b[60]) != Fnv1a(b.data(), 60)) return Fail(ErrorCode::kCorrupt, "bad header check");
  if (b[4] != kVersion) return Fail(ErrorCode::kCorrupt, "unknown record version");
  if (b[5] < 1 || b[5] > 4) return Fail(ErrorCode::kCorrupt, "unknown object type");
  if (b[6] > 1) return Fail(ErrorCode::kCorrupt, "unknown codec");
  RecordHeader h;
  h.type = ObjectType(b[5]);
  h.codec = Codec(b[6]);
  h.size = Get64(&b[8]);
  h.stored_size = Get64(&b[16]);
  std::memcpy(h.id.bytes.data(), &b[24], 32);
  if (h.codec == Codec::kRaw && h.size != h.stored_size) {
    return Fail(ErrorCode::kCorrupt, "raw record with stored size != size");
  }
  return h;
}

std::string PackPath(const std::string& store_dir, uint32_t pack) {
  char name[32];
  std::snprintf(name, sizeof name, "/packs/%08u.pack", pack);
  return store_dir + name;
}

Result<std::vector<uint32_t>> ListPackFiles(const std::string& store_dir) {
  std::string dir = store_dir + "/packs";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return FailErrno(dir, errno);
  std::vector<uint32_t> out;
  while (dirent* e = ::readdir(d)) {
    unsigned n = 0;
    char tail = 0;
    if (std::strlen(e->d_name) == 13 && std::sscanf(e->d_name, "%8u.pac%c", &n, &tail) == 2 &&
        tail == 'k') {
      out.push_back(n);
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

Result<size_t> PreadFull(int fd, uint8_t* buf, size_t n, uint64_t off) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, n - done, off + done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return FailErrno("pread", errno);
    }
    if (r == 0) break;
    done += r;
  }
  return done;
}

// A read-ahead window over a file: sequential scans cost one large pread
// per window instead of one per record.
class Window {
 public:
  Window(int fd, size_t size) : fd_(fd), size_(size) {}
  // Bytes [off, off+n) (fewer at EOF), valid until the next call.
  Result<std::span<const uint8_t>> Get(uint64_t off, size_t n) {
    if (off < start_ || off + n > start_ + len_) {
      buf_.resize(std::max(size_, n));
      AE_ASSIGN(len_, PreadFull(fd_, buf_.data(), buf_.size(), off));
      start_ = off;
    }
    size_t have = std::min<uint64_t>(n, start_ + len_ - std::min(off, start_ + len_));
    return std::span<const uint8_t>(buf_.data() + (off - start_), have);
  }

 private:
  int fd_;
  size_t size_;
  std::vector<uint8_t> buf_;
  uint64_t start_ = 0;
  size_t len_ = 0;
};

}  // namespace

namespace {

// Bytes of a mapped pack, with Window's interface. Page tables are filled
// ahead of the scan 8 MiB at a time (MADV_POPULATE_READ): one call instead
// of a page fault per 64 KiB was 8% less fsck CPU, and populating a window
// at a time, not the whole pack at mmap, lets reading overlap hashing when
// the pack is not cached. Kernels without it (< 5.14) fault as usual.
//
// Pages more than `keep_behind` bytes behind the scan are unmapped from
// this process (MADV_DONTNEED) as it moves on: a 64 MiB pack fully mapped
// was 64 MiB of RSS, two of them (one still being hashed, the next being
// scanned) most of fsck's peak at 1M objects. It is only page tables: the
// data stays in page cache, and a reader that still uses a dropped page
// (a payload span handed to another thread) faults it back in, same bytes.
class Mapped {
 public:
  Mapped(std::span<const uint8_t> b, uint64_t keep_behind) : b_(b), keep_behind_(keep_behind) {}
  Result<std::span<const uint8_t>> Get(uint64_t off, size_t n) {
    if (off >= b_.size()) return std::span<const uint8_t>();
    n = std::min<uint64_t>(n, b_.size() - off);
    while (populated_ < off + n) {
      size_t len = std::min<uint64_t>(kAhead, b_.size() - populated_);
      ::madvise(const_cast<uint8_t*>(b_.data()) + populated_, len, MADV_POPULATE_READ);
      populated_ += len;
    }
    // The mapping starts page-aligned, so offsets rounded to kAhead are too.
    uint64_t done = off > keep_behind_ ? (off - keep_behind_) / kAhead * kAhead : 0;
    if (done > dropped_) {
      ::madvise(const_cast<uint8_t*>(b_.data()) + dropped_, done - dropped_, MADV_DONTNEED);
      dropped_ = done;
    }
    return b_.subspan(off, n);
  }

 private:
  static constexpr uint64_t kAhead = 8 << 20;  // a multiple of the page size
  std::span<const uint8_t> b_;
  uint64_t keep_behind_;
  uint64_t populated_ = 0;
  uint64_t dropped_ = 0;  // [0, dropped_) unmapped from this process
};

// The record walk shared by the read and the mapped scans.
template <typename Source>
Result<void> ScanRecords(Source& src, uint64_t limit,
                         const std::function<Result<void>(const ScannedRecord&)>& on_record,
                         const std::function<Result<void>(uint64_t, const std::string&)>& on_damage,
                         bool payloads) {
  uint64_t off = 0;
  bool in_damage = false;  // report one damaged stretch once, not per word
  while (off + 8 <= limit) {
    size_t want = std::min<uint64_t>(kRecordHeaderSize, limit - off);
    AE_ASSIGN(auto hb, src.Get(off, want));
    if (hb.size() < 8) break;
    if (Get64(hb.data()) == 0) {  // padding between records
      off += 8;
      continue;
    }
    Result<RecordHeader> h = Fail(ErrorCode::kCorrupt, "truncated record header");
    if (hb.size() == kRecordHeaderSize) {
      h = ParseRecordHeader(std::span<const uint8_t, kRecordHeaderSize>(hb.data(), kRecordHeaderSize));
    }
    if (h && off + kRecordHeaderSize + h->stored_size > limit) {
      h = Fail(ErrorCode::kCorrupt, "record runs past the committed length");
    }
    if (!h) {
      if (!in_damage) AE_TRY(on_damage(off, h.error().message));
      in_damage = true;
      off += 8;
      continue;
    }
    in_damage = false;
    std::span<const uint8_t> payload;
    if (payloads) {
      AE_ASSIGN(payload, src.Get(off + kRecordHeaderSize, h->stored_size));
      if (payload.size() != h->stored_size) {
        AE_TRY(on_damage(off, "short read of record payload"));
        break;
      }
    }
    AE_TRY(on_record(ScannedRecord{off, *h, payload}));
    off = (off + kRecordHeaderSize + h->stored_size + 7) & ~uint64_t{7};
  }
  return {};
}

// A file shorter than its committed length is damage; returns the length
// that can be scanned.
Result<uint64_t> ScannableLength(uint64_t file_size, uint64_t limit,
                                 const std::function<Result<void>(uint64_t, const std::string&)>& on_damage) {
  if (file_size >= limit) return limit;
  AE_TRY(on_damage(file_size, "pack file is shorter than its committed length " + std::to_string(limit)));
  return file_size;
}

}  // namespace

Result<std::shared_ptr<const PackMapping>> PackMapping::Map(int fd, uint64_t length) {
  if (length == 0) return std::shared_ptr<const PackMapping>(new PackMapping(nullptr, 0));
  void* p = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return FailErrno("mmap", errno);
  // One pass front to back: read ahead aggressively, start reading now.
  ::madvise(p, length, MADV_SEQUENTIAL);
  ::madvise(p, length, MADV_WILLNEED);
  return std::shared_ptr<const PackMapping>(new PackMapping(static_cast<const uint8_t*>(p), length));
}

PackMapping::~PackMapping() {
  if (size_ != 0) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Result<void> ScanPackMapping(const PackMapping& m, uint64_t limit, uint64_t keep_behind,
                             const std::function<Result<void>(const ScannedRecord&)>& on_record,
                             const std::function<Result<void>(uint64_t, const std::string&)>& on_damage) {
  AE_ASSIGN(limit, ScannableLength(m.bytes().size(), limit, on_damage));
  Mapped src(m.bytes(), keep_behind);
  return ScanRecords(src, limit, on_record, on_damage, true);
}

Result<void> ScanPack(int fd, uint64_t limit,
                      const std::function<Result<void>(const ScannedRecord&)>& on_record,
                      const std::function<Result<void>(uint64_t, const std::string&)>& on_damage,
                      bool payloads) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return FailErrno("fstat", errno);
  AE_ASSIGN(limit, ScannableLength(uint64_t(st.st_size), limit, on_damage));
  // Header-only scans read small windows so that payloads are skipped; no
  // window is larger than what is scanned (a buffer is zero-filled whole).
  Window win(fd, size_t(std::min<uint64_t>(payloads ? size_t{8} << 20 : size_t{64} << 10, limit)));
  return ScanRecords(win, limit, on_record, on_damage, payloads);
}

}  // namespace agentenv::store

#include "snap/bulk_io.h"

#include <fcntl.h>
#include <liburing.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>

namespace agentenv::snap {
namespace {

constexpr unsigned kRingDepth = 128;
constexpr int kCreateFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;

// Writes the rest of `f.data` from `done` on with plain pwrite.
Result<void> WriteRest(NewFile& f, size_t done) {
  while (done < f.data.size()) {
    ssize_t n = ::pwrite(f.fd.get(), f.data.data() + done, f.data.size() - done, off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno(f.rel, errno);
    if (n == 0) return FailErrno(f.rel, EIO);
    done += size_t(n);
  }
  return {};
}

void StatxToStat(const struct statx& x, struct stat* st) {
  *st = {};
  st->st_dev = makedev(x.stx_dev_major, x.stx_dev_minor);
  st->st_ino = x.stx_ino;
  st->st_mode = x.stx_mode;
  st->st_nlink = x.stx_nlink;
  st->st_uid = x.stx_uid;
  st->st_gid = x.stx_gid;
  st->st_size = off_t(x.stx_size);
  st->st_mtim = {x.stx_mtime.tv_sec, long(x.stx_mtime.tv_nsec)};
  st->st_ctim = {x.stx_ctime.tv_sec, long(x.stx_ctime.tv_nsec)};
  st->st_atim = {x.stx_atime.tv_sec, long(x.stx_atime.tv_nsec)};
}

// An opcode this kernel's io_uring lacks: do that step with a syscall.
bool Unsupported(int res) { return res == -EINVAL || res == -EOPNOTSUPP; }

}  // namespace

struct BulkIo::Ring {
  struct io_uring ring;
  // Queues prep(sqe, i) for every i, submits, and calls done(i, res) per
  // completion, up to kRingDepth at a time.
  Result<void> Run(size_t n, const std::function<void(io_uring_sqe*, size_t)>& prep,
                   const std::function<Result<void>(size_t, int)>& done) {
    for (size_t base = 0; base < n; base += kRingDepth) {
      size_t count = std::min<size_t>(kRingDepth, n - base);
      for (size_t k = 0; k < count; ++k) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        prep(sqe, base + k);
        io_uring_sqe_set_data64(sqe, base + k);
      }
      size_t seen = 0;
      int submitted = io_uring_submit_and_wait(&ring, unsigned(count));
      if (submitted < 0) return Fail("io_uring_submit: " + std::string(std::strerror(-submitted)), -submitted);
      Result<void> first;
      // Every submitted operation is reaped before returning, even after a
      // failure (the caller then cleans up by what each one reported).
      while (seen < size_t(submitted)) {
        io_uring_cqe* cqe = nullptr;
        int rc = io_uring_wait_cqe(&ring, &cqe);
        if (rc == -EINTR) continue;
        if (rc < 0) return Fail("io_uring_wait_cqe: " + std::string(std::strerror(-rc)), -rc);
        size_t i = size_t(io_uring_cqe_get_data64(cqe));
        int res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        ++seen;
        Result<void> r = done(i, res);
        if (!r && first) first = r;
      }
      AE_TRY(first);
      if (size_t(submitted) < count)
        return Fail("io_uring_submit: " + std::to_string(submitted) + " of " + std::to_string(count) + " submitted", EAGAIN);
    }
    return {};
  }
};

BulkIo::BulkIo(size_t min_ring_batch) : min_ring_batch_(min_ring_batch) {
  // Plain syscalls unless asked for: every step here (openat, write of a
  // small file, close, renameat, statx) is punted to an io-wq worker, and
  // those hand-offs cost more than the syscalls they batch (measured on
  // Linux 6.18, 2 cores: init and a bulk restore 5-18% slower through
  // io_uring on ext4, XFS and btrfs; bench/RESULTS.md).
  const char* env = std::getenv("AGENTENV_URING");
  if (!env || std::string(env) != "on") return;
  auto r = std::make_unique<Ring>();
  if (io_uring_queue_init(kRingDepth, &r->ring, 0) == 0) ring_ = std::move(r);
}

BulkIo::~BulkIo() {
  if (ring_) io_uring_queue_exit(&ring_->ring);
}

Result<void> BulkIo::CreateAndWrite(std::span<NewFile* const> files) {
  auto create_sync = [](NewFile& f) -> Result<void> {
    f.fd.reset(::openat(f.dirfd, f.tmp.c_str(), kCreateFlags, 0600));
    if (!f.fd) return FailErrno(f.rel, errno);
    f.created = true;
    return {};
  };
  Ring* ring = RingFor(files.size());
  if (!ring) {
    for (NewFile* f : files) {
      AE_TRY(create_sync(*f));
      AE_TRY(WriteRest(*f, 0));
    }
    return {};
  }
  struct open_how how = {};
  how.flags = kCreateFlags;
  how.mode = 0600;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
  AE_TRY(ring->Run(
      files.size(),
      [&](io_uring_sqe* sqe, size_t i) { io_uring_prep_openat2(sqe, files[i]->dirfd, files[i]->tmp.c_str(), &how); },
      [&](size_t i, int res) -> Result<void> {
        NewFile& f = *files[i];
        if (Unsupported(res)) return create_sync(f);
        if (res < 0) return FailErrno(f.rel, -res);
        f.fd.reset(res);
        f.created = true;
        return {};
      }));
  std::vector<NewFile*> writes;
  for (NewFile* f : files)
    if (!f->data.empty()) writes.push_back(f);
  return ring->Run(
      writes.size(),
      [&](io_uring_sqe* sqe, size_t i) {
        io_uring_prep_write(sqe, writes[i]->fd.get(), writes[i]->data.data(), unsigned(writes[i]->data.size()), 0);
      },
      [&](size_t i, int res) -> Result<void> {
        NewFile& f = *writes[i];
        if (Unsupported(res)) return WriteRest(f, 0);
        if (res < 0) return FailErrno(f.rel, -res);
        return WriteRest(f, size_t(res));  // short write: finish it plainly
      });
}

Result<void> BulkIo::Close(std::span<NewFile* const> files) {
  std::vector<NewFile*> open;
  for (NewFile* f : files)
    if (f->fd) open.push_back(f);
  Ring* ring = RingFor(open.size());
  if (!ring) {
    for (NewFile* f : open)
      if (::close(f->fd.release()) != 0) return FailErrno(f->rel, errno);
    return {};
  }
  return ring->Run(
      open.size(), [&](io_uring_sqe* sqe, size_t i) { io_uring_prep_close(sqe, open[i]->fd.release()); },
      [&](size_t i, int res) -> Result<void> {
        if (res < 0) return FailErrno(open[i]->rel, -res);
        return {};
      });
}

Result<void> BulkIo::RenameAndStat(std::span<NewFile* const> files) {
  auto rename_sync = [](NewFile& f) -> Result<void> {
    if (::renameat(f.dirfd, f.tmp.c_str(), f.dirfd, f.name.c_str()) != 0) return FailErrno(f.rel, errno);
    f.created = false;
    return {};
  };
  auto stat_sync = [](NewFile& f) -> Result<void> {
    if (::fstatat(f.dirfd, f.name.c_str(), &f.st, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(f.rel, errno);
    return {};
  };
  Ring* ring = RingFor(files.size());
  if (!ring) {
    for (NewFile* f : files) {
      if (!f->in_place) AE_TRY(rename_sync(*f));
      AE_TRY(stat_sync(*f));
    }
    return {};
  }
  std::vector<NewFile*> moved;
  for (NewFile* f : files)
    if (!f->in_place) moved.push_back(f);
  AE_TRY(ring->Run(
      moved.size(),
      [&](io_uring_sqe* sqe, size_t i) {
        io_uring_prep_renameat(sqe, moved[i]->dirfd, moved[i]->tmp.c_str(), moved[i]->dirfd, moved[i]->name.c_str(), 0);
      },
      [&](size_t i, int res) -> Result<void> {
        NewFile& f = *moved[i];
        if (Unsupported(res)) return rename_sync(f);
        if (res < 0) return FailErrno(f.rel, -res);
        f.created = false;
        return {};
      }));
  std::vector<struct statx> sx(files.size());
  return ring->Run(
      files.size(),
      [&](io_uring_sqe* sqe, size_t i) {
        io_uring_prep_statx(sqe, files[i]->dirfd, files[i]->name.c_str(), AT_SYMLINK_NOFOLLOW,
                            STATX_BASIC_STATS, &sx[i]);
      },
      [&](size_t i, int res) -> Result<void> {
        NewFile& f = *files[i];
        if (Unsupported(res)) return stat_sync(f);
        if (res < 0) return FailErrno(f.rel, -res);
        StatxToStat(sx[i], &f.st);
        return {};
      });
}

}  // namespace agentenv::snap

// WriteAll: every byte of a buffer to a file, or the errno that says why
// not.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string_view>

#include "common/result.h"

namespace agentenv {

// Writes all `n` bytes at `p` to `fd`, retrying EINTR and short writes.
// A short write is how write(2) reports a filesystem that filled up in
// the middle of the buffer: errno is then untouched (often 0, "Success"),
// and only the next write fails with the real cause (ENOSPC, EDQUOT, EIO),
// so `write(...) != n` must never be turned into an error by itself.
// Errors: "<path>: <strerror>" with errno_value set. Thread-safe.
inline Result<void> WriteAll(int fd, const void* p, size_t n, std::string_view path) {
  const char* at = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, at, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return FailErrno(path, errno);
    if (w == 0) return FailErrno(path, EIO);  // no progress and no error: never loop on it
    at += w;
    n -= size_t(w);
  }
  return {};
}

// WriteAll at file offset `off` (pwrite): the file offset is not moved.
inline Result<void> PwriteAll(int fd, const void* p, size_t n, off_t off, std::string_view path) {
  const char* at = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, at, n, off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return FailErrno(path, errno);
    if (w == 0) return FailErrno(path, EIO);
    at += w;
    n -= size_t(w);
    off += w;
  }
  return {};
}

}  // namespace agentenv

// Helpers for the store and fsck tests.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "fsck/fsck.h"
#include "store/store.h"

namespace agentenv::test {

inline void WriteFile(const std::string& path, std::span<const uint8_t> data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  REQUIRE(fd);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t r = ::write(fd.get(), data.data() + done, data.size() - done);
    REQUIRE(r > 0);
    done += r;
  }
}

inline std::unique_ptr<store::Store> OpenStore(const std::string& dir, store::Store::Mode m) {
  auto s = store::Store::Open(dir, m);
  INFO((s ? "" : s.error().message));
  REQUIRE(s);
  return std::move(*s);
}

inline store::FileRef PutPath(store::Batch& b, const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  auto r = b.PutFile(fd.get(), path);
  INFO((r ? "" : r.error().message));
  REQUIRE(r);
  return *r;
}

inline std::vector<uint8_t> ReadBack(const store::Store& s, const store::FileRef& f) {
  std::vector<uint8_t> out;
  auto r = s.ReadFile(f, [&](std::span<const uint8_t> d) -> Result<void> {
    out.insert(out.end(), d.begin(), d.end());
    return {};
  });
  INFO((r ? "" : r.error().message));
  REQUIRE(r);
  return out;
}

inline void CommitOk(store::Batch& b) {
  auto r = b.Commit();
  INFO((r ? "" : r.error().message));
  REQUIRE(r);
}

// Runs fsck and returns its findings (messages).
inline std::vector<fsck::FsckFinding> Fsck(const store::Store& s, fsck::FsckReport* report = nullptr,
                                           const fsck::FsckOptions& opts = {}) {
  std::vector<fsck::FsckFinding> findings;
  fsck::FsckCallbacks cb;
  cb.finding = [&](const fsck::FsckFinding& f) { findings.push_back(f); };
  auto r = fsck::CheckStore(s, opts, cb);
  INFO((r ? "" : r.error().message));
  REQUIRE(r);
  if (report) *report = *r;
  return findings;
}

// Flips the bits `mask` of the byte `rel` bytes into object `id`'s record
// (header first) in its pack file: damage for fsck to find.
inline void PokeRecord(const store::Store& s, const store::ObjectId& id, uint64_t rel, uint8_t mask) {
  auto info = *s.Stat(id);
  UniqueFd fd(::open(store::PackPath(s.dir(), info.pack).c_str(), O_RDWR | O_CLOEXEC));
  REQUIRE(fd);
  uint8_t c;
  REQUIRE(::pread(fd.get(), &c, 1, info.offset + rel) == 1);
  c ^= mask;
  REQUIRE(::pwrite(fd.get(), &c, 1, info.offset + rel) == 1);
}

inline uint64_t StoredBytes(const store::Store& s) {
  auto st = s.Stats();
  REQUIRE(st);
  return st->stored_bytes;
}

}  // namespace agentenv::test

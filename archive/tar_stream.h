// Tar archives in and out through libarchive with pax times as POSIX
// means them (archive/pax_time.h): the uncompressed tar stream passes
// through a TarFilter between libarchive's tar format and the
// (de)compression. Its times are converted when the loaded libarchive
// needs it; whether it does is probed once per process (a pax header
// written to and read from memory), so a libarchive that gets negative
// times right gets them untouched. An archive read is checked on the way
// in (TarFilterOptions::check) before libarchive reads its headers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "common/result.h"
#include "archive/tar_filter.h"

struct archive;

namespace agentenv::archive {

struct ArchiveLib;

// Receives the bytes of an archive as they are written.
using TarSink = std::function<Result<void>(std::span<const uint8_t>)>;

// A tar archive read from a file.
class TarReader {
 public:
  // Opens `path`: tar, plain or gzip/xz/zstd (no other format: with all of
  // libarchive's formats any text file reads as an mtree manifest).
  // Errors: kInvalid "<path>: <why> (a tar archive, plain or
  // .gz/.xz/.zst, is expected)". An archive the check of its headers
  // refuses (TarFilterOptions::check) fails the read that meets it, with
  // "<why>; refusing the archive" as the reader's error (kInvalid to the
  // caller, as any unreadable header).
  static Result<std::unique_ptr<TarReader>> Open(const ArchiveLib& A, const std::string& path);
  // The same, reading the open file `fd` from its current offset (not
  // closed; it must stay open while this reads); `path` names it.
  static Result<std::unique_ptr<TarReader>> Open(const ArchiveLib& A, int fd, const std::string& path);
  ~TarReader();
  TarReader(const TarReader&) = delete;
  TarReader& operator=(const TarReader&) = delete;
  // The tar reader (archive_read_next_header, archive_read_data_block);
  // a failure to read or decompress the file is its error.
  ::archive* get() const { return tar_; }

 private:
  explicit TarReader(const ArchiveLib& A) : A(A) {}
  static Result<std::unique_ptr<TarReader>> Open(const ArchiveLib& A, int fd, const std::string& path,
                                                 bool by_name);
  static long Read(::archive*, void* self, const void** buf);

  const ArchiveLib& A;
  ::archive* file_ = nullptr;  // the file decompressed, as one raw entry
  ::archive* tar_ = nullptr;
  std::optional<TarFilter> filter_;  // set by Open
  std::string buf_;
  bool eof_ = false;
};

// A pax tar writer: full pax (every entry carries its ns mtime), xattrs
// once as SCHILY.xattr (what GNU tar reads), the last block not padded, a
// name that is not UTF-8 in the ustar fields alone where they hold it
// (TarFilterOptions::ustar_names).
class TarOutput {
 public:
  // Writes to `sink`, or else to the file `out` ("-": stdout), gzip
  // (without timestamp) for .gz/.tgz, zstd for .zst. Errors: kIo
  // "<out>: <why>".
  static Result<std::unique_ptr<TarOutput>> Open(const ArchiveLib& A, const std::string& out, const TarSink* sink);
  ~TarOutput();
  TarOutput(const TarOutput&) = delete;
  TarOutput& operator=(const TarOutput&) = delete;
  // The writer, for archive_write_header and archive_write_data.
  ::archive* get() const { return tar_; }
  // The first failure of the sink or the file: what a failed write of
  // get() comes from, when set.
  const std::optional<Error>& error() const { return error_; }
  // Ends the archive. Errors: error(), else "<out>: <why>".
  Result<void> Close();

 private:
  explicit TarOutput(const ArchiveLib& A) : A(A) {}
  static long Write(::archive*, void* self, const void* buf, size_t len);
  Result<void> Deliver(std::span<const uint8_t> bytes);

  const ArchiveLib& A;
  std::string out_;
  const TarSink* sink_ = nullptr;
  ::archive* file_ = nullptr;  // raw format: the tar stream, compressed by suffix
  ::archive* tar_ = nullptr;
  std::optional<TarFilter> filter_;  // set by Open
  std::string buf_;
  std::optional<Error> error_;
};

}  // namespace agentenv::archive

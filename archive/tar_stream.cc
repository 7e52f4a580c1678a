#include "archive/tar_stream.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <type_traits>

#include "archive/libarchive.h"

namespace agentenv::archive {
namespace {

static_assert(std::is_same_v<la_ssize_t, long>, "tar_stream.h declares its callbacks with long");

std::string Message(const ArchiveLib& A, ::archive* a) {
  const char* m = A.archive_error_string(a);
  return m ? m : "unknown error";
}

// libarchive's message ("Write error") with the errno's text after it: a
// full disk must say so.
Error IoError(const ArchiveLib& A, const std::string& out, ::archive* a) {
  int err = std::max(A.archive_errno(a), 0);
  std::string why = Message(A, a);
  if (err > 0) why += std::string(": ") + std::strerror(err);
  return Error{out + ": " + why, err, ErrorCode::kIo};
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

la_ssize_t AppendTo(::archive*, void* data, const void* buf, size_t len) {
  static_cast<std::string*>(data)->append(static_cast<const char*>(buf), len);
  return la_ssize_t(len);
}

struct Fixes {
  bool write = false, read = false;
};

// Whether the loaded libarchive writes and reads -1.000000001 s as
// "-2.999999999" (archive/pax_time.h): one entry through its pax writer
// into memory, then the POSIX form of it through its reader.
Fixes Probe(const ArchiveLib& A) {
  Fixes f;
  std::string bytes;
  ::archive* w = A.archive_write_new();
  A.archive_write_set_format_pax(w);
  archive_entry* e = A.archive_entry_new();
  A.archive_entry_set_pathname(e, "probe");
  A.archive_entry_set_filetype(e, AE_IFREG);
  A.archive_entry_set_perm(e, 0644);
  A.archive_entry_set_size(e, 0);
  A.archive_entry_set_mtime(e, -2, 999999999);
  bool written = A.archive_write_open(w, &bytes, nullptr, AppendTo, nullptr) == ARCHIVE_OK &&
                 A.archive_write_header(w, e) == ARCHIVE_OK && A.archive_write_close(w) == ARCHIVE_OK;
  A.archive_entry_free(e);
  A.archive_write_free(w);
  if (!written) return f;
  f.write = bytes.find("mtime=-2.999999999\n") != std::string::npos;
  std::string posix;
  if (f.write) {
    TarFilter filter({.times = PaxTimeDirection::kToPosix});
    filter.Feed({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, &posix);
    filter.Finish(&posix);
  } else {
    posix = bytes;
  }
  ::archive* r = A.archive_read_new();
  A.archive_read_support_format_tar(r);
  if (A.archive_read_open_memory(r, posix.data(), posix.size()) == ARCHIVE_OK &&
      A.archive_read_next_header(r, &e) == ARCHIVE_OK)
    f.read = A.archive_entry_mtime(e) == -1 && A.archive_entry_mtime_nsec(e) == 1;
  A.archive_read_free(r);
  return f;
}

const Fixes& ProbeOnce(const ArchiveLib& A) {
  static const Fixes fixes = Probe(A);
  return fixes;
}

}  // namespace

Result<std::unique_ptr<TarReader>> TarReader::Open(const ArchiveLib& A, const std::string& path) {
  return Open(A, -1, path, true);
}

Result<std::unique_ptr<TarReader>> TarReader::Open(const ArchiveLib& A, int fd, const std::string& path) {
  return Open(A, fd, path, false);
}

Result<std::unique_ptr<TarReader>> TarReader::Open(const ArchiveLib& A, int fd, const std::string& path,
                                                   bool by_name) {
  std::unique_ptr<TarReader> r(new TarReader(A));
  auto invalid = [&](::archive* a) {
    // Refused by the check of its first header: a tar, but a bad one.
    if (r->filter_ && r->filter_->refused()) return Fail(ErrorCode::kInvalid, path + ": " + Message(A, a));
    return Fail(ErrorCode::kInvalid,
                path + ": " + Message(A, a) + " (a tar archive, plain or .gz/.xz/.zst, is expected)");
  };
  r->file_ = A.archive_read_new();
  A.archive_read_support_filter_gzip(r->file_);
  A.archive_read_support_filter_xz(r->file_);
  A.archive_read_support_filter_zstd(r->file_);
  A.archive_read_support_format_raw(r->file_);
  archive_entry* e = nullptr;
  int opened = by_name ? A.archive_read_open_filename(r->file_, path.c_str(), 1 << 16)
                       : A.archive_read_open_fd(r->file_, fd, 1 << 16);
  if (opened != ARCHIVE_OK || A.archive_read_next_header(r->file_, &e) != ARCHIVE_OK) return invalid(r->file_);
  TarFilterOptions options{.check = true};
  if (ProbeOnce(A).read) options.times = PaxTimeDirection::kToLibarchive;
  r->filter_.emplace(options);
  r->tar_ = A.archive_read_new();
  A.archive_read_support_format_tar(r->tar_);
  if (A.archive_read_open(r->tar_, r.get(), nullptr, Read, nullptr) != ARCHIVE_OK) return invalid(r->tar_);
  return r;
}

TarReader::~TarReader() {
  if (tar_) A.archive_read_free(tar_);
  if (file_) A.archive_read_free(file_);
}

long TarReader::Read(::archive*, void* self, const void** buf) {
  auto* r = static_cast<TarReader*>(self);
  const ArchiveLib& A = r->A;
  TarFilter& filter = *r->filter_;
  r->buf_.clear();
  while (!r->eof_ && !filter.refused()) {
    const void* block;
    size_t len;
    la_int64_t offset;
    int s = A.archive_read_data_block(r->file_, &block, &len, &offset);
    if (s == ARCHIVE_EOF) {
      r->eof_ = true;
      filter.Finish(&r->buf_);
      break;
    }
    if (s != ARCHIVE_OK) {
      A.archive_set_error(r->tar_, A.archive_errno(r->file_), "%s", Message(A, r->file_).c_str());
      return -1;
    }
    filter.Feed({static_cast<const uint8_t*>(block), len}, &r->buf_);
    if (!r->buf_.empty()) break;
  }
  // What came before the header at fault is read first; the next call fails.
  if (r->buf_.empty() && filter.refused()) {
    A.archive_set_error(r->tar_, EINVAL, "%s; refusing the archive", filter.refused()->c_str());
    return -1;
  }
  *buf = r->buf_.data();
  return la_ssize_t(r->buf_.size());
}

Result<std::unique_ptr<TarOutput>> TarOutput::Open(const ArchiveLib& A, const std::string& out, const TarSink* sink) {
  std::unique_ptr<TarOutput> o(new TarOutput(A));
  o->out_ = out;
  o->sink_ = sink;
  TarFilterOptions options{.ustar_names = true};
  if (ProbeOnce(A).write) options.times = PaxTimeDirection::kToPosix;
  o->filter_.emplace(options);
  if (!sink) {
    o->file_ = A.archive_write_new();
    A.archive_write_set_format_raw(o->file_);
    // No padding of the last block, to a pipe as to a file: `-o -` and
    // `-o FILE` give the same bytes.
    A.archive_write_set_bytes_in_last_block(o->file_, 1);
    if (EndsWith(out, ".gz") || EndsWith(out, ".tgz")) {
      A.archive_write_add_filter_gzip(o->file_);
      A.archive_write_set_options(o->file_, "gzip:!timestamp");  // same node, same bytes
    } else if (EndsWith(out, ".zst")) {
      A.archive_write_add_filter_zstd(o->file_);
    }
    if (A.archive_write_open_filename(o->file_, out == "-" ? nullptr : out.c_str()) != ARCHIVE_OK)
      return Unexpected<Error>(IoError(A, out, o->file_));
    archive_entry* e = A.archive_entry_new();
    A.archive_entry_set_filetype(e, AE_IFREG);
    int r = A.archive_write_header(o->file_, e);
    A.archive_entry_free(e);
    if (r != ARCHIVE_OK) return Unexpected<Error>(IoError(A, out, o->file_));
  }
  o->tar_ = A.archive_write_new();
  // Full pax, so that every entry carries its ns mtime (restricted pax
  // writes it only beside other extensions). Xattrs once, as SCHILY.xattr.
  A.archive_write_set_format_pax(o->tar_);
  if (A.archive_write_set_format_option(o->tar_, "pax", "xattrheader", "SCHILY") != ARCHIVE_OK)
    return Unexpected<Error>(IoError(A, out, o->tar_));
  A.archive_write_set_bytes_in_last_block(o->tar_, 1);
  if (A.archive_write_open(o->tar_, o.get(), nullptr, Write, nullptr) != ARCHIVE_OK)
    return Unexpected<Error>(IoError(A, out, o->tar_));
  return o;
}

TarOutput::~TarOutput() {
  // The writer first: freeing it unclosed still writes through Write.
  if (tar_) A.archive_write_free(tar_);
  if (file_) A.archive_write_free(file_);
}

long TarOutput::Write(::archive*, void* self, const void* buf, size_t len) {
  auto* o = static_cast<TarOutput*>(self);
  std::span<const uint8_t> in(static_cast<const uint8_t*>(buf), len);
  Result<void> r;
  if (o->filter_) {
    o->buf_.clear();
    o->filter_->Feed(in, &o->buf_);
    r = o->Deliver({reinterpret_cast<const uint8_t*>(o->buf_.data()), o->buf_.size()});
  } else {
    r = o->Deliver(in);
  }
  if (!r) {
    if (!o->error_) o->error_ = r.error();
    return -1;
  }
  return la_ssize_t(len);
}

Result<void> TarOutput::Deliver(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return {};
  if (sink_) return (*sink_)(bytes);
  if (A.archive_write_data(file_, bytes.data(), bytes.size()) != la_ssize_t(bytes.size()))
    return Unexpected<Error>(IoError(A, out_, file_));
  return {};
}

Result<void> TarOutput::Close() {
  int r = A.archive_write_close(tar_);
  if (error_) return Unexpected<Error>(*error_);
  if (r != ARCHIVE_OK) return Unexpected<Error>(IoError(A, out_, tar_));
  if (filter_) {
    buf_.clear();
    filter_->Finish(&buf_);
    AE_TRY(Deliver({reinterpret_cast<const uint8_t*>(buf_.data()), buf_.size()}));
  }
  if (file_ && A.archive_write_close(file_) != ARCHIVE_OK) return Unexpected<Error>(IoError(A, out_, file_));
  return {};
}

}  // namespace agentenv::archive

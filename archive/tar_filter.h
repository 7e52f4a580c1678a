// The uncompressed tar stream between libarchive's tar format and the
// file, framed as libarchive frames it: pax time records converted
// between libarchive's reading and POSIX's (archive/pax_time.h), and on
// the way in, the headers libarchive would read leniently checked first.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "archive/pax_time.h"

namespace agentenv::archive {

struct TarFilterOptions {
  // Converts the "mtime", "atime" and "ctime" records of pax extended
  // headers ('x'/'X'); a header whose length changes gets a new size and
  // checksum. nullopt: times pass unchanged.
  std::optional<PaxTimeDirection> times;
  // Checks an archive about to be read (import, init --tarball, image
  // layers), where libarchive is lenient:
  //  - every record of a pax header ('x', 'X', 'g') is "<length>
  //    <key>=<value>\n" with the length its own (GNU tar's rule: a length
  //    that is missing, not decimal, 0, past the header or not ending at a
  //    newline refuses the archive; libarchive would drop the path and
  //    link records of such a header and go on);
  //  - numeric records (size, uid, gid, GNU.sparse.*, ...) are decimal
  //    numbers and times start with one (libarchive reads "abc" as 0);
  //  - a pax header is at most 1 MiB, and every header's checksum holds;
  //  - a hardlink or symlink whose header has an empty link name but a
  //    pax "linkpath" (or a GNU long link name) gets a placeholder link
  //    name, so that libarchive reads the link (it otherwise makes the
  //    entry of the first such link in an archive a plain file); one with
  //    no target anywhere is refused.
  // A stream that fails stops: refused() says why, and nothing after the
  // header at fault is passed on.
  bool check = false;
  // For an archive written: a pax header with hdrcharset=BINARY (a name
  // that is not UTF-8) whose path and linkpath the entry's own ustar
  // fields hold byte for byte loses those three records. GNU tar warns
  // about hdrcharset, which it does not know, and bsdtar fails on a
  // non-UTF-8 pax path without it: ustar fields raise neither. A name too
  // long for them keeps its records.
  bool ustar_names = false;
};

// Entries are framed as libarchive 3.6.2 frames them (a pax "size" record,
// types without data, GNU sparse extension blocks, its rule for hardlinks
// with data) except that a regular entry whose name ends in '/' is taken
// to have the data its size says (libarchive: none). Without `check`,
// whatever cannot be framed (a bad checksum, a header libarchive would
// refuse) and everything after the end-of-archive block passes unchanged:
// the filter never fails, and changes nothing but time records.
// Not thread-safe: one stream, one thread.
class TarFilter {
 public:
  explicit TarFilter(TarFilterOptions o) : opt_(o) {}
  // Appends the filtered form of `in` to *out; a header (and a pax
  // header's body) is held back until it is whole.
  void Feed(std::span<const uint8_t> in, std::string* out);
  // Appends what is still held back (a stream that ends inside a header).
  void Finish(std::string* out);
  // With `check`: why the stream was refused ("pax header at byte N: ..."),
  // once it was; nullopt while it is fine.
  const std::optional<std::string>& refused() const { return refused_; }

 private:
  enum class State { kHeader, kPax, kSparse, kData, kPass, kRefused };
  enum class Format { kNone, kTar, kUstar, kGnu, kPax };  // as libarchive tracks it
  void Step(std::string* out);
  void OnHeader(std::string* out);
  void OnPax(std::string* out);
  void OnSparse(std::string* out);
  void FlushPending(std::string* out);
  void Emit(std::string* out);
  void PassRest(std::string* out);
  void SkipData(uint64_t bytes);
  void Refuse(std::string why);

  TarFilterOptions opt_;
  State state_ = State::kHeader;
  Format format_ = Format::kNone;
  std::string held_;           // the header (and pax body) being assembled
  size_t need_ = 512;          // held_'s size when whole
  uint64_t at_ = 0;            // the stream offset of held_'s first byte
  uint64_t body_ = 0;          // kPax: the body's size
  bool global_ = false;        // kPax: a global header ('g')
  uint64_t data_ = 0;          // kData: bytes to pass; kSparse: the entry's data
  std::optional<uint64_t> pax_size_;  // a pax "size", for the entry that follows
  bool pax_link_ = false;      // the pax header before the entry names a link target
  bool long_link_ = false;     // so does a GNU long link name ('K')
  std::optional<std::string> refused_;
  // A pax header (its block, its body) held for the header after it.
  std::optional<std::pair<std::string, std::string>> pending_;
};

}  // namespace agentenv::archive

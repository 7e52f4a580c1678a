// Negative pax times as POSIX means them. A pax time is a decimal number
// of seconds: POSIX (and GNU tar) read "-1.000000001" as -1.000000001 s.
// libarchive (3.6.2, and its master as of 2025) writes and reads the
// fraction as added to the negative integer part: it exports
// -1.000000001 s as "-2.999999999" (GNU tar extracts -2.999999999 s), and
// imports GNU tar's "-1.000000001" as -0.999999999 s ("-0.5" even as
// +0.5 s). PaxTimeFilter rewrites the time records of a tar stream between
// the two readings, after libarchive's writer and before its reader.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace agentenv::archive {

enum class PaxTimeDirection {
  kToPosix,       // what libarchive wrote -> what POSIX means by it
  kToLibarchive,  // POSIX -> what libarchive reads as the same time
};

// `value` (a pax time, -?digits[.digits]) converted; nullopt when both
// read it alike (not negative, no fraction, or not a time). E.g.
// "-2.999999999" <-> "-1.000000001", "-1.5" <-> "-0.5", "-10.5" <-> "-9.5".
std::optional<std::string> ConvertPaxTime(std::string_view value, PaxTimeDirection d);

// Bytes of an uncompressed tar stream in, the same stream out with the
// "mtime", "atime" and "ctime" records of its pax extended headers
// ('x'/'X') converted; a header whose length changes gets a new size and
// checksum. Entries are framed as libarchive 3.6.2 frames them (a pax
// "size" record, types without data, GNU sparse extension blocks, its rule
// for hardlinks with data) except that a regular entry whose name ends in
// '/' is taken to have the data its size says (libarchive: none). Whatever
// cannot be framed (a bad checksum, a header libarchive would refuse) and
// everything after the end-of-archive block passes unchanged: the filter
// never fails, and changes nothing but time records in pax headers.
class PaxTimeFilter {
 public:
  explicit PaxTimeFilter(PaxTimeDirection d) : dir_(d) {}
  // Appends the converted form of `in` to *out; a pax header is held back
  // until it is whole.
  void Feed(std::span<const uint8_t> in, std::string* out);
  // Appends what is still held back (a stream that ends inside a header).
  void Finish(std::string* out);

 private:
  enum class State { kHeader, kPax, kSparse, kData, kPass };
  enum class Format { kNone, kTar, kUstar, kGnu, kPax };  // as libarchive tracks it
  void Step(std::string* out);
  void OnHeader(std::string* out);
  void OnPax(std::string* out);
  void OnSparse(std::string* out);
  void Emit(std::string* out);
  void PassRest(std::string* out);
  void SkipData(uint64_t bytes);

  PaxTimeDirection dir_;
  State state_ = State::kHeader;
  Format format_ = Format::kNone;
  std::string held_;           // the header (and pax body) being assembled
  size_t need_ = 512;          // held_'s size when whole
  uint64_t body_ = 0;          // kPax: the body's size
  uint64_t data_ = 0;          // kData: bytes to pass; kSparse: the entry's data
  std::optional<uint64_t> pax_size_;  // a pax "size", for the entry that follows
};

}  // namespace agentenv::archive

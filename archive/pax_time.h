// Negative pax times as POSIX means them. A pax time is a decimal number
// of seconds: POSIX (and GNU tar) read "-1.000000001" as -1.000000001 s.
// libarchive (3.6.2, and its master as of 2025) writes and reads the
// fraction as added to the negative integer part: it exports
// -1.000000001 s as "-2.999999999" (GNU tar extracts -2.999999999 s), and
// imports GNU tar's "-1.000000001" as -0.999999999 s ("-0.5" even as
// +0.5 s). TarFilter (archive/tar_filter.h) rewrites the time records of a
// tar stream between the two readings, after libarchive's writer and
// before its reader.
#pragma once

#include <optional>
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

}  // namespace agentenv::archive

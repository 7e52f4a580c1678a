// PaxTimeFilter (archive/pax_time.h), the rewriting of pax time records
// between libarchive and POSIX, on any bytes as a tar stream, in both
// directions. It must never fail, give the same bytes however the stream
// is cut into Feed calls, leave a stream without pax time records
// unchanged, and ConvertPaxTime must be undone by the other direction.
#include <cstdint>
#include <span>
#include <string>

#include "archive/pax_time.h"
#include "fuzz/fuzz_env.h"

namespace {

using agentenv::archive::ConvertPaxTime;
using agentenv::archive::PaxTimeDirection;
using agentenv::archive::PaxTimeFilter;

std::string Filter(PaxTimeDirection d, std::span<const uint8_t> in, size_t piece) {
  PaxTimeFilter f(d);
  std::string out;
  for (size_t at = 0; at < in.size(); at += piece) f.Feed(in.subspan(at, std::min(piece, in.size() - at)), &out);
  f.Finish(&out);
  return out;
}

// A pax time as libarchive or POSIX writes it: "-", digits without a
// leading zero (or "0"), ".", digits.
bool Canonical(std::string_view v) {
  if (v.size() < 4 || v[0] != '-') return false;
  size_t dot = v.find('.');
  if (dot == std::string_view::npos || dot < 2 || (v[1] == '0' && dot != 2)) return false;
  for (size_t i = 1; i < v.size(); ++i)
    if (i != dot && (v[i] < '0' || v[i] > '9')) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte cuts the stream into pieces; the rest is the stream.
  size_t piece = size_t(data[0]) * 7 + 1;
  std::span<const uint8_t> in(data + 1, size - 1);
  for (auto d : {PaxTimeDirection::kToPosix, PaxTimeDirection::kToLibarchive}) {
    std::string whole = Filter(d, in, in.size() ? in.size() : 1);
    std::string cut = Filter(d, in, piece);
    FUZZ_CHECK(whole == cut, "the output depends on how the stream is fed");
    std::string_view text(reinterpret_cast<const char*>(in.data()), in.size());
    if (text.find("time=") == std::string_view::npos)
      FUZZ_CHECK(whole == text, "a stream without time records changed");
  }
  // The stream as one time value, too.
  std::string_view value(reinterpret_cast<const char*>(in.data()), std::min<size_t>(in.size(), 64));
  for (auto d : {PaxTimeDirection::kToPosix, PaxTimeDirection::kToLibarchive}) {
    auto other = d == PaxTimeDirection::kToPosix ? PaxTimeDirection::kToLibarchive : PaxTimeDirection::kToPosix;
    auto converted = ConvertPaxTime(value, d);
    if (!converted || !Canonical(value)) continue;
    auto back = ConvertPaxTime(*converted, other);
    FUZZ_CHECK(back && *back == value, std::string(value) + " -> " + *converted + " -> " + (back ? *back : "nothing"));
  }
  return 0;
}

// TarFilter (archive/tar_filter.h) on any bytes as a tar stream: the
// rewriting of pax time records between libarchive and POSIX in both
// directions, the names of an archive written, and the checks of an
// archive read in. Unchecked it must never fail, leave a stream without
// pax time records unchanged (without hdrcharset records, for the names);
// checked, it may refuse (then it says why) and never grows a stream
// without pax records. Either way it gives the same result however the
// stream is cut into Feed calls, and ConvertPaxTime is undone by the
// other direction.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "archive/pax_time.h"
#include "archive/tar_filter.h"
#include "fuzz/fuzz_env.h"

namespace {

using agentenv::archive::ConvertPaxTime;
using agentenv::archive::PaxTimeDirection;
using agentenv::archive::TarFilter;
using agentenv::archive::TarFilterOptions;

struct Filtered {
  std::string out;
  std::optional<std::string> refused;
};

Filtered Filter(TarFilterOptions o, std::span<const uint8_t> in, size_t piece) {
  TarFilter f(o);
  Filtered r;
  for (size_t at = 0; at < in.size(); at += piece) f.Feed(in.subspan(at, std::min(piece, in.size() - at)), &r.out);
  f.Finish(&r.out);
  r.refused = f.refused();
  return r;
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
  std::string_view text(reinterpret_cast<const char*>(in.data()), in.size());
  const TarFilterOptions options[] = {{.times = PaxTimeDirection::kToPosix},
                                      {.times = PaxTimeDirection::kToLibarchive},
                                      {.check = true},
                                      {.times = PaxTimeDirection::kToLibarchive, .check = true},
                                      {.ustar_names = true},
                                      {.times = PaxTimeDirection::kToPosix, .ustar_names = true}};
  for (const TarFilterOptions& o : options) {
    Filtered whole = Filter(o, in, in.size() ? in.size() : 1);
    Filtered cut = Filter(o, in, piece);
    FUZZ_CHECK(whole.out == cut.out && whole.refused == cut.refused, "the output depends on how the stream is fed");
    if (!o.check) FUZZ_CHECK(!whole.refused, "an unchecked stream was refused: " + *whole.refused);
    if (whole.refused) FUZZ_CHECK(!whole.refused->empty(), "refused without a reason");
    if (!o.check && !o.ustar_names && text.find("time=") == std::string_view::npos)
      FUZZ_CHECK(whole.out == text, "a stream without time records changed");
    // Names: only a header with hdrcharset may lose records.
    if (o.ustar_names && !o.times && text.find("hdrcharset=") == std::string_view::npos)
      FUZZ_CHECK(whole.out == text, "a stream without hdrcharset records changed");
    // Checked only: a stream without pax headers or links changes in
    // nothing but what it stops before.
    if (o.check && !o.times && text.find("=") == std::string_view::npos)
      FUZZ_CHECK(whole.out.size() <= text.size(), "a checked stream grew");
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

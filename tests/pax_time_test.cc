// control/pax_time: negative pax times between libarchive's reading and
// POSIX's, on values and on tar streams fed in pieces of any size.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "archive/pax_time.h"

namespace agentenv::test {
namespace {

using archive::ConvertPaxTime;
using archive::PaxTimeDirection;
using archive::PaxTimeFilter;

// A ustar header block: `size` octal, checksum filled in.
std::string Header(const std::string& name, char type, size_t size) {
  std::string h(512, '\0');
  std::memcpy(h.data(), name.data(), name.size());
  std::snprintf(h.data() + 100, 8, "%07o", 0644);
  std::snprintf(h.data() + 124, 12, "%011zo", size);
  std::snprintf(h.data() + 136, 12, "%011o", 0);
  h[156] = type;
  std::memcpy(h.data() + 257, "ustar\0" "00", 8);
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h.data() + 148, 7, "%06o", sum);
  h[155] = ' ';
  return h;
}

std::string Padded(std::string data) {
  data.append((512 - data.size() % 512) % 512, '\0');
  return data;
}

// A pax header with `records`, a file with `data`, the end blocks.
std::string Stream(const std::string& records, const std::string& data) {
  return Header("PaxHeader/f", 'x', records.size()) + Padded(records) + Header("f", '0', data.size()) + Padded(data) +
         std::string(1024, '\0');
}

std::string Filter(const std::string& in, PaxTimeDirection d, size_t piece) {
  PaxTimeFilter f(d);
  std::string out;
  for (size_t i = 0; i < in.size(); i += piece) {
    size_t n = std::min(piece, in.size() - i);
    f.Feed({reinterpret_cast<const uint8_t*>(in.data() + i), n}, &out);
  }
  f.Finish(&out);
  return out;
}

}  // namespace

TEST_CASE("pax time: values convert between libarchive's reading and POSIX's, both ways", "[control]") {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"-2.999999999", "-1.000000001"}, {"-1.5", "-0.5"},     {"-10.5", "-9.5"},
      {"-100.25", "-99.75"},            {"-2.000000001", "-1.999999999"}, {"-1700000001.9", "-1700000000.1"}};
  for (const auto& [libarchive, posix] : pairs) {
    INFO(libarchive << " <-> " << posix);
    CHECK(ConvertPaxTime(libarchive, PaxTimeDirection::kToPosix) == posix);
    CHECK(ConvertPaxTime(posix, PaxTimeDirection::kToLibarchive) == libarchive);
  }
  // Read alike both ways: positive, whole, no fraction, not a number.
  for (const char* same : {"1.5", "-5", "-5.000", "0.000000001", "-x.5", "-1.", "-.5", "", "-1.5e3"}) {
    INFO(same);
    CHECK(!ConvertPaxTime(same, PaxTimeDirection::kToPosix));
    CHECK(!ConvertPaxTime(same, PaxTimeDirection::kToLibarchive));
  }
  // libarchive never writes "-0.F" (it would read it as +0.F).
  CHECK(!ConvertPaxTime("-0.5", PaxTimeDirection::kToPosix));
}

TEST_CASE("pax time: a stream's time records are rewritten, the header reframed, data left alone", "[control]") {
  // The file's data looks like a pax record: it must pass unchanged.
  const std::string data = "15 mtime=-10.5\n" + std::string(700, 'd');
  const std::string libarchive = Stream("15 mtime=-10.5\n13 atime=5.5\n22 path=f-with-a-name\n", data);
  const std::string posix = Stream("14 mtime=-9.5\n13 atime=5.5\n22 path=f-with-a-name\n", data);
  for (size_t piece : {size_t(1), size_t(7), size_t(511), size_t(512), size_t(513), size_t(10240)}) {
    INFO("fed " << piece << " bytes at a time");
    CHECK(Filter(libarchive, PaxTimeDirection::kToPosix, piece) == posix);
    CHECK(Filter(posix, PaxTimeDirection::kToLibarchive, piece) == libarchive);
  }
  // Nothing to convert, a bad checksum, a stream cut short: unchanged.
  const std::string plain = Stream("13 atime=5.5\n", data);
  CHECK(Filter(plain, PaxTimeDirection::kToPosix, 100) == plain);
  std::string damaged = libarchive;
  damaged[3] ^= 1;
  CHECK(Filter(damaged, PaxTimeDirection::kToPosix, 100) == damaged);
  const std::string cut = libarchive.substr(0, 600);
  CHECK(Filter(cut, PaxTimeDirection::kToPosix, 100) == cut);
}

}  // namespace agentenv::test

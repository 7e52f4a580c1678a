// archive/pax_time and archive/tar_filter: negative pax times between
// libarchive's reading and POSIX's, on values and on tar streams fed in
// pieces of any size; the checks of an archive's headers on the way in.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "archive/pax_time.h"
#include "archive/tar_filter.h"

namespace agentenv::test {
namespace {

using archive::ConvertPaxTime;
using archive::PaxTimeDirection;
using archive::TarFilter;
using archive::TarFilterOptions;

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

std::string Filter(const std::string& in, TarFilterOptions o, size_t piece, std::optional<std::string>* refused = nullptr) {
  TarFilter f(o);
  std::string out;
  for (size_t i = 0; i < in.size(); i += piece) {
    size_t n = std::min(piece, in.size() - i);
    f.Feed({reinterpret_cast<const uint8_t*>(in.data() + i), n}, &out);
  }
  f.Finish(&out);
  if (refused) *refused = f.refused();
  return out;
}

std::string Filter(const std::string& in, PaxTimeDirection d, size_t piece) {
  return Filter(in, TarFilterOptions{.times = d}, piece);
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

TEST_CASE("tar filter: a checked stream refuses malformed pax records as GNU tar does, at the header at fault",
          "[control]") {
  const std::string data = "hi";
  const TarFilterOptions check{.check = true};
  struct Case {
    std::string records, says;
  };
  const std::vector<Case> cases = {
      {"999999 path=zz\n", "past the header's end"},
      {"0 path=zz\n", "too short"},
      {"-5 path=zz\n", "does not start with its length"},
      {"abc path=zz\n", "does not start with its length"},
      {"12 path=zz\n", "past the header's end"},
      {"10 path=zz\n", "no newline there"},
      {"11 path zz\n", "no '='"},
      {"11path=zzz\n", "no blank after its length"},
      {"9 =value\n", "empty key"},
      {"11 uid=abc\n", "not a decimal number"},
      {"13 size=-500\n", "not a decimal number"},
      {"13 mtime=x12\n", "not a time"},
      {"24 GNU.sparse.map=0,1,2\n", "offset,size pairs"},
  };
  for (const Case& c : cases) {
    INFO(c.records);
    for (size_t piece : {size_t(1), size_t(100), size_t(10240)}) {
      std::optional<std::string> refused;
      std::string out = Filter(Stream(c.records, data), check, piece, &refused);
      REQUIRE(refused);
      CHECK(refused->find("pax header at byte 0: record") == 0);
      CHECK(refused->find(c.says) != std::string::npos);
      CHECK(out.empty());  // nothing of the header at fault, nothing after it
    }
  }
  // Well-formed records, numbers and times pass unchanged; a global
  // header is checked too.
  const std::string fine = Stream("22 path=f-with-a-name\n12 uid=1000\n22 mtime=-1.000000001\n31 atime=1748089464.951928467a\n", data);
  std::optional<std::string> refused;
  CHECK(Filter(fine, check, 7, &refused) == fine);
  CHECK(!refused);
  std::string global = Header("pax_global_header", 'g', 7) + Padded("7 a zz\n") + fine;
  Filter(global, check, 512, &refused);
  CHECK((refused && refused->find("no '='") != std::string::npos));
  // A damaged header is refused, not passed over.
  std::string damaged = fine;
  damaged[1024 + 3] ^= 1;
  Filter(damaged, check, 512, &refused);
  CHECK((refused && *refused == "header at byte 1024 is damaged (its checksum does not match)"));
  // Unchecked, the same streams pass as they are.
  for (const Case& c : cases) CHECK(Filter(Stream(c.records, data), TarFilterOptions{}, 100) == Stream(c.records, data));
}

TEST_CASE("tar filter: a checked stream drops NULs after the last pax record and names link targets libarchive would lose",
          "[control]") {
  const TarFilterOptions check{.check = true};
  std::optional<std::string> refused;
  // GNU tar stops at a NUL where a record would start; libarchive would
  // drop the header's path: the body ends at the last record.
  std::string with_nul = Stream(std::string("22 path=f-with-a-name\n") + '\0' + "junk", "x");
  CHECK(Filter(with_nul, check, 3, &refused) == Stream("22 path=f-with-a-name\n", "x"));
  CHECK(!refused);
  // A hardlink whose header has no link name but a pax linkpath: the
  // name field gets a placeholder (libarchive then reads the pax target).
  std::string link = Header("PaxHeader/h", 'x', 20) + Padded("20 linkpath=/etc/sh\n") + Header("h", '1', 0) +
                     std::string(1024, '\0');
  std::string out = Filter(link, check, 512, &refused);
  CHECK(!refused);
  REQUIRE(out.size() == link.size());
  CHECK(out[1024 + 157] == '.');
  CHECK(out.compare(0, 1024, link, 0, 1024) == 0);
  // No target anywhere: refused.
  for (char type : {'1', '2'}) {
    std::string none = Header("h", type, 0) + std::string(1024, '\0');
    Filter(none, check, 512, &refused);
    CHECK((refused && refused->find("entry 'h' (header at byte 0) is a") == 0));
  }
}

}  // namespace agentenv::test

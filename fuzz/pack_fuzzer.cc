// Pack files (store/pack_format.cc): any bytes as a pack, scanned as fsck
// scans it (mapped, payloads verified by HashDecoded), as gc and fsck
// --repair scan it (read through a window; a salvaged record decoded in
// whole by Decode), and headers only. The pack lives in a memfd: no file
// system. Every scan must see the same records, in order, inside the
// committed length, and report damage instead of failing.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "fuzz/fuzz_env.h"
#include "store/codec.h"
#include "store/inspect.h"

namespace {

using namespace agentenv;

struct Seen {
  uint64_t offset;
  store::RecordHeader h;
};

std::vector<Seen> Scan(int fd, uint64_t limit, int how) {
  std::vector<Seen> out;
  auto on_record = [&](const store::ScannedRecord& r) -> Result<void> {
    FUZZ_CHECK(r.offset % 8 == 0, "a record at an unaligned offset");
    FUZZ_CHECK(out.empty() || r.offset >= out.back().offset + store::kRecordHeaderSize + out.back().h.stored_size,
               "records overlap");
    FUZZ_CHECK(r.offset + store::kRecordHeaderSize + r.header.stored_size <= limit, "a record past the limit");
    if (how != 2) {
      FUZZ_CHECK(r.payload.size() == r.header.stored_size, "a payload of the wrong size");
      (void)store::HashDecoded(r.header.codec, r.payload, r.header.size);  // fsck's check
      (void)store::Decode(r.header.codec, r.payload, r.header.size);       // gc's salvage check
    }
    out.push_back({r.offset, r.header});
    return {};
  };
  auto on_damage = [](uint64_t, const std::string&) -> Result<void> { return {}; };
  Result<void> r;
  if (how == 0) {
    auto m = store::PackMapping::Map(fd, limit);
    FUZZ_CHECK(m, "mapping a pack: " + m.error().message);
    r = store::ScanPackMapping(**m, limit, 0, on_record, on_damage);
  } else {
    r = store::ScanPack(fd, limit, on_record, on_damage, how == 1);
  }
  FUZZ_CHECK(r, "a scan failed instead of reporting damage: " + r.error().message);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  UniqueFd fd(::memfd_create("pack", MFD_CLOEXEC));
  if (!fd || ::write(fd.get(), data, size) != ssize_t(size)) fuzz::Die("memfd");
  std::vector<Seen> mapped = Scan(fd.get(), size, 0);
  std::vector<Seen> read = Scan(fd.get(), size, 1);
  std::vector<Seen> headers = Scan(fd.get(), size, 2);
  FUZZ_CHECK(mapped.size() == read.size() && read.size() == headers.size(), "scans disagree on the record count");
  for (size_t i = 0; i < read.size(); ++i)
    FUZZ_CHECK(mapped[i].offset == read[i].offset && read[i].offset == headers[i].offset,
               "scans disagree on record " + std::to_string(i));
  // A committed length beyond the file: damage, and the same records.
  std::vector<Seen> longer = Scan(fd.get(), size + 4096, 1);
  FUZZ_CHECK(longer.size() == read.size(), "a short file changed the records found");
  // Each header alone, at every 8-byte offset.
  for (size_t off = 0; off + store::kRecordHeaderSize <= size; off += 8)
    (void)store::ParseRecordHeader(std::span<const uint8_t, store::kRecordHeaderSize>(data + off, store::kRecordHeaderSize));
  return 0;
}

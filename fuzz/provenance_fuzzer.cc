// Provenance sections of node records and operation log rows
// (snap/provenance.h, snap/oplog.h), decoded from any bytes as MetaDb
// reads them from a possibly damaged or hostile index. The first byte
// picks the decoder, the rest is its input. What decodes must be within
// the bounds (Bounded changes nothing), survive its own encoding
// unchanged, and render a title and a thinned summary of one line within
// kMaxTitle bytes.
#include <cstdint>
#include <span>

#include "fuzz/fuzz_env.h"
#include "snap/oplog.h"
#include "snap/provenance.h"

namespace {

using namespace agentenv;
using namespace agentenv::snap;

bool OneLine(std::string_view s) {
  for (char c : s)
    if (uint8_t(c) < 0x20 || c == 0x7f) return false;
  return true;
}

void Section(std::span<const uint8_t> b) {
  auto p = DecodeProvenance(b, "fuzz");
  if (!p) {
    FUZZ_CHECK(p.error().code == ErrorCode::kCorrupt, "a bad section is not kCorrupt: " + p.error().message);
    return;
  }
  FUZZ_CHECK(Bounded(*p) == *p, "a decoded provenance is past its bounds");
  std::vector<uint8_t> again = EncodeProvenance(*p);
  auto back = DecodeProvenance(again, "again");
  FUZZ_CHECK(back, "a decoded provenance's encoding does not decode: " + back.error().message);
  FUZZ_CHECK(*back == *p, "a provenance changed through its encoding");
  FUZZ_CHECK(EncodeProvenance(*back) == again, "a provenance's encoding is not stable");
  std::string title = RenderTitle(*p, "M a\nb", nullptr);
  FUZZ_CHECK(title.size() <= kMaxTitle, "a title of " + std::to_string(title.size()) + " bytes");
  FUZZ_CHECK(OneLine(title), "a title with a control character");
  if (p->thinned) FUZZ_CHECK(OneLine(ThinnedText(*p->thinned)), "a thinned summary with a control character");
  // Retention folds a dropped node into a span: the span stays bounded.
  Provenance kept;
  kept.thinned.emplace();
  ThinNode(*kept.thinned, 1, *p);
  ThinNode(*kept.thinned, 2, *p);
  FUZZ_CHECK(Bounded(kept) == kept, "a thinned span grew past its bounds");
}

void Row(std::span<const uint8_t> b) {
  auto op = DecodeOperation(7, b, "fuzz");
  if (!op) return;
  auto back = DecodeOperation(7, EncodeOperation(*op), "again");
  FUZZ_CHECK(back, "a decoded operation row's encoding does not decode");
  FUZZ_CHECK(*back == *op, "an operation row changed through its encoding");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::span<const uint8_t> in(data + 1, size - 1);
  if (data[0] % 2 == 0) Section(in);
  else Row(in);
  return 0;
}

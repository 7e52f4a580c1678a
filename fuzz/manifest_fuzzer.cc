// Manifest objects (store/manifest.h): the chunk list of a large file,
// decoded from any bytes. A manifest it accepts must survive its own
// encoding unchanged, and its sizes add up.
#include <cstdint>
#include <span>

#include "fuzz/fuzz_env.h"
#include "store/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace agentenv;
  auto chunks = store::DecodeManifest(std::span<const uint8_t>(data, size));
  if (!chunks) return 0;
  std::vector<uint8_t> again = store::EncodeManifest(*chunks);
  auto back = store::DecodeManifest(again);
  FUZZ_CHECK(back, "a decoded manifest's encoding does not decode: " + back.error().message);
  FUZZ_CHECK(back->size() == chunks->size(), "a decoded manifest changed through its encoding");
  for (size_t i = 0; i < chunks->size(); ++i)
    FUZZ_CHECK((*back)[i].id == (*chunks)[i].id && (*back)[i].size == (*chunks)[i].size,
               "chunk " + std::to_string(i) + " changed through the encoding");
  return 0;
}

// Tree objects (snap/tree.h): DecodeTree on any bytes, as LoadTree and
// fsck call it on what the store holds. A tree it accepts must survive its
// own encoding unchanged.
#include <cstdint>
#include <span>

#include "fuzz/fuzz_env.h"
#include "snap/tree.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace agentenv;
  auto tree = snap::DecodeTree(std::span<const uint8_t>(data, size), "fuzz");
  if (!tree) return 0;
  std::vector<uint8_t> again = snap::EncodeTree(*tree);
  auto back = snap::DecodeTree(again, "fuzz re-encoded");
  FUZZ_CHECK(back, "a decoded tree's encoding does not decode: " + back.error().message);
  FUZZ_CHECK(*back == *tree, "a decoded tree changed through its encoding");
  return 0;
}

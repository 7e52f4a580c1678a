// Node objects (snap/node.h): DecodeNode on any bytes, as LoadNode calls
// it on what the store holds. A node it accepts must survive its own
// encoding unchanged.
#include <cstdint>
#include <span>

#include "fuzz/fuzz_env.h"
#include "snap/node.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace agentenv;
  auto node = snap::DecodeNode(std::span<const uint8_t>(data, size), "fuzz");
  if (!node) return 0;
  std::vector<uint8_t> again = snap::EncodeNode(*node);
  auto back = snap::DecodeNode(again, "fuzz re-encoded");
  FUZZ_CHECK(back, "a decoded node's encoding does not decode: " + back.error().message);
  FUZZ_CHECK(*back == *node, "a decoded node changed through its encoding");
  return 0;
}

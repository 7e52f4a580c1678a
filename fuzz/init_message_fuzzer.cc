// The init program's message (runner/init_message.h), decoded from any
// bytes as agentenv-init decodes what its caller wrote. Its format is
// canonical: what decodes must encode back to the very same bytes.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_env.h"
#include "runner/init_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace agentenv::runner::internal;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  InitMessage m;
  if (!DecodeInitMessage(in, &m)) return 0;
  FUZZ_CHECK(EncodeInitMessage(m) == in, "a decoded message encodes to other bytes");
  return 0;
}

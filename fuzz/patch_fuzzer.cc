// write_file's unified-diff patches (control/patch.h), as a model or a
// client could send them. Input: the original file, a NUL byte, the
// patch. The applier must end in time and either refuse the patch or
// return a result no larger than the two inputs together.
#include <cstdint>
#include <string_view>

#include "control/patch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nul = in.find('\0');
  std::string_view original = nul == std::string_view::npos ? std::string_view() : in.substr(0, nul);
  std::string_view patch = nul == std::string_view::npos ? in : in.substr(nul + 1);
  auto r = agentenv::control::ApplyPatch(original, patch);
  if (r && r->size() > original.size() + patch.size()) __builtin_trap();
  return 0;
}

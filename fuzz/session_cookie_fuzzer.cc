// The web DVR's reading of a Cookie header (web/session.h), which every
// request on a listener that wants the token passes through: any bytes
// give a session's token only when they carry that session's value under
// a cookie name of ours, and never anything else.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "web/session.h"

namespace {

const std::string kToken = "0123456789abcdef0123456789abcdef";

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "session cookie: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static agentenv::web::SessionStore* store = new agentenv::web::SessionStore();
  static std::string value = [] {
    auto v = store->Open(kToken);
    Check(bool(v), "a session is opened");
    return *v;
  }();
  const std::string header(reinterpret_cast<const char*>(data), size);
  const std::string token = store->TokenOf(header);
  Check(token.empty() || token == kToken, "the token is the session's or none");
  if (!token.empty()) Check(header.find("agentenv_dvr_") != std::string::npos && header.find(value) != std::string::npos,
                            "a session is found only by its value under a name of ours");
  return 0;
}

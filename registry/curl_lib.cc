#include "registry/curl_lib.h"

#include <dlfcn.h>

#include <string>

namespace agentenv::registry {
namespace {

// The soname of libcurl 7.x and 8.x, whose ABI curl.h describes.
constexpr const char* kLibrary = "libcurl.so.4";

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (!*out && missing->empty()) *missing = name;
  return *out != nullptr;
}

Result<CurlLib> Load() {
  // Never unloaded: the functions are used until the process exits.
  void* lib = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  auto fail = [](const std::string& why) {
    return Fail(ErrorCode::kUnsupported, std::string(kLibrary) + ": " + why + "; push and pull need libcurl");
  };
  if (!lib) {
    const char* err = ::dlerror();
    return fail(err ? err : "cannot be loaded");
  }
  CurlLib c{};
  std::string missing;
#define AE_RESOLVE(fn) Resolve(lib, #fn, &c.fn, &missing)
  bool ok = AE_RESOLVE(curl_global_init) && AE_RESOLVE(curl_easy_init) && AE_RESOLVE(curl_easy_cleanup) &&
            AE_RESOLVE(curl_easy_reset) && AE_RESOLVE(curl_easy_setopt) && AE_RESOLVE(curl_easy_perform) &&
            AE_RESOLVE(curl_easy_getinfo) && AE_RESOLVE(curl_easy_strerror) && AE_RESOLVE(curl_slist_append) &&
            AE_RESOLVE(curl_slist_free_all);
#undef AE_RESOLVE
  if (!ok) return fail("has no " + missing + " (too old)");
  if (c.curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return fail("curl_global_init failed");
  return c;
}

}  // namespace

Result<const CurlLib*> LoadCurlLib() {
  static const Result<CurlLib> lib = Load();
  if (!lib) return Unexpected<Error>(lib.error());
  return &*lib;
}

}  // namespace agentenv::registry

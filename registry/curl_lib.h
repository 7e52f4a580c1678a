// libcurl, loaded on first use, as archive/libarchive.h loads libarchive:
// only push and pull need it, and linking it would load it and its own
// dependencies (TLS, HTTP/2, SSH, LDAP, ...) at every CLI start-up.
#pragma once

// Plain function pointers below: curl.h's type-checking macros would
// rewrite calls through them.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#include "common/result.h"

namespace agentenv::registry {

// The libcurl functions the registry client calls, named as in curl.h.
struct CurlLib {
  decltype(&::curl_global_init) curl_global_init;
  decltype(&::curl_easy_init) curl_easy_init;
  decltype(&::curl_easy_cleanup) curl_easy_cleanup;
  decltype(&::curl_easy_reset) curl_easy_reset;
  decltype(&::curl_easy_setopt) curl_easy_setopt;
  decltype(&::curl_easy_perform) curl_easy_perform;
  decltype(&::curl_easy_getinfo) curl_easy_getinfo;
  decltype(&::curl_easy_strerror) curl_easy_strerror;
  decltype(&::curl_slist_append) curl_slist_append;
  decltype(&::curl_slist_free_all) curl_slist_free_all;
};

// Loads libcurl (once per process; thread-safe), resolves every function
// above and initializes it. Errors: kUnsupported "<library>: <why>; push
// and pull need libcurl".
Result<const CurlLib*> LoadCurlLib();

}  // namespace agentenv::registry

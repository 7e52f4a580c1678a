// One registry repository spoken to over HTTP(S): requests with the
// credentials of the auth file (Basic, or a Bearer token fetched from the
// realm a 401 names), retried with backoff when the failure is transient,
// and every failure turned into an error that says what happened.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "registry/curl_lib.h"
#include "registry/registry.h"

namespace agentenv::registry {

struct Request {
  std::string method = "GET";
  std::string url;                   // absolute, or a path below https://HOST
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // sent when upload_fd < 0 and not empty
  int upload_fd = -1;                // or: the file sent as the body, from offset 0
  uint64_t upload_size = 0;
  // Receives the response body of a 2xx (downloads); empty: kept in
  // Response::body. `restart` is called before a retried attempt.
  std::function<Result<void>(const char*, size_t)> sink;
  std::function<void()> restart;
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct Response {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class Session {
 public:
  // Errors: kUnsupported (no libcurl), kInvalid (an unreadable auth file).
  static Result<std::unique_ptr<Session>> Open(const Reference& ref, const Options& opt);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // "https://HOST/v2/REPO/" + path.
  std::string Url(const std::string& path) const;
  // Performs the request, authenticating on a 401 and retrying transient
  // failures. Returns any final HTTP status; only transport failures and
  // retries used up are errors.
  Result<Response> Send(const Request& r);
  // An error for an unexpected `status` of `what` (a message per class:
  // 401/403 credentials, 404, 5xx, other).
  Error StatusError(const std::string& what, const Response& resp) const;

  uint64_t requests = 0;

 private:
  Session() = default;
  Result<Response> Once(const Request& r, CURLcode* curl_error);
  Result<void> Authenticate(const Response& challenge);

  const CurlLib* C = nullptr;
  CURL* curl_ = nullptr;
  Reference ref_;
  Options opt_;
  std::string base_;          // scheme://host
  std::string auth_file_;     // where credentials came from ("" : none)
  std::string basic_;         // base64 "user:password", "" when none
  std::string authorization;  // the header value now in use
};

}  // namespace agentenv::registry

#include "registry/session.h"

#include <fcntl.h>
#include <unistd.h>


#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/read_all.h"
#include "common/text.h"
#include "common/unique_fd.h"

namespace agentenv::registry {
namespace {

constexpr size_t kMaxAuthFileBytes = 1 << 20;  // a few credentials

using json = nlohmann::json;

// "https://host/v1/" -> "host": how docker and podman spell auths keys.
std::string AuthKeyHost(std::string key) {
  for (const char* scheme : {"https://", "http://"})
    if (key.starts_with(scheme)) key = key.substr(std::strlen(scheme));
  return key.substr(0, key.find('/'));
}

std::string DefaultAuthFile() {
  std::vector<std::string> candidates;
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg)
    candidates.push_back(std::string(xdg) + "/containers/auth.json");
  if (const char* home = std::getenv("HOME"); home && *home) candidates.push_back(std::string(home) + "/.docker/config.json");
  for (const auto& c : candidates)
    if (::access(c.c_str(), R_OK) == 0) return c;
  return "";
}

// The base64 "user:password" for `host` in the auth file ("" if none).
Result<std::string> Credentials(const std::string& file, const std::string& host) {
  auto text = ReadFileUpTo(file, kMaxAuthFileBytes + 1);
  if (!text) return Fail(ErrorCode::kInvalid, file + ": cannot be read (the auth file)");
  if (text->size() > kMaxAuthFileBytes) return Fail(ErrorCode::kInvalid, file + ": over 1 MiB, not an auth file");
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Fail(ErrorCode::kInvalid, file + ": not JSON (an auth file has {\"auths\": {HOST: {\"auth\": ...}}})");
  if (!j.contains("auths") || !j["auths"].is_object()) return std::string();
  for (const auto& [key, v] : j["auths"].items()) {
    if (AuthKeyHost(key) != host || !v.is_object()) continue;
    if (v.contains("auth") && v["auth"].is_string()) return v["auth"].get<std::string>();
    if (v.contains("username") && v.contains("password") && v["username"].is_string() && v["password"].is_string())
      return Base64Encode(v["username"].get<std::string>() + ":" + v["password"].get<std::string>());
  }
  return std::string();
}

// key="value" pairs of a WWW-Authenticate challenge, after its scheme.
std::map<std::string, std::string> ChallengeParams(const std::string& h) {
  std::map<std::string, std::string> out;
  size_t i = h.find(' ');
  while (i != std::string::npos && i < h.size()) {
    while (i < h.size() && (h[i] == ' ' || h[i] == ',')) ++i;
    size_t eq = h.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = h.substr(i, eq - i), value;
    size_t j = eq + 1;
    if (j < h.size() && h[j] == '"') {
      size_t end = h.find('"', j + 1);
      if (end == std::string::npos) end = h.size();
      value = h.substr(j + 1, end - j - 1);
      i = end + 1;
    } else {
      size_t end = h.find(',', j);
      value = h.substr(j, end == std::string::npos ? std::string::npos : end - j);
      i = end;
    }
    std::transform(key.begin(), key.end(), key.begin(), ::tolower);
    out[key] = value;
  }
  return out;
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += char(c);
    else out += '%', out += hex[c >> 4], out += hex[c & 15];
  }
  return out;
}

bool Transient(CURLcode c) {
  return c == CURLE_COULDNT_CONNECT || c == CURLE_OPERATION_TIMEDOUT || c == CURLE_RECV_ERROR ||
         c == CURLE_SEND_ERROR || c == CURLE_GOT_NOTHING || c == CURLE_COULDNT_RESOLVE_HOST ||
         c == CURLE_PARTIAL_FILE;
}

// What libcurl's callbacks need during one request.
struct Transfer {
  const Request* req;
  Response* resp;
  uint64_t sent = 0;
  std::optional<Error> sink_error;
};

size_t OnHeader(char* data, size_t size, size_t n, void* p) {
  auto* t = static_cast<Transfer*>(p);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  if (line.starts_with("HTTP/")) {  // a new response (after a redirect or 100)
    t->resp->headers.clear();
    size_t sp = line.find(' ');
    t->resp->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon), value = line.substr(colon + 1);
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  value.erase(0, value.find_first_not_of(' '));
  t->resp->headers[name] = value;
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* p) {
  auto* t = static_cast<Transfer*>(p);
  size_t len = size * n;
  bool ok = t->resp->status >= 200 && t->resp->status < 300;
  if (ok && t->req->sink) {
    auto r = t->req->sink(data, len);
    if (!r) {
      t->sink_error = r.error();
      return 0;  // aborts the transfer
    }
    return len;
  }
  if (t->resp->body.size() < (4u << 20)) t->resp->body.append(data, len);
  return len;
}

size_t OnRead(char* buf, size_t size, size_t n, void* p) {
  auto* t = static_cast<Transfer*>(p);
  size_t want = size * n;
  if (t->req->upload_fd >= 0) {
    ssize_t got = ::pread(t->req->upload_fd, buf, want, off_t(t->sent));
    if (got < 0) return CURL_READFUNC_ABORT;
    t->sent += uint64_t(got);
    return size_t(got);
  }
  size_t left = t->req->body.size() - t->sent;
  size_t k = std::min(left, want);
  std::memcpy(buf, t->req->body.data() + t->sent, k);
  t->sent += k;
  return k;
}

int OnProgress(void* p, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
  auto* t = static_cast<Transfer*>(p);
  if (t->req->progress) {
    if (ultotal > 0) t->req->progress(uint64_t(ulnow), uint64_t(ultotal));
    else if (dlnow > 0) t->req->progress(uint64_t(dlnow), uint64_t(dltotal));
  }
  return 0;
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Open(const Reference& ref, const Options& opt) {
  AE_ASSIGN(const CurlLib* lib, LoadCurlLib());
  std::unique_ptr<Session> s(new Session);
  s->C = lib;
  s->ref_ = ref;
  s->opt_ = opt;
  s->base_ = (opt.insecure ? "http://" : "https://") + ref.host;
  s->curl_ = lib->curl_easy_init();
  if (!s->curl_) return Fail(ErrorCode::kUnsupported, "libcurl: curl_easy_init failed");
  s->auth_file_ = opt.auth_file.empty() ? DefaultAuthFile() : opt.auth_file;
  if (!s->auth_file_.empty()) {
    AE_ASSIGN(s->basic_, Credentials(s->auth_file_, ref.host));
  }
  return s;
}

Session::~Session() {
  if (curl_) C->curl_easy_cleanup(curl_);
}

std::string Session::Url(const std::string& path) const { return base_ + "/v2/" + ref_.repository + "/" + path; }

Result<Response> Session::Once(const Request& r, CURLcode* curl_error) {
  CURL* h = curl_;
  C->curl_easy_reset(h);
  Response resp;
  Transfer t{&r, &resp};
  std::string url = r.url.starts_with("http://") || r.url.starts_with("https://") ? r.url : base_ + r.url;
  C->curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  C->curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  C->curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
  C->curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  C->curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
  C->curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);  // blob GETs redirect to storage
  C->curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  C->curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  C->curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  C->curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  C->curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, OnProgress);
  C->curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
  C->curl_easy_setopt(h, CURLOPT_NOPROGRESS, r.progress ? 0L : 1L);
  if (opt_.insecure) {
    C->curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    C->curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  bool upload = r.upload_fd >= 0 || !r.body.empty();
  if (r.method == "HEAD") {
    C->curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (upload) {
    C->curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    C->curl_easy_setopt(h, CURLOPT_READFUNCTION, OnRead);
    C->curl_easy_setopt(h, CURLOPT_READDATA, &t);
    C->curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
                        curl_off_t(r.upload_fd >= 0 ? r.upload_size : r.body.size()));
    C->curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  } else if (r.method == "POST") {
    C->curl_easy_setopt(h, CURLOPT_POST, 1L);
    C->curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    C->curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
  } else if (r.method != "GET") {
    C->curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  curl_slist* headers = nullptr;
  std::vector<std::string> all = r.headers;
  all.push_back("Expect:");  // no 100-continue round trip before a body
  // Credentials go to the registry only, not to where an upload Location
  // points elsewhere (e.g. object storage).
  if (!authorization.empty() && (url + "/").starts_with(base_ + "/")) all.push_back("Authorization: " + authorization);
  for (const auto& x : all) headers = C->curl_slist_append(headers, x.c_str());
  C->curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  ++requests;
  CURLcode rc = C->curl_easy_perform(h);
  C->curl_slist_free_all(headers);
  *curl_error = rc;
  if (t.sink_error) return Unexpected<Error>(*t.sink_error);
  if (rc != CURLE_OK) return Fail(ref_.host + ": " + C->curl_easy_strerror(rc));
  long code = 0;
  C->curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  resp.status = code;
  return resp;
}

Result<void> Session::Authenticate(const Response& challenge) {
  std::string h = challenge.header("www-authenticate");
  std::string scheme = h.substr(0, h.find(' '));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), ::tolower);
  if (scheme == "basic") {
    if (basic_.empty()) return Unexpected<Error>(StatusError(ref_.String(), challenge));
    authorization = "Basic " + basic_;
    return {};
  }
  if (scheme != "bearer")
    return Fail(ErrorCode::kUnsupported, ref_.host + ": asks for '" + scheme + "' authentication; Basic and Bearer are supported");
  auto params = ChallengeParams(h);
  std::string url = params["realm"];
  if (url.empty()) return Fail(ErrorCode::kInvalid, ref_.host + ": a Bearer challenge without a realm");
  std::string sep = url.find('?') == std::string::npos ? "?" : "&";
  if (params.count("service")) url += sep + "service=" + UrlEncode(params["service"]), sep = "&";
  if (params.count("scope")) url += sep + "scope=" + UrlEncode(params["scope"]);
  authorization.clear();
  Request token;
  token.url = url;  // the realm the registry named, often another host
  if (!basic_.empty()) token.headers.push_back("Authorization: Basic " + basic_);  // else an anonymous token
  CURLcode ce;
  auto resp = Once(token, &ce);
  if (!resp) return Unexpected<Error>(resp.error());
  if (resp->status != 200) return Unexpected<Error>(StatusError("token from " + params["realm"], *resp));
  json j = json::parse(resp->body, nullptr, false);
  std::string tok;
  if (j.is_object()) tok = j.value("token", j.value("access_token", ""));
  if (tok.empty()) return Fail(ErrorCode::kInvalid, params["realm"] + ": the token answer has no token");
  authorization = "Bearer " + tok;
  return {};
}

Result<Response> Session::Send(const Request& r) {
  bool authenticated = false;
  int delay = opt_.backoff_ms;
  for (int attempt = 1;; ++attempt) {
    if (attempt > 1 && r.restart) r.restart();
    CURLcode ce = CURLE_OK;
    auto resp = Once(r, &ce);
    bool last = attempt >= std::max(1, opt_.attempts);
    if (!resp) {
      if (ce == CURLE_SSL_CONNECT_ERROR && !opt_.insecure)
        return Fail(resp.error().message + " (a plain HTTP registry? --insecure)");
      if (ce == CURLE_OK || !Transient(ce)) return resp;
      if (last) {
        std::string hint = ce == CURLE_COULDNT_CONNECT ? " (is a registry listening there" +
                                                             std::string(opt_.insecure ? "" : ", and does it speak HTTPS? --insecure for plain HTTP") + ")"
                                                       : "";
        return Fail(resp.error().message + hint + "; tried " + std::to_string(attempt) + " times");
      }
    } else if (resp->status == 401 && !authenticated) {
      authenticated = true;
      AE_TRY(Authenticate(*resp));
      --attempt;  // not a failure of the registry
      continue;
    } else if ((resp->status >= 500 || resp->status == 429) && !last) {
    } else {
      return resp;
    }
    if (opt_.wait) opt_.wait(std::chrono::milliseconds(delay));
    else std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    delay *= 2;
  }
}

Error Session::StatusError(const std::string& what, const Response& resp) const {
  std::string status = std::to_string(resp.status);
  std::string detail;
  json j = json::parse(resp.body, nullptr, false);  // {"errors":[{"code","message"}]}
  if (j.is_object() && j.contains("errors") && j["errors"].is_array() && !j["errors"].empty() &&
      j["errors"][0].is_object())
    detail = j["errors"][0].value("code", "") + ": " + j["errors"][0].value("message", "");
  if (resp.status == 401 || resp.status == 403) {
    std::string why = basic_.empty()
                          ? "no credentials for " + ref_.host + " in " +
                                (auth_file_.empty() ? "$XDG_RUNTIME_DIR/containers/auth.json or ~/.docker/config.json"
                                                    : auth_file_) +
                                " (podman login " + ref_.host + ", or --auth-file)"
                          : "the credentials for " + ref_.host + " in " + auth_file_ + " were refused";
    return Error{what + ": " + status + " from " + ref_.host + ": " + why, 0, ErrorCode::kInvalid};
  }
  if (resp.status == 404)
    return Error{what + ": not found at " + ref_.host + "/" + ref_.repository + " (404" +
                     (detail.empty() ? "" : " " + detail) + ")",
                 0, ErrorCode::kNotFound};
  if (resp.status >= 500 || resp.status == 429)
    return Error{what + ": " + ref_.host + " answered " + status +
                     (resp.status == 429 ? " (too many requests) " : " (a server error) ") +
                     std::to_string(opt_.attempts) + " times" + (detail.empty() ? "" : ": " + detail),
                 0, ErrorCode::kIo};
  return Error{what + ": " + ref_.host + " answered " + status + (detail.empty() ? "" : ": " + detail), 0,
               resp.status >= 400 && resp.status < 500 ? ErrorCode::kInvalid : ErrorCode::kIo};
}

}  // namespace agentenv::registry

// The HTTP listener's head parser and guard (serve/http_head.h), checked
// against the router that parses the same bytes again (cpp-httplib, as
// serve/http_loop.cc runs it): whenever the guard lets a head through and
// the router routes it, the router must have read the same request — one
// Host header naming a loopback host, the token, the same method and
// path (long-lived requests are chosen by them), and exactly the body the
// head announced (else a second request could hide in the first one's
// body, past the guard).
#include <httplib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "serve/http.h"
#include "serve/http_head.h"
#include "serve/http_loop.h"

namespace {

using namespace agentenv;

const std::string kToken = "0123456789abcdef0123456789abcdef";

// The input as a connection's bytes.
class InputStream final : public httplib::Stream {
 public:
  explicit InputStream(std::string_view in) : in_(in) {}
  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - pos_);
    std::copy_n(in_.data() + pos_, n, ptr);
    pos_ += n;
    return ssize_t(n);
  }
  ssize_t write(const char*, size_t size) override { return ssize_t(size); }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 1; }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 2; }
  socket_t socket() const override { return 3; }
  size_t consumed() const { return pos_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "http_head: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  serve::HeadParse p = serve::ParseHead(in);
  if (p.status != serve::HeadParse::Status::kComplete) return 0;
  const serve::RequestHead& h = p.head;
  Check(h.size <= in.size() && h.size <= serve::kMaxHeadBytes, "head size past the input or the bound");
  serve::GuardOptions guard{true, kToken, {}};
  if (serve::Guard(h, guard)) return 0;

  static serve::Router* router = [] {
    auto* r = new serve::Router;
    r->set_payload_max_length(size_t{1} << 20);
    return r;
  }();
  struct Seen {
    bool routed = false;
    size_t hosts = 0, auths = 0;
    std::string host, auth, method, path;
    size_t body = 0;
  };
  static Seen seen;
  static bool installed = [] {
    auto record = [](const httplib::Request& req, httplib::Response& res) {
      seen.routed = true;
      seen.hosts = req.headers.count("Host");
      seen.auths = req.headers.count("Authorization");
      seen.host = req.get_header_value("Host");
      seen.auth = req.get_header_value("Authorization");
      seen.method = req.method;
      seen.path = req.path;
      seen.body = req.body.size();
      res.set_content("ok", "text/plain");
    };
    router->Get(".*", record);
    router->Post(".*", record);
    router->Put(".*", record);
    router->Delete(".*", record);
    router->Patch(".*", record);
    router->Options(".*", record);
    return true;
  }();
  (void)installed;
  seen = Seen{};
  // Only the announced body is the request's; a chunked one is read here too.
  const size_t announced = h.body == serve::RequestHead::Body::kLength ? size_t(h.length) : 0;
  if (h.body == serve::RequestHead::Body::kLength && h.size + announced > in.size()) return 0;
  InputStream stream(in);
  bool closed = false;
  router->Serve(stream, h, h.body != serve::RequestHead::Body::kChunked, true, &closed);
  if (!seen.routed) return 0;
  Check(seen.hosts == 1, "the router saw another number of Host headers than the guard");
  Check(serve::IsLoopbackHost(serve::HostOf(seen.host)), "the router saw a Host the guard would refuse");
  Check(seen.auths == 1 && serve::BearerMatches(seen.auth, kToken), "the router saw another Authorization");
  Check(seen.method == h.method, "the router saw another method");
  Check(seen.path == h.path(), "the router saw another path");
  if (h.body != serve::RequestHead::Body::kChunked) {
    // The router reads a body for these methods only; for another the
    // body stays unread and the listener closes the connection after the
    // reply (serve/http_loop.cc: consumed differs from the request's size).
    const bool reads_body = h.method == "POST" || h.method == "PUT" || h.method == "PATCH" ||
                            h.method == "DELETE" || h.method == "PRI";
    if (reads_body) Check(seen.body == announced, "the router read another body than the head announced");
    Check(stream.consumed() == h.size + (reads_body ? announced : 0), "the router read past the announced request");
  }
  return 0;
}

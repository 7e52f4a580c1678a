// The web DVR's page, reads and live events (web/dvr_routes.h); the
// actions are in dvr_actions.cc.
#include "web/dvr_routes.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>

#include "control/browse.h"
#include "control/ops.h"
#include "web/assets.h"
#include "web/reply.h"
#include "web/summary.h"

namespace agentenv::web {
namespace {

// What the page may load and do: its own files only, no inline script,
// no framing (a page of another site cannot overlay it to steal clicks).
constexpr const char* kPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
// A file shown in the page is cut after this many bytes (download is whole).
constexpr int64_t kViewMax = 1 << 20;
constexpr int kKeepaliveMs = 15000;

void SendAsset(httplib::Response& res, const Asset& a) {
  res.set_header("Content-Security-Policy", kPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-cache");
  res.set_content(std::string(a.body), std::string(a.type));
}

}  // namespace

Dvr::Dvr(control::Server& server, DvrOptions opt)
    : server_(server), opt_(std::move(opt)), index_(server), events_(index_), sessions_(opt_.session_lifetime, opt_.clock) {}

Dvr::~Dvr() { Stop(); }

void Dvr::Stop() { events_.Stop(); }

HistoryIndex& Dvr::Fresh() {
  if (events_.listeners() == 0) (void)index_.Poll();  // a failed poll leaves the last view; the page says nothing new
  return index_;
}

json Dvr::Call(const std::string& op, const json& args, Error* error) {
  auto r = control::CallJson(server_, op, args, {});
  if (!r) {
    *error = r.error();
    return json();
  }
  return std::move(*r);
}

serve::HttpRoutes Dvr::Routes() {
  auto install = [this](httplib::Server& svr) {
    ReadRoutes(svr);
    ActionRoutes(svr);
  };
  // The event stream stays open; a file or an export streams for as long
  // as its client reads: they hold their threads long.
  auto long_lived = [](std::string_view method, std::string_view path) {
    return method == "GET" && (path == "/api/events" || path == "/api/cat" ||
                               (path.starts_with("/api/export/") && !path.ends_with("/progress")));
  };
  // The page and its scripts hold no data: a browser loads them before it
  // has a session.
  auto open = [](std::string_view method, std::string_view path) {
    return method == "GET" && (path == "/" || path.starts_with("/static/"));
  };
  auto session_token = [this](const std::string& cookie) { return sessions_.TokenOf(cookie); };
  return serve::HttpRoutes{install, long_lived, open, session_token};
}

void Dvr::ReadRoutes(httplib::Server& svr) {
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) { SendAsset(res, *FindAsset("index.html")); });
  svr.Get(R"(/static/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    const Asset* a = FindAsset(req.matches[1].str());
    if (!a || a->name == "index.html") return SendError(res, 404, req.path + ": no such file of the page");
    SendAsset(res, *a);
  });

  svr.Get("/api/timeline", [this](const httplib::Request& req, httplib::Response& res) {
    auto from = IntParam(req, "from", 0), to = IntParam(req, "to", 0);
    auto buckets = IntParam(req, "buckets", 200), max_nodes = IntParam(req, "max_nodes", 400);
    if (!from || !to || !buckets || !max_nodes || *buckets < 1 || *max_nodes < 0)
      return SendError(res, 400, "timeline: from and to are nanoseconds since the epoch, buckets >= 1, max_nodes >= 0");
    TimelineQuery q{*from, *to, uint32_t(std::min<int64_t>(*buckets, 2000)), uint32_t(std::min<int64_t>(*max_nodes, 5000))};
    auto timeline = Fresh().Timeline(q);
    if (!timeline) return SendError(res, timeline.error());
    SendJson(res, *timeline);
  });

  svr.Get("/api/node", [this](const httplib::Request& req, httplib::Response& res) {
    Error err;
    json show = Call("show", {{"ref", Param(req, "ref", "HEAD")}, {"packages", true}}, &err);
    if (show.is_null()) return SendError(res, err);
    json out = {{"show", show}};
    const std::string id = show["node"].value("id", "");
    if (auto idx = Fresh().NodeJson(id); idx && !idx->is_null()) out["node"] = std::move(*idx);
    if (show["node"].contains("parent") && show["node"]["parent"].is_string()) {
      auto limit = IntParam(req, "limit", 2000);
      json diff = Call("diff", {{"from", show["node"]["parent"]}, {"to", id}, {"limit", limit.value_or(2000)}}, &err);
      if (diff.is_null()) return SendError(res, err);
      out["diff"] = std::move(diff);
    }
    SendJson(res, out);
  });

  // The environments, as `agentenv env ls` lists them.
  svr.Get("/api/envs", [this](const httplib::Request&, httplib::Response& res) {
    Error err;
    json envs = Call("env_ls", json::object(), &err);
    if (envs.is_null()) return SendError(res, err);
    SendJson(res, envs);
  });

  svr.Get("/api/diff", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string from = Param(req, "from"), to = Param(req, "to");
    if (from.empty() || to.empty()) return SendError(res, 400, "diff: from and to name two nodes (ids, tags, HEAD~N)");
    json args = {{"from", from}, {"to", to}, {"limit", IntParam(req, "limit", 2000).value_or(2000)}};
    if (req.has_param("path")) {
      auto path = NodePath(Param(req, "path"));
      if (!path) return SendError(res, 400, "diff: path '" + Param(req, "path") + "': not a path inside a node");
      if (!path->empty()) args["paths"] = {*path};
    }
    if (Param(req, "patch") == "1") args["patch"] = true;
    Error err;
    json diff = Call("diff", args, &err);
    if (diff.is_null()) return SendError(res, err);
    SendJson(res, diff);
  });

  // A comparison: the nodes between the two with their provenance, the
  // package deltas, and the changed paths.
  svr.Get("/api/compare", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string from = Param(req, "from"), to = Param(req, "to");
    if (from.empty() || to.empty()) return SendError(res, 400, "compare: from and to name two nodes (ids, tags, HEAD~N)");
    auto between = NodesBetween(server_, from, to, 200);
    if (!between) return SendError(res, between.error());
    auto packages = PackagesBetween(server_, from, to);
    if (!packages) return SendError(res, packages.error());
    Error err;
    json diff = Call("diff", {{"from", from}, {"to", to}, {"limit", IntParam(req, "limit", 2000).value_or(2000)}}, &err);
    if (diff.is_null()) return SendError(res, err);
    json out = *between;
    out.update(*packages);
    out["diff"] = std::move(diff);
    SendJson(res, out);
  });

  svr.Get("/api/ls", [this](const httplib::Request& req, httplib::Response& res) {
    auto path = NodePath(Param(req, "path"));
    if (!path) return SendError(res, 400, "ls: path '" + Param(req, "path") + "': not a path inside a node");
    auto ls = control::List(server_, Param(req, "ref", "HEAD"), *path);
    if (!ls) return SendError(res, ls.error());
    SendJson(res, control::ToJson(*ls));
  });

  svr.Get("/api/cat", [this](const httplib::Request& req, httplib::Response& res) {
    auto path = NodePath(Param(req, "path"));
    if (!path || path->empty()) return SendError(res, 400, "cat: path '" + Param(req, "path") + "': not a file inside a node");
    const std::string ref = Param(req, "ref", "HEAD");
    // The entry, from its directory's listing: its size, and a clear
    // error for anything but a file.
    const size_t slash = path->rfind('/');
    const std::string name = slash == std::string::npos ? *path : path->substr(slash + 1);
    auto ls = control::List(server_, ref, slash == std::string::npos ? "" : path->substr(0, slash));
    if (!ls) return SendError(res, ls.error());
    auto found = std::find_if(ls->entries.begin(), ls->entries.end(), [&](const auto& x) { return x.name == name; });
    if (found == ls->entries.end()) return SendError(res, 404, *path + ": not in node " + ref);
    const control::ListedEntry& e = *found;
    if (e.kind != "file" && e.kind != "hardlink")
      return SendError(res, 400, *path + ": a " + e.kind + ", not a file");
    const bool download = Param(req, "download") == "1";
    const int64_t max = download ? INT64_MAX : IntParam(req, "max", kViewMax).value_or(kViewMax);
    std::string file_name = name;
    for (char& c : file_name)
      if (c == '"' || c == '\\' || uint8_t(c) < 0x20) c = '_';
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Content-Security-Policy", "default-src 'none'; sandbox");
    res.set_header("X-File-Size", std::to_string(e.size));
    if (download) res.set_header("Content-Disposition", "attachment; filename=\"" + file_name + "\"");
    // Streamed from the store: a large file is never held whole here.
    res.set_chunked_content_provider("application/octet-stream", [this, ref, p = *path, max](size_t, httplib::DataSink& sink) {
      int64_t left = max;
      auto done = control::Cat(server_, ref, p, [&](std::span<const uint8_t> chunk) -> Result<void> {
        size_t n = size_t(std::min<int64_t>(left, int64_t(chunk.size())));
        if (n && !sink.write(reinterpret_cast<const char*>(chunk.data()), n)) return Fail(ErrorCode::kIo, "client left");
        left -= int64_t(n);
        if (left <= 0) return Fail(ErrorCode::kBusy, "enough");
        return {};
      });
      if (!done && left > 0) return false;  // cut short: the client sees a broken stream, not a whole file
      sink.done();
      return true;
    });
  });

  svr.Get("/api/events", [this](const httplib::Request&, httplib::Response& res) {
    auto listener = events_.Subscribe();
    if (!listener) return SendError(res, 503, "too many pages listen for events; close one");
    res.set_header("Cache-Control", "no-store");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, listener](size_t, httplib::DataSink& sink) {
          std::string hello = EventHub::Sse("hello", {{"total", index_.size()}});
          if (!sink.write(hello.data(), hello.size())) return false;
          auto quiet_since = std::chrono::steady_clock::now();
          // is_writable: the page is still there and the listener runs.
          while (!events_.stopping() && sink.is_writable()) {
            for (const std::string& e : listener->Take(250)) {
              if (!sink.write(e.data(), e.size())) return false;
              quiet_since = std::chrono::steady_clock::now();
            }
            if (std::chrono::steady_clock::now() - quiet_since > std::chrono::milliseconds(kKeepaliveMs)) {
              if (!sink.write(": keepalive\n\n", 13)) return false;  // also finds a page that left
              quiet_since = std::chrono::steady_clock::now();
            }
          }
          return false;
        },
        [this, listener](bool) { events_.Unsubscribe(listener); });
  });
}

}  // namespace agentenv::web

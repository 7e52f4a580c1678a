// The web DVR's actions (web/dvr_routes.h): restore, tag, fork, export
// (its download: dvr_export.cc).
// Each needs the token and a JSON body; with "dry_run" it says what it
// would change (paths and counts) and changes nothing. The real one runs
// the same operation the CLI's verb does, on the daemon's server.
#include <httplib.h>

#include "serve/http.h"
#include "serve/log.h"
#include "snap/layout.h"
#include "web/dvr_routes.h"
#include "web/reply.h"
#include "web/summary.h"

namespace agentenv::web {
namespace {

// A dry run counts at most this many paths per directory; it lists the first kShownPaths.
constexpr size_t kSummaryPaths = 20000, kShownPaths = 200;

}  // namespace

bool Dvr::Authorized(const httplib::Request& req, httplib::Response& res) const {
  if (!serve::BearerMatches(req.get_header_value("Authorization"), opt_.token)) {
    res.set_header("WWW-Authenticate", "Bearer");
    SendError(res, 401, "this action needs the token: send 'Authorization: Bearer <token>' (the token is in " +
                            snap::layout::HttpToken(opt_.root) + "; the page asks for it once)");
    return false;
  }
  if (!req.get_header_value("Content-Type").starts_with("application/json")) {
    SendError(res, 415, "an action's body is JSON (Content-Type: application/json)");
    return false;
  }
  return true;
}

json Dvr::DrySummary(const std::string& from, const std::string& to, const json& paths, Error* err) {
  json args = {{"from", from}, {"limit", kSummaryPaths}};
  if (!to.empty()) args["to"] = to;
  if (paths.is_array() && !paths.empty()) args["paths"] = paths;
  json diff = Call("diff", args, err);
  if (diff.is_null()) return json();
  // To the live tree: the diff reads from the node to it; what a restore
  // does is the reverse (a path only the live tree has is removed).
  if (to.empty())
    for (auto& c : diff["changes"]) c["op"] = c["op"] == "+" ? "-" : c["op"] == "-" ? "+" : c["op"];
  json out = DirectoryCounts(diff["changes"]);
  out["total"] = diff["total"];
  out["truncated"] = diff.value("truncated", false);
  // Packages the step gains or loses (HEAD stands for the live tree, whose
  // packages are recorded at its capture). Left out when they cannot be read.
  auto pk = to.empty() ? PackagesBetween(server_, "HEAD", from) : PackagesBetween(server_, from, to);
  if (pk) out.update(*pk);
  json& changes = diff["changes"];
  if (changes.size() > kShownPaths) {
    changes.erase(changes.begin() + kShownPaths, changes.end());
    out["truncated"] = true;
  }
  out["changes"] = std::move(changes);
  return out;
}

void Dvr::ActionRoutes(httplib::Server& svr) {
  // The token, once, for a session cookie. A session stands for the token
  // it was made from (web/session.h); actions still want the token itself.
  svr.Post("/api/session", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(req, res)) return;
    auto value = sessions_.Open(opt_.token);  // the token presented: it matched
    if (!value) return SendError(res, value.error());
    // Secure when the page came over TLS (a terminating proxy in front).
    const bool tls = req.get_header_value("Origin").starts_with("https://");
    res.set_header("Set-Cookie", sessions_.SetCookie(req.get_header_value("Host"), *value, tls));
    res.set_header("Cache-Control", "no-store");
    SendJson(res, {{"session", true}});
  });

  // Every action: the token, a JSON object body, then `run(body, dry_run)`.
  auto action = [this, &svr](const std::string& path, std::function<json(const json&, bool, Error*)> run) {
    svr.Post(path, [this, path, run](const httplib::Request& req, httplib::Response& res) {
      if (!Authorized(req, res)) return;
      json body = json::parse(req.body, nullptr, false);
      if (!body.is_object()) return SendError(res, 400, path + ": the body must be a JSON object");
      const bool dry = body.value("dry_run", false);
      body.erase("dry_run");
      if (!dry) serve::Log("web: " + path.substr(5) + " " + body.dump());
      Error err;
      json out = run(body, dry, &err);
      if (out.is_null()) return SendError(res, err);
      SendJson(res, out);
    });
  };

  action("/api/restore", [this](const json& b, bool dry, Error* err) -> json {
    const std::string ref = b.value("ref", "");
    if (!dry) return Call("rollback", b, err);
    // What the restore undoes: the live tree against the node (a partial
    // restore: at or below its paths).
    json show = Call("show", {{"ref", ref}}, err);
    if (show.is_null()) return json();
    const std::string id = show["node"].value("id", "");
    json out = DrySummary(id, "", b.value("paths", json::array()), err);
    if (out.is_null()) return json();
    out["node"] = show["node"];
    out["summary"] = "the live tree becomes node " + show["node"].value("short", "") + ": " +
                     std::to_string(out.value("total", 0)) + " path(s) change; unsaved changes are saved as a node first";
    // Counted from the node to the live tree: what the restore undoes is the reverse.
    return out;
  });

  action("/api/tag", [this](const json& b, bool dry, Error* err) -> json {
    if (b.value("name", "").empty()) {
      *err = {"tag: a name is needed", 0, ErrorCode::kInvalid};
      return json();
    }
    if (!dry) return Call("tag", b, err);
    json show = Call("show", {{"ref", b.value("ref", "HEAD")}}, err);
    if (show.is_null()) return json();
    json tags = Call("tag", json::object(), err);
    if (tags.is_null()) return json();
    std::string at;
    for (const auto& t : tags.value("tags", json::array()))
      if (t.value("name", "") == b.value("name", "")) at = t.value("id", "");
    const std::string id = show["node"].value("id", "");
    std::string summary = at.empty()   ? "creates tag " + b.value("name", "") + " at node " + id.substr(0, 12)
                          : at == id ? "tag " + b.value("name", "") + " already names node " + id.substr(0, 12)
                                     : "moves tag " + b.value("name", "") + " from node " + at.substr(0, 12) + " to " +
                                           id.substr(0, 12) + " (needs force)";
    return {{"node", show["node"]}, {"existing", at}, {"summary", summary}};
  });

  action("/api/fork", [this](const json& b, bool dry, Error* err) -> json {
    if (!dry) return Call("fork", b, err);
    json show = Call("show", {{"ref", b.value("ref", "HEAD")}}, err);
    if (show.is_null()) return json();
    const json& d = show["node"];
    json out = DrySummary("HEAD", show["node"].value("id", ""), json::array(), err);
    if (out.is_null()) return json();
    out.update(json{{"node", show["node"]},
            {"summary", "creates workspace " + (b.value("name", "").empty() ? "ws-<node>-<n>" : b.value("name", "")) +
                            " holding node " + show["node"].value("short", "") + " (" +
                            std::to_string(d.value("files", 0)) + " files; below: how it differs from HEAD); the live tree and HEAD do not change"}});
    return out;
  });

  action("/api/export", [this](const json& b, bool dry, Error* err) -> json { return Export(b, dry, err); });
  DownloadRoutes(svr);
}

}  // namespace agentenv::web

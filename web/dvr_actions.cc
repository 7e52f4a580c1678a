// The web DVR's actions (web/dvr_routes.h): restore, tag, fork, export.
// Each needs the token and a JSON body; with "dry_run" it says what it
// would change (paths and counts) and changes nothing. The real one runs
// the same operation the CLI's verb does, on the daemon's server.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>

#include "common/random.h"
#include "common/unique_fd.h"
#include "control/archive.h"
#include "capture/capture.h"
#include "serve/http.h"
#include "serve/log.h"
#include "snap/layout.h"
#include "snap/scratch.h"
#include "web/dvr_routes.h"
#include "web/reply.h"

namespace agentenv::web {
namespace {

constexpr size_t kMaxPendingExports = 4;
constexpr auto kExportLifetime = std::chrono::minutes(10);

}  // namespace

// A tarball made by an export, waiting for its one download.
struct Dvr::PendingExport {
  snap::ScratchDir dir;
  std::string file, name;
  uint64_t size = 0;
  std::chrono::steady_clock::time_point made;
};

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

void Dvr::ActionRoutes(httplib::Server& svr) {
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
    // What the restore undoes: the live tree against the node.
    json show = Call("show", {{"ref", ref}}, err);
    if (show.is_null()) return json();
    json diff = Call("diff", {{"from", show["node"]["id"]}, {"limit", 200}}, err);
    if (diff.is_null()) return json();
    return {{"node", show["node"]}, {"changes", diff["changes"]}, {"total", diff["total"]},
            {"truncated", diff["truncated"]},
            {"summary", "the live tree becomes node " + show["node"].value("short", "") + ": " +
                            std::to_string(diff.value("total", 0)) + " path(s) change; unsaved changes are saved as a node first"}};
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
    return {{"node", show["node"]},
            {"summary", "creates workspace " + (b.value("name", "").empty() ? "ws-<node>-<n>" : b.value("name", "")) +
                            " holding node " + show["node"].value("short", "") + " (" +
                            std::to_string(d.value("files", 0)) + " files); the live tree and HEAD do not change"}};
  });

  action("/api/export", [this](const json& b, bool dry, Error* err) -> json {
    json show = Call("show", {{"ref", b.value("ref", "HEAD")}}, err);
    if (show.is_null()) return json();
    const json& d = show["node"];
    const std::string id = show["node"].value("id", "");
    if (dry)
      return {{"node", show["node"]},
              {"summary", "writes node " + id.substr(0, 12) + " as a .tar.gz (" + std::to_string(d.value("files", 0)) +
                              " files, " + std::to_string(d.value("logical_bytes", 0)) + " bytes before compression); " +
                              "nothing in the repository changes"}};
    auto dir = snap::ScratchDir::Make(snap::layout::WorkParent(opt_.root), "export");
    if (!dir) return *err = dir.error(), json();
    auto pending = std::make_shared<PendingExport>(PendingExport{std::move(*dir), "", "", 0, {}});
    pending->name = "agentenv-" + id.substr(0, 12) + ".tar.gz";
    pending->file = pending->dir.path() + "/" + pending->name;
    auto rep = control::Export(server_, {id, pending->file, ""});
    if (!rep) return *err = rep.error(), json();
    struct stat st{};
    if (::stat(pending->file.c_str(), &st) != 0) return *err = Error{pending->file + ": " + std::strerror(errno)}, json();
    pending->size = uint64_t(st.st_size);
    pending->made = std::chrono::steady_clock::now();
    // No randomness: the export fails rather than hand out a guessable link.
    auto random = RandomHex(16);
    if (!random) return *err = random.error(), json();
    const std::string key = *random;
    {
      MutexLock lock(exports_mu_);
      for (auto it = exports_.begin(); it != exports_.end();)
        it = pending->made - it->second->made > kExportLifetime ? exports_.erase(it) : std::next(it);
      while (exports_.size() >= kMaxPendingExports) exports_.erase(exports_.begin());
      exports_[key] = pending;
    }
    json out = control::ToJson(*rep);
    out["download"] = "/api/export/" + key;
    out["size"] = pending->size;
    out["name"] = pending->name;
    return out;
  });

  // The download link is the capability: 128 random bits, handed only to a
  // token holder, good for one download within kExportLifetime.
  svr.Get(R"(/api/export/([0-9a-f]{32}))", [this](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<PendingExport> p;
    {
      MutexLock lock(exports_mu_);
      auto it = exports_.find(req.matches[1].str());
      if (it != exports_.end() && std::chrono::steady_clock::now() - it->second->made <= kExportLifetime) p = it->second;
      if (it != exports_.end()) exports_.erase(it);
    }
    if (!p) return SendError(res, 404, "no such export (each is downloaded once, within 10 minutes); export again");
    auto fd = std::make_shared<UniqueFd>(::open(p->file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!*fd) return SendError(res, 500, p->file + ": " + std::strerror(errno));
    res.set_header("Content-Disposition", "attachment; filename=\"" + p->name + "\"");
    res.set_header("Cache-Control", "no-store");
    res.set_content_provider(
        p->size, "application/gzip",
        [fd](size_t offset, size_t length, httplib::DataSink& sink) {
          char buf[1 << 16];
          ssize_t n = ::pread(fd->get(), buf, std::min(length, sizeof buf), off_t(offset));
          return n > 0 && sink.write(buf, size_t(n));
        },
        [p](bool) {});  // the scratch directory goes with the last reference
  });
}

}  // namespace agentenv::web

// The web DVR's export (web/dvr_routes.h): the action hands out a one-time
// download link, and the download streams the node as a pax tar while it
// is written (archive::ExportTarTo), so the first bytes leave at once
// instead of after the whole archive was made; the page polls the bytes
// sent against the node's size. Nothing is written to disk.
#include <httplib.h>

#include <atomic>
#include <chrono>

#include "archive/export.h"
#include "common/random.h"
#include "snap/node.h"
#include "web/dvr_routes.h"
#include "web/reply.h"

namespace agentenv::web {
namespace {

constexpr size_t kMaxPendingExports = 4;
constexpr auto kExportLifetime = std::chrono::minutes(10);

}  // namespace

// An export's link: its node, and what its one download has sent so far.
struct Dvr::PendingExport {
  store::ObjectId node;
  std::string name;
  uint64_t expected = 0;  // the node's file bytes: the tar is a little more
  std::chrono::steady_clock::time_point made;
  std::atomic<uint64_t> sent{0};
  std::atomic<bool> taken{false}, done{false}, failed{false};
};

json Dvr::Export(const json& b, bool dry, Error* err) {
  json show = Call("show", {{"ref", b.value("ref", "HEAD")}}, err);
  if (show.is_null()) return json();
  const json& d = show["node"];
  const std::string id = d.value("id", "");
  if (dry) {
    json out = DrySummary("HEAD", id, json::array(), err);
    if (out.is_null()) return json();
    out.update(json{{"node", d},
                    {"summary", "streams node " + id.substr(0, 12) + " as a .tar (" + std::to_string(d.value("files", 0)) +
                                    " files, " + std::to_string(d.value("logical_bytes", 0)) +
                                    " bytes); nothing in the repository changes; below: how it differs from HEAD"}});
    return out;
  }
  auto parsed = store::ObjectId::FromHex(id);
  if (!parsed) return *err = Error{"export: node " + id + ": not an id", 0, ErrorCode::kInvalid}, json();
  // No randomness: the export fails rather than hand out a guessable link.
  auto random = RandomHex(16);
  if (!random) return *err = random.error(), json();
  auto p = std::make_shared<PendingExport>();
  p->node = *parsed;
  p->name = "agentenv-" + id.substr(0, 12) + ".tar";
  p->expected = d.value("logical_bytes", uint64_t{0});
  p->made = std::chrono::steady_clock::now();
  {
    MutexLock lock(exports_mu_);
    for (auto it = exports_.begin(); it != exports_.end();)
      it = p->made - it->second->made > kExportLifetime ? exports_.erase(it) : std::next(it);
    while (exports_.size() >= kMaxPendingExports) exports_.erase(exports_.begin());
    exports_[*random] = p;
  }
  return {{"node", d},
          {"name", p->name},
          {"expected_bytes", p->expected},
          {"download", "/api/export/" + *random},
          {"progress", "/api/export/" + *random + "/progress"}};
}

void Dvr::DownloadRoutes(httplib::Server& svr) {
  auto find = [this](const std::string& key) -> std::shared_ptr<PendingExport> {
    MutexLock lock(exports_mu_);
    auto it = exports_.find(key);
    if (it == exports_.end() || std::chrono::steady_clock::now() - it->second->made > kExportLifetime) return nullptr;
    return it->second;
  };
  // The download link is the capability: 128 random bits, handed only to a
  // token holder, good for one download within kExportLifetime.
  svr.Get(R"(/api/export/([0-9a-f]{32}))", [this, find](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<PendingExport> p = find(req.matches[1].str());
    if (!p || p->taken.exchange(true))
      return SendError(res, 404, "no such export (each is downloaded once, within 10 minutes); export again");
    res.set_header("Content-Disposition", "attachment; filename=\"" + p->name + "\"");
    res.set_header("Cache-Control", "no-store");
    res.set_chunked_content_provider("application/x-tar", [this, p](size_t, httplib::DataSink& sink) {
      auto node = snap::LoadNode(server_.repo().store(), p->node);
      if (!node) {
        p->failed = true;
        return false;
      }
      auto st = archive::ExportTarTo(
          server_.repo().store(), *node, std::nullopt,
          [&](std::span<const uint8_t> bytes) -> Result<void> {
            if (!sink.write(reinterpret_cast<const char*>(bytes.data()), bytes.size()))
              return Fail(ErrorCode::kIo, "export: the client left");
            p->sent += bytes.size();
            return {};
          },
          p->name);
      if (!st) {
        p->failed = true;
        return false;  // cut short: the client sees a broken stream, not a whole file
      }
      p->done = true;
      sink.done();
      return true;
    });
  });
  svr.Get(R"(/api/export/([0-9a-f]{32})/progress)", [find](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<PendingExport> p = find(req.matches[1].str());
    if (!p) return SendError(res, 404, "no such export");
    SendJson(res, {{"sent", p->sent.load()}, {"expected", p->expected}, {"started", p->taken.load()},
                   {"done", p->done.load()}, {"failed", p->failed.load()}});
  });
}

}  // namespace agentenv::web

// The web DVR: a browser UI for the history, on the listener of
// `agentenv serve --listen` beside /mcp (serve/http.h: the same guard of
// Host, Origin and, for a non-loopback bind, the bearer token, runs first).
//
//   GET  /                      the page; /static/<file> its scripts and style
//                               (embedded: web/assets.h)
//   GET  /api/timeline          ?from=&to= (ns), buckets=, max_nodes=: the
//                               nodes of a time range, or buckets of them
//   GET  /api/events            text/event-stream: nodes, refs, resync
//   GET  /api/node?ref=         show, plus the changes against its parent
//   GET  /api/diff?from=&to=    changes between two nodes; &path=&patch=1:
//                               the unified diff of the files at or below path
//   GET  /api/compare?from=&to= the nodes between two nodes (provenance),
//                               their package deltas and their diff
//   GET  /api/ls?ref=&path=     a directory of a node (or the one entry)
//   GET  /api/cat?ref=&path=    a file of a node (&max= bytes; &download=1)
//   POST /api/restore|tag|fork|export   actions, JSON bodies; "dry_run":
//                               true says what would change and changes nothing
//   GET  /api/export/<id>       the node as a tar, streamed as it is
//                               written (once); /progress: bytes sent
//
//   POST /api/session           the token (Authorization: Bearer) for a
//                               session cookie (web/session.h)
//
// On a bind that is not loopback the listener wants the token on every
// request but the page's own files (GET / and /static/*, open): the page
// trades its token for the session cookie, which its reads and its event
// stream then carry.
//
// Reads are the ls, cat, show, diff, log, head and tag operations; actions
// the rollback, tag, fork and export ones, on the daemon's control::Server
// as the CLI and MCP run them. An action always needs
// "Authorization: Bearer <token>" (the token of <root>/http-token), also on
// loopback, and a JSON body: a page of another site can send neither
// (a form post carries no such header), nor read any reply (no CORS).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "control/server.h"
#include "serve/http.h"
#include "web/events.h"
#include "web/history.h"
#include "web/session.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace agentenv::web {

struct DvrOptions {
  std::string root;   // the repository: exports are made under it
  std::string token;  // what actions need; empty: every action refused
  std::chrono::steady_clock::duration session_lifetime = std::chrono::hours(12);
  // The sessions' clock (a test moves its own); default the steady clock.
  std::function<std::chrono::steady_clock::time_point()> clock = std::chrono::steady_clock::now;
};

class Dvr {
 public:
  Dvr(control::Server& server, DvrOptions opt);
  // Stop() first. Must outlive the listener its routes are on.
  ~Dvr();
  // The routes above, to register on the listener (ServeOptions::http_routes).
  serve::HttpRoutes Routes();
  // Ends the event streams and the poller. Idempotent.
  void Stop();
  HistoryIndex& index() { return index_; }
  SessionStore& sessions() { return sessions_; }
  EventHub& events() { return events_; }

 private:
  struct PendingExport;
  void ReadRoutes(httplib::Server& svr);
  void ActionRoutes(httplib::Server& svr);
  // Whether `req` carries the token; otherwise answers 401 itself.
  bool Authorized(const httplib::Request& req, httplib::Response& res) const;
  // The index, brought up to date first when no poller keeps it so.
  HistoryIndex& Fresh();
  json Call(const std::string& op, const json& args, Error* error);
  // A dry run's summary of going from `from` to `to` (a ref; "" the live
  // tree: then what a restore to `from` does to it), at or below `paths`:
  // counts per top directory, the package deltas, then the first 200 paths.
  // The export action (dvr_export.cc): a dry run's summary, else a
  // download link and a progress link.
  json Export(const json& body, bool dry, Error* error);
  void DownloadRoutes(httplib::Server& svr);
  json DrySummary(const std::string& from, const std::string& to, const json& paths, Error* error);

  control::Server& server_;
  DvrOptions opt_;
  HistoryIndex index_;
  EventHub events_;
  SessionStore sessions_;
  Mutex exports_mu_;
  std::map<std::string, std::shared_ptr<PendingExport>> exports_ GUARDED_BY(exports_mu_);  // by link key
};

}  // namespace agentenv::web

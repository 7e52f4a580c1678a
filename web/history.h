// The web DVR's view of the history. The timeline endpoint is answered
// from the metadata index's time index (snap/time_index.h): the nodes of a
// time range when few enough, else buckets summed from the index's bucket
// rows, so that a cold answer at any zoom reads what it shows, not the
// history, and the server holds no row per node. Poll finds what changed
// since the last poll (new nodes, HEAD, tags, nodes retention dropped) from
// the newest page of the log, HEAD, the tags and the node count.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/mutex.h"
#include "common/result.h"
#include "control/server.h"

namespace agentenv::web {

using json = nlohmann::json;

struct TimelineQuery {
  int64_t from_ns = 0, to_ns = 0;  // both 0: the whole history
  uint32_t buckets = 200;           // at most this many buckets (1..2000)
  uint32_t max_nodes = 400;         // nodes themselves when the range holds at most this many
};

// What a Poll saw change since the previous one.
struct HistoryChange {
  std::vector<json> added;  // new nodes, oldest first (as the timeline lists them)
  bool head_moved = false, tags_changed = false, dropped = false;
  bool any() const { return !added.empty() || head_moved || tags_changed || dropped; }
};

class HistoryIndex {
 public:
  explicit HistoryIndex(control::Server& server) : server_(server) {}

  // Makes the time index whole (a repository of an older binary gets it
  // built, once) and reads where history stands: its newest node, node
  // count, HEAD and tags. Thread-safe. Errors: I/O, kCorrupt.
  Result<void> Load();
  // What changed since the last Load or Poll (the first one Loads and
  // announces nothing); more new nodes than one page (64), or nodes
  // dropped, read as `dropped` (the page reloads its view). Thread-safe
  // (one at a time). Errors: as Load.
  Result<HistoryChange> Poll();
  // The timeline of a time range (see TimelineQuery), as JSON: range,
  // totals, HEAD, tags, lanes, the HEAD moves in the range ("jumps",
  // web/timeline_facts.h), then "nodes" (each with its provenance's facts)
  // and "lane_names", or "buckets". One read view of the index.
  // Thread-safe. Errors: as Load.
  Result<json> Timeline(const TimelineQuery& q);
  // The JSON of one node (as in Timeline), or null when it is not in
  // history. Thread-safe. Errors: I/O.
  Result<json> NodeJson(const std::string& id);
  // Nodes in history as of the last Load or Poll.
  size_t size() const;

  // A range past this many nodes is not summed from the nodes themselves
  // (its buckets are then 2^33 ns wide or more).
  static constexpr uint64_t kRawMax = 65536;

 private:
  struct Refs {
    std::string head;
    std::map<std::string, std::string> tags;  // node id -> "a, b"
  };
  Result<Refs> ReadRefs();
  Result<void> Reload() REQUIRES(poll_mu_);
  snap::MetaDb& meta() { return server_.repo().meta(); }

  control::Server& server_;
  Mutex poll_mu_;  // one Load or Poll at a time
  bool loaded_ GUARDED_BY(poll_mu_) = false;
  mutable Mutex mu_;
  uint64_t max_seq_ GUARDED_BY(mu_) = 0;
  uint64_t nodes_ GUARDED_BY(mu_) = 0;
  Refs refs_ GUARDED_BY(mu_);
};

}  // namespace agentenv::web

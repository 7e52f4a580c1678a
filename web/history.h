// The web DVR's index of the history: every node's time, counts, lane,
// tags and HEAD mark, read through the log, head and tag operations
// (control/ops.h) and kept up to date by Poll. It answers the timeline
// endpoint by time range: the nodes themselves when few enough, else
// buckets that summarize them, so a page never loads a 20k-node history.
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

  // Reads the whole history (the log operation without a limit).
  // Thread-safe. Errors: the operations'.
  Result<void> Load();
  // Reads the newest nodes, HEAD and the tags, and folds what changed
  // into the index (a full Load when more changed than the newest page
  // shows, or nodes were dropped). Thread-safe (one at a time). Errors:
  // the operations'.
  Result<HistoryChange> Poll();
  // The timeline of a time range (see TimelineQuery), as JSON: range,
  // totals, HEAD, tags, lanes, then "nodes" or "buckets". Thread-safe.
  json Timeline(const TimelineQuery& q) const;
  // The JSON of one indexed node (as in Timeline), or null. Thread-safe.
  json NodeJson(const std::string& id) const;
  size_t size() const;

 private:
  struct Item {
    std::string id, short_id, title, parent, tags;
    uint64_t seq = 0, changes = 0, thinned = 0;  // thinned: nodes dropped by retention just before it
    int64_t time_ns = 0;
    int lane = 0;
    bool damaged = false;
  };
  json ItemJson(const Item& it) const REQUIRES(mu_);
  // Recomputes lanes (HEAD's ancestry is lane 0; a branch takes the
  // lowest lane free since its parent) and retention gaps. mu_ held.
  void Relayout() REQUIRES(mu_);
  Result<void> Reload() REQUIRES(poll_mu_);  // Load, poll_mu_ held
  static void SortByTime(std::vector<Item>& items);  // the timeline's order: time, then seq
  Result<std::string> ReadHead();
  Result<std::map<std::string, std::string>> ReadTags();  // node id -> "a, b"

  control::Server& server_;
  Mutex poll_mu_;  // one Load or Poll at a time
  int polls_ GUARDED_BY(poll_mu_) = 0;
  bool loaded_ GUARDED_BY(poll_mu_) = false;
  mutable Mutex mu_;
  std::vector<Item> items_ GUARDED_BY(mu_);  // by time, then seq
  std::map<std::string, size_t> by_id_ GUARDED_BY(mu_);
  std::string head_ GUARDED_BY(mu_);
  std::map<std::string, std::string> tags_ GUARDED_BY(mu_);
  uint64_t max_seq_ GUARDED_BY(mu_) = 0;
  int lanes_ GUARDED_BY(mu_) = 1;
};

}  // namespace agentenv::web

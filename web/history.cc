// The web DVR's view of the history (web/history.h).
#include "web/history.h"

#include <algorithm>

#include "history/node_view.h"
#include "web/timeline_facts.h"

namespace agentenv::web {
namespace {

// The newest nodes a poll reads: more new ones than this since the last
// poll (a burst of captures) make the page reload its view.
constexpr size_t kPollPage = 64;
// HEAD moves drawn in one view; a range with more is a bucket view anyway.
constexpr size_t kMaxJumps = 200;
// Names a lane shows at most (oldest first).
constexpr size_t kLaneNames = 4;

json ItemJson(const snap::NodeRecord& n, uint32_t lane, const std::string& head,
              const std::map<std::string, std::string>& tags) {
  const std::string id = n.id.Hex();
  json j = {{"id", id},           {"short", history::Short(n.id)}, {"seq", n.seq}, {"time_ns", n.time_ns},
            {"changes", n.changes}, {"title", n.title},            {"lane", lane}, {"head", id == head}};
  if (n.parent) j["parent"] = n.parent->Hex();
  if (auto t = tags.find(id); t != tags.end()) j["tags"] = t->second;
  // Nodes retention dropped just before it (snap/provenance.h).
  if (n.provenance && n.provenance->thinned && n.provenance->thinned->nodes) j["thinned"] = n.provenance->thinned->nodes;
  if (n.damaged()) j["damaged"] = true;
  AddProvenanceFacts(j, n);
  return j;
}

}  // namespace

Result<HistoryIndex::Refs> HistoryIndex::ReadRefs() {
  Refs r;
  AE_ASSIGN(auto head, meta().GetRef("HEAD"));
  if (head) r.head = head->Hex();
  AE_ASSIGN(auto tags, meta().ListRefs("tag/"));
  for (const auto& [name, id] : tags) {
    std::string& names = r.tags[id.Hex()];
    names += (names.empty() ? "" : ", ") + name.substr(4);
  }
  return r;
}

Result<void> HistoryIndex::Load() {
  MutexLock lock(poll_mu_);
  return Reload();
}

Result<void> HistoryIndex::Reload() {
  AE_TRY(meta().EnsureTimeIndex());
  AE_ASSIGN(auto newest, meta().Recent(1));
  AE_ASSIGN(uint64_t count, meta().NodeCount());
  AE_ASSIGN(Refs refs, ReadRefs());
  loaded_ = true;
  MutexLock lock(mu_);
  max_seq_ = newest.empty() ? 0 : newest.front().seq;
  nodes_ = count;
  refs_ = std::move(refs);
  return {};
}

Result<HistoryChange> HistoryIndex::Poll() {
  MutexLock poll_lock(poll_mu_);
  HistoryChange ch;
  if (!loaded_) {  // the first use reads where history stands: nothing to announce
    AE_TRY(Reload());
    return ch;
  }
  AE_ASSIGN(auto page, meta().Recent(kPollPage + 1));  // newest first
  AE_ASSIGN(uint64_t count, meta().NodeCount());
  AE_ASSIGN(Refs refs, ReadRefs());
  uint64_t seen, nodes;
  Refs old;
  {
    MutexLock lock(mu_);
    seen = max_seq_;
    nodes = nodes_;
    old = refs_;
  }
  std::vector<const snap::NodeRecord*> fresh;  // oldest first
  for (auto it = page.rbegin(); it != page.rend(); ++it)
    if (it->seq > seen) fresh.push_back(&*it);
  const uint64_t max_seq = page.empty() ? 0 : page.front().seq;
  // More new nodes than a page (the oldest of them not seen), or fewer
  // nodes than the new ones account for (retention dropped some): the
  // page reloads its view rather than hear of each.
  ch.dropped = fresh.size() > kPollPage || count != nodes + fresh.size();
  ch.head_moved = refs.head != old.head;
  ch.tags_changed = refs.tags != old.tags;
  if (!ch.dropped && !fresh.empty()) {
    AE_ASSIGN(auto reader, meta().ReadTime());
    for (const snap::NodeRecord* n : fresh) {
      AE_ASSIGN(auto row, reader->Row(*n));
      ch.added.push_back(ItemJson(*n, row ? row->lane : 0, refs.head, refs.tags));
    }
  }
  MutexLock lock(mu_);
  max_seq_ = std::max(max_seq_, max_seq);
  nodes_ = count;
  refs_ = std::move(refs);
  return ch;
}

size_t HistoryIndex::size() const {
  MutexLock lock(mu_);
  return nodes_;
}

Result<json> HistoryIndex::NodeJson(const std::string& id) {
  auto parsed = store::ObjectId::FromHex(id);
  if (!parsed) return json();
  AE_ASSIGN(auto reader, meta().ReadTime());
  AE_ASSIGN(auto rec, reader->GetNode(*parsed));
  if (!rec) return json();
  AE_ASSIGN(auto row, reader->Row(*rec));
  AE_ASSIGN(Refs refs, ReadRefs());
  return ItemJson(*rec, row ? row->lane : 0, refs.head, refs.tags);
}

Result<json> HistoryIndex::Timeline(const TimelineQuery& q) {
  AE_TRY(meta().EnsureTimeIndex());
  AE_ASSIGN(Refs refs, ReadRefs());
  AE_ASSIGN(auto reader, meta().ReadTime());
  AE_ASSIGN(snap::TimeSum all, reader->Sum(INT64_MIN, INT64_MAX));
  AE_ASSIGN(uint32_t lanes, reader->Lanes());
  json out = {{"total", all.nodes}, {"lanes", std::max<uint32_t>(1, lanes)}, {"head", refs.head}};
  std::optional<snap::NodeRecord> head;
  if (auto h = store::ObjectId::FromHex(refs.head)) {
    AE_ASSIGN(head, reader->GetNode(*h));
  }
  if (head) {
    AE_ASSIGN(auto row, reader->Row(*head));
    out["head_node"] = ItemJson(*head, row ? row->lane : 0, refs.head, refs.tags);
  }
  // Tags, with their nodes' times (bounded by the tags, not by history).
  json tags = json::array();
  std::vector<std::pair<int64_t, const std::string*>> tag_times;
  for (const auto& [id, names] : refs.tags) {
    auto parsed = store::ObjectId::FromHex(id);
    if (!parsed) continue;
    AE_ASSIGN(auto rec, reader->GetNode(*parsed));
    if (!rec) continue;
    tags.push_back({{"names", names}, {"id", id}, {"time_ns", rec->time_ns}});
    tag_times.emplace_back(rec->time_ns, &names);
  }
  std::sort(tag_times.begin(), tag_times.end());
  out["tags"] = std::move(tags);
  AE_ASSIGN(auto first, reader->First());
  AE_ASSIGN(auto last, reader->Last());
  if (!first || !last) {
    out["nodes"] = json::array();
    return out;
  }
  out["first_ns"] = first->time_ns;
  out["last_ns"] = last->time_ns;
  int64_t from = q.from_ns, to = q.to_ns;
  if (from == 0 && to == 0) from = first->time_ns, to = last->time_ns;
  if (to < from) std::swap(from, to);
  AE_ASSIGN(snap::TimeSum in_range, reader->Sum(from, to));
  AE_ASSIGN(snap::TimeSum before, from == INT64_MIN ? Result<snap::TimeSum>(snap::TimeSum{}) : reader->Sum(INT64_MIN, from - 1));
  const uint64_t n = in_range.nodes;
  out["from_ns"] = from;
  out["to_ns"] = to;
  out["in_range"] = n;
  out["before"] = before.nodes;
  out["after"] = all.nodes - std::min(all.nodes, before.nodes + n);
  AE_ASSIGN(out["jumps"], Jumps(meta(), *reader, from, to, kMaxJumps));
  if (n <= q.max_nodes) {
    json nodes = json::array();
    // A lane is named after the workspaces or tournaments of its nodes in
    // view, in time order (a lane is reused once free: the live tree after
    // a rollback, a fork, later a candidate).
    std::map<uint32_t, std::vector<std::string>> lane_names;
    AE_TRY(reader->ForEach(from, to, [&](const snap::TimeRow& row) -> Result<bool> {
      AE_ASSIGN(auto rec, reader->GetNode(row.id));
      if (!rec) return true;
      if (std::string name = LaneName(*rec); !name.empty()) {
        auto& names = lane_names[row.lane];
        if (std::find(names.begin(), names.end(), name) == names.end() && names.size() < kLaneNames) names.push_back(name);
      }
      nodes.push_back(ItemJson(*rec, row.lane, refs.head, refs.tags));
      return true;
    }));
    json names = json::object();
    for (const auto& [lane, list] : lane_names) {
      std::string joined;
      for (const std::string& name : list) joined += (joined.empty() ? "" : " · ") + name;
      names[std::to_string(lane)] = joined;
    }
    out["lane_names"] = std::move(names);
    out["nodes"] = std::move(nodes);
    return out;
  }
  AE_ASSIGN(auto bk, reader->Bucketize(from, to, std::clamp<uint32_t>(q.buckets, 1, 2000), kRawMax));
  json buckets = json::array();
  for (const snap::TimeBucket& b : bk.buckets) {
    json j = {{"t0", b.t0},
              {"t1", b.t1},
              {"count", b.sum.nodes},
              {"changes", b.sum.changes},
              {"lanes", b.sum.LaneMask()},
              {"first", b.first.id.Hex()},
              {"last", b.last.id.Hex()},
              {"first_ns", b.first.time_ns},
              {"last_ns", b.last.time_ns}};
    if (head && head->time_ns >= b.t0 && head->time_ns < b.t1) j["head"] = true;
    if (b.sum.thinned) j["thinned"] = b.sum.thinned;
    std::string names;
    for (auto t = std::lower_bound(tag_times.begin(), tag_times.end(), std::make_pair(b.t0, (const std::string*)nullptr));
         t != tag_times.end() && t->first < b.t1; ++t)
      names += (names.empty() ? "" : ", ") + *t->second;
    if (!names.empty()) j["tags"] = names;
    buckets.push_back(std::move(j));
  }
  out["bucket_ns"] = bk.width;
  out["buckets"] = std::move(buckets);
  return out;
}

}  // namespace agentenv::web

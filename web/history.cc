// The web DVR's history index (web/history.h).
#include "web/history.h"

#include <algorithm>
#include <set>

#include "control/ops.h"

namespace agentenv::web {
namespace {

// The newest nodes a poll reads: more new ones than this since the last
// poll (a burst of captures) make it read the whole history again.
constexpr uint64_t kPollPage = 64;
// Every this many polls the whole history is read again, to see nodes
// retention dropped (they are old: the newest page does not show them).
constexpr int kFullEvery = 50;

}  // namespace

void HistoryIndex::SortByTime(std::vector<Item>& items) {
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.seq < b.seq;
  });
}

Result<std::string> HistoryIndex::ReadHead() {
  AE_ASSIGN(control::HeadReply h, control::Op<control::HeadRequest>::Run(server_, {}, {}));
  return h.node.id;
}

Result<std::map<std::string, std::string>> HistoryIndex::ReadTags() {
  AE_ASSIGN(control::TagReply t, control::Op<control::TagRequest>::Run(server_, control::TagRequest{}, {}));
  std::map<std::string, std::string> out;
  for (const auto& e : t.tags.value_or(std::vector<control::TagEntry>{}))
    out[e.id] += (out[e.id].empty() ? "" : ", ") + e.name;
  return out;
}

Result<void> HistoryIndex::Load() {
  MutexLock lock(poll_mu_);
  return Reload();
}

Result<void> HistoryIndex::Reload() {
  AE_ASSIGN(control::LogReply log, control::Op<control::LogRequest>::Run(server_, {UINT32_MAX}, {}));
  AE_ASSIGN(std::string head, ReadHead());
  AE_ASSIGN(auto tags, ReadTags());
  std::vector<Item> items;
  items.reserve(log.nodes.size());
  for (const auto& n : log.nodes)
    items.push_back({n.node.id, n.node.short_id, n.node.title, n.node.parent.value_or(""), "", n.node.seq,
                     n.node.changes, 0, n.node.time_ns, 0, n.node.damaged});
  SortByTime(items);
  MutexLock lock(mu_);
  loaded_ = true;
  items_ = std::move(items);
  head_ = head;
  tags_ = std::move(tags);
  Relayout();
  return {};
}

Result<HistoryChange> HistoryIndex::Poll() {
  MutexLock poll_lock(poll_mu_);
  HistoryChange ch;
  if (!loaded_) {  // the first use reads everything: nothing to announce
    AE_TRY(Reload());
    return ch;
  }
  if (++polls_ % kFullEvery == 0) {
    size_t before = size();
    AE_TRY(Reload());
    ch.dropped = size() < before;
    if (ch.dropped) return ch;
  }
  AE_ASSIGN(control::LogReply log, control::Op<control::LogRequest>::Run(server_, {kPollPage}, {}));
  AE_ASSIGN(std::string head, ReadHead());
  AE_ASSIGN(auto tags, ReadTags());
  std::vector<std::string> added_ids;
  {
    MutexLock lock(mu_);
    uint64_t fresh = 0;
    std::set<std::string> page;
    for (const auto& n : log.nodes) {
      fresh += n.node.seq > max_seq_;
      page.insert(n.node.id);
    }
    // A node the page should hold but does not was dropped (retention).
    const uint64_t oldest = log.more && !log.nodes.empty() ? log.nodes.back().node.seq : 0;
    bool gone = false;
    for (const Item& it : items_) gone |= it.seq >= oldest && !page.count(it.id);
    if ((fresh == log.nodes.size() && log.more) || gone) {
      ch.dropped = true;  // more new nodes than a page, or some dropped: read them all below
    } else {
      for (auto it = log.nodes.rbegin(); it != log.nodes.rend(); ++it) {
        const auto& n = it->node;
        if (n.seq <= max_seq_) continue;
        items_.push_back({n.id, n.short_id, n.title, n.parent.value_or(""), "", n.seq, n.changes, 0, n.time_ns, 0,
                          n.damaged});
        added_ids.push_back(n.id);
      }
      ch.head_moved = head != head_;
      ch.tags_changed = tags != tags_;
      head_ = head;
      tags_ = std::move(tags);
      if (!added_ids.empty() || ch.head_moved || ch.tags_changed) {
        SortByTime(items_);
        Relayout();
      }
    }
  }
  if (ch.dropped) {
    AE_TRY(Reload());
    return ch;
  }
  for (const auto& id : added_ids) ch.added.push_back(NodeJson(id));
  return ch;
}

void HistoryIndex::Relayout() {
  by_id_.clear();
  max_seq_ = 0;
  for (size_t i = 0; i < items_.size(); ++i) {
    by_id_[items_[i].id] = i;
    items_[i].tags.clear();
    max_seq_ = std::max(max_seq_, items_[i].seq);
  }
  for (const auto& [id, names] : tags_)
    if (auto it = by_id_.find(id); it != by_id_.end()) items_[it->second].tags = names;
  std::set<std::string> mainline;
  for (std::string at = head_; !at.empty() && !mainline.count(at);) {
    auto it = by_id_.find(at);
    if (it == by_id_.end()) break;
    mainline.insert(at);
    at = items_[it->second].parent;
  }
  std::vector<size_t> by_seq(items_.size());
  for (size_t i = 0; i < by_seq.size(); ++i) by_seq[i] = i;
  const Item* items = items_.data();  // mu_ is held while the comparator runs
  std::sort(by_seq.begin(), by_seq.end(), [items](size_t a, size_t b) { return items[a].seq < items[b].seq; });
  // Lane 0 is HEAD's ancestry; a node continues its parent's lane when it
  // is that lane's latest node, else takes the lowest lane whose latest
  // node is older than its parent (free since then), else a new one.
  std::vector<int64_t> tip_time = {INT64_MIN};
  std::vector<std::string> tip_id = {""};
  uint64_t prev_seq = 0;
  for (size_t i : by_seq) {
    Item& it = items_[i];
    it.thinned = prev_seq && it.seq > prev_seq + 1 ? it.seq - prev_seq - 1 : 0;
    prev_seq = it.seq;
    int lane = 0;
    if (!mainline.count(it.id)) {
      auto p = by_id_.find(it.parent);
      int plane = p == by_id_.end() ? -1 : items_[p->second].lane;
      int64_t ptime = p == by_id_.end() ? it.time_ns : items_[p->second].time_ns;
      if (plane > 0 && tip_id[size_t(plane)] == it.parent) {
        lane = plane;
      } else {
        lane = int(tip_time.size());
        for (size_t l = 1; l < tip_time.size(); ++l)
          if (tip_time[l] < ptime) {
            lane = int(l);
            break;
          }
        if (size_t(lane) == tip_time.size()) {
          tip_time.push_back(INT64_MIN);
          tip_id.push_back("");
        }
      }
    }
    it.lane = lane;
    tip_time[size_t(lane)] = std::max(tip_time[size_t(lane)], it.time_ns);
    tip_id[size_t(lane)] = it.id;
  }
  lanes_ = int(tip_time.size());
}

json HistoryIndex::ItemJson(const Item& it) const {
  json j = {{"id", it.id},           {"short", it.short_id}, {"seq", it.seq},   {"time_ns", it.time_ns},
            {"changes", it.changes}, {"title", it.title},    {"lane", it.lane}, {"head", it.id == head_}};
  if (!it.parent.empty()) j["parent"] = it.parent;
  if (!it.tags.empty()) j["tags"] = it.tags;
  if (it.thinned) j["thinned"] = it.thinned;
  if (it.damaged) j["damaged"] = true;
  return j;
}

json HistoryIndex::NodeJson(const std::string& id) const {
  MutexLock lock(mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? json() : ItemJson(items_[it->second]);
}

size_t HistoryIndex::size() const {
  MutexLock lock(mu_);
  return items_.size();
}

json HistoryIndex::Timeline(const TimelineQuery& q) const {
  MutexLock lock(mu_);
  json out = {{"total", items_.size()}, {"lanes", lanes_}, {"head", head_}};
  if (auto h = by_id_.find(head_); h != by_id_.end()) out["head_node"] = ItemJson(items_[h->second]);
  json tags = json::array();
  for (const auto& [id, names] : tags_)
    if (auto it = by_id_.find(id); it != by_id_.end())
      tags.push_back({{"names", names}, {"id", id}, {"time_ns", items_[it->second].time_ns}});
  out["tags"] = std::move(tags);
  if (items_.empty()) {
    out["nodes"] = json::array();
    return out;
  }
  out["first_ns"] = items_.front().time_ns;
  out["last_ns"] = items_.back().time_ns;
  int64_t from = q.from_ns, to = q.to_ns;
  if (from == 0 && to == 0) from = items_.front().time_ns, to = items_.back().time_ns;
  if (to < from) std::swap(from, to);
  auto by_time = [](const Item& a, int64_t t) { return a.time_ns < t; };
  auto lo = std::lower_bound(items_.begin(), items_.end(), from, by_time);
  auto hi = std::lower_bound(lo, items_.end(), to + 1, by_time);
  const size_t n = size_t(hi - lo);
  out["from_ns"] = from;
  out["to_ns"] = to;
  out["in_range"] = n;
  out["before"] = size_t(lo - items_.begin());
  out["after"] = size_t(items_.end() - hi);
  if (n <= q.max_nodes) {
    json nodes = json::array();
    for (auto it = lo; it != hi; ++it) nodes.push_back(ItemJson(*it));
    out["nodes"] = std::move(nodes);
    return out;
  }
  // Buckets of equal time; only those that hold nodes are sent.
  const uint32_t count = std::clamp<uint32_t>(q.buckets, 1, 2000);
  const int64_t width = std::max<int64_t>(1, (to - from) / int64_t(count) + 1);
  json buckets = json::array();
  for (auto it = lo; it != hi;) {
    const int64_t index = (it->time_ns - from) / width;
    const int64_t t0 = from + index * width, t1 = t0 + width;
    uint64_t nodes = 0, changes = 0, thinned = 0, lanes = 0;
    bool head = false;
    std::string tag_names;
    const Item& first = *it;
    const Item* last = &*it;
    for (; it != hi && it->time_ns < t1; ++it) {
      ++nodes;
      changes += it->changes;
      thinned += it->thinned;
      lanes |= uint64_t{1} << std::min(it->lane, 31);
      head |= it->id == head_;
      if (!it->tags.empty()) tag_names += (tag_names.empty() ? "" : ", ") + it->tags;
      last = &*it;
    }
    json b = {{"t0", t0}, {"t1", t1}, {"count", nodes}, {"changes", changes}, {"lanes", lanes},
              {"first", first.id}, {"last", last->id}, {"first_ns", first.time_ns}, {"last_ns", last->time_ns}};
    if (head) b["head"] = true;
    if (thinned) b["thinned"] = thinned;
    if (!tag_names.empty()) b["tags"] = tag_names;
    buckets.push_back(std::move(b));
  }
  out["bucket_ns"] = width;
  out["buckets"] = std::move(buckets);
  return out;
}

}  // namespace agentenv::web

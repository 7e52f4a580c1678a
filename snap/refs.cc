// Ref resolution, tags and history queries of Repo (see repo.h).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>

#include "snap/fsops.h"
#include "snap/repo.h"

namespace agentenv::snap {
namespace {

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(uint8_t(c)) && !std::isupper(uint8_t(c)); });
}

bool ValidTagName(const std::string& n) {
  if (n.empty() || n.size() > 200 || n == "HEAD" || n[0] == '-') return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(uint8_t(c)) || c == '-' || c == '_' || c == '.' || c == '/';
  }) && n.find('~') == std::string::npos && n.find("..") == std::string::npos;
}

// "10 minutes ago", "2 h ago", "2026-11-23 14:00[:05]", "2026-11-23",
// "now": nanoseconds since the epoch (dates in local time).
Result<int64_t> ParseWhen(const std::string& when, int64_t now_ns) {
  if (when == "now") return now_ns;
  unsigned long long n = 0;
  char unit[16] = {0};
  int used = 0;
  if (std::sscanf(when.c_str(), "%llu %15s ago%n", &n, unit, &used) == 2 && size_t(used) == when.size()) {
    std::string u = unit;
    if (u.size() > 1 && u.back() == 's') u.pop_back();
    const std::pair<const char*, int64_t> units[] = {{"second", 1}, {"sec", 1}, {"s", 1}, {"minute", 60}, {"min", 60},
                                                     {"m", 60}, {"hour", 3600}, {"h", 3600}, {"day", 86400},
                                                     {"d", 86400}, {"week", 604800}, {"w", 604800}};
    for (const auto& [name, seconds] : units)
      if (u == name) return now_ns - int64_t(n) * seconds * 1000000000;
  }
  struct tm tm {};
  int y, mo, d, h = 0, mi = 0, sec = 0;
  int fields = std::sscanf(when.c_str(), "%d-%d-%d %d:%d:%d%n", &y, &mo, &d, &h, &mi, &sec, &used);
  if (fields == 3 || fields >= 5) {
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = fields == 6 ? sec : 0;
    tm.tm_isdst = -1;
    time_t t = ::mktime(&tm);
    if (t != time_t(-1)) return int64_t(t) * 1000000000 + (fields == 3 ? 0 : 999999999);
  }
  return Fail(ErrorCode::kInvalid, "@{" + when + "}: expected \"N minutes ago\" (seconds, minutes, hours, days, weeks), "
                                   "\"YYYY-MM-DD HH:MM[:SS]\" or \"YYYY-MM-DD\"");
}

}  // namespace

Result<std::optional<store::ObjectId>> Repo::Head() const { return meta_->GetRef("HEAD"); }

Result<NodeRecord> Repo::Record(const store::ObjectId& id) const {
  AE_ASSIGN(auto r, meta_->GetNode(id));
  if (!r) return Fail(ErrorCode::kNotFound, "node " + id.Hex().substr(0, 12) + ": not in history");
  return *r;
}

Result<PackageDeltas> Repo::Packages(const store::ObjectId& id) const {
  AE_ASSIGN(NodeRecord rec, Record(id));
  if (rec.packages) return *rec.packages;
  store::ObjectId from = EmptyTreeId();
  if (rec.parent) {
    AE_ASSIGN(NodeRecord parent, Record(*rec.parent));
    from = parent.tree;
  }
  const store::Store& s = *store_;
  return PackageDeltasBetween([&s](const store::ObjectId& t) { return LoadTree(s, t); },
                              [&s](const store::ObjectId& o) { return s.Get(o); }, from, rec.tree);
}

Result<store::ObjectId> Repo::Resolve(const std::string& ref) const {
  // @{<time>}: the newest node made at or before that time.
  if (ref.size() > 3 && ref.rfind("@{", 0) == 0 && ref.back() == '}') {
    std::string when = ref.substr(2, ref.size() - 3);
    AE_ASSIGN(int64_t t, ParseWhen(when, NowNs()));
    AE_ASSIGN(auto nodes, Log(SIZE_MAX));
    const NodeRecord* best = nullptr;
    for (const auto& r : nodes)
      if (r.time_ns <= t && (!best || r.time_ns > best->time_ns)) best = &r;
    if (!best) return Fail(ErrorCode::kNotFound, "ref '" + ref + "': no node was made at or before that time");
    return best->id;
  }
  // <base>~N and <base>^ walk up the history.
  size_t tilde = ref.find_last_of("~^");
  if (tilde != std::string::npos && tilde > 0) {
    std::string count = ref.substr(tilde + 1);
    if (ref[tilde] == '^' && !count.empty()) return Fail(ErrorCode::kInvalid, "ref '" + ref + "': use <ref>~N");
    uint64_t n = 1;
    if (!count.empty()) {
      if (!std::all_of(count.begin(), count.end(), ::isdigit) || count.size() > 9)
        return Fail(ErrorCode::kInvalid, "ref '" + ref + "': expected <ref>~N with a number N");
      n = std::stoull(count);
    }
    AE_ASSIGN(store::ObjectId id, Resolve(ref.substr(0, tilde)));
    for (uint64_t i = 0; i < n; ++i) {
      AE_ASSIGN(NodeRecord r, Record(id));
      if (!r.parent) return Fail(ErrorCode::kNotFound, "ref '" + ref + "': history has only " + std::to_string(i) + " ancestors");
      id = *r.parent;
    }
    return id;
  }
  if (ref == "HEAD") {
    AE_ASSIGN(auto head, Head());
    if (!head) return Fail(ErrorCode::kNotFound, "HEAD: no snapshot yet (run `agentenv snap`)");
    return *head;
  }
  AE_ASSIGN(auto tag, meta_->GetRef("tag/" + ref));
  if (tag) return *tag;
  if (ref.size() >= 4 && ref.size() <= 64 && IsHex(ref)) {
    AE_ASSIGN(auto ids, meta_->FindPrefix(ref, 5));
    if (ids.size() == 1) return ids[0];
    if (ids.size() > 1) {
      std::string msg = "ref '" + ref + "': ambiguous, matches";
      for (const auto& id : ids) msg += " " + id.Hex().substr(0, 12);
      return Fail(ErrorCode::kInvalid, msg + "; give more digits");
    }
  }
  return Fail(ErrorCode::kNotFound, "ref '" + ref + "': no such node, tag or HEAD (see `agentenv log`)");
}

Result<store::ObjectId> Repo::Tag(const std::string& name, const std::string& ref) {
  if (!ValidTagName(name))
    return Fail(ErrorCode::kInvalid, "tag '" + name + "': use letters, digits, - _ . / (not HEAD, no ~ or ..)");
  AE_ASSIGN(store::ObjectId id, Resolve(ref));
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_TRY(txn->SetRef("tag/" + name, id));
  AE_TRY(txn->Commit());
  return id;
}

Result<void> Repo::Untag(const std::string& name) {
  AE_ASSIGN(auto have, meta_->GetRef("tag/" + name));
  if (!have) return Fail(ErrorCode::kNotFound, "tag '" + name + "': no such tag");
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_TRY(txn->DeleteRef("tag/" + name));
  return txn->Commit();
}

Result<std::vector<std::pair<std::string, store::ObjectId>>> Repo::Tags() const {
  AE_ASSIGN(auto refs, meta_->ListRefs("tag/"));
  for (auto& [name, id] : refs) name = name.substr(4);
  return refs;
}

Result<std::vector<NodeRecord>> Repo::Log(size_t limit) const { return meta_->Recent(limit); }

Result<std::vector<NodeRecord>> Repo::Branches() const {
  AE_ASSIGN(auto tips, meta_->ListRefs("tip/"));
  std::vector<NodeRecord> out;
  for (const auto& [name, id] : tips) {
    AE_ASSIGN(auto r, meta_->GetNode(id));
    if (r) out.push_back(*r);
  }
  std::sort(out.begin(), out.end(), [](const NodeRecord& a, const NodeRecord& b) { return a.seq > b.seq; });
  return out;
}

}  // namespace agentenv::snap

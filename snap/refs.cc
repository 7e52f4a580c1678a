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

// `seconds` since the epoch plus `ns`, held to the range of int64_t: a
// time before 1678 or after 2262 is still before or after every node.
int64_t ToNs(int64_t seconds, int64_t ns) {
  int64_t out;
  if (__builtin_mul_overflow(seconds, int64_t{1000000000}, &out) || __builtin_add_overflow(out, ns, &out))
    return seconds < 0 ? INT64_MIN : INT64_MAX;
  return out;
}


}  // namespace

Result<int64_t> ParseWhen(const std::string& when, int64_t now_ns) {
  if (when == "now") return now_ns;
  unsigned long long n = 0;
  char unit[16] = {0};
  int used = 0;
  if (when.find('-') == std::string::npos &&  // %llu reads "-5" as 2^64 - 5
      std::sscanf(when.c_str(), "%llu %15s ago%n", &n, unit, &used) == 2 && size_t(used) == when.size()) {
    std::string u = unit;
    if (u.size() > 1 && u.back() == 's') u.pop_back();
    const std::pair<const char*, int64_t> units[] = {{"second", 1}, {"sec", 1}, {"s", 1}, {"minute", 60}, {"min", 60},
                                                     {"m", 60}, {"hour", 3600}, {"h", 3600}, {"day", 86400},
                                                     {"d", 86400}, {"week", 604800}, {"w", 604800}};
    for (const auto& [name, seconds] : units) {
      if (u != name) continue;
      int64_t ago, t;
      if (n > uint64_t(INT64_MAX) || __builtin_mul_overflow(int64_t(n), seconds * 1000000000, &ago) ||
          __builtin_sub_overflow(now_ns, ago, &t))
        return INT64_MIN;  // before every node
      return t;
    }
  }
  struct tm tm {};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  int fields = std::sscanf(when.c_str(), "%d-%d-%d %d:%d:%d%n", &y, &mo, &d, &h, &mi, &sec, &used);
  // Fields out of range are no date (and y - 1900 must not overflow).
  bool in_range = y >= 1 && y <= 9999 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h >= 0 && h <= 23 &&
                  mi >= 0 && mi <= 59 && sec >= 0 && sec <= 60;
  if ((fields == 3 || fields >= 5) && in_range) {
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = fields == 6 ? sec : 0;
    tm.tm_isdst = -1;
    time_t t = ::mktime(&tm);
    if (t != time_t(-1)) return ToNs(int64_t(t), fields == 3 ? 0 : 999999999);
  }
  return Fail(ErrorCode::kInvalid, "@{" + when + "}: expected \"N minutes ago\" (seconds, minutes, hours, days, weeks), "
                                   "\"YYYY-MM-DD HH:MM[:SS]\" or \"YYYY-MM-DD\"");
}

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
  auto is_time = [](const std::string& r) { return r.size() > 3 && r.rfind("@{", 0) == 0 && r.back() == '}'; };
  // <base>~N and <base>^ walk up the history: the suffixes are taken off
  // from the right and their steps added up, in a loop (one recursion per
  // suffix overflowed the stack on a ref of a few thousand '~').
  std::string base = ref;
  uint64_t up = 0;
  while (!is_time(base)) {
    size_t tilde = base.find_last_of("~^");
    if (tilde == std::string::npos || tilde == 0) break;
    std::string count = base.substr(tilde + 1);
    if (base[tilde] == '^' && !count.empty()) return Fail(ErrorCode::kInvalid, "ref '" + ref + "': use <ref>~N");
    uint64_t n = 1;
    if (!count.empty()) {
      if (!std::all_of(count.begin(), count.end(), ::isdigit) || count.size() > 9)
        return Fail(ErrorCode::kInvalid, "ref '" + ref + "': expected <ref>~N with a number N");
      n = std::stoull(count);
    }
    up += n;  // at most 10^9 per suffix: no overflow
    base.resize(tilde);
  }
  AE_ASSIGN(store::ObjectId id, [&]() -> Result<store::ObjectId> {
    // @{<time>}: the newest node made at or before that time.
    if (is_time(base)) {
      std::string when = base.substr(2, base.size() - 3);
      AE_ASSIGN(int64_t t, ParseWhen(when, NowNs()));
      // One lookup in the time index (of the nodes of one time, the last made).
      AE_TRY(meta_->EnsureTimeIndex());
      AE_ASSIGN(auto reader, meta_->ReadTime());
      AE_ASSIGN(auto best, reader->AtOrBefore(t));
      if (!best) return Fail(ErrorCode::kNotFound, "ref '" + base + "': no node was made at or before that time");
      return best->id;
    }
    if (base == "HEAD") {
      AE_ASSIGN(auto head, Head());
      if (!head) return Fail(ErrorCode::kNotFound, "HEAD: no snapshot yet (run `agentenv snap`)");
      return *head;
    }
    AE_ASSIGN(auto tag, meta_->GetRef("tag/" + base));
    if (tag) return *tag;
    if (base.size() >= 4 && base.size() <= 64 && IsHex(base)) {
      AE_ASSIGN(auto ids, meta_->FindPrefix(base, 5));
      if (ids.size() == 1) return ids[0];
      if (ids.size() > 1) {
        std::string msg = "ref '" + base + "': ambiguous, matches";
        for (const auto& id : ids) msg += " " + id.Hex().substr(0, 12);
        return Fail(ErrorCode::kInvalid, msg + "; give more digits");
      }
    }
    return Fail(ErrorCode::kNotFound, "ref '" + base + "': no such node, tag or HEAD (see `agentenv log`)");
  }());
  for (uint64_t i = 0; i < up; ++i) {
    AE_ASSIGN(NodeRecord r, Record(id));
    if (!r.parent) return Fail(ErrorCode::kNotFound, "ref '" + ref + "': history has only " + std::to_string(i) + " ancestors");
    id = *r.parent;
  }
  return id;
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

#include "watch/ignore.h"

#include <fcntl.h>

#include "common/read_all.h"
#include "common/unique_fd.h"

#include <optional>
#include <vector>

namespace agentenv::watch {
namespace {

constexpr size_t kInlineComponents = 64;

bool HasWildcard(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
      continue;
    }
    if (s[i] == '*' || s[i] == '?' || s[i] == '[') return true;
  }
  return false;
}

// Checks the component for a dangling '\' or an unterminated '['.
Result<void> CheckGlob(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') {
      if (i + 1 == s.size()) return Fail(ErrorCode::kInvalid, "pattern ends with a lone '\\'");
      ++i;
    } else if (s[i] == '[') {
      size_t j = i + 1;
      if (j < s.size() && (s[j] == '!' || s[j] == '^')) ++j;
      if (j < s.size() && s[j] == ']') ++j;  // a leading ']' is a member
      while (j < s.size() && s[j] != ']') j += (s[j] == '\\') ? 2 : 1;
      if (j >= s.size()) return Fail(ErrorCode::kInvalid, "unterminated '[' in pattern");
      i = j;
    }
  }
  return {};
}

std::string Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out.push_back(s[i]);
  }
  return out;
}

// Matches the bracket expression starting at p[i] == '[' against byte c;
// sets i past the closing ']'. The pattern was validated by CheckGlob.
bool MatchClass(std::string_view p, size_t& i, unsigned char c) {
  ++i;
  bool negate = false;
  if (p[i] == '!' || p[i] == '^') {
    negate = true;
    ++i;
  }
  bool hit = false;
  bool first = true;
  while (first || p[i] != ']') {
    first = false;
    unsigned char lo = static_cast<unsigned char>(p[i] == '\\' ? p[++i] : p[i]);
    ++i;
    unsigned char hi = lo;
    if (p[i] == '-' && i + 1 < p.size() && p[i + 1] != ']') {
      ++i;
      hi = static_cast<unsigned char>(p[i] == '\\' ? p[++i] : p[i]);
      ++i;
    }
    if (lo <= c && c <= hi) hit = true;
  }
  ++i;  // past ']'
  return hit != negate;
}

// fnmatch for one path component: '*' and '?' never see a '/' here because
// components are split beforehand. Backtracks only to the last '*'.
bool GlobMatch(std::string_view p, std::string_view s) {
  size_t pi = 0, si = 0;
  size_t star_p = std::string_view::npos, star_s = 0;
  while (si < s.size()) {
    if (pi < p.size()) {
      char pc = p[pi];
      if (pc == '*') {
        star_p = ++pi;
        star_s = si;
        continue;
      }
      if (pc == '?') {
        ++pi;
        ++si;
        continue;
      }
      if (pc == '[') {
        size_t next = pi;
        if (MatchClass(p, next, static_cast<unsigned char>(s[si]))) {
          pi = next;
          ++si;
          continue;
        }
      } else {
        if (pc == '\\') ++pi;
        if (p[pi] == s[si]) {
          ++pi;
          ++si;
          continue;
        }
      }
    }
    if (star_p == std::string_view::npos) return false;
    pi = star_p;
    si = ++star_s;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

// One literal or glob segment against one component.
template <class Seg>
bool SegmentMatches(const Seg& seg, std::string_view comp) {
  if (seg.kind == Seg::kLiteral) return comp == seg.text;
  return comp.starts_with(seg.prefix) && comp.ends_with(seg.suffix) && GlobMatch(seg.text, comp);
}

template <class Seg>
bool MatchSegments(const std::vector<Seg>& segs, size_t si, const std::string_view* comps,
                   size_t ci, size_t n) {
  for (; si < segs.size(); ++si, ++ci) {
    const Seg& seg = segs[si];
    if (seg.kind == Seg::kAnyDepth) {
      // A trailing "**" means "everything inside", not the directory itself.
      if (si + 1 == segs.size()) return n - ci >= 1;
      if (seg.fixed_tail >= 0) {  // "**/a/*.c": the tail must be the last components
        size_t tail = static_cast<size_t>(seg.fixed_tail);
        return n - ci >= tail && MatchSegments(segs, si + 1, comps, n - tail, n);
      }
      for (size_t k = ci; k <= n; ++k)
        if (MatchSegments(segs, si + 1, comps, k, n)) return true;
      return false;
    }
    if (ci >= n || !SegmentMatches(seg, comps[ci])) return false;
  }
  return ci == n;
}

// Splits relpath into components; returns how many (0 for ""). Components
// beyond the inline buffer go to `overflow`, and `out` then points there.
size_t Split(std::string_view relpath, std::string_view* inline_buf,
             std::vector<std::string_view>& overflow, const std::string_view*& out) {
  size_t n = 0;
  out = inline_buf;
  size_t start = 0;
  while (start <= relpath.size() && !relpath.empty()) {
    size_t slash = relpath.find('/', start);
    if (slash == std::string_view::npos) slash = relpath.size();
    if (slash > start) {
      std::string_view c = relpath.substr(start, slash - start);
      if (n < kInlineComponents) {
        inline_buf[n] = c;
      } else {
        if (overflow.empty()) overflow.assign(inline_buf, inline_buf + kInlineComponents);
        overflow.push_back(c);
      }
      ++n;
    }
    start = slash + 1;
  }
  if (!overflow.empty()) out = overflow.data();
  return n;
}

}  // namespace

IgnoreRules IgnoreRules::Defaults() {
  static const char* const kDefaults =
      "# virtual and runtime file systems, recreated on every start\n"
      "/proc\n/sys\n/dev\n/run\n"
      "# scratch space and package manager caches\n"
      "/tmp\n/var/tmp\n/var/cache/apt\n/var/lib/apt/lists\n"
      "# editor swap, backup and lock files\n"
      "**/*.swp\n**/*.swo\n**/*.swx\n**/*~\n**/.#*\n**/#*#\n**/4913\n"
      "**/.*.kate-swp\n**/.goutputstream-*\n";
  auto r = Parse(kDefaults);
  return r ? std::move(r).value() : IgnoreRules();
}

Result<IgnoreRules> IgnoreRules::WithFile(const std::string& path) {
  IgnoreRules rules = Defaults();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd && errno == ENOENT) return rules;
  if (!fd) return FailErrno(path, errno);
  // A rules file is a few lines; one past 16 MiB is no rules file.
  constexpr size_t kMaxBytes = size_t{16} << 20;
  AE_ASSIGN(std::string text, ReadUpTo(fd.get(), path, kMaxBytes + 1));
  if (text.size() > kMaxBytes) return Fail(ErrorCode::kInvalid, path + ": larger than 16 MiB; not a rules file");
  auto extra = Parse(text);
  if (!extra) return Fail(ErrorCode::kInvalid, path + ": " + extra.error().message);
  rules.Add(*extra);
  return rules;
}

Result<IgnoreRules> IgnoreRules::Parse(std::string_view text) {
  IgnoreRules rules;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    auto r = rules.AddPattern(line);
    if (!r) return Fail(ErrorCode::kInvalid, "line " + std::to_string(line_no) + ": " + r.error().message);
  }
  return rules;
}

Result<void> IgnoreRules::AddPattern(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty() || line.front() == '#') return {};
  // Trailing spaces go unless the last one is escaped.
  while (!line.empty() && line.back() == ' ' &&
         !(line.size() >= 2 && line[line.size() - 2] == '\\'))
    line.remove_suffix(1);
  if (line.empty()) return {};

  Rule rule;
  if (line.front() == '!') {
    rule.negate = true;
    line.remove_prefix(1);
  }
  while (!line.empty() && line.back() == '/') {
    rule.dir_only = true;
    line.remove_suffix(1);
  }
  if (!line.empty() && line.front() == '/') line.remove_prefix(1);
  while (!line.empty()) {
    size_t slash = line.find('/');
    std::string_view comp = line.substr(0, slash);
    line = slash == std::string_view::npos ? std::string_view() : line.substr(slash + 1);
    if (comp.empty()) continue;
    if (comp == "**") {
      if (rule.segments.empty() || rule.segments.back().kind != Segment::kAnyDepth)
        rule.segments.push_back({Segment::kAnyDepth, {}});
      continue;
    }
    AE_TRY(CheckGlob(comp));
    if (HasWildcard(comp)) {
      Segment seg{Segment::kGlob, std::string(comp)};
      size_t special = comp.find_first_of("*?[\\");
      seg.prefix = std::string(comp.substr(0, special));
      size_t star = comp.rfind('*');
      if (star != std::string_view::npos && comp.find_first_of("*?[\\", star + 1) == std::string_view::npos)
        seg.suffix = std::string(comp.substr(star + 1));
      rule.segments.push_back(std::move(seg));
    } else
      rule.segments.push_back({Segment::kLiteral, Unescape(comp)});
  }
  if (rule.segments.empty()) return Fail(ErrorCode::kInvalid, "pattern matches nothing (empty)");
  int tail = 0;
  for (size_t i = rule.segments.size(); i-- > 0;) {
    Segment& seg = rule.segments[i];
    if (seg.kind != Segment::kAnyDepth) {
      if (tail >= 0) ++tail;
      continue;
    }
    seg.fixed_tail = tail;
    tail = -1;
  }
  rule.fixed_len = tail;
  rule.last_name_only = rule.segments.size() == 2 && rule.segments[0].kind == Segment::kAnyDepth &&
                        rule.segments[1].kind != Segment::kAnyDepth;
  rules_.push_back(std::move(rule));
  Index(uint32_t(rules_.size() - 1));
  return {};
}

std::vector<std::string> IgnoreRules::LiteralPaths() const {
  std::vector<std::string> out;
  for (const Rule& r : rules_) {
    if (r.negate) continue;
    std::string path;
    bool literal = true;
    for (const Segment& seg : r.segments) {
      literal = literal && seg.kind == Segment::kLiteral;
      path += (path.empty() ? "" : "/") + seg.text;
    }
    if (literal) out.push_back(std::move(path));
  }
  return out;
}

void IgnoreRules::Add(const IgnoreRules& more) {
  size_t from = rules_.size();
  rules_.insert(rules_.end(), more.rules_.begin(), more.rules_.end());
  for (size_t i = from; i < rules_.size(); ++i) Index(uint32_t(i));
}

void IgnoreRules::Index(uint32_t i) {
  const Rule& r = rules_[i];
  if (!r.last_name_only) {
    other_.push_back(i);
    return;
  }
  const Segment& seg = r.segments[1];
  // A literal name ends with its own last byte, a glob with its literal
  // suffix's (none when it ends with a wildcard).
  const std::string& tail = seg.kind == Segment::kLiteral ? seg.text : seg.suffix;
  by_last_[tail.empty() ? 256 : static_cast<unsigned char>(tail.back())].push_back(i);
}

int IgnoreRules::Verdict(const std::string_view* comps, size_t n, bool is_dir) const {
  for (size_t i = rules_.size(); i-- > 0;) {
    const Rule& r = rules_[i];
    if ((r.dir_only && !is_dir) || (r.fixed_len >= 0 && static_cast<size_t>(r.fixed_len) != n))
      continue;
    if (MatchSegments(r.segments, 0, comps, 0, n)) return r.negate ? 0 : 1;
  }
  return -1;
}

bool IgnoreRules::Ignored(std::string_view relpath, bool is_dir) const {
  if (rules_.empty()) return false;
  std::string_view buf[kInlineComponents];
  std::vector<std::string_view> overflow;
  const std::string_view* comps;
  size_t n = Split(relpath, buf, overflow, comps);
  for (size_t depth = 1; depth <= n; ++depth)
    if (Verdict(comps, depth, depth < n || is_dir) == 1) return true;
  return false;
}

IgnoreRules::DirView IgnoreRules::ForDir(std::string_view dir) const {
  DirView v;
  v.rules_ = this;
  v.dir_ = dir;
  std::string_view buf[kInlineComponents];
  std::vector<std::string_view> overflow;
  const std::string_view* comps;
  size_t depth = Split(dir, buf, overflow, comps);
  for (uint32_t i : other_) {
    const Rule& r = rules_[i];
    if (r.fixed_len < 0) {
      v.whole_.push_back(i);
      continue;
    }
    // No "**": one segment per component, so the entries' depth must be
    // the rule's and the directory must match all but the last segment.
    if (size_t(r.fixed_len) != depth + 1) continue;
    bool prefix = true;
    for (size_t k = 0; k < depth && prefix; ++k) prefix = SegmentMatches(r.segments[k], comps[k]);
    if (prefix) v.last_.push_back(i);
  }
  return v;
}

bool IgnoreRules::DirView::Matches(std::string_view name, bool is_dir) const {
  const IgnoreRules& ir = *rules_;
  if (ir.rules_.empty() || name.empty()) return false;
  // As IgnoreRules::Matches: the highest index that matches wins.
  int64_t best = -1;
  auto try_list = [&](const std::vector<uint32_t>& list, auto&& matches) {
    for (size_t k = list.size(); k-- > 0 && int64_t(list[k]) > best;) {
      const Rule& r = ir.rules_[list[k]];
      if (!(r.dir_only && !is_dir) && matches(r)) {
        best = list[k];
        return;
      }
    }
  };
  // "**/<name>": its second segment; a rule of fixed depth: its last.
  auto any_depth = [&](const Rule& r) { return SegmentMatches(r.segments[1], name); };
  auto fixed = [&](const Rule& r) { return SegmentMatches(r.segments.back(), name); };
  try_list(ir.by_last_[static_cast<unsigned char>(name.back())], any_depth);
  try_list(ir.by_last_[256], any_depth);
  try_list(last_, fixed);
  if (!whole_.empty()) {
    std::string path = dir_.empty() ? std::string(name) : dir_ + "/" + std::string(name);
    std::string_view buf[kInlineComponents];
    std::vector<std::string_view> overflow;
    const std::string_view* comps;
    size_t n = Split(path, buf, overflow, comps);
    try_list(whole_, [&](const Rule& r) { return MatchSegments(r.segments, 0, comps, 0, n); });
  }
  return best >= 0 && !ir.rules_[size_t(best)].negate;
}

bool IgnoreRules::Matches(std::string_view relpath, bool is_dir) const {
  if (rules_.empty()) return false;
  // A scan asks about every entry, and most rules decide from the depth
  // alone (no "**": a fixed component count) or from the last name alone
  // ("**/*.swp"): the path is split only for a rule that needs more (the
  // split buffer is not even made otherwise). A path with empty
  // components ("a//b", "/a", "a/") takes the general way.
  size_t n = 1, last_slash = std::string_view::npos;
  bool clean = !relpath.empty();
  for (size_t i = 0; i < relpath.size() && clean; ++i) {
    if (relpath[i] != '/') continue;
    clean = i > 0 && i + 1 < relpath.size() && relpath[i - 1] != '/';
    ++n;
    last_slash = i;
  }
  if (clean) {
    std::string_view last = relpath.substr(last_slash + 1);  // npos + 1 == 0
    struct Components {
      std::string_view buf[kInlineComponents];
      std::vector<std::string_view> overflow;
      const std::string_view* comps = nullptr;
    };
    std::optional<Components> split;
    // The last matching rule wins: the highest index that matches.
    int64_t best = -1;
    auto try_names = [&](const std::vector<uint32_t>& list) {
      for (size_t k = list.size(); k-- > 0 && int64_t(list[k]) > best;) {
        const Rule& r = rules_[list[k]];
        if (!(r.dir_only && !is_dir) && SegmentMatches(r.segments[1], last)) {
          best = list[k];
          return;
        }
      }
    };
    try_names(by_last_[static_cast<unsigned char>(last.back())]);
    try_names(by_last_[256]);
    for (size_t k = other_.size(); k-- > 0 && int64_t(other_[k]) > best;) {
      const Rule& r = rules_[other_[k]];
      if ((r.dir_only && !is_dir) || (r.fixed_len >= 0 && static_cast<size_t>(r.fixed_len) != n)) continue;
      if (!split) {
        split.emplace();
        Split(relpath, split->buf, split->overflow, split->comps);
      }
      if (MatchSegments(r.segments, 0, split->comps, 0, n)) {
        best = other_[k];
        break;
      }
    }
    return best >= 0 && !rules_[size_t(best)].negate;
  }
  std::string_view buf[kInlineComponents];
  std::vector<std::string_view> overflow;
  const std::string_view* comps;
  n = Split(relpath, buf, overflow, comps);
  return n > 0 && Verdict(comps, n, is_dir) == 1;
}

}  // namespace agentenv::watch

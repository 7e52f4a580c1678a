// Digest: a span of history (digest_span.h) rendered as phases within a
// token budget (see digest.h).
#include "history/digest.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <unordered_map>

#include "history/digest_span.h"
#include "history/node_view.h"

namespace agentenv::history {
namespace {

std::string Clock(int64_t ns, bool with_date) {
  time_t t = time_t(ns / 1000000000);
  struct tm tm;
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, with_date ? "%Y-%m-%d %H:%M" : "%H:%M", &tm);
  return buf;
}

std::string Day(int64_t ns) { return Clock(ns, true).substr(0, 10); }

std::string Count(uint64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string Cut(std::string_view s, size_t n) {
  return s.size() <= n ? std::string(s) : std::string(s.substr(0, n - 3)) + "...";
}

// "apt +jq 1.6-2.1 -vim 2:9.0 ~libc6 2.36-9 -> 2.36-10 (deps libjq1, libonig5)"
// per ecosystem, dependencies by name (or counted when `deps_by_name` is
// off), in the order they happened.
std::string PackagesText(const std::vector<snap::PackageDelta>& all, bool versions, bool deps_by_name) {
  std::string out;
  for (auto eco : {snap::Ecosystem::kApt, snap::Ecosystem::kPip, snap::Ecosystem::kNpm, snap::Ecosystem::kGit}) {
    std::string seg;
    std::vector<std::string> deps;
    for (const snap::PackageDelta& p : all) {
      if (p.ecosystem != eco) continue;
      if (p.dependency) {
        deps.push_back(std::string(1, p.op) + p.name);
        continue;
      }
      seg += " " + std::string(1, p.op) + p.name;
      if (!versions) continue;
      if (p.op == '~') seg += " " + p.old_version + " -> " + p.new_version;
      else if (p.op == '-' && !p.old_version.empty()) seg += " " + p.old_version;
      else if (!p.new_version.empty()) seg += " " + p.new_version;
    }
    if (!deps.empty()) {
      if (deps_by_name) {
        seg += " (deps";
        for (size_t i = 0; i < deps.size(); ++i) seg += (i ? ", " : " ") + deps[i];
        seg += ")";
      } else {
        seg += " (+" + std::to_string(deps.size()) + " deps)";
      }
    }
    if (seg.empty()) continue;
    out += (out.empty() ? "" : "; ") + std::string(snap::EcosystemName(eco)) + seg;
  }
  return out;
}

// The `n` most frequent keys, "key (xN)" when more than once.
std::vector<std::string> Top(const std::map<std::string, size_t>& counts, size_t n, bool show_count) {
  std::vector<std::pair<std::string, size_t>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size() && i < n; ++i)
    out.push_back(show_count && v[i].second > 1 ? v[i].first + " (x" + std::to_string(v[i].second) + ")" : v[i].first);
  return out;
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}


using digest_span::Line;
using digest_span::Span;
using digest_span::SpanNode;

// How much a render shows: 3 (most) .. 0 (least).
struct Detail {
  size_t dirs, commands, messages, failures, command_bytes;
  static Detail At(int level) {
    switch (level) {
      case 3: return {4, 4, 3, 6, 400};
      case 2: return {3, 3, 2, 4, 120};
      case 1: return {2, 2, 1, 3, 60};
      default: return {1, 1, 0, 2, 40};
    }
  }
};

std::string Quoted(std::string_view cmd, size_t max) { return "`" + Cut(cmd, max) + "`"; }

// "`pytest -q` exit 1" or the command alone.
std::string Ran(const SpanNode& n, size_t max) {
  std::string s = Quoted(n.command.empty() ? std::string_view("(no command)") : n.command, max);
  if (!n.outcome.empty()) s += " " + n.outcome;
  return s;
}

void AddPackages(const SpanNode& n, std::vector<snap::PackageDelta>* out) {
  if (n.rec.packages && n.rec.parent)
    out->insert(out->end(), n.rec.packages->items.begin(), n.rec.packages->items.end());
}

// What a set of span nodes did, in one clause: "3 nodes: `a`, `b` exit 1;
// packages: pip +x; dirs: d".
std::string WorkOf(const Span& span, const std::vector<size_t>& idx, const Detail& d) {
  std::map<std::string, size_t> cmds, dirs;
  std::vector<snap::PackageDelta> packages;
  for (size_t i : idx) {
    const SpanNode& n = span.nodes[i];
    if (!n.command.empty()) ++cmds[Ran(n, d.command_bytes)];
    for (const auto& dir : n.dirs) ++dirs[dir];
    AddPackages(n, &packages);
  }
  std::string out = std::to_string(idx.size()) + (idx.size() == 1 ? " node" : " nodes");
  auto ran = Top(cmds, std::max<size_t>(d.commands, 1), true);
  if (!ran.empty()) out += ": ran " + Join(ran, ", ");
  std::string pk = PackagesText(packages, true, true);
  if (!pk.empty()) out += "; packages: " + pk;
  auto top = Top(dirs, std::max<size_t>(d.dirs / 2, 1), false);
  if (!top.empty()) out += "; dirs: " + Join(top, ", ");
  return out;
}

std::string NodeRef(const Span& span, const store::ObjectId& id, const std::unordered_map<store::ObjectId, size_t, store::ObjectIdHash>& index) {
  std::string s = id.Hex().substr(0, 12);
  auto it = index.find(id);
  if (it != index.end()) {
    const SpanNode& n = span.nodes[it->second];
    s += " (" + Clock(n.rec.time_ns, false) + " \"" + Cut(snap::WithoutPackages(n.rec.title, n.rec.packages ? *n.rec.packages : snap::PackageDeltas{}), 50) + "\")";
  }
  return s;
}

}  // namespace

Result<DigestReply> Digest(snap::Repo& repo, const DigestRequest& r, int64_t now_ns,
                           const std::function<bool(const snap::NodeRecord&)>& keep) {
  AE_ASSIGN(std::vector<snap::NodeRecord> newest, repo.Log(1));
  DigestReply rep;
  if (newest.empty()) {
    rep.text = "no snapshots yet";
    rep.tokens = 4;
    return rep;
  }
  int64_t since = newest.front().time_ns - int64_t{24} * 3600 * 1000000000;
  int64_t until = INT64_MAX;
  if (!r.since.empty()) {
    auto t = snap::ParseWhen(r.since, now_ns);
    if (!t) return Fail(ErrorCode::kInvalid, "since: " + t.error().message);
    since = *t;
  }
  if (!r.until.empty()) {
    auto t = snap::ParseWhen(r.until, now_ns);
    if (!t) return Fail(ErrorCode::kInvalid, "until: " + t.error().message);
    until = *t;
  }
  rep.since = FormatTime(since == INT64_MIN ? 0 : since);
  rep.until = FormatTime(until == INT64_MAX ? now_ns : until);
  AE_ASSIGN(Span span, digest_span::ReadSpan(repo, since, until, keep));
  rep.nodes = span.nodes.size();
  if (span.nodes.empty()) {
    rep.text = "no nodes between " + rep.since + " and " + rep.until;
    rep.tokens = (rep.text.size() + 3) / 4;
    return rep;
  }
  std::unordered_map<store::ObjectId, size_t, store::ObjectIdHash> index;
  for (size_t i = 0; i < span.nodes.size(); ++i) index[span.nodes[i].rec.id] = i;
  const auto& nodes = span.nodes;

  // Phases: split at gaps, then merge the closest until few enough.
  struct Phase {
    size_t first = 0, last = 0;
  };
  std::vector<Phase> phases;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (phases.empty() || nodes[i].rec.time_ns - nodes[i - 1].rec.time_ns > kPhaseGap) phases.push_back({i, i});
    phases.back().last = i;
  }
  auto merge_to = [&](size_t max) {
    while (phases.size() > max) {
      size_t best = 1;
      int64_t gap = INT64_MAX;
      for (size_t k = 1; k < phases.size(); ++k) {
        int64_t g = nodes[phases[k].first].rec.time_ns - nodes[phases[k - 1].last].rec.time_ns;
        if (g < gap) gap = g, best = k;
      }
      phases[best - 1].last = phases[best].last;
      phases.erase(phases.begin() + long(best));
    }
  };
  merge_to(kMaxPhases);
  // The phase a time falls in (the last that began before it).
  auto phase_of = [&](int64_t t) {
    size_t k = 0;
    while (k + 1 < phases.size() && nodes[phases[k + 1].first].rec.time_ns <= t) ++k;
    return k;
  };

  std::map<store::ObjectId, std::string> tags;
  if (auto t = repo.Tags())
    for (const auto& [name, id] : *t) tags[id] += (tags[id].empty() ? "" : ", ") + name;

  size_t package_changes = 0, failed = 0;
  for (const SpanNode& n : nodes) {
    if (n.line == Line::kHead && n.rec.packages && n.rec.parent) package_changes += n.rec.packages->items.size();
    if (n.failed) ++failed;
  }
  const size_t rollbacks = span.Rollbacks();
  const bool multi_day = Day(nodes.front().rec.time_ns) != Day(nodes.back().rec.time_ns);
  auto plural = [](size_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); };

  auto render = [&](int level) {
    const Detail d = Detail::At(level);
    rep.phases.clear();
    std::string text = Count(nodes.size()) + " nodes " + Clock(nodes.front().rec.time_ns, true) + " to " +
                       Clock(nodes.back().rec.time_ns, multi_day) + " in " + plural(phases.size(), "phase", "phases") +
                       "; " + std::to_string(package_changes) + " package changes on HEAD's line, " +
                       plural(failed, "failed command", "failed commands") + ", " + plural(rollbacks, "rollback", "rollbacks") +
                       ", " + plural(span.tournaments.size(), "tournament", "tournaments") + ", " +
                       plural(span.forks.size(), "fork", "forks");
    if (span.head) text += "; HEAD " + span.head->Hex().substr(0, 12);
    if (span.capture_stride > 1) text += "; dirs of captures from 1 in " + std::to_string(span.capture_stride);
    text += "\n";
    for (size_t k = 0; k < phases.size(); ++k) {
      const Phase& ph = phases[k];
      DigestPhase dp;
      dp.start = Clock(nodes[ph.first].rec.time_ns, multi_day);
      dp.end = Clock(nodes[ph.last].rec.time_ns, false);
      std::vector<snap::PackageDelta> packages;
      std::map<std::string, size_t> dirs, commands;
      std::vector<std::string> messages;
      std::string root_note;
      uint64_t noise = 0;
      // Failures by command: how many times, the first time and how it ended.
      std::map<std::string, std::pair<size_t, std::string>> fails;
      std::vector<std::string> fail_order;
      for (size_t i = ph.first; i <= ph.last; ++i) {
        const SpanNode& n = nodes[i];
        ++dp.nodes;
        dp.changes += n.rec.changes;
        if (n.failed) {
          std::string where = n.line == Line::kFork ? " in fork " + n.rec.provenance->workspace
                              : n.line == Line::kCandidate ? " in a tournament"
                              : n.line == Line::kUndone ? " (later rolled back)" : "";
          std::string key = Ran(n, d.command_bytes) + where;
          auto [it, fresh] = fails.try_emplace(key, 0, Clock(n.rec.time_ns, false));
          if (fresh) fail_order.push_back(key);
          ++it->second.first;
        }
        if (n.line != Line::kHead) continue;  // forks, candidates and undone work have lines of their own
        for (const auto& dir : n.dirs) ++dirs[dir];
        noise += n.noise;
        if (n.rec.packages && !n.rec.parent) {
          // A root node "installs" everything its tree holds: counted, not listed.
          std::map<std::string, size_t> per;
          for (const auto& p : n.rec.packages->items) ++per[std::string(snap::EcosystemName(p.ecosystem))];
          for (const auto& [eco, c] : n.rec.packages->omitted) per[std::string(snap::EcosystemName(eco))] += c;
          std::string counts;
          for (const auto& [eco, c] : per) counts += (counts.empty() ? "" : ", ") + eco + " " + std::to_string(c);
          if (!counts.empty()) root_note = "   first node " + n.rec.id.Hex().substr(0, 12) + " holds " + counts + " packages\n";
        } else if (n.rec.packages) {
          for (const auto& p : n.rec.packages->items) {
            packages.push_back(p);
            dp.packages.push_back(MakePackageInfos(snap::PackageDeltas{{p}, {}})[0]);
          }
        }
        if (!n.command.empty()) ++commands[Quoted(n.command, d.command_bytes)];
        if (!n.message.empty() && messages.size() < d.messages) messages.push_back("\"" + Cut(n.message, 60) + "\"");
        auto t = tags.find(n.rec.id);
        if (t != tags.end()) dp.tags.push_back(t->second + " (" + n.rec.id.Hex().substr(0, 12) + ")");
      }
      for (size_t f = 0; f < fail_order.size() && f < d.failures; ++f) {
        const auto& [count, first] = fails[fail_order[f]];
        dp.failures.push_back(first + " " + fail_order[f] + (count > 1 ? " (x" + std::to_string(count) + ")" : ""));
      }
      if (fail_order.size() > d.failures) dp.failures.push_back("and " + std::to_string(fail_order.size() - d.failures) + " more");
      for (const auto& m : span.moves) {
        if (phase_of(m.time_ns) != k || !(m.rollback || m.kind == snap::OpKind::kPartialRestore)) continue;
        std::string line = (m.rollback ? "rollback " : "restored paths ") + Clock(m.time_ns, false) + ": HEAD " +
                           (m.from ? m.from->Hex().substr(0, 12) : std::string("(none)")) + " -> " + NodeRef(span, m.to, index);
        if (!m.undone.empty()) line += "; undid " + WorkOf(span, m.undone, d);
        dp.rollbacks.push_back(line);
      }
      for (const auto& t : span.tournaments) {
        if (phase_of(t.time_ns) != k) continue;
        std::string line = "tournament " + Clock(t.time_ns, false) + " " + t.id + ": " +
                           std::to_string(std::max<size_t>(t.count, t.candidates.size())) + " candidates";
        std::string won;
        std::vector<snap::PackageDelta> tp;
        for (const auto& c : t.candidates) {
          const SpanNode& n = nodes[c.node];
          line += "; #" + std::to_string(c.index + 1) + " " + Quoted(n.command, d.command_bytes);
          if (c.test_exit_code) line += " test exit " + std::to_string(*c.test_exit_code);
          if (c.won) won = "#" + std::to_string(c.index + 1);
          AddPackages(n, &tp);
        }
        line += won.empty() ? "; none won" : "; won: " + won + (t.applied ? " (applied to HEAD)" : " (not applied)");
        std::string pk = PackagesText(tp, true, true);
        if (!pk.empty()) line += "; candidates' packages: " + pk;
        dp.tournaments.push_back(line);
      }
      for (const auto& f : span.forks) {
        if (phase_of(nodes[f.nodes.front()].rec.time_ns) != k) continue;
        dp.forks.push_back("fork " + f.workspace + (f.base ? " from " + f.base->Hex().substr(0, 12) : std::string()) +
                           " " + Clock(nodes[f.nodes.front()].rec.time_ns, false) + ": " + WorkOf(span, f.nodes, d) +
                           " (not on HEAD's line)");
      }
      dp.dirs = Top(dirs, d.dirs, false);
      dp.commands = Top(commands, d.commands, true);
      text += std::to_string(k + 1) + ". " + dp.start + "-" + dp.end + " " + Count(dp.nodes) + " nodes, " +
              Count(dp.changes) + " paths\n";
      std::string pk = PackagesText(packages, level >= 1, true);
      text += root_note;
      if (!pk.empty()) text += "   packages: " + pk + "\n";
      if (!dp.dirs.empty() || noise)
        text += "   dirs: " + Join(dp.dirs, ", ") + (noise ? std::string(dp.dirs.empty() ? "" : ", ") + "caches and lock files" : "") + "\n";
      if (!dp.commands.empty()) text += "   ran: " + Join(dp.commands, ", ") + "\n";
      if (!dp.failures.empty()) text += "   failed: " + Join(dp.failures, "; ") + "\n";
      if (!messages.empty()) text += "   notes: " + Join(messages, ", ") + "\n";
      for (const auto& line : dp.rollbacks) text += "   " + line + "\n";
      for (const auto& line : dp.tournaments) text += "   " + line + "\n";
      for (const auto& line : dp.forks) text += "   " + line + "\n";
      if (!dp.tags.empty()) text += "   tags: " + Join(dp.tags, ", ") + "\n";
      rep.phases.push_back(std::move(dp));
    }
    return text;
  };
  const size_t budget = r.max_tokens * 4;
  std::string text;
  for (int level = 3; level >= 0; --level) {
    text = render(level);
    if (text.size() <= budget) break;
  }
  for (size_t max = phases.size(); text.size() > budget && max > 1;) {
    max = std::max<size_t>(1, max / 2);
    merge_to(max);
    text = render(0);
  }
  rep.text = std::move(text);
  rep.tokens = (rep.text.size() + 3) / 4;
  return rep;
}

}  // namespace agentenv::history

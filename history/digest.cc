// Digest: phases, packages, rollbacks and tournaments of a span of
// history, rendered within a token budget (see digest.h).
#include "history/digest.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <unordered_map>

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

// The title without the package label it leads with.
std::string_view BareTitle(const snap::NodeRecord& r) {
  return r.packages ? snap::WithoutPackages(r.title, *r.packages) : std::string_view(r.title);
}

constexpr std::string_view kTournament = "tournament ";
constexpr std::string_view kSavedBefore = "uncommitted changes before restore to ";

// One node of the span with what the digest needs of it.
struct Item {
  const snap::NodeRecord* rec;
  std::vector<std::string> sample_dirs;  // directories of its sampled changes
  std::string message;                   // the user's message, if any
  std::string tournament, candidate;     // a tournament candidate's
};

struct Tournament {
  std::string id;
  int64_t time = 0;
  std::vector<std::string> candidates;  // in order of their nodes
  std::vector<snap::PackageDelta> packages;
  std::string winner;  // the candidate applied, if any
};

struct Phase {
  size_t first = 0, last = 0;  // indexes into the items
  std::vector<std::string> rollbacks, tournament_ids, tags;
};

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

// Directory of a changed path, at most three components deep.
std::string DirOf(const snap::Change& c) {
  std::string_view p = c.path;
  if (!c.is_dir) {
    size_t slash = p.rfind('/');
    p = slash == std::string_view::npos ? std::string_view(".") : p.substr(0, slash);
  }
  size_t at = 0;
  for (int k = 0; k < 3; ++k) {
    at = p.find('/', at);
    if (at == std::string_view::npos) return std::string(p);
    if (k < 2) ++at;
  }
  return std::string(p.substr(0, at));
}

}  // namespace

Result<DigestReply> Digest(snap::Repo& repo, const DigestRequest& r, int64_t now_ns) {
  snap::MetaDb& meta = repo.meta();
  AE_ASSIGN(std::vector<snap::NodeRecord> newest, meta.Recent(1));
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
  // The span, oldest first, from the time index: its records only, never
  // the rest of history.
  std::vector<snap::NodeRecord> span;
  AE_TRY(meta.NodesInTime(since, until, [&](const snap::NodeRecord& n) -> Result<bool> {
    span.push_back(n);
    return true;
  }));
  // A node named by a (possibly short) hex id, in the span or elsewhere in history.
  auto record_of = [&](std::string_view hex) -> Result<std::optional<snap::NodeRecord>> {
    for (const auto& n : span)
      if (n.id.Hex().starts_with(hex)) return std::optional<snap::NodeRecord>(n);
    AE_ASSIGN(auto ids, meta.FindPrefix(std::string(hex), 1));
    if (ids.empty()) return std::optional<snap::NodeRecord>();
    return meta.GetNode(ids.front());
  };

  std::vector<Item> items;
  for (const snap::NodeRecord& n : span) {
    Item item{&n, {}, {}, {}, {}};
    std::string_view bare = BareTitle(n);
    if (bare.starts_with(kTournament)) {
      std::string_view rest = bare.substr(kTournament.size());
      size_t colon = rest.find(": ");
      if (colon != std::string_view::npos) {
        item.tournament = rest.substr(0, colon);
        item.candidate = rest.substr(colon + 2);
      }
    }
    if (auto node = snap::LoadNode(repo.store(), n.id)) {
      item.message = node->message;
      for (const auto& c : node->changes.sample) item.sample_dirs.push_back(DirOf(c));
    }
    items.push_back(std::move(item));
  }
  rep.since = FormatTime(since == INT64_MIN ? 0 : since);
  rep.until = FormatTime(until == INT64_MAX ? now_ns : until);
  rep.nodes = items.size();
  if (items.empty()) {
    rep.text = "no nodes between " + rep.since + " and " + rep.until;
    rep.tokens = (rep.text.size() + 3) / 4;
    return rep;
  }

  // Tournaments, and which candidate node is whose.
  std::map<std::string, Tournament> tournaments;
  std::vector<std::string> tournament_order;
  std::unordered_map<std::string, std::pair<std::string, std::string>> candidate_of;  // node hex -> (id, candidate)
  for (const Item& it : items) {
    if (it.tournament.empty()) continue;
    auto [t, fresh] = tournaments.try_emplace(it.tournament);
    if (fresh) {
      t->second.id = it.tournament;
      t->second.time = it.rec->time_ns;
      tournament_order.push_back(it.tournament);
    }
    t->second.candidates.push_back(it.candidate);
    if (it.rec->packages)
      for (const auto& p : it.rec->packages->items) t->second.packages.push_back(p);
    candidate_of[it.rec->id.Hex()] = {it.tournament, it.candidate};
  }
  auto candidate_prefixed = [&](std::string_view short_id) -> const std::pair<std::string, std::string>* {
    for (const auto& [hex, c] : candidate_of)
      if (hex.starts_with(short_id)) return &c;
    return nullptr;
  };

  // Rollbacks along the live line (every node that is no candidate).
  std::vector<std::string> rollback_of(items.size());  // text at the node where it shows
  auto rollback_text = [&](int64_t when, std::string_view to) -> Result<std::string> {
    std::string text = "rollback " + Clock(when, false) + " to " + std::string(to.substr(0, 12));
    AE_ASSIGN(auto rec, record_of(to));
    if (rec) text += " (" + Clock(rec->time_ns, false) + " \"" + Cut(BareTitle(*rec), 50) + "\")";
    return text;
  };
  const snap::NodeRecord* prev_live = nullptr;
  std::string pending_target;  // a restore announced by its saved node
  size_t rollbacks = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const snap::NodeRecord& n = *items[i].rec;
    if (!items[i].tournament.empty()) continue;
    std::string_view bare = BareTitle(n);
    if (prev_live && n.parent && *n.parent != prev_live->id) {
      std::string parent = n.parent->Hex();
      if (auto c = candidate_prefixed(parent)) {
        tournaments[c->first].winner = c->second;
      } else if (pending_target.empty() || !parent.starts_with(pending_target)) {
        AE_ASSIGN(rollback_of[i], rollback_text(n.time_ns, parent));
        ++rollbacks;
      }
    }
    pending_target.clear();
    if (bare.starts_with(kSavedBefore)) {
      std::string target(bare.substr(kSavedBefore.size()));
      if (auto c = candidate_prefixed(target)) {
        tournaments[c->first].winner = c->second;
      } else {
        AE_ASSIGN(rollback_of[i], rollback_text(n.time_ns, target));
        ++rollbacks;
      }
      pending_target = target;
    }
    prev_live = &n;
  }
  AE_ASSIGN(auto head, repo.Head());
  std::string head_note;
  if (head && prev_live && *head != prev_live->id) {
    std::string h = head->Hex();
    if (auto c = candidate_prefixed(h)) {
      tournaments[c->first].winner = c->second;
    } else if (pending_target.empty()) {
      AE_ASSIGN(auto in_history, meta.GetNode(*head));
      if (in_history) {
        AE_ASSIGN(head_note, rollback_text(until == INT64_MAX ? now_ns : until, h));
        head_note += ", HEAD is there";
        ++rollbacks;
      }
    }
  }

  // Phases: split at gaps, then merge the closest until few enough.
  std::vector<Phase> phases;
  for (size_t i = 0; i < items.size(); ++i) {
    if (phases.empty() || items[i].rec->time_ns - items[i - 1].rec->time_ns > kPhaseGap) phases.push_back({i, i, {}, {}, {}});
    phases.back().last = i;
  }
  auto merge_to = [&](size_t max) {
    while (phases.size() > max) {
      size_t best = 1;
      int64_t gap = INT64_MAX;
      for (size_t k = 1; k < phases.size(); ++k) {
        int64_t g = items[phases[k].first].rec->time_ns - items[phases[k - 1].last].rec->time_ns;
        if (g < gap) gap = g, best = k;
      }
      phases[best - 1].last = phases[best].last;
      phases.erase(phases.begin() + long(best));
    }
  };
  merge_to(kMaxPhases);

  std::map<store::ObjectId, std::string> tags;
  if (auto t = repo.Tags())
    for (const auto& [name, id] : *t) tags[id] += (tags[id].empty() ? "" : ", ") + name;

  size_t package_changes = 0;
  for (const Item& it : items)
    if (it.rec->packages && it.rec->parent) package_changes += it.rec->packages->items.size();
  const bool multi_day = Day(items.front().rec->time_ns) != Day(items.back().rec->time_ns);

  // Renders at a detail level: 3 (most) .. 0; the structured phases are
  // those of the last render.
  auto render = [&](int level) {
    rep.phases.clear();
    std::string text = Count(items.size()) + " nodes " + Clock(items.front().rec->time_ns, true) + " to " +
                       Clock(items.back().rec->time_ns, multi_day) + " in " + std::to_string(phases.size()) +
                       " phases; " + std::to_string(package_changes) + " package changes, " + std::to_string(rollbacks) +
                       (rollbacks == 1 ? " rollback, " : " rollbacks, ") + std::to_string(tournaments.size()) +
                       (tournaments.size() == 1 ? " tournament" : " tournaments");
    if (head) text += "; HEAD " + head->Hex().substr(0, 12);
    text += "\n";
    const size_t n_dirs = level >= 3 ? 4 : level == 2 ? 3 : level == 1 ? 2 : 1;
    const size_t n_cmds = level >= 3 ? 3 : level == 2 ? 2 : level == 1 ? 1 : 0;
    const size_t n_msgs = n_cmds;
    std::set<std::string> shown_tournaments;
    for (size_t k = 0; k < phases.size(); ++k) {
      const Phase& ph = phases[k];
      DigestPhase dp;
      dp.start = Clock(items[ph.first].rec->time_ns, multi_day);
      dp.end = Clock(items[ph.last].rec->time_ns, false);
      std::vector<snap::PackageDelta> packages;
      std::map<std::string, size_t> dirs, commands;
      std::vector<std::string> messages;
      std::string root_note;
      for (size_t i = ph.first; i <= ph.last; ++i) {
        const Item& it = items[i];
        ++dp.nodes;
        dp.changes += it.rec->changes;
        for (const auto& d : it.sample_dirs) ++dirs[d];
        if (!it.tournament.empty()) {
          if (shown_tournaments.insert(it.tournament).second) {
            const Tournament& t = tournaments[it.tournament];
            std::string line = "tournament " + Clock(t.time, false) + " " + t.id + ": " +
                               std::to_string(t.candidates.size()) + " candidates (";
            for (size_t c = 0; c < t.candidates.size(); ++c) line += (c ? "; " : "") + Cut(t.candidates[c], 40);
            line += "), ";
            line += t.winner.empty() ? "none applied" : "applied \"" + Cut(t.winner, 40) + "\"";
            std::string tp = PackagesText(t.packages, true, true);
            if (!tp.empty()) line += "; candidates' packages: " + tp;
            dp.tournaments.push_back(line);
          }
          continue;
        }
        if (it.rec->packages && !it.rec->parent) {
          // A root node "installs" everything its tree holds: counted, not listed.
          std::map<std::string, size_t> per;
          for (const auto& p : it.rec->packages->items) ++per[std::string(snap::EcosystemName(p.ecosystem))];
          for (const auto& [eco, n] : it.rec->packages->omitted) per[std::string(snap::EcosystemName(eco))] += n;
          std::string counts;
          for (const auto& [eco, n] : per) counts += (counts.empty() ? "" : ", ") + eco + " " + std::to_string(n);
          if (!counts.empty()) root_note = "   first node " + it.rec->id.Hex().substr(0, 12) + " holds " + counts + " packages\n";
        } else if (it.rec->packages) {
          for (const auto& p : it.rec->packages->items) {
            packages.push_back(p);
            dp.packages.push_back(MakePackageInfos(snap::PackageDeltas{{p}, {}})[0]);
          }
        }
        std::string_view bare = BareTitle(*it.rec);
        if (bare.starts_with("exec: ")) {
          std::string_view cmd = bare.substr(6);
          if (cmd.starts_with("/bin/sh -c ")) cmd.remove_prefix(11);
          ++commands[Cut(cmd, 40)];
        }
        if (!it.message.empty() && messages.size() < n_msgs) messages.push_back("\"" + Cut(it.message, 60) + "\"");
        if (!rollback_of[i].empty()) dp.rollbacks.push_back(rollback_of[i]);
        auto t = tags.find(it.rec->id);
        if (t != tags.end()) dp.tags.push_back(t->second + " (" + it.rec->id.Hex().substr(0, 12) + ")");
      }
      if (k + 1 == phases.size() && !head_note.empty()) dp.rollbacks.push_back(head_note);
      dp.dirs = Top(dirs, n_dirs, false);
      dp.commands = Top(commands, n_cmds, true);
      text += std::to_string(k + 1) + ". " + dp.start + "-" + dp.end + " " + Count(dp.nodes) + " nodes, " +
              Count(dp.changes) + " paths\n";
      std::string pk = PackagesText(packages, level >= 1, true);
      text += root_note;
      if (!pk.empty()) text += "   packages: " + pk + "\n";
      if (!dp.dirs.empty()) text += "   dirs: " + Join(dp.dirs, ", ") + "\n";
      if (!dp.commands.empty()) text += "   ran: " + Join(dp.commands, ", ") + "\n";
      if (!messages.empty()) text += "   notes: " + Join(messages, ", ") + "\n";
      for (const auto& line : dp.rollbacks) text += "   " + line + "\n";
      for (const auto& line : dp.tournaments) text += "   " + line + "\n";
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

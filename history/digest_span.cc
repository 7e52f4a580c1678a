// ReadSpan: a digest's span sorted by provenance and the operation log
// (see digest_span.h).
#include "history/digest_span.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace agentenv::history::digest_span {
namespace {

using IdSet = std::unordered_set<store::ObjectId, store::ObjectIdHash>;
using IdIndex = std::unordered_map<store::ObjectId, size_t, store::ObjectIdHash>;

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

// `from` and its ancestors that are in the span (the walk stops where the
// span does).
IdSet Ancestors(const std::vector<SpanNode>& nodes, const IdIndex& index, std::optional<store::ObjectId> from) {
  IdSet out;
  while (from) {
    auto it = index.find(*from);
    if (it == index.end() || !out.insert(*from).second) break;
    from = nodes[it->second].rec.parent;
  }
  return out;
}

}  // namespace

bool Noise(std::string_view path) {
  static constexpr std::string_view kParts[] = {
      "/.npm/",        ".npm/",      "/.cache/",     ".cache/",        "__pycache__", "var/cache/",
      "var/lib/apt/lists", "var/log/", ".pytest_cache", "node_modules/.cache", "/.git/objects", ".git/objects"};
  for (std::string_view part : kParts)
    if (path.starts_with(part) || path.find(part) != std::string_view::npos) return true;
  size_t slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return name == "package-lock.json" || name == "yarn.lock" || name == "poetry.lock" || name == "Cargo.lock" ||
         name == "pnpm-lock.yaml" || name.ends_with(".pyc");
}

size_t Span::Rollbacks() const {
  return size_t(std::count_if(moves.begin(), moves.end(), [](const Move& m) { return m.rollback; }));
}

Result<Span> ReadSpan(snap::Repo& repo, int64_t since_ns, int64_t until_ns,
                      const std::function<bool(const snap::NodeRecord&)>& keep) {
  Span span;
  // The nodes made in the window, oldest first, from the time index: the
  // span's records only, never the rest of history.
  AE_TRY(repo.meta().NodesInTime(since_ns, until_ns, [&](const snap::NodeRecord& rec) -> Result<bool> {
    if (keep && !keep(rec)) return true;
    SpanNode n;
    n.rec = rec;
    if (const auto& p = n.rec.provenance) {
      n.command = snap::CommandText(*p);
      n.outcome = snap::OutcomeText(p->outcome);
      n.failed = p->outcome.failed();
      if (p->tournament) n.line = Line::kCandidate;
      else if (!p->workspace.empty() || p->kind == snap::ProvenanceKind::kWorkspace) n.line = Line::kFork;
      n.message = p->message;
    }
    span.nodes.push_back(std::move(n));
    return true;
  }));
  // The directories come from node objects, one read per node: every node
  // a person or a command made, and of the watcher's captures (a busy day
  // holds tens of thousands) an even sample of at most kCaptureSample, so
  // the digest of a day costs the same at any rate of capture.
  constexpr size_t kCaptureSample = 2000;
  auto capture = [](const SpanNode& n) {
    return n.rec.provenance && n.rec.provenance->kind == snap::ProvenanceKind::kCapture && n.command.empty();
  };
  const size_t captures = size_t(std::count_if(span.nodes.begin(), span.nodes.end(), capture));
  span.capture_stride = std::max<size_t>(1, (captures + kCaptureSample - 1) / kCaptureSample);
  size_t capture_at = 0;
  for (SpanNode& n : span.nodes) {
    if (capture(n) && capture_at++ % span.capture_stride != 0) continue;
    if (auto node = snap::LoadNode(repo.store(), n.rec.id)) {
      if (n.message.empty()) n.message = node->message;
      for (const auto& c : node->changes.sample) {
        if (Noise(c.path)) ++n.noise;
        else n.dirs.push_back(DirOf(c));
      }
    }
  }
  IdIndex index;
  for (size_t i = 0; i < span.nodes.size(); ++i) index[span.nodes[i].rec.id] = i;

  // HEAD's line; the other live nodes were left behind by a restore.
  AE_ASSIGN(span.head, repo.Head());
  const IdSet head_line = Ancestors(span.nodes, index, span.head);
  for (SpanNode& n : span.nodes)
    if (n.line == Line::kHead && !head_line.count(n.rec.id)) n.line = Line::kUndone;

  // Moves of HEAD in the window: a restore to an older node undid the
  // live nodes between where HEAD was and where it went.
  AE_ASSIGN(auto ops, repo.meta().Operations(since_ns, until_ns == INT64_MAX ? INT64_MAX : until_ns + 1, 10000));
  IdSet undone_seen;
  for (const snap::Operation& op : ops) {
    Move m{op.time_ns, op.kind, op.from, op.to, false, {}};
    if (op.kind == snap::OpKind::kRestore || op.kind == snap::OpKind::kTournamentApply) {
      const IdSet kept = Ancestors(span.nodes, index, op.to);
      std::optional<store::ObjectId> at = op.saved ? op.saved : op.from;
      const IdSet left = Ancestors(span.nodes, index, at);
      for (const auto& id : left)
        if (!kept.count(id) && span.nodes[index[id]].line != Line::kCandidate && undone_seen.insert(id).second)
          m.undone.push_back(index[id]);
      std::sort(m.undone.begin(), m.undone.end());
      // Older: `to` is an ancestor of where HEAD was, or work was left.
      m.rollback = op.kind == snap::OpKind::kRestore && (!m.undone.empty() || (op.from && left.count(op.to)));
    }
    span.moves.push_back(std::move(m));
  }

  // Tournaments by id, candidates by index; forks by workspace.
  std::map<std::string, size_t> tournament_at, fork_at;
  for (size_t i = 0; i < span.nodes.size(); ++i) {
    const SpanNode& n = span.nodes[i];
    if (n.line == Line::kCandidate) {
      const snap::TournamentRole& role = *n.rec.provenance->tournament;
      auto [it, fresh] = tournament_at.try_emplace(role.id, span.tournaments.size());
      if (fresh) span.tournaments.push_back({role.id, n.rec.time_ns, role.count, {}, false});
      Tournament& t = span.tournaments[it->second];
      t.count = std::max(t.count, role.count);
      t.candidates.push_back({role.index, i, role.test_exit_code, role.won});
    } else if (n.line == Line::kFork) {
      const snap::Provenance& p = *n.rec.provenance;
      auto [it, fresh] = fork_at.try_emplace(p.workspace, span.forks.size());
      if (fresh) span.forks.push_back({p.workspace, p.base, {}});
      span.forks[it->second].nodes.push_back(i);
    }
  }
  for (Tournament& t : span.tournaments) {
    std::sort(t.candidates.begin(), t.candidates.end(), [](const Candidate& a, const Candidate& b) { return a.index < b.index; });
    for (const Move& m : span.moves)
      if (m.kind == snap::OpKind::kTournamentApply)
        for (Candidate& c : t.candidates)
          if (span.nodes[c.node].rec.id == m.to) c.won = t.applied = true;
  }
  return span;
}

}  // namespace agentenv::history::digest_span

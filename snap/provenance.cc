// Provenance: names, bounds and the byte format of the node record's
// provenance section (see provenance.h, docs/meta-format.md).
#include "snap/provenance.h"

#include <algorithm>
#include <array>

#include "snap/fields.h"

namespace agentenv::snap {
namespace {

constexpr std::array<std::string_view, 13> kKindNames = {
    "unknown", "init",           "capture",    "snapshot", "exec", "shell",    "supervise",
    "save",    "partial_restore", "tournament", "import",   "pull", "workspace"};
constexpr std::array<std::string_view, 7> kOriginNames = {"unknown", "cli",     "socket",   "mcp",
                                                          "web",     "capture", "supervise"};

// The provenance section's field tags (docs/meta-format.md).
enum Tag : uint64_t {
  kKind = 1, kArg = 2, kLine = 3, kCommandCut = 4, kCwd = 5, kExitCode = 6, kSignal = 7,
  kOutcomeFlags = 8, kDuration = 9, kWorkspace = 10, kBase = 11, kTournament = 12, kRestore = 13,
  kOrigin = 14, kClient = 15, kSession = 16, kMessage = 17, kSource = 18, kThinned = 19,
};
enum TournamentTag : uint64_t { kTId = 1, kTIndex = 2, kTCount = 3, kTTestExit = 4, kTWon = 5 };
enum RestoreTag : uint64_t { kRSource = 1, kRTarget = 2, kRPath = 3, kROmitted = 4 };
enum ThinnedTag : uint64_t { kNNodes = 1, kNKind = 2, kNFailed = 3, kNFirst = 4, kNLast = 5, kNCommand = 6 };
// Bits of kOutcomeFlags; others are reserved (ignored).
constexpr uint64_t kTimedOut = 1, kCancelled = 2, kKilled = 4;

bool Known(uint64_t tag) { return tag >= kKind && tag <= kThinned; }

// A thinned span's commands within their bounds: the newest kept.
void BoundCommands(std::vector<std::string>& cmds) {
  size_t total = 0;
  for (std::string& c : cmds) {
    c = CutUtf8(c, Provenance::kMaxThinnedCommand);
    total += c.size();
  }
  size_t drop = 0;
  while (cmds.size() - drop > Provenance::kMaxThinnedCommands || total > Provenance::kMaxThinnedBytes)
    total -= cmds[drop++].size();
  cmds.erase(cmds.begin(), cmds.begin() + long(drop));
}

std::vector<uint8_t> EncodeTournament(const TournamentRole& t) {
  fields::Writer w;
  if (!t.id.empty()) w.Str(kTId, t.id);
  if (t.index) w.Var(kTIndex, t.index);
  if (t.count) w.Var(kTCount, t.count);
  if (t.test_exit_code) w.Signed(kTTestExit, *t.test_exit_code);
  if (t.won) w.Var(kTWon, 1);
  return std::move(w).bytes();
}

std::vector<uint8_t> EncodeRestore(const RestoreLink& r) {
  fields::Writer w;
  if (r.source) w.Id(kRSource, *r.source);
  if (r.target) w.Id(kRTarget, *r.target);
  for (const std::string& p : r.paths) w.Str(kRPath, p);
  if (r.paths_omitted) w.Var(kROmitted, r.paths_omitted);
  return std::move(w).bytes();
}

std::vector<uint8_t> EncodeThinned(const Thinned& t) {
  fields::Writer w;
  if (t.nodes) w.Var(kNNodes, t.nodes);
  for (const auto& [kind, n] : t.kinds) {
    ByteWriter pair;
    pair.Var(uint64_t(kind));
    pair.Var(n);
    w.Bytes(kNKind, std::move(pair).bytes());
  }
  if (t.failed) w.Var(kNFailed, t.failed);
  if (t.first_ns) w.Signed(kNFirst, t.first_ns);
  if (t.last_ns) w.Signed(kNLast, t.last_ns);
  for (const std::string& c : t.commands) w.Str(kNCommand, c);
  return std::move(w).bytes();
}

bool DecodeTournament(std::span<const uint8_t> b, TournamentRole* t) {
  ByteReader r(b);
  fields::Seen seen;
  uint64_t tag;
  std::span<const uint8_t> v;
  bool bad = false;
  while (fields::Next(r, &tag, &v, &bad)) {
    if (!seen.First(tag)) return false;
    bool ok = true;
    switch (tag) {
      case kTId: ok = fields::AsStr(v, Provenance::kMaxName, &t->id); break;
      case kTIndex: ok = fields::AsUint32(v, &t->index); break;
      case kTCount: ok = fields::AsUint32(v, &t->count); break;
      case kTTestExit: ok = fields::AsInt32(v, &t->test_exit_code.emplace()); break;
      case kTWon: ok = fields::AsBool(v, &t->won); break;
      default: break;
    }
    if (!ok) return false;
  }
  return !bad;
}

bool DecodeRestore(std::span<const uint8_t> b, RestoreLink* l) {
  ByteReader r(b);
  fields::Seen seen;
  uint64_t tag;
  std::span<const uint8_t> v;
  bool bad = false;
  size_t path_bytes = 0;
  while (fields::Next(r, &tag, &v, &bad)) {
    if (tag != kRPath && !seen.First(tag)) return false;
    bool ok = true;
    switch (tag) {
      case kRSource: ok = fields::AsId(v, &l->source.emplace()); break;
      case kRTarget: ok = fields::AsId(v, &l->target.emplace()); break;
      case kRPath:
        path_bytes += v.size();
        ok = l->paths.size() < Provenance::kMaxPaths && path_bytes <= Provenance::kMaxPathBytes &&
             fields::AsStr(v, Provenance::kMaxPathBytes, &l->paths.emplace_back());
        break;
      case kROmitted: ok = fields::AsVar(v, &l->paths_omitted); break;
      default: break;
    }
    if (!ok) return false;
  }
  return !bad;
}

bool DecodeThinned(std::span<const uint8_t> b, Thinned* t) {
  ByteReader r(b);
  fields::Seen seen;
  uint64_t tag;
  std::span<const uint8_t> v;
  bool bad = false;
  size_t command_bytes = 0;
  while (fields::Next(r, &tag, &v, &bad)) {
    if (tag != kNKind && tag != kNCommand && !seen.First(tag)) return false;
    bool ok = true;
    switch (tag) {
      case kNNodes: ok = fields::AsVar(v, &t->nodes); break;
      case kNKind: {
        ByteReader pair(v);
        uint64_t kind, n;
        ok = pair.Var(&kind) && pair.Var(&n) && pair.done() && kind <= UINT32_MAX &&
             t->kinds.size() < Provenance::kMaxKinds && t->kinds.emplace(ProvenanceKind(kind), n).second;
        break;
      }
      case kNFailed: ok = fields::AsVar(v, &t->failed); break;
      case kNFirst: ok = fields::AsSigned(v, &t->first_ns); break;
      case kNLast: ok = fields::AsSigned(v, &t->last_ns); break;
      case kNCommand:
        command_bytes += v.size();
        ok = t->commands.size() < Provenance::kMaxThinnedCommands && command_bytes <= Provenance::kMaxThinnedBytes &&
             fields::AsStr(v, Provenance::kMaxThinnedCommand, &t->commands.emplace_back());
        break;
      default: break;
    }
    if (!ok) return false;
  }
  return !bad;
}

}  // namespace

std::string_view KindName(ProvenanceKind k) {
  auto i = size_t(k);
  return i < kKindNames.size() ? kKindNames[i] : kKindNames[0];
}

bool KnownKind(ProvenanceKind k) { return k != ProvenanceKind::kUnknown && size_t(k) < kKindNames.size(); }

std::optional<ProvenanceKind> KindFromName(std::string_view name) {
  for (size_t i = 0; i < kKindNames.size(); ++i)
    if (kKindNames[i] == name) return ProvenanceKind(i);
  return std::nullopt;
}

std::string_view OriginName(Origin o) {
  auto i = size_t(o);
  return i < kOriginNames.size() ? kOriginNames[i] : kOriginNames[0];
}

std::optional<Origin> OriginFromName(std::string_view name) {
  for (size_t i = 0; i < kOriginNames.size(); ++i)
    if (kOriginNames[i] == name) return Origin(i);
  return std::nullopt;
}

std::string CutUtf8(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t cut = max;
  while (cut > 0 && (uint8_t(s[cut]) >> 6) == 2) --cut;  // not inside a UTF-8 sequence
  return std::string(s.substr(0, cut));
}

Provenance Bounded(Provenance p) {
  using P = Provenance;
  if (p.line.size() > P::kMaxCommandBytes) {
    p.line = CutUtf8(p.line, P::kMaxCommandBytes);
    p.command_cut = true;
  }
  size_t room = P::kMaxCommandBytes - p.line.size();
  for (size_t i = 0; i < p.argv.size(); ++i) {
    if (i < P::kMaxArgs && p.argv[i].size() <= room) {
      room -= p.argv[i].size();
      continue;
    }
    if (i < P::kMaxArgs && room > 0) {
      p.argv[i] = CutUtf8(p.argv[i], room);
      ++i;
    }
    p.argv.resize(i);
    p.command_cut = true;
    break;
  }
  for (std::string* s : {&p.cwd, &p.message, &p.source}) *s = CutUtf8(*s, P::kMaxText);
  for (std::string* s : {&p.workspace, &p.who.client, &p.who.session}) *s = CutUtf8(*s, P::kMaxName);
  if (p.tournament) p.tournament->id = CutUtf8(p.tournament->id, P::kMaxName);
  if (p.restore) {
    std::vector<std::string>& paths = p.restore->paths;
    size_t bytes = 0, keep = 0;
    for (; keep < paths.size() && keep < P::kMaxPaths && bytes + paths[keep].size() <= P::kMaxPathBytes; ++keep)
      bytes += paths[keep].size();
    p.restore->paths_omitted += paths.size() - keep;
    paths.resize(keep);
  }
  if (p.thinned) {
    auto& kinds = p.thinned->kinds;
    while (kinds.size() > P::kMaxKinds) {
      auto last = std::prev(kinds.end());
      uint64_t n = last->second;
      kinds.erase(last);
      kinds[ProvenanceKind::kUnknown] += n;
    }
    BoundCommands(p.thinned->commands);
  }
  std::erase_if(p.unknown_fields, [](const auto& f) { return f.second.size() > P::kMaxUnknownBytes; });
  if (p.unknown_fields.size() > P::kMaxUnknownFields) p.unknown_fields.resize(P::kMaxUnknownFields);
  return p;
}

namespace {

void AddKind(Thinned& t, ProvenanceKind kind, uint64_t n) {
  if (t.kinds.size() >= Provenance::kMaxKinds && !t.kinds.count(kind)) kind = ProvenanceKind::kUnknown;
  t.kinds[kind] += n;
}

}  // namespace

void ThinNode(Thinned& t, int64_t time_ns, const std::optional<Provenance>& p) {
  if (p && p->thinned) AppendThinned(t, *p->thinned);
  t.first_ns = t.nodes ? std::min(t.first_ns, time_ns) : time_ns;
  t.last_ns = t.nodes ? std::max(t.last_ns, time_ns) : time_ns;
  ++t.nodes;
  AddKind(t, p ? p->kind : ProvenanceKind::kUnknown, 1);
  if (!p || (p->argv.empty() && p->line.empty())) return;
  if (p->outcome.failed()) ++t.failed;
  std::string cmd = CommandText(*p);
  if (std::string o = OutcomeText(p->outcome); !o.empty()) cmd += " (" + o + ")";
  if (cmd.size() > Provenance::kMaxThinnedCommand) cmd = CutUtf8(cmd, Provenance::kMaxThinnedCommand - 3) + "…";
  t.commands.push_back(std::move(cmd));
  BoundCommands(t.commands);
}

void AppendThinned(Thinned& t, const Thinned& later) {
  if (!later.nodes) return;
  t.first_ns = t.nodes ? std::min(t.first_ns, later.first_ns) : later.first_ns;
  t.last_ns = t.nodes ? std::max(t.last_ns, later.last_ns) : later.last_ns;
  t.nodes += later.nodes;
  for (const auto& [kind, n] : later.kinds) AddKind(t, kind, n);
  t.failed += later.failed;
  t.commands.insert(t.commands.end(), later.commands.begin(), later.commands.end());
  BoundCommands(t.commands);
}

std::vector<uint8_t> EncodeProvenance(const Provenance& given) {
  const Provenance p = Bounded(given);
  fields::Writer w;
  if (p.kind != ProvenanceKind::kUnknown) w.Var(kKind, uint64_t(p.kind));
  for (const std::string& a : p.argv) w.Str(kArg, a);
  if (!p.line.empty()) w.Str(kLine, p.line);
  if (p.command_cut) w.Var(kCommandCut, 1);
  if (!p.cwd.empty()) w.Str(kCwd, p.cwd);
  const CommandOutcome& o = p.outcome;
  if (o.exit_code) w.Signed(kExitCode, *o.exit_code);
  if (o.signal) w.Var(kSignal, o.signal);
  uint64_t flags = (o.timed_out ? kTimedOut : 0) | (o.cancelled ? kCancelled : 0) | (o.killed ? kKilled : 0);
  if (flags) w.Var(kOutcomeFlags, flags);
  if (o.duration_ms) w.Var(kDuration, o.duration_ms);
  if (!p.workspace.empty()) w.Str(kWorkspace, p.workspace);
  if (p.base) w.Id(kBase, *p.base);
  if (p.tournament) w.Bytes(kTournament, EncodeTournament(*p.tournament));
  if (p.restore) w.Bytes(kRestore, EncodeRestore(*p.restore));
  if (p.who.origin != Origin::kUnknown) w.Var(kOrigin, uint64_t(p.who.origin));
  if (!p.who.client.empty()) w.Str(kClient, p.who.client);
  if (!p.who.session.empty()) w.Str(kSession, p.who.session);
  if (!p.message.empty()) w.Str(kMessage, p.message);
  if (!p.source.empty()) w.Str(kSource, p.source);
  if (p.thinned) w.Bytes(kThinned, EncodeThinned(*p.thinned));
  for (const auto& [tag, bytes] : p.unknown_fields) w.Bytes(tag, bytes);
  return std::move(w).bytes();
}

Result<Provenance> DecodeProvenance(std::span<const uint8_t> bytes, std::string_view what) {
  auto corrupt = [&](std::string_view why) {
    return Fail(ErrorCode::kCorrupt, std::string(what) + ": bad provenance: " + std::string(why));
  };
  using P = Provenance;
  Provenance p;
  ByteReader r(bytes);
  fields::Seen seen;
  uint64_t tag;
  std::span<const uint8_t> v;
  bool bad = false;
  size_t command_bytes = 0;
  while (fields::Next(r, &tag, &v, &bad)) {
    if (tag != kArg && Known(tag) && !seen.First(tag)) return corrupt("field " + std::to_string(tag) + " twice");
    bool ok = true;
    uint64_t n = 0;
    switch (tag) {
      case kKind:
        ok = fields::AsVar(v, &n) && n <= UINT32_MAX;
        p.kind = ProvenanceKind(n);
        break;
      case kArg:
        command_bytes += v.size();
        ok = p.argv.size() < P::kMaxArgs && command_bytes <= P::kMaxCommandBytes &&
             fields::AsStr(v, P::kMaxCommandBytes, &p.argv.emplace_back());
        break;
      case kLine:
        command_bytes += v.size();
        ok = command_bytes <= P::kMaxCommandBytes && fields::AsStr(v, P::kMaxCommandBytes, &p.line);
        break;
      case kCommandCut: ok = fields::AsBool(v, &p.command_cut); break;
      case kCwd: ok = fields::AsStr(v, P::kMaxText, &p.cwd); break;
      case kExitCode: ok = fields::AsInt32(v, &p.outcome.exit_code.emplace()); break;
      case kSignal: ok = fields::AsUint32(v, &p.outcome.signal); break;
      case kOutcomeFlags:
        ok = fields::AsVar(v, &n);
        p.outcome.timed_out = n & kTimedOut;
        p.outcome.cancelled = n & kCancelled;
        p.outcome.killed = n & kKilled;
        break;
      case kDuration: ok = fields::AsVar(v, &p.outcome.duration_ms); break;
      case kWorkspace: ok = fields::AsStr(v, P::kMaxName, &p.workspace); break;
      case kBase: ok = fields::AsId(v, &p.base.emplace()); break;
      case kTournament: ok = DecodeTournament(v, &p.tournament.emplace()); break;
      case kRestore: ok = DecodeRestore(v, &p.restore.emplace()); break;
      case kOrigin:
        ok = fields::AsVar(v, &n) && n <= UINT32_MAX;
        p.who.origin = Origin(n);
        break;
      case kClient: ok = fields::AsStr(v, P::kMaxName, &p.who.client); break;
      case kSession: ok = fields::AsStr(v, P::kMaxName, &p.who.session); break;
      case kMessage: ok = fields::AsStr(v, P::kMaxText, &p.message); break;
      case kSource: ok = fields::AsStr(v, P::kMaxText, &p.source); break;
      case kThinned: ok = DecodeThinned(v, &p.thinned.emplace()); break;
      default:
        // A newer writer's field: kept, within bounds, for rewriting.
        if (p.unknown_fields.size() < P::kMaxUnknownFields && v.size() <= P::kMaxUnknownBytes)
          p.unknown_fields.emplace_back(tag, std::vector<uint8_t>(v.begin(), v.end()));
        break;
    }
    if (!ok) return corrupt("field " + std::to_string(tag) + " does not decode or is past its bound");
  }
  if (bad) return corrupt("a field runs past the end");
  return p;
}

}  // namespace agentenv::snap

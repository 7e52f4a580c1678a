// Provenance as text: the command, how it ended, a node's title and a
// thinned span's summary (see provenance.h).
#include <string>

#include "snap/provenance.h"

namespace agentenv::snap {
namespace {

// An id as titles show it.
std::string Short(const store::ObjectId& id) { return id.Hex().substr(0, 12); }

bool IsShell(std::string_view path) {
  std::string_view base = path.substr(path.rfind('/') + 1);
  return base == "sh" || base == "bash" || base == "dash" || base == "zsh";
}

// `a` as a shell would need it typed: as is when every byte is plain,
// else in single quotes.
std::string Quote(std::string_view a) {
  if (a.empty()) return "''";
  bool plain = true;
  for (char c : a) {
    auto u = uint8_t(c);
    bool ok = u >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
    plain = plain && ok;
  }
  if (plain) return std::string(a);
  std::string out = "'";
  for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// One line: a title never breaks, and shows no terminal controls.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    else if (uint8_t(c) < 0x20 || c == 0x7f) c = '?';
  }
  return s;
}

// "what: detail", or "what" alone.
std::string Prefixed(std::string_view what, std::string_view detail) {
  return detail.empty() ? std::string(what) : std::string(what) + ": " + std::string(detail);
}

std::string WithNotes(std::string s, const std::string& notes) { return notes.empty() ? s : s + " (" + notes + ")"; }

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : std::string(sep)) + p;
  return out;
}

std::string TournamentHead(const Provenance& p) {
  std::string head = "tournament";
  std::vector<std::string> notes;
  if (const auto& t = p.tournament) {
    if (!t->id.empty()) head += " " + t->id;
    head += " #" + std::to_string(uint64_t(t->index) + 1);
    if (t->count) head += "/" + std::to_string(t->count);
    if (t->won) notes.push_back("won");
    else if (t->test_exit_code && *t->test_exit_code != 0)
      notes.push_back("test exit " + std::to_string(*t->test_exit_code));
  }
  if (std::string o = OutcomeText(p.outcome); !o.empty()) notes.push_back(o);
  return WithNotes(head, Join(notes, ", "));
}

std::string SaveTitle(const Provenance& p) {
  const auto& r = p.restore;
  if (r && r->target) return "uncommitted changes before restore to " + Short(*r->target);
  if (r && r->source) return "uncommitted changes before restoring paths of " + Short(*r->source);
  return "uncommitted changes";
}

std::string RestoredTitle(const Provenance& p) {
  std::string out = "restored";
  if (const auto& r = p.restore) {
    std::string list = Join(r->paths, ", ");
    if (r->paths_omitted)
      list += (list.empty() ? "(+" : " (+") + std::to_string(r->paths_omitted) + " more)";
    if (!list.empty()) out += " " + list;
    if (r->source) out += " from " + Short(*r->source);
  }
  return out;
}

}  // namespace

std::string CommandText(const Provenance& p) {
  std::string cmd;
  if (!p.line.empty()) {
    cmd = p.line;
  } else if (p.argv.size() == 3 && IsShell(p.argv[0]) && p.argv[1] == "-c") {
    cmd = p.argv[2];
  } else {
    for (const std::string& a : p.argv) cmd += (cmd.empty() ? "" : " ") + Quote(a);
  }
  if (p.command_cut && !cmd.empty()) cmd += "…";
  return OneLine(std::move(cmd));
}

std::string OutcomeText(const CommandOutcome& o) {
  std::vector<std::string> parts;
  if (o.exit_code && *o.exit_code != 0) parts.push_back("exit " + std::to_string(*o.exit_code));
  if (o.signal) parts.push_back("signal " + std::to_string(o.signal));
  if (o.timed_out) parts.push_back("timed out");
  if (o.cancelled) parts.push_back("cancelled");
  if (o.killed) parts.push_back("killed");
  return Join(parts, ", ");
}

bool TitleUsesChanges(const Provenance& p) {
  switch (p.kind) {
    case ProvenanceKind::kExec:
    case ProvenanceKind::kShell:
    case ProvenanceKind::kTournament:
    case ProvenanceKind::kSave:
    case ProvenanceKind::kPartialRestore:
    case ProvenanceKind::kInit:
    case ProvenanceKind::kImport:
    case ProvenanceKind::kPull: return false;
    default: return true;
  }
}

std::string RenderTitle(const Provenance& p, std::string_view change_label, const PackageDeltas* packages) {
  std::string body;
  std::string cmd = CommandText(p);
  switch (p.kind) {
    case ProvenanceKind::kExec: body = WithNotes(Prefixed("exec", cmd), OutcomeText(p.outcome)); break;
    case ProvenanceKind::kShell: body = WithNotes(Prefixed("shell", cmd), OutcomeText(p.outcome)); break;
    case ProvenanceKind::kTournament: body = Prefixed(TournamentHead(p), cmd); break;
    case ProvenanceKind::kSave: body = SaveTitle(p); break;
    case ProvenanceKind::kPartialRestore: body = RestoredTitle(p); break;
    case ProvenanceKind::kWorkspace:
      body = Prefixed(p.workspace.empty() ? "workspace" : "workspace " + p.workspace, change_label);
      break;
    case ProvenanceKind::kSupervise:
      body = Prefixed(p.who.client.empty() ? "supervise" : "supervise " + p.who.client, change_label);
      break;
    case ProvenanceKind::kInit: body = p.source.empty() ? "init" : "init from " + p.source; break;
    case ProvenanceKind::kImport: body = p.source.empty() ? "import" : "imported " + p.source; break;
    case ProvenanceKind::kPull: body = p.source.empty() ? "pull" : "pulled " + p.source; break;
    default: body = std::string(change_label); break;  // capture, snapshot, unknown
  }
  if (packages) body = LeadWithPackages(*packages, body);
  // Ids, names and paths are the agent's bytes: a title stays one line.
  return CutUtf8(OneLine(std::move(body)), kMaxTitle);
}

std::string ThinnedText(const Thinned& t) {
  std::string out = std::to_string(t.nodes) + (t.nodes == 1 ? " node thinned" : " nodes thinned");
  std::vector<std::string> kinds;
  uint64_t unknown = 0;
  for (const auto& [kind, n] : t.kinds) {
    if (KnownKind(kind)) kinds.push_back(std::to_string(n) + " " + std::string(KindName(kind)));
    else unknown += n;  // not recorded, or kinds of a newer writer
  }
  if (unknown) kinds.push_back(std::to_string(unknown) + " unknown");
  std::string notes = Join(kinds, ", ");
  if (t.failed) notes += (notes.empty() ? "" : "; ") + std::to_string(t.failed) + " failed";
  out = WithNotes(out, notes);
  if (!t.commands.empty()) out += ": " + Join(t.commands, "; ");
  return OneLine(std::move(out));
}

}  // namespace agentenv::snap

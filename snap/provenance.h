// snap/provenance: what made a node, as data in its record (snap/meta.h,
// NodeRecord::provenance), so that nothing that reads history has to parse
// a title: which operation (kind), the command and how it ended, where
// (workspace), who asked, the tournament or restore it belongs to, and,
// once retention has dropped nodes below it, a summary of the span it now
// covers (Thinned). The title is rendered from it (RenderTitle).
//
// Byte format: tagged fields (snap/fields.h), documented field by field in
// docs/meta-format.md ("Tag 2, provenance"). Every text and list has a
// bound (Provenance::kMax*): Bounded() cuts a provenance to them, the
// encoder writes only bounded values, and the decoder refuses a value past
// a bound, so decoding stored bytes allocates at most about their size.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "snap/packages.h"
#include "store/store.h"

namespace agentenv::snap {

// What made a node. The numbers are stored: never renumber, only add. A
// number this binary does not know (a newer writer's) is kept as it is and
// reads as "unknown" (KindName, KnownKind).
enum class ProvenanceKind : uint32_t {
  kUnknown = 0,          // not recorded, or a kind of a newer writer
  kInit = 1,             // the first node of a repository (init, init --from)
  kCapture = 2,          // automatic, by the daemon's watcher
  kSnapshot = 3,         // explicit: `snap`, `ctl snapshot`, the MCP snapshot tool
  kExec = 4,             // after a command run by exec
  kShell = 5,            // after a line of the daemon's shell
  kSupervise = 6,        // an agent's automatic capture under supervise
  kSave = 7,             // unsaved changes saved before a restore
  kPartialRestore = 8,   // some paths put back from another node
  kTournament = 9,       // a tournament's candidate
  kImport = 10,          // an imported archive or directory
  kPull = 11,            // an image pulled from a registry
  kWorkspace = 12,       // a workspace's snapshot
};
// "unknown", "init", "capture", "snapshot", "exec", "shell", "supervise",
// "save", "partial_restore", "tournament", "import", "pull", "workspace".
std::string_view KindName(ProvenanceKind k);
bool KnownKind(ProvenanceKind k);
// The kind named `name` (KindName's); nullopt for any other name.
std::optional<ProvenanceKind> KindFromName(std::string_view name);

// Who asked for the operation. Stored numbers, as above.
enum class Origin : uint32_t {
  kUnknown = 0,
  kCli = 1,        // the agentenv command line, in process
  kSocket = 2,     // a client of the control socket (agentenv ctl, a library)
  kMcp = 3,        // an MCP client
  kWeb = 4,        // the web DVR
  kCapture = 5,    // the daemon's watcher
  kSupervise = 6,  // supervise's automatic capture
};
// "unknown", "cli", "socket", "mcp", "web", "capture", "supervise".
std::string_view OriginName(Origin o);
std::optional<Origin> OriginFromName(std::string_view name);

struct Requester {
  Origin origin = Origin::kUnknown;
  std::string client;   // MCP clientInfo.name, a socket client's name
  std::string session;  // the client's session id
  bool operator==(const Requester&) const = default;
};

// How a command ended. No exit code: it did not end on its own (signal,
// cancel) or there was no command.
struct CommandOutcome {
  std::optional<int32_t> exit_code;
  uint32_t signal = 0;     // the signal that ended it, 0: none
  bool timed_out = false;  // ended at its time limit
  bool cancelled = false;  // the client went away or cancelled it
  bool killed = false;     // killed by agentenv (a kill sweep, a limit)
  uint64_t duration_ms = 0;
  // exit != 0 or ended by a signal.
  bool failed() const { return (exit_code && *exit_code != 0) || signal != 0; }
  bool operator==(const CommandOutcome&) const = default;
};

// A tournament candidate's part in its tournament.
struct TournamentRole {
  std::string id;
  uint32_t index = 0;  // from 0, in the order the candidates were given
  uint32_t count = 0;  // candidates in the tournament (0: not known)
  std::optional<int32_t> test_exit_code;
  bool won = false;
  bool operator==(const TournamentRole&) const = default;
};

// The restore a node belongs to. kSave: `target`, the node a whole restore
// went to, or `source` and `paths` for a partial one; kPartialRestore:
// `source`, the node the paths came from, and the paths.
struct RestoreLink {
  std::optional<store::ObjectId> source, target;
  std::vector<std::string> paths;  // tree-relative; at most kMaxPaths
  uint64_t paths_omitted = 0;      // paths past the bounds, counted only
  bool operator==(const RestoreLink&) const = default;
};

// What a kept node's span of dropped ancestors held (retention): the nodes
// between it and its parent now.
struct Thinned {
  uint64_t nodes = 0;                            // nodes dropped there
  std::map<ProvenanceKind, uint64_t> kinds;      // of those, per kind (kUnknown: not recorded)
  uint64_t failed = 0;                           // commands among them that failed
  int64_t first_ns = 0, last_ns = 0;             // time of the oldest and newest
  // The newest few commands, whole, oldest first, each with how it ended
  // ("make test (exit 2)"): at most kMaxThinnedCommands, each at most
  // kMaxThinnedCommand bytes, together at most kMaxThinnedBytes.
  std::vector<std::string> commands;
  bool operator==(const Thinned&) const = default;
};

struct Provenance {
  ProvenanceKind kind = ProvenanceKind::kUnknown;
  // The command: the whole argv of an exec'd command, or the line a shell
  // ran. Bounded (kMaxArgs, kMaxCommandBytes); command_cut says it was cut.
  std::vector<std::string> argv;
  std::string line;
  bool command_cut = false;
  std::string cwd;
  CommandOutcome outcome;
  std::string workspace;                // empty: the live tree
  std::optional<store::ObjectId> base;  // the workspace's base node
  std::optional<TournamentRole> tournament;
  std::optional<RestoreLink> restore;
  Requester who;
  std::string message;  // the user's (-m), if any
  std::string source;   // kImport, kPull: the archive, directory or image reference
  std::optional<Thinned> thinned;
  // Fields of a newer writer this binary does not know (tag, bytes), kept
  // so that rewriting the record does not lose them (at most
  // kMaxUnknownFields; more are dropped).
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> unknown_fields;
  bool operator==(const Provenance&) const = default;

  static constexpr size_t kMaxArgs = 256;
  static constexpr size_t kMaxCommandBytes = 8192;  // argv and line together
  static constexpr size_t kMaxText = 4096;          // message, cwd, source
  static constexpr size_t kMaxName = 256;           // workspace, client, session, tournament id
  static constexpr size_t kMaxPaths = 32;
  static constexpr size_t kMaxPathBytes = 4096;  // the paths together
  static constexpr size_t kMaxKinds = 64;        // Thinned::kinds entries
  static constexpr size_t kMaxThinnedCommands = 4;
  static constexpr size_t kMaxThinnedCommand = 256;
  static constexpr size_t kMaxThinnedBytes = 1024;
  static constexpr size_t kMaxUnknownFields = 16;
  static constexpr size_t kMaxUnknownBytes = 4096;  // each
};

// `p` cut to the bounds: texts at a UTF-8 boundary, argv at the first
// argument that does not fit whole (command_cut set), paths past the
// bounds counted in paths_omitted. Idempotent.
Provenance Bounded(Provenance p);

// The provenance section's bytes (of Bounded(p)).
std::vector<uint8_t> EncodeProvenance(const Provenance& p);
// Errors: kCorrupt naming `what` when the bytes are not a provenance
// section: a field running past the end, a value that is not what its tag
// says, a singular field twice, a text or list past its bound. Unknown
// tags are skipped (kept in unknown_fields); unknown kind and origin
// numbers are kept.
Result<Provenance> DecodeProvenance(std::span<const uint8_t> bytes, std::string_view what);

// ---- text

// The command as a person would type it: the shell line, or the argv
// (`sh -c X` as X; arguments quoted for the shell where needed), "…"
// when it was cut; newlines and tabs as spaces, other control characters
// as '?'. Empty without a command.
std::string CommandText(const Provenance& p);
// How the command ended, for a title: "exit 2", "signal 9", "timed out",
// "cancelled", "killed", joined by ", "; empty for exit 0 or no command.
std::string OutcomeText(const CommandOutcome& o);

// A node's title when it has no message: what made it, led by the packages
// it changed (LeadWithPackages), one line (newlines and tabs as spaces,
// other control characters as '?'), at most kMaxTitle bytes (cut at a
// UTF-8 boundary). `change_label` is the summary of its changes versus its
// parent (ChangeTally::Label), used by the kinds that have no command of
// their own (capture, snapshot, supervise, workspace, init, import, pull,
// unknown). Forms:
//   exec: make test (exit 2)
//   shell: ls -la
//   tournament t1a2b3c #2/3 (won): cd app && fix
//   uncommitted changes before restore to 1a2b3c4d5e6f
//   uncommitted changes before restoring paths of 1a2b3c4d5e6f
//   restored etc/hosts, src from 1a2b3c4d5e6f
//   workspace feature: +3 src/…
//   supervise claude-code: M src/main.c
//   pulled debian:12 / imported backup.tar / init from /srv/rootfs
//   <change_label>                          (capture, snapshot, unknown)
std::string RenderTitle(const Provenance& p, std::string_view change_label, const PackageDeltas* packages);
inline constexpr size_t kMaxTitle = 200;
// Whether RenderTitle(p, ...) reads change_label (so that a title rendered
// again needs the change summary against the node's parent).
bool TitleUsesChanges(const Provenance& p);
// `s` cut to at most `max` bytes at a UTF-8 character boundary.
std::string CutUtf8(std::string_view s, size_t max);

// "12 nodes thinned (8 capture, 4 exec; 1 failed): make (exit 2); ls",
// one line.
std::string ThinnedText(const Thinned& t);

// ---- retention's span summary

// Adds a dropped node (its time and provenance, nullopt: not recorded) to
// the span `t`; nodes are added oldest first, so the newest commands are
// the ones kept.
void ThinNode(Thinned& t, int64_t time_ns, const std::optional<Provenance>& p);
// Appends span `later` (newer than everything in `t`) to `t`.
void AppendThinned(Thinned& t, const Thinned& later);

}  // namespace agentenv::snap

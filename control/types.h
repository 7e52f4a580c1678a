// The typed requests and replies of every control operation. Their JSON
// forms come from each struct's Fields list (common/fields.h); the JSON
// schemas that MCP shows are in control/ops.cc and are checked against
// these lists by tests/control_test.cc.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/fields.h"
#include "history/digest.h"
#include "history/node_view.h"
#include "run/jobs.h"
#include "trials/bisect.h"
#include "trials/tournament.h"
#include "snap/node.h"
#include "snap/meta.h"

namespace agentenv::control {

// The JSON side of every request and reply (common/fields.h), as callers
// of control know it.
using agentenv::FromJson;
using agentenv::json;
using agentenv::kOmitEmpty;
using agentenv::ReadReply;
using agentenv::ReadRequest;
using agentenv::ToJson;

// --- shared pieces ---

using history::ChangeInfo;
using history::FormatTime;
using history::HumanBytes;
using history::MakeChangeInfo;
using history::MakeNodeInfo;
using history::MakePackageInfos;
using history::NodeInfo;
using history::OperationInfo;
using history::OmittedPackages;
using history::PackageInfo;
using history::Short;

// A directory a killed command left (scratch nobody holds): gc removes it.
struct LeftoverInfo {
  std::string path;
  uint64_t bytes = 0;
  template <class V> void Fields(V& v) { v("path", path); v("bytes", bytes); }
};

// --- history ---

struct SnapshotRequest {
  std::string message, label;
  bool allow_empty = false;
  std::optional<std::vector<std::string>> paths;  // tree-relative; absent: the whole tree
  std::string workspace;  // snapshot this workspace (its upper) instead of the live tree
  template <class V> void Fields(V& v) {
    v("message", message); v("label", label); v("allow_empty", allow_empty); v("paths", paths);
    v("workspace", workspace);
  }
};
struct SnapshotReply {
  bool created = false;
  std::optional<NodeInfo> node;
  std::string label;
  uint64_t added = 0, modified = 0, deleted = 0;
  uint64_t hashed_files = 0, hashed_bytes = 0;
  std::vector<std::string> warnings;
  template <class V> void Fields(V& v) {
    v("created", created); v("node", node); v("label", label, kOmitEmpty); v("added", added);
    v("modified", modified); v("deleted", deleted); v("hashed_files", hashed_files);
    v("hashed_bytes", hashed_bytes); v("warnings", warnings);
  }
};

struct RollbackRequest {
  std::string ref;
  std::vector<std::string> paths;  // only these (tree-relative); empty: everything
  std::optional<bool> in_place;    // never swap subvolumes (Server::set_swap_restores)
  // A workspace to put back instead of the live tree (whole; HEAD~N counts
  // back along its lane).
  std::string workspace;
  template <class V> void Fields(V& v) {
    v("ref", ref); v("paths", paths); v("in_place", in_place, kOmitEmpty); v("workspace", workspace, kOmitEmpty);
  }
};
struct RollbackReply {
  NodeInfo node;
  std::optional<std::string> saved;  // id of the node that holds the discarded changes
  uint64_t files_written = 0, bytes_written = 0, files_cloned = 0, removed = 0, created = 0;
  uint64_t meta_updated = 0;  // entries whose owner, mode, mtime or xattrs alone were put back
  std::vector<std::string> warnings;
  std::optional<bool> relaunched;  // under supervise: the agent was restarted
  std::optional<bool> swapped;     // the node's btrfs snapshot replaced the live tree
  std::optional<std::string> not_swapped;  // a swap was allowed but not possible: why
  template <class V> void Fields(V& v) {
    v("node", node); v("saved", saved); v("files_written", files_written); v("bytes_written", bytes_written);
    v("files_cloned", files_cloned); v("removed", removed); v("created", created); v("meta_updated", meta_updated);
    v("warnings", warnings);
    v("relaunched", relaunched, kOmitEmpty);
    v("swapped", swapped, kOmitEmpty);
    v("not_swapped", not_swapped, kOmitEmpty);
  }
};

struct LogRequest {
  uint64_t limit = 10;
  // Only nodes whose title or package deltas (names, versions) hold this
  // text, case-insensitively: "numpy" finds where numpy changed.
  std::string grep;
  // The lane of this workspace: its last node and that node's ancestors.
  std::string workspace;
  template <class V> void Fields(V& v) { v("limit", limit); v("grep", grep, kOmitEmpty); v("workspace", workspace, kOmitEmpty); }
};
// A node in a listing: NodeInfo plus whether it is HEAD and its tags.
struct ListedNode {
  NodeInfo node;
  bool head = false;
  std::string tags;  // "a, b"
};
json ToJson(const ListedNode& n);
std::optional<std::string> FromJson(const json& j, ListedNode& n);
struct LogReply {
  std::vector<ListedNode> nodes;
  bool more = false;  // older nodes exist beyond the limit
  // HEAD moves (rollbacks, tournaments applied) since the oldest node
  // listed, newest first (not with grep).
  std::vector<OperationInfo> operations;
  template <class V> void Fields(V& v) {
    v("nodes", nodes); v("more", more); v("operations", operations, kOmitEmpty);
  }
};

using history::DigestPhase;
using history::DigestReply;
using history::DigestRequest;

// head and show leave out a node's package list (the root's holds every
// package of the image) unless `packages` asks for it: packages_omitted
// then counts them.
struct ShowRequest {
  std::string ref = "HEAD";
  bool packages = false;
  template <class V> void Fields(V& v) { v("ref", ref); v("packages", packages); }
};
// A node with what its node object says; `details` is absent when that
// object is lost (a damaged node: the record is all there is).
struct NodeDetails {
  std::string message, label, tree;
  uint64_t files = 0, logical_bytes = 0;
  uint64_t added = 0, modified = 0, deleted = 0;
  std::vector<ChangeInfo> sample;
};
// Leaves out a node's package list (the root's names every package of the
// image): packages_omitted counts them instead.
void LeaveOutPackages(NodeInfo& n);

struct ShowReply {
  NodeInfo node;
  std::optional<NodeDetails> details;
};
json ToJson(const ShowReply& r);
std::optional<std::string> FromJson(const json& j, ShowReply& r);

struct DiffRequest {
  std::string from = "HEAD";  // with `workspace`: HEAD is the workspace's last node
  std::string to;             // empty: the live tree (or the workspace as it is now)
  uint64_t limit = 200;
  std::string workspace;
  std::vector<std::string> paths;  // only changes at or below these tree-relative paths
  bool patch = false;              // also the content diff of each changed text file
  template <class V> void Fields(V& v) {
    v("from", from); v("to", to); v("limit", limit); v("workspace", workspace); v("paths", paths, kOmitEmpty);
    v("patch", patch);
  }
};
struct FilePatch {
  std::string path;
  std::string diff;  // unified diff; empty when `note` says why there is none
  std::string note;  // "binary", "too large", "too many changed lines"
  template <class V> void Fields(V& v) { v("path", path); v("diff", diff); v("note", note, kOmitEmpty); }
};
struct DiffReply {
  std::vector<ChangeInfo> changes;
  uint64_t total = 0;
  bool truncated = false;
  std::vector<FilePatch> patches;  // with `patch`: one per changed file among `changes`
  template <class V> void Fields(V& v) {
    v("changes", changes); v("total", total); v("truncated", truncated); v("patches", patches, kOmitEmpty);
  }
};

struct HeadRequest {
  bool packages = false;  // as ShowRequest's
  template <class V> void Fields(V& v) { v("packages", packages); }
};
struct HeadReply {
  NodeInfo node;
  template <class V> void Fields(V& v) { v("node", node); }
};

struct BranchesRequest {
  template <class V> void Fields(V&) {}
};
struct BranchesReply {
  std::vector<ListedNode> branches;
  template <class V> void Fields(V& v) { v("branches", branches); }
};

struct TagRequest {
  std::string name;  // empty: list
  std::string ref = "HEAD";
  bool del = false;
  bool force = false;  // move a tag that names another node
  template <class V> void Fields(V& v) { v("name", name); v("ref", ref); v("delete", del); v("force", force); }
};
struct TagEntry {
  std::string name, id;
  template <class V> void Fields(V& v) { v("name", name); v("id", id); }
};
struct TagReply {
  std::string name, id, deleted;
  std::optional<std::vector<TagEntry>> tags;  // listing only
  template <class V> void Fields(V& v) {
    v("name", name, kOmitEmpty); v("id", id, kOmitEmpty); v("deleted", deleted, kOmitEmpty);
    v("tags", tags, kOmitEmpty);
  }
};

struct StatusRequest {
  template <class V> void Fields(V&) {}
};
struct StatusReply {
  std::string root, work, backend;
  std::optional<NodeInfo> head;
  uint64_t nodes = 0, disk_bytes = 0, stored_bytes = 0, logical_bytes = 0, head_files = 0, head_bytes = 0;
  bool dirty = false;
  std::string unfinished_restore;  // node id of a restore that did not finish, or ""
  // Automatic capture of the daemon that answered: "off" (none), "ok", or
  // "failing" (changes wait in no node; retried every second at most).
  std::string capture = "off", capture_error;
  int64_t capture_failing_since_ns = 0;
  uint64_t capture_retries = 0;
  uint64_t changed = 0;
  std::vector<ChangeInfo> changes;  // the first 64
  uint64_t workspaces = 0, lowers = 0;  // overlay workspaces; materialized nodes (by `backend`)
  // Scratch that killed commands left (a lower half built, a workspace half
  // made or removed, an unpacked archive): `gc` removes it.
  std::vector<LeftoverInfo> reclaimable;
  uint64_t reclaimable_bytes = 0;
  template <class V> void Fields(V& v) {
    v("root", root); v("work", work); v("backend", backend); v("head", head); v("nodes", nodes);
    v("workspaces", workspaces); v("lowers", lowers);
    v("reclaimable", reclaimable); v("reclaimable_bytes", reclaimable_bytes);
    v("disk_bytes", disk_bytes); v("stored_bytes", stored_bytes); v("logical_bytes", logical_bytes);
    v("head_files", head_files); v("head_bytes", head_bytes); v("dirty", dirty); v("changed", changed);
    v("unfinished_restore", unfinished_restore); v("capture", capture); v("capture_error", capture_error);
    v("capture_failing_since_ns", capture_failing_since_ns); v("capture_retries", capture_retries);
    v("changes", changes);
  }
};

struct RetainRequest {
  bool dry_run = false;
  uint64_t keep_last = 50;
  int64_t keep_within_s = 600;
  template <class V> void Fields(V& v) { v("dry_run", dry_run); v("keep_last", keep_last); v("keep_within_s", keep_within_s); }
};
struct RetainReply {
  bool dry_run = false;
  uint64_t dropped_nodes = 0;
  std::vector<NodeInfo> dropped;  // the first 1000 of them, oldest first
  uint64_t kept = 0, reparented = 0, released_objects = 0;
  template <class V> void Fields(V& v) {
    v("dry_run", dry_run); v("dropped_nodes", dropped_nodes); v("dropped", dropped); v("kept", kept);
    v("reparented", reparented); v("released_objects", released_objects);
  }
};

struct GcRequest {
  double compact_above = 50;  // percent dead that makes a pack worth rewriting
  bool full = false;
  template <class V> void Fields(V& v) { v("compact_above", compact_above); v("full", full); }
};
struct GcReply {
  uint64_t live_objects = 0, dropped_objects = 0, dropped_bytes = 0, bytes_freed = 0, packs_rewritten = 0;
  bool counted = false;
  uint64_t objects_read = 0;
  uint64_t lowers_removed = 0;  // materialized nodes no workspace uses
  // Scratch directories killed commands left (lowers, workspaces, unpacked
  // archives and images: snap::layout::ScratchPlaces), and their disk bytes.
  uint64_t scratch_removed = 0, scratch_bytes = 0;
  uint64_t stale_cache_rows = 0;  // stat/entry cache rows of paths gone or changed since
  uint64_t leases_released = 0;   // node leases of workspaces gone (killed fork or workspace rm)
  uint64_t mounts_reclaimed = 0;  // records of views no longer mounted (mounts/views.h)
  template <class V> void Fields(V& v) {
    v("live_objects", live_objects); v("dropped_objects", dropped_objects); v("dropped_bytes", dropped_bytes);
    v("bytes_freed", bytes_freed); v("packs_rewritten", packs_rewritten); v("counted", counted);
    v("objects_read", objects_read); v("lowers_removed", lowers_removed);
    v("scratch_removed", scratch_removed); v("scratch_bytes", scratch_bytes); v("stale_cache_rows", stale_cache_rows);
    v("leases_released", leases_released); v("mounts_reclaimed", mounts_reclaimed);
  }
};

// Records an unpacked tree (a directory the caller made beside the live
// tree) as a child of HEAD. The archive is unpacked by the caller; only
// the recording needs the lock.
struct ImportRequest {
  std::string dir, message;
  std::string source;       // what was imported: the archive, directory or image
  std::string kind = "import";  // "import" or "pull"
  // base64 of the provenance section the archive carried (snap/provenance.h):
  // what made the node it holds; empty: none.
  std::string provenance;
  template <class V> void Fields(V& v) {
    v("dir", dir); v("message", message); v("source", source, kOmitEmpty); v("kind", kind, kOmitEmpty);
    v("provenance", provenance, kOmitEmpty);
  }
};
struct ImportReply {
  std::string node;
  template <class V> void Fields(V& v) { v("node", node); }
};

// --- processes ---

using run::RunRequest;
using trials::BisectReply;
using trials::BisectRequest;
using trials::BisectRound;
using trials::BisectTry;
using trials::CandidateResult;
using trials::TournamentReply;
using trials::TournamentRequest;
struct ExecRequest : RunRequest {};
struct SpawnRequest {
  RunRequest run;
  template <class V> void Fields(V& v) {
    v("command", run.command); v("argv", run.argv); v("cwd", run.cwd); v("env", run.env); v("network", run.network);
    v("memory_bytes", run.memory_bytes); v("pids", run.pids); v("cpus", run.cpus);
  }
};

struct SessionInfo {
  std::string id, cwd;
  std::map<std::string, std::string> env;
  template <class V> void Fields(V& v) { v("id", id); v("cwd", cwd); v("env", env); }
};
struct ExecReply {
  std::optional<int> exit_code;  // null when a signal ended the command
  int signal = 0;
  bool timed_out = false, oom_killed = false, killed = false;
  // duration_ms: the command's run; queued_ms: its wait for its
  // environment before (another exec held it), part of its timeout.
  uint64_t duration_ms = 0, queued_ms = 0, job = 0;
  std::string command;
  std::optional<std::string> stdout_text, stderr_text;  // collected (not streamed) output
  bool stdout_truncated = false, stderr_truncated = false;
  uint64_t stdout_bytes = 0, stderr_bytes = 0;
  std::optional<SessionInfo> session;
  std::optional<NodeInfo> node;  // the snapshot afterwards; null when nothing changed
  template <class V> void Fields(V& v) {
    v("exit_code", exit_code); v("signal", signal); v("timed_out", timed_out); v("oom_killed", oom_killed);
    v("killed", killed); v("duration_ms", duration_ms); v("queued_ms", queued_ms); v("job", job); v("command", command);
    v("stdout", stdout_text, kOmitEmpty); v("stderr", stderr_text, kOmitEmpty);
    v("stdout_truncated", stdout_truncated); v("stderr_truncated", stderr_truncated);
    v("stdout_bytes", stdout_bytes); v("stderr_bytes", stderr_bytes); v("session", session); v("node", node);
  }
};
struct SpawnReply {
  uint64_t job = 0;
  int64_t pid = 0;
  std::string log;
  template <class V> void Fields(V& v) { v("job", job); v("pid", pid); v("log", log); }
};

// A spawned job's output (stdout and stderr as one log) from byte
// `since` (negative: that many bytes before the end), at most max_bytes.
struct JobOutputRequest {
  uint64_t job = 0;
  int64_t since = 0;
  uint64_t max_bytes = 8192;
  template <class V> void Fields(V& v) { v("job", job); v("since", since); v("max_bytes", max_bytes); }
};
struct JobOutputReply {
  uint64_t job = 0;
  bool running = false;
  std::optional<int> exit_code;  // once ended by an exit
  std::string data;              // UTF-8; invalid bytes replaced
  uint64_t from = 0, next = 0;   // the bytes returned are [from, next)
  uint64_t size = 0;             // of the whole log now
  template <class V> void Fields(V& v) {
    v("job", job); v("running", running); v("exit_code", exit_code, kOmitEmpty); v("data", data);
    v("from", from); v("next", next); v("size", size);
  }
};

using run::ProcessEntry;
struct JobEntry {
  uint64_t job = 0;
  std::string kind, command, started, log;
  bool running = false;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<bool> killed;
  std::vector<ProcessEntry> processes;
  template <class V> void Fields(V& v) {
    v("job", job); v("kind", kind); v("command", command); v("started", started); v("running", running);
    v("log", log, kOmitEmpty);
    if (!running) { v("exit_code", exit_code); v("signal", signal); v("killed", killed); }
    v("processes", processes);
  }
};
struct AgentEntry {
  int64_t pid = 0;
  std::vector<ProcessEntry> processes;
  template <class V> void Fields(V& v) { v("pid", pid); v("processes", processes); }
};
struct PsRequest {
  template <class V> void Fields(V&) {}
};
struct PsReply {
  std::vector<JobEntry> jobs;
  bool supervised = false;           // not in JSON: whether `agent` is
  std::optional<AgentEntry> agent;   // under supervise; null between launches
};
json ToJson(const PsReply& r);
std::optional<std::string> FromJson(const json& j, PsReply& r);

struct KillRequest {
  std::optional<uint64_t> job;
  bool all = false;
  template <class V> void Fields(V& v) { v("job", job); v("all", all); }
};
struct KillReply {
  std::vector<uint64_t> killed;
  template <class V> void Fields(V& v) { v("killed", killed); }
};

// --- workspaces (workspace/workspace.h) ---

struct WorkspaceInfo {
  std::string name;
  std::string base;    // the node it was forked from (its lower)
  std::string head;    // its last node (base until snapshotted)
  std::string lower;   // the materialized tree it overlays
  std::string created;
  bool busy = false;   // a command runs in it
  template <class V> void Fields(V& v) {
    v("name", name); v("base", base); v("head", head); v("lower", lower); v("created", created); v("busy", busy);
  }
};

struct ForkRequest {
  std::string ref = "HEAD";
  std::string name;  // empty: ws-<12 hex of the node>-<n>
  uint64_t disk_bytes = 0;  // each command's writes in it; 0: the repository's default
  template <class V> void Fields(V& v) { v("ref", ref); v("name", name); v("disk_bytes", disk_bytes); }
};
struct ForkReply {
  WorkspaceInfo workspace;
  std::string materialized;  // "existing", "snapshot" (btrfs), "reflink" or "copy"
  uint64_t duration_ms = 0;
  // Where `serve --listen` serves MCP for the workspace: /w/<name>/mcp.
  std::string endpoint;
  template <class V> void Fields(V& v) {
    v("workspace", workspace); v("materialized", materialized); v("duration_ms", duration_ms); v("endpoint", endpoint);
  }
};

struct WorkspacesRequest {
  template <class V> void Fields(V&) {}
};
struct WorkspacesReply {
  std::vector<WorkspaceInfo> workspaces;
  template <class V> void Fields(V& v) { v("workspaces", workspaces); }
};

struct WorkspaceRmRequest {
  std::string name;
  template <class V> void Fields(V& v) { v("name", name); }
};
struct WorkspaceRmReply {
  std::string removed;
  // False when there was nothing left to remove (already gone: a removal
  // killed after it finished, or never made); the request still succeeds.
  bool existed = true;
  template <class V> void Fields(V& v) { v("removed", removed); v("existed", existed); }
};

// Read-only views (mounts/views.h).
struct MountInfo {
  std::string dir, node, lower, created;
  int64_t uid = 0, pid = 0;
  bool mounted = false;  // false: the record is stale (gc, umount and the next mount remove it)
  template <class V> void Fields(V& v) {
    v("dir", dir); v("node", node); v("lower", lower); v("created", created); v("uid", uid); v("pid", pid);
    v("mounted", mounted);
  }
};
struct MountRequest {
  std::string ref = "HEAD";
  std::string dir;
  template <class V> void Fields(V& v) { v("ref", ref); v("dir", dir); }
};
struct MountReply {
  MountInfo mount;
  template <class V> void Fields(V& v) { v("mount", mount); }
};
struct UmountRequest {
  std::string dir;
  template <class V> void Fields(V& v) { v("dir", dir); }
};
struct UmountReply {
  MountInfo unmounted;
  template <class V> void Fields(V& v) { v("unmounted", unmounted); }
};
struct MountsRequest {
  template <class V> void Fields(V&) {}
};
struct MountsReply {
  std::vector<MountInfo> mounts;
  template <class V> void Fields(V& v) { v("mounts", mounts); }
};

// --- scoped tokens of serve --listen (control/tokens.h) ---
struct TokenInfo {
  std::string id;
  std::string env;  // "" the live tree, else a workspace
  bool read_only = false;
  std::string created;
  std::string expires;  // "" never
  bool expired = false;
  template <class V> void Fields(V& v) {
    v("id", id); v("env", env); v("read_only", read_only); v("created", created); v("expires", expires);
    v("expired", expired);
  }
};
struct TokenCreateRequest {
  std::string env;         // a workspace; empty: the live tree
  bool read_only = false;  // reads history and files, runs and changes nothing
  std::string expires;     // a duration ("24h"); empty: never
  template <class V> void Fields(V& v) { v("env", env); v("read_only", read_only); v("expires", expires); }
};
struct TokenCreateReply {
  TokenInfo token;
  std::string secret;  // shown once: only its hash is stored
  template <class V> void Fields(V& v) { v("token", token); v("secret", secret); }
};
struct TokenLsRequest {
  template <class V> void Fields(V&) {}
};
struct TokenLsReply {
  std::vector<TokenInfo> tokens;
  template <class V> void Fields(V& v) { v("tokens", tokens); }
};
// --- environments: the live tree and each workspace (env_ls) ---
struct EnvScope {
  std::string id;  // a scoped token reaching it (token_ls)
  bool read_only = false;
  std::string expires;
  template <class V> void Fields(V& v) { v("id", id); v("read_only", read_only); v("expires", expires); }
};
struct EnvInfo {
  std::string name;      // "" the live tree
  std::string endpoint;  // serve --listen's MCP path: /mcp or /w/<name>/mcp
  std::string base;      // a workspace's fork point
  std::string last;      // its last node (the live tree: HEAD)
  uint64_t running = 0;  // commands (exec, spawn) of this process running in it
  bool busy = false;     // a workspace: a command (of any process) holds it
  std::optional<uint64_t> disk_bytes;  // a workspace: its upper's size on disk
  std::vector<EnvScope> tokens;        // besides the operator's, which reaches all
  template <class V> void Fields(V& v) {
    v("name", name); v("endpoint", endpoint); v("base", base); v("last", last); v("running", running);
    v("busy", busy); v("disk_bytes", disk_bytes); v("tokens", tokens);
  }
};
struct EnvLsRequest {
  template <class V> void Fields(V&) {}
};
struct EnvLsReply {
  std::vector<EnvInfo> environments;
  template <class V> void Fields(V& v) { v("environments", environments); }
};

struct TokenRevokeRequest {
  std::string id;
  template <class V> void Fields(V& v) { v("id", id); }
};
struct TokenRevokeReply {
  std::string revoked;
  bool existed = true;
  template <class V> void Fields(V& v) { v("revoked", revoked); v("existed", existed); }
};

}  // namespace agentenv::control

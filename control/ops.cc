// The operation table: names, descriptions, schemas, and the JSON entry.
#include "control/ops.h"

namespace agentenv::control {
namespace {

json Obj(std::initializer_list<std::pair<const std::string, json>> props, std::vector<std::string> required = {}) {
  json j = {{"type", "object"}, {"properties", json::object()}};
  for (const auto& [k, v] : props) j["properties"][k] = v;
  if (!required.empty()) j["required"] = required;
  return j;
}
const json kStr = {{"type", "string"}};
const json kInt = {{"type", "integer"}};
const json kNum = {{"type", "number"}};
const json kBool = {{"type", "boolean"}};
const json kOptStr = {{"type", {"string", "null"}}};
json ArrayOf(const json& items) { return {{"type", "array"}, {"items", items}}; }
const json kStrings = ArrayOf(kStr);
const json kRef = {{"type", "string"}, {"description", "Node: short id (12 hex digits), tag name, HEAD, or HEAD~N"}};
// A package delta as PackageInfo writes it.
const json kPackage = Obj({{"ecosystem", {{"type", "string"}, {"enum", {"apt", "pip", "npm", "git"}}}},
                           {"op", {{"type", "string"}, {"enum", {"+", "-", "~", "!"}},
                                   {"description", "+ installed, - removed, ~ version changed, ! left unfinished"}}},
                           {"name", kStr}, {"old_version", kStr}, {"new_version", kStr}, {"where", kStr},
                           {"dependency", kBool}},
                          {"ecosystem", "op", "name"});
// A node as NodeInfo writes it; `changes` is the count of changed paths.
json NodeSchema(const json& changes, const json& extra = json::object()) {
  json j = Obj({{"id", kStr}, {"short", kStr}, {"seq", kInt}, {"time", kStr}, {"time_ns", kInt},
                {"title", kStr}, {"changes", changes}, {"parent", kOptStr}, {"damaged", kBool}, {"damage", kStr},
                {"packages", {{"type", "array"}, {"items", kPackage},
                              {"description", "Packages installed, removed or changed versus the parent"}}},
                {"packages_omitted", kStr}},
               {"id", "short", "seq", "time", "time_ns", "title", "changes", "parent"});
  j["properties"].update(extra);
  return j;
}
json Nullable(json j) {
  j["type"] = {j["type"].get<std::string>(), "null"};
  return j;
}
const json kNode = NodeSchema(kInt);
const json kListed = NodeSchema(kInt, {{"head", kBool}, {"tags", kStr}});
const json kChange = Obj({{"op", {{"type", "string"}, {"enum", {"+", "-", "M"}}}}, {"path", kStr}, {"dir", kBool}},
                         {"op", "path", "dir"});
const json kWorkspace = {{"type", "string"}, {"description", "A workspace (see fork): act on it instead of the live filesystem"}};
const json kWorkspaceInfo = Obj({{"name", kStr}, {"base", kStr}, {"head", kStr}, {"lower", kStr}, {"created", kStr}, {"busy", kBool}},
                                {"name", "base", "head"});
const json kMountInfo = Obj({{"dir", kStr}, {"node", kStr}, {"lower", kStr}, {"created", kStr}, {"uid", kInt},
                             {"pid", kInt}, {"mounted", kBool}},
                            {"dir", "node", "mounted"});
const json kDiskBytes = {{"type", "integer"},
                         {"description", "Bytes the command may write (at least 1 MiB): past it writes fail with "
                                         "'No space left on device' inside (held in memory meanwhile); default: "
                                         "the workspace's, else the repository's"}};
const json kTokenInfo = Obj({{"id", kStr}, {"env", kStr}, {"read_only", kBool}, {"created", kStr}, {"expires", kStr},
                            {"expired", kBool}},
                           {"id", "env", "read_only"});
const json kProcess = Obj({{"pid", kInt}, {"ns_pid", kInt}, {"ppid", kInt}, {"cmdline", kStr}});

json RunProps(bool is_exec) {
  json p = Obj({
      {"command", {{"type", "string"}, {"description", "Shell command line, run by /bin/sh -c (or give argv)"}}},
      {"argv", {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", "Program and arguments, no shell"}}},
      {"cwd", {{"type", "string"}, {"description", "Working directory inside (default /, or the session's)"}}},
      {"env", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}, {"description", "Extra environment variables"}}},
      {"network", {{"type", "string"}, {"enum", {"allow", "deny"}}, {"description", "deny: loopback only"}}},
      {"memory_bytes", {{"type", "integer"}, {"description", "Memory limit; fails plainly where it cannot be enforced"}}},
      {"pids", {{"type", "integer"}, {"description", "Limit on processes/threads at once"}}},
      {"cpus", {{"type", "number"}, {"description", "CPU time per wall second (0.5 = half a core)"}}},
  });
  if (is_exec) {
    p["properties"]["timeout_s"] = {{"type", "number"}, {"description", "Kill every process of the command after this many seconds (MCP default 300)"}};
    p["properties"]["output_cap"] = {{"type", "integer"}, {"description", "Bytes kept per stream (MCP default 65536); the rest is counted, not kept"}};
    p["properties"]["session"] = {{"type", "string"}, {"description", "Session name: cwd and exported variables carry over between calls with the same name"}};
    p["properties"]["snapshot"] = {{"type", "boolean"}, {"description", "Snapshot afterwards (default true)"}};
    p["properties"]["workspace"] = kWorkspace;
    p["properties"]["disk_bytes"] = kDiskBytes;
  }
  return p;
}

std::vector<OpSpec> MakeOps() {
  return {
      {"snapshot", {"snap", "commit"},
       "Save the current state of the whole environment filesystem as a new node. Do this before "
       "anything risky (installing packages, editing config, deleting files) so you can roll back. "
       "Changes are also captured automatically; an explicit snapshot adds a message that makes the "
       "node easy to find. Returns created=false when nothing changed.",
       Obj({{"message", {{"type", "string"}, {"description", "Why: what you are about to try or just finished"}}},
            {"label", {{"type", "string"}, {"description", "Automatic label (default: a summary of the changes)"}}},
            {"allow_empty", {{"type", "boolean"}, {"description", "Make a node even if nothing changed"}}},
            {"paths", {{"type", "array"}, {"items", kStr}, {"description", "Only rescan these tree-relative paths"}}},
            {"workspace", kWorkspace}}),
       Obj({{"created", kBool}, {"node", Nullable(kNode)}, {"label", kStr}, {"added", kInt}, {"modified", kInt},
            {"deleted", kInt}, {"hashed_files", kInt}, {"hashed_bytes", kInt}, {"warnings", kStrings}},
           {"created", "node", "warnings"}),
       true},
      {"rollback", {"restore", "checkout"},
       "Put the whole filesystem back to an earlier node (files, packages, config). Use `log` first "
       "and pick the newest node from before the change that broke things (read titles and change "
       "counts). Uncommitted changes are saved as a node first, so a rollback can itself be undone. "
       "Running processes are not restarted: re-run what you need afterwards.",
       Obj({{"ref", kRef},
            {"paths", {{"type", "array"}, {"items", kStr},
                       {"description", "Only these paths (e.g. [\"etc/app.conf\"]); the rest of the filesystem stays"}}},
            {"in_place", {{"type", "boolean"},
                          {"description", "Rewrite what differs even when the snapshot could be swapped in"}}},
            {"workspace", kWorkspace}},
           {"ref"}),
       Obj({{"node", kNode}, {"saved", kOptStr}, {"files_written", kInt}, {"bytes_written", kInt},
            {"files_cloned", kInt}, {"removed", kInt}, {"created", kInt}, {"meta_updated", kInt}, {"warnings", kStrings},
            {"relaunched", kBool}, {"swapped", kBool}, {"not_swapped", kStr}},
           {"node", "saved", "files_written", "removed", "created", "warnings"}),
       true, true},
      {"log", {},
       "List recent nodes, newest first: id, time, title (message or automatic change summary, led by the "
       "packages installed, removed or upgraded), change count, package deltas, head flag, tags. With grep, only "
       "the nodes whose title or packages hold that text (e.g. grep=numpy: where numpy changed).",
       Obj({{"limit", {{"type", "integer"}, {"description", "How many nodes (default 20)"}}},
            {"grep", {{"type", "string"}, {"description", "Only nodes whose title or package names/versions hold this text (any case)"}}},
            {"workspace", {{"type", "string"}, {"description", "A workspace: its lane (its last node and that node's ancestors)"}}}}),
       Obj({{"nodes", ArrayOf(kListed)}, {"more", kBool}}, {"nodes"})},
      {"diff", {},
       "List paths that differ between two nodes (`from`, `to`) or between a node and the live "
       "filesystem (omit `to`). Ops: + added, - deleted, M modified.",
       Obj({{"from", kRef}, {"to", kRef}, {"limit", {{"type", "integer"}, {"description", "At most this many paths (default 200)"}}},
            {"workspace", kWorkspace},
            {"paths", {{"type", "array"}, {"items", kStr}, {"description", "Only changes at or below these tree-relative paths"}}},
            {"patch", {{"type", "boolean"}, {"description", "Also return a unified diff of each changed text file (up to 100 files of 1 MiB)"}}}}),
       Obj({{"changes", ArrayOf(kChange)}, {"total", kInt}, {"truncated", kBool},
            {"patches", ArrayOf(Obj({{"path", kStr}, {"diff", kStr}, {"note", kStr}}, {"path", "diff"}))}},
           {"changes", "total", "truncated"})},
      {"show", {}, "Details of one node: message, automatic label, parent, file count, the packages it installed, "
               "removed or upgraded, and a sample of changed paths.",
       Obj({{"ref", kRef}}),
       Obj({{"node", NodeSchema({{"type", {"object", "integer"}}},
                                {{"message", kStr}, {"label", kStr}, {"tree", kStr}, {"files", kInt}, {"logical_bytes", kInt}})}},
           {"node"})},
      {"digest", {},
       "A span of history (default: the last day) in one page: phases of activity with their time span, node "
       "count, packages installed/removed/upgraded, directories touched, commands run, rollbacks, tournaments and "
       "tags. Read this first to understand what happened before choosing a node from `log`.",
       Obj({{"since", {{"type", "string"}, {"description", "\"2 hours ago\", \"YYYY-MM-DD HH:MM\" (default: a day before the newest node)"}}},
            {"until", {{"type", "string"}, {"description", "Same forms (default: now)"}}},
            {"max_tokens", {{"type", "integer"}, {"description", "Budget of the text, as characters / 4 (default 2000)"}}}}),
       Obj({{"text", kStr}, {"since", kStr}, {"until", kStr}, {"nodes", kInt}, {"tokens", kInt},
            {"phases", ArrayOf(Obj({{"start", kStr}, {"end", kStr}, {"nodes", kInt}, {"changes", kInt},
                                    {"packages", ArrayOf(kPackage)}, {"dirs", kStrings}, {"commands", kStrings},
                                    {"rollbacks", kStrings}, {"tournaments", kStrings}, {"tags", kStrings}},
                                   {"start", "end", "nodes", "changes"}))}},
           {"text", "nodes", "tokens", "phases"})},
      {"bisect", {},
       "Find the first node where a test command fails, on the path from a good node to a bad one (default HEAD): "
       "tests `jobs` nodes at a time, each in its own workspace forked from the node (the live filesystem is "
       "untouched), about log_(jobs+1)(N) rounds. The test's exit code: 0 good, 125 skip (cannot test this node), "
       "1-127 bad; 128+ or a kill aborts. Returns the first bad node with its title, package deltas and changes.",
       Obj({{"test", {{"type", "string"}, {"description", "Shell command run in each tested node; exit 0 = good"}}},
            {"good", {{"type", "string"}, {"description", "A node where the test passes (default: the root of bad's history)"}}},
            {"bad", {{"type", "string"}, {"description", "A node where it fails (default HEAD)"}}},
            {"jobs", {{"type", "integer"}, {"description", "Nodes tested at once (default 4)"}}},
            {"timeout_s", {{"type", "number"}, {"description", "Kill a test after this many seconds (aborts the bisect)"}}},
            {"network", {{"type", "string"}, {"enum", {"allow", "deny"}}, {"description", "Default deny"}}}},
           {"test"}),
       Obj({{"path", kInt},
            {"rounds", ArrayOf(Obj({{"tried", ArrayOf(Obj({{"id", kStr}, {"short", kStr}, {"index", kInt},
                                                            {"verdict", {{"type", "string"}, {"enum", {"good", "bad", "skip"}}}},
                                                            {"exit_code", {{"type", {"integer", "null"}}}},
                                                            {"duration_ms", kInt}},
                                                           {"id", "index", "verdict"}))},
                                    {"left", kInt}}))},
            {"found", kBool}, {"first_bad", Nullable(kNode)}, {"last_good", kOptStr}, {"candidates", kStrings},
            {"added", kInt}, {"modified", kInt}, {"deleted", kInt}, {"sample", ArrayOf(kChange)}, {"duration_ms", kInt}},
           {"path", "rounds", "found", "first_bad"})},
      {"head", {}, "The node the live filesystem was last snapshotted or rolled back to.", Obj({}),
       Obj({{"node", kNode}}, {"node"})},
      {"branches", {}, "Tips of history (nodes without children). After a rollback and new work, the old line stays reachable here.",
       Obj({}), Obj({{"branches", ArrayOf(kListed)}}, {"branches"})},
      {"tag", {},
       "Name a node so it is easy to return to (`name`, optional `ref`, default HEAD; force=true moves an existing tag); with no name, list tags; with delete=true, remove the tag.",
       Obj({{"name", kStr}, {"ref", kRef}, {"delete", kBool},
            {"force", {{"type", "boolean"}, {"description", "Move the tag if it names another node"}}}}),
       Obj({{"name", kStr}, {"id", kStr}, {"deleted", kStr}, {"tags", ArrayOf(Obj({{"name", kStr}, {"id", kStr}}, {"name", "id"}))}}),
       true},
      {"status", {},
       "Whether the live filesystem has changes not yet in a node, which paths, plus HEAD, node count and storage use.",
       Obj({}),
       Obj({{"dirty", kBool}, {"changed", kInt}, {"changes", ArrayOf(kChange)}, {"head", Nullable(kNode)}, {"nodes", kInt},
            {"root", kStr}, {"work", kStr}, {"backend", kStr}, {"stored_bytes", kInt}, {"logical_bytes", kInt},
            {"disk_bytes", kInt}, {"head_files", kInt}, {"head_bytes", kInt}, {"workspaces", kInt}, {"lowers", kInt},
            {"reclaimable", ArrayOf(Obj({{"path", kStr}, {"bytes", kInt}}, {"path", "bytes"}))}, {"reclaimable_bytes", kInt}},
           {"dirty", "changed", "changes", "head", "nodes"})},
      {"retain", {},
       "Thin old history: keep the newest nodes and everything recent, then fewer nodes the older they are; HEAD, "
       "roots, tags, branch points and tips always stay. Run `gc` afterwards to free the space.",
       Obj({{"dry_run", {{"type", "boolean"}, {"description", "Only say what would be dropped"}}},
            {"keep_last", {{"type", "integer"}, {"description", "Always keep this many newest nodes (default 50)"}}},
            {"keep_within_s", {{"type", "integer"}, {"description", "Always keep nodes younger than this (default 600)"}}}}),
       Obj({{"dry_run", kBool}, {"dropped_nodes", kInt}, {"dropped", ArrayOf(kNode)}, {"kept", kInt},
            {"reparented", kInt}, {"released_objects", kInt}},
           {"dry_run", "dropped_nodes", "dropped", "kept"}),
       true, true},
      {"gc", {},
       "Free the storage of objects no node references any more (after `retain` dropped nodes) and compact packs. "
       "History itself is not changed.",
       Obj({{"compact_above", {{"type", "number"}, {"description", "Rewrite packs at least this percent dead (default 50)"}}},
            {"full", {{"type", "boolean"}, {"description", "Recount every reference from scratch first"}}}}),
       Obj({{"live_objects", kInt}, {"dropped_objects", kInt}, {"dropped_bytes", kInt}, {"bytes_freed", kInt},
            {"packs_rewritten", kInt}, {"counted", kBool}, {"objects_read", kInt}, {"lowers_removed", kInt},
            {"scratch_removed", kInt}, {"scratch_bytes", kInt}, {"stale_cache_rows", kInt},
            {"leases_released", kInt}, {"mounts_reclaimed", kInt}},
           {"dropped_objects", "bytes_freed"}),
       true},
      {"push", {},
       "Push a node to an OCI registry as an image (HOST[:PORT]/REPOSITORY[:TAG]); layers the registry already "
       "has are not sent again. With a progressToken, progress reports each blob as it moves.",
       Obj({{"ref", kRef},
            {"target", {{"type", "string"}, {"description", "HOST[:PORT]/REPOSITORY[:TAG]"}}},
            {"layers", {{"type", "string"}, {"enum", {"squash", "path", "full"}},
                        {"description", "squash: one layer; path (default): the ancestor at the last depth multiple of 16, then one layer per node; full: one layer per node from the root"}}},
            {"insecure", {{"type", "boolean"}, {"description", "Plain HTTP, no TLS verification"}}},
            {"auth_file", {{"type", "string"}, {"description", "docker/podman config.json with credentials"}}}},
           {"ref", "target"}),
       Obj({{"node", kStr}, {"target", kStr}, {"manifest", kStr}, {"layers", kInt}, {"blobs_sent", kInt},
            {"blobs_skipped", kInt}, {"bytes_sent", kInt}},
           {"node", "target", "manifest", "layers", "blobs_sent", "blobs_skipped", "bytes_sent"})},
      {"import", {},
       "Record an unpacked tree (a directory beside the live tree) as a new child of HEAD; `agentenv import` "
       "unpacks the archive and sends this.",
       Obj({{"dir", kStr}, {"message", kStr}, {"source", kStr}, {"kind", kStr}, {"provenance", kStr}}, {"dir"}),
       Obj({{"node", kStr}}, {"node"}), true, false, false},
      {"exec", {},
       "Run a command inside this environment and wait for it. Returns exit_code (null if killed by a signal), "
       "signal, timed_out, stdout and stderr (each capped at output_cap bytes; *_truncated says so) and the node "
       "that snapshots the filesystem afterwards, labelled with the command, so `rollback` can undo exactly this "
       "command. Use session=<name> to keep the working directory and exported variables between calls (like one "
       "terminal). If the result is an error, the command did not run, or may have run only partly: check with "
       "`status` or `diff` before retrying.",
       RunProps(true),
       Obj({{"exit_code", {{"type", {"integer", "null"}}}}, {"signal", kInt}, {"timed_out", kBool}, {"oom_killed", kBool},
            {"stdout", kStr}, {"stderr", kStr}, {"stdout_truncated", kBool}, {"stderr_truncated", kBool},
            {"stdout_bytes", kInt}, {"stderr_bytes", kInt}, {"duration_ms", kInt},
            {"queued_ms", {{"type", "integer"}, {"description", "How long it waited for another exec of this environment first (counted in timeout_s; not in duration_ms)"}}},
            {"job", kInt}, {"command", kStr},
            {"killed", kBool},
            {"node", {{"type", {"object", "null"}}, {"description", "The snapshot after the command; null if nothing changed"}}},
            {"session", {{"type", {"object", "null"}}, {"description", "id, cwd, env after the command"}}}}),
       true, true},
      {"spawn", {},
       "Start a command in the background inside this environment (a server, a watcher) and return at once with "
       "its job id. Its output goes to a log file on the host (`log`); use `ps` to see whether it still runs and "
       "`kill` to stop it. Its file changes are captured automatically while the daemon runs.",
       RunProps(false), Obj({{"job", kInt}, {"pid", kInt}, {"log", kStr}}), true},
      {"ps", {}, "List the jobs started by exec and spawn: running or not, exit status, and the processes of each.",
       Obj({}),
       Obj({{"jobs", ArrayOf(Obj({{"job", kInt}, {"kind", kStr}, {"command", kStr}, {"started", kStr}, {"running", kBool},
                                  {"log", kStr}, {"processes", ArrayOf(kProcess)}}))},
            {"agent", {{"type", {"object", "null"}}}}})},
      {"fork", {},
       "Fork a node into a new isolated workspace (an overlay: instant once the node is materialized). Run commands "
       "in it with exec workspace=<name>, snapshot it with snapshot workspace=<name>; the live filesystem is untouched.",
       Obj({{"ref", kRef}, {"name", {{"type", "string"}, {"description", "Workspace name (default ws-<node>-<n>)"}}},
            {"disk_bytes", kDiskBytes}}),
       Obj({{"workspace", kWorkspaceInfo}, {"materialized", kStr}, {"duration_ms", kInt},
            {"endpoint", {{"type", "string"}, {"description", "The workspace's MCP endpoint on serve --listen (/w/<name>/mcp): every tool there acts on it"}}}},
           {"workspace", "materialized"}),
       true},
      {"workspaces", {}, "List workspaces: name, the node each was forked from, its last node, whether a command runs in it.",
       Obj({}), Obj({{"workspaces", ArrayOf(kWorkspaceInfo)}}, {"workspaces"})},
      {"workspace_rm", {}, "Remove a workspace and its changes (its snapshots stay in history). Succeeds when it is "
       "already gone (existed=false).",
       Obj({{"name", kStr}}, {"name"}), Obj({{"removed", kStr}, {"existed", kBool}}, {"removed"}), true, true},
      {"tournament", {},
       "Try several candidate commands in parallel, each in its own workspace forked from `base`, run `test` after "
       "each, and keep the first candidate whose test exits 0: its node is applied to the live filesystem (unless "
       "apply=false; unsaved changes are saved first). Every candidate becomes a node (a branch) either way. The "
       "result says plainly whether a winner was applied.",
       Obj({{"base", kRef},
            {"test", {{"type", "string"}, {"description", "Shell command; exit 0 passes"}}},
            {"candidates", {{"type", "array"}, {"items", kStr}, {"description", "Shell commands, one per candidate"}}},
            {"jobs", {{"type", "integer"}, {"description", "Candidates run at once (default 4)"}}},
            {"timeout_s", {{"type", "number"}, {"description", "Kill a command after this many seconds"}}},
            {"network", {{"type", "string"}, {"enum", {"allow", "deny"}}}},
            {"keep", {{"type", "string"}, {"enum", {"winner", "all"}}, {"description", "Workspaces kept afterwards"}}},
            {"apply", {{"type", "boolean"}, {"description", "Restore the live filesystem to the winner (default true)"}}},
            {"disk_bytes", kDiskBytes}},
           {"test", "candidates"}),
       Obj({{"id", kStr}, {"base", kStr},
            {"candidates", ArrayOf(Obj({{"index", kInt}, {"candidate", kStr}, {"workspace", kStr},
                                        {"exit_code", {{"type", {"integer", "null"}}}},
                                        {"test_exit_code", {{"type", {"integer", "null"}}}}, {"timed_out", kBool},
                                        {"duration_ms", kInt}, {"changed", kInt}, {"node", Nullable(kNode)},
                                        {"passed", kBool}, {"winner", kBool}, {"error", kStr}},
                                       {"index", "candidate", "passed", "winner"}))},
            {"winner", {{"type", {"integer", "null"}}}}, {"applied", kBool}, {"saved", kOptStr}, {"duration_ms", kInt},
            {"cancelled", kBool}},
           {"id", "candidates", "winner", "applied"}),
       true, true},
      {"mount", {},
       "Show a node as a read-only directory at `dir` (an existing directory), without restoring anything: the "
       "node's materialized tree bind-mounted read-only; it stays mounted until umount. Needs root "
       "(CAP_SYS_ADMIN) where the server runs; read single files without it with cat/ls.",
       Obj({{"ref", kRef}, {"dir", {{"type", "string"}, {"description", "Existing directory to mount the view at"}}}},
           {"dir"}),
       Obj({{"mount", kMountInfo}}, {"mount"}), true},
      {"umount", {}, "Unmount a view that mount made at `dir` and release its hold on the materialized node.",
       Obj({{"dir", kStr}}, {"dir"}), Obj({{"unmounted", kMountInfo}}, {"unmounted"}), true},
      {"mounts", {}, "List the views mount made: directory, node, whether it is still mounted.",
       Obj({}), Obj({{"mounts", ArrayOf(kMountInfo)}}, {"mounts"})},
      {"token_create", {},
       "Make a token for serve --listen that reaches one environment only (the live tree, or workspace `env`), "
       "optionally read-only and expiring. The secret is shown once; only its hash is stored.",
       Obj({{"env", {{"type", "string"}, {"description", "Workspace the token reaches (default: the live tree)"}}},
            {"read_only", {{"type", "boolean"}, {"description", "Read history and files only: no exec, snapshot, rollback, fork"}}},
            {"expires", {{"type", "string"}, {"description", "Valid for this long: 90s, 30m, 24h, 7d (default: until revoked)"}}}}),
       Obj({{"token", kTokenInfo}, {"secret", kStr}}, {"token", "secret"}), true, false, false},
      {"token_ls", {}, "List the scoped tokens (never their secrets): id, environment, read-only, expiry.",
       Obj({}), Obj({{"tokens", ArrayOf(kTokenInfo)}}, {"tokens"}), false, false, false},
      {"token_revoke", {}, "Revoke a scoped token by its id (token_ls); its holder is refused from then on.",
       Obj({{"id", kStr}}, {"id"}), Obj({{"revoked", kStr}, {"existed", kBool}}, {"revoked"}), true, false, false},
      {"env_ls", {},
       "List the environments (the live tree and each workspace, each an agent's): MCP endpoint, base, last node, "
       "commands running, disk use of a workspace's changes, and the scoped tokens that reach each.",
       Obj({}),
       Obj({{"environments", ArrayOf(Obj({{"name", kStr}, {"endpoint", kStr}, {"base", kStr}, {"last", kStr},
                                          {"running", kInt}, {"busy", kBool}, {"disk_bytes", {{"type", {"integer", "null"}}}},
                                          {"tokens", ArrayOf(Obj({{"id", kStr}, {"read_only", kBool}, {"expires", kStr}},
                                                                 {"id", "read_only"}))}},
                                         {"name", "endpoint", "last", "running", "tokens"}))}},
           {"environments"})},
      {"kill", {}, "Stop a job (job=<id> from ps) or every job (all=true): every process of its environment is killed at once.",
       Obj({{"job", kInt}, {"all", kBool}}), Obj({{"killed", ArrayOf(kInt)}}), true, true},
  };
}

using JsonFn = Result<json> (*)(Server&, std::string_view, const json&, const CallContext&);

// Parses a typed request, runs it, writes the reply.
template <class Req>
Result<json> Dispatch(Server& s, std::string_view name, const json& args, const CallContext& call) {
  AE_ASSIGN(Req req, ReadRequest<Req>(name, args));
  AE_ASSIGN(auto rep, Op<Req>::Run(s, req, call));
  return ToJson(rep);
}

struct Entry {
  std::string_view name;
  JsonFn fn;
};
#define AGENTENV_ENTRY(Req, Rep, name, call, locks) {name, Dispatch<Req>},
constexpr Entry kEntries[] = {AGENTENV_OPS(AGENTENV_ENTRY)};
#undef AGENTENV_ENTRY

}  // namespace

const std::vector<OpSpec>& Ops() {
  static const std::vector<OpSpec> ops = [] {
    std::vector<OpSpec> v = MakeOps();
    // Unknown argument keys are refused (ReadRequest): the schemas say so.
    for (OpSpec& op : v) op.input_schema["additionalProperties"] = false;
    return v;
  }();
  return ops;
}

const OpSpec* FindOp(std::string_view name) {
  for (const OpSpec& op : Ops()) {
    if (op.name == name) return &op;
    for (const auto& a : op.aliases)
      if (a == name) return &op;
  }
  return nullptr;
}

Result<json> CallJson(Server& server, std::string_view op, const json& args, const CallContext& call) {
  const OpSpec* spec = FindOp(op);
  if (spec) {
    if (call.stdio && spec->name != "exec")
      return Fail(ErrorCode::kInvalid, spec->name + ": only exec takes the caller's standard streams");
    for (const Entry& e : kEntries)
      if (e.name == spec->name) return e.fn(server, spec->name, args, call);
  }
  std::string known;
  for (const auto& o : Ops()) known += (known.empty() ? "" : ", ") + o.name;
  return Fail(ErrorCode::kInvalid, "unknown op '" + std::string(op) + "' (known: " + known + ")");
}

}  // namespace agentenv::control

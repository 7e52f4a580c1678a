// The operation table: names, descriptions, schemas, and the JSON entry.
#include "control/ops.h"

#include "common/thread_priority.h"
#include "control/confine.h"

namespace agentenv::control {
namespace {

json Obj(std::initializer_list<std::pair<const std::string, json>> props, std::vector<std::string> required = {}) {
  json j = {{"type", "object"}, {"properties", json::object()}};
  for (const auto& [k, v] : props) j["properties"][k] = v;
  if (!required.empty()) j["required"] = required;
  return j;
}
// An argument: its JSON type and the words a model acts on.
json Arg(const char* type, const char* description) { return {{"type", type}, {"description", description}}; }
json Enum(std::initializer_list<const char*> values, const char* description) {
  json j = {{"type", "string"}, {"enum", json::array()}, {"description", description}};
  for (const char* v : values) j["enum"].push_back(v);
  return j;
}
json Strings(const char* description) {
  return {{"type", "array"}, {"items", {{"type", "string"}}}, {"description", description}};
}
const json kRef = Arg("string", "Node: id, tag, HEAD~N");
const json kWorkspace = Arg("string", "Workspace (fork)");
const json kDiskBytes = Arg("integer", "Write limit in bytes");
const json kAtNode = Arg("string", "Node; omit: the live tree");

// Output schemas stay shallow: the top-level keys with their JSON types,
// which every client validates in a few bytes. A node (NodeInfo) is one
// shared definition, "#/$defs/node", given once in each schema that holds
// nodes, instead of its 13 properties repeated wherever a node appears.
// Codes: s string, i integer, n number, b boolean, o object, a array, N a
// node; a trailing '?' adds null.
json Type(std::string_view code) {
  const bool nullable = code.ends_with('?');
  if (nullable) code.remove_suffix(1);
  // A node that may be null is checked as an object only: the shared
  // definition with a null beside it would cost more than it checks.
  if (code == "N") return nullable ? json{{"type", {"object", "null"}}} : json{{"$ref", "#/$defs/node"}};
  static const std::pair<std::string_view, const char*> kNames[] = {
      {"s", "string"}, {"i", "integer"}, {"n", "number"}, {"b", "boolean"}, {"o", "object"}, {"a", "array"}};
  std::string name = "object";
  for (const auto& [c, n] : kNames)
    if (c == code) name = n;
  return nullable ? json{{"type", {name, "null"}}} : json{{"type", name}};
}
json Out(std::initializer_list<std::pair<const char*, const char*>> keys, std::vector<std::string> required = {},
         bool nodes = false) {
  json j = {{"type", "object"}, {"properties", json::object()}};
  for (const auto& [k, code] : keys) {
    j["properties"][k] = Type(code);
    nodes |= std::string_view(code) == "N";
  }
  if (!required.empty()) j["required"] = required;
  if (nodes)
    j["$defs"] = {{"node", {{"type", "object"}, {"required", {"id", "short", "title"}}}}};
  return j;
}
// A list of nodes ({"nodes": [node...]}): items are nodes.
json NodesOut(const char* key, std::initializer_list<std::pair<const char*, const char*>> more = {}) {
  json j = Out(more, {key}, true);
  j["properties"][key] = {{"type", "array"}, {"items", {{"$ref", "#/$defs/node"}}}};
  return j;
}

json RunProps(bool is_exec) {
  json p = Obj({
      {"command", Arg("string", "Shell line (or argv)")},
      {"argv", Strings("Program and args, no shell")},
      {"cwd", Arg("string", "Directory (default /)")},
      {"env", {{"type", "object"}, {"description", "Extra env vars"}}},
      {"network", Enum({"allow", "deny"}, "deny: loopback only")},
      {"memory_bytes", Arg("integer", "Memory limit")},
      {"pids", Arg("integer", "Process limit")},
      {"cpus", Arg("number", "Cores, e.g. 0.5")},
  });
  if (is_exec) {
    p["properties"]["timeout_s"] = Arg("number", "Kill after (default 300 s)");
    p["properties"]["output_cap"] = Arg("integer", "Bytes kept per stream");
    p["properties"]["session"] = Arg("string", "Keeps cwd and exports across calls");
    p["properties"]["snapshot"] = Arg("boolean", "Make a node (default true)");
    p["properties"]["workspace"] = kWorkspace;
    p["properties"]["disk_bytes"] = kDiskBytes;
  }
  return p;
}

std::vector<OpSpec> MakeOps() {
  return {
      {"snapshot", {"snap", "commit"},
       "Save the filesystem as a node before a risky step, with a message; exec and write_file make one per "
       "call.",
       Obj({{"message", Arg("string", "What you try or just did")},
            {"label", Arg("string", "Title instead of the summary")},
            {"allow_empty", Arg("boolean", "Make one even if nothing changed")},
            {"paths", Strings("Only rescan these paths")},
            {"workspace", kWorkspace}}),
       Out({{"created", "b"}, {"node", "N?"}}, {"created", "node"}),
       true},
      {"rollback", {"restore", "checkout"},
       "Put the filesystem (or `paths`) back to a node (log, file_history). Unsaved changes are saved as a "
       "node first.",
       Obj({{"ref", kRef},
            {"paths", Strings("Only these paths; the rest stays")},
            {"in_place", Arg("boolean", "Rewrite files, never swap")},
            {"workspace", kWorkspace}},
           {"ref"}),
       Out({{"node", "N"}, {"saved", "s?"}}, {"node", "saved"}),
       true, true},
      {"log", {},
       "Recent nodes, newest first. Pick one for show, diff, read_file ref= or rollback; grep=numpy finds "
       "where numpy changed.",
       Obj({{"limit", Arg("integer", "How many nodes (default 10)")},
            {"grep", Arg("string", "Only nodes whose title or packages hold this")},
             {"workspace", kWorkspace}}),
       NodesOut("nodes", {{"more", "b"}})},
      {"diff", {},
       "Paths that differ between two nodes, or a node and the live tree (omit `to`); patch=true adds the "
       "diffs.",
       Obj({{"from", Arg("string", "Older node (default HEAD)")}, {"to", Arg("string", "Newer node; omit: the live tree")},
            {"limit", Arg("integer", "Most paths (default 200)")},
            {"workspace", kWorkspace},
            {"paths", Strings("Only at or below these paths")},
            {"patch", Arg("boolean", "Add unified diffs of text files")}}),
       Out({{"changes", "a"}, {"total", "i"}}, {"changes", "total"})},
      {"show", {},
       "One node in detail: message, parent, files, changed paths, what made it.",
       Obj({{"ref", Arg("string", "Node (default HEAD)")},
            {"packages", Arg("boolean", "Package changes (long)")}}),
       Out({{"node", "o"}}, {"node"})},
      {"digest", {},
       "A span of history (default: the last day) on one page: phases, packages, commands, rollbacks. Read it "
       "first.",
       Obj({{"since", Arg("string", "\"2 hours ago\" or a date")},
            {"until", Arg("string", "Same forms (default now)")},
            {"max_tokens", Arg("integer", "Budget of the text (default 2000)")}}),
       Out({{"text", "s"}, {"phases", "a"}}, {"text"})},
      {"bisect", {},
       "Find the first node where `test` fails between a good and a bad node, each try in its own workspace. "
       "Exit 0 good, 125 skip, 1-127 bad.",
       Obj({{"test", Arg("string", "Shell command; exit 0 = good")},
            {"good", Arg("string", "Passing node (default: root)")},
            {"bad", Arg("string", "Failing node (default HEAD)")},
            {"jobs", Arg("integer", "Nodes tested at once (default 4)")},
            {"timeout_s", Arg("number", "Seconds per test")},
            {"network", Enum({"allow", "deny"}, "Default deny (loopback only)")}},
           {"test"}),
       Out({{"found", "b"}, {"first_bad", "N?"}}, {"found", "first_bad"})},
      {"head", {}, "The node the live tree was last saved as or rolled back to.",
       Obj({{"packages", Arg("boolean", "Package changes (long)")}}),
       Out({{"node", "N"}}, {"node"})},
      {"branches", {}, "Tips of history: lines a rollback left stay reachable here.",
       Obj({}), NodesOut("branches")},
      {"tag", {},
       "Name a node to return to it later; no name lists tags.",
       Obj({{"name", Arg("string", "Tag; omit to list")}, {"ref", Arg("string", "Node (default HEAD)")},
            {"delete", Arg("boolean", "Remove the tag `name`")},
            {"force", Arg("boolean", "Move an existing tag")}}),
       Out({{"tags", "a"}}),
       true},
      {"status", {},
       "Unsaved changes of the live tree (which paths), HEAD, node count.",
       Obj({}),
       Out({{"dirty", "b"}, {"changes", "a"}, {"head", "N?"}}, {"dirty", "head"})},
      {"retain", {},
       "Thin old history (HEAD, tags, tips and recent nodes stay); then gc frees the space.",
       Obj({{"dry_run", Arg("boolean", "Only say what would be dropped")},
            {"keep_last", Arg("integer", "Newest nodes always kept (default 50)")},
            {"keep_within_s", Arg("integer", "Nodes younger than this are kept (default 600)")}}),
       Out({{"dropped_nodes", "i"}}, {"dropped_nodes"}),
       true, true, false},
      {"gc", {},
       "Free storage no node uses any more (after retain); history is unchanged.",
       Obj({{"compact_above", Arg("number", "Rewrite packs at least this percent dead (default 50)")},
            {"full", Arg("boolean", "Recount every reference first (slow)")}}),
       Out({{"bytes_freed", "i"}}, {"bytes_freed"}),
       true, false, false},
      {"push", {},
       "Push a node to an OCI registry as an image; layers it has are skipped.",
       Obj({{"ref", kRef},
            {"target", Arg("string", "HOST[:PORT]/REPO[:TAG]")},
            {"layers", Enum({"squash", "path", "full"}, "Layering (default path)")},
            {"insecure", Arg("boolean", "Plain HTTP")},
            {"auth_file", Arg("string", "Credentials config.json")}},
           {"ref", "target"}),
       Out({{"manifest", "s"}}, {"manifest"}), false, false, false},
      {"import", {},
       "Record an unpacked tree (a directory beside the live tree) as a new child of HEAD; `agentenv import` "
       "unpacks the archive and sends this.",
       Obj({{"dir", Type("s")}, {"message", Type("s")}, {"source", Type("s")}, {"kind", Type("s")}, {"provenance", Type("s")}},
           {"dir"}),
       Out({{"node", "s"}}, {"node"}), true, false, false},
      {"exec", {},
       "Run a command and wait: exit code, output, and the node of its changes (rollback undoes it). "
       "A `session` keeps cd and exports. On error check status first.",
       RunProps(true),
       Out({{"exit_code", "i?"}, {"stdout", "s"}, {"stderr", "s"}, {"node", "N?"}}, {"exit_code", "node"}), true, true},
      {"spawn", {},
       "Start a background command (a server); returns its job id for job_output and kill. Without a daemon, "
       "`agentenv mcp` ends its jobs when its input ends.",
       RunProps(false), Out({{"job", "i"}}, {"job"}), true},
      {"job_output", {},
       "A spawned job's output from byte `since` and whether it runs; pass `next` back as since to follow "
       "it.",
       Obj({{"job", Arg("integer", "Job id (spawn, ps)")},
            {"since", Arg("integer", "From this byte; negative: from the end")},
            {"max_bytes", Arg("integer", "Most bytes (default 8192)")}},
           {"job"}),
       Out({{"running", "b"}, {"data", "s"}, {"next", "i"}}, {"running", "data", "next"})},
      {"ps", {}, "Jobs of exec and spawn: running or not, exit status, processes.",
       Obj({}), Out({{"jobs", "a"}}, {"jobs"})},
      {"kill", {}, "Stop a job and every process it started, or all jobs.",
       Obj({{"job", Arg("integer", "Job id (spawn, ps)")}, {"all", Arg("boolean", "Stop every job")}}),
       Out({{"killed", "a"}}, {"killed"}), true, true},
      {"fork", {},
       "Fork a node into a workspace to try things away from the live tree; then exec workspace=<name>.",
       Obj({{"ref", kRef}, {"name", Arg("string", "Workspace name")}, {"disk_bytes", kDiskBytes}}),
       Out({{"workspace", "o"}, {"endpoint", "s"}}, {"workspace"}),
       true},
      {"workspaces", {}, "List workspaces: name, base node, last node, busy.",
       Obj({}), Out({{"workspaces", "a"}}, {"workspaces"})},
      {"workspace_rm", {}, "Remove a workspace and its unsaved changes (its nodes stay).",
       Obj({{"name", Arg("string", "Workspace name")}}, {"name"}),
       Out({{"removed", "s"}}, {"removed"}), true, true},
      {"tournament", {},
       "Run candidates in parallel, each in a workspace forked from `base`; the first whose `test` exits 0 "
       "is applied to the live tree.",
       Obj({{"base", Arg("string", "Start node (default HEAD)")},
            {"test", Arg("string", "Shell command; exit 0 passes")},
            {"candidates", Strings("Shell commands, one each")},
            {"jobs", Arg("integer", "At once (default 4)")},
            {"timeout_s", Arg("number", "Seconds per command")},
            {"network", Enum({"allow", "deny"}, "Default allow")},
            {"keep", Enum({"winner", "all"}, "Workspaces kept")},
            {"apply", Arg("boolean", "Apply the winner (default true)")},
            {"disk_bytes", kDiskBytes}},
           {"test", "candidates"}),
       Out({{"winner", "i?"}, {"applied", "b"}}, {"winner", "applied"}),
       true, true},
      {"mount", {},
       "Show a node read-only at an existing directory (needs root); read_file ref= reads without it.",
       Obj({{"ref", kRef}, {"dir", Arg("string", "Existing directory on the host")}}, {"dir"}),
       Out({{"mount", "o"}}, {"mount"}), true, false, false},
      {"umount", {}, "Unmount a view made by mount.",
       Obj({{"dir", Arg("string", "The directory given to mount")}}, {"dir"}), Out({{"unmounted", "o"}}, {"unmounted"}),
       true, false, false},
      {"mounts", {}, "List the views mount made.", Obj({}), Out({{"mounts", "a"}}, {"mounts"}), false, false, false},
      {"read_file", {},
       "Read a text file of the live tree or a node (ref=), in pages of lines (start_line). Cheaper than "
       "exec cat.",
       Obj({{"path", Arg("string", "Path, e.g. etc/app.conf")}, {"ref", kAtNode},
            {"start_line", Arg("integer", "First line (from 1)")},
            {"lines", Arg("integer", "Most lines (default 400)")},
            {"max_bytes", Arg("integer", "Most bytes (default 32768)")}},
           {"path"}),
       Out({{"text", "s"}, {"binary", "b"}, {"truncated", "b"}}, {"text", "binary", "truncated"})},
      {"write_file", {},
       "Write a file of the live tree: whole `content` or a unified diff `patch` (refused unless it "
       "applies); makes a node.",
       Obj({{"path", Arg("string", "Path; parents are made")},
            {"content", Arg("string", "The whole new content")},
            {"patch", Arg("string", "Unified diff (@@ hunks)")},
            {"message", Arg("string", "Why (the node's message)")}},
           {"path"}),
       Out({{"path", "s"}, {"node", "N?"}}, {"path", "node"}),
       true},
      {"list_dir", {},
       "List a directory of the live tree or a node (ref=): names, kinds, sizes; depth>1 walks below.",
       Obj({{"path", Arg("string", "Directory (default /)")}, {"ref", kAtNode},
            {"depth", Arg("integer", "Levels (default 1, max 8)")},
            {"limit", Arg("integer", "Most entries (default 200)")}}),
       Out({{"entries", "a"}, {"truncated", "b"}}, {"entries", "truncated"})},
      {"search", {},
       "Regex over file contents (or paths) of the live tree or a node, skipping ignored and binary files; "
       "then read_file the hits.",
       Obj({{"pattern", Arg("string", "ECMAScript regex, e.g. listen\\s*=")}, {"path", Arg("string", "Directory (default /)")},
            {"ref", kAtNode}, {"names", Arg("boolean", "Match paths instead of contents")},
            {"limit", Arg("integer", "Most matches (default 50)")}},
           {"pattern"}),
       Out({{"matches", "a"}, {"truncated", "b"}}, {"matches", "truncated"})},
      {"file_history", {},
       "Nodes where a file changed, newest first, with what changed it; then read_file ref= or rollback "
       "paths=.",
       Obj({{"path", Arg("string", "Path inside")}, {"ref", Arg("string", "From this node (default HEAD)")},
            {"limit", Arg("integer", "Most nodes (default 10)")}},
           {"path"}),
       Out({{"changes", "a"}}, {"changes"})},
      {"token_create", {},
       "Make a token for serve --listen reaching one environment (the live tree or workspace env), maybe "
       "read-only and expiring; the secret is shown once, only its hash kept.",
       Obj({{"env", Arg("string", "Workspace (default: the live tree)")},
            {"read_only", Arg("boolean", "History and files only")},
            {"expires", Arg("string", "Lifetime: 90s, 30m, 24h, 7d")}}),
       Out({{"token", "o"}, {"secret", "s"}}, {"token", "secret"}), true, false, false},
      {"token_ls", {}, "List scoped tokens without their secrets.", Obj({}), Out({{"tokens", "a"}}, {"tokens"}),
       false, false, false},
      {"token_revoke", {}, "Revoke a scoped token by id (token_ls).", Obj({{"id", Arg("string", "Token id")}}, {"id"}),
       Out({{"revoked", "s"}, {"existed", "b"}}, {"revoked"}), true, false, false},
      {"env_ls", {}, "Environments: endpoint, last node, commands, disk, tokens.",
       Obj({}), Out({{"environments", "a"}}, {"environments"})},
  };
}

using JsonFn = Result<json> (*)(Server&, std::string_view, const json&, const CallContext&);

// Parses a typed request, runs it, writes the reply.
template <class Req>
Result<json> Dispatch(Server& s, std::string_view name, const json& args, const CallContext& call) {
  AE_ASSIGN(Req req, ReadRequest<Req>(name, args));
  if (call.confined || !call.env.empty()) {
    AE_ASSIGN(auto rep, OnEnvironment(s, req, call));
    return ToJson(rep);
  }
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
    for (const Entry& e : kEntries) {
      if (e.name != spec->name) continue;
      LowerThreadPriority below_reads(spec->writes ? server.writer_nice() : 0);
      return e.fn(server, spec->name, args, call);
    }
  }
  std::string known;
  for (const auto& o : Ops()) known += (known.empty() ? "" : ", ") + o.name;
  return Fail(ErrorCode::kInvalid, "unknown op '" + std::string(op) + "' (known: " + known + ")");
}

}  // namespace agentenv::control

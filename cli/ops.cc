#include "cli/ops.h"

#include "cli/cli.h"
#include "cli/jobs.h"
#include "snap/diff.h"
#include "snap/fsops.h"

namespace agentenv::cli {
namespace {

using json = nlohmann::json;

json Obj(std::initializer_list<std::pair<const std::string, json>> props, std::vector<std::string> required = {}) {
  json j = {{"type", "object"}, {"properties", json::object()}};
  for (const auto& [k, v] : props) j["properties"][k] = v;
  if (!required.empty()) j["required"] = required;
  return j;
}
const json kStr = {{"type", "string"}};
const json kInt = {{"type", "integer"}};
const json kBool = {{"type", "boolean"}};
const json kOptStr = {{"type", {"string", "null"}}};
// A node as NodeJson() writes it; `changes` is the count of changed paths.
json NodeSchema(const json& changes, const json& extra = json::object()) {
  json j = Obj({{"id", kStr}, {"short", kStr}, {"seq", kInt}, {"time", kStr}, {"time_ns", kInt},
                {"title", kStr}, {"changes", changes}, {"parent", kOptStr}},
               {"id", "short", "seq", "time", "time_ns", "title", "changes", "parent"});
  j["properties"].update(extra);
  return j;
}
const json kNode = NodeSchema(kInt);
const json kOptNode = [] {
  json j = kNode;
  j["type"] = {"object", "null"};
  return j;
}();
const json kChange = Obj({{"op", {{"type", "string"}, {"enum", {"+", "-", "M"}}}}, {"path", kStr}, {"dir", kBool}},
                         {"op", "path", "dir"});
json ArrayOf(const json& items) { return {{"type", "array"}, {"items", items}}; }
const json kStrings = ArrayOf(kStr);
const json kRef = {{"type", "string"}, {"description", "Node: short id (12 hex digits), tag name, HEAD, or HEAD~N"}};

Result<std::string> Str(const json& args, const char* key, const std::string& def, bool required = false) {
  if (!args.contains(key)) {
    if (required) return Fail(ErrorCode::kInvalid, std::string("missing argument '") + key + "'");
    return def;
  }
  if (!args[key].is_string()) return Fail(ErrorCode::kInvalid, std::string("argument '") + key + "' must be a string");
  return args[key].get<std::string>();
}

Result<uint64_t> Int(const json& args, const char* key, uint64_t def) {
  if (!args.contains(key)) return def;
  if (!args[key].is_number_unsigned()) return Fail(ErrorCode::kInvalid, std::string("argument '") + key + "' must be a non-negative integer");
  return args[key].get<uint64_t>();
}

Result<json> NodeOf(snap::Repo& repo, const store::ObjectId& id) {
  AE_ASSIGN(snap::NodeRecord r, repo.Record(id));
  return NodeJson(r);
}

Result<json> Show(snap::Repo& repo, const json& args) {
  AE_ASSIGN(std::string ref, Str(args, "ref", "HEAD"));
  AE_ASSIGN(store::ObjectId id, repo.Resolve(ref));
  AE_ASSIGN(json j, NodeOf(repo, id));
  AE_ASSIGN(snap::Node n, snap::LoadNode(repo.store(), id));
  json sample = json::array();
  for (const auto& c : n.changes.sample) sample.push_back(ChangeJson(c));
  j["message"] = n.message;
  j["label"] = n.label;
  j["files"] = n.files;
  j["logical_bytes"] = n.logical_bytes;
  j["changes"] = {{"added", n.changes.added}, {"modified", n.changes.modified},
                  {"deleted", n.changes.deleted}, {"sample", sample}};
  return json{{"node", j}};
}

Result<json> Diff(snap::Repo& repo, const json& args) {
  AE_ASSIGN(std::string from, Str(args, "from", "HEAD"));
  AE_ASSIGN(std::string to, Str(args, "to", ""));
  AE_ASSIGN(uint64_t limit, Int(args, "limit", 200));
  AE_ASSIGN(store::ObjectId fid, repo.Resolve(from));
  AE_ASSIGN(snap::NodeRecord fr, repo.Record(fid));
  store::ObjectId to_tree;
  if (to.empty()) {
    AE_ASSIGN(to_tree, repo.LiveTree());
  } else {
    AE_ASSIGN(store::ObjectId tid, repo.Resolve(to));
    AE_ASSIGN(snap::NodeRecord tr, repo.Record(tid));
    to_tree = tr.tree;
  }
  json arr = json::array();
  uint64_t total = 0;
  AE_TRY(snap::DiffTrees(repo.store(), fr.tree, to_tree, [&](const snap::Difference& d) -> Result<void> {
    if (total++ < limit) arr.push_back(ChangeJson(d.change));
    return {};
  }));
  return json{{"changes", arr}, {"total", total}, {"truncated", total > limit}};
}

Result<json> Snapshot(snap::Repo& repo, const json& args) {
  snap::SnapOptions opt;
  AE_ASSIGN(opt.message, Str(args, "message", ""));
  AE_ASSIGN(snap::SnapResult r, repo.Snapshot(opt));
  json j = {{"created", bool(r.node)}, {"warnings", r.warnings}};
  j["node"] = nullptr;
  if (r.node) {
    AE_ASSIGN(j["node"], NodeOf(repo, *r.node));
  }
  return j;
}

Result<json> Checkout(snap::Repo& repo, const json& args) {
  AE_ASSIGN(std::string ref, Str(args, "ref", "", true));
  AE_ASSIGN(snap::RestoreResult r, repo.Restore(ref));
  json j = {{"files_written", r.stats.files_written}, {"removed", r.stats.removed},
            {"created", r.stats.created}, {"warnings", r.stats.warnings}};
  AE_ASSIGN(j["node"], NodeOf(repo, r.node));
  j["saved"] = r.saved ? json(r.saved->Hex()) : json(nullptr);
  return j;
}

Result<json> Log(snap::Repo& repo, const json& args) {
  AE_ASSIGN(uint64_t limit, Int(args, "limit", 20));
  AE_ASSIGN(auto nodes, repo.Log(limit));
  AE_ASSIGN(auto head, repo.Head());
  json arr = json::array();
  for (const auto& r : nodes) {
    json j = NodeJson(r);
    j["head"] = head && *head == r.id;
    arr.push_back(j);
  }
  return json{{"nodes", arr}};
}

Result<json> Branches(snap::Repo& repo, const json&) {
  AE_ASSIGN(auto tips, repo.Branches());
  json arr = json::array();
  for (const auto& r : tips) arr.push_back(NodeJson(r));
  return json{{"branches", arr}};
}

Result<json> Head(snap::Repo& repo, const json&) {
  AE_ASSIGN(store::ObjectId id, repo.Resolve("HEAD"));
  AE_ASSIGN(json j, NodeOf(repo, id));
  return json{{"node", j}};
}

Result<json> Tag(snap::Repo& repo, const json& args) {
  AE_ASSIGN(std::string name, Str(args, "name", ""));
  if (name.empty()) {
    AE_ASSIGN(auto tags, repo.Tags());
    json arr = json::array();
    for (const auto& [n, id] : tags) arr.push_back({{"name", n}, {"id", id.Hex()}});
    return json{{"tags", arr}};
  }
  if (args.value("delete", false)) {
    AE_TRY(repo.Untag(name));
    return json{{"deleted", name}};
  }
  AE_ASSIGN(std::string ref, Str(args, "ref", "HEAD"));
  AE_ASSIGN(store::ObjectId id, repo.Tag(name, ref));
  return json{{"name", name}, {"id", id.Hex()}};
}

Result<json> Status(snap::Repo& repo, const json&) {
  AE_ASSIGN(snap::RepoStatus st, repo.Status());
  json changes = json::array();
  for (const auto& c : st.changes) changes.push_back(ChangeJson(c));
  json j = {{"backend", st.backend}, {"nodes", st.nodes}, {"dirty", st.dirty}, {"changed", st.changed},
            {"changes", changes}, {"stored_bytes", st.store.stored_bytes},
            {"disk_bytes", st.store.pack_bytes + st.meta_bytes}, {"head_files", st.head_files},
            {"head_bytes", st.head_bytes}, {"work", repo.work_dir()}};
  j["head"] = st.head ? NodeJson(*st.head) : json(nullptr);
  return j;
}

Result<json> Gc(snap::Repo& repo, const json&) {
  AE_ASSIGN(snap::RetentionResult kept, repo.Retain(snap::RetentionPolicy{}, false, snap::NowNs()));
  AE_ASSIGN(snap::GcResult r, repo.Gc());
  return json{{"nodes_dropped", kept.dropped.size()}, {"objects_dropped", r.dropped_objects},
              {"bytes_freed", r.bytes_freed}};
}

using OpFn = Result<json> (*)(snap::Repo&, const json&);

struct OpEntry {
  OpSpec spec;
  OpFn fn;
};

const std::vector<OpEntry>& Table() {
  static const std::vector<OpEntry> table = {
      {{"snapshot",
        "Save the current state of the whole environment filesystem as a new node. Do this before "
        "anything risky (installing packages, editing config, deleting files) so you can roll back. "
        "Changes are also captured automatically; an explicit snapshot adds a message that makes the "
        "node easy to find. Returns created=false when nothing changed.",
        Obj({{"message", {{"type", "string"}, {"description", "Why: what you are about to try or just finished"}}}}),
        Obj({{"created", kBool}, {"node", kOptNode}, {"warnings", kStrings}}, {"created", "node", "warnings"}), true},
       Snapshot},
      {{"rollback",
        "Put the whole filesystem back to an earlier node (files, packages, config). Use `log` first "
        "and pick the newest node from before the change that broke things (read titles and change "
        "counts). Uncommitted changes are saved as a node first, so a rollback can itself be undone. "
        "Running processes are not restarted: re-run what you need afterwards.",
        Obj({{"ref", kRef}}, {"ref"}),
        Obj({{"node", kNode}, {"saved", kOptStr}, {"files_written", kInt}, {"removed", kInt}, {"created", kInt},
             {"warnings", kStrings}},
            {"node", "saved", "files_written", "removed", "created", "warnings"}),
        true},
       Checkout},
      {{"log", "List recent nodes, newest first: id, time, title (message or automatic change summary), change count, head flag.",
        Obj({{"limit", {{"type", "integer"}, {"description", "How many nodes (default 20)"}}}}),
        Obj({{"nodes", ArrayOf(NodeSchema(kInt, {{"head", kBool}}))}}, {"nodes"})},
       Log},
      {{"diff",
        "List paths that differ between two nodes (`from`, `to`) or between a node and the live "
        "filesystem (omit `to`). Ops: + added, - deleted, M modified.",
        Obj({{"from", kRef}, {"to", kRef}, {"limit", kInt}}),
        Obj({{"changes", ArrayOf(kChange)}, {"total", kInt}, {"truncated", kBool}}, {"changes", "total", "truncated"})},
       Diff},
      {{"show", "Details of one node: message, automatic label, parent, file count and a sample of changed paths.",
        Obj({{"ref", kRef}}),
        Obj({{"node", NodeSchema(Obj({{"added", kInt}, {"modified", kInt}, {"deleted", kInt}, {"sample", ArrayOf(kChange)}},
                                     {"added", "modified", "deleted", "sample"}),
                                 {{"message", kStr}, {"label", kStr}, {"files", kInt}, {"logical_bytes", kInt}})}},
            {"node"})},
       Show},
      {{"head", "The node the live filesystem was last snapshotted or rolled back to.", Obj({}), Obj({{"node", kNode}}, {"node"})},
       Head},
      {{"branches", "Tips of history (nodes without children). After a rollback and new work, the old line stays reachable here.",
        Obj({}), Obj({{"branches", ArrayOf(kNode)}}, {"branches"})},
       Branches},
      {{"tag", "Name a node so it is easy to return to (`name`, optional `ref`, default HEAD); with no name, list tags; with delete=true, remove the tag.",
        Obj({{"name", kStr}, {"ref", kRef}, {"delete", kBool}}), Obj({{"name", kStr}, {"id", kStr}, {"deleted", kStr}, {"tags", ArrayOf(Obj({{"name", kStr}, {"id", kStr}}, {"name", "id"}))}}),
        true},
       Tag},
      {{"gc", "Thin old history with the retention policy, then free the storage nothing reaches any more. Recent nodes, tags, HEAD and branch tips always stay.",
        Obj({}),
        Obj({{"nodes_dropped", kInt}, {"objects_dropped", kInt}, {"bytes_freed", kInt}},
            {"nodes_dropped", "objects_dropped", "bytes_freed"}),
        true},
       Gc},
      {{"status", "Whether the live filesystem has changes not yet in a node, which paths, plus HEAD, node count and storage use.",
        Obj({}),
        Obj({{"dirty", kBool}, {"changed", kInt}, {"changes", ArrayOf(kChange)}, {"head", kOptNode}, {"nodes", kInt},
             {"backend", kStr}, {"stored_bytes", kInt}, {"disk_bytes", kInt}, {"head_files", kInt},
             {"head_bytes", kInt}, {"work", kStr}},
            {"dirty", "changed", "changes", "head", "nodes"})},
       Status},
  };
  return table;
}

}  // namespace

const std::vector<OpSpec>& Ops() {
  static const std::vector<OpSpec> specs = [] {
    std::vector<OpSpec> v;
    for (const auto& e : Table()) v.push_back(e.spec);
    for (const auto& e : JobOps()) v.push_back(e.spec);
    return v;
  }();
  return specs;
}

std::mutex& WriterMutex() {
  static std::mutex mu;
  return mu;
}

Result<nlohmann::json> RunOp(snap::Repo& repo, const std::string& op, const nlohmann::json& args) {
  return RunOpStream(repo, op, args, nullptr);
}

Result<nlohmann::json> RunOpStream(snap::Repo& repo, const std::string& op, const nlohmann::json& args,
                                   const OpFrameSink& emit) {
  if (!args.is_object()) return Fail(ErrorCode::kInvalid, op + ": arguments must be a JSON object");
  // Aliases used by the CLI verbs.
  std::string name = op == "commit" || op == "snap" ? "snapshot" : op == "checkout" || op == "restore" ? "rollback" : op;
  for (const auto& e : Table()) {
    if (e.spec.name != name) continue;
    try {
      std::unique_lock<std::mutex> writer;
      if (e.spec.writes) writer = std::unique_lock(WriterMutex());
      return e.fn(repo, args);
    } catch (const nlohmann::json::exception& x) {
      // A wrongly typed argument: the request is bad, the server is fine.
      return Fail(ErrorCode::kInvalid, op + ": bad arguments (" + x.what() + ")");
    }
  }
  for (const auto& e : JobOps()) {
    if (e.spec.name != name) continue;
    try {
      return e.fn(repo, args, emit);
    } catch (const nlohmann::json::exception& x) {
      return Fail(ErrorCode::kInvalid, op + ": bad arguments (" + x.what() + ")");
    }
  }
  std::string known;
  for (const auto& e : Ops()) known += (known.empty() ? "" : ", ") + e.name;
  return Fail(ErrorCode::kInvalid, "unknown op '" + op + "' (known: " + known + ")");
}

}  // namespace agentenv::cli

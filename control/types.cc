// JSON forms that are more than a Fields list, and the small formats.
#include "control/types.h"

#include <cstdio>
#include <ctime>


namespace agentenv::control {

// A listed node is the node's own object with "head" and "tags" added.
json ToJson(const ListedNode& n) {
  json j = ToJson(n.node);
  j["head"] = n.head;
  if (!n.tags.empty()) j["tags"] = n.tags;
  return j;
}

std::optional<std::string> FromJson(const json& j, ListedNode& n) {
  if (auto e = FromJson(j, n.node)) return e;
  n.head = j.is_object() && j.value("head", false);
  n.tags = j.is_object() ? j.value("tags", "") : "";
  return std::nullopt;
}

// {"node": {...NodeInfo, "message", "label", "tree", "files",
// "logical_bytes", "changes": {"added","modified","deleted","sample"}}}.
void LeaveOutPackages(NodeInfo& n) {
  if (n.packages.empty()) return;
  n.packages_omitted = std::to_string(n.packages.size()) + " package changes (packages: true lists them)";
  n.packages.clear();
}

json ToJson(const ShowReply& r) {
  json n = ToJson(r.node);
  if (r.details) {
    const NodeDetails& d = *r.details;
    n["message"] = d.message;
    n["label"] = d.label;
    n["tree"] = d.tree;
    n["files"] = d.files;
    n["logical_bytes"] = d.logical_bytes;
    n["changes"] = {{"added", d.added}, {"modified", d.modified}, {"deleted", d.deleted}, {"sample", ToJson(d.sample)}};
  }
  return {{"node", n}};
}

std::optional<std::string> FromJson(const json& j, ShowReply& r) {
  if (!j.is_object() || !j.contains("node") || !j["node"].is_object()) return "an object with a node";
  json n = j["node"];
  const bool detailed = n["changes"].is_object();
  json changes = detailed ? n["changes"] : json();
  if (detailed) n["changes"] = changes.value("added", 0) + changes.value("modified", 0) + changes.value("deleted", 0);
  if (auto e = FromJson(n, r.node)) return e;
  if (!detailed) return std::nullopt;
  NodeDetails d;
  d.message = n.value("message", "");
  d.label = n.value("label", "");
  d.tree = n.value("tree", "");
  d.files = n.value("files", uint64_t(0));
  d.logical_bytes = n.value("logical_bytes", uint64_t(0));
  d.added = changes.value("added", uint64_t(0));
  d.modified = changes.value("modified", uint64_t(0));
  d.deleted = changes.value("deleted", uint64_t(0));
  if (auto e = FromJson(changes.value("sample", json::array()), d.sample)) return e;
  r.details = std::move(d);
  return std::nullopt;
}

// "agent" only under a supervisor (null between launches).
json ToJson(const PsReply& r) {
  json j = {{"jobs", ToJson(r.jobs)}};
  if (r.supervised) j["agent"] = ToJson(r.agent);
  return j;
}

std::optional<std::string> FromJson(const json& j, PsReply& r) {
  if (!j.is_object()) return "an object";
  if (auto e = FromJson(j.value("jobs", json::array()), r.jobs)) return e;
  r.supervised = j.contains("agent");
  if (r.supervised) return FromJson(j["agent"], r.agent);
  return std::nullopt;
}

}  // namespace agentenv::control

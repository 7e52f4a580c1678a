// How a node is shown to every caller (CLI, socket, MCP, web): the JSON
// view of a node record, its package deltas and its changes, and the small
// formats of ids, times and sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/fields.h"
#include "snap/meta.h"
#include "snap/node.h"
#include "store/store.h"

namespace agentenv::history {

// The first 12 hex digits of an id: what humans and models see.
std::string Short(const store::ObjectId& id);

// "2026-11-22 15:47:03" in local time from nanoseconds since the epoch.
std::string FormatTime(int64_t ns);

// Human-readable byte count ("12.3 MiB").
std::string HumanBytes(uint64_t n);

// One package a node installed, removed or changed (snap::PackageDelta).
struct PackageInfo {
  std::string ecosystem;  // "apt", "pip", "npm", "git"
  std::string op;         // "+" installed, "-" removed, "~" version changed, "!" left unfinished
  std::string name, old_version, new_version;
  std::string where;        // pip: site-packages, npm: node_modules, git: the repository; apt: empty
  bool dependency = false;  // pulled in for another package
  template <class V> void Fields(V& v) {
    v("ecosystem", ecosystem); v("op", op); v("name", name); v("old_version", old_version, kOmitEmpty);
    v("new_version", new_version, kOmitEmpty); v("where", where, kOmitEmpty); v("dependency", dependency, kOmitEmpty);
  }
};
std::vector<PackageInfo> MakePackageInfos(const snap::PackageDeltas& d);
// Deltas past the ones listed, per ecosystem ("pip 12, npm 300"); "" when none.
std::string OmittedPackages(const snap::PackageDeltas& d);

// A node as every reply shows it.
struct NodeInfo {
  std::string id, short_id, time, title;
  uint64_t seq = 0;
  int64_t time_ns = 0;
  uint64_t changes = 0;  // changed paths against its parent
  std::optional<std::string> parent;
  bool damaged = false;
  std::string damage;  // what is missing, when damaged
  // The packages it installed, removed or changed versus its parent, as
  // its record holds them (absent for records from before package deltas).
  std::vector<PackageInfo> packages;
  std::string packages_omitted;  // OmittedPackages
  template <class V> void Fields(V& v) {
    v("id", id); v("short", short_id); v("seq", seq); v("time", time); v("time_ns", time_ns);
    v("title", title); v("changes", changes); v("parent", parent); v("damaged", damaged);
    v("damage", damage, kOmitEmpty); v("packages", packages, kOmitEmpty);
    v("packages_omitted", packages_omitted, kOmitEmpty);
  }
};
NodeInfo MakeNodeInfo(const snap::NodeRecord& r);

struct ChangeInfo {
  std::string op;  // "+", "-", "M"
  std::string path;
  bool dir = false;
  template <class V> void Fields(V& v) { v("op", op); v("path", path); v("dir", dir); }
};
ChangeInfo MakeChangeInfo(const snap::Change& c);

}  // namespace agentenv::history

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
#include "snap/oplog.h"
#include "snap/provenance.h"
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

// What made a node (snap::Provenance), as replies show it: empty fields
// left out.
struct TournamentInfo {
  std::string id;
  uint64_t index = 0, count = 0;  // index from 0
  std::optional<int> test_exit_code;
  bool won = false;
  template <class V> void Fields(V& v) {
    v("id", id); v("index", index); v("count", count); v("test_exit_code", test_exit_code); v("won", won);
  }
};
struct RestoreInfo {
  std::string source, target;  // node ids
  std::vector<std::string> paths;
  uint64_t paths_omitted = 0;
  template <class V> void Fields(V& v) {
    v("source", source, kOmitEmpty); v("target", target, kOmitEmpty); v("paths", paths, kOmitEmpty);
    v("paths_omitted", paths_omitted, kOmitEmpty);
  }
};
struct RequesterInfo {
  std::string origin, client, session;
  template <class V> void Fields(V& v) {
    v("origin", origin); v("client", client, kOmitEmpty); v("session", session, kOmitEmpty);
  }
};
struct ThinnedInfo {
  uint64_t nodes = 0, failed = 0;
  json kinds = json::object();  // kind name -> nodes
  std::string first, last;      // local times
  std::vector<std::string> commands;
  template <class V> void Fields(V& v) {
    v("nodes", nodes); v("kinds", kinds); v("failed", failed); v("first", first); v("last", last);
    v("commands", commands, kOmitEmpty);
  }
};
struct ProvenanceInfo {
  std::string kind;                // snap::KindName
  std::string command;             // as a person types it (snap::CommandText)
  std::vector<std::string> argv;   // the whole argv, when it was run without a shell
  std::string cwd;
  std::optional<int> exit_code;    // null: no exit of its own (signal, cancelled) or no command
  int signal = 0;
  bool timed_out = false, cancelled = false, killed = false;
  bool failed = false;             // exit != 0 or a signal
  uint64_t duration_ms = 0;
  std::string workspace, base;
  std::optional<TournamentInfo> tournament;
  std::optional<RestoreInfo> restore;
  RequesterInfo who;
  std::string message, source;
  std::optional<ThinnedInfo> thinned;
  template <class V> void Fields(V& v) {
    v("kind", kind); v("command", command, kOmitEmpty); v("argv", argv, kOmitEmpty); v("cwd", cwd, kOmitEmpty);
    v("exit_code", exit_code, kOmitEmpty); v("signal", signal, kOmitEmpty); v("timed_out", timed_out, kOmitEmpty);
    v("cancelled", cancelled, kOmitEmpty); v("killed", killed, kOmitEmpty); v("failed", failed, kOmitEmpty);
    v("duration_ms", duration_ms, kOmitEmpty); v("workspace", workspace, kOmitEmpty); v("base", base, kOmitEmpty);
    v("tournament", tournament, kOmitEmpty); v("restore", restore, kOmitEmpty); v("who", who);
    v("message", message, kOmitEmpty); v("source", source, kOmitEmpty); v("thinned", thinned, kOmitEmpty);
  }
};
ProvenanceInfo MakeProvenanceInfo(const snap::Provenance& p);

// A HEAD move of the operation log (snap/oplog.h): a rollback, a partial
// restore, a tournament's winner applied.
struct OperationInfo {
  std::string time;  // local time
  int64_t time_ns = 0;
  std::string kind;  // snap::OpKindName
  std::string from, to, saved;  // node ids; from/saved empty when none
  RequesterInfo who;
  std::string tournament;
  template <class V> void Fields(V& v) {
    v("time", time); v("time_ns", time_ns); v("kind", kind); v("from", from, kOmitEmpty); v("to", to);
    v("saved", saved, kOmitEmpty); v("who", who); v("tournament", tournament, kOmitEmpty);
  }
};
OperationInfo MakeOperationInfo(const snap::Operation& op);

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
  // What made it; absent for records from before provenance.
  std::optional<ProvenanceInfo> provenance;
  template <class V> void Fields(V& v) {
    v("id", id); v("short", short_id); v("seq", seq); v("time", time); v("time_ns", time_ns);
    v("title", title); v("changes", changes); v("parent", parent); v("damaged", damaged);
    v("damage", damage, kOmitEmpty); v("packages", packages, kOmitEmpty);
    v("packages_omitted", packages_omitted, kOmitEmpty); v("provenance", provenance, kOmitEmpty);
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

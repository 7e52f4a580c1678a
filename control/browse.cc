#include "control/browse.h"

#include <algorithm>

#include "history/node_view.h"
#include "snap/fsops.h"
#include "snap/node.h"
#include "snap/tree.h"

namespace agentenv::control {
namespace {

ListedEntry Describe(const snap::Entry& e) {
  return {e.name, std::string(snap::KindName(e.kind)), e.meta.mode, e.meta.uid, e.meta.gid, e.size, e.target};
}

struct Found {
  store::ObjectId node;
  std::optional<snap::Entry> entry;  // none: the root
  store::ObjectId root_tree;
};

Result<Found> Lookup(snap::Repo& repo, const std::string& ref, const std::string& path) {
  AE_ASSIGN(store::ObjectId node, repo.Resolve(ref));
  AE_ASSIGN(snap::NodeRecord rec, repo.Record(node));
  Found f{node, std::nullopt, rec.tree};
  store::ObjectId dir = rec.tree;
  for (const std::string& name : snap::SplitPath(path)) {
    if (name == "..") return Fail(ErrorCode::kInvalid, path + ": '..' is not a path inside a node");
    if (f.entry && f.entry->kind != snap::Kind::kDir)
      return Fail(ErrorCode::kNotFound, path + ": not in node " + Short(node) + " (a parent is no directory)");
    AE_ASSIGN(snap::Tree t, snap::LoadTree(repo.store(), f.entry ? f.entry->id : dir));
    auto it = std::find_if(t.begin(), t.end(), [&](const snap::Entry& e) { return e.name == name; });
    if (it == t.end()) return Fail(ErrorCode::kNotFound, path + ": not in node " + Short(node));
    f.entry = *it;
  }
  return f;
}

}  // namespace

Result<LsReply> List(Client& client, const std::string& ref, const std::string& path) {
  AE_ASSIGN(Server* s, client.Local());
  return List(*s, ref, path);
}

Result<LsReply> List(Server& server, const std::string& ref, const std::string& path) {
  Server* s = &server;
  AE_ASSIGN(Found f, Lookup(s->repo(), ref, path));
  LsReply rep{f.node.Hex(), path, {}};
  if (f.entry && f.entry->kind != snap::Kind::kDir) {
    rep.entries.push_back(Describe(*f.entry));
    return rep;
  }
  AE_ASSIGN(snap::Tree t, snap::LoadTree(s->repo().store(), f.entry ? f.entry->id : f.root_tree));
  for (const auto& e : t) rep.entries.push_back(Describe(e));
  return rep;
}

Result<void> Cat(Client& client, const std::string& ref, const std::string& path,
                 const std::function<Result<void>(std::span<const uint8_t>)>& sink) {
  AE_ASSIGN(Server* s, client.Local());
  return Cat(*s, ref, path, sink);
}

Result<void> Cat(Server& server, const std::string& ref, const std::string& path,
                 const std::function<Result<void>(std::span<const uint8_t>)>& sink) {
  Server* s = &server;
  AE_ASSIGN(Found f, Lookup(s->repo(), ref, path));
  if (!f.entry || f.entry->kind == snap::Kind::kDir)
    return Fail(ErrorCode::kInvalid, (path.empty() ? std::string("/") : path) + ": a directory, not a file (agentenv ls)");
  snap::Entry e = *f.entry;
  if (e.kind == snap::Kind::kHardlink) {
    AE_ASSIGN(Found target, Lookup(s->repo(), f.node.Hex(), e.target));
    e = *target.entry;
  }
  if (e.kind != snap::Kind::kFile) return Fail(ErrorCode::kInvalid, path + ": a " + std::string(snap::KindName(e.kind)) + ", not a file");
  return s->repo().store().ReadFile(e.file(), sink);
}

}  // namespace agentenv::control

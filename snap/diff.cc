#include "snap/diff.h"

#include "snap/fsops.h"

namespace agentenv::snap {
namespace {

using Fn = std::function<Result<void>(const Difference&)>;

Result<void> Whole(const TreeLoader& s, const Entry& e, const std::string& rel, char op, const Fn& fn) {
  Difference d{{op, rel, e.kind == Kind::kDir}, op == '-' ? &e : nullptr, op == '+' ? &e : nullptr};
  AE_TRY(fn(d));
  if (e.kind != Kind::kDir) return {};
  AE_ASSIGN(Tree t, s(e.id));
  for (const Entry& c : t) AE_TRY(Whole(s, c, Join(rel, c.name), op, fn));
  return {};
}

Result<void> DiffDir(const TreeLoader& s, const store::ObjectId& from, const store::ObjectId& to,
                     const std::string& rel, const Fn& fn) {
  if (from == to) return {};
  AE_ASSIGN(Tree a, s(from));
  AE_ASSIGN(Tree b, s(to));
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].name < b[j].name)) {
      AE_TRY(Whole(s, a[i], Join(rel, a[i].name), '-', fn));
      ++i;
    } else if (i == a.size() || b[j].name < a[i].name) {
      AE_TRY(Whole(s, b[j], Join(rel, b[j].name), '+', fn));
      ++j;
    } else {
      const Entry &x = a[i++], &y = b[j++];
      std::string crel = Join(rel, x.name);
      if (x == y) continue;
      if (x.kind == Kind::kDir && y.kind == Kind::kDir) {
        if (!(x.meta == y.meta)) AE_TRY(fn({{'M', crel, true}, &x, &y}));
        AE_TRY(DiffDir(s, x.id, y.id, crel, fn));
      } else if (x.kind != y.kind && (x.kind == Kind::kDir || y.kind == Kind::kDir)) {
        AE_TRY(Whole(s, x, crel, '-', fn));
        AE_TRY(Whole(s, y, crel, '+', fn));
      } else {
        AE_TRY(fn({{'M', crel, false}, &x, &y}));
      }
    }
  }
  return {};
}

}  // namespace

Result<void> DiffTrees(const store::Store& s, const store::ObjectId& from, const store::ObjectId& to,
                       const Fn& fn) {
  return DiffDir([&s](const store::ObjectId& id) { return LoadTree(s, id); }, from, to, "", fn);
}

Result<void> DiffTrees(const TreeLoader& load, const store::ObjectId& from, const store::ObjectId& to,
                       const Fn& fn) {
  return DiffDir(load, from, to, "", fn);
}

bool MtimeOnlyDir(const Difference& x) {
  return x.old_entry && x.new_entry && x.old_entry->kind == Kind::kDir && x.new_entry->kind == Kind::kDir &&
         x.old_entry->id == x.new_entry->id && SameButMtime(x.old_entry->meta, x.new_entry->meta);
}

Result<TreeDelta> Delta(const store::Store& s, const store::ObjectId& from, const store::ObjectId& to,
                        const DiffObserver& seen) {
  return Delta([&s](const store::ObjectId& id) { return LoadTree(s, id); }, from, to, seen);
}

namespace {
using RemovedFn = std::function<Result<void>(const std::string&, const Entry&)>;

Result<void> RemovedIn(const TreeLoader& load, const store::ObjectId& from, const store::ObjectId& to,
                       const std::string& rel, const RemovedFn& fn) {
  if (from == to) return {};
  AE_ASSIGN(Tree a, load(from));
  AE_ASSIGN(Tree b, load(to));
  size_t j = 0;
  for (const Entry& x : a) {
    while (j < b.size() && b[j].name < x.name) ++j;
    const Entry* y = j < b.size() && b[j].name == x.name ? &b[j] : nullptr;
    std::string crel = Join(rel, x.name);
    if (!y || y->kind != x.kind)
      AE_TRY(Whole(load, x, crel, '-', [&](const Difference& d) { return fn(d.change.path, *d.old_entry); }));
    else if (x.kind == Kind::kDir) AE_TRY(RemovedIn(load, x.id, y->id, crel, fn));
  }
  return {};
}
}  // namespace

Result<void> Removed(const TreeLoader& load, const store::ObjectId& from, const store::ObjectId& to,
                     const RemovedFn& fn) {
  return RemovedIn(load, from, to, "", fn);
}

bool SameButMtime(const Meta& a, const Meta& b) {
  return a.mode == b.mode && a.uid == b.uid && a.gid == b.gid && a.xattrs == b.xattrs;
}

Result<TreeDelta> Delta(const TreeLoader& load, const store::ObjectId& from, const store::ObjectId& to,
                        const DiffObserver& seen) {
  TreeDelta d;
  AE_TRY(DiffDir(load, from, to, "", [&](const Difference& x) -> Result<void> {
    if (MtimeOnlyDir(x)) return {};
    d.changes.Add(x.change);
    if (seen) seen(x);
    if (x.change.op == '-') (x.change.is_dir ? d.deleted_dirs : d.deleted_files).push_back(x.change.path);
    if (x.old_entry && x.old_entry->kind == Kind::kFile) {
      d.files--;
      d.bytes -= int64_t(x.old_entry->size);
    }
    if (x.new_entry && x.new_entry->kind == Kind::kFile) {
      d.files++;
      d.bytes += int64_t(x.new_entry->size);
    }
    return {};
  }));
  return d;
}

}  // namespace agentenv::snap

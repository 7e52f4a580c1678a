// The history operations of control::Server.
#include "control/server.h"
#include "mounts/views.h"

#include "common/textdiff.h"

#include <cctype>
#include <chrono>
#include <filesystem>
#include <map>

#include "history/digest.h"
#include "history/node_view.h"
#include "snap/diff.h"
#include "snap/fsops.h"
#include "snap/layout.h"
#include "snap/scratch.h"

namespace agentenv::control {
namespace {

// Tags by node ("a, b"), for listings.
std::map<store::ObjectId, std::string> TagsByNode(snap::Repo& repo) {
  std::map<store::ObjectId, std::string> out;
  if (auto tags = repo.Tags()) {
    for (const auto& [name, id] : *tags) out[id] += (out[id].empty() ? "" : ", ") + name;
  }
  return out;
}

Result<store::ObjectId> TreeOf(snap::Repo& repo, const std::string& ref) {
  AE_ASSIGN(store::ObjectId id, repo.Resolve(ref));
  AE_ASSIGN(snap::NodeRecord r, repo.Record(id));
  return r.tree;
}

}  // namespace

Server::Server(std::unique_ptr<snap::Repo> repo) : repo_(std::move(repo)) {}

Server::~Server() { StopCapture(false); }

Result<void> Server::StartCapture(const capture::CaptureOptions& opt) {
  AE_ASSIGN(capture_, capture::Capture::Start(*repo_, writer_mu_, opt));
  return {};
}

void Server::StopCapture(bool deliver_pending) {
  if (capture_) capture_->Stop(deliver_pending);
}

Result<SnapshotReply> Server::Snapshot(const SnapshotRequest& r, const CallContext& call) {
  if (!r.workspace.empty()) return SnapshotWorkspace(r, call.who);
  snap::SnapOptions opt;
  opt.message = r.message;
  opt.label = r.label;
  opt.allow_empty = r.allow_empty;
  snap::Provenance prov;
  prov.kind = snap::ProvenanceKind::kSnapshot;
  prov.who = call.who;
  prov.message = r.message;
  opt.provenance = std::move(prov);
  if (r.paths) {
    opt.paths.emplace();
    for (const std::string& given : *r.paths) {
      AE_ASSIGN(std::string p, snap::TreePath(given));
      if (p.empty()) {  // the root: the whole tree
        opt.paths.reset();
        break;
      }
      opt.paths->push_back(p);
    }
  }
  MutexLock writer(writer_mu_);
  AE_ASSIGN(snap::SnapResult res, repo_->Snapshot(opt));
  return SnapshotReplyOf(res);
}

Result<SnapshotReply> Server::SnapshotReplyOf(const snap::SnapResult& res) {
  SnapshotReply rep;
  rep.created = bool(res.node);
  rep.hashed_files = res.hashed_files;
  rep.hashed_bytes = res.hashed_bytes;
  rep.warnings = res.warnings;
  if (!res.node) return rep;
  AE_ASSIGN(snap::NodeRecord rec, repo_->Record(*res.node));
  rep.node = MakeNodeInfo(rec);
  rep.label = res.label;
  rep.added = res.changes.added;
  rep.modified = res.changes.modified;
  rep.deleted = res.changes.deleted;
  return rep;
}

namespace {

bool AtOrBelow(const std::string& path, const std::string& top) {
  return top.empty() || path == top || (path.size() > top.size() && path.compare(0, top.size(), top) == 0 &&
                                        path[top.size()] == '/');
}

// A changed file's content as text for a patch; a note when there is none.
Result<std::string> TextOf(const store::Store& s, const snap::Entry* e, std::string* note) {
  constexpr uint64_t kMaxBytes = 1 << 20;
  if (!e || e->kind != snap::Kind::kFile) return std::string();
  if (e->size > kMaxBytes) {
    *note = "too large";
    return std::string();
  }
  std::string text;
  AE_TRY(s.ReadFile(e->file(), [&](std::span<const uint8_t> b) -> Result<void> {
    text.append(reinterpret_cast<const char*>(b.data()), b.size());
    return {};
  }));
  if (!LooksLikeText(text)) *note = "binary";
  return text;
}

}  // namespace

Result<DiffReply> Server::DiffReplyOf(const store::ObjectId& from, const store::ObjectId& to, const DiffRequest& r) {
  std::vector<std::string> paths;
  for (const std::string& given : r.paths) {
    AE_ASSIGN(std::string p, snap::TreePath(given));
    if (p.empty()) {  // the root: everything
      paths.clear();
      break;
    }
    paths.push_back(p);
  }
  constexpr size_t kMaxPatches = 100;
  DiffReply rep;
  const store::Store& s = repo_->store();
  AE_TRY(snap::DiffTrees(s, from, to, [&](const snap::Difference& d) -> Result<void> {
    const std::string& p = d.change.path;
    if (snap::MtimeOnlyDir(d)) return {};  // no change in a node's counts either
    if (!paths.empty() &&
        std::none_of(paths.begin(), paths.end(), [&](const std::string& top) { return AtOrBelow(p, top); }))
      return {};
    if (rep.total++ >= r.limit) return {};
    rep.changes.push_back(MakeChangeInfo(d.change));
    bool file = (d.old_entry && d.old_entry->kind == snap::Kind::kFile) ||
                (d.new_entry && d.new_entry->kind == snap::Kind::kFile);
    if (!r.patch || !file || rep.patches.size() >= kMaxPatches) return {};
    FilePatch fp{p, "", ""};
    AE_ASSIGN(std::string a, TextOf(s, d.old_entry, &fp.note));
    AE_ASSIGN(std::string b, TextOf(s, d.new_entry, &fp.note));
    if (fp.note.empty()) {
      auto diff = UnifiedDiff(a, b, d.old_entry ? "a/" + p : "/dev/null", d.new_entry ? "b/" + p : "/dev/null");
      if (diff) fp.diff = std::move(*diff);
      else fp.note = "too many changed lines";
    }
    if (!fp.diff.empty() || !fp.note.empty()) rep.patches.push_back(std::move(fp));
    return {};
  }));
  rep.truncated = rep.total > r.limit;
  return rep;
}

Result<RollbackReply> Server::Rollback(const RollbackRequest& r, const CallContext& call, const snap::OpOptions& op) {
  if (r.ref.empty()) return Fail(ErrorCode::kInvalid, "rollback: which node? (argument 'ref')");
  if (!r.workspace.empty()) return RollbackWorkspace(r, call);
  MutexLock writer(writer_mu_);
  // With a capture, history is brought up to date from the journal first:
  // the restore then saves nothing by walking the whole live tree.
  std::optional<std::vector<std::string>> dirty;
  if (capture_ && capture_->Drain()) dirty.emplace();
  // A capture watches the live subvolume itself: it must stay.
  bool swap = swap_restores_ && !capture_ && !r.in_place.value_or(false);
  snap::RestoreMode mode = swap ? snap::RestoreMode::kSwapIfUnused : snap::RestoreMode::kInPlace;
  snap::OpOptions logged = op;
  if (logged.who.origin == snap::Origin::kUnknown) logged.who = call.who;
  AE_ASSIGN(snap::RestoreResult res, r.paths.empty() ? repo_->Restore(r.ref, dirty, mode, logged)
                                                     : repo_->RestorePaths(r.ref, r.paths, dirty, logged));
  AE_ASSIGN(snap::NodeRecord rec, repo_->Record(res.node));
  RollbackReply rep;
  rep.node = MakeNodeInfo(rec);
  if (res.saved) rep.saved = res.saved->Hex();
  const auto& s = res.stats;
  rep.files_written = s.files_written;
  rep.bytes_written = s.bytes_written;
  rep.files_cloned = s.files_cloned;
  rep.removed = s.removed;
  rep.created = s.created;
  rep.meta_updated = s.meta_only;
  rep.warnings = s.warnings;
  if (res.swapped) rep.swapped = true;
  if (!res.not_swapped.empty()) rep.not_swapped = res.not_swapped;
  return rep;
}

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether `needle` (lowercase) is in the node's title or package deltas.
bool LogMatches(const snap::NodeRecord& n, const std::string& needle) {
  if (Lower(n.title).find(needle) != std::string::npos) return true;
  if (!n.packages) return false;
  for (const snap::PackageDelta& p : n.packages->items)
    for (const std::string* f : {&p.name, &p.old_version, &p.new_version})
      if (Lower(*f).find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

Result<LogReply> Server::Log(const LogRequest& r, const std::function<bool(const snap::NodeRecord&)>& keep) {
  std::vector<snap::NodeRecord> nodes;
  if (!r.workspace.empty()) {
    // A workspace's lane: its last node back through the parents.
    AE_ASSIGN(workspace::Workspace ws, workspace::LoadWorkspace(repo_->root(), r.workspace));
    const std::string needle = Lower(r.grep);
    std::optional<store::ObjectId> at = ws.head;
    while (at && nodes.size() <= r.limit) {
      AE_ASSIGN(snap::NodeRecord n, repo_->Record(*at));
      if (needle.empty() || LogMatches(n, needle)) nodes.push_back(n);
      at = n.parent;
    }
  } else if (r.grep.empty() && !keep) {
    AE_ASSIGN(nodes, repo_->Log(r.limit + 1));
  } else {
    // Records only (no node objects), newest first, until the page is
    // full: one pass over the index at most, holding only the page.
    std::string needle = Lower(r.grep);
    AE_TRY(repo_->meta().ForEachRecent([&](const snap::NodeRecord& n) -> Result<bool> {
      if ((!keep || keep(n)) && (needle.empty() || LogMatches(n, needle))) nodes.push_back(n);
      return nodes.size() <= r.limit;
    }));
  }
  LogReply rep;
  rep.more = nodes.size() > r.limit;
  if (rep.more) nodes.resize(r.limit);
  AE_ASSIGN(auto head, repo_->Head());
  auto tags = TagsByNode(*repo_);
  for (const auto& n : nodes) {
    auto t = tags.find(n.id);
    rep.nodes.push_back({MakeNodeInfo(n), head && *head == n.id, t == tags.end() ? "" : t->second});
  }
  if (r.grep.empty() && r.workspace.empty() && !nodes.empty()) {
    // The rollbacks among them: a page's worth of the newest, back to the
    // oldest node listed (all of them when the whole history is listed).
    const int64_t oldest = rep.more ? nodes.back().time_ns : INT64_MIN;
    AE_ASSIGN(auto ops, repo_->meta().RecentOperations(r.limit));
    for (const snap::Operation& op : ops)
      if (op.time_ns >= oldest) rep.operations.push_back(history::MakeOperationInfo(op));
  }
  return rep;
}

Result<DigestReply> Server::Digest(const DigestRequest& r, const std::function<bool(const snap::NodeRecord&)>& keep) {
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  return history::Digest(*repo_, r, now, keep);
}

Result<ShowReply> Server::Show(const ShowRequest& r) {
  AE_ASSIGN(store::ObjectId id, repo_->Resolve(r.ref));
  AE_ASSIGN(snap::NodeRecord rec, repo_->Record(id));
  ShowReply rep;
  rep.node = MakeNodeInfo(rec);
  if (!rec.packages && !rec.damaged()) {
    // A record from before package deltas: read them from the trees.
    auto packages = repo_->Packages(id);
    if (packages) {
      rep.node.packages = MakePackageInfos(*packages);
      rep.node.packages_omitted = OmittedPackages(*packages);
    }
  }
  if (!r.packages) LeaveOutPackages(rep.node);
  auto node = snap::LoadNode(repo_->store(), id);
  if (!node && rec.damaged()) return rep;  // its node object is what was lost
  if (!node) return Unexpected<Error>(node.error());
  NodeDetails d;
  d.message = node->message;
  d.label = node->label;
  d.tree = node->tree.Hex();
  d.files = node->files;
  d.logical_bytes = node->logical_bytes;
  d.added = node->changes.added;
  d.modified = node->changes.modified;
  d.deleted = node->changes.deleted;
  for (const auto& c : node->changes.sample) d.sample.push_back(MakeChangeInfo(c));
  rep.details = std::move(d);
  return rep;
}

Result<DiffReply> Server::Diff(const DiffRequest& r) {
  if (!r.workspace.empty()) return DiffWorkspace(r);
  AE_ASSIGN(store::ObjectId from, TreeOf(*repo_, r.from));
  store::ObjectId to;
  if (r.to.empty()) {
    MutexLock writer(writer_mu_);  // the live tree's content is stored
    AE_ASSIGN(to, repo_->LiveTree());
  } else {
    AE_ASSIGN(to, TreeOf(*repo_, r.to));
  }
  return DiffReplyOf(from, to, r);
}

Result<HeadReply> Server::Head(const HeadRequest& r) {
  AE_ASSIGN(store::ObjectId id, repo_->Resolve("HEAD"));
  AE_ASSIGN(snap::NodeRecord rec, repo_->Record(id));
  HeadReply rep{MakeNodeInfo(rec)};
  if (!r.packages) LeaveOutPackages(rep.node);
  return rep;
}

Result<BranchesReply> Server::Branches(const BranchesRequest&) {
  AE_ASSIGN(auto tips, repo_->Branches());
  AE_ASSIGN(auto head, repo_->Head());
  BranchesReply rep;
  for (const auto& n : tips) rep.branches.push_back({MakeNodeInfo(n), head && *head == n.id, ""});
  return rep;
}

Result<TagReply> Server::Tag(const TagRequest& r) {
  TagReply rep;
  if (r.name.empty()) {
    if (r.del) return Fail(ErrorCode::kInvalid, "tag -d: which tag? (tag -d NAME)");
    AE_ASSIGN(auto tags, repo_->Tags());
    rep.tags.emplace();
    for (const auto& [name, id] : tags) rep.tags->push_back({name, id.Hex()});
    return rep;
  }
  MutexLock writer(writer_mu_);
  if (r.del) {
    AE_TRY(repo_->Untag(r.name));
    rep.deleted = r.name;
    return rep;
  }
  if (!r.force) {
    AE_ASSIGN(auto tags, repo_->Tags());
    AE_ASSIGN(store::ObjectId want, repo_->Resolve(r.ref));
    for (const auto& [name, id] : tags)
      if (name == r.name && id != want)
        return Fail(ErrorCode::kExists, "tag '" + r.name + "' names " + Short(id) + " already (tag -f " + r.name +
                                            " to move it, tag -d to delete it)");
  }
  AE_ASSIGN(store::ObjectId id, repo_->Tag(r.name, r.ref));
  rep.name = r.name;
  rep.id = id.Hex();
  return rep;
}

Result<StatusReply> Server::Status(const StatusRequest&) {
  snap::RepoStatus st;
  {
    MutexLock writer(writer_mu_);
    auto full = repo_->Status();
    // It could not store what it read (a full disk): answer read-only.
    if (!full && full.error().code == ErrorCode::kIo) {
      AE_ASSIGN(st, repo_->PeekStatus());
    } else if (!full) {
      return Unexpected<Error>(full.error());
    } else {
      st = std::move(*full);
    }
  }
  StatusReply rep;
  rep.root = repo_->root();
  rep.work = repo_->work_dir();
  rep.backend = st.backend;
  if (st.head) rep.head = MakeNodeInfo(*st.head);
  rep.nodes = st.nodes;
  rep.disk_bytes = st.store.pack_bytes + st.meta_bytes;
  rep.stored_bytes = st.store.stored_bytes;
  rep.logical_bytes = st.store.logical_bytes;
  rep.head_files = st.head_files;
  rep.head_bytes = st.head_bytes;
  rep.dirty = st.dirty;
  if (st.unfinished_restore) rep.unfinished_restore = st.unfinished_restore->Hex();
  if (capture_) {
    capture::CaptureHealth h = capture_->Health();
    rep.capture = h.failing ? "failing" : "ok";
    rep.capture_error = h.last_error;
    rep.capture_failing_since_ns = h.failing_since_ns;
    rep.capture_retries = h.retries;
  }
  rep.changed = st.changed;
  for (const auto& c : st.changes) rep.changes.push_back(MakeChangeInfo(c));
  if (auto spaces = workspace::ListWorkspaces(repo_->root())) rep.workspaces = spaces->size();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(snap::layout::Lowers(repo_->root()), ec))
    rep.lowers += bool(store::ObjectId::FromHex(e.path().filename().string()));
  for (const auto& [dir, prefixes] : snap::layout::ScratchPlaces(repo_->root())) {
    snap::Leftovers left = snap::ReclaimLeftovers(dir, prefixes, /*remove=*/false);
    for (const auto& e : left.entries) rep.reclaimable.push_back({e.path, e.bytes});
    rep.reclaimable_bytes += left.bytes;
  }
  return rep;
}

Result<RetainReply> Server::Retain(const RetainRequest& r) {
  snap::RetentionPolicy policy;
  policy.keep_last = r.keep_last;
  policy.keep_within = std::chrono::seconds(r.keep_within_s);
  MutexLock writer(writer_mu_);
  AE_ASSIGN(snap::RetentionResult res, repo_->Retain(policy, r.dry_run, snap::NowNs()));
  RetainReply rep;
  rep.dry_run = r.dry_run;
  rep.dropped_nodes = res.dropped_nodes;
  for (const auto& n : res.dropped) rep.dropped.push_back(MakeNodeInfo(n));
  rep.kept = res.kept;
  rep.reparented = res.reparented;
  rep.released_objects = res.released;
  return rep;
}

Result<GcReply> Server::Gc(const GcRequest& r) {
  if (r.compact_above < 0 || r.compact_above > 100)
    return Fail(ErrorCode::kInvalid, "gc: compact_above must be a percentage from 0 to 100");
  store::CompactOptions compact;
  compact.min_dead_fraction = r.compact_above / 100;
  MutexLock writer(writer_mu_);
  AE_ASSIGN(snap::GcResult res, repo_->Gc(compact, r.full));
  GcReply rep{res.live_objects, res.dropped_objects, res.dropped_bytes, res.bytes_freed, res.packs_rewritten,
              res.counted,      res.objects_read};
  rep.stale_cache_rows = res.stale_cache_rows;
  // Lowers are a cache: removed unless a process leases them or a
  // workspace's state or a mounted view's record names them (snap/lowers.h,
  // mounts/views.h); records of views no longer mounted go first.
  AE_ASSIGN(rep.mounts_reclaimed, mounts::ReclaimStaleMounts(repo_->root()));
  AE_ASSIGN(snap::Repo::LowerSweep sweep, repo_->SweepLowers([&]() -> Result<std::set<std::string>> {
    AE_ASSIGN(auto spaces, workspace::ListWorkspaces(repo_->root()));
    AE_ASSIGN(std::set<std::string> named, mounts::MountedLowers(repo_->root()));
    for (const auto& ws : spaces) named.insert(std::filesystem::path(ws.lower).filename().string());
    return named;
  }));
  rep.lowers_removed = sweep.removed;
  std::vector<snap::Leftovers> left = {std::move(sweep.leftovers)};
  for (const auto& [dir, prefixes] : snap::layout::ScratchPlaces(repo_->root()))
    if (dir != snap::layout::Lowers(repo_->root())) left.push_back(snap::ReclaimLeftovers(dir, prefixes, true));
  for (const auto& l : left) {
    rep.scratch_removed += l.entries.size() - l.errors.size();
    rep.scratch_bytes += l.bytes;
    if (!l.errors.empty()) return Unexpected<Error>(l.errors.front());
  }
  AE_ASSIGN(rep.leases_released, workspace::ReleaseOrphanLeases(*repo_));
  return rep;
}

Result<ImportReply> Server::Import(const ImportRequest& r, const CallContext& call) {
  snap::Provenance prov;
  if (!r.provenance.empty()) {
    // What made the node the archive holds: kept, with where it came from.
    auto bytes = Base64Decode(r.provenance);
    if (!bytes) return Fail(ErrorCode::kInvalid, "import: 'provenance' is not base64");
    auto span = std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
    AE_ASSIGN(prov, snap::DecodeProvenance(span, "import: provenance"));
  } else {
    prov.kind = r.kind == "pull" ? snap::ProvenanceKind::kPull : snap::ProvenanceKind::kImport;
    prov.who = call.who;
  }
  prov.source = r.source;
  MutexLock writer(writer_mu_);
  AE_ASSIGN(snap::SnapResult res, repo_->Import(r.dir, r.message, prov));
  if (!res.node) return Fail(r.dir + ": import made no node");
  return ImportReply{res.node->Hex()};
}

}  // namespace agentenv::control

#include "snap/repo.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/durable.h"
#include "snap/btrfs.h"
#include "snap/diff.h"
#include "snap/fsops.h"
#include "snap/refcount.h"

namespace agentenv::snap {
namespace {

// How long a writer waits for the repository lock: $AGENTENV_LOCK_WAIT
// seconds (the CLI's --wait sets it), else 30.
double LockWaitSeconds() {
  const char* env = std::getenv("AGENTENV_LOCK_WAIT");
  if (!env || !*env) return 30;
  char* end = nullptr;
  double s = std::strtod(env, &end);
  return end && *end == 0 && s >= 0 ? s : 30;
}

Result<void> MakeDir(const std::string& p) {
  if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) return FailErrno(p, errno);
  return {};
}

bool Exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

// Does FICLONE work from a file in `a` to a file in `b`?
bool ReflinkWorks(const std::string& a, const std::string& b) {
  std::string pa = a + "/.probe-" + std::to_string(::getpid());
  std::string pb = b + "/.agentenv-probe-" + std::to_string(::getpid());
  UniqueFd fa(::open(pa.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  UniqueFd fb(::open(pb.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  bool ok = false;
  if (fa && fb) {
    std::string block(4096, 'x');
    ok = ::pwrite(fa.get(), block.data(), block.size(), 0) == ssize_t(block.size()) &&
         ::ioctl(fb.get(), FICLONE, fa.get()) == 0;
  }
  ::unlink(pa.c_str());
  ::unlink(pb.c_str());
  return ok;
}

// Returns once what was written by `filled_ns` is kRacyWindowNs older
// than a snapshot made next (SnapOptions::filled_ns). On btrfs that time
// is the snapshot's own, from the kernel's coarse clock: up to a tick
// (10 ms at HZ=100, the coarsest) behind the wall clock.
void WaitPastRacyWindow(int64_t filled_ns) {
  constexpr int64_t kTickNs = 10'000'000;
  int64_t now = NowNs(), until = filled_ns + kRacyWindowNs + kTickNs;
  if (now < until) std::this_thread::sleep_for(std::chrono::nanoseconds(until - now));
}

std::string WantedBackend() {
  const char* env = std::getenv("AGENTENV_BACKEND");
  return env ? env : "auto";
}

}  // namespace

// Is the `initializing` marker of root held by a running init? Without a
// marker: nullopt.
static std::optional<bool> InitRunning(const std::string& root) {
  UniqueFd fd(::open(layout::Initializing(root).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return std::nullopt;
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) return true;
  return false;
}

Result<std::unique_ptr<Repo>> Repo::Create(const std::string& root) {
  AE_ASSIGN(std::unique_ptr<Repo> r, CreateStaged(root));
  AE_TRY(r->FinishInit());
  return r;
}

Result<std::unique_ptr<Repo>> Repo::CreateStaged(const std::string& root) {
  if (std::optional<bool> running = InitRunning(root)) {
    if (*running) return Fail(ErrorCode::kBusy, root + ": another `agentenv init` is making this repository");
    // A killed init: start over.
    std::error_code ec;
    for (const char* d : layout::kCreated) std::filesystem::remove_all(root + d, ec);
    if (ec) return Fail(root + ": cannot remove the half-made repository: " + ec.message());
  }
  if (Exists(layout::Meta(root)) || Exists(layout::Store(root)))
    return Fail(ErrorCode::kExists, root + ": already an agentenv repository");
  std::string want = WantedBackend();
  if (want == "btrfs") {
    // Checked before anything is made: where the repository would be.
    std::string where = Exists(root) ? root : std::filesystem::path(root).parent_path().string();
    if (!btrfs::OnBtrfs(where.empty() ? "." : where))
      return Fail(ErrorCode::kUnsupported, root + ": AGENTENV_BACKEND=btrfs but this is not a btrfs filesystem");
  }
  AE_TRY(MakeDir(root));
  // The marker first, durably, so that no crash leaves a repository that
  // looks whole before its first node is committed.
  std::string marker = layout::Initializing(root);
  UniqueFd init_marker(::open(marker.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!init_marker) return FailErrno(marker, errno);
  if (::flock(init_marker.get(), LOCK_EX) != 0 || ::fsync(init_marker.get()) != 0) return FailErrno(marker, errno);
  AE_TRY(FsyncDir(root));
  AE_TRY(MakeDir(layout::WorkParent(root)));
  // On btrfs the live tree is a subvolume, so that nodes can keep O(1)
  // snapshots of it (snap/btrfs.h).
  if ((want == "auto" || want == "btrfs") && btrfs::OnBtrfs(layout::WorkParent(root))) {
    AE_TRY(btrfs::CreateSubvolume(layout::Work(root)));
  } else {
    AE_TRY(MakeDir(layout::Work(root)));
  }
  std::unique_ptr<Repo> r(new Repo);
  r->root_ = root;
  r->init_marker_ = std::move(init_marker);
  AE_ASSIGN(r->store_, store::Store::Open(layout::Store(root), store::Store::Mode::kCreate));
  AE_ASSIGN(r->meta_, MetaDb::Open(layout::Meta(root), true));
  // No references yet: the empty table is the full count.
  AE_ASSIGN(auto txn, r->meta_->Begin());
  AE_TRY(txn->SetCounted());
  AE_TRY(txn->Commit());
  return r;
}

Result<void> Repo::FinishInit() {
  AE_TRY(meta_->Sync());  // committed without fsync until now (MetaDb::Open)
  std::string marker = layout::Initializing(root_);
  if (::unlink(marker.c_str()) != 0) return FailErrno(marker, errno);
  AE_TRY(FsyncDir(root_));
  init_marker_.reset();
  return {};
}

Result<std::unique_ptr<Repo>> Repo::Open(const std::string& root) {
  if (std::optional<bool> running = InitRunning(root)) {
    if (*running) return Fail(ErrorCode::kBusy, root + ": `agentenv init` is still making this repository");
    return Fail(ErrorCode::kNotFound, root + ": half-made repository (an `agentenv init` was interrupted): run the "
                                             "same `agentenv init` again, it starts over");
  }
  if (!Exists(layout::Meta(root)) || !Exists(layout::Store(root)))
    return Fail(ErrorCode::kNotFound, root + ": not an agentenv repository (run `agentenv init`)");
  std::unique_ptr<Repo> r(new Repo);
  r->root_ = root;
  AE_ASSIGN(r->store_, store::Store::Open(layout::Store(root), store::Store::Mode::kOpen));
  AE_ASSIGN(r->meta_, MetaDb::Open(layout::Meta(root), false));
  return r;
}

Result<std::string> Repo::Backend() {
  if (backend_) return *backend_;
  std::string want = WantedBackend();
  if (want != "auto" && want != "copy" && want != "reflink" && want != "btrfs")
    return Fail(ErrorCode::kInvalid, "AGENTENV_BACKEND=" + want + ": expected auto, copy, reflink or btrfs");
  bool subvol = (want == "auto" || want == "btrfs") && btrfs::IsSubvolume(work_dir());
  if (want == "btrfs" && !subvol)
    return Fail(ErrorCode::kUnsupported, work_dir() + ": AGENTENV_BACKEND=btrfs but the live tree is not a btrfs subvolume (init the repository on btrfs)");
  if (subvol) {
    backend_ = "btrfs";
    return *backend_;
  }
  // Probe next to the live tree, not inside it: a probe file would change
  // the tree root's mtime.
  bool reflink = want != "copy" && ReflinkWorks(layout::Store(root_), layout::WorkParent(root_));
  if (want == "reflink" && !reflink)
    return Fail(ErrorCode::kUnsupported, root_ + ": AGENTENV_BACKEND=reflink but this filesystem cannot reflink (FICLONE); use copy");
  backend_ = reflink ? "reflink" : "copy";
  return *backend_;
}

Result<RestoreOptions> Repo::RestoreOpts() {
  AE_ASSIGN(std::string backend, Backend());
  RestoreOptions ro;
  ro.reflink = backend == "reflink" || backend == "btrfs";
  ro.privileged = ::geteuid() == 0;
  ro.ignored = ignored_;
  ro.progress = progress_;
  AE_ASSIGN(ro.stat_dev, LiveStatDev());
  // Reflinks from a materialized lower cover compressed content too,
  // which the store's packs cannot clone.
  if (ro.reflink) ro.sources = CloneSources::Open(*store_, layout::Lowers(root_));
  // Stat cache entries describe files as they now are on disk, whose
  // content is committed: true whenever they are written, so they go in
  // batches and memory does not grow with the tree.
  ro.stat_sink = [this](std::vector<std::pair<std::string, StatEntry>>&& entries) -> Result<void> {
    AE_ASSIGN(auto txn, meta_->Begin());
    AE_TRY(PutStats(*txn, entries));
    return txn->Commit();
  };
  return ro;
}

Result<Repo::WriteLock> Repo::Lock() {
  WriteLock l{std::unique_lock<std::mutex>(write_mu_), UniqueFd()};
  if (!held_lock_) {
    AE_ASSIGN(l.file, LockFile());
  }
  SweepUnfinishedRestore();
  SweepSwapLeftovers();
  return l;
}

Result<void> Repo::HoldLock() {
  std::lock_guard<std::mutex> g(write_mu_);
  if (held_lock_) return {};
  AE_ASSIGN(held_lock_, LockFile());
  return {};
}

Result<UniqueFd> Repo::LockFile() {
  std::string path = layout::Lock(root_);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return FailErrno(path, errno);
  double wait_s = LockWaitSeconds();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) return FailErrno(path, errno);
    if (std::chrono::steady_clock::now() >= deadline) {
      char waited[32];
      std::snprintf(waited, sizeof waited, "%g s", wait_s);
      return Fail(ErrorCode::kBusy, root_ + ": locked by another agentenv command (still busy after " + waited +
                                        "): retry when it ends, or wait longer with --wait SECONDS");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fd;
}

Result<UniqueFd> Repo::OpenWork() const {
  UniqueFd fd(::open(work_dir().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return FailErrno(work_dir(), errno);
  return fd;
}

Result<void> Repo::LoadHead(Scanned& sc) {
  AE_ASSIGN(sc.head, meta_->GetRef("HEAD"));
  if (!sc.head) return {};
  // A damaged HEAD (fsck --repair marked it) may miss its node object or
  // trees: the next node is still its child, but is scanned and summarized
  // from scratch rather than against it.
  AE_ASSIGN(auto rec, meta_->GetNode(*sc.head));
  if (rec && rec->damaged()) return {};
  AE_ASSIGN(Node n, LoadNode(*store_, *sc.head));
  sc.head_node = std::move(n);
  return {};
}

Result<Repo::Scanned> Repo::ScanLive(const std::optional<std::vector<std::string>>& paths,
                                     const std::vector<std::string>& entries) {
  Scanned sc;
  AE_TRY(LoadHead(sc));
  AE_ASSIGN(UniqueFd work, OpenWork());
  AE_ASSIGN(uint64_t dev, LiveStatDev());
  AE_ASSIGN(sc.out, ScanFd(work.get(), sc.head_node, paths, entries, &sc.batch, dev));
  return sc;
}

Result<ScanOutput> Repo::ScanFd(int fd, const std::optional<Node>& base,
                                const std::optional<std::vector<std::string>>& paths,
                                const std::vector<std::string>& entries,
                                std::unique_ptr<store::Batch>* batch, uint64_t stat_dev, bool live,
                                const decltype(ScanContext::on_dir)& on_dir) {
  AE_ASSIGN(*batch, store_->BeginBatch());
  ScanContext ctx{*store_, **batch, *meta_, ignored_, NowNs()};
  ctx.ignored_dir = ignored_dir_;
  ctx.progress = progress_;
  BeginPhase(progress_, "scanning");
  ctx.stat_dev = stat_dev;
  ctx.live = live;
  ctx.on_dir = on_dir;
  if (live) {
    AE_ASSIGN(ctx.removals, store_->Removals());
  }
  // The empty tree is the diff base of the first node.
  std::vector<uint8_t> empty = EncodeTree({});
  AE_TRY((*batch)->Put(store::ObjectType::kTree, empty));
  std::optional<ScanOutput> out;
  if (paths && base) {
    AE_ASSIGN(out, ScanPaths(ctx, fd, base->tree, base->links, *paths, entries));
  }
  if (!out) {
    AE_ASSIGN(ScanOutput full, ScanTree(ctx, fd));
    out = std::move(full);
  }
  out->trees.emplace(EmptyTreeId(), std::move(empty));
  out->new_trees.push_back(EmptyTreeId());
  return std::move(*out);
}

Result<void> Repo::CommitContent(Scanned& sc) {
  if (!sc.batch) return {};
  std::unique_ptr<store::Batch> batch = std::move(sc.batch);
  // Nothing new (everything deduplicated): abandoning the batch costs no
  // fsync and no index commit; every id the scan named already exists.
  if (batch->new_bytes() == 0) return {};
  return batch->Commit();
}

Result<SnapResult> Repo::Seed(const std::string& dir, const std::string& message,
                              const std::optional<Provenance>& provenance) {
  AE_ASSIGN(WriteLock lock, Lock());
  AE_ASSIGN(auto head, meta_->GetRef("HEAD"));
  if (head) return Fail(ErrorCode::kExists, root_ + ": already has history; seed only a new repository");
  int64_t scanned_from = NowNs();
  AE_ASSIGN(UniqueFd work, OpenWork());
  AE_ASSIGN(RestoreOptions ro, RestoreOpts());
  // What the scan reads stays there: files unchanged since are copied (or
  // cloned) from it rather than decompressed from the store.
  ro.sources = CloneSources::OpenScanned(*store_, dir, scanned_from);
  ro.fresh = true;  // a new repository's empty live tree; a failed init removes it
  // The scan is CPU-bound (hashing, compressing), writing the live tree
  // waits on the filesystem: each directory is written as soon as the scan
  // has its tree, and the restore below does only the rest (the root,
  // directories with hardlinks and those above them). Its stat cache
  // entries are committed before the content is (a crash before
  // FinishInit discards the whole repository), but for those naming a
  // manifest: counted before it can be read, its chunks would wait
  // uncounted, so they go with the node.
  RestoreOptions eo = ro;
  std::vector<std::pair<std::string, StatEntry>> held;  // the sink's calls never overlap; read after Finish
  eo.stat_sink = [&held, &sink = ro.stat_sink](std::vector<std::pair<std::string, StatEntry>>&& entries) {
    auto manifests = std::stable_partition(entries.begin(), entries.end(), [](const auto& e) {
      return e.second.ref.type != store::ObjectType::kManifest;
    });
    held.insert(held.end(), std::make_move_iterator(manifests), std::make_move_iterator(entries.end()));
    entries.erase(manifests, entries.end());
    return sink(std::move(entries));
  };
  EarlyWriter early(*store_, work.get(), eo);
  AE_ASSIGN(Scanned sc, ScanForeign(dir, &early));
  AE_TRY(CommitContent(sc));  // the restore below reads the trees
  RestoreStats es;
  AE_ASSIGN(WrittenDirs written, early.Finish(&es));
  es.stat_entries.insert(es.stat_entries.end(), std::make_move_iterator(held.begin()),
                         std::make_move_iterator(held.end()));
  ro.written = &written;
  AE_ASSIGN(RestoreStats rs, RestoreTree(*store_, work.get(), EmptyTreeId(), sc.out.tree, sc.out.root,
                                         sc.out.links, ro));
  const int64_t filled_ns = NowNs();
  // The live tree now holds exactly these files: cache them as written.
  sc.out.stat_updates = std::move(es.stat_entries);
  sc.out.stat_updates.insert(sc.out.stat_updates.end(), std::make_move_iterator(rs.stat_entries.begin()),
                             std::make_move_iterator(rs.stat_entries.end()));
  rs.warnings.insert(rs.warnings.begin(), es.warnings.begin(), es.warnings.end());
  SnapOptions opt;
  opt.message = message;
  opt.provenance = provenance;
  opt.allow_empty = true;
  AE_ASSIGN(SnapResult res, Commit(sc, opt));
  res.warnings.insert(res.warnings.end(), rs.warnings.begin(), rs.warnings.end());
  // Nothing else writes the new live tree yet: it is exactly the node.
  AE_ASSIGN(bool subvols, UseSubvols());
  if (subvols && res.node) {
    // The base of the first snapshot's change search: made once every file
    // written above is out of the racy window, so that reading them later
    // (each one's first read moves its atime) is no change to it.
    WaitPastRacyWindow(filled_ns);
    auto fresh = SnapshotLive();
    if (fresh) KeepSubvol(*fresh, res.node, &res.warnings);
    else res.warnings.push_back(fresh.error().message);
  }
  return res;
}

Result<Repo::Scanned> Repo::ScanForeign(const std::string& dir, EarlyWriter* early) {
  UniqueFd src(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!src) return FailErrno(dir, errno);
  Scanned sc;
  AE_TRY(LoadHead(sc));
  decltype(ScanContext::on_dir) on_dir;
  if (early)
    on_dir = [early](const std::string& rel, const Entry& e, Tree&& t) { early->Add(rel, e, std::move(t)); };
  AE_ASSIGN(sc.out, ScanFd(src.get(), std::nullopt, std::nullopt, {}, &sc.batch, 0, /*live=*/false, on_dir));
  return sc;
}

Result<Repo::Scanned> Repo::ScanOverlay(const std::string& upper, const store::ObjectId& base) {
  UniqueFd fd(::open(upper.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return FailErrno(upper, errno);
  AE_ASSIGN(Node lower, LoadNode(*store_, base));
  Scanned sc;
  AE_ASSIGN(sc.batch, store_->BeginBatch());
  ScanContext ctx{*store_, *sc.batch, *meta_, ignored_, NowNs()};
  ctx.ignored_dir = ignored_dir_;
  ctx.progress = progress_;
  BeginPhase(progress_, "scanning");
  ctx.overlay_upper = true;
  AE_ASSIGN(sc.out, ScanUpper(ctx, fd.get(), lower.tree, lower.links));
  return sc;
}

Result<SnapResult> Repo::SnapshotUpper(const std::string& upper, const store::ObjectId& base,
                                       const store::ObjectId& parent, const SnapOptions& opt) {
  AE_ASSIGN(WriteLock lock, Lock());
  AE_ASSIGN(Scanned sc, ScanOverlay(upper, base));
  sc.head = parent;
  AE_ASSIGN(Node p, LoadNode(*store_, parent));
  sc.head_node = std::move(p);
  return Commit(sc, opt, false);
}

Result<store::ObjectId> Repo::UpperTree(const std::string& upper, const store::ObjectId& base) {
  AE_ASSIGN(WriteLock lock, Lock());
  AE_ASSIGN(Scanned sc, ScanOverlay(upper, base));
  AE_TRY(CommitContent(sc));
  return sc.out.tree;
}

Result<SnapResult> Repo::Import(const std::string& dir, const std::string& message,
                                const std::optional<Provenance>& provenance) {
  AE_ASSIGN(WriteLock lock, Lock());
  AE_ASSIGN(Scanned sc, ScanForeign(dir));
  SnapOptions opt;
  opt.message = message;
  opt.provenance = provenance;
  opt.allow_empty = true;
  return Commit(sc, opt, false);
}

Result<store::ObjectId> Repo::LiveTree() {
  AE_ASSIGN(WriteLock lock, Lock());
  AE_ASSIGN(Scanned sc, ScanLive(std::nullopt));
  AE_TRY(CommitContent(sc));
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_TRY(PutStats(*txn, sc.out.stat_updates, &sc.out));
  AE_TRY(txn->Commit());
  return sc.out.tree;
}

Result<SnapResult> Repo::Commit(Scanned& sc, const SnapOptions& opt, bool move_head, std::optional<Operation> op) {
  SnapResult res;
  res.hashed_files = sc.out.hashed_files;
  res.hashed_bytes = sc.out.hashed_bytes;
  res.read_entries = sc.out.read_entries;
  res.looked_up_trees = sc.out.looked_up_trees;
  res.walked = sc.out.walked;
  res.warnings = sc.out.warnings;
  const Node* head = sc.head_node ? &*sc.head_node : nullptr;
  bool same = head && head->tree == sc.out.tree && head->root == sc.out.root && head->links == sc.out.links;
  // The change summary is computed from the trees this scan made.
  TreeLoader load = [&](const store::ObjectId& id) -> Result<Tree> {
    auto it = sc.out.trees.find(id);
    if (it == sc.out.trees.end()) return LoadTree(*store_, id);
    return DecodeTree(it->second, id.Hex());
  };
  const store::ObjectId& from = head ? head->tree : EmptyTreeId();
  // Package databases are spotted as the diff visits them, and read only
  // once a node is made.
  bool detect = PackageDeltasEnabled();
  PackageWatch watch;
  TreeDelta delta;
  if (!same) {
    AE_ASSIGN(delta, Delta(load, from, sc.out.tree, detect ? DiffObserver([&](const Difference& d) { watch.See(d); })
                                                           : DiffObserver()));
    // Only directory mtimes moved: nothing a user would call a change.
    same = head && delta.changes.summary().total() == 0 && SameButMtime(head->root, sc.out.root) && head->links == sc.out.links;
  }
  if (same && !opt.allow_empty) {
    // Content may be new even so (files the stat cache will name).
    AE_TRY(CommitContent(sc));
    AE_ASSIGN(auto txn, meta_->Begin());
    AE_TRY(PutStats(*txn, sc.out.stat_updates, &sc.out));
    AE_TRY(txn->Commit());
    return res;
  }
  // Content, trees and the node go into one batch: one sync point.
  Node n;
  n.tree = sc.out.tree;
  n.root = sc.out.root;
  n.parent = sc.head;
  n.time_ns = opt.time_ns ? opt.time_ns : NowNs();
  std::optional<Provenance> prov;
  if (opt.provenance) prov = Bounded(*opt.provenance);
  n.message = opt.message.empty() && prov ? prov->message : opt.message;
  if (prov) prov->message = CutUtf8(n.message, Provenance::kMaxText);
  std::string change_label = delta.changes.Label();
  if (head && !(head->root == sc.out.root) && change_label.empty()) change_label = "M .";
  // Without a label given, a provenance names what made the node.
  const bool rendered = opt.label.empty() && prov;
  n.label = opt.label.empty() ? change_label : opt.label;
  if (watch.any()) {
    // New content is still in the scan's batch: read it there first.
    ObjectLoader objects = [&](const store::ObjectId& id) -> Result<std::vector<uint8_t>> {
      if (sc.batch) {
        auto pending = sc.batch->GetPending(id);
        if (pending || pending.error().code != ErrorCode::kNotFound) return pending;
      }
      return store_->Get(id);
    };
    res.packages = watch.Resolve(load, objects, from, sc.out.tree);
    if (!rendered) n.label = LeadWithPackages(res.packages, n.label);
  }
  if (rendered) n.label = RenderTitle(*prov, change_label, watch.any() ? &res.packages : nullptr);
  n.changes = delta.changes.summary();
  n.links = sc.out.links;
  n.files = uint64_t(int64_t(head ? head->files : 0) + delta.files);
  n.logical_bytes = uint64_t(int64_t(head ? head->logical_bytes : 0) + delta.bytes);
  if (!sc.batch) {
    AE_ASSIGN(sc.batch, store_->BeginBatch());
  }
  AE_ASSIGN(store::ObjectId id, sc.batch->Put(store::ObjectType::kNode, EncodeNode(n)));
  AE_TRY(CommitContent(sc));

  // The commit point: the node record and every reference it adds (its
  // store objects are durable by now; its tree's references deferred, see
  // refcount.h) in one transaction. A crash before leaves objects nothing
  // counts, which gc --full reclaims; counts are never too low.
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_ASSIGN(bool counted, txn->Counted());
  RefCounter refs(*store_, *txn, counted, MetaDb::Txn::Counts::kLive, load);
  for (const auto& [path, e] : sc.out.stat_updates) AE_TRY(refs.PutStat(path, e));
  for (const auto& [path, e] : sc.out.entry_updates) AE_TRY(txn->PutEntry(path, e));
  if (move_head) {
    // Files gone from the live tree: their stat entries would otherwise
    // keep their content referenced (and stored) for ever, and the entry
    // cache would grow with every name ever used.
    for (const std::string& path : delta.deleted_files) {
      AE_TRY(refs.DeleteStat(path));
      AE_TRY(txn->DeleteEntry(path));
    }
    for (const std::string& path : delta.deleted_dirs) AE_TRY(txn->DeleteEntry(path));
  }
  NodeRecord rec;
  rec.id = id;
  AE_ASSIGN(rec.seq, txn->NextSeq());
  rec.time_ns = n.time_ns;
  rec.parent = n.parent;
  rec.tree = n.tree;
  rec.changes = n.changes.total();
  rec.title = CutUtf8(n.message.empty() ? n.label : n.message, kMaxTitle);
  if (rendered && n.message.empty()) rec.flags |= NodeRecord::kTitleRendered;
  if (detect) rec.packages = res.packages;
  rec.provenance = std::move(prov);
  AE_TRY(txn->PutNode(rec));
  AE_TRY(refs.DeferNode(rec.seq, id, n.tree));
  if (counted) {
    AE_ASSIGN(uint64_t deferred, txn->DeferredNodes());
    if (deferred >= kDeferredNodesMax) AE_TRY(ApplyDeferred(*store_, *txn, load));
  }
  AE_TRY(HealStored(refs, sc.out));
  if (n.parent) {
    AE_TRY(txn->AddChild(*n.parent, id));
    AE_TRY(txn->DeleteRef("tip/" + n.parent->Hex()));
  }
  AE_TRY(txn->SetRef("tip/" + id.Hex(), id));
  if (move_head) AE_TRY(txn->SetRef("HEAD", id));
  if (op) {
    op->to = id;
    if (!op->time_ns) op->time_ns = NowNs();
    AE_TRY(txn->PutOperation(*op));
  }
  AE_TRY(txn->Commit());
  res.node = id;
  res.changes = n.changes;
  res.label = n.label;
  return res;
}

Result<SnapResult> Repo::Snapshot(const SnapOptions& opt) {
  AE_ASSIGN(WriteLock lock, Lock());
  if (opt.filled_ns) WaitPastRacyWindow(opt.filled_ns);
  std::string fresh;
  AE_ASSIGN(Scanned sc, ScanCurrent(opt.paths, opt.entry_paths, &fresh));
  AE_ASSIGN(SnapResult res, Commit(sc, opt));
  KeepSubvol(fresh, res.node ? res.node : sc.head, &res.warnings);
  EndLiveRestore();  // the tree as it is now is history: nothing left to finish
  return res;
}

Result<RestoreResult> Repo::Restore(const std::string& ref, const std::optional<std::vector<std::string>>& dirty,
                                    RestoreMode mode, const OpOptions& op_opt) {
  AE_ASSIGN(WriteLock lock, Lock());
  AE_ASSIGN(store::ObjectId target, Resolve(ref));
  AE_ASSIGN(NodeRecord rec, Record(target));
  if (rec.damaged())
    return Fail(ErrorCode::kCorrupt, "node " + target.Hex().substr(0, 12) + " is damaged and cannot be restored: " +
                                         rec.damage + " (fsck --repair marked it; restore another node)");
  AE_ASSIGN(Node to, LoadNode(*store_, target));
  std::string fresh;
  AE_ASSIGN(Scanned sc, ScanCurrent(dirty, {}, &fresh));
  RestoreResult res;
  res.node = target;
  SnapOptions save;
  Provenance& sp = save.provenance.emplace();
  sp.kind = ProvenanceKind::kSave;
  sp.restore.emplace().target = target;
  sp.who = op_opt.who;
  AE_ASSIGN(SnapResult saved, Commit(sc, save));
  KeepSubvol(fresh, saved.node ? saved.node : sc.head, &saved.warnings);
  res.saved = saved.node;
  res.stats.warnings = std::move(saved.warnings);
  Operation op;
  op.kind = op_opt.kind == OpKind::kUnknown ? OpKind::kRestore : op_opt.kind;
  op.from = sc.head;
  op.to = target;
  op.saved = saved.node;
  op.who = op_opt.who;
  op.tournament = op_opt.tournament;
  op.time_ns = op_opt.time_ns;
  if (mode == RestoreMode::kSwapIfUnused) {
    AE_ASSIGN(bool many, DiffersInMany(sc.out.tree, to.tree));
    if (many) {
      AE_ASSIGN(bool swapped, SwapLive(target, &res, &res.not_swapped, op));
      if (swapped) return res;
    }
  }
  AE_TRY(ForgetRemoved(sc.out.tree, to.tree));
  AE_ASSIGN(UniqueFd work, OpenWork());
  AE_ASSIGN(RestoreOptions ro, RestoreOpts());
  AE_ASSIGN(UniqueFd marker, BeginLiveRestore(target));
  AE_ASSIGN(RestoreStats rs, RestoreTree(*store_, work.get(), sc.out.tree, to.tree, to.root, to.links, ro));
  rs.warnings.insert(rs.warnings.begin(), res.stats.warnings.begin(), res.stats.warnings.end());
  res.stats = std::move(rs);
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_TRY(PutStats(*txn, res.stats.stat_entries));
  AE_TRY(txn->SetRef("HEAD", target));
  if (!op.time_ns) op.time_ns = NowNs();
  AE_TRY(txn->PutOperation(op));
  AE_TRY(txn->Commit());
  EndLiveRestore();
  return res;
}

Result<bool> Repo::DiffersInMany(const store::ObjectId& a, const store::ObjectId& b) {
  // Counting stops at the threshold.
  if (swap_from_ == 0) return true;
  uint64_t n = 0;
  Result<void> r = DiffTrees(*store_, a, b, [&](const Difference&) -> Result<void> {
    if (++n >= swap_from_) return Fail(ErrorCode::kExists, "enough differences counted");
    return {};
  });
  if (n >= swap_from_) return true;
  AE_TRY(r);
  return false;
}

Result<RepoStatus> Repo::Status() {
  AE_ASSIGN(WriteLock lock, Lock());
  AE_ASSIGN(Scanned sc, ScanLive(std::nullopt));
  AE_TRY(CommitContent(sc));
  AE_ASSIGN(RepoStatus st, StatusOf(sc));
  // Keep what the scan learned, so the next snapshot need not read again.
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_TRY(PutStats(*txn, sc.out.stat_updates, &sc.out));
  AE_TRY(txn->Commit());
  return st;
}

Result<RepoStatus> Repo::PeekStatus() {
  Scanned sc;
  AE_TRY(LoadHead(sc));
  AE_ASSIGN(UniqueFd work, OpenWork());
  std::unique_ptr<store::Batch> hashing = store_->HashingBatch();
  ScanContext ctx{*store_, *hashing, *meta_, ignored_, NowNs()};
  ctx.ignored_dir = ignored_dir_;
  ctx.progress = progress_;
  AE_ASSIGN(sc.out, ScanTree(ctx, work.get()));
  sc.out.trees.emplace(EmptyTreeId(), EncodeTree({}));
  return StatusOf(sc);
}

Result<RepoStatus> Repo::StatusOf(const Scanned& sc) {
  RepoStatus st;
  AE_ASSIGN(st.backend, Backend());
  AE_ASSIGN(st.nodes, meta_->NodeCount());
  st.unfinished_restore = UnfinishedRestore();
  AE_ASSIGN(st.store, store_->Stats());
  struct stat ms;
  if (::stat(layout::MetaData(root_).c_str(), &ms) == 0) st.meta_bytes = uint64_t(ms.st_blocks) * 512;
  if (sc.head) {
    AE_ASSIGN(NodeRecord rec, Record(*sc.head));
    st.head = rec;
    if (sc.head_node) st.head_files = sc.head_node->files, st.head_bytes = sc.head_node->logical_bytes;
  }
  const Node* head = sc.head_node ? &*sc.head_node : nullptr;
  TreeDelta delta;
  if (st.head && !head) {
    // A damaged HEAD cannot be diffed; equal tree ids still say clean.
    st.dirty = st.head->tree != sc.out.tree;
  } else {
    // The scan's own trees may not be stored (PeekStatus).
    TreeLoader load = [&](const store::ObjectId& id) -> Result<Tree> {
      auto it = sc.out.trees.find(id);
      if (it == sc.out.trees.end()) return LoadTree(*store_, id);
      return DecodeTree(it->second, id.Hex());
    };
    AE_ASSIGN(delta, Delta(load, head ? head->tree : EmptyTreeId(), sc.out.tree));
    st.changed = delta.changes.summary().total();
    st.dirty = st.changed > 0 || (head && !SameButMtime(head->root, sc.out.root));
  }
  st.changes = delta.changes.summary().sample;
  return st;
}

}  // namespace agentenv::snap

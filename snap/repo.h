// snap/repo: an agentenv repository: the public API of snap/.
//
// Layout under the root: store/ (objects), meta/ (history index), work/current
// (the live tree), lock (writers), ignore (extra ignore patterns, optional).
// Writers (Snapshot, Restore, Tag) take the repository lock; readers (Log,
// Resolve, Head, Branches) never wait for it. Store objects are committed
// before the metadata that names them, so a crash at any point leaves every
// committed snapshot intact (at worst some unreferenced objects).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "snap/layout.h"
#include "snap/lowers.h"
#include "snap/meta.h"
#include "snap/node.h"
#include "snap/oplog.h"
#include "snap/packages.h"
#include "snap/provenance.h"
#include "snap/refcount.h"
#include "snap/restore.h"
#include "snap/scan.h"
#include "snap/scratch.h"
#include "store/store.h"

namespace agentenv::snap {

struct SnapOptions {
  std::string message;  // from the user
  std::string label;    // automatic; empty: rendered from `provenance`, else a summary of the changes
  // What makes the node (snap/provenance.h), stored in its record
  // (bounded: snap::Bounded) in the transaction that makes it. Without a
  // message or label, the title is rendered from it (RenderTitle) and
  // marked NodeRecord::kTitleRendered. Its message, when `message` is
  // empty, is the node's message; `message` is copied into it otherwise.
  std::optional<Provenance> provenance;
  // Changed paths (from a change journal); absent: scan the whole tree.
  std::optional<std::vector<std::string>> paths;
  // With `paths`: further changed paths whose own entry changed but not
  // their contents (a directory's metadata), so nothing below is re-read.
  std::vector<std::string> entry_paths;
  bool allow_empty = false;  // make a node even when nothing changed
  int64_t time_ns = 0;       // the node's time; 0: now (others: imports, simulations)
  // init: when it finished filling the live tree (0: it did not). The
  // snapshot then waits until those writes are kRacyWindowNs old (at most
  // 60 ms), so that the scan's stat cache entries cover every file and,
  // on btrfs, the node's subvolume snapshot lets the next change search
  // tell each file init wrote that is only read later (relatime moves its
  // atime) from a changed one.
  int64_t filled_ns = 0;
};

struct SnapResult {
  std::optional<store::ObjectId> node;  // absent: nothing changed, no node
  ChangeSummary changes;
  std::string label;       // leads with PackageLabel(packages) when there are any
  PackageDeltas packages;  // versus the parent (snap/packages.h); empty with AGENTENV_PACKAGES=off
  uint64_t hashed_files = 0, hashed_bytes = 0;
  // Directories, symlinks and special files whose xattrs (and target) had
  // to be read: the entry cache did not know them as they are.
  uint64_t read_entries = 0;
  // Trees looked up in the store: those no tree hint knew (EntryStat::tree).
  uint64_t looked_up_trees = 0;
  bool walked = false;  // the whole live tree was walked (no journal or btrfs change search)
  std::vector<std::string> warnings;
};

// Who asked for a restore and why, for its row in the operation log
// (snap/oplog.h) and the provenance of the nodes it makes.
struct OpOptions {
  OpKind kind = OpKind::kUnknown;  // kUnknown: the call's own (kRestore, kPartialRestore)
  Requester who;
  std::string tournament;  // kTournamentApply: the tournament's id
  int64_t time_ns = 0;     // the row's time; 0: now (generators of history pass their clock)
};

struct RestoreResult {
  store::ObjectId node;                  // now HEAD
  std::optional<store::ObjectId> saved;  // node holding the discarded changes
  RestoreStats stats;
  bool swapped = false;     // the live tree was replaced by the node's snapshot
  std::string not_swapped;  // RestoreMode::kSwapIfUnused restored in place: why
};

// How Restore changes the live tree.
enum class RestoreMode {
  // Rewrites what differs, file by file: processes working in the tree
  // keep their open files and working directory (an agent running).
  kInPlace,
  // btrfs: when the node has a subvolume snapshot and nothing uses the live
  // tree (snap/live_use.h), replaces the live subvolume by a writable
  // snapshot of it, O(1) (snap/repo_swap.cc), when the trees differ in a
  // few hundred paths or more; otherwise as kInPlace.
  kSwapIfUnused,
};

struct RepoStatus {
  std::optional<NodeRecord> head;
  uint64_t nodes = 0;
  std::string backend;  // "reflink" or "copy"
  store::StoreStats store;
  uint64_t meta_bytes = 0;
  uint64_t head_files = 0, head_bytes = 0;  // logical size of HEAD's tree
  bool dirty = false;
  std::optional<store::ObjectId> unfinished_restore;  // a restore to this node did not finish
  std::vector<Change> changes;  // live tree versus HEAD (first 64)
  uint64_t changed = 0;
};

// DVR-style retention: the recent past dense, older past thinned by age
// buckets. Slots are absolute time windows, and the oldest node of a slot
// is the one kept, so thinning is stable as nodes age into coarser buckets.
struct RetentionPolicy {
  uint64_t keep_last = 50;                       // newest nodes, always kept
  std::chrono::seconds keep_within{600};         // younger nodes, always kept
  struct Bucket {
    std::chrono::seconds width;                  // one node per window of this size...
    std::chrono::seconds until;                  // ...for nodes younger than this
  };
  std::vector<Bucket> buckets = {{std::chrono::seconds(60), std::chrono::hours(1)},
                                 {std::chrono::minutes(10), std::chrono::hours(24)},
                                 {std::chrono::hours(1), std::chrono::hours(24 * 7)},
                                 {std::chrono::hours(24), std::chrono::hours(24 * 365 * 100)}};
  // Nodes dropped per metadata transaction (each commit leaves history
  // whole; a smaller one bounds memory tighter and loses less to a kill).
  uint64_t drops_per_commit = 1024;
};

struct RetentionResult {
  uint64_t dropped_nodes = 0;
  // The first kDroppedSample nodes dropped (oldest first): a month of
  // captures thinned is a million records, not a list to hold or print.
  std::vector<NodeRecord> dropped;
  static constexpr size_t kDroppedSample = 1000;
  uint64_t kept = 0;
  uint64_t reparented = 0;  // surviving nodes that got a new parent
  uint64_t operations_dropped = 0;  // operation log rows that named dropped nodes
  // Releasing the dropped nodes' references: objects whose count reached
  // 0 (gc's garbage) and trees/manifests read to release their children.
  uint64_t released = 0, objects_read = 0;
};

struct GcResult {
  uint64_t live_objects = 0;                        // objects with a reference
  uint64_t dropped_objects = 0, dropped_bytes = 0;  // stored bytes of dropped objects
  uint64_t bytes_freed = 0;                         // by pack compaction
  uint32_t packs_rewritten = 0;
  bool counted = false;       // the reference counts were (re)built by this gc
  uint64_t objects_read = 0;  // trees and manifests read (only when counting)
  uint64_t stale_cache_rows = 0;  // stat and entry cache rows of paths gone or changed, dropped
};

// One problem found by Repo::CheckHistory.
struct HistoryFinding {
  // "missing-object", "bad-tree", "bad-node", "dangling-ref"; "known-damaged"
  // for a node fsck --repair already marked (not new corruption).
  std::string kind;
  std::string message;  // names the node, path or ref and the object id
  bool known = false;   // only known damage: not counted as an error
};

// What Repo::RepairHistory changed.
struct HistoryRepair {
  std::vector<NodeRecord> marked;  // newly marked damaged (damage says what is missing)
  std::vector<NodeRecord> healed;  // marks cleared: their objects are all back
  std::vector<std::string> fixed;  // dangling refs and parents dealt with, one line each
  uint64_t stat_cleared = 0;       // stat cache entries forgotten (some named lost content)
  uint64_t counts_fixed = 0;       // reference counts that differed from a recount
};

// "10 minutes ago", "2 h ago", "2026-11-23 14:00[:05]", "2026-11-23",
// "now": nanoseconds since the epoch (dates in local time), as @{<time>}
// refs read them. Errors: kInvalid naming the forms it reads.
Result<int64_t> ParseWhen(const std::string& when, int64_t now_ns);

class Repo {
 public:
  // Creates an empty repository at root (the directory may exist but must
  // not hold a repository). Errors: kExists, kBusy (another init is
  // making it), I/O.
  static Result<std::unique_ptr<Repo>> Create(const std::string& root);
  // Create, but the repository stays *half-made* until FinishInit (init
  // fills it first): a flocked `initializing` marker, written first, makes
  // Open refuse it, and the next Create removes what a killed init left
  // (the marker's lock is free).
  static Result<std::unique_ptr<Repo>> CreateStaged(const std::string& root);
  // Makes a staged repository whole: removes the marker durably. Errors: I/O.
  Result<void> FinishInit();
  // Errors: kNotFound "<root>: not an agentenv repository" (also for a
  // half-made one, with what to run), kBusy (init is still running), I/O.
  static Result<std::unique_ptr<Repo>> Open(const std::string& root);

  const std::string& root() const { return root_; }
  std::string work_dir() const { return layout::Work(root_); }
  store::Store& store() { return *store_; }
  MetaDb& meta() { return *meta_; }
  // Paths the scan skips and restore leaves alone. `literal`: the paths
  // the rules name without wildcards (watch::IgnoreRules::LiteralPaths),
  // the only ignored places a restore by swap carries over. `dir`: the
  // same filter by directory (ScanContext::ignored_dir), for walks.
  void set_ignored(PathFilter f, std::vector<std::string> literal = {}, DirFilter dir = {}) {
    ignored_ = std::move(f);
    ignored_literal_ = std::move(literal);
    ignored_dir_ = std::move(dir);
  }
  // RestoreMode::kSwapIfUnused swaps only when the live tree and the target
  // differ in at least `paths` paths (0: always): a swap costs a fixed few
  // tens of ms (a snapshot, a walk of /proc, the ignored paths carried
  // over, deleting the old tree), rewriting a path in place well under a
  // millisecond. Not thread-safe with a running restore.
  static constexpr uint64_t kSwapFromDefault = 256;
  void set_swap_from(uint64_t paths) { swap_from_ = paths; }
  // Counters that scans, restores and gc advance from now on (null: none).
  // Not owned; must outlive the calls that use it.
  void set_progress(Progress* p) { progress_ = p; }
  // The clock scans and restores take their start from, which the
  // racy-clean rule compares file times with (kRacyWindowNs): the wall
  // clock (NowNs) unless set. A test sets one past the time its files
  // were written by more than the window, so that they count as settled
  // without waiting it out. Not thread-safe: set before use.
  void set_scan_clock(std::function<int64_t()> now) { scan_clock_ = std::move(now); }
  // "btrfs" when the live tree is a btrfs subvolume (Create makes it one
  // on btrfs), "reflink" when files can be cloned from the store into the
  // live tree (probed once), else "copy". AGENTENV_BACKEND=copy|reflink|
  // btrfs overrides. Errors: kUnsupported when the forced backend cannot
  // work here.
  Result<std::string> Backend();
  // The device number the stat and entry caches record for the live tree:
  // on btrfs, where the live tree is a subvolume, the repository root's
  // (each subvolume has its own anonymous st_dev, so a live tree swapped
  // in by a restore would match no row, though a snapshot keeps its files'
  // inode numbers and times); elsewhere 0, the files' own st_dev.
  Result<uint64_t> LiveStatDev();

  // In a repository without history: records the tree at `dir` as the
  // first node and materializes it into the empty live tree; on btrfs the
  // node's subvolume snapshot is made last, once the files written are
  // kRacyWindowNs old (see SnapOptions::filled_ns). Takes the lock.
  // `provenance`: as SnapOptions'. Errors: kExists (history exists), I/O.
  Result<SnapResult> Seed(const std::string& dir, const std::string& message,
                          const std::optional<Provenance>& provenance = std::nullopt);
  // Records the tree at `dir` as a new child of HEAD without touching the
  // live tree or moving HEAD (restore it to use it). Takes the lock.
  Result<SnapResult> Import(const std::string& dir, const std::string& message,
                            const std::optional<Provenance>& provenance = std::nullopt);
  // Records the live tree as a new node (child of HEAD), unless nothing
  // changed. Takes the lock. Errors: kBusy, I/O, kCorrupt.
  Result<SnapResult> Snapshot(const SnapOptions& opt);
  // Saves uncommitted changes as a node, then makes the live tree equal to
  // `ref` and moves HEAD there, leaving the stat cache describing every file
  // it wrote (the next snapshot reads none of them). `dirty`: the paths
  // changed since HEAD was taken, from a change journal (empty: the live
  // tree is known to equal HEAD), so that saving costs O(changes); absent:
  // a full scan finds them. A path missing from `dirty` is neither saved
  // nor restored. `mode`: see RestoreMode (a swap leaves the stat cache
  // naming the old subvolume's device: the next full scan reads files
  // again, the next snapshot only what changed). The saved node's
  // provenance is kSave (restore target: `ref`'s node, op.who); the
  // transaction that moves HEAD also appends the operation log's row
  // (op.kind, default kRestore; from: HEAD before the save; saved). Takes
  // the lock. Errors: kNotFound (ref), kCorrupt (the node is marked
  // damaged; nothing is changed), kBusy, I/O.
  Result<RestoreResult> Restore(const std::string& ref,
                                const std::optional<std::vector<std::string>>& dirty = std::nullopt,
                                RestoreMode mode = RestoreMode::kInPlace, const OpOptions& op = {});
  // Puts back only `paths` (tree-relative) as node `ref` has them (a path
  // it lacks is removed), after saving unsaved changes like Restore; the
  // result becomes a new node, child of HEAD (provenance kPartialRestore:
  // source `ref`'s node, the paths; titled "restored <paths> from
  // <ref>"), and HEAD moves there, with the operation log's row (op.kind,
  // default kPartialRestore) in the same transaction (in its own when
  // nothing changed and HEAD stays). Errors: as Restore; kInvalid (no
  // paths, "..", an ignored path); kUnsupported (a hardlinked path).
  Result<RestoreResult> RestorePaths(const std::string& ref, const std::vector<std::string>& paths,
                                     const std::optional<std::vector<std::string>>& dirty = std::nullopt,
                                     const OpOptions& op = {});
  // Tags: "tag <name>" names a node; Errors: kInvalid name, kNotFound ref.
  Result<store::ObjectId> Tag(const std::string& name, const std::string& ref);
  Result<void> Untag(const std::string& name);
  Result<std::vector<std::pair<std::string, store::ObjectId>>> Tags() const;

  // Resolves HEAD, HEAD~N, <ref>~N, <ref>^, a tag, a full id, a unique id
  // prefix (4+ hex digits), or @{<time>}: the newest node made at or
  // before "10 minutes ago" or "2026-11-23 14:00" (local time). Errors:
  // kNotFound, kInvalid (ambiguous prefix, a time it cannot read).
  Result<store::ObjectId> Resolve(const std::string& ref) const;
  Result<std::optional<store::ObjectId>> Head() const;
  Result<NodeRecord> Record(const store::ObjectId& id) const;
  // The packages node `id` installed, removed or changed versus its current
  // parent: its record's (NodeRecord::packages), else computed from the
  // two trees (a diff, O(changes), reading only package databases;
  // nothing is written). Thread-safe with writers. Errors: kNotFound,
  // missing or corrupt trees.
  Result<PackageDeltas> Packages(const store::ObjectId& id) const;
  // Changes node `id`'s provenance in one metadata transaction: `edit`
  // is handed the record's provenance (an empty one, kind kUnknown, when
  // it has none) and what it leaves is stored, bounded (e.g. marking a
  // tournament candidate the winner: p.tournament->won = true). A title
  // rendered from provenance (kTitleRendered) is rendered again (reading
  // the diff against the parent when the kind's title shows the changes);
  // other titles are kept. Takes the lock, so retention's rewrite of the
  // record cannot interleave. Returns the record as stored. Errors:
  // kNotFound, kCorrupt, kBusy, I/O.
  Result<NodeRecord> EditProvenance(const store::ObjectId& id, const std::function<void(Provenance&)>& edit);
  // EditProvenance replacing it all (thinned included) by `p`.
  Result<NodeRecord> SetProvenance(const store::ObjectId& id, const Provenance& p);
  // Newest first.
  Result<std::vector<NodeRecord>> Log(size_t limit) const;
  // Nodes without children (tips of history), newest first.
  Result<std::vector<NodeRecord>> Branches() const;
  // Drops nodes the policy does not keep. Never drops HEAD, roots, tagged,
  // pinned or leased nodes, branch points or tips. Children of dropped nodes are
  // reparented to their nearest kept ancestor, with their change count and
  // package deltas recomputed against it; each keeps its provenance and
  // gains the summary of the span dropped below it (Provenance::thinned;
  // a record without provenance gets one of kind kUnknown holding only
  // that); a title rendered from provenance is rendered again, other
  // titles keep their words (their package lead follows the new deltas).
  // Operation log rows naming a dropped node and older than
  // now - keep_within go in the same transaction. dry_run: plan only.
  // Takes the lock.
  // Node leases keep them too (below).
  // One pass over the seq table, oldest first, with bounded state (the
  // slots taken, the spans being dropped); nodes are dropped in
  // transactions of policy.drops_per_commit nodes. Each leaves history whole:
  // the next node of a span still being dropped is reparented to the span's
  // kept ancestor, carrying the span's summary so far, which it passes on
  // when it is dropped itself. So a killed retain loses nothing, and the
  // next one makes the same decisions and goes on. Cost: the nodes read
  // (records only) plus what is dropped (their references released).
  Result<RetentionResult> Retain(const RetentionPolicy& policy, bool dry_run, int64_t now_ns);

  // Node leases: `holder` (e.g. "ws/<workspace>-<suffix>") uses node `id`
  // (a workspace's base), which Retain must not drop while the lease
  // exists. A lease is a row of the metadata (a ref "lease/<holder>"),
  // written in one transaction that first finds the node in history;
  // each transaction of Retain that drops nodes reads the leases first, and
  // keeps a node one names. So either the lease commits first and the node
  // is kept, or the node is gone first and LeaseNode fails with kNotFound.
  // Errors: kNotFound, I/O. Thread-safe.
  Result<void> LeaseNode(const std::string& holder, const store::ObjectId& id);
  // Ends a lease; none is no error. Errors: I/O.
  Result<void> ReleaseNode(const std::string& holder);
  // Every lease: holder -> node. Errors: I/O.
  Result<std::vector<std::pair<std::string, store::ObjectId>>> NodeLeases() const;
  // Removes the stored objects whose reference count reached 0 (the
  // garbage table, fed by Retain and by stat cache changes; see
  // snap/refcount.h), then compacts packs so the disk space is returned
  // (packs at least `compact.min_dead_fraction` dead are rewritten). Cost:
  // the ids dropped, not the live history. The first gc of a repository
  // without counts builds them once. `full`: recounts every reference from
  // scratch and drops every object nothing references (objects of
  // snapshots killed before their node was committed, counts left too
  // high). Holds the lock while dropping, so no snapshot deduplicates
  // against a dropped id; compaction runs after. Errors: I/O, kCorrupt.
  Result<GcResult> Gc(const store::CompactOptions& compact = {}, bool full = false);
  // Counts now the references snapshots deferred (snap/refcount.h; gc,
  // retain and fsck do it themselves first), building the counts if the
  // repository has none. Takes the lock. Errors: I/O, kCorrupt, kBusy.
  Result<void> CountDeferred();
  // Checks that every node, the trees it reaches, their file contents
  // (and manifests' chunks) exist and decode, and that refs and parents
  // name nodes in history. One finding per affected node, naming the first
  // problem; each unique tree is read once. Then recounts every reference
  // (in a transaction that is aborted) and reports each object whose
  // stored count differs ("refcount"). Nodes marked damaged are
  // reported as known (HistoryFinding::known) and not counted. Errors: I/O
  // only. Returns the number of findings that are not known damage.
  Result<uint64_t> CheckHistory(const std::function<void(const HistoryFinding&)>& finding);
  // After the store lost objects (fsck repair): marks every node that
  // reaches a missing or undecodable object as damaged, saying what is
  // missing, and clears the mark of nodes that are whole again; a parent
  // not in history is cut (the node becomes a root); refs naming no node
  // are removed (HEAD moves to the newest node); the stat cache is
  // forgotten if it names lost content; the reference counts are rebuilt.
  // Never deletes a node. Afterwards CheckHistory finds only known damage.
  // Takes the lock. Errors: I/O, kBusy.
  Result<HistoryRepair> RepairHistory();
  // Scans the live tree (storing new content, making no node).
  // Takes the repository lock until this object is destroyed, for a
  // daemon that serves every writer itself: this object's writers then
  // serialize among its threads, other processes' writers wait and get
  // kBusy. Waits like a writer for one that is running. Errors: kBusy
  // (another process kept the lock), I/O. Thread-safe.
  Result<void> HoldLock();

  // A lease on node's tree as a read-only directory, lowers/<tree id>
  // (snap/lowers.h: lifecycle and leases): the lower layer of every
  // workspace forked from a node with that tree. Reused while it exists and
  // carries its completion mark; otherwise built under a scratch name,
  // synced, marked and renamed into place (a crash leaves scratch, never a
  // partial lower under a ready name). Building: btrfs, an O(1) snapshot of
  // the node's subvolume snapshot ("snapshot"); else files that another
  // lower has with the same content and metadata are hardlinked to it
  // (lowers are never written) and the rest cloned (reflink backends: from
  // another lower, the live tree or the store's packs) or copied. The
  // lease is held until the object dies. Thread-safe; no repository lock.
  // Errors: kNotFound, kCorrupt (a damaged node), kBusy (an unmarked
  // lower another process uses), I/O.
  Result<LowerLease> LeaseLower(const store::ObjectId& node);
  // gc's part of the lifecycle: removes (renames away, then deletes) every
  // ready lower that no process leases and whose name `persistent` does
  // not return (the tree ids workspaces' states and mounted views' records
  // name; called once, after
  // every unleased lower is locked, so a fork cannot slip in between), and
  // every leftover of a killed build or removal. No repository lock.
  // Errors: I/O from `persistent` (nothing removed then).
  struct LowerSweep {
    uint64_t removed = 0;  // ready lowers removed
    Leftovers leftovers;   // scratch of killed builds and removals, removed
  };
  Result<LowerSweep> SweepLowers(const std::function<Result<std::set<std::string>>()>& persistent);
  // fsck --lowers: each ready lower checked against its tree (scanned
  // read-only: nothing stored, no lock). Errors: I/O listing lowers/.
  struct LowerCheck {
    std::string dir;
    bool ok = false;
    std::string problem;  // what differs: the mark, or the first paths
  };
  Result<std::vector<LowerCheck>> CheckLowers();
  // Records an overlay workspace as a new node without moving HEAD: the
  // tree of (lower = `base`'s tree, upper directory `upper`), read from the
  // upper alone (ScanUpper), as a child of `parent` (the workspace's last
  // node, or `base`). No node when the tree equals `parent`'s. Takes the
  // lock. Errors: kNotFound, I/O.
  Result<SnapResult> SnapshotUpper(const std::string& upper, const store::ObjectId& base,
                                   const store::ObjectId& parent, const SnapOptions& opt);
  // The tree of that overlay, content stored, no node made. Takes the lock.
  Result<store::ObjectId> UpperTree(const std::string& upper, const store::ObjectId& base);

  // The live tree against HEAD. Takes the lock; stores the content it
  // read and updates the stat cache, so the next snapshot reads nothing
  // again. Errors: kBusy, I/O.
  Result<RepoStatus> Status();
  // The same answer read-only: no lock, nothing stored, the stat cache
  // only read (fsck, beside a running daemon). Thread-safe with writers.
  Result<RepoStatus> PeekStatus();
  // The tree id of the live tree as it is now (content is stored, no node
  // is made). Takes the lock.
  Result<store::ObjectId> LiveTree();

 private:
  // Retention: gives node r the parent np (its nearest kept ancestor) and
  // the summary of the span dropped in between (before any span it held
  // already), with its change count, package deltas and a rendered title
  // against np. Writes the record and np's child row in txn.
  Result<void> Reparent(MetaDb::Txn& txn, NodeRecord r, const store::ObjectId& np, Thinned thinned);
  Repo() = default;
  struct Scanned {
    ScanOutput out;
    std::optional<Node> head_node;
    std::optional<store::ObjectId> head;
    std::unique_ptr<store::Batch> batch;  // the scan's content, not yet committed
  };
  // Reads HEAD and, unless it is marked damaged, its node object.
  Result<void> LoadHead(Scanned& sc);
  // With the lock held: scans the live tree, through a subvolume snapshot
  // on btrfs when no paths are given (ScanSubvol; *fresh names it, to be
  // passed to KeepSubvol after Commit), else as ScanLive.
  Result<Scanned> ScanCurrent(const std::optional<std::vector<std::string>>& paths,
                              const std::vector<std::string>& entries, std::string* fresh);
  // btrfs (snap/repo_btrfs.cc). Whether nodes keep subvolume snapshots:
  // the btrfs backend and the privilege to search and delete them.
  Result<bool> UseSubvols();
  // With the lock held: a read-only snapshot of the live tree at
  // subvols/.new-<pid> (replacing one a crash left there); returns its path.
  Result<std::string> SnapshotLive();
  // With the lock held: takes a read-only snapshot of the live tree
  // (subvols/.new-<pid>, named in *fresh) and scans it: along the changes
  // since HEAD's snapshot when HEAD has one (btrfs::ChangedPaths), else
  // fully. The stat cache is used as for the live tree.
  Result<Scanned> ScanSubvol(std::string* fresh);
  // After Commit: keeps snapshot `fresh` as subvols/<id> (the node made,
  // or HEAD when nothing changed, whose tree it equals), then drops
  // snapshots beyond the newest kept ones. Failures only warn: the
  // snapshots are an accelerator.
  void KeepSubvol(const std::string& fresh, const std::optional<store::ObjectId>& id,
                  std::vector<std::string>* warnings);
  // With the lock held, after the save: replaces the live tree by a
  // writable snapshot of `target`'s subvolume snapshot and moves HEAD
  // there (snap/repo_swap.cc). false (with *why) when it cannot: nothing
  // was changed, restore in place.
  // `op`: the operation log's row, written with HEAD (its time set then).
  Result<bool> SwapLive(const store::ObjectId& target, RestoreResult* res, std::string* why, Operation op);
  // Called with the write lock: removes work/.swap-* subvolumes a swap
  // left (killed, or the old tree could not be deleted).
  void SweepSwapLeftovers();
  // Whether trees a and b differ in at least swap_from_ paths.
  Result<bool> DiffersInMany(const store::ObjectId& a, const store::ObjectId& b);
  // Builds node's tree at `dir` (which must not exist) as a writable
  // snapshot of node's subvolume snapshot, if it has one: false if not.
  Result<bool> MaterializeSubvol(const store::ObjectId& node, const std::string& dir);
  // Builds node's tree into the empty directory `fd` (lower `dir`) from the
  // store; returns the method (LowerLease::method).
  Result<std::string> MaterializeStore(const store::ObjectId& node, int fd, const std::string& dir);
  // With the lock held: scans (fully or along paths); content stays in
  // sc.batch until Commit or CommitContent.
  Result<Scanned> ScanLive(const std::optional<std::vector<std::string>>& paths,
                           const std::vector<std::string>& entries = {});
  // Scans directory `fd` (fully, or along paths from `base`) into a new
  // batch, left open in *batch. `live`, `on_dir`: as in ScanContext.
  Result<ScanOutput> ScanFd(int fd, const std::optional<Node>& base,
                            const std::optional<std::vector<std::string>>& paths,
                            const std::vector<std::string>& entries, std::unique_ptr<store::Batch>* batch,
                            uint64_t stat_dev = 0, bool live = true,
                            const decltype(ScanContext::on_dir)& on_dir = {});
  // Commits the scan's batch, if still open.
  Result<void> CommitContent(Scanned& sc);
  // With the lock held: makes a node from a scan unless nothing changed.
  // `op`: an operation log row to write in the node's transaction, `to`
  // set to the node (its time set then); not written when no node is made.
  Result<SnapResult> Commit(Scanned& sc, const SnapOptions& opt, bool move_head = true,
                            std::optional<Operation> op = std::nullopt);
  // With the lock held: scans a directory other than the live tree
  // (`early`: handed each directory as ScanContext::on_dir).
  Result<Scanned> ScanForeign(const std::string& dir, EarlyWriter* early = nullptr);
  // With the lock held: scans an overlay's upper directory over `base`.
  Result<Scanned> ScanOverlay(const std::string& upper, const store::ObjectId& base);
  // Held while a writer runs: the in-process mutex, plus the file lock
  // unless HoldLock() holds it for the object's lifetime.
  struct WriteLock {
    std::unique_lock<std::mutex> in_process;
    UniqueFd file;
  };
  Result<WriteLock> Lock();
  // How this repository writes trees: reflink when the backend clones,
  // privileged as root, ignored paths kept.
  Result<RestoreOptions> RestoreOpts();
  // When a scan or restore starts, by scan_clock_.
  int64_t ScanStart() const;
  Result<UniqueFd> LockFile();
  Result<RepoStatus> StatusOf(const Scanned& sc);
  // The `restoring` marker (snap/restore_marker.cc): Begin writes it,
  // flocked, before a restore touches the live tree; End removes it once
  // the tree is whole again (a restore or a snapshot finished).
  // `swap`: the restore replaces the subvolume (the sweep then drops
  // HEAD's snapshot, which may not be an ancestor of the live tree).
  Result<UniqueFd> BeginLiveRestore(const store::ObjectId& target, bool swap = false);
  void EndLiveRestore();
  // The node of a restore that did not finish (its marker is not held).
  std::optional<store::ObjectId> UnfinishedRestore() const;
  // Called with the write lock: removes the temp files an unfinished
  // restore left in the live tree, once (one walk).
  void SweepUnfinishedRestore();
  Result<UniqueFd> OpenWork() const;
  // Writes stat cache entries, moving their content references; with
  // `scanned`, also heals what that scan stored (HealStored).
  Result<void> PutStats(MetaDb::Txn& txn, const std::vector<std::pair<std::string, StatEntry>>& entries,
                        const ScanOutput* scanned = nullptr);
  // A scan may store again a tree or manifest that was lost and is counted
  // as pending: count its children now (RefCounter::Heal).
  Result<void> HealStored(RefCounter& refs, const ScanOutput& scanned);
  // Before a restore from tree `from` to `to` in place: drops the stat and
  // entry cache rows of the paths it removes (a row left behind would keep
  // its content referenced, and stored, for ever). A file that stays a
  // file keeps its row: the restore rewrites it if it changes.
  Result<void> ForgetRemoved(const store::ObjectId& from, const store::ObjectId& to);
  // With the lock held (gc): drops the stat and entry cache rows whose path
  // in the live tree is gone or no longer has the stat they recorded (such
  // a row can never match again; ones a restore by swap left behind would
  // keep their content stored for ever). At most kStaleRowsMax rows a
  // call; returns how many went.
  Result<uint64_t> DropStaleCacheRows();
  static constexpr size_t kStaleRowsMax = 65536;
  // With the lock held: builds the reference counts if this repository has
  // none yet (made before they existed). Returns whether it built them.
  Result<bool> EnsureCounted(RefStats* stats);

  std::string root_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<MetaDb> meta_;
  PathFilter ignored_;
  DirFilter ignored_dir_;
  std::vector<std::string> ignored_literal_;
  Progress* progress_ = nullptr;
  std::function<int64_t()> scan_clock_;  // empty: NowNs
  std::optional<std::string> backend_;
  std::optional<bool> subvols_;  // UseSubvols, probed once
  std::optional<uint64_t> live_stat_dev_;  // LiveStatDev, probed once
  uint64_t swap_from_ = kSwapFromDefault;
  std::mutex write_mu_;
  UniqueFd held_lock_;  // set by HoldLock
  UniqueFd init_marker_;  // Create: flocked `initializing` until FinishInit
};

}  // namespace agentenv::snap

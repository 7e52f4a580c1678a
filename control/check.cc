#include "control/check.h"

#include <optional>

#include "common/mutex.h"
#include "history/node_view.h"
#include "fsck/fsck.h"
#include "snap/scratch.h"
#include "store/worker_pool.h"

namespace agentenv::control {

Result<FsckReply> Fsck(Client& client, const FsckRequest& r, const FsckCallbacks& cb) {
  AE_ASSIGN(Server* server, client.Local());
  snap::Repo& repo = server->repo();
  FsckReply rep;
  Mutex mu;  // rep.findings and the callbacks: the store and history checks run side by side
  auto report = [&](FsckFinding f) {
    MutexLock lock(mu);
    if (cb.finding) cb.finding(f);
    rep.findings.push_back(std::move(f));
  };
  fsck::FsckCallbacks store_cb;
  store_cb.finding = [&](const fsck::FsckFinding& f) {
    FsckFinding x{f.kind, f.severity == fsck::Severity::kError ? "error" : "warning", f.message};
    if (f.id) x.id = f.id->Hex();
    if (f.pack) x.pack = *f.pack;
    x.offset = f.offset;
    report(std::move(x));
  };
  if (cb.progress) {
    store_cb.progress = [&](const fsck::FsckProgress& p) {
      MutexLock lock(mu);
      cb.progress({p.bytes_done, p.bytes_total, p.records});
    };
  }
  // Above the store: every node's trees and contents exist, refs resolve.
  // Nodes already marked damaged are known, not new corruption: warnings.
  // Then the live tree against HEAD: information, never an error, read
  // without the writer lock (a daemon may hold it) and storing nothing.
  auto check_above = [&]() -> Result<uint64_t> {
    auto history = repo.CheckHistory([&](const snap::HistoryFinding& f) {
      if (f.known) ++rep.damaged;
      report({f.kind, f.known ? "warning" : "error", f.message});
    });
    if (auto st = repo.PeekStatus()) {  // read-only: fsck changes nothing
      rep.live = {{"dirty", st->dirty}, {"changed", st->changed}};
      rep.live_text = st->dirty ? "live tree dirty (" + std::to_string(st->changed) + " changed paths since HEAD)"
                                : "live tree clean";
    } else {
      rep.live = {{"dirty", nullptr}, {"error", st.error().message}};
      rep.live_text = "live tree not compared: " + st.error().message;
    }
    if (!r.lowers || !history) return history;
    // Lowers are a cache a workspace trusts: one that differs from its
    // tree is an error until removed (built again on next use).
    AE_ASSIGN(auto lowers, repo.CheckLowers());
    uint64_t bad = 0;
    for (const auto& l : lowers) {
      ++rep.lowers_checked;
      if (l.ok) continue;
      if (r.repair) {
        auto lock = snap::DirLock::TryExclusive(l.dir);
        if (lock && snap::Retire(std::move(*lock))) {
          ++rep.lowers_removed;
          if (cb.repaired) cb.repaired("removed lower " + l.dir + " (" + l.problem + "); built again on next use");
          continue;
        }
      }
      ++bad;
      report({"lower", "error", l.dir + ": " + l.problem + (r.repair ? " (in use: run again when no command uses it)" : " (fsck --lowers --repair removes it; it is built again on next use)")});
    }
    return *history + bad;
  };
  fsck::FsckReport store;
  Result<uint64_t> history = 0;
  if (r.repair) {
    rep.repaired = true;
    AE_ASSIGN(fsck::RepairReport fixed, fsck::RepairStore(repo.store(), store_cb));
    for (const auto& l : fixed.lost) rep.lost.push_back(l.id.Hex());
    // Nodes that reached a lost object are marked damaged, never deleted.
    AE_ASSIGN(snap::HistoryRepair h, repo.RepairHistory());
    auto say = [&](const std::string& line) {
      if (cb.repaired) cb.repaired(line);
    };
    for (const auto& n : h.marked) {
      rep.marked.push_back(MakeNodeInfo(n));
      say("marked damaged: " + Short(n.id) + ": " + n.damage);
    }
    for (const auto& n : h.healed) {
      rep.healed.push_back(MakeNodeInfo(n));
      say("whole again: " + Short(n.id));
    }
    for (const auto& f : h.fixed) {
      rep.fixed.push_back(f);
      say("fixed: " + f);
    }
    if (h.counts_fixed) say("fixed: " + std::to_string(h.counts_fixed) + " wrong reference counts (recounted)");
    rep.stat_cleared = h.stat_cleared;
    rep.counts_fixed = h.counts_fixed;
    AE_ASSIGN(store, fsck::CheckStore(repo.store(), {}, {}));
    history = check_above();
  } else {
    // History and the live tree only read what the store check reads too:
    // check them meanwhile (the store check is the long part).
    fsck::FsckOptions opt;
    opt.verify_content = !r.structure_only;
    opt.subset_percent = r.subset;
    std::optional<Result<fsck::FsckReport>> checked;
    {
      store::WorkerPool above(1);  // joined at the end of this scope
      above.Submit([&] { history = check_above(); });
      checked = fsck::CheckStore(repo.store(), opt, store_cb);
    }
    if (!*checked) return Unexpected<Error>(checked->error());
    store = **checked;
  }
  if (!history) return Unexpected<Error>(history.error());
  rep.objects = store.objects;
  rep.verified = store.objects_verified;
  rep.bytes_verified = store.bytes_verified;
  rep.packs = store.packs;
  rep.errors = store.errors + *history;
  rep.warnings = store.warnings + rep.damaged;
  return rep;
}

}  // namespace agentenv::control

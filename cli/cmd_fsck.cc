#include <unistd.h>

#include <cstdio>
#include <future>
#include <mutex>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/ignore.h"
#include "fsck/fsck.h"

namespace agentenv::cli {

int CmdFsck(int argc, char** argv) {
  Globals g;
  bool structure = false, repair = false;
  double subset = 100;
  CLI::App app{"Verify every stored object (re-hash), the index against the packs, and every node's trees and "
               "contents; exit 4 on damage not yet repaired. Also says whether the live tree differs from HEAD", "fsck"};
  AddGlobals(app, g);
  app.add_flag("--structure-only", structure, "Check index and record headers only (fast, no re-hash)");
  app.add_option("--subset", subset, "Re-hash only this percentage of chunks (0-100)")->check(CLI::Range(0.0, 100.0));
  app.add_flag("--repair", repair, "Rewrite damaged packs, dropping (and listing) unreadable objects; mark the nodes "
               "that reached them as damaged (kept in history, not restorable); remove refs naming no node; "
               "rebuild the reference counts");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = control::OpenRepo(g.root);
  if (!repo) return ReportError(g, repo.error());
  bool tty = !g.json && ::isatty(STDERR_FILENO);
  nlohmann::json findings = nlohmann::json::array();
  std::mutex mu;  // findings and stderr: the store and history checks run side by side
  fsck::FsckCallbacks cb;
  cb.finding = [&](const fsck::FsckFinding& f) {
    std::lock_guard lock(mu);
    nlohmann::json j = {{"kind", f.kind}, {"severity", f.severity == fsck::Severity::kError ? "error" : "warning"},
                        {"message", f.message}};
    if (f.id) j["id"] = f.id->Hex();
    if (f.pack) j["pack"] = *f.pack;
    if (f.offset) j["offset"] = *f.offset;
    findings.push_back(j);
    if (!g.json) std::fprintf(stderr, "%s%s: %s\n", tty ? "\r\033[K" : "",
                              f.severity == fsck::Severity::kError ? "error" : "warning", f.message.c_str());
  };
  if (tty) {
    cb.progress = [&mu](const fsck::FsckProgress& p) {
      std::lock_guard lock(mu);
      std::fprintf(stderr, "\rchecking: %s of %s, %llu records", HumanBytes(p.bytes_done).c_str(),
                   HumanBytes(p.bytes_total).c_str(), (unsigned long long)p.records);
    };
  }
  // Above the store: every node's trees and contents exist, refs resolve.
  // Nodes already marked damaged are known, not new corruption: warnings.
  // Then the live tree against HEAD: information, never an error.
  uint64_t known = 0;
  nlohmann::json live;
  std::string live_text;
  auto check_above = [&]() -> Result<uint64_t> {
    auto history = (*repo)->CheckHistory([&](const snap::HistoryFinding& f) {
      std::lock_guard lock(mu);
      const char* severity = f.known ? "warning" : "error";
      findings.push_back({{"kind", f.kind}, {"severity", severity}, {"message", f.message}});
      if (f.known) ++known;
      if (!g.json) std::fprintf(stderr, "%s%s: %s\n", tty ? "\r\033[K" : "", severity, f.message.c_str());
    });
    if (auto st = (*repo)->Status()) {
      live = {{"dirty", st->dirty}, {"changed", st->changed}};
      live_text = st->dirty ? "live tree dirty (" + std::to_string(st->changed) + " changed paths since HEAD)"
                            : "live tree clean";
    } else {
      live = {{"dirty", nullptr}, {"error", st.error().message}};
      live_text = "live tree not compared: " + st.error().message;
    }
    return history;
  };
  fsck::FsckReport rep;
  Result<uint64_t> history = 0;
  nlohmann::json lost = nlohmann::json::array(), marked = nlohmann::json::array(),
                 healed = nlohmann::json::array(), fixed = nlohmann::json::array();
  uint64_t stat_cleared = 0, counts_fixed = 0;
  if (repair) {
    auto r = fsck::RepairStore((*repo)->store(), cb);
    if (!r) return ReportError(g, r.error());
    for (const auto& l : r->lost) lost.push_back(l.id.Hex());
    // Nodes that reached a lost object are marked damaged, never deleted.
    auto h = (*repo)->RepairHistory();
    if (!h) return ReportError(g, h.error());
    for (const auto& n : h->marked) marked.push_back(control::ToJson(control::MakeNodeInfo(n)));
    for (const auto& n : h->healed) healed.push_back(control::ToJson(control::MakeNodeInfo(n)));
    for (const auto& f : h->fixed) fixed.push_back(f);
    stat_cleared = h->stat_cleared;
    counts_fixed = h->counts_fixed;
    if (!g.json) {
      for (const auto& n : h->marked) std::fprintf(stderr, "marked damaged: %s: %s\n", Short(n.id).c_str(), n.damage.c_str());
      for (const auto& n : h->healed) std::fprintf(stderr, "whole again: %s\n", Short(n.id).c_str());
      for (const auto& f : h->fixed) std::fprintf(stderr, "fixed: %s\n", f.c_str());
      if (h->counts_fixed)
        std::fprintf(stderr, "fixed: %llu wrong reference counts (recounted)\n", (unsigned long long)h->counts_fixed);
    }
    auto again = fsck::CheckStore((*repo)->store(), {}, {});
    if (!again) return ReportError(g, again.error());
    rep = *again;
    history = check_above();
  } else {
    // History and the live tree only read what the store check reads too:
    // check them meanwhile (the store check is the long part).
    auto above = std::async(std::launch::async, check_above);
    fsck::FsckOptions opt;
    opt.verify_content = !structure;
    opt.subset_percent = subset;
    auto r = fsck::CheckStore((*repo)->store(), opt, cb);
    history = above.get();
    if (!r) return ReportError(g, r.error());
    rep = *r;
  }
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!history) return ReportError(g, history.error());
  rep.errors += *history;
  rep.warnings += known;
  nlohmann::json j = {{"objects", rep.objects}, {"verified", rep.objects_verified},
                      {"bytes_verified", rep.bytes_verified}, {"packs", rep.packs},
                      {"errors", rep.errors}, {"warnings", rep.warnings}, {"damaged", known},
                      {"findings", findings}, {"live", live}};
  if (repair) {
    j["lost"] = lost;
    j["marked"] = marked;
    j["healed"] = healed;
    j["fixed"] = fixed;
    j["stat_cleared"] = stat_cleared;
    j["counts_fixed"] = counts_fixed;
  }
  std::string text = std::to_string(rep.objects) + " objects in " + std::to_string(rep.packs) + " packs; " +
                     std::to_string(rep.objects_verified) + " re-hashed (" + HumanBytes(rep.bytes_verified) + "); " +
                     std::to_string(rep.errors) + " errors, " + std::to_string(rep.warnings) + " warnings";
  if (known) text += "; " + std::to_string(known) + " nodes known damaged";
  if (repair)
    text += "; repaired: " + std::to_string(lost.size()) + " objects lost, " + std::to_string(marked.size()) +
            " nodes marked damaged";
  text += "; " + live_text;
  if (!rep.ok()) {
    j["ok"] = false;
    if (g.json) std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    else std::fprintf(stderr, "agentenv: fsck: %s\n", text.c_str());
    return kExitCorrupt;
  }
  return ReportOk(g, j, text);
}

}  // namespace agentenv::cli

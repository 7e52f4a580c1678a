#include <unistd.h>

#include <cstdio>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/check.h"

namespace agentenv::cli {

int CmdFsck(int argc, char** argv) {
  Globals g;
  control::FsckRequest req;
  CLI::App app{"Verify every stored object (re-hash), the index against the packs, and every node's trees and "
               "contents; exit 4 on damage not yet repaired. Also says whether the live tree differs from HEAD", "fsck"};
  AddGlobals(app, g);
  app.add_flag("--structure-only", req.structure_only, "Check index and record headers only (fast, no re-hash)");
  app.add_option("--subset", req.subset, "Re-hash only this percentage of chunks (0-100)")->check(CLI::Range(0.0, 100.0));
  app.add_flag("--repair", req.repair, "Rewrite damaged packs, dropping (and listing) unreadable objects; mark the nodes "
               "that reached them as damaged (kept in history, not restorable); remove refs naming no node; "
               "rebuild the reference counts");
  app.add_flag("--lowers", req.lowers, "Also check each materialized node (lowers/, the read-only layer of "
               "workspaces) against its tree; with --repair, remove one that differs (built again on next use)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  const bool tty = !g.json && !g.quiet && ::isatty(STDERR_FILENO);
  const char* clear = tty ? "\r\033[K" : "";
  control::FsckCallbacks cb;
  if (!g.json) {
    cb.finding = [clear](const control::FsckFinding& f) {
      std::fprintf(stderr, "%s%s: %s\n", clear, f.severity.c_str(), f.message.c_str());
    };
    cb.repaired = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  }
  if (tty) {
    cb.progress = [](const control::FsckProgress& p) {
      std::fprintf(stderr, "\rchecking: %s of %s, %llu records", HumanBytes(p.bytes_done).c_str(),
                   HumanBytes(p.bytes_total).c_str(), (unsigned long long)p.records);
    };
  }
  control::Client client(g.root);
  auto r = control::Fsck(client, req, cb);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!r) return ReportError(g, r.error());
  std::string text = std::to_string(r->objects) + " objects in " + std::to_string(r->packs) + " packs; " +
                     std::to_string(r->verified) + " re-hashed (" + HumanBytes(r->bytes_verified) + "); " +
                     std::to_string(r->errors) + " errors, " + std::to_string(r->warnings) + " warnings";
  if (r->damaged) text += "; " + std::to_string(r->damaged) + " nodes known damaged";
  if (req.lowers) text += "; " + std::to_string(r->lowers_checked) + " lowers checked";
  if (r->repaired)
    text += "; repaired: " + std::to_string(r->lost.size()) + " objects lost, " + std::to_string(r->marked.size()) +
            " nodes marked damaged";
  text += "; " + r->live_text;
  if (r->ok()) return ReportOk(g, control::ToJson(*r), text);
  json j = control::ToJson(*r);
  j["ok"] = false;
  if (g.json) std::printf("%s\n", j.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  else std::fprintf(stderr, "agentenv: fsck: %s\n", text.c_str());
  return kExitCorrupt;
}

}  // namespace agentenv::cli

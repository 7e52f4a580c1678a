#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"
#include "snap/layout.h"

namespace agentenv::cli {

int CmdStatus(int argc, char** argv) {
  Globals g;
  g.data = true;  // -q keeps what it prints: the data asked for
  CLI::App app{"Show backend, HEAD, node count, disk use, stored vs logical bytes, and uncommitted changes", "status"};
  AddGlobals(app, g);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  auto r = client.Call(control::StatusRequest{});
  if (r) {
    // The root as the caller named it (a daemon may have been given another
    // spelling of the same directory).
    r->root = g.root;
    r->work = snap::layout::Work(g.root);
  }
  return Print(g, r, [](const control::StatusReply& st) {
    std::string text = "repository " + st.root + "  (backend: " + st.backend + ")\n";
    text += "HEAD       " + (st.head ? NodeLine(*st.head) : std::string("none")) + "\n";
    text += "nodes      " + std::to_string(st.nodes) + "\n";
    if (st.workspaces || st.lowers)
      text += "workspaces " + std::to_string(st.workspaces) + " (" + std::to_string(st.lowers) +
              " materialized nodes: files another one has alike are hardlinked, others " +
              (st.backend == "copy" ? "copied" : "reflinked") + ")\n";
    text += "live tree  " + std::to_string(st.head_files) + " files, " + HumanBytes(st.head_bytes) + " at HEAD\n";
    text += "store      " + HumanBytes(st.stored_bytes) + " stored for " + HumanBytes(st.logical_bytes) +
            " of unique content; " + HumanBytes(st.disk_bytes) + " on disk\n";
    if (st.capture == "failing")
      text += "capture    FAILING since " + FormatTime(st.capture_failing_since_ns) + ": " + st.capture_error +
              " (retried " + std::to_string(st.capture_retries) + " times; changes since then are in no node yet)\n";
    if (!st.reclaimable.empty()) {
      text += "leftovers  " + std::to_string(st.reclaimable.size()) + " directories of killed commands, " +
              HumanBytes(st.reclaimable_bytes) + " (agentenv gc removes them):\n";
      for (const auto& l : st.reclaimable) text += "  " + l.path + " (" + HumanBytes(l.bytes) + ")\n";
    }
    if (!st.unfinished_restore.empty()) {
      std::string n = st.unfinished_restore.substr(0, 12);
      text += "unfinished: a restore to " + n + " did not finish; the live tree is part old, part " + n +
              " (agentenv restore " + n + " to finish it, or agentenv snap to keep it as it is)\n";
    }
    if (!st.dirty) return text + "clean: the live tree equals HEAD";
    text += "dirty: " + std::to_string(st.changed) + " changed paths since HEAD (agentenv snap to keep them)\n";
    for (const auto& c : st.changes) text += "  " + ChangeLine(c) + "\n";
    if (st.changed > st.changes.size()) text += "  ... " + std::to_string(st.changed - st.changes.size()) + " more\n";
    return text;
  });
}

}  // namespace agentenv::cli

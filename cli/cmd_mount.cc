// agentenv mount: show a node as a read-only directory, without FUSE: its materialized tree
// bind-mounted read-only (or, with -- CMD, in a mount namespace of its own for one command).
#include <algorithm>
#include <cstring>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"
#include "mounts/views.h"

namespace agentenv::cli {

int CmdMount(int argc, char** argv) {
  Globals g;
  control::MountRequest req;
  req.ref.clear();
  // Everything after "--" is the command: split here, so that CLI11 does
  // not take its first word for DIR.
  std::vector<std::string> command;
  int flags_end = argc;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) {
      flags_end = i;
      command.assign(argv + i + 1, argv + argc);
      break;
    }
  CLI::App app{"Show a node as a read-only directory, without FUSE: its materialized tree (shared with "
               "workspaces) bind-mounted read-only. `mount REF DIR` mounts it until `umount DIR` (needs root); "
               "`mount REF [DIR] -- CMD...` runs CMD with the view at DIR (default: a new directory, "
               "$AGENTENV_VIEW) in a mount namespace of its own, rootless, nothing left mounted when CMD ends. "
               "Without arguments: list the mounted views", "mount"};
  AddGlobals(app, g);
  app.add_option("ref", req.ref, "Node to show (default HEAD with -- CMD)");
  app.add_option("dir", req.dir, "Existing directory to mount the view at");
  if (int rc = Parse(app, flags_end, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  if (flags_end != argc) {
    if (command.empty()) return ReportError(g, Fail(ErrorCode::kInvalid, "mount: no command after --").error());
    auto local = client.Local();
    if (!local) return ReportError(g, local.error());
    control::Server& s = **local;
    auto node = s.repo().Resolve(req.ref.empty() ? "HEAD" : req.ref);
    if (!node) return ReportError(g, node.error());
    auto ran = mounts::RunInView(s.repo(), *node, req.dir, command);
    if (!ran) return ReportError(g, ran.error());
    return ran->signal ? 128 + ran->signal : ran->exit_code;
  }
  if (req.ref.empty()) {
    g.data = true;  // a listing: -q keeps it
    return Print(g, client.Call(control::MountsRequest{}), [](const control::MountsReply& r) {
      std::string text;
      for (const auto& m : r.mounts) text += MountLine(m) + "\n";
      return text.empty() ? std::string("no mounted views (agentenv mount REF DIR makes one)") : text;
    });
  }
  if (req.dir.empty())
    return ReportError(g, Fail(ErrorCode::kInvalid, "mount: give a directory: agentenv mount REF DIR, or "
                                                     "agentenv mount REF -- CMD to run a command with the view").error());
  return Print(g, client.Call(req), [](const control::MountReply& r) {
    return "mounted " + r.mount.node.substr(0, 12) + " read-only at " + r.mount.dir + " (agentenv umount " +
           r.mount.dir + " removes it)";
  });
}

}  // namespace agentenv::cli

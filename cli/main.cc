// agentenv: the command table and dispatch. Each command lives in
// cmd_<verb>.cc and is listed here once.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string_view>
#include <vector>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/ops.h"

namespace agentenv::cli {
namespace {

constexpr Command kCommands[] = {
    {"init", "Create a repository from a directory or tarball", CmdInit},
    {"snap", "Snapshot the live tree (alias: commit)", CmdSnap},
    {"commit", "Alias of snap", CmdSnap},
    {"restore", "Put the live tree back to a node (alias: checkout)", CmdRestore},
    {"checkout", "Alias of restore", CmdRestore},
    {"log", "Show history, newest first", CmdLog},
    {"show", "Show one node", CmdShow},
    {"diff", "Show what changed between two nodes or the live tree", CmdDiff},
    {"tag", "List, set or delete tags", CmdTag},
    {"ls", "List a directory of a node without restoring it", CmdLs},
    {"cat", "Print a file of a node without restoring it", CmdCat},
    {"head", "Show the current node", CmdHead},
    {"branches", "Show the tips of all branches", CmdBranches},
    {"status", "Show backend, HEAD, sizes and whether the tree is dirty", CmdStatus},
    {"fsck", "Verify every stored object and the index", CmdFsck},
    {"retain", "Thin old history (DVR retention); --dry-run shows what would go", CmdRetain},
    {"gc", "Free the space of unreachable objects", CmdGc},
    {"exec", "Run a command inside the environment, then snapshot", CmdExec},
    {"supervise", "Run an agent in the env; operator rollbacks relaunch it", CmdSupervise},
    {"shell", "Interactive shell inside the environment (pty), captured, snapshot on exit", CmdShell},
    {"fork", "Fork a node into an isolated overlay workspace", CmdFork},
    {"workspace", "List (ls) or remove (rm) workspaces", CmdWorkspace},
    {"token", "Make (create), list (ls) or revoke tokens of serve --listen that reach one environment", CmdToken},
    {"env", "List the environments (ls): the live tree and each workspace, with what runs in them and who reaches them", CmdEnv},
    {"tournament", "Run candidates in parallel workspaces, keep the first that passes a test", CmdTournament},
    {"bisect", "Find the first node where a test fails, testing nodes in parallel workspaces", CmdBisect},
    {"config", "Show or set the repository's settings (disk: the default --disk of exec and workspaces)", CmdConfig},
    {"mount", "Show a node as a read-only directory (bind mount; -- CMD: rootless, for one command)", CmdMount},
    {"umount", "Unmount a view that mount made", CmdUmount},
    {"export", "Write a node as a tarball, a layer (--diff-from) or an OCI image layout (--oci)", CmdExport},
    {"import", "Record a tarball or an OCI image layout (--oci) as a new node", CmdImport},
    {"push", "Push a node to an OCI registry as an image", CmdPush},
    {"pull", "Pull an image from an OCI registry as a new node", CmdPull},
    {"daemon", "Capture changes automatically and serve the control socket", CmdDaemon},
    {"serve", "The daemon plus MCP over HTTP (--listen HOST:PORT) for remote agent hosts", CmdServe},
    {"ctl", "Send an operation to a running daemon", CmdCtl},
    {"mcp", "Serve snapshot/rollback tools to a model over MCP (stdio)", CmdMcp},
};

void Usage(std::FILE* out) {
  std::fprintf(out, "usage: agentenv <command> [options]   (agentenv <command> --help)\n\n");
  for (const Command& c : kCommands)
    std::fprintf(out, "  %-10.*s %.*s\n", int(c.name.size()), c.name.data(), int(c.help.size()),
                 c.help.data());
  std::fprintf(out, "\nRepository: --root DIR or $AGENTENV_ROOT (default /agentfs).\n");
}

}  // namespace
}  // namespace agentenv::cli

int main(int argc, char** argv) {
  using namespace agentenv::cli;
  if (argc < 2) {
    Usage(stderr);
    return kExitUsage;
  }
  // `agentenv --root R --json log` as well as `agentenv log --root R --json`.
  std::vector<char*> args = GlobalsAfterName(argc, argv);
  if (args.empty()) {
    Usage(stderr);
    return kExitUsage;
  }
  argc = int(args.size());
  argv = args.data();
  std::string_view verb = argv[1];
  if (verb == "--version" || verb == "version") {
    std::printf("agentenv %s\n", agentenv::control::kVersion);
    return kExitOk;
  }
  if (verb == "--help" || verb == "-h" || verb == "help") {
    Usage(stdout);
    return kExitOk;
  }
  for (const Command& c : kCommands)
    if (c.name == verb) return c.fn(argc - 1, argv + 1);
  std::fprintf(stderr, "agentenv: unknown command '%s' (see agentenv --help)\n", argv[1]);
  return kExitUsage;
}

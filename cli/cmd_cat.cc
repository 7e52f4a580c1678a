// agentenv cat: print a file as it is in a node, without restoring it
#include <unistd.h>

#include <cstdio>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/browse.h"

namespace agentenv::cli {

int CmdCat(int argc, char** argv) {
  Globals g;
  g.data = true;  // -q keeps what it prints: the data asked for
  std::string ref, path;
  CLI::App app{"Print a file as it is in a node, without restoring it", "cat"};
  AddGlobals(app, g);
  app.add_option("ref", ref, "Node")->required();
  app.add_option("path", path, "Tree-relative path of a file")->required();
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  auto r = control::Cat(client, ref, path, [](std::span<const uint8_t> b) -> Result<void> {
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::write(STDOUT_FILENO, b.data() + done, b.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return FailErrno("stdout", errno);
      done += size_t(n);
    }
    return {};
  });
  if (!r) return ReportError(g, r.error());
  return kExitOk;
}

}  // namespace agentenv::cli

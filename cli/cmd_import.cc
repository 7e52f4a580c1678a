// agentenv import: record a tarball or an OCI image as a new node (child of HEAD)
#include <iostream>

#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "control/archive.h"
#include "control/oci.h"

namespace agentenv::cli {

int CmdImport(int argc, char** argv) {
  Globals g;
  control::ImportArchiveRequest req;
  CLI::App app{"Record a tarball or an OCI image as a new node (child of HEAD); the live tree is not touched: "
               "restore it to use it", "import"};
  AddGlobals(app, g);
  auto* archive = app.add_option("archive", req.archive, "tar, tar.gz, tar.zst, ...");
  app.add_option("--oci", req.oci, "An OCI image layout, DIR or DIR:TAG (its layers applied with whiteouts)")
      ->excludes(archive);
  app.add_option("-m,--message", req.message, "Message of the node (default: imported <archive>)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (req.archive.empty() && req.oci.empty())
    return ReportError(g, Error{"import: name a tarball, or an OCI image layout with --oci DIR[:TAG]", 0,
                                ErrorCode::kInvalid});
  control::Client client(g.root);
  auto r = WithProgress(g, client, [&] { return control::ImportArchive(client, req); });
  // Warnings on stderr, as export's: what was left out is not output.
  if (r && !g.json && !g.quiet)
    for (const auto& w : r->warnings) std::cerr << "warning: " << w << '\n';
  return Print(g, r, [&req](const control::ImportArchiveReply& r) {
    std::string s = r.node.substr(0, 12);
    return "imported " + (req.oci.empty() ? req.archive : req.oci) + " as " + s + " (agentenv restore " + s + " to use it)";
  });
}

}  // namespace agentenv::cli

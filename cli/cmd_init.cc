// agentenv init: create a repository and its live tree from a directory, a tarball, an OCI image
// layout or a registry's image.
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "control/archive.h"
#include "control/oci.h"

namespace agentenv::cli {
namespace {

// init --from-image: the first node pulled from a registry.
int InitFromImage(const Globals& g, const std::string& image, bool insecure, const std::string& auth_file,
                  const std::string& message) {
  control::PullRequest req{image, insecure, auth_file, message == "init" ? "" : message};
  return Print(g, control::InitFromImage(g.root, req, TtyProgress(g, "received")), [](const control::InitReply& r) {
    return Warnings(r.warnings) + "initialized " + r.root + " at " + r.node.short_id + " (" +
           std::to_string(r.entries) + " entries); live tree: " + r.work;
  });
}

}  // namespace

int CmdInit(int argc, char** argv) {
  Globals g;
  control::InitRequest req;
  CLI::App app{"Create a repository and its live tree from a directory, a tarball or an OCI image layout", "init"};
  AddGlobals(app, g);
  auto* f = app.add_option("--from", req.from, "Directory to copy as the first snapshot");
  auto* t = app.add_option("--tarball", req.tarball, "Archive (tar, tar.gz, tar.zst, ...) to unpack as the first snapshot")
                ->excludes(f);
  auto* o = app.add_option("--from-oci", req.oci, "OCI image layout, DIR or DIR:TAG, to unpack as the first snapshot")
                ->excludes(f)
                ->excludes(t);
  std::string image, auth_file;
  bool insecure = false;
  auto* i = app.add_option("--from-image", image, "Registry image, HOST[:PORT]/REPOSITORY[:TAG], pulled as the first snapshot")
                ->excludes(f)
                ->excludes(t)
                ->excludes(o);
  app.add_flag("--insecure", insecure, "With --from-image: plain HTTP")->needs(i);
  app.add_option("--auth-file", auth_file, "With --from-image: docker/podman config.json with credentials")->needs(i);
  app.add_option("-m,--message", req.message, "Message of the first node");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  if (!image.empty()) return InitFromImage(g, image, insecure, auth_file, req.message);
  auto r = WithProgress(g, [&](Progress* p) { return control::Init(g.root, req, p); });
  return Print(g, r, [](const control::InitReply& r) {
    std::string text;
    for (const auto& w : r.warnings) text += "warning: " + w + "\n";
    return text + "initialized " + r.root + " at " + r.node.short_id + " (" + std::to_string(r.entries) +
           " entries); live tree: " + r.work;
  });
}

}  // namespace agentenv::cli

// push and pull: nodes to and from an OCI registry.
#include <unistd.h>

#include <cstdio>

#include "cli/cli.h"
#include "cli/commands.h"
#include "control/oci.h"

namespace agentenv::cli {
namespace {

// One line per blob on stderr, redrawn as bytes move, when stderr is a
// terminal and the output is not --json.
control::TransferProgress TtyProgress(const Globals& g, const char* verb) {
  if (g.json || !::isatty(STDERR_FILENO)) return nullptr;
  return [verb, last = std::string()](const registry::Progress& p) mutable {
    std::string head = (p.count ? std::to_string(p.index) + "/" + std::to_string(p.count) + " " : "") + p.what + " " +
                       p.digest.substr(7, 12);
    std::string now = head + " " + std::to_string(p.done) + (p.finished ? " done" : "");
    if (now == last) return;  // libcurl reports often; redraw only on news
    last = now;
    if (p.skipped) {
      std::fprintf(stderr, "\r\033[K%s: already there, skipped\n", head.c_str());
    } else if (p.finished) {
      std::fprintf(stderr, "\r\033[K%s: %s %s\n", head.c_str(), verb, HumanBytes(p.total).c_str());
    } else {
      std::fprintf(stderr, "\r\033[K%s: %s / %s", head.c_str(), HumanBytes(p.done).c_str(), HumanBytes(p.total).c_str());
    }
    std::fflush(stderr);
  };
}

void AddRegistryOptions(CLI::App& app, bool& insecure, std::string& auth_file) {
  app.add_flag("--insecure", insecure, "Plain HTTP (and no TLS verification)");
  app.add_option("--auth-file", auth_file,
                 "docker/podman config.json with credentials (default: $XDG_RUNTIME_DIR/containers/auth.json, "
                 "then ~/.docker/config.json)");
}

}  // namespace

int CmdPush(int argc, char** argv) {
  Globals g;
  control::PushRequest req;
  CLI::App app{"Push a node to an OCI registry as an image; layers the registry has are not sent again", "push"};
  AddGlobals(app, g);
  app.add_option("ref", req.ref, "Node to push")->required();
  app.add_option("target", req.target, "HOST[:PORT]/REPOSITORY[:TAG]")->required();
  app.add_option("--layers", req.layers, "squash, path (default) or full, as for export --oci");
  AddRegistryOptions(app, req.insecure, req.auth_file);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, control::Push(client, req, TtyProgress(g, "sent")), [](const control::PushReply& r) {
    return "pushed " + r.node.substr(0, 12) + " to " + r.target + ": " + std::to_string(r.layers) + " layer(s), " +
           std::to_string(r.blobs_sent) + " blob(s) sent (" + HumanBytes(r.bytes_sent) + "), " +
           std::to_string(r.blobs_skipped) + " already there; manifest " + r.manifest;
  });
}

int CmdPull(int argc, char** argv) {
  Globals g;
  control::PullRequest req;
  CLI::App app{"Pull an image from an OCI registry as a new node (child of HEAD); the live tree is not touched: "
               "restore it to use it", "pull"};
  AddGlobals(app, g);
  app.add_option("source", req.source, "HOST[:PORT]/REPOSITORY[:TAG|@DIGEST]")->required();
  app.add_option("-m,--message", req.message, "Message of the node (default: pulled <source>)");
  AddRegistryOptions(app, req.insecure, req.auth_file);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  return Print(g, control::Pull(client, req, TtyProgress(g, "received")), [](const control::PullReply& r) {
    std::string text;
    for (const auto& w : r.warnings) text += "warning: " + w + "\n";
    std::string s = r.node.substr(0, 12);
    return text + "pulled " + r.source + " as " + s + " (agentenv restore " + s + " to use it)";
  });
}

int InitFromImage(const Globals& g, const std::string& image, bool insecure, const std::string& auth_file,
                  const std::string& message) {
  control::PullRequest req{image, insecure, auth_file, message == "init" ? "" : message};
  return Print(g, control::InitFromImage(g.root, req, TtyProgress(g, "received")), [](const control::InitReply& r) {
    std::string text;
    for (const auto& w : r.warnings) text += "warning: " + w + "\n";
    return text + "initialized " + r.root + " at " + r.node.short_id + " (" + std::to_string(r.entries) +
           " entries); live tree: " + r.work;
  });
}

}  // namespace agentenv::cli

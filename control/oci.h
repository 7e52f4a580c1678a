// Nodes to and from OCI registries (push, pull, init --from-image), and
// export --oci as an operation: the archive/oci.h codec plus the
// registry/ client, with errors explained for the repository's user.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "archive/oci.h"
#include "common/result.h"
#include "control/archive.h"
#include "control/client.h"
#include "registry/registry.h"

namespace agentenv::control {

// archive::ExportOci on the client's repository; a full disk names the
// output's filesystem. Errors: as archive::ExportOci.
Result<archive::OciExportReply> ExportOci(Client& client, const archive::OciExportRequest& r);

using TransferProgress = std::function<void(const registry::Progress&)>;

struct PushRequest {
  std::string ref;     // the node
  std::string target;  // HOST[:PORT]/REPOSITORY[:TAG]
  std::string layers = "path";
  bool insecure = false;  // plain HTTP
  std::string auth_file;  // empty: registry::Options' default search
};
struct PushReply {
  std::string node, target, manifest;
  uint64_t layers = 0, blobs_sent = 0, blobs_skipped = 0, bytes_sent = 0;
  template <class V> void Fields(V& v) {
    v("node", node); v("target", target); v("manifest", manifest); v("layers", layers);
    v("blobs_sent", blobs_sent); v("blobs_skipped", blobs_skipped); v("bytes_sent", bytes_sent);
  }
};
// Pushes node `ref` (layers as ExportOci) to a registry: the layers the
// registry has (HEAD) are neither written again locally (their digests are
// remembered) nor uploaded; the manifest is PUT last, so a failed push
// leaves no tag. A scratch layout beside the live tree is removed after.
// Errors: as ExportOci and registry::Push.
Result<PushReply> Push(Client& client, const PushRequest& r, const TransferProgress& progress);

struct PullRequest {
  std::string source;  // HOST[:PORT]/REPOSITORY[:TAG|@DIGEST]
  bool insecure = false;
  std::string auth_file;
  std::string message;  // default "pulled <source>"
};
struct PullReply {
  std::string node, source, manifest;
  uint64_t bytes_received = 0;
  std::vector<std::string> warnings;
  template <class V> void Fields(V& v) {
    v("node", node); v("source", source); v("manifest", manifest); v("bytes_received", bytes_received);
    v("warnings", warnings);
  }
};
// Pulls an image into a scratch layout beside the live tree (every blob
// verified), then imports it as ImportArchive does (a new child of HEAD;
// the live tree is not touched). On any failure nothing is recorded and
// the scratch layout is removed. Errors: as registry::Pull and ImportArchive.
Result<PullReply> Pull(Client& client, const PullRequest& r, const TransferProgress& progress);
// `init --from-image`: a new repository at `root` whose first node is the
// pulled image. On failure nothing of it is left. Errors: as Pull and Init.
Result<InitReply> InitFromImage(const std::string& root, const PullRequest& r, const TransferProgress& progress);

}  // namespace agentenv::control

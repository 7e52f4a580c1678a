// Nodes from OCI registries (pull, init --from-image; push is control/push.h), and
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
#include "control/push.h"
#include "registry/registry.h"

namespace agentenv::control {

// archive::ExportOci on the client's repository; a full disk names the
// output's filesystem. Errors: as archive::ExportOci.
Result<archive::OciExportReply> ExportOci(Client& client, const archive::OciExportRequest& r);

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

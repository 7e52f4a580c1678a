// push: a node to an OCI registry as an image, as an operation (socket,
// MCP) and for the CLI. Its progress travels as frames, so an MCP client
// with a progressToken sees each blob move.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/result.h"
#include "common/fields.h"
#include "control/frames.h"
#include "registry/registry.h"

namespace agentenv::control {

class Client;
class Server;

using TransferProgress = std::function<void(const registry::Progress&)>;

struct PushRequest {
  std::string ref;     // the node
  std::string target;  // HOST[:PORT]/REPOSITORY[:TAG]
  std::string layers = "path";
  bool insecure = false;  // plain HTTP
  std::string auth_file;  // empty: registry::Options' default search
  template <class V> void Fields(V& v) {
    v("ref", ref); v("target", target); v("layers", layers); v("insecure", insecure); v("auth_file", auth_file);
  }
};
struct PushReply {
  std::string node, target, manifest;
  uint64_t layers = 0, blobs_sent = 0, blobs_skipped = 0, bytes_sent = 0;
  template <class V> void Fields(V& v) {
    v("node", node); v("target", target); v("manifest", manifest); v("layers", layers);
    v("blobs_sent", blobs_sent); v("blobs_skipped", blobs_skipped); v("bytes_sent", bytes_sent);
  }
};

// Pushes node `ref` (layers as archive::ExportOci) to a registry: the
// layers the registry has (HEAD) are neither written again locally (their
// digests are remembered) nor uploaded; the manifest is PUT last, so a
// failed push leaves no tag. A scratch layout beside the live tree is
// removed after; a full disk names the repository's filesystem. A reader:
// runs in the calling process, beside a daemon. Errors: as ExportOci and
// registry::Push. Thread-safe (as Server's readers are).
Result<PushReply> Push(Server& server, const PushRequest& r, const TransferProgress& progress);
// The same on the client's repository (opened here).
Result<PushReply> Push(Client& client, const PushRequest& r, const TransferProgress& progress);

// Progress as frames: {"frame":"progress","what","digest","index","count",
// "done","total","skipped","finished"}; nothing when `emit` is empty.
TransferProgress ProgressFrames(const FrameSink& emit);

}  // namespace agentenv::control

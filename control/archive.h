// Trees in and out of a repository: init (from a directory or a tarball),
// export (a node as a tarball) and import (a tarball as a node).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "control/client.h"
#include "control/types.h"

namespace agentenv::control {

struct InitRequest {
  std::string from;     // a directory to copy, or
  std::string tarball;  // an archive to unpack, or
  std::string oci;      // an OCI image layout, DIR[:TAG] (none: an empty tree)
  std::string message = "init";
};
struct InitReply {
  std::string root, work;
  NodeInfo node;
  uint64_t entries = 0;
  std::vector<std::string> warnings;
  template <class V> void Fields(V& v) { v("root", root); v("work", work); v("node", node); v("warnings", warnings); }
};
// Creates the repository at `root` and its first node. On failure nothing
// of the new repository is left behind. Errors: kExists (already a
// repository), kInvalid (a hostile archive), I/O.
// `progress` (may be null) is advanced while unpacking, scanning, writing.
Result<InitReply> Init(const std::string& root, const InitRequest& r, Progress* progress = nullptr);

struct ExportRequest {
  std::string ref;
  std::string output;     // .tar, .tar.gz, .tar.zst; "-" for stdout
  std::string diff_from;  // only what changed since this node, deletions as whiteouts
};
struct ExportReply {
  std::string node, output;
  uint64_t entries = 0, bytes = 0, whiteouts = 0;
  bool diff = false;
  std::vector<std::string> warnings;  // one per socket left out
  template <class V> void Fields(V& v) {
    v("node", node); v("output", output); v("entries", entries); v("bytes", bytes); v("whiteouts", whiteouts);
    v("warnings", warnings);
  }
};
// A reader: runs in this process. Errors: kNotFound (refs), I/O.
Result<ExportReply> Export(Client& client, const ExportRequest& r);
// Same, on a server of this process (a daemon's). Thread-safe.
Result<ExportReply> Export(Server& server, const ExportRequest& r);

struct ImportArchiveRequest {
  std::string archive;  // a tarball, or
  std::string oci;      // an OCI image layout, DIR[:TAG]
  std::string message;  // default: the title rendered from its provenance ("imported <archive>")
  // A pull: what it recorded is kind "pull" from `source` (the image
  // reference), not an import of the scratch layout.
  bool pulled = false;
  std::string source;
};
struct ImportArchiveReply {
  std::string node;
  std::vector<std::string> warnings;
  template <class V> void Fields(V& v) { v("node", node); v("warnings", warnings); }
};
// Unpacks the archive beside the live tree (here), then records it through
// the lock holder (the import op). Errors: kInvalid for a hostile archive
// or image (nothing is recorded), as OpenOciImage, I/O.
Result<ImportArchiveReply> ImportArchive(Client& client, const ImportArchiveRequest& r);

}  // namespace agentenv::control

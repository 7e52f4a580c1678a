// export --oci and pull: nodes to OCI image layouts and from registries
// (control/oci.h), a pull through a scratch layout.
#include <stdlib.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>

#include "control/errors.h"
#include "control/oci.h"
#include "control/server.h"
#include "snap/scratch.h"
#include "snap/layout.h"

namespace agentenv::control {
namespace {

registry::Options Options(bool insecure, const std::string& auth_file, const TransferProgress& progress) {
  registry::Options o;
  o.insecure = insecure;
  o.auth_file = auth_file;
  o.progress = progress;
  return o;
}

constexpr const char* kPulledTag = "pulled";

// Pulls `source` into the new layout `dir`; returns "<dir>:<tag>".
Result<std::string> PullLayout(const PullRequest& r, const std::string& dir, const TransferProgress& progress,
                               registry::TransferStats* stats) {
  AE_ASSIGN(registry::Reference ref, registry::ParseReference(r.source));
  AE_ASSIGN(*stats, registry::Pull(ref, dir, kPulledTag, Options(r.insecure, r.auth_file, progress)));
  return dir + ":" + kPulledTag;
}

}  // namespace

Result<archive::OciExportReply> ExportOci(Client& client, const archive::OciExportRequest& r) {
  AE_ASSIGN(Server* s, client.Local());
  return ExplainFullDisk(archive::ExportOci(s->repo(), r), r.dir, FullDiskAt::kOutput);
}

Result<PullReply> Pull(Client& client, const PullRequest& r, const TransferProgress& progress) {
  AE_ASSIGN(Server* local, client.Local());  // not a repository: say so before downloading
  (void)local;
  AE_ASSIGN(snap::ScratchDir scratch, snap::ScratchDir::Make(snap::layout::WorkParent(client.root()), "pull"));
  registry::TransferStats st;
  AE_ASSIGN(std::string spec, ExplainFullDisk(PullLayout(r, scratch.path() + "/layout", progress, &st), client.root()));
  ImportArchiveRequest imp;
  imp.oci = spec;
  imp.message = r.message;
  imp.pulled = true;
  imp.source = r.source;
  AE_ASSIGN(ImportArchiveReply rep, ImportArchive(client, imp));
  return PullReply{rep.node, r.source, st.manifest, st.bytes_received, rep.warnings};
}

Result<InitReply> InitFromImage(const std::string& root, const PullRequest& r, const TransferProgress& progress) {
  // The root may not exist yet: make it, and remove it again on failure.
  bool made_root = ::mkdir(root.c_str(), 0755) == 0;
  if (!made_root && errno != EEXIST) return FailErrno(root, errno);
  struct RemoveRoot {
    const std::string& root;
    bool armed;
    ~RemoveRoot() {
      if (armed) ::rmdir(root.c_str());  // only when empty again
    }
  } remove_root{root, made_root};
  registry::TransferStats st;
  std::optional<snap::ScratchDir> scratch;
  {
    AE_ASSIGN(snap::ScratchDir d, snap::ScratchDir::Make(root, ".pull"));
    scratch.emplace(std::move(d));
  }
  AE_ASSIGN(std::string spec, ExplainFullDisk(PullLayout(r, scratch->path() + "/layout", progress, &st), root));
  InitRequest init;
  init.oci = spec;
  init.message = r.message.empty() ? "pulled " + r.source : r.message;
  auto rep = Init(root, init);
  scratch.reset();
  if (rep) remove_root.armed = false;
  return rep;
}

}  // namespace agentenv::control

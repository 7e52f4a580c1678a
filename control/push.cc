// push: export the node into a scratch OCI layout, then registry::Push.
#include "control/push.h"

#include "archive/oci.h"
#include "control/client.h"
#include "control/errors.h"
#include "control/server.h"
#include "snap/layout.h"
#include "snap/scratch.h"

namespace agentenv::control {
namespace {

// The layout goes to a scratch directory beside the live tree: a full disk
// there is the repository's (ExplainFullDisk in Push).
Result<PushReply> PushNode(Server& server, const PushRequest& r, const TransferProgress& progress) {
  AE_ASSIGN(registry::Reference ref, registry::ParseReference(r.target));
  registry::Options opt;
  opt.insecure = r.insecure;
  opt.auth_file = r.auth_file;
  opt.progress = progress;
  AE_ASSIGN(snap::ScratchDir scratch, snap::ScratchDir::Make(snap::layout::WorkParent(server.repo().root()), "push"));
  archive::OciExportRequest exp;
  exp.ref = r.ref;
  exp.dir = scratch.path() + "/layout";
  exp.tag = "push";
  exp.layers = r.layers;
  registry::Options quiet = opt;
  quiet.progress = nullptr;
  exp.have_blob = [&](const std::string& digest) { return registry::HasBlob(ref, quiet, digest); };
  AE_ASSIGN(archive::OciExportReply layout, archive::ExportOci(server.repo(), exp));
  AE_ASSIGN(registry::TransferStats st, registry::Push(exp.dir, layout.manifest, ref, opt));
  return PushReply{layout.node, ref.String(), layout.manifest, layout.layers, st.blobs_sent, st.blobs_skipped,
                   st.bytes_sent};
}

}  // namespace

Result<PushReply> Push(Server& server, const PushRequest& r, const TransferProgress& progress) {
  return ExplainFullDisk(PushNode(server, r, progress), server.repo().root());
}

Result<PushReply> Push(Client& client, const PushRequest& r, const TransferProgress& progress) {
  AE_ASSIGN(Server* s, client.Local());
  return Push(*s, r, progress);
}

TransferProgress ProgressFrames(const FrameSink& emit) {
  if (!emit) return nullptr;
  return [emit](const registry::Progress& p) {
    emit(nlohmann::json{{"frame", "progress"}, {"what", p.what},   {"digest", p.digest},
                        {"index", p.index},    {"count", p.count}, {"done", p.done},
                        {"total", p.total},    {"skipped", p.skipped}, {"finished", p.finished}});
  };
}

}  // namespace agentenv::control

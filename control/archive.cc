#include "control/archive.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "control/errors.h"
#include "archive/export.h"
#include "control/open_repo.h"
#include "control/oci.h"
#include "snap/scratch.h"
#include "archive/tarball.h"
#include "snap/fsops.h"
#include "snap/layout.h"

namespace agentenv::control {
namespace {

Result<InitReply> InitRepository(const std::string& root, const InitRequest& r, Progress* progress) {
  std::error_code ec;
  const bool made_root = !std::filesystem::exists(root, ec);
  AE_ASSIGN(auto repo, snap::Repo::CreateStaged(root));
  repo->set_progress(progress);
  // Leave nothing half-made behind: the repository is new, and so is its
  // root directory when it did not exist (removed only if left empty).
  struct Undo {
    const std::string& root;
    std::unique_ptr<snap::Repo>* repo;
    bool made_root;
    bool armed = true;
    ~Undo() {
      if (!armed) return;
      repo->reset();
      std::error_code ec;
      for (const char* d : snap::layout::kCreated) std::filesystem::remove_all(root + d, ec);
      if (made_root) ::rmdir(root.c_str());
    }
  } undo{root, &repo, made_root};
  AE_ASSIGN(snap::PathFilter ignored, LoadIgnoreRules(root));
  repo->set_ignored(ignored);
  InitReply rep;
  snap::SnapResult res;
  snap::Provenance made;
  made.kind = snap::ProvenanceKind::kInit;
  made.who = {snap::Origin::kCli, "", ""};
  made.source = !r.from.empty() ? r.from : !r.tarball.empty() ? r.tarball : r.oci;
  if (!r.from.empty()) {
    AE_ASSIGN(res, repo->Seed(r.from, r.message, made));
  } else {
    auto warn = [&](const std::string& w) { rep.warnings.push_back(w); };
    int64_t filled_ns = 0;  // see SnapOptions::filled_ns
    if (!r.tarball.empty()) {
      AE_TRY(archive::ExtractTarball(r.tarball, repo->work_dir(), warn, archive::UnprivilegedDevices::kSkip, progress,
                                     ignored));
      filled_ns = snap::NowNs();
    }
    std::optional<std::vector<archive::OciNode>> history;
    if (!r.oci.empty()) {
      AE_ASSIGN(archive::OciImage image, archive::OpenOciImage(r.oci));
      // An image agentenv exported: one node per layer, as it was (the
      // live tree is ours, so each snapshot rereads only what changed).
      history = archive::OciHistory(image);
      AE_TRY(archive::UnpackOciImage(image, repo->work_dir(), warn, archive::UnprivilegedDevices::kSkip,
                            [&](size_t i) -> Result<void> {
                              if (!history) return {};
                              const archive::OciNode& n = (*history)[i];
                              AE_TRY(archive::SetRootMeta(repo->work_dir(), n.root));
                              snap::SnapOptions opt;
                              opt.message = n.message;
                              opt.label = n.label;
                              opt.provenance = n.provenance;
                              opt.time_ns = n.time_ns;
                              opt.allow_empty = true;
                              // The last layer's node is HEAD: its snapshot
                              // is the first change search's base.
                              if (i + 1 == history->size()) opt.filled_ns = snap::NowNs();
                              AE_ASSIGN(res, repo->Snapshot(opt));
                              rep.entries += res.changes.added;
                              rep.warnings.insert(rep.warnings.end(), res.warnings.begin(), res.warnings.end());
                              res.warnings.clear();
                              return {};
                            }));
      filled_ns = snap::NowNs();
    }
    if (!history) {
      snap::SnapOptions opt;
      opt.message = r.message;
      opt.provenance = made;
      opt.allow_empty = true;
      opt.filled_ns = filled_ns;
      AE_ASSIGN(res, repo->Snapshot(opt));
      rep.entries = res.changes.added;
    }
  }
  rep.warnings.insert(rep.warnings.end(), res.warnings.begin(), res.warnings.end());
  AE_ASSIGN(snap::NodeRecord rec, repo->Record(*res.node));
  AE_TRY(repo->FinishInit());
  undo.armed = false;
  rep.root = root;
  rep.work = repo->work_dir();
  rep.node = MakeNodeInfo(rec);
  if (!r.from.empty()) rep.entries = res.changes.added;
  return rep;
}

Result<ExportReply> ExportNode(Server& server, const ExportRequest& r, Progress* progress) {
  snap::Repo& repo = server.repo();
  AE_ASSIGN(store::ObjectId id, repo.Resolve(r.ref));
  AE_ASSIGN(snap::Node node, snap::LoadNode(repo.store(), id));
  std::optional<store::ObjectId> base;
  if (!r.diff_from.empty()) {
    AE_ASSIGN(store::ObjectId b, repo.Resolve(r.diff_from));
    AE_ASSIGN(snap::NodeRecord rec, repo.Record(b));
    base = rec.tree;
  }
  AE_ASSIGN(archive::ExportStats st, archive::ExportTar(repo.store(), node, base, r.output, progress));
  return ExportReply{id.Hex(), r.output, st.entries, st.bytes, st.whiteouts, base.has_value(), std::move(st.warnings)};
}

Result<ImportArchiveReply> UnpackAndImport(Client& client, const ImportArchiveRequest& r) {
  AE_ASSIGN(Server* local, client.Local());  // not a repository: say so before unpacking
  (void)local;
  // Unpack beside the live tree (same filesystem) into a scratch directory
  // the next import, push or pull removes if this process is killed.
  AE_ASSIGN(snap::ScratchDir scratch, snap::ScratchDir::Make(snap::layout::WorkParent(client.root()), "import"));
  std::string dir = scratch.path() + "/tree";
  if (::mkdir(dir.c_str(), 0755) != 0) return FailErrno(dir, errno);
  ImportArchiveReply rep;
  auto warn = [&](const std::string& w) { rep.warnings.push_back(w); };
  std::optional<snap::Provenance> carried;
  if (!r.oci.empty()) {
    AE_ASSIGN(archive::OciImage image, archive::OpenOciImage(r.oci));
    AE_TRY(archive::UnpackOciImage(image, dir, warn, archive::UnprivilegedDevices::kRefuse));
    // An image agentenv exported says what made its node: kept.
    if (auto history = archive::OciHistory(image)) carried = history->back().provenance;
  } else {
    // What the recording will leave out is named (it vanished silently).
    AE_ASSIGN(snap::PathFilter ignored, LoadIgnoreRules(client.root()));
    AE_TRY(archive::ExtractTarball(r.archive, dir, warn, archive::UnprivilegedDevices::kRefuse, client.progress(),
                                   ignored));
  }
  ImportRequest req;
  req.dir = dir;
  req.message = r.message;
  req.source = r.pulled ? r.source : r.oci.empty() ? r.archive : r.oci;
  if (r.pulled) req.kind = "pull";
  if (carried) {
    std::vector<uint8_t> bytes = snap::EncodeProvenance(*carried);
    req.provenance = Base64Encode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  AE_ASSIGN(ImportReply imported, client.Call(req));
  rep.node = imported.node;
  return rep;
}

}  // namespace

Result<InitReply> Init(const std::string& root, const InitRequest& r, Progress* progress) {
  return ExplainFullDisk(InitRepository(root, r, progress), root);
}

Result<ExportReply> Export(Client& client, const ExportRequest& r) {
  AE_ASSIGN(Server* s, client.Local());
  return ExplainFullDisk(ExportNode(*s, r, client.progress()), r.output, FullDiskAt::kOutput);
}

Result<ExportReply> Export(Server& server, const ExportRequest& r) {
  return ExplainFullDisk(ExportNode(server, r, nullptr), r.output, FullDiskAt::kOutput);
}

Result<ImportArchiveReply> ImportArchive(Client& client, const ImportArchiveRequest& r) {
  return ExplainFullDisk(UnpackAndImport(client, r), client.root());
}

}  // namespace agentenv::control

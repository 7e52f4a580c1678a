// Writing a node as an OCI image layout (archive/oci.h).
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "common/durable.h"
#include "common/platform.h"
#include "common/sha256.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "archive/export.h"
#include "archive/oci.h"
#include "common/write_all.h"
#include "snap/layout.h"
#include "snap/repo.h"

namespace agentenv::archive {
namespace {

using json = nlohmann::json;

constexpr const char* kLayerType = "application/vnd.oci.image.layer.v1.tar";
constexpr const char* kConfigType = "application/vnd.oci.image.config.v1+json";
constexpr const char* kManifestType = "application/vnd.oci.image.manifest.v1+json";
constexpr size_t kPathDepthStride = 16;

// One blob written under blobs/sha256: to a temporary file there, hashed
// while written, fsynced, then renamed to its digest (or dropped when a
// blob of that digest exists: never rewritten).
class BlobWriter {
 public:
  static Result<std::unique_ptr<BlobWriter>> Open(const std::string& blobs) {
    std::unique_ptr<BlobWriter> w(new BlobWriter);
    w->blobs_ = blobs;
    w->tmp_ = blobs + "/.tmp-XXXXXX";
    int fd = ::mkostemp(w->tmp_.data(), O_CLOEXEC);
    if (fd < 0) {
      w->tmp_.clear();
      return FailErrno(blobs, errno);
    }
    w->fd_.reset(fd);
    // Blobs are read by other users' tools (mkostemp makes 0600).
    if (::fchmod(fd, 0644) != 0) return FailErrno(w->tmp_, errno);
    return w;
  }
  ~BlobWriter() {
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
  }

  Result<void> Write(std::span<const uint8_t> b) {
    hash_.Update(b.data(), b.size());
    size_ += b.size();
    buf_.insert(buf_.end(), b.begin(), b.end());
    if (buf_.size() >= (1u << 20)) return Flush();
    return {};
  }

  // The blob's descriptor; the file is in place and durable (the caller
  // fsyncs the directory once, after the last blob).
  Result<OciBlob> Commit(const std::string& media_type) {
    AE_TRY(Flush());
    if (::fsync(fd_.get()) != 0) return FailErrno(tmp_, errno);
    fd_.reset();
    OciBlob b{media_type, hash_.OciDigest(), size_, {}};
    std::string final_path = blobs_ + "/" + b.digest.substr(7);
    struct stat st;
    if (::lstat(final_path.c_str(), &st) == 0) {
      // Same digest, same bytes: keep the one there.
      ::unlink(tmp_.c_str());
    } else if (::rename(tmp_.c_str(), final_path.c_str()) != 0) {
      return FailErrno(final_path, errno);
    }
    tmp_.clear();
    return b;
  }

 private:
  BlobWriter() = default;
  Result<void> Flush() {
    AE_TRY(WriteAll(fd_.get(), buf_.data(), buf_.size(), tmp_));
    buf_.clear();
    return {};
  }
  std::string blobs_, tmp_;
  UniqueFd fd_;
  Sha256 hash_;
  std::vector<uint8_t> buf_;
  uint64_t size_ = 0;
};

Result<OciBlob> WriteJsonBlob(const std::string& blobs, const json& j, const std::string& media_type) {
  std::string text = j.dump();
  AE_ASSIGN(auto w, BlobWriter::Open(blobs));
  AE_TRY(w->Write({reinterpret_cast<const uint8_t*>(text.data()), text.size()}));
  return w->Commit(media_type);
}

Result<void> MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return FailErrno(path, errno);
  return {};
}

std::string Rfc3339(int64_t ns) {
  time_t secs = time_t(ns / 1000000000);
  struct tm tm;
  ::gmtime_r(&secs, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%09lldZ", (long long)(ns % 1000000000));
  return buf;
}

// One layer to write: node `top`'s tree, as a diff from `base` (an
// ancestor) or whole.
struct LayerPlan {
  size_t top;
  std::optional<size_t> base;
};

Result<std::vector<LayerPlan>> Plan(size_t nodes, const std::string& mode) {
  std::vector<LayerPlan> plan;
  size_t last = nodes - 1;
  if (mode == "squash") {
    plan.push_back({last, std::nullopt});
  } else if (mode == "full" || mode == "path") {
    size_t first = mode == "full" ? 0 : last - last % kPathDepthStride;
    plan.push_back({first, std::nullopt});
    for (size_t i = first + 1; i <= last; ++i) plan.push_back({i, i - 1});
  } else {
    return Fail(ErrorCode::kInvalid, "--layers " + mode + ": expected squash, path or full");
  }
  return plan;
}

// The digest and size of layer `key` ("<node>-<base node or root>"), as
// an earlier export wrote it: the same node and base give the same bytes.
std::optional<OciBlob> RecallLayer(const std::string& memo, const std::string& key) {
  std::ifstream in(memo + "/" + key);
  std::string digest;
  uint64_t size = 0;
  if (!(in >> digest >> size) || digest.size() != 71 || !digest.starts_with("sha256:")) return std::nullopt;
  return OciBlob{kLayerType, digest, size, {}};
}

// Remembers a layer's digest (a cache: failing to write it loses nothing).
void RememberLayer(const std::string& memo, const std::string& key, const OciBlob& b) {
  if (::mkdir(memo.c_str(), 0755) != 0 && errno != EEXIST) return;
  std::string tmp = memo + "/." + key + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << b.digest << " " << b.size << "\n";
    if (!out.flush()) return;
  }
  ::rename(tmp.c_str(), (memo + "/" + key).c_str());
}

Result<bool> HaveBlob(const std::string& blobs, const OciBlob& b) {
  struct stat st;
  return ::stat((blobs + "/" + b.digest.substr(7)).c_str(), &st) == 0 && uint64_t(st.st_size) == b.size;
}

// A tag as the OCI layout allows ("ref.name" components).
bool ValidTag(const std::string& t) {
  if (t.empty() || t.size() > 128) return false;
  return std::all_of(t.begin(), t.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("._-", c); });
}

}  // namespace

Result<OciExportReply> ExportOci(snap::Repo& repo, const OciExportRequest& r) {
  if (!ValidTag(r.tag))
    return Fail(ErrorCode::kInvalid, "--tag '" + r.tag + "': use letters, digits, '.', '_' and '-' (at most 128)");
  AE_ASSIGN(store::ObjectId id, repo.Resolve(r.ref));
  // The path from the root node to this one.
  std::vector<snap::NodeRecord> chain;
  for (std::optional<store::ObjectId> at = id; at;) {
    AE_ASSIGN(snap::NodeRecord rec, repo.Record(*at));
    at = rec.parent;
    chain.push_back(std::move(rec));
  }
  std::reverse(chain.begin(), chain.end());
  AE_ASSIGN(std::vector<LayerPlan> plan, Plan(chain.size(), r.layers));

  std::string blobs = r.dir + "/blobs/sha256";
  std::string memo = snap::layout::OciLayers(repo.root());
  AE_TRY(MakeDir(r.dir));
  AE_TRY(MakeDir(r.dir + "/blobs"));
  AE_TRY(MakeDir(blobs));
  OciExportReply rep{id.Hex(), r.dir, r.tag, "", plan.size()};
  json layers = json::array(), diff_ids = json::array(), history = json::array();
  snap::Node top;
  for (const LayerPlan& l : plan) {
    AE_ASSIGN(top, snap::LoadNode(repo.store(), chain[l.top].id));
    std::optional<store::ObjectId> base;
    if (l.base) base = chain[*l.base].tree;
    std::string key = chain[l.top].id.Hex() + "-" + (l.base ? chain[*l.base].id.Hex() : "root");
    std::optional<OciBlob> known = RecallLayer(memo, key);
    bool have = false;
    if (known) {
      AE_ASSIGN(have, r.have_blob ? r.have_blob(known->digest) : HaveBlob(blobs, *known));
    }
    OciBlob blob;
    if (have) {
      blob = *known;
      ++rep.reused;
    } else {
      AE_ASSIGN(auto w, BlobWriter::Open(blobs));
      std::string name = r.dir + ": layer of node " + chain[l.top].id.Hex().substr(0, 12);
      AE_ASSIGN(ExportStats st, ExportTarTo(repo.store(), top, base,
                                            [&](std::span<const uint8_t> b) { return w->Write(b); }, name));
      AE_ASSIGN(blob, w->Commit(kLayerType));
      // A socket left out of a layer is not reported: an image is a rootfs
      // for containers, where sockets are made by what runs, not shipped.
      rep.entries += st.entries, rep.bytes += st.bytes, rep.whiteouts += st.whiteouts;
      RememberLayer(memo, key, blob);
    }
    // What `import` needs to give the node back its place in history.
    json ann = {{"dev.agentenv.node", chain[l.top].id.Hex()},
                {"dev.agentenv.time", std::to_string(top.time_ns)},
                {"dev.agentenv.message", top.message},
                {"dev.agentenv.label", top.label}};
    // The parent in history now (retention may have reparented the node).
    if (chain[l.top].parent) ann["dev.agentenv.parent"] = chain[l.top].parent->Hex();
    // What made it: its record's provenance section, as stored.
    AE_ASSIGN(snap::NodeRecord rec, repo.Record(chain[l.top].id));
    if (rec.provenance) {
      std::vector<uint8_t> bytes = snap::EncodeProvenance(*rec.provenance);
      ann["dev.agentenv.provenance"] = Base64Encode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    }
    char root[96];
    std::snprintf(root, sizeof root, "%o %u %u %lld", top.root.mode, top.root.uid, top.root.gid,
                  (long long)top.root.mtime_ns);
    ann["dev.agentenv.root"] = root;
    layers.push_back({{"mediaType", blob.media_type}, {"digest", blob.digest}, {"size", blob.size},
                      {"annotations", ann}});
    diff_ids.push_back(blob.digest);  // uncompressed: the layer is its own diff
    std::string comment = top.message.empty() ? top.label : top.message;
    history.push_back({{"created", Rfc3339(top.time_ns)},
                       {"created_by", "agentenv snapshot " + chain[l.top].id.Hex().substr(0, 12)},
                       {"comment", comment}});
  }
  json config = {{"created", Rfc3339(top.time_ns)},
                 {"architecture", OciArchitecture()},
                 {"os", "linux"},
                 {"config", json::object()},
                 {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}},
                 {"history", history}};
  AE_ASSIGN(OciBlob cfg, WriteJsonBlob(blobs, config, kConfigType));
  json manifest = {{"schemaVersion", 2},
                   {"mediaType", kManifestType},
                   {"config", {{"mediaType", cfg.media_type}, {"digest", cfg.digest}, {"size", cfg.size}}},
                   {"layers", layers},
                   {"annotations",
                    {{"org.opencontainers.image.created", Rfc3339(top.time_ns)}, {"dev.agentenv.node", id.Hex()}}}};
  AE_ASSIGN(OciBlob man, WriteJsonBlob(blobs, manifest, kManifestType));
  AE_TRY(FsyncDir(blobs));
  rep.manifest = man.digest;

  // index.json: this tag now names the manifest; other tags stay.
  json index = {{"schemaVersion", 2}, {"mediaType", "application/vnd.oci.image.index.v1+json"},
                {"manifests", json::array()}};
  if (std::ifstream in(r.dir + "/index.json"); in) {
    json old = json::parse(in, nullptr, false);
    if (old.is_discarded() || !old.is_object() || !old.contains("manifests") || !old["manifests"].is_array())
      return Fail(ErrorCode::kInvalid, r.dir + "/index.json: not an OCI image index; refusing to replace it");
    for (const json& m : old["manifests"]) {
      if (!m.is_object()) continue;
      // Checked, not value(): that throws for annotations of another type.
      const char* kRefName = "org.opencontainers.image.ref.name";
      const json* ann = m.contains("annotations") && m["annotations"].is_object() ? &m["annotations"] : nullptr;
      bool this_tag = ann && ann->contains(kRefName) && (*ann)[kRefName].is_string() && (*ann)[kRefName] == r.tag;
      if (!this_tag) index["manifests"].push_back(m);
    }
  }
  index["manifests"].push_back({{"mediaType", kManifestType},
                                {"digest", man.digest},
                                {"size", man.size},
                                {"annotations", {{"org.opencontainers.image.ref.name", r.tag}}}});
  AE_TRY(WriteFileDurably(r.dir, "oci-layout", json{{"imageLayoutVersion", "1.0.0"}}.dump()));
  AE_TRY(WriteFileDurably(r.dir, "index.json", index.dump()));
  return rep;
}

}  // namespace agentenv::archive

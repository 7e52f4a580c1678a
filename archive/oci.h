// Nodes as OCI images: writing a node (and the nodes before it) as an OCI
// image layout, and reading any OCI image layout back as a tree. The
// on-disk format is the OCI image-spec's; what agentenv puts in it is in
// docs/oci.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "archive/tarball.h"
#include "common/result.h"
#include "snap/provenance.h"
#include "snap/repo.h"
#include "snap/tree.h"

namespace agentenv::archive {

// Which layers an exported image has (docs/oci.md):
//  squash: one layer, the node's whole tree;
//  path:   the tree of the ancestor at the last depth that is a multiple of
//          16, then one diff layer per later node (at most 16 layers; a
//          child shares every layer of its parent but its own, 15 times in
//          16);
//  full:   the root node's tree, then one diff layer per node (no cap).
struct OciExportRequest {
  std::string ref;
  std::string dir;  // the layout directory (created, or an existing layout to add to)
  std::string tag = "latest";
  std::string layers = "path";
  // A layer exported before (its digest is remembered under
  // layout::OciLayers, per node and base) is not written again when this
  // says its destination has that blob; empty: when `dir` has it.
  std::function<Result<bool>(const std::string& digest)> have_blob;
};
struct OciExportReply {
  std::string node, dir, tag, manifest;  // manifest: its digest
  uint64_t layers = 0, entries = 0, bytes = 0, whiteouts = 0;
  uint64_t reused = 0;  // layers not written: the destination has them
  template <class V> void Fields(V& v) {
    v("node", node); v("dir", dir); v("tag", tag); v("manifest", manifest); v("layers", layers);
    v("entries", entries); v("bytes", bytes); v("whiteouts", whiteouts); v("reused", reused);
  }
};
// Writes node `ref` as image `tag` of the layout at `dir` (blobs are
// content-addressed: the same node gives the same digests; an existing
// blob is never rewritten; index.json is replaced atomically, other tags
// kept). A reader of `repo`: thread-safe as its readers are. Errors:
// kNotFound (ref), kInvalid (layers mode, tag), I/O (a full disk is the
// caller's to explain: it knows whose disk that is).
Result<OciExportReply> ExportOci(snap::Repo& repo, const OciExportRequest& r);

// One content descriptor of an image.
struct OciBlob {
  std::string media_type, digest;  // digest: "sha256:<64 hex>"
  uint64_t size = 0;
  std::map<std::string, std::string> annotations;
};
struct OciImage {
  std::string dir, tag;  // tag: as asked, "" when the layout holds one image
  OciBlob manifest, config;
  std::vector<OciBlob> layers;  // bottom first
};
// Finds image `spec` ("DIR" when the layout holds one image, else
// "DIR:TAG") and reads its manifest and layer list (blobs are verified
// by UnpackOciImage). Errors: kNotFound (no layout, no such tag),
// kInvalid (malformed JSON, a digest that is not sha256, several images
// and no tag, an image index inside an image index inside the layout's
// index), kUnsupported (a media type that is not an image).
Result<OciImage> OpenOciImage(const std::string& spec);
// Verifies every layer's size and SHA-256 against the manifest, and the
// config's rootfs.diff_ids against the layers (a compressed layer is read
// once more to hash its tar) (kInvalid, "<blob>: ... refusing the image"),
// then applies the layers bottom up
// onto the empty directory `dest` (ApplyLayer: whiteouts, opaque
// directories, hostile entries refused with kInvalid). On error `dest`
// may hold a partial tree: the caller removes it.
// `after_layer`, when given, runs after each layer is applied.
Result<void> UnpackOciImage(const OciImage& image, const std::string& dest,
                            const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices,
                            const std::function<Result<void>(size_t layer)>& after_layer = nullptr);

// The node a layer of an agentenv image completes (its annotations).
struct OciNode {
  std::string id, parent, message, label;
  int64_t time_ns = 0;
  snap::Meta root;  // the root directory's mode, owner and mtime
  // What made the node (its record's provenance section), when the image
  // carries one that decodes.
  std::optional<snap::Provenance> provenance;
};
// The nodes of `image`, bottom first, when every layer names its node and
// each names the one below it as parent (an image agentenv exported);
// nullopt for any other image.
std::optional<std::vector<OciNode>> OciHistory(const OciImage& image);
// Gives directory `dir` the root metadata of a node (owner only as root).
Result<void> SetRootMeta(const std::string& dir, const snap::Meta& m);

}  // namespace agentenv::archive

// Reading an OCI image layout, whoever wrote it (archive/oci.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/platform.h"
#include "common/read_all.h"
#include "common/sha256.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "archive/libarchive.h"
#include "archive/oci.h"

namespace agentenv::archive {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxJson = 4 << 20;  // index, manifest and config are small

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The path of blob `digest` in the layout, which must be "sha256:" and 64
// lowercase hex digits (anything else could name a path outside blobs/).
Result<std::string> BlobPath(const std::string& dir, const std::string& digest) {
  bool ok = digest.size() == 71 && digest.compare(0, 7, "sha256:") == 0;
  for (size_t i = 7; ok && i < digest.size(); ++i)
    ok = (digest[i] >= '0' && digest[i] <= '9') || (digest[i] >= 'a' && digest[i] <= 'f');
  if (!ok)
    return Fail(ErrorCode::kInvalid, dir + ": digest '" + digest + "' is not sha256:<64 hex digits>; refusing the image");
  return "blobs/sha256/" + digest.substr(7);
}

// The file `rel` ("index.json", "blobs/sha256/<hex>") of the layout at
// `dir`, opened without following a symlink anywhere below `dir` (a blob
// that links out of the layout would be hashed and read from wherever it
// points: the layout is the input, the rest of the machine is not) and
// only when it is a regular file (opening a FIFO would wait for a writer).
// Errors: the open's errno (ENOENT: no such file) with its text; kInvalid
// for a symlink or a file that is not regular.
Result<UniqueFd> OpenInLayout(const std::string& dir, const std::string& rel) {
  UniqueFd at(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!at) return FailErrno(dir, errno);
  for (size_t start = 0;;) {
    size_t slash = rel.find('/', start);
    const bool last = slash == std::string::npos;
    std::string path = dir + "/" + rel.substr(0, slash);
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY);
    UniqueFd next(::openat(at.get(), rel.substr(start, last ? std::string::npos : slash - start).c_str(), flags));
    if (!next) {
      int err = errno;
      struct stat st;
      if ((err == ELOOP || err == ENOTDIR) && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
        return Fail(ErrorCode::kInvalid, path + ": a symbolic link, which an image's files may not be "
                                                "(it is never followed); refusing the image");
      return FailErrno(path, err);
    }
    if (last) {
      struct stat st;
      if (::fstat(next.get(), &st) != 0) return FailErrno(path, errno);
      if (!S_ISREG(st.st_mode))
        return Fail(ErrorCode::kInvalid, path + ": not a regular file; refusing the image");
      return next;
    }
    at = std::move(next);
    start = slash + 1;
  }
}

// The layout's JSON file `rel`, at most `max` bytes, from `fd` when given
// (a blob already opened and verified), else opened in the layout.
Result<json> ReadJson(const std::string& dir, const std::string& rel, uint64_t max, UniqueFd fd = {}) {
  const std::string path = dir + "/" + rel;
  if (!fd) {
    auto opened = OpenInLayout(dir, rel);
    if (!opened) {
      int err = opened.error().errno_value;
      if (err == ENOENT) return Fail(ErrorCode::kNotFound, path + ": missing; not an OCI image layout");
      // A name the user gave that cannot be a layout's (a file on the way,
      // a name too long): theirs to fix, not an I/O failure.
      if (err == ENOTDIR || err == ENAMETOOLONG)
        return Fail(ErrorCode::kNotFound, path + ": " + std::strerror(err) + "; not an OCI image layout");
      return Unexpected<Error>(opened.error());
    }
    fd = std::move(*opened);
  }
  AE_ASSIGN(std::string text, ReadUpTo(fd.get(), path, max + 1));
  if (text.size() > max) return Fail(ErrorCode::kInvalid, path + ": larger than " + std::to_string(max) + " bytes");
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail(ErrorCode::kInvalid, path + ": not a JSON object");
  return j;
}

Result<OciBlob> Descriptor(const std::string& where, const json& j) {
  if (!j.is_object() || !j.contains("digest") || !j["digest"].is_string() || !j.contains("size") ||
      !j["size"].is_number_unsigned())
    return Fail(ErrorCode::kInvalid, where + ": a descriptor without digest and size");
  OciBlob b;
  b.digest = j["digest"].get<std::string>();
  b.size = j["size"].get<uint64_t>();
  if (j.contains("mediaType") && j["mediaType"].is_string()) b.media_type = j["mediaType"].get<std::string>();
  if (j.contains("annotations") && j["annotations"].is_object())
    for (const auto& [k, v] : j["annotations"].items())
      if (v.is_string()) b.annotations[k] = v.get<std::string>();
  return b;
}

// "sha256:<hex>" of the open file `fd` from its start; *size: its bytes.
Result<std::string> Sha256File(int fd, const std::string& path, uint64_t* size) {
  Sha256 ctx;
  // Sized for the blob: a 1 MiB buffer zero-filled for each small JSON
  // blob was most of the time an import spent on them.
  struct stat st;
  if (::fstat(fd, &st) != 0) return FailErrno(path, errno);
  std::vector<char> buf(size_t(std::clamp<int64_t>(st.st_size, 4096, 1 << 20)));
  *size = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf.data(), buf.size(), off_t(*size));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno(path, errno);
    if (n == 0) break;
    ctx.Update(buf.data(), size_t(n));
    *size += uint64_t(n);
  }
  return ctx.OciDigest();
}

// "sha256:<hex>" of the open file `fd` decompressed (gzip, xz, zstd, or as
// it is), read from its start: a compressed layer's diff_id.
Result<std::string> Sha256Uncompressed(int fd, const std::string& path) {
  AE_ASSIGN(const ArchiveLib* lib, LoadArchiveLib());
  const ArchiveLib& A = *lib;
  if (::lseek(fd, 0, SEEK_SET) != 0) return FailErrno(path, errno);
  std::unique_ptr<::archive, decltype(A.archive_read_free)> in(A.archive_read_new(), A.archive_read_free);
  A.archive_read_support_filter_gzip(in.get());
  A.archive_read_support_filter_xz(in.get());
  A.archive_read_support_filter_zstd(in.get());
  A.archive_read_support_format_raw(in.get());
  auto bad = [&] {
    const char* why = A.archive_error_string(in.get());
    return Fail(ErrorCode::kInvalid, path + ": " + (why ? why : "cannot be read") + "; refusing the image");
  };
  archive_entry* e = nullptr;
  if (A.archive_read_open_fd(in.get(), fd, 1 << 16) != ARCHIVE_OK ||
      A.archive_read_next_header(in.get(), &e) != ARCHIVE_OK)
    return bad();
  Sha256 ctx;
  for (;;) {
    const void* block;
    size_t len;
    la_int64_t offset;
    int r = A.archive_read_data_block(in.get(), &block, &len, &offset);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK) return bad();
    ctx.Update(block, len);
  }
  return ctx.OciDigest();
}

// The blob of descriptor `b`, open, once its size and SHA-256 match it:
// what is read from here on is what was verified.
Result<UniqueFd> OpenVerifiedBlob(const std::string& dir, const OciBlob& b) {
  AE_ASSIGN(std::string rel, BlobPath(dir, b.digest));
  const std::string path = dir + "/" + rel;
  auto fd = OpenInLayout(dir, rel);
  if (!fd && fd.error().errno_value == ENOENT)
    return Fail(ErrorCode::kInvalid, path + ": blob missing; refusing the image");
  if (!fd) return Unexpected<Error>(fd.error());
  uint64_t size = 0;
  AE_ASSIGN(std::string digest, Sha256File(fd->get(), path, &size));
  if (size != b.size)
    return Fail(ErrorCode::kInvalid, path + ": " + std::to_string(size) + " bytes, the manifest says " +
                                         std::to_string(b.size) + "; refusing the image");
  if (digest != b.digest)
    return Fail(ErrorCode::kInvalid, path + ": content hashes to " + digest + ", not " + b.digest +
                                         "; refusing the image");
  return std::move(*fd);
}

// The descriptor's blob, read as JSON after checking its size and digest.
Result<json> ReadJsonBlob(const std::string& dir, const OciBlob& b) {
  if (b.size > kMaxJson) return Fail(ErrorCode::kInvalid, dir + ": " + b.digest + " is too large for a manifest");
  AE_ASSIGN(UniqueFd fd, OpenVerifiedBlob(dir, b));
  AE_ASSIGN(std::string rel, BlobPath(dir, b.digest));
  return ReadJson(dir, rel, kMaxJson, std::move(fd));
}

// j[key] when j is an object whose key holds a string, else "" (json's
// value() throws for a key of another type).
std::string StringAt(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

bool IsIndex(const std::string& t) {
  return t == "application/vnd.oci.image.index.v1+json" ||
         t == "application/vnd.docker.distribution.manifest.list.v2+json";
}

// From an index's manifests: the one tagged `tag`, else the only one.
// Nested indexes (multi-platform images) resolve to this machine's
// linux platform.
Result<OciBlob> PickManifest(const std::string& dir, const std::string& where, const json& index,
                             const std::string& tag, int depth) {
  if (!index.contains("manifests") || !index["manifests"].is_array())
    return Fail(ErrorCode::kInvalid, where + ": no manifests list");
  std::vector<OciBlob> all;
  std::vector<std::string> tags;
  std::optional<OciBlob> chosen;
  for (const json& m : index["manifests"]) {
    AE_ASSIGN(OciBlob b, Descriptor(where, m));
    std::string name = b.annotations.count("org.opencontainers.image.ref.name")
                           ? b.annotations["org.opencontainers.image.ref.name"]
                           : "";
    if (!name.empty()) tags.push_back(name);
    if (depth == 0 && !tag.empty() && name == tag) chosen = b;
    if (depth > 0 && m.contains("platform") && StringAt(m["platform"], "os") == "linux" &&
        StringAt(m["platform"], "architecture") == OciArchitecture() && !chosen)
      chosen = b;
    all.push_back(std::move(b));
  }
  if (!chosen && depth == 0 && !tag.empty()) {
    std::string list;
    for (const auto& t : tags) list += (list.empty() ? "" : ", ") + t;
    return Fail(ErrorCode::kNotFound, dir + ": no image tagged '" + tag + "' (tags: " +
                                          (list.empty() ? "none" : list) + ")");
  }
  if (!chosen && all.size() == 1) chosen = all[0];
  if (!chosen) {
    std::string list;
    for (const auto& t : tags) list += (list.empty() ? "" : ", ") + t;
    return Fail(ErrorCode::kInvalid, where + ": " + std::to_string(all.size()) +
                                         " images; name one as " + dir + ":TAG (tags: " + list + ")");
  }
  if (IsIndex(chosen->media_type)) {
    // A layout's index names images or one image index (a multi-platform
    // image); deeper nesting is no image anyone writes, and reading it
    // would follow any chain an input makes.
    if (depth > 0)
      return Fail(ErrorCode::kInvalid, where + ": names " + chosen->digest +
                                           ", an image index nested in an image index (at most one level is read); "
                                           "refusing the image");
    AE_ASSIGN(json nested, ReadJsonBlob(dir, *chosen));
    return PickManifest(dir, dir + " " + chosen->digest, nested, tag, depth + 1);
  }
  return *chosen;
}

bool IsLayerType(const std::string& t) {
  return t.starts_with("application/vnd.oci.image.layer.v1.tar") ||
         t.starts_with("application/vnd.oci.image.layer.nondistributable.v1.tar") ||
         t == "application/vnd.docker.image.rootfs.diff.tar.gzip" ||
         t == "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";
}

}  // namespace

Result<OciImage> OpenOciImage(const std::string& spec) {
  OciImage img;
  img.dir = spec;
  // "DIR:TAG" unless DIR itself is a directory whose name has a colon.
  if (size_t colon = spec.rfind(':'); colon != std::string::npos && !IsDir(spec) &&
                                      spec.find('/', colon) == std::string::npos) {
    img.dir = spec.substr(0, colon);
    img.tag = spec.substr(colon + 1);
  }
  while (img.dir.size() > 1 && img.dir.back() == '/') img.dir.pop_back();
  AE_ASSIGN(json layout, ReadJson(img.dir, "oci-layout", 4096));
  if (StringAt(layout, "imageLayoutVersion") != "1.0.0")
    return Fail(ErrorCode::kUnsupported, img.dir + "/oci-layout: imageLayoutVersion is not 1.0.0");
  AE_ASSIGN(json index, ReadJson(img.dir, "index.json", kMaxJson));
  AE_ASSIGN(img.manifest, PickManifest(img.dir, img.dir + "/index.json", index, img.tag, 0));
  AE_ASSIGN(json man, ReadJsonBlob(img.dir, img.manifest));
  std::string what = img.dir + " " + img.manifest.digest;
  if (!man.contains("config") || !man.contains("layers") || !man["layers"].is_array())
    return Fail(ErrorCode::kInvalid, what + ": not an image manifest (no config or layers)");
  AE_ASSIGN(img.config, Descriptor(what, man["config"]));
  for (const json& l : man["layers"]) {
    AE_ASSIGN(OciBlob b, Descriptor(what, l));
    if (!IsLayerType(b.media_type))
      return Fail(ErrorCode::kUnsupported, what + ": layer " + b.digest + " has media type '" + b.media_type +
                                               "', not a tar layer");
    AE_TRY(BlobPath(img.dir, b.digest));
    img.layers.push_back(std::move(b));
  }
  return img;
}

namespace {

// The config's rootfs.diff_ids name the layers' tars, uncompressed, in
// order. A layer whose digest is its diff_id is plain; any other is read
// through its decompression and hashed: one more pass over a compressed
// layer, before anything is applied. `layers`: the layers' blobs, open.
Result<void> CheckDiffIds(const OciImage& image, const json& config, const std::vector<UniqueFd>& layers) {
  std::string what = image.dir + " " + image.config.digest;
  if (!config.contains("rootfs") || !config["rootfs"].is_object() || !config["rootfs"].contains("diff_ids") ||
      !config["rootfs"]["diff_ids"].is_array())
    return Fail(ErrorCode::kInvalid, what + ": no rootfs.diff_ids (not an image config); refusing the image");
  const json& ids = config["rootfs"]["diff_ids"];
  size_t n = image.layers.size();
  if (ids.size() != n)
    return Fail(ErrorCode::kInvalid, what + ": rootfs.diff_ids has " + std::to_string(ids.size()) + " entries for " +
                                         std::to_string(n) + " layers; refusing the image (damaged)");
  for (size_t i = 0; i < n; ++i) {
    std::string layer = "layer " + std::to_string(i + 1) + " of " + std::to_string(n);
    if (!ids[i].is_string())
      return Fail(ErrorCode::kInvalid, what + ": the diff_id of " + layer + " is not a string; refusing the image");
    const std::string& want = ids[i].get_ref<const std::string&>();
    if (want == image.layers[i].digest) continue;
    AE_ASSIGN(std::string rel, BlobPath(image.dir, image.layers[i].digest));
    std::string path = image.dir + "/" + rel;
    AE_ASSIGN(std::string got, Sha256Uncompressed(layers[i].get(), path));
    if (got != want)
      return Fail(ErrorCode::kInvalid, path + ": " + layer + " is a tar that hashes to " + got +
                                           ", but the config's diff_id of layer " + std::to_string(i + 1) + " is " +
                                           want + "; refusing the image (damaged)");
  }
  return {};
}

}  // namespace

Result<void> UnpackOciImage(const OciImage& image, const std::string& dest,
                            const std::function<void(const std::string&)>& warn, UnprivilegedDevices devices,
                            const std::function<Result<void>(size_t layer)>& after_layer) {
  AE_ASSIGN(json config, ReadJsonBlob(image.dir, image.config));
  std::vector<UniqueFd> layers;
  for (const OciBlob& l : image.layers) {
    AE_ASSIGN(UniqueFd fd, OpenVerifiedBlob(image.dir, l));
    layers.push_back(std::move(fd));
  }
  AE_TRY(CheckDiffIds(image, config, layers));
  uint64_t sparse_holes = 0;  // the image's layers share the limit of one archive
  for (size_t i = 0; i < image.layers.size(); ++i) {
    AE_ASSIGN(std::string rel, BlobPath(image.dir, image.layers[i].digest));
    if (::lseek(layers[i].get(), 0, SEEK_SET) != 0) return FailErrno(image.dir + "/" + rel, errno);
    AE_TRY(ApplyLayer(layers[i].get(), image.dir + "/" + rel, dest, warn, devices, &sparse_holes));
    if (after_layer) AE_TRY(after_layer(i));
  }
  return {};
}

std::optional<std::vector<OciNode>> OciHistory(const OciImage& image) {
  std::vector<OciNode> nodes;
  for (const OciBlob& l : image.layers) {
    auto get = [&](const char* key) -> const std::string* {
      auto it = l.annotations.find(key);
      return it == l.annotations.end() ? nullptr : &it->second;
    };
    const std::string *id = get("dev.agentenv.node"), *time = get("dev.agentenv.time"), *root = get("dev.agentenv.root");
    if (!id || !time || !root) return std::nullopt;
    OciNode n;
    n.id = *id;
    if (const std::string* p = get("dev.agentenv.parent")) n.parent = *p;
    if (const std::string* m = get("dev.agentenv.message")) n.message = *m;
    if (const std::string* lb = get("dev.agentenv.label")) n.label = *lb;
    if (const std::string* pv = get("dev.agentenv.provenance")) {
      // Carried, not trusted: one that does not decode is left out.
      if (auto bytes = Base64Decode(*pv)) {
        auto p = snap::DecodeProvenance(std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()),
                                        "image annotation");
        if (p) n.provenance = std::move(*p);
      }
    }
    char* end = nullptr;
    n.time_ns = std::strtoll(time->c_str(), &end, 10);
    if (*end || n.time_ns <= 0) return std::nullopt;
    unsigned mode = 0, uid = 0, gid = 0;
    long long mtime = 0;
    if (std::sscanf(root->c_str(), "%o %u %u %lld", &mode, &uid, &gid, &mtime) != 4) return std::nullopt;
    n.root.mode = mode & 07777, n.root.uid = uid, n.root.gid = gid, n.root.mtime_ns = mtime;
    // A chain: each layer completes the child of the node below.
    if (!nodes.empty() && n.parent != nodes.back().id) return std::nullopt;
    nodes.push_back(std::move(n));
  }
  if (nodes.empty()) return std::nullopt;
  return nodes;
}

Result<void> SetRootMeta(const std::string& dir, const snap::Meta& m) {
  if (::geteuid() == 0 && ::lchown(dir.c_str(), m.uid, m.gid) != 0) return FailErrno(dir, errno);
  if (::chmod(dir.c_str(), m.mode & 07777) != 0) return FailErrno(dir, errno);
  struct timespec ts[2] = {{0, UTIME_OMIT}, {time_t(m.mtime_ns / 1000000000), long(m.mtime_ns % 1000000000)}};
  if (ts[1].tv_nsec < 0) ts[1].tv_sec -= 1, ts[1].tv_nsec += 1000000000;  // before 1970
  if (::utimensat(AT_FDCWD, dir.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(dir, errno);
  return {};
}

}  // namespace agentenv::archive

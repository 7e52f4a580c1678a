// Push and pull: the OCI distribution API's blob and manifest calls, from
// and to an OCI image layout (registry/registry.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/durable.h"
#include "common/platform.h"
#include "common/read_all.h"
#include "common/sha256.h"
#include "common/unique_fd.h"
#include "common/write_all.h"
#include "registry/registry.h"
#include "registry/session.h"

namespace agentenv::registry {
namespace {

using json = nlohmann::json;

constexpr const char* kAccept =
    "Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json";

bool ValidDigest(const std::string& d) {
  if (d.size() != 71 || d.compare(0, 7, "sha256:") != 0) return false;
  for (size_t i = 7; i < d.size(); ++i)
    if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f'))) return false;
  return true;
}

Result<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return FailErrno(path, errno);
  return ReadUpTo(fd.get(), path, std::numeric_limits<size_t>::max());
}

std::string MediaType(const std::string& content_type) {
  std::string t = content_type.substr(0, content_type.find(';'));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  return t;
}

Result<void> UploadBlob(Session& s, const std::string& file, const std::string& digest, uint64_t size,
                        const std::function<void(uint64_t, uint64_t)>& progress) {
  Request start;
  start.method = "POST";
  start.url = s.Url("blobs/uploads/");
  AE_ASSIGN(Response r, s.Send(start));
  if (r.status != 202) return Unexpected<Error>(s.StatusError("starting the upload of " + digest, r));
  std::string location = r.header("location");
  if (location.empty()) return Fail(ErrorCode::kIo, "the upload of " + digest + ": no Location in the registry's answer");
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return FailErrno(file, errno);
  Request put;
  put.method = "PUT";
  put.url = location + (location.find('?') == std::string::npos ? "?" : "&") + "digest=" + digest;
  put.headers = {"Content-Type: application/octet-stream"};
  put.upload_fd = fd.get();
  put.upload_size = size;
  put.progress = progress;
  AE_ASSIGN(r, s.Send(put));
  if (r.status != 201) return Unexpected<Error>(s.StatusError("uploading " + digest, r));
  return {};
}

// GETs blob `digest` into blobs/sha256/ of `layout`, hashing as it is
// written; a size or digest mismatch leaves nothing.
Result<uint64_t> DownloadBlob(Session& s, const std::string& layout, const std::string& digest, uint64_t size,
                              const std::function<void(uint64_t, uint64_t)>& progress) {
  if (!ValidDigest(digest))
    return Fail(ErrorCode::kInvalid, "digest '" + digest + "' is not sha256:<64 hex digits>; refusing the image");
  std::string path = layout + "/blobs/sha256/" + digest.substr(7), tmp = path + ".partial";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return FailErrno(tmp, errno);
  struct Unlink {
    std::string path;
    ~Unlink() { ::unlink(path.c_str()); }
  } unlink_tmp{tmp};
  auto hash = std::make_unique<Sha256>();
  uint64_t got = 0;
  Request get;
  get.url = s.Url("blobs/" + digest);
  get.progress = progress;
  get.restart = [&] {
    hash = std::make_unique<Sha256>();
    got = 0;
    (void)::ftruncate(fd.get(), 0);
    ::lseek(fd.get(), 0, SEEK_SET);
  };
  get.sink = [&](const char* p, size_t n) -> Result<void> {
    got += n;
    if (got > size) return Fail(ErrorCode::kInvalid, digest + ": more than the " + std::to_string(size) +
                                                         " bytes the manifest says; refusing the image");
    hash->Update(p, n);
    return WriteAll(fd.get(), p, n, tmp);
  };
  AE_ASSIGN(Response r, s.Send(get));
  if (r.status != 200) return Unexpected<Error>(s.StatusError("blob " + digest, r));
  std::string actual = hash->OciDigest();
  if (got != size || actual != digest)
    return Fail(ErrorCode::kInvalid, "blob " + digest + ": received " + std::to_string(got) + " bytes hashing to " +
                                         actual + "; refusing the image");
  if (::fsync(fd.get()) != 0) return FailErrno(tmp, errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return FailErrno(path, errno);
  return got;
}

// GETs a manifest or index; checks it against `digest` when given.
Result<std::pair<std::string, std::string>> GetManifest(Session& s, const Reference& image, const std::string& ref,
                                                        const std::string& digest) {
  Request get;
  get.url = s.Url("manifests/" + ref);
  get.headers = {kAccept};
  AE_ASSIGN(Response r, s.Send(get));
  if (r.status != 200) return Unexpected<Error>(s.StatusError("manifest of " + image.String(), r));
  if (!digest.empty() && Sha256::OciDigestOf(r.body) != digest)
    return Fail(ErrorCode::kInvalid, "manifest " + ref + ": content hashes to " + Sha256::OciDigestOf(r.body) + ", not " +
                                         digest + "; refusing the image");
  return std::make_pair(MediaType(r.header("content-type")), r.body);
}

}  // namespace

std::string Reference::String() const {
  return host + "/" + repository + (tag.starts_with("sha256:") ? "@" : ":") + tag;
}

Result<Reference> ParseReference(const std::string& text) {
  Reference r;
  size_t slash = text.find('/');
  if (slash == std::string::npos)
    return Fail(ErrorCode::kInvalid, "'" + text + "': name the registry: HOST[:PORT]/REPOSITORY[:TAG]");
  r.host = text.substr(0, slash);
  if (r.host.find('.') == std::string::npos && r.host.find(':') == std::string::npos && r.host != "localhost")
    return Fail(ErrorCode::kInvalid, "'" + text + "': '" + r.host +
                                         "' is not a registry host (HOST[:PORT]/REPOSITORY[:TAG], e.g. localhost:5000/env:v1)");
  std::string rest = text.substr(slash + 1);
  if (size_t at = rest.find('@'); at != std::string::npos) {
    r.repository = rest.substr(0, at);
    r.tag = rest.substr(at + 1);
    if (!ValidDigest(r.tag)) return Fail(ErrorCode::kInvalid, "'" + text + "': the digest is not sha256:<64 hex digits>");
  } else if (size_t colon = rest.rfind(':'); colon != std::string::npos) {
    r.repository = rest.substr(0, colon);
    r.tag = rest.substr(colon + 1);
  } else {
    r.repository = rest;
    r.tag = "latest";
  }
  bool ok = !r.repository.empty() && !r.tag.empty() && r.tag.size() <= 128;
  for (char c : r.repository) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || std::strchr("._-/", c));
  if (!r.tag.starts_with("sha256:"))
    for (char c : r.tag) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || std::strchr("._-", c));
  if (!ok)
    return Fail(ErrorCode::kInvalid, "'" + text + "': a repository is lowercase letters, digits and ._-/; a tag "
                                                  "letters, digits and ._- (at most 128)");
  return r;
}

Result<TransferStats> Push(const std::string& layout, const std::string& manifest_digest, const Reference& ref,
                           const Options& opt) {
  if (!ValidDigest(manifest_digest)) return Fail(ErrorCode::kInvalid, "'" + manifest_digest + "' is not a digest");
  AE_ASSIGN(auto s, Session::Open(ref, opt));
  AE_ASSIGN(std::string manifest, ReadFile(layout + "/blobs/sha256/" + manifest_digest.substr(7)));
  json m = json::parse(manifest, nullptr, false);
  if (m.is_discarded() || !m.is_object() || !m.contains("layers") || !m.contains("config"))
    return Fail(ErrorCode::kInvalid, layout + ": " + manifest_digest + " is not an image manifest");
  std::vector<std::pair<std::string, json>> blobs;
  for (const json& l : m["layers"]) blobs.emplace_back("layer", l);
  blobs.emplace_back("config", m["config"]);
  TransferStats st;
  for (size_t i = 0; i < blobs.size(); ++i) {
    const auto& [what, d] = blobs[i];
    std::string digest = d.value("digest", "");
    uint64_t size = d.value("size", uint64_t(0));
    if (!ValidDigest(digest)) return Fail(ErrorCode::kInvalid, layout + ": a descriptor with digest '" + digest + "'");
    Progress p{what, digest, i + 1, blobs.size(), 0, size};
    Request head;
    head.method = "HEAD";
    head.url = s->Url("blobs/" + digest);
    AE_ASSIGN(Response r, s->Send(head));
    ++st.blobs;
    if (r.status == 200) {
      ++st.blobs_skipped;
      p.done = size, p.skipped = p.finished = true;
      if (opt.progress) opt.progress(p);
      continue;
    }
    if (r.status != 404) return Unexpected<Error>(s->StatusError("checking " + digest, r));
    auto report = [&](uint64_t done, uint64_t) {
      p.done = done;
      if (opt.progress) opt.progress(p);
    };
    AE_TRY(UploadBlob(*s, layout + "/blobs/sha256/" + digest.substr(7), digest, size, report));
    ++st.blobs_sent;
    st.bytes_sent += size;
    p.done = size, p.finished = true;
    if (opt.progress) opt.progress(p);
  }
  Request put;
  put.method = "PUT";
  put.url = s->Url("manifests/" + ref.tag);
  put.headers = {"Content-Type: " + m.value("mediaType", std::string("application/vnd.oci.image.manifest.v1+json"))};
  put.body = manifest;
  AE_ASSIGN(Response r, s->Send(put));
  if (r.status != 201) return Unexpected<Error>(s->StatusError("manifest " + ref.String(), r));
  st.bytes_sent += manifest.size();
  st.manifest = manifest_digest;
  if (opt.progress) opt.progress(Progress{"manifest", manifest_digest, 0, 0, manifest.size(), manifest.size(), false, true});
  return st;
}

Result<bool> HasBlob(const Reference& ref, const Options& opt, const std::string& digest) {
  AE_ASSIGN(auto s, Session::Open(ref, opt));
  Request head;
  head.method = "HEAD";
  head.url = s->Url("blobs/" + digest);
  AE_ASSIGN(Response r, s->Send(head));
  if (r.status == 200) return true;
  if (r.status == 404) return false;
  return Unexpected<Error>(s->StatusError("checking " + digest, r));
}

Result<TransferStats> Pull(const Reference& ref, const std::string& layout, const std::string& tag,
                           const Options& opt) {
  AE_ASSIGN(auto s, Session::Open(ref, opt));
  AE_ASSIGN(auto got, GetManifest(*s, ref, ref.tag, ref.tag.starts_with("sha256:") ? ref.tag : ""));
  auto [type, body] = got;
  if (type == "application/vnd.oci.image.index.v1+json" ||
      type == "application/vnd.docker.distribution.manifest.list.v2+json") {
    json index = json::parse(body, nullptr, false);
    std::string chosen;
    if (index.is_object() && index.contains("manifests") && index["manifests"].is_array())
      for (const json& m : index["manifests"])
        if (m.is_object() && m.contains("platform") && m["platform"].value("os", "") == "linux" &&
            m["platform"].value("architecture", "") == OciArchitecture() && chosen.empty())
          chosen = m.value("digest", "");
    if (chosen.empty())
      return Fail(ErrorCode::kNotFound, ref.String() + ": no image for linux/" + OciArchitecture() + " in its index");
    AE_ASSIGN(got, GetManifest(*s, ref, chosen, chosen));
    std::tie(type, body) = got;
  }
  json m = json::parse(body, nullptr, false);
  if (m.is_discarded() || !m.is_object() || !m.contains("layers") || !m["layers"].is_array() || !m.contains("config"))
    return Fail(ErrorCode::kInvalid, ref.String() + ": the manifest is not an image manifest (" + type + ")");
  if (::mkdir(layout.c_str(), 0755) != 0) return FailErrno(layout, errno);
  for (const char* d : {"/blobs", "/blobs/sha256"})
    if (::mkdir((layout + d).c_str(), 0755) != 0) return FailErrno(layout + d, errno);
  std::vector<std::pair<std::string, json>> blobs;
  blobs.emplace_back("config", m["config"]);
  for (const json& l : m["layers"]) blobs.emplace_back("layer", l);
  TransferStats st;
  for (size_t i = 0; i < blobs.size(); ++i) {
    const auto& [what, d] = blobs[i];
    if (!d.is_object()) return Fail(ErrorCode::kInvalid, ref.String() + ": a descriptor that is not an object");
    std::string digest = d.value("digest", "");
    uint64_t size = d.value("size", uint64_t(0));
    Progress p{what, digest, i + 1, blobs.size(), 0, size};
    struct stat sb;
    if (ValidDigest(digest) && ::stat((layout + "/blobs/sha256/" + digest.substr(7)).c_str(), &sb) == 0) continue;
    AE_ASSIGN(uint64_t n, DownloadBlob(*s, layout, digest, size, [&](uint64_t done, uint64_t) {
                p.done = done;
                if (opt.progress) opt.progress(p);
              }));
    ++st.blobs;
    st.bytes_received += n;
    p.done = size, p.finished = true;
    if (opt.progress) opt.progress(p);
  }
  std::string digest = Sha256::OciDigestOf(body);
  AE_TRY(WriteFileDurably(layout + "/blobs/sha256", digest.substr(7), body));  // fsyncs the downloads' renames too
  if (type.empty()) type = m.value("mediaType", std::string("application/vnd.oci.image.manifest.v1+json"));
  json index = {{"schemaVersion", 2},
                {"manifests",
                 {{{"mediaType", type},
                   {"digest", digest},
                   {"size", body.size()},
                   {"annotations", {{"org.opencontainers.image.ref.name", tag}}}}}}};
  AE_TRY(WriteFileDurably(layout, "oci-layout", R"({"imageLayoutVersion":"1.0.0"})"));
  AE_TRY(WriteFileDurably(layout, "index.json", index.dump()));
  st.manifest = digest;
  return st;
}

}  // namespace agentenv::registry

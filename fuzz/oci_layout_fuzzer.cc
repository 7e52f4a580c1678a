// An OCI image layout (archive/oci_image.cc): index.json, manifests,
// configs and layers, read by OpenOciImage and applied by UnpackOciImage
// as `import --oci` and `init --from-oci` read and apply them (init's
// history annotations included). The input is a layout in a small text
// form, since a fuzzer cannot compute the digests that make blobs findable:
//
//   TAG \n%%\n oci-layout \n%%\n index.json \n%%\n blob 0 \n%%\n blob 1 ...
//
// and in every part "@D<n>" becomes "sha256:<digest of blob n>" and "@S<n>"
// the size of blob n, after substitution in blob n itself, so that a blob
// may name only blobs after it (a manifest its config and layers). A blob
// that starts with "@LINK\n" is the rest of it, written outside the layout
// with a symlink to it as the blob: an image that uses it must be refused.
// fuzz/make_seeds.py writes real layouts in this form. Nothing may change
// outside the destination tree, and an image that unpacks leaves no
// whiteout behind.
#include <openssl/evp.h>
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "archive/oci.h"
#include "fuzz/fuzz_env.h"

namespace {

using namespace agentenv;

std::string layout, dest, outside, outside_before, linked;

std::string Sha256(const std::string& s) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(s.data(), s.size(), d, &n, EVP_sha256(), nullptr);
  static const char* k = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < n; ++i) hex += k[d[i] >> 4], hex += k[d[i] & 15];
  return hex;
}

std::vector<std::string> Split(std::string_view in) {
  static constexpr std::string_view kSep = "\n%%\n";
  std::vector<std::string> parts;
  for (;;) {
    size_t at = in.find(kSep);
    parts.emplace_back(in.substr(0, at));
    if (at == std::string_view::npos) return parts;
    in.remove_prefix(at + kSep.size());
  }
}

// `s` with @D<n> and @S<n> of blobs[n] (already final) replaced.
std::string Substitute(const std::string& s, const std::vector<std::string>& blobs, size_t first) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '@' && i + 2 < s.size() && (s[i + 1] == 'D' || s[i + 1] == 'S') && std::isdigit(uint8_t(s[i + 2]))) {
      size_t j = i + 2, n = 0;
      while (j < s.size() && std::isdigit(uint8_t(s[j])) && n < 1000) n = n * 10 + size_t(s[j++] - '0');
      if (n >= first && n < blobs.size()) {
        out += s[i + 1] == 'D' ? "sha256:" + Sha256(blobs[n]) : std::to_string(blobs[n].size());
        i = j - 1;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string Describe(const std::string& dir) {
  std::string out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0)
      out += it->path().string() + " " + std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + "\n";
  }
  return out;
}

bool LeftWhiteout(const std::string& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename().string().rfind(".wh.", 0) == 0) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::ConfineWrites(*argc, *argv);
  layout = fuzz::WorkDir() + "/layout";
  dest = fuzz::WorkDir() + "/tree";
  outside = fuzz::WorkDir() + "/outside";
  linked = fuzz::WorkDir() + "/linked";
  fuzz::MakeDir(outside);
  fuzz::WriteFile(outside + "/keep", "keep\n");
  outside_before = Describe(outside);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> parts = Split(std::string_view(reinterpret_cast<const char*>(data), size));
  if (parts.size() < 3 || parts[0].find('/') != std::string::npos) return 0;
  std::vector<std::string> blobs(parts.begin() + 3, parts.end());
  std::set<std::string> links;  // digests of the blobs that are symlinks
  std::vector<bool> is_link(blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i)
    if (blobs[i].starts_with("@LINK\n")) is_link[i] = true, blobs[i].erase(0, 6);
  for (size_t i = blobs.size(); i-- > 0;) blobs[i] = Substitute(blobs[i], blobs, i + 1);
  fuzz::MakeDir(layout + "/blobs/sha256");
  fuzz::MakeDir(linked);
  fuzz::WriteFile(layout + "/oci-layout", Substitute(parts[1], blobs, 0));
  fuzz::WriteFile(layout + "/index.json", Substitute(parts[2], blobs, 0));
  for (size_t i = 0; i < blobs.size(); ++i) {
    std::string hex = Sha256(blobs[i]), path = layout + "/blobs/sha256/" + hex;
    if (!is_link[i]) {
      fuzz::WriteFile(path, blobs[i]);
      continue;
    }
    fuzz::WriteFile(linked + "/" + hex, blobs[i]);
    std::error_code ec;
    std::filesystem::remove(path, ec);  // a plain blob of the same bytes
    std::filesystem::create_symlink(linked + "/" + hex, path, ec);
    if (!ec) links.insert("sha256:" + hex);
  }
  fuzz::MakeDir(dest);
  auto image = archive::OpenOciImage(parts[0].empty() ? layout : layout + ":" + parts[0]);
  // What the layout holds is the input's fault, never the system's.
  if (!image) FUZZ_CHECK(image.error().code != ErrorCode::kIo, "an I/O error for a layout: " + image.error().message);
  if (image) {
    // As init --from-oci: an image agentenv exported gives each layer's
    // node its root directory's metadata.
    auto history = archive::OciHistory(*image);
    auto r = archive::UnpackOciImage(*image, dest, [](const std::string&) {}, archive::UnprivilegedDevices::kRefuse,
                                     [&](size_t i) -> Result<void> {
                                       if (history) AE_TRY(archive::SetRootMeta(dest, (*history)[i].root));
                                       return {};
                                     });
    if (r) FUZZ_CHECK(!LeftWhiteout(dest), "an unpacked image left a whiteout in the tree");
    if (r) {
      FUZZ_CHECK(!links.count(image->manifest.digest) && !links.count(image->config.digest),
                 "an image was read through a symlinked blob");
      for (const auto& l : image->layers) FUZZ_CHECK(!links.count(l.digest), "a layer was read through a symlinked blob");
    }
    FUZZ_CHECK(Describe(outside) == outside_before, "the image changed a directory outside the tree");
  }
  fuzz::RemoveTree(dest);
  fuzz::RemoveTree(layout);
  fuzz::RemoveTree(linked);
  return 0;
}

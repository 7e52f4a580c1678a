// One image layer (archive/tarball.cc ApplyLayer): the input is the layer
// (tar, plain or compressed), applied as `import --oci` applies it onto the
// tree the layers below made. That lower tree, made afresh for each input,
// has directories, files, a hardlink, a symlink to a directory inside and
// one to a directory outside the tree, which holds a file: whiteouts,
// opaque directories and replacements must never reach outside (nothing
// there may change), and a layer that applies leaves no whiteout behind.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "archive/tarball.h"
#include "fuzz/fuzz_env.h"

namespace {

using namespace agentenv;

std::string dest, layer, outside;

void MakeLower() {
  fuzz::MakeDir(dest + "/etc/conf.d");
  fuzz::MakeDir(dest + "/usr/bin");
  fuzz::MakeDir(dest + "/d/e");
  fuzz::WriteFile(dest + "/etc/passwd", "root:x:0:0::/root:/bin/sh\n");
  fuzz::WriteFile(dest + "/etc/conf.d/a", "a\n");
  fuzz::WriteFile(dest + "/usr/bin/tool", "tool\n");
  fuzz::WriteFile(dest + "/d/e/g", "g\n");
  fuzz::WriteFile(dest + "/f", "f\n");
  ::link((dest + "/f").c_str(), (dest + "/hard").c_str());
  ::symlink("etc", (dest + "/link").c_str());
  ::symlink(outside.c_str(), (dest + "/abs").c_str());
  ::mkfifo((dest + "/fifo").c_str(), 0644);
}

// Everything under `dir` with type, size and mode: what must not change.
std::string Describe(const std::string& dir) {
  std::string out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    out += it->path().string() + " " + std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
           std::to_string(st.st_mtim.tv_nsec) + "\n";
  }
  return out;
}

std::string outside_before, work_before;

// The whiteout names left in the tree (there must be none).
std::string Whiteouts(const std::string& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename().string().rfind(".wh.", 0) == 0) return it->path().string();
  return "";
}

std::string TopLevel(const std::string& dir) {
  std::string out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out += e.path().filename().string() + "\n";
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::ConfineWrites(*argc, *argv);
  dest = fuzz::WorkDir() + "/tree";
  layer = fuzz::WorkDir() + "/layer.tar";
  outside = fuzz::WorkDir() + "/outside";
  fuzz::MakeDir(outside + "/sub");
  fuzz::WriteFile(outside + "/keep", "keep\n");
  fuzz::WriteFile(outside + "/sub/x", "x\n");
  outside_before = Describe(outside);
  fuzz::WriteFile(layer, "");
  fuzz::MakeDir(dest);
  work_before = TopLevel(fuzz::WorkDir());
  fuzz::RemoveTree(dest);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::WriteFile(layer, std::string_view(reinterpret_cast<const char*>(data), size));
  fuzz::MakeDir(dest);
  MakeLower();
  auto r = archive::ApplyLayer(layer, dest, [](const std::string&) {}, archive::UnprivilegedDevices::kRefuse);
  FUZZ_CHECK(Describe(outside) == outside_before, "the layer changed a directory outside the tree");
  FUZZ_CHECK(TopLevel(fuzz::WorkDir()) == work_before, "the layer made something beside the tree");
  if (r) {
    std::string wh = Whiteouts(dest);
    FUZZ_CHECK(wh.empty(), "an applied layer left a whiteout in the tree: " + wh);
  } else {
    FUZZ_CHECK(r.error().code == ErrorCode::kInvalid || r.error().code == ErrorCode::kIo,
               "a layer refused with an unexpected code: " + r.error().message);
  }
  fuzz::RemoveTree(dest);
  return 0;
}

// A main for the fuzz targets in a normal build: runs LLVMFuzzerTestOneInput
// once on every file of the directories (or files) given, in name order, as
// libFuzzer would on a crash input. ctest runs it on fuzz/corpus/<target>
// and fuzz/regressions/<target>, so every input that once crashed a
// decoder is replayed by the normal suite. A missing directory is skipped
// (regressions/<target> exists only once something was found); finding no
// input at all is a failure (a mistyped path would otherwise pass).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    std::filesystem::path p(argv[i]);
    if (std::filesystem::is_regular_file(p, ec)) {
      inputs.push_back(p);
      continue;
    }
    if (!std::filesystem::is_directory(p, ec)) continue;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(p, ec))
      if (e.is_regular_file(ec)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    inputs.insert(inputs.end(), files.begin(), files.end());
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "no input files in the paths given\n");
    return 1;
  }
  for (const auto& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "%s (%zu bytes)\n", p.c_str(), data.size());
    LLVMFuzzerTestOneInput(data.data(), data.size());
  }
  std::fprintf(stderr, "%zu inputs replayed\n", inputs.size());
  return 0;
}

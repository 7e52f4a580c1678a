// Small helpers shared by the tests: temporary directories on real
// filesystems, deterministic random bytes, privilege checks, skipping.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace agentenv::test {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/agentenv-test-XXXXXX";
    char* p = mkdtemp(tmpl.data());
    if (!p) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    // Tests make 0000 directories; give permission back before removing.
    for (auto it = std::filesystem::recursive_directory_iterator(
             path_, std::filesystem::directory_options::skip_permission_denied, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0755);
    }
    ::chmod(path_.c_str(), 0755);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::string& s) const { return path_ / s; }

 private:
  std::filesystem::path path_;
};

inline std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x = rng();
    for (int k = 0; k < 8; ++k) v[i + k] = uint8_t(x >> (8 * k));
  }
  for (; i < n; ++i) v[i] = uint8_t(rng());
  return v;
}

inline bool IsRoot() { return ::geteuid() == 0; }

// What Skip() throws; only the translator in catch_main.cc catches it.
// Not a std::exception, so `catch (const std::exception&)` lets it pass.
struct SkipTest {
  std::string why;
};

// Ends the current test case as skipped, so that ctest says "Skipped" where
// a `WARN; return;` would have counted as a pass. Catch2 v2 has no skip: the
// translator in catch_main.cc prints "SKIPPED: <why>" and exits the process
// with 77, which agentenv_test() (tests/CMakeLists.txt) declares as
// SKIP_RETURN_CODE. It throws rather than exiting here so that the test's
// locals (temp dirs, mounts, daemons) are destroyed first. Call it from the
// test case's own thread and outside assertion macros, which would catch it.
// The exit ends the whole executable: a run of all test cases in one
// process (not through ctest) stops at the first skip, with status 77.
[[noreturn]] inline void Skip(const std::string& why) { throw SkipTest{why}; }

}  // namespace agentenv::test

// Refs (snap/refs.cc): any bytes as the REF of `agentenv show REF` or
// `restore --at` ("@{...}"), resolved by Repo::Resolve against a small
// history made once per process (fuzz_repo.h). Resolving only reads, so
// every input sees the same repository. A ref that resolves names a node
// of the history.
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>

#include "control/open_repo.h"
#include "fuzz/fuzz_env.h"
#include "fuzz/fuzz_repo.h"

namespace {

std::unique_ptr<agentenv::snap::Repo> repo;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  using namespace agentenv;
  // Dates in refs are local time: the same in every run.
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  fuzz::ConfineWrites(*argc, *argv);
  std::string root = fuzz::WorkDir() + "/repo";
  fuzz::MakeRepository(root);
  auto r = control::OpenRepo(root);
  if (!r) fuzz::Die(r.error().message);
  repo = std::move(*r);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace agentenv;
  std::string ref(reinterpret_cast<const char*>(data), size);
  auto id = repo->Resolve(ref);
  if (!id) return 0;
  auto rec = repo->Record(*id);
  FUZZ_CHECK(rec, "ref '" + ref + "' resolved to a node not in history: " + rec.error().message);
  return 0;
}

// `agentenv import FILE.tar` (control/archive.cc ImportArchive): the input
// is the archive (tar, plain or compressed; its headers checked and its pax
// times converted by TarFilter before libarchive reads them), unpacked into a
// scratch directory beside the live tree (archive/tarball.cc) and recorded
// as a node of a repository made once per process. A refused archive must
// record nothing and leave no scratch directory; an accepted one records
// one node, and the repository is then put back as it was, so that every
// input meets the same repository.
#include <spawn.h>
#include <sys/wait.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "control/archive.h"
#include "control/client.h"
#include "fuzz/fuzz_env.h"
#include "fuzz/fuzz_repo.h"
#include "snap/layout.h"

extern char** environ;

namespace {

using namespace agentenv;

std::string root, pristine, archive;
std::unique_ptr<control::Client> client;

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.insert(e.path().filename().string());
  return out;
}

size_t Nodes() {
  auto s = client->Local();
  if (!s) fuzz::Die(s.error().message);
  auto log = (*s)->repo().Log(1 << 20);
  if (!log) fuzz::Die(log.error().message);
  return log->size();
}

void Run(std::vector<std::string> argv) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid;
  int status = 0;
  if (::posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0 || ::waitpid(pid, &status, 0) != pid ||
      !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fuzz::Die(argv[0] + " failed");
}

// The repository as it was made (cp -a keeps the live tree's times and
// owners, which the stat cache recorded).
void Reset() {
  client.reset();
  fuzz::RemoveTree(root);
  Run({"/bin/cp", "-a", pristine, root});
  client = std::make_unique<control::Client>(root);
}

std::set<std::string> work_entries;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::ConfineWrites(*argc, *argv);
  root = fuzz::WorkDir() + "/repo";
  pristine = fuzz::WorkDir() + "/pristine";
  archive = fuzz::WorkDir() + "/in.tar";
  fuzz::MakeRepository(pristine, false);
  client = std::make_unique<control::Client>(pristine);  // made the way Reset makes them
  client.reset();
  Run({"/bin/cp", "-a", pristine, root});
  client = std::make_unique<control::Client>(root);
  work_entries = Entries(snap::layout::WorkParent(root));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::WriteFile(archive, std::string_view(reinterpret_cast<const char*>(data), size));
  size_t before = Nodes();
  control::ImportArchiveRequest req;
  req.archive = archive;
  auto r = control::ImportArchive(*client, req);
  FUZZ_CHECK(Entries(snap::layout::WorkParent(root)) == work_entries, "the import left a scratch directory");
  if (!r) {
    FUZZ_CHECK(Nodes() == before, "a refused archive recorded a node: " + r.error().message);
    FUZZ_CHECK(r.error().code == ErrorCode::kInvalid || r.error().code == ErrorCode::kIo,
               "an archive refused with an unexpected code: " + r.error().message);
    return 0;
  }
  FUZZ_CHECK(Nodes() == before + 1, "an accepted archive did not record exactly one node");
  Reset();
  return 0;
}

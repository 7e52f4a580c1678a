// Crash safety and cross-process concurrency of the store: a writer killed
// with SIGKILL at random points, and a reader process racing a writer.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "store_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

using store::ObjectId;
using store::ObjectType;
using store::Store;

constexpr int kObjectsPerBatch = 24;

std::vector<uint8_t> BatchObject(int batch, int j) {
  size_t n = 1 + (size_t(batch) * 7919 + j * 104729) % (300 * 1024);
  return RandomBytes(n, uint64_t(batch) * 1000 + j);
}

// Child: commits batches first, first+1, ... forever, appending each
// committed batch number to `done`.
[[noreturn]] void WriterChild(const std::string& dir, const std::string& big, int first,
                              const std::string& done) {
  auto s = Store::Open(dir, Store::Mode::kOpen);
  if (!s) _exit(2);
  for (int k = first;; ++k) {
    auto b = (*s)->BeginBatch();
    if (!b) _exit(3);
    for (int j = 0; j < kObjectsPerBatch; ++j) {
      if (!(*b)->Put(ObjectType::kChunk, BatchObject(k, j))) _exit(4);
    }
    UniqueFd fd(::open(big.c_str(), O_RDONLY));
    if (!(*b)->PutFile(fd.get(), big)) _exit(5);
    if (!(*b)->Commit()) _exit(6);
    std::ofstream(done, std::ios::app) << k << "\n";
  }
}

// Kills and reaps a child process however the test ends.
struct ChildGuard {
  pid_t pid;
  ~ChildGuard() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

int LastDone(const std::string& done) {
  std::ifstream in(done);
  int k = 0, last = 0;
  while (in >> k) last = k;
  return last;
}

TEST_CASE("store: a writer killed at random points leaves a consistent store") {
  TempDir t;
  std::string dir = t.str() + "/s", done = t.str() + "/done", big = t.str() + "/big";
  OpenStore(dir, Store::Mode::kCreate).reset();
  std::mt19937 rng(1234);
  int next = 1;
  for (int round = 0; round < 6; ++round) {
    // A different large file each round so every batch writes real data.
    WriteFile(big, RandomBytes(3 << 20, 9000 + round));
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) WriterChild(dir, big, next, done);
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 400));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFSIGNALED(status));

    auto s = OpenStore(dir, Store::Mode::kOpen);
    fsck::FsckReport report;
    auto findings = Fsck(*s, &report);
    for (auto& f : findings) INFO(f.message);
    CHECK(findings.empty());
    int last = LastDone(done);
    INFO("round " << round << ": batches " << next << ".." << last << " committed");
    for (int k = next; k <= last; ++k) {
      for (int j = 0; j < kObjectsPerBatch; ++j) {
        REQUIRE(*s->Has(ObjectId::Of(BatchObject(k, j))));
      }
    }
    // The batch in flight when killed: entirely present or entirely absent
    // (it may have committed without recording it in `done`).
    int present = 0;
    for (int j = 0; j < kObjectsPerBatch; ++j) present += *s->Has(ObjectId::Of(BatchObject(last + 1, j)));
    CHECK((present == 0 || present == kObjectsPerBatch));
    next = last + 1 + (present ? 1 : 0);
    if (present) std::ofstream(done, std::ios::app) << last + 1 << "\n";
  }
}

TEST_CASE("store: a reader process sees only complete batches while a writer commits") {
  TempDir t;
  std::string dir = t.str() + "/s";
  OpenStore(dir, Store::Mode::kCreate).reset();
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto s = Store::Open(dir, Store::Mode::kOpen);
    if (!s) _exit(2);
    for (uint32_t k = 0; k < 60; ++k) {
      auto b = (*s)->BeginBatch();
      if (!b) _exit(3);
      // Many small objects (grows the index map), then a node listing them.
      std::vector<uint8_t> node;
      for (uint32_t j = 0; j < 3000; ++j) {
        uint64_t v = uint64_t(k) << 32 | j;
        auto id = (*b)->Put(ObjectType::kChunk, std::span(reinterpret_cast<uint8_t*>(&v), 8));
        if (!id) _exit(4);
        node.insert(node.end(), id->bytes.begin(), id->bytes.end());
      }
      if (!(*b)->Put(ObjectType::kNode, node) || !(*b)->Commit()) _exit(5);
    }
    _exit(0);
  }
  ChildGuard guard{pid};
  auto s = OpenStore(dir, Store::Mode::kOpen);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  int nodes_seen = 0, rounds = 0;
  // Each round checks up to 20 nodes in full, so rounds stay short while
  // the store grows underneath.
  while (std::chrono::steady_clock::now() < until) {
    ++rounds;
    int checked = 0;
    auto r = s->ForEach([&](const ObjectId& id, const store::ObjectInfo& info) -> Result<void> {
      if (info.type != ObjectType::kNode || checked++ >= 20) return {};
      ++nodes_seen;
      AE_ASSIGN(auto node, s->Get(id));
      for (size_t i = 0; i + 32 <= node.size(); i += 32) {
        ObjectId c;
        std::memcpy(c.bytes.data(), node.data() + i, 32);
        AE_ASSIGN(auto data, s->Get(c));
        if (data.size() != 8) return Fail("chunk of wrong size");
      }
      return {};
    });
    INFO((r ? "" : r.error().message));
    REQUIRE(r);
  }
  INFO(rounds << " reader rounds");
  CHECK(nodes_seen > 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  guard.pid = -1;
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(Fsck(*s).empty());
}

}  // namespace
}  // namespace agentenv::test

// snap/ on a reflink filesystem: restore clones file content from the
// store's packs instead of copying (loopback XFS image, root only).
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "snap/repo.h"
#include "snap_testutil.h"

namespace agentenv::test {
namespace {

using snap::Repo;

TEST_CASE("restore clones large files on XFS with reflink", "[snap][root][reflink]") {
  if (!IsRoot()) Skip("needs root for a loopback XFS mount");
  TempDir t;
  XfsMount xfs(t.str());
  if (!xfs.ok()) Skip("cannot make a loopback XFS with reflink here");
  ::unsetenv("AGENTENV_BACKEND");
  auto r = Repo::Create(xfs.dir() + "/repo");
  REQUIRE(r);
  Repo& repo = **r;
  auto backend = repo.Backend();
  REQUIRE(backend);
  CHECK(*backend == "reflink");

  const std::string w = repo.work_dir();
  // Incompressible and > 256 KiB: stored raw, so it can be cloned.
  const std::string big = RandomString(3 * 1024 * 1024 + 4096, 99);
  REQUIRE(WriteFileAt(w + "/big", big));
  REQUIRE(WriteFileAt(w + "/small", "small\n"));
  Manifest want = Capture(w);
  auto s1 = repo.Snapshot({});
  REQUIRE(s1);
  REQUIRE(s1->node);
  REQUIRE(::unlink((w + "/big").c_str()) == 0);
  REQUIRE(WriteFileAt(w + "/small", "changed\n"));
  REQUIRE(repo.Snapshot({}));

  auto res = repo.Restore(s1->node->Hex());
  REQUIRE(res);
  CHECK(res->stats.files_cloned > 0);
  CHECK(ReadFileAt(w + "/big") == big);
  for (const auto& d : CompareManifests(want, Capture(w))) FAIL_CHECK(d);
}

TEST_CASE("restore clones compressible files from a materialized lower on XFS", "[snap][root][reflink]") {
  if (!IsRoot()) Skip("needs root for a loopback XFS mount");
  TempDir t;
  XfsMount xfs(t.str());
  if (!xfs.ok()) Skip("cannot make a loopback XFS with reflink here");
  ::unsetenv("AGENTENV_BACKEND");
  auto repo = MakeRepo(xfs.dir() + "/repo");
  const std::string w = repo->work_dir();
  REQUIRE(::mkdir((w + "/lib").c_str(), 0755) == 0);
  // Text compresses: the store keeps it zstd-packed, which no reflink
  // from a pack can give back.
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "line " + std::to_string(i % 97) + " of a compressible file\n";
  for (int i = 0; i < 8; ++i) REQUIRE(WriteFileAt(w + "/lib/f" + std::to_string(i), text + std::to_string(i)));
  Manifest want = Capture(w);
  auto s1 = repo->Snapshot({});
  REQUIRE(s1);
  REQUIRE(s1->node);
  auto lower = repo->LeaseLower(*s1->node);
  REQUIRE(lower);
  for (int i = 0; i < 8; ++i) REQUIRE(::unlink((w + "/lib/f" + std::to_string(i)).c_str()) == 0);
  REQUIRE(repo->Snapshot({}));

  auto res = repo->Restore(s1->node->Hex());
  REQUIRE(res);
  CHECK(res->stats.files_cloned == 8);  // every one, from the lower
  for (const auto& d : CompareManifests(want, Capture(w))) FAIL_CHECK(d);
  // Shared extents: the live file and the lower's are one on disk.
  CHECK(RunCmd("filefrag -v " + w + "/lib/f3 | grep -c shared") != "0");
}

TEST_CASE("materializing HEAD on XFS clones unchanged files from the live tree", "[snap][root][reflink]") {
  if (!IsRoot()) Skip("needs root for a loopback XFS mount");
  TempDir t;
  XfsMount xfs(t.str());
  if (!xfs.ok()) Skip("cannot make a loopback XFS with reflink here");
  ::unsetenv("AGENTENV_BACKEND");
  auto repo = MakeRepo(xfs.dir() + "/repo");
  const std::string w = repo->work_dir();
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "line " + std::to_string(i % 97) + " compresses well\n";
  REQUIRE(WriteFileAt(w + "/a", text + "a"));
  REQUIRE(WriteFileAt(w + "/b", text + "b"));
  // Old mtimes: outside the racy window, so the scan caches their stat.
  for (const char* f : {"/a", "/b"}) {
    struct timespec ts[2] = {{1700000000, 0}, {1700000000, 0}};
    REQUIRE(::utimensat(AT_FDCWD, (w + f).c_str(), ts, 0) == 0);
  }
  Settle(*repo);  // and their ctimes too
  auto s1 = repo->Snapshot({});
  REQUIRE(s1);
  REQUIRE(s1->node);
  REQUIRE(WriteFileAt(w + "/b", "changed since the snapshot\n"));  // its stat no longer matches
  auto lower = repo->LeaseLower(*s1->node);
  REQUIRE(lower);
  CHECK(ReadFileAt(lower->dir() + "/a") == text + "a");
  CHECK(ReadFileAt(lower->dir() + "/b") == text + "b");  // from the store, not the changed live file
  CHECK(RunCmd("filefrag -v " + lower->dir() + "/a | grep -c shared") != "0");
  CHECK(RunCmd("filefrag -v " + lower->dir() + "/b | grep -c shared") == "0");
}

}  // namespace
}  // namespace agentenv::test

// Helpers shared by the history tests (retention, refcount, repair).
#pragma once

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "snap/repo.h"
#include "snap/tree.h"
#include "tests/settle_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {

// Every node record of `meta` in creation order (small test histories).
inline Result<std::vector<snap::NodeRecord>> AllNodes(const snap::MetaDb& meta) {
  std::vector<snap::NodeRecord> out;
  AE_TRY(meta.ForEachNode([&](const snap::NodeRecord& r) -> Result<bool> {
    out.push_back(r);
    return true;
  }));
  return out;
}

inline std::string ReadString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Bytes allocated on disk by the regular files under `dir`.
inline uint64_t DiskBytes(const std::string& dir) {
  uint64_t n = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    struct stat st;
    if (::lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) n += uint64_t(st.st_blocks) * 512;
  }
  return n;
}

// The id of entry `name` in tree `tree` (fails the test if absent).
inline store::ObjectId TreeEntryId(snap::Repo& repo, const store::ObjectId& tree, const std::string& name) {
  auto t = snap::LoadTree(repo.store(), tree);
  REQUIRE(t);
  for (const auto& e : *t)
    if (e.name == name) return e.id;
  FAIL("no entry " << name);
  return {};
}

// Takes a snapshot that must make a node; returns its id.
inline store::ObjectId SnapNode(snap::Repo& repo, const snap::SnapOptions& o) {
  auto r = repo.Snapshot(o);
  INFO((r ? "" : r.error().message));
  REQUIRE(r);
  REQUIRE(r->node);
  return *r->node;
}

// Loses `id` from the store behind history's back (as damage would).
inline void LoseObject(snap::Repo& repo, const store::ObjectId& id) {
  auto b = repo.store().BeginBatch();
  REQUIRE(b);
  REQUIRE((*b)->Drop(id));
  REQUIRE((*b)->Commit());
}

}  // namespace agentenv::test

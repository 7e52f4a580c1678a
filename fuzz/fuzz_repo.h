// A small repository for the targets that need history (refs, socket,
// MCP, import): made once per process by the same calls as `agentenv init`,
// `snap`, `restore` and `tag`, at fixed node times so that time refs
// resolve alike in every run.
#pragma once

#include <string>

#include "control/archive.h"
#include "control/open_repo.h"
#include "fuzz/fuzz_env.h"
#include "snap/layout.h"

namespace agentenv::fuzz {

// 2026-11-20 12:00:00 UTC, and one hour later per node after the first.
inline constexpr int64_t kFirstNodeNs = 1795176000LL * 1000000000LL;

// Makes `root` (absent) a repository of this history:
//   root "init" (etc/app.conf, bin/tool, a symlink, a hardlink)
//   -> "second" (app.conf changed, a directory added)  tag good
//   -> "third" (a file removed)                         tag v1.0, HEAD
//   and from "second" a branch "other" (tag side).
// When `history` is false: only the root node of an empty tree.
inline void MakeRepository(const std::string& root, bool history = true) {
  std::string src = root + ".src";
  MakeDir(src);
  if (history) {
    MakeDir(src + "/etc");
    MakeDir(src + "/bin");
    WriteFile(src + "/etc/app.conf", "mode=good\n");
    WriteFile(src + "/bin/tool", "#!/bin/sh\necho tool\n");
    ::chmod((src + "/bin/tool").c_str(), 0755);
    std::error_code ec;
    std::filesystem::create_symlink("../etc/app.conf", src + "/bin/conf", ec);
    std::filesystem::create_hard_link(src + "/bin/tool", src + "/bin/tool2", ec);
  }
  control::InitRequest init;
  init.from = src;
  auto made = control::Init(root, init);
  if (!made) Die("init: " + made.error().message);
  RemoveTree(src);
  if (!history) return;
  auto repo = control::OpenRepo(root);
  if (!repo) Die("open: " + repo.error().message);
  std::string work = (*repo)->work_dir();
  auto snap = [&](const std::string& message, int hour) {
    snap::SnapOptions opt;
    opt.message = message;
    opt.time_ns = kFirstNodeNs + int64_t(hour) * 3600 * 1000000000LL;
    auto r = (*repo)->Snapshot(opt);
    if (!r || !r->node) Die("snapshot " + message + ": " + (r ? "no node" : r.error().message));
  };
  auto tag = [&](const std::string& name) {
    auto r = (*repo)->Tag(name, "HEAD");
    if (!r) Die("tag " + name + ": " + r.error().message);
  };
  WriteFile(work + "/etc/app.conf", "mode=better\n");
  MakeDir(work + "/var/lib/app");
  WriteFile(work + "/var/lib/app/state", std::string(5000, 's'));
  snap("second", 1);
  tag("good");
  std::filesystem::remove(work + "/bin/tool2");
  snap("third", 2);
  tag("v1.0");
  auto back = (*repo)->Restore("good");
  if (!back) Die("restore: " + back.error().message);
  WriteFile(work + "/etc/side", "side\n");
  snap("other", 3);
  tag("side");
  auto head = (*repo)->Restore("v1.0");
  if (!head) Die("restore: " + head.error().message);
}

}  // namespace agentenv::fuzz

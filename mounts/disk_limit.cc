// Disk limits of commands (mounts/disk_limit.h).
#include "mounts/disk_limit.h"

#include <fcntl.h>
#include <unistd.h>

#include "common/durable.h"
#include "common/fields.h"
#include "common/read_all.h"
#include "snap/fsops.h"
#include "snap/layout.h"

namespace agentenv::mounts {
namespace {

// The smallest limit: overlayfs makes its work directories on the tmpfs.
constexpr uint64_t kMinDiskBytes = 1 << 20;
// A config is a few keys; anything larger is not one.
constexpr size_t kMaxConfigBytes = 64 << 10;

}  // namespace

Result<RepoConfig> LoadConfig(const std::string& root) {
  const std::string path = snap::layout::Config(root);
  auto text = ReadFileUpTo(path, kMaxConfigBytes + 1);
  if (!text && text.error().errno_value == ENOENT) return RepoConfig{};
  if (!text) return Unexpected<Error>(text.error());
  if (text->size() > kMaxConfigBytes) return Fail(ErrorCode::kCorrupt, path + ": over 64 KiB, not a config");
  json j = json::parse(*text, nullptr, false);
  auto c = ReadReply<RepoConfig>("config", j);
  if (!c) return Fail(ErrorCode::kCorrupt, path + ": " + c.error().message);
  return *c;
}

Result<void> SaveConfig(const std::string& root, const RepoConfig& c) {
  const std::string path = snap::layout::Config(root);
  const size_t slash = path.rfind('/');
  return WriteFileDurably(path.substr(0, slash), path.substr(slash + 1), ToJson(c).dump() + "\n");
}

Result<uint64_t> DiskBytesFor(const std::string& root, uint64_t requested, uint64_t workspace) {
  if (requested) return requested;
  if (workspace) return workspace;
  AE_ASSIGN(RepoConfig c, LoadConfig(root));
  return c.disk_bytes;
}

Result<DiskLimit> DiskLimit::Plan(snap::Repo& repo, runner::EnvSpec* spec, uint64_t bytes) {
  DiskLimit d;
  if (!bytes) return d;
  if (bytes < kMinDiskBytes) return Fail(ErrorCode::kInvalid, "disk limit: " + std::to_string(bytes) + " bytes; at least 1M");
  d.bytes_ = bytes;
  if (spec->overlay) {
    d.target_ = spec->overlay->upper;
    d.mode_ = snap::UpperTarget::kUpper;
    spec->overlay->disk_bytes = bytes;
    return d;
  }
  // The live tree: an overlay over itself, mounted inside the env only.
  AE_ASSIGN(snap::ScratchDir dir, snap::ScratchDir::Make(snap::layout::WorkParent(repo.root()), "disk"));
  d.mount_point_.emplace(std::move(dir));
  d.target_ = spec->root;
  d.mode_ = snap::UpperTarget::kTree;
  spec->overlay = runner::Overlay{spec->root, "", d.mount_point_->path(), bytes};
  return d;
}

Result<void> DiskLimit::Keep(int disk_fd) const {
  if (!bytes_) return {};
  if (disk_fd < 0) return Fail("disk limit: the env's tmpfs is gone; the command's changes are lost");
  AE_ASSIGN(UniqueFd upper, snap::OpenDirAt(disk_fd, "upper", "the disk limit's tmpfs"));
  UniqueFd target(::open(target_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!target) return FailErrno(target_, errno);
  return snap::ApplyUpper(upper.get(), target.get(), mode_, ::geteuid() == 0, target_);
}

}  // namespace agentenv::mounts

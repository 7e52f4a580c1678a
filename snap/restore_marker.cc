// The `restoring` marker: a restore of the live tree that did not finish
// (killed, or failed midway) is named by `status`, and the writer after it
// removes the temp files it left (snap/fsops.h RestoreTempName).
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/read_all.h"
#include "common/write_all.h"
#include "snap/btrfs.h"
#include "snap/fsops.h"
#include "snap/repo.h"

namespace agentenv::snap {
namespace {

// Marker contents: "<node hex>\n", "swap\n" for a restore by swap, then
// "swept\n" once its leftovers are gone.
constexpr std::string_view kSwept = "swept\n";
constexpr std::string_view kSwap = "swap\n";

// The marker's text ("" when it cannot be read): a node id and two words.
std::string ReadAll(int fd) {
  auto text = ReadUpTo(fd, "restoring", 4096);
  return text ? std::move(*text) : std::string();
}

// Unlinks restore temp files under directory `fd`; best effort.
void RemoveTemps(int fd) {
  int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return;
  DIR* d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    return;
  }
  while (struct dirent* de = ::readdir(d)) {
    std::string_view n = de->d_name;
    if (n == "." || n == "..") continue;
    if (IsRestoreTempName(n)) {
      ::unlinkat(fd, de->d_name, 0);
    } else if (de->d_type == DT_DIR) {
      UniqueFd sub(::openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (sub) RemoveTemps(sub.get());
    }
  }
  ::closedir(d);
}

}  // namespace

Result<UniqueFd> Repo::BeginLiveRestore(const store::ObjectId& target, bool swap) {
  std::string path = layout::Restoring(root_);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd || ::flock(fd.get(), LOCK_EX) != 0) return FailErrno(path, errno);
  std::string text = target.Hex() + "\n";
  if (swap) text += kSwap;
  AE_TRY(PwriteAll(fd.get(), text.data(), text.size(), 0, path));
  if (::fsync(fd.get()) != 0) return FailErrno(path, errno);
  return fd;
}

void Repo::EndLiveRestore() {
  ::unlink(layout::Restoring(root_).c_str());  // absent already is fine
}

std::optional<store::ObjectId> Repo::UnfinishedRestore() const {
  UniqueFd fd(::open(layout::Restoring(root_).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd || ::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) return std::nullopt;  // none, or still running
  std::string text = ReadAll(fd.get());
  auto id = store::ObjectId::FromHex(text.substr(0, text.find('\n')));
  if (!id) return std::nullopt;
  return *id;
}

void Repo::SweepUnfinishedRestore() {
  std::string path = layout::Restoring(root_);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return;
  std::string text = ReadAll(fd.get());
  if (text.size() >= kSwept.size() && text.compare(text.size() - kSwept.size(), kSwept.size(), kSwept) == 0) return;
  if (text.find(kSwap) != std::string::npos) {
    // A swap writes no temp files, but the live tree may now be a snapshot
    // of the target while HEAD still names the node saved before: HEAD's
    // snapshot is then no ancestor of the live tree, and a change search
    // from it would miss what the swap changed. Dropped, the next snapshot
    // walks.
    auto head = meta_->GetRef("HEAD");
    if (head && *head) (void)btrfs::DeleteSubvolume(layout::Subvols(root_) + "/" + (*head)->Hex());
  } else {
    UniqueFd work(::open(work_dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!work) return;
    RemoveTemps(work.get());
  }
  if (::pwrite(fd.get(), kSwept.data(), kSwept.size(), off_t(text.size())) == ssize_t(kSwept.size()))
    ::fsync(fd.get());
}

}  // namespace agentenv::snap

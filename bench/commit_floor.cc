// commit_floor: the least a durable snapshot commit costs on a filesystem.
//
// A crash-safe commit of new content needs three ordered flushes, each
// waiting for the one before: the new records (pack append + fdatasync),
// then the index that finds them (its write + fdatasync), then the history
// entry that names them (its write + fdatasync); a later write made durable
// before an earlier one could name what a power cut lost. This times
// exactly that sequence, nothing else: three small appends to three files
// in DIR, each followed by fdatasync, after a sync of the filesystem (so no
// tool pays for another's writeback). It is the floor of a snapshot beside
// the walk: a walking snap cannot be faster than stat_walk + this.
//
// With TREE a btrfs subvolume, each round first takes a read-only snapshot
// of it (what a snapshot on the btrfs backend starts with, a transaction
// commit) and deletes it after the round: the floor of a snapshot that asks
// btrfs what changed instead of walking. With FILEs (paths in TREE), each
// round first rewrites them with new bytes of the same size and syncs
// (untimed), then reads them back (from the fresh snapshot on btrfs: cold,
// a snapshot's inodes share no page cache with the live ones; from TREE
// elsewhere, as a walking snapshot reads them) and appends them to the pack
// instead of one block: all the I/O a snapshot of those changes must do,
// and none of the hashing, compression or bookkeeping.
//
// Usage: commit_floor DIR [rounds [TREE [FILE...]]]   prints the median
// and each round (ms)
#include <btrfsutil.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: commit_floor DIR [rounds [TREE [FILE...]]]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 15;
  const std::string tree = argc > 3 ? argv[3] : "";
  const std::vector<std::string> files(argv + std::min(argc, 4), argv + argc);
  const bool btrfs = !tree.empty() && btrfs_util_is_subvolume(tree.c_str()) == BTRFS_UTIL_OK;
  const std::string subvol = btrfs ? tree : "";
  const std::string snap = btrfs ? dir + "/commit-floor.snapshot" : tree;
  const char* names[] = {"pack", "index", "history"};
  int fds[3];
  for (int i = 0; i < 3; ++i) {
    std::string p = dir + "/commit-floor." + names[i];
    fds[i] = ::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fds[i] < 0) {
      std::perror(p.c_str());
      return 1;
    }
  }
  std::vector<char> block(4096, 'x');
  std::vector<double> ms;
  unsigned seed = 1;
  for (int r = 0; r < rounds; ++r) {
    for (const std::string& f : files) {  // a change to snapshot
      std::string p = tree + "/" + f;
      int fd = ::open(p.c_str(), O_RDWR | O_CLOEXEC);
      struct stat st;
      if (fd < 0 || ::fstat(fd, &st) != 0) {
        std::perror(p.c_str());
        return 1;
      }
      std::vector<char> bytes(size_t(st.st_size));
      for (char& c : bytes) c = char(rand_r(&seed));
      if (::pwrite(fd, bytes.data(), bytes.size(), 0) != ssize_t(bytes.size())) {
        std::perror(p.c_str());
        return 1;
      }
      ::close(fd);
    }
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || ::syncfs(dfd) != 0) {
      std::perror(dir.c_str());
      return 1;
    }
    ::close(dfd);
    auto t0 = std::chrono::steady_clock::now();
    if (!subvol.empty()) {
      btrfs_util_error err =
          btrfs_util_create_snapshot(subvol.c_str(), snap.c_str(), BTRFS_UTIL_CREATE_SNAPSHOT_READ_ONLY, nullptr, nullptr);
      if (err != BTRFS_UTIL_OK) {
        std::fprintf(stderr, "%s: %s\n", snap.c_str(), btrfs_util_strerror(err));
        return 1;
      }
    }
    std::vector<char> changed;
    for (const std::string& f : files) {
      std::string p = snap + "/" + f;
      int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
      char buf[65536];
      ssize_t n = 0;
      while (fd >= 0 && (n = ::read(fd, buf, sizeof buf)) > 0) changed.insert(changed.end(), buf, buf + n);
      if (fd < 0 || n < 0) {
        std::perror(p.c_str());
        return 1;
      }
      ::close(fd);
    }
    for (int i = 0; i < 3; ++i) {
      const std::vector<char>& out = i == 0 && !changed.empty() ? changed : block;
      if (::write(fds[i], out.data(), out.size()) != ssize_t(out.size()) || ::fdatasync(fds[i]) != 0) {
        std::perror(names[i]);
        return 1;
      }
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!subvol.empty() && btrfs_util_delete_subvolume(snap.c_str(), 0) != BTRFS_UTIL_OK) {
      std::fprintf(stderr, "%s: cannot delete\n", snap.c_str());
      return 1;
    }
  }
  for (int i = 0; i < 3; ++i) {
    ::close(fds[i]);
    ::unlink((dir + "/commit-floor." + names[i]).c_str());
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  std::printf("%.2f", sorted[sorted.size() / 2]);
  for (double v : ms) std::printf(" %.2f", v);
  std::printf("\n");
  return 0;
}

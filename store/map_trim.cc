#include "store/map_trim.h"

#include <algorithm>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace agentenv::store {
namespace {
const uint64_t kPageSize = uint64_t(::sysconf(_SC_PAGESIZE));

// The default budget, or AGENTENV_MAP_BUDGET_MB when set to a number > 0.
uint64_t Budget(uint64_t given) {
  const char* env = given == MapTrimmer::kDefaultBudget ? std::getenv("AGENTENV_MAP_BUDGET_MB") : nullptr;
  if (!env) return given;
  char* end = nullptr;
  const unsigned long long mb = std::strtoull(env, &end, 10);
  return end != env && *end == '\0' && mb > 0 && mb < (1ULL << 20) ? uint64_t(mb) << 20 : given;
}
}  // namespace

MapTrimmer::MapTrimmer(MDB_env* env, uint64_t file_budget)
    : env_(env),
      budget_pages_(Budget(file_budget) / kPageSize),
      statm_fd_(::open("/proc/self/statm", O_RDONLY | O_CLOEXEC)) {
  // /proc/self/maps names the file by its canonical path.
  const char* dir = nullptr;
  char real[PATH_MAX];
  if (mdb_env_get_path(env_, &dir) == 0 && dir) data_path_ = std::string(::realpath(dir, real) ? real : dir) + "/data.mdb";
}

MapTrimmer::~MapTrimmer() {
  if (statm_fd_ >= 0) ::close(statm_fd_);
}

void MapTrimmer::Check() {
  // statm's third field counts resident file-backed and shmem pages of
  // the whole process: every LMDB map, the pack mappings, the binary.
  // Without /proc there is no measure: trim at every check instead.
  if (statm_fd_ >= 0) {
    char buf[128];
    ssize_t n = ::pread(statm_fd_, buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      unsigned long size = 0, resident = 0, shared = 0;
      if (std::sscanf(buf, "%lu %lu %lu", &size, &resident, &shared) == 3) {
        // Other mappings (a pack being verified, the binary) count too but
        // are not this map's to drop: trim only when the map has grown by
        // half a budget since the last trim, else a process whose other
        // mappings fill the budget would trim at every check and fault the
        // B-tree's upper pages back in each time.
        // Past twice the budget a map trims whatever the floor: the floor
        // counts the other maps' pages as they were at this map's last
        // trim, so two maps of one process could otherwise each wait on
        // the other's share and grow without bound between them.
        uint64_t floor = after_trim_.load(std::memory_order_relaxed);
        const bool grown = shared > std::max(budget_pages_, floor + budget_pages_ / 2);
        if (!grown && shared <= 2 * budget_pages_) return;
        Trim();
        n = ::pread(statm_fd_, buf, sizeof buf - 1, 0);
        if (n > 0) {
          buf[n] = '\0';
          if (std::sscanf(buf, "%lu %lu %lu", &size, &resident, &shared) == 3)
            after_trim_.store(shared, std::memory_order_relaxed);
        }
        return;
      }
    }
  }
  Trim();
}

void MapTrimmer::Trim() {
  // LMDB does not tell where it mapped the file (me_mapaddr is set only
  // with MDB_FIXEDMAP): find the mapping in /proc/self/maps by the data
  // file's inode and path. Only a shared read-only mapping qualifies, so
  // even a wrong match could not lose data: every page of such a mapping
  // can be read back from its file.
  int fd = -1;
  struct stat st;
  if (mdb_env_get_fd(env_, &fd) != 0 || ::fstat(fd, &st) != 0) return;
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (!maps) return;
  char* line = nullptr;
  size_t cap = 0;
  while (::getline(&line, &cap, maps) > 0) {
    unsigned long start = 0, end = 0, offset = 0, inode = 0;
    char perms[8];
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %7s %lx %*x:%*x %lu %n", &start, &end, perms, &offset, &inode, &path_at) < 5)
      continue;
    std::string_view path(line + path_at);
    if (!path.empty() && path.back() == '\n') path.remove_suffix(1);
    if (inode == st.st_ino && std::string_view(perms) == "r--s" && path == data_path_)
      ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
  }
  std::free(line);
  std::fclose(maps);
}

}  // namespace agentenv::store

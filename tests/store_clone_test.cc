// CloneFileTo: reflinks on XFS (loopback image, root only), refusal on ext4.
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cstdio>

#include "store_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

using store::Store;

std::string Run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  ::pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// An XFS filesystem with reflink on a loop device, mounted at a temp dir;
// unmounted and detached on destruction.
class XfsLoop {
 public:
  explicit XfsLoop(const TempDir& t) : mnt_(t.str() + "/mnt") {
    std::string img = t.str() + "/xfs.img";
    ::mkdir(mnt_.c_str(), 0755);
    if (std::system(("truncate -s 512M " + img + " && mkfs.xfs -q -m reflink=1 " + img +
                     " >/dev/null 2>&1").c_str()) != 0) {
      return;
    }
    dev_ = Run("losetup --find --show " + img);
    if (dev_.empty()) return;
    mounted_ = ::mount(dev_.c_str(), mnt_.c_str(), "xfs", 0, nullptr) == 0;
  }
  ~XfsLoop() {
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
    if (!dev_.empty()) std::system(("losetup -d " + dev_).c_str());
  }
  bool ok() const { return mounted_; }
  const std::string& dir() const { return mnt_; }

 private:
  std::string mnt_, dev_;
  bool mounted_ = false;
};

bool FirstExtentShared(int fd) {
  alignas(fiemap) char buf[sizeof(fiemap) + sizeof(fiemap_extent)] = {};
  auto* fm = reinterpret_cast<fiemap*>(buf);
  fm->fm_length = FIEMAP_MAX_OFFSET;
  fm->fm_flags = FIEMAP_FLAG_SYNC;
  fm->fm_extent_count = 1;
  if (::ioctl(fd, FS_IOC_FIEMAP, fm) != 0 || fm->fm_mapped_extents == 0) return false;
  return fm->fm_extents[0].fe_flags & FIEMAP_EXTENT_SHARED;
}

std::vector<uint8_t> ReadAll(int fd) {
  struct stat st;
  ::fstat(fd, &st);
  std::vector<uint8_t> v(st.st_size);
  if (::pread(fd, v.data(), v.size(), 0) != ssize_t(v.size())) v.clear();
  return v;
}

void CheckClones(const std::string& base, bool expect_reflink) {
  auto s = OpenStore(base + "/s", Store::Mode::kCreate);
  auto small = RandomBytes(200 * 1024 + 17, 61);  // one raw chunk
  auto large = RandomBytes(3 * 1024 * 1024 + 5, 62);  // many raw chunks
  WriteFile(base + "/small", small);
  WriteFile(base + "/large", large);
  auto b = *s->BeginBatch();
  auto rs = PutPath(*b, base + "/small");
  auto rl = PutPath(*b, base + "/large");
  CommitOk(*b);
  for (auto [ref, data] : {std::pair{rs, &small}, std::pair{rl, &large}}) {
    std::string out = base + "/out-" + ref.id.Hex();
    UniqueFd fd(::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644));
    REQUIRE(fd);
    auto r = s->CloneFileTo(ref, fd.get());
    INFO((r ? "" : r.error().message));
    REQUIRE(r);
    CHECK(*r == expect_reflink);
    if (expect_reflink) {
      CHECK(ReadAll(fd.get()) == *data);
      CHECK(FirstExtentShared(fd.get()));
    } else {
      struct stat st;
      REQUIRE(::fstat(fd.get(), &st) == 0);
      CHECK(st.st_size == 0);  // nothing written
    }
  }
}

TEST_CASE("store: CloneFileTo reflinks raw chunks on XFS") {
  if (!IsRoot()) Skip("needs root to mount a loopback XFS image");
  TempDir t;
  XfsLoop xfs(t);
  if (!xfs.ok()) Skip("could not make and mount a loopback XFS image (mkfs.xfs, losetup)");
  CheckClones(xfs.dir(), true);
}

TEST_CASE("store: CloneFileTo returns false where reflinks are unsupported") {
  TempDir t;
  std::string fs = Run("stat -f -c %T " + t.str());
  if (fs != "ext2/ext3") Skip(t.str() + " is " + fs + ", not ext4");  // how stat names ext4
  CheckClones(t.str(), false);
}

}  // namespace
}  // namespace agentenv::test

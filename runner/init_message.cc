// The init program's message (runner/init_message.h): little-endian
// fixed-width integers, strings and lists as a u32 count and their items,
// after a 4-byte magic. Decoding checks every count against the bytes left,
// so a bad message costs time linear in its size.
#include "runner/init_message.h"

#include <cstring>

namespace agentenv::runner::internal {
namespace {

constexpr char kMagic[4] = {'A', 'E', 'I', '1'};

class Writer {
 public:
  void U32(uint32_t v) { Raw(&v, sizeof v); }
  void U64(uint64_t v) { Raw(&v, sizeof v); }
  void I32(int v) { Raw(&v, sizeof v); }
  void Str(const std::string& s) {
    U32(uint32_t(s.size()));
    out_.append(s);
  }
  void Strs(const std::vector<std::string>& v) {
    U32(uint32_t(v.size()));
    for (const auto& s : v) Str(s);
  }
  void Ints(const std::vector<int>& v) {
    U32(uint32_t(v.size()));
    for (int x : v) I32(x);
  }
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U32(uint32_t* v) { return Raw(v, sizeof *v); }
  bool U64(uint64_t* v) { return Raw(v, sizeof *v); }
  bool I32(int* v) { return Raw(v, sizeof *v); }
  bool Str(std::string* s) {
    uint32_t n;
    if (!U32(&n) || n > in_.size()) return false;
    s->assign(in_.substr(0, n));
    in_.remove_prefix(n);
    return true;
  }
  // A count of items each at least `min_size` bytes long: never past the end.
  bool Count(uint32_t* n, size_t min_size) { return U32(n) && *n <= in_.size() / min_size; }
  bool Strs(std::vector<std::string>* v) {
    uint32_t n;
    if (!Count(&n, 4)) return false;
    v->resize(n);
    for (auto& s : *v)
      if (!Str(&s)) return false;
    return true;
  }
  bool Ints(std::vector<int>* v) {
    uint32_t n;
    if (!Count(&n, 4)) return false;
    v->resize(n);
    for (int& x : *v)
      if (!I32(&x)) return false;
    return true;
  }
  bool Raw(void* p, size_t n) {
    if (in_.size() < n) return false;
    std::memcpy(p, in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

}  // namespace

std::string EncodeInitMessage(const InitMessage& m) {
  Writer w;
  w.Raw(kMagic, sizeof kMagic);
  w.U32(uint32_t(m.mode));
  w.Strs(m.argv);
  w.Strs(m.env);
  for (int fd : {m.in, m.out, m.err, m.report, m.status}) w.I32(fd);
  w.U32(uint32_t(m.plan.size()));
  for (const Step& s : m.plan) {
    w.U32(uint32_t(s.op));
    w.U64(s.flags);
    w.U32(uint32_t(s.optional));
    w.U32(uint32_t(s.create));
    w.I32(s.fd);
    for (const std::string* x : {&s.src, &s.dst, &s.fstype, &s.data}) w.Str(*x);
  }
  w.Ints(m.kept);
  w.U32(uint32_t(m.terminal) | uint32_t(m.tied) << 1);
  w.U32(uint32_t(m.ns.size()));
  for (auto [kind, fd] : m.ns) {
    w.I32(kind);
    w.I32(fd);
  }
  w.Ints(m.procs);
  w.Str(m.cwd);
  return w.Take();
}

bool DecodeInitMessage(std::string_view bytes, InitMessage* m) {
  Reader r(bytes);
  char magic[sizeof kMagic];
  uint32_t mode, n, flags;
  if (!r.Raw(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0 || !r.U32(&mode)) return false;
  if (mode != uint32_t(InitMessage::Mode::kEnv) && mode != uint32_t(InitMessage::Mode::kJoin)) return false;
  m->mode = InitMessage::Mode(mode);
  if (!r.Strs(&m->argv) || !r.Strs(&m->env)) return false;
  for (int* fd : {&m->in, &m->out, &m->err, &m->report, &m->status})
    if (!r.I32(fd)) return false;
  // A step is at least 40 bytes: op, flags, optional, create, fd, four sizes.
  if (!r.Count(&n, 40)) return false;
  m->plan.assign(n, Step{});
  for (Step& s : m->plan) {
    uint32_t op, optional, create;
    if (!r.U32(&op) || op >= uint32_t(kOpCount)) return false;
    uint64_t step_flags;
    if (!r.U64(&step_flags) || !r.U32(&optional) || optional > 1 || !r.U32(&create) ||
        create > uint32_t(MountPoint::kCreateDir) || !r.I32(&s.fd))
      return false;
    s.op = Op(op);
    s.flags = step_flags;
    s.optional = optional;
    s.create = MountPoint(create);
    for (std::string* x : {&s.src, &s.dst, &s.fstype, &s.data})
      if (!r.Str(x)) return false;
  }
  if (!r.Ints(&m->kept) || !r.U32(&flags) || flags > 3) return false;
  m->terminal = flags & 1;
  m->tied = flags & 2;
  if (!r.Count(&n, 8)) return false;
  m->ns.assign(n, {});
  for (auto& [kind, fd] : m->ns)
    if (!r.I32(&kind) || !r.I32(&fd)) return false;
  return r.Ints(&m->procs) && r.Str(&m->cwd) && r.done();
}

}  // namespace agentenv::runner::internal

// runner: a rootless inner environment for one command tree.
// User (caller uid -> 0), mount, pid, uts, ipc and optionally net
// namespaces; pivot_root into a prepared root directory; fresh /proc, a
// minimal /dev, read-only /sys, tmpfs /run; optional memory/pids/cpu limits
// in the env's own cgroup; the whole process tree dies as a unit.
//
// Two entry points on the same code: Env::Start gives a supervisor a
// long-lived handle (wait, kill everything, list processes, spawn more
// commands into the same env); Run is the one-shot with capture and timeout.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace agentenv::runner {

// Where a supervisor binds its unix socket inside the env (a single-file bind
// onto the env's /run tmpfs; the mount point is created there, not in the tree).
inline constexpr const char* kSocketPath = "/run/agentenv.sock";

enum class Network { kAllow, kDeny };  // kDeny: own net namespace, loopback only
enum class Stdio { kInherit, kCapture };

struct Bind {
  std::string source;  // host path: a directory or a single file (also a socket)
  std::string target;  // path inside; must exist in the tree unless under /run/ or /dev/
  bool read_only = false;
};

// Resource limits. Each nonzero memory/pids/cpu limit is enforced through
// the env's own cgroup (v2 where the controller is delegated, else v1), or
// Start/Run fail with ErrorCode::kUnsupported naming the limit and the reason.
struct Limits {
  std::chrono::milliseconds timeout{0};  // Run only; 0: none; kills the whole tree
  uint64_t output_cap = 0;               // Run only; bytes kept per stream; 0: unlimited
  uint64_t memory_bytes = 0;             // memory (+swap where settable); OOM kills inside
  uint64_t pids = 0;                     // processes/threads at once; fork fails beyond
  double cpus = 0;                       // CPU time per wall second (0.5 = half a core)
  // Added to the env's CPU nice value before its setup (which is its own
  // work: namespaces, mounts): under contention the caller's other
  // threads run first. 0 leaves it.
  int nice = 0;
};

// An overlay as the env's root: the kernel's overlayfs (no FUSE), mounted
// inside the env's own mount namespace, so it vanishes with the env and
// nothing is ever mounted in the caller's namespace. Rootless with
// `userxattr` (kernel >= 5.11): whiteouts are character devices 0:0 and
// opaque directories carry user.overlay.opaque. Paths must not contain
// ',' or ':' (overlayfs option syntax).
//
// With disk_bytes, the env's writes are held to that many bytes: a tmpfs
// of that size is mounted over `work` inside the env's mount namespace and
// holds the overlay's upper and work directories, so a write past it fails
// with ENOSPC inside and nothing reaches the host's disk. `upper` (may be
// empty) then becomes a read-only layer between it and `lower`, and the
// tmpfs upper starts with `upper`'s (else `lower`'s) root metadata. The
// caller gets the tmpfs (Env::disk, RunResult::disk) and carries its
// upper/ onto where the changes belong (snap::ApplyUpper) after the env
// ends. The tmpfs costs memory, not disk, up to its size.
struct Overlay {
  std::string lower;  // read-only, shared (a materialized node)
  std::string upper;  // this env's changes
  std::string work;   // overlayfs' scratch, on the upper's filesystem
  uint64_t disk_bytes = 0;
};

struct EnvSpec {
  std::string root;                   // directory that becomes "/" (the overlay's mount point with `overlay`)
  std::optional<Overlay> overlay;     // mount this at `root` instead of binding `root`
  std::vector<std::string> argv;      // argv[0] resolved via PATH inside
  std::vector<std::string> pass_env;  // extra "NAME" kept besides the allow-list
  std::vector<std::string> set_env;   // "NAME=value" set explicitly
  std::string cwd = "/";
  std::string hostname = "agentenv";
  Network network = Network::kAllow;
  std::vector<Bind> binds;
  Limits limits;
  Stdio stdio = Stdio::kCapture;      // Run only; Env::Start takes StdioFds
  // Env::Start: stdin is a terminal (a pty slave): argv runs in a new
  // session with it as its controlling terminal (job control, ^C, SIGWINCH).
  bool terminal = false;
  // Descriptors the env's init keeps open until the env ends (the
  // commands inside never see them): flock leases and locks the env's use
  // of shared state depends on (a workspace's lock, its lower's lease), so
  // they last exactly as long as the processes that use that state.
  std::vector<int> held_fds;
  // The env dies (SIGKILL to its init, so every process in it) when the
  // thread that started it ends, even by kill -9 of its process: for a
  // caller that waits for the env (exec, a tournament's candidate), never
  // for one that hands it to another thread (spawn).
  bool tied_to_caller = false;
};

// How a command ended.
struct ExitStatus {
  int exit_code = -1;       // valid when signal == 0
  int signal = 0;           // the signal that ended the command, 0 if it exited
  bool oom_killed = false;  // the env's memory limit killed a process
};

struct RunResult : ExitStatus {
  std::string out, err;
  // With Overlay::disk_bytes: the tmpfs's root, holding upper/ (what the
  // command changed); it outlives the env while this fd is open.
  std::shared_ptr<UniqueFd> disk;  // captured (Stdio::kCapture) up to limits.output_cap
  bool out_truncated = false, err_truncated = false;
  bool timed_out = false;
  bool stopped = false;  // keep_going said stop: the tree was killed
  std::chrono::microseconds duration{0};  // start to last process gone
};

// Descriptors a command gets as stdin/stdout/stderr; -1 inherits the caller's.
// The caller keeps ownership (the child gets duplicates).
struct StdioFds {
  int in = -1, out = -1, err = -1;
};

// A further command for Env::Spawn.
struct Command {
  std::vector<std::string> argv;
  std::vector<std::string> pass_env;
  std::vector<std::string> set_env;
  std::string cwd = "/";
};

struct ProcessInfo {
  pid_t pid;     // as the caller sees it
  pid_t ns_pid;  // inside the env (the env's init is 1)
  pid_t ppid;    // as the caller sees it; 0 if the parent is outside the caller's view
  std::string cmdline;  // arguments joined by spaces
};

// A command spawned into a running Env. Destroying it kills the command if
// it still runs. Move-only; not thread-safe.
class Process {
 public:
  Process(Process&&) noexcept;
  Process& operator=(Process&&) noexcept;
  ~Process();
  pid_t pid() const;  // the command, as the caller sees it
  // Blocks until the command ends. Errors: waitpid failures.
  Result<ExitStatus> Wait();
  // The status if the command has ended, else nullopt; never blocks.
  Result<std::optional<ExitStatus>> TryWait();
  // SIGKILLs this command (not its children; Env::KillAll ends those);
  // Wait() then reports SIGKILL.
  void Kill();

  struct State;

 private:
  friend class Env;
  explicit Process(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// A running inner env: its init (pid 1 inside, a small reaper that runs
// spec.argv as pid 2 and ends the env when it exits), its namespaces and its
// cgroups. Destroying it kills every process in it and removes its cgroups.
// Move-only; not thread-safe (one supervisor thread drives it).
class Env {
 public:
  // Sets up namespaces, mounts and limits and execs spec.argv. Returns once
  // the command runs. Errors: "<step>: <errno text>" for setup (e.g. "mount
  // /proc: Operation not permitted", "exec /bin/x: No such file or
  // directory"); kNotFound when argv[0] does not exist; kUnsupported for a
  // limit that cannot be enforced; kInvalid for an empty argv. spec.stdio, timeout and output_cap are Run's.
  static Result<Env> Start(const EnvSpec& spec, StdioFds stdio = {});

  Env(Env&&) noexcept;
  Env& operator=(Env&&) noexcept;
  ~Env();

  pid_t pid() const;   // the env's init, as the caller sees it
  // With Overlay::disk_bytes, the tmpfs's root (see Overlay), else -1;
  // valid while this object lives, also after the env ended.
  int disk() const;
  int pidfd() const;   // readable once the env has ended (for poll loops)
  // Blocks until spec.argv ends; every other process of the env is gone
  // when it returns. Repeated calls return the same status.
  Result<ExitStatus> Wait();
  // The status if the env has ended, else nullopt; never blocks.
  Result<std::optional<ExitStatus>> TryWait();
  // SIGKILLs every process of the env (pid namespace teardown, double-forked
  // daemons included; plus cgroup.kill where there is a v2 cgroup) and
  // returns once none is left. Afterwards Wait() reports signal SIGKILL.
  void KillAll();
  // The env's live processes, found by their pid namespace in /proc.
  Result<std::vector<ProcessInfo>> Processes() const;
  // Runs cmd inside this env: a helper joins the env's namespaces (user
  // first) and forks the command there, which joins the env's cgroups; the
  // helper waits for it and passes its status on. Errors as for Start; kInvalid once the
  // env has ended.
  Result<Process> Spawn(const Command& cmd, StdioFds stdio = {});

  struct State;

 private:
  explicit Env(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// How to pump a command's output (PumpOutput).
struct PumpOptions {
  // From `start`, kill the env after this long (0: never).
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::milliseconds timeout{0};
  // Called every probe_ms while the command is silent; false: nobody
  // listens any more, stop the command.
  int probe_ms = -1;
  std::function<bool()> probe;
  // Ends every process of the env and returns when none is left.
  std::function<void()> kill;
};
struct PumpResult {
  bool timed_out = false;
  bool stopped = false;  // on_output or probe said stop; the env was killed
};

// The one loop that reads a running env's output: polls the env's pidfd
// and the read ends of its output pipes until the env has ended and every
// pipe is at end of file. Each read goes to on_output(index of the pipe,
// bytes); an empty view is that pipe's end of file. When on_output or the
// probe returns false, the env is killed and the rest is read and dropped.
// Errors: poll failures (the caller's Env then kills the tree).
Result<PumpResult> PumpOutput(int pidfd, std::vector<UniqueFd>& pipes, const PumpOptions& opt,
                              const std::function<bool(size_t, std::string_view)>& on_output);

// Runs spec.argv inside a fresh env and waits for it, capturing output up to
// limits.output_cap and killing the whole tree at limits.timeout; every
// process it started is gone when it returns. With keep_going, asked every
// 250 ms and at each output: false kills the tree (RunResult::stopped).
// Errors as for Env::Start. Thread-compatible.
Result<RunResult> Run(const EnvSpec& spec, const std::function<bool()>& keep_going = {});

}  // namespace agentenv::runner

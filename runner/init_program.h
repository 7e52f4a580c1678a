// Internal to runner/: starting the init program (runner/init_main.cc)
// from a clone of this process. The clone execs it at once: nothing of
// this process's memory outlives the exec (a command can read its init's
// memory; this process's threads fault on every page it still shares).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "runner/init_message.h"

namespace agentenv::runner::internal {

// A memfd holding `m` (close-on-exec; the clone passes it on). Errors: I/O.
Result<UniqueFd> WriteInitMessage(const InitMessage& m);

// What the clone needs, all made before it: it may not allocate.
struct InitExec {
  int message = -1, report = -1;  // the message's memfd; where ChildErrors go
  std::vector<unsigned> pass;     // descriptors the program gets (message and report included)
  std::vector<unsigned> keep;     // sorted: pass, the sync pipe and the program: all the clone keeps open
  std::string message_arg, report_arg;  // their numbers, as its argv
  int nice = 0;       // added to the clone's nice value first
  bool tied = false;  // PR_SET_PDEATHSIG before waiting for `sync`
  int sync_r = -1, sync_w = -1;  // when set: one byte from the caller first (ids mapped)
  int program = -1;   // InitProgram()
};

// Makes x.pass, x.keep, x.message_arg and x.report_arg from the other
// fields and `fds` (the descriptors the message names) and looks the
// program up.
// Errors: as InitProgram().
Result<void> PrepareInitExec(InitExec& x, const std::vector<int>& fds);

// In the clone: resets its signals, closes every descriptor but x.keep at
// once (a copy of another thread's workspace lock or pipe must not outlive
// this line: the clone then waits for its ids), waits for the sync byte
// when asked to, and execs the init program; reports kStepInit (or
// exits 127 when the caller died first) if that fails. Async-signal-safe.
[[noreturn]] void ExecInitProgram(const InitExec& x);

}  // namespace agentenv::runner::internal

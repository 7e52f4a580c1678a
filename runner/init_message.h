// Internal to runner/: what the init program (runner/init_main.cc) is to
// do, written by Env::Start or Env::Spawn into a memfd whose descriptor
// number is the program's argv[1]. Our own process writes it, yet every
// length and count is checked when it is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runner/init_steps.h"

namespace agentenv::runner::internal {

struct InitMessage {
  enum class Mode : uint32_t {
    kEnv = 1,   // pid 1 of a new env: the setup plan, the command as pid 2, reaping
    kJoin = 2,  // Env::Spawn's helper: join an env, fork the command in it, wait for it
  };
  Mode mode = Mode::kEnv;
  std::vector<std::string> argv, env;  // the command; env is its whole environment
  int in = -1, out = -1, err = -1;     // its stdio (-1: inherited)
  int report = -1;                     // where ChildError records go
  // kEnv.
  std::vector<Step> plan;  // Step::what is not sent (errors name the index)
  int status = -1;         // where pid 2's wait status goes
  std::vector<int> kept;   // sorted: what init holds until it exits (status included)
  bool terminal = false;   // stdin becomes the command's controlling terminal
  bool tied = false;       // init dies with its parent (PR_SET_PDEATHSIG)
  // kJoin: setns into each (CLONE_NEW*, fd), user first; the command joins
  // the cgroups whose cgroup.procs are open at `procs` and starts in `cwd`.
  std::vector<std::pair<int, int>> ns;
  std::vector<int> procs;
  std::string cwd;
};

// The bytes of `m`. Never fails.
std::string EncodeInitMessage(const InitMessage& m);
// Reads what EncodeInitMessage wrote into *m. False, *m unspecified, when
// `bytes` is not such a message (short, a count past its end, an unknown
// mode or step, bytes left over).
bool DecodeInitMessage(std::string_view bytes, InitMessage* m);

}  // namespace agentenv::runner::internal

#include "common/thread_priority.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

namespace agentenv {
namespace {
thread_local bool t_lowered = false;
}  // namespace

// PRIO_PROCESS with who = 0 is the calling thread on Linux (a nice value is
// per thread there, whatever POSIX says).
LowerThreadPriority::LowerThreadPriority(int by) {
  if (by <= 0) return;
  errno = 0;
  before_ = getpriority(PRIO_PROCESS, 0);
  if (errno != 0) return;
  lowered_ = setpriority(PRIO_PROCESS, 0, before_ + by) == 0;
}

LowerThreadPriority::~LowerThreadPriority() {
  if (lowered_ && setpriority(PRIO_PROCESS, 0, before_) != 0) t_lowered = true;
}

bool ThreadPriorityLowered() { return t_lowered; }

}  // namespace agentenv

// A thread's CPU priority, lowered for a while: a server runs its writers'
// work below its readers (control::Server::set_writer_nice), so that a read
// gets a core first when both wait for one.
//
// Raising a priority back needs CAP_SYS_NICE or an RLIMIT_NICE that allows
// it, which an unprivileged process seldom has: a thread that could not
// restore its priority says so (ThreadPriorityLowered) and a pool of threads
// ends it rather than serve a read with it (serve::RequestThreads).
#pragma once

namespace agentenv {

// Adds `by` to the calling thread's nice value until destroyed, then sets
// it back when permitted. No-op for by <= 0. Errors are not reported: a
// priority is a hint (the thread runs either way). Per thread: use it on the
// thread that runs the work, never move it.
class LowerThreadPriority {
 public:
  explicit LowerThreadPriority(int by);
  ~LowerThreadPriority();
  LowerThreadPriority(const LowerThreadPriority&) = delete;
  LowerThreadPriority& operator=(const LowerThreadPriority&) = delete;

 private:
  int before_ = 0;
  bool lowered_ = false;
};

// Whether the calling thread runs below the priority it had before a
// LowerThreadPriority that could not set it back. Thread-safe (per thread).
bool ThreadPriorityLowered();

}  // namespace agentenv

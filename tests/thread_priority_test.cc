// common/thread_priority: a thread's nice value lowered for a scope, set
// back when the process may raise it (root), left lower and reported so
// when it may not (uid 65534).
#include "common/thread_priority.h"
#include "tests/testutil.h"

#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <thread>

using namespace agentenv;

namespace {

int Nice() { return getpriority(PRIO_PROCESS, 0); }

// In a thread of its own (the test's thread keeps its priority): the nice
// value inside the scope and after it, and whether it says it stayed lower.
struct Seen {
  int before = 0, inside = 0, after = 0;
  bool lowered = false;
};
Seen LowerOnce(int by) {
  Seen s;
  std::thread([&] {
    s.before = Nice();
    {
      LowerThreadPriority low(by);
      s.inside = Nice();
    }
    s.after = Nice();
    s.lowered = ThreadPriorityLowered();
  }).join();
  return s;
}

}  // namespace

TEST_CASE("thread priority: lowered for a scope, set back when permitted, other threads untouched", "[common]") {
  if (!test::IsRoot()) test::Skip("needs root (CAP_SYS_NICE) to raise a priority back");
  const int mine = Nice();
  Seen s = LowerOnce(7);
  CHECK(s.inside == std::min(s.before + 7, 19));
  CHECK(s.after == s.before);
  CHECK_FALSE(s.lowered);
  CHECK(Nice() == mine);
  Seen none = LowerOnce(0);
  CHECK(none.inside == none.before);
}

TEST_CASE("thread priority: unprivileged, a thread stays lower and says so", "[common]") {
  CHECK(test::WithoutNicePrivilege([] {
    Seen s = LowerOnce(5);
    return s.inside == s.before + 5 && s.after == s.inside && s.lowered;
  }));
}

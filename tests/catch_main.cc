#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "testutil.h"

// Skip() (testutil.h): Catch calls this from its handler for exceptions
// that escaped the test case, i.e. after the test's stack is unwound, and
// would report a failure once it returns; so it never returns. 77 is the
// SKIP_RETURN_CODE that tests/CMakeLists.txt sets for every test.
CATCH_TRANSLATE_EXCEPTION(const agentenv::test::SkipTest& e) {
  std::cout << "SKIPPED: " << e.why << std::endl;
  std::fflush(nullptr);
  std::_Exit(77);
}

// Files a test just wrote, made to count as settled for the racy-clean
// rule (snap::kRacyWindowNs: a file changed within 50 ms of a scan's start
// is hashed but not cached, as it may still change within the same tick
// of the kernel's clock) without waiting the window out.
#pragma once

#include <algorithm>
#include <cstdint>

#include "snap/fsops.h"
#include "snap/repo.h"
#include "snap/scan.h"
#include "tests/testutil.h"

namespace agentenv::test {

// The scan start at which what was written before NextClockTick() returned
// `tick` is past the racy window, and anything written later is not.
inline int64_t SettledScanStart(int64_t tick) { return tick + snap::kRacyWindowNs; }

// Makes `r`'s scans and restores (Repo::set_scan_clock) take what the test
// wrote so far as settled, as they would after waiting out the window; a
// file written after this is within the window as usual.
inline void Settle(snap::Repo& r) {
  const int64_t start = SettledScanStart(NextClockTick());
  r.set_scan_clock([start] { return std::max(snap::NowNs(), start); });
}

}  // namespace agentenv::test

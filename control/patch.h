// Applying a unified diff (diff -u, git diff) to one file's content:
// write_file's `patch`. A decoder of outside input: fuzz/patch_fuzzer.cc.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace agentenv::control {

// Applies every "@@ -a,b +c,d @@" hunk of `patch` to `original`, in
// order. "---"/"+++"/"diff"/"index" header lines are skipped; hunk lines
// start with ' ', '-' or '+' ("\ No newline at end of file" applies to the
// line before it). A hunk whose old lines are not at its line number is
// looked for nearby (the nearest match after the previous hunk), as
// patch(1) does with an offset; never with fuzz. Errors (kInvalid, nothing
// applied): "patch: no hunks", more than 1000 hunks, "patch: hunk N: <why>"
// for a malformed header, counts that disagree with the lines, or old lines
// not found. Time: bounded by 1000 hunks times 100,000 line comparisons
// each, plus the sizes. Pure, thread-safe.
Result<std::string> ApplyPatch(std::string_view original, std::string_view patch);

}  // namespace agentenv::control

// Unified diffs of text (`agentenv diff -p`): Myers' O((N+M)D) line diff.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace agentenv {

// Whether `data` looks like text: no NUL byte in its first 8000 bytes
// (git's rule).
bool LooksLikeText(std::string_view data);

// The unified diff (3 lines of context, "--- a/PATH" / "+++ b/PATH"
// headers; /dev/null for a missing side) turning `a` into `b`; empty when
// they are equal. nullopt when more than `max_edits` lines differ (the
// search is bounded: memory grows with the square of the edit count).
std::optional<std::string> UnifiedDiff(std::string_view a, std::string_view b, const std::string& a_name,
                                       const std::string& b_name, size_t max_edits = 4000);

}  // namespace agentenv

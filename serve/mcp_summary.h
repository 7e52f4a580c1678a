// The text content of a tool's result (serve/mcp_session.h): a short
// summary a model reads at a glance — short ids, relative times, counts,
// the output it asked for, and the next useful call — while
// structuredContent keeps the whole reply.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace agentenv::serve {

// The summary of `tool`'s successful reply `result` at time `now_ns`
// (relative times count from it). A tool without its own form gets the
// reply as compact JSON. Pure, thread-safe.
std::string SummarizeResult(const std::string& tool, const nlohmann::json& result, int64_t now_ns);

// "12s ago", "5m ago", "3h ago", "2d ago" (from nanosecond times).
std::string Ago(int64_t then_ns, int64_t now_ns);

}  // namespace agentenv::serve

// Small value formats shared by replies and logs.
#pragma once

#include <cstdint>
#include <string>

#include "store/store.h"

namespace agentenv::control {

// The first 12 hex digits of an id: what humans and models see.
std::string Short(const store::ObjectId& id);

// "2026-11-22 15:47:03" in local time from nanoseconds since the epoch.
std::string FormatTime(int64_t ns);

// Human-readable byte count ("12.3 MiB").
std::string HumanBytes(uint64_t n);

}  // namespace agentenv::control

// The web DVR's page (web/static/*), embedded in the binary at build time
// by web/embed.cmake: no file is read and nothing is fetched at run time.
#pragma once

#include <string_view>
#include <vector>

namespace agentenv::web {

struct Asset {
  std::string_view name;  // file name, e.g. "app.js"
  std::string_view type;  // Content-Type
  std::string_view body;
};

// Every embedded file (generated source). Thread-safe.
const std::vector<Asset>& Assets();

// The asset named exactly `name` (no directories: a path is never looked
// up anywhere); null when there is none. Thread-safe.
inline const Asset* FindAsset(std::string_view name) {
  for (const Asset& a : Assets())
    if (a.name == name) return &a;
  return nullptr;
}

}  // namespace agentenv::web

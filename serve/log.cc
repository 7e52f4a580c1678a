#include "serve/log.h"

#include <unistd.h>

#include "history/node_view.h"
#include "snap/fsops.h"

namespace agentenv::serve {

void Log(const std::string& line) {
  std::string text = history::FormatTime(snap::NowNs()) + " agentenv: " + line + "\n";
  // One write: lines of several threads never interleave.
  (void)!::write(2, text.data(), text.size());
}

}  // namespace agentenv::serve

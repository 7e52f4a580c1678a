// MCP over stdio (serve/mcp.h): the line reader and the one writer.
#include "serve/mcp.h"

#include <iostream>
#include <string>

#include "common/mutex.h"
#include "control/browse.h"
#include "control/daemon_call.h"

namespace agentenv::serve {

using json = nlohmann::json;

namespace {

// std::getline, bounded: a line over kMaxRequestBytes is read to its end
// but not kept (*too_long). False at the end of input.
bool ReadLine(std::istream& in, std::string* line, bool* too_long) {
  line->clear();
  *too_long = false;
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  for (int c; (c = sb->sbumpc()) != std::char_traits<char>::eof();) {
    any = true;
    if (c == '\n') return true;
    if (*too_long) continue;
    line->push_back(char(c));
    if (line->size() > control::kMaxRequestBytes) {
      *too_long = true;
      std::string().swap(*line);
    }
  }
  return any;
}

// The owner of stdout. Locking rule: every message is written whole, and
// flushed, under mu_; nothing else is done while holding it.
class LineWriter {
 public:
  explicit LineWriter(std::ostream& out) : out_(out) {}
  void Send(const json& j) {
    if (j.is_null()) return;  // a request ended without a reply
    std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    MutexLock lock(mu_);
    out_ << line << std::flush;
  }

 private:
  Mutex mu_;
  std::ostream& out_ GUARDED_BY(mu_);
};

}  // namespace

ToolRunner ClientToolRunner(control::Client& client) {
  return [&client](const std::string& op, const json& args, const control::CallContext& call) {
    return client.CallJson(op, args, call);  // a daemon holds the lock: it runs the op
  };
}

void ServeMcp(const std::string& root, std::istream& in, std::ostream& out) {
  control::Client client(root);
  LineWriter writer(out);
  Outbox send = [&writer](const json& j) { writer.Send(j); };
  McpSession session(ClientToolRunner(client), NodeFileReader(client));
  session.set_notifier(send);
  std::string line;
  bool too_long = false;
  while (ReadLine(in, &line, &too_long)) {
    if (too_long) {
      send({{"jsonrpc", "2.0"}, {"id", nullptr},
            {"error", {{"code", -32600}, {"message", "invalid request: a line longer than 16 MiB (the limit) was skipped"}}}});
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    session.HandleText(line, send);
  }
  session.Drain();  // the replies of what was asked before the end still go out
}

}  // namespace agentenv::serve

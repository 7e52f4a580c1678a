// agentenv ctl: send one operation to a running daemon
#include <signal.h>

#include "cli/cli.h"
#include "cli/commands.h"
#include "capture/capture.h"
#include "control/client.h"
#include "control/open_repo.h"
#include "control/ops.h"
#include "serve/http.h"
#include "serve/log.h"
#include "serve/serving.h"
#include "snap/layout.h"
#include "web/dvr_routes.h"

namespace agentenv::cli {

int CmdCtl(int argc, char** argv) {
  // `ctl --root R exec ...`: the options go behind the op too, so that exec
  // is seen and its own parser gets them.
  std::vector<char*> lifted = GlobalsAfterName(argc, argv);
  if (!lifted.empty()) {
    argc = int(lifted.size());
    argv = lifted.data();
  }
  // exec streams its output and takes its command after "--".
  if (argc >= 2 && std::string_view(argv[1]) == "exec") return CmdCtlExec(argc - 1, argv + 1);
  Globals g;
  std::string op, args_json;
  std::vector<std::string> kv;
  std::string names;
  for (const control::OpSpec& spec : control::Ops()) names += (names.empty() ? "" : ", ") + spec.name;
  CLI::App app{"Send one operation to a running daemon: ctl <op> [key=value ...] (ops: " + names +
                   "; `ctl exec -- CMD...` streams)",
               "ctl"};
  AddGlobals(app, g);
  app.add_option("op", op, "Operation")->required();
  app.add_option("args", kv, "Arguments as key=value (values parsed as JSON when they are JSON)");
  app.add_option("--args", args_json, "Arguments as one JSON object");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  json args = json::object();
  if (!args_json.empty()) {
    args = json::parse(args_json, nullptr, false);
    if (args.is_discarded() || !args.is_object())
      return ReportError(g, Error{"ctl: --args must be a JSON object", 0, ErrorCode::kInvalid});
  }
  for (const auto& a : kv) {
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      return ReportError(g, Error{"ctl: argument '" + a + "': expected key=value", 0, ErrorCode::kInvalid});
    auto v = json::parse(a.substr(eq + 1), nullptr, false);
    args[a.substr(0, eq)] = v.is_discarded() ? json(a.substr(eq + 1)) : v;
  }
  control::Client client(g.root);
  auto resp = client.AskDaemon(op, args);
  if (!resp) return ReportError(g, resp.error());
  if (!*resp)
    return ReportError(g, Error{snap::layout::Socket(g.root) + ": no daemon is running (start one with `agentenv daemon`)",
                                0, ErrorCode::kNotFound});
  json result = std::move(**resp);
  return ReportOk(g, result, result.dump(2, ' ', false, json::error_handler_t::replace));
}

}  // namespace agentenv::cli

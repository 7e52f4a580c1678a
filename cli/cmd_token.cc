// agentenv token: scoped tokens of serve --listen: create one reaching one environment (token
// create [--env NAME] [--read-only] [--expires T]), list them without secrets (token ls), revoke
// one (token revoke ID).
#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {
namespace {

std::string TokenLine(const control::TokenInfo& t) {
  return t.id + "  " + (t.env.empty() ? std::string("live tree (/mcp)") : "workspace " + t.env + " (/w/" + t.env + "/mcp)") +
         (t.read_only ? "  read-only" : "") +
         (t.expires.empty() ? "" : (t.expired ? "  expired " : "  expires ") + t.expires) + "  created " + t.created;
}

}  // namespace

int CmdToken(int argc, char** argv) {
  Globals g;
  control::TokenCreateRequest create_req;
  std::string id;
  CLI::App app{"Tokens for serve --listen that reach one environment only: the live tree (/mcp) or one "
               "workspace (/w/NAME/mcp), optionally read-only and expiring. The operator's token "
               "(<root>/http-token) reaches everything. A scoped token is refused (403) everywhere else, and "
               "required only where the listener requires a token (--token-file, or any non-loopback bind)",
               "token"};
  AddGlobals(app, g);
  app.require_subcommand(1);
  auto* create = app.add_subcommand("create", "Make a token; its secret is printed once (only its hash is stored)");
  create->add_option("--env", create_req.env, "Workspace the token reaches (default: the live tree)");
  create->add_flag("--read-only", create_req.read_only, "Reads history and files only: no exec, snapshot, rollback, fork");
  create->add_option("--expires", create_req.expires, "Valid for this long: 90s, 30m, 24h, 7d (default: until revoked)");
  auto* ls = app.add_subcommand("ls", "List the tokens, never their secrets");
  auto* revoke = app.add_subcommand("revoke", "Revoke a token by its id (token ls)");
  revoke->add_option("id", id, "Token id")->required();
  for (auto* sub : {create, ls, revoke}) {
    sub->add_option("--root", g.root, "Repository root");
    sub->add_flag("--json", g.json, "Print one JSON object on stdout");
    sub->add_flag("-q,--quiet", g.quiet, "No summary on success");
  }
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  control::Client client(g.root);
  if (create->parsed()) {
    g.data = true;  // the secret is the output: -q keeps it
    return Print(g, client.Call(create_req), [](const control::TokenCreateReply& r) {
      return r.secret + "\n" + TokenLine(r.token) + "\n(the secret is shown only now: send it as 'Authorization: Bearer <secret>')";
    });
  }
  if (revoke->parsed())
    return Print(g, client.Call(control::TokenRevokeRequest{id}), [](const control::TokenRevokeReply& r) {
      return r.existed ? "revoked token " + r.revoked : "token " + r.revoked + ": no such token, nothing to revoke";
    });
  g.data = true;
  return Print(g, client.Call(control::TokenLsRequest{}), [](const control::TokenLsReply& r) {
    std::string text;
    for (const auto& t : r.tokens) text += TokenLine(t) + "\n";
    return text.empty() ? std::string("no tokens (agentenv token create makes one)") : text;
  });
}

}  // namespace agentenv::cli

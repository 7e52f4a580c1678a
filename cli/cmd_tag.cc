#include "cli/cli.h"
#include "cli/commands.h"
#include "control/client.h"

namespace agentenv::cli {

int CmdTag(int argc, char** argv) {
  Globals g;
  control::TagRequest req;
  CLI::App app{"List tags (no arguments), tag a node (tag NAME [REF]), or delete a tag (tag -d NAME)", "tag"};
  AddGlobals(app, g);
  app.add_option("name", req.name, "Tag name");
  app.add_option("ref", req.ref, "Node to tag (default HEAD)");
  app.add_flag("-d,--delete", req.del, "Delete the tag");
  app.add_flag("-f,--force", req.force, "Move the tag if it names another node");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  g.data = req.name.empty();  // a listing is data: -q keeps it
  control::Client client(g.root);
  return Print(g, client.Call(req), [](const control::TagReply& r) {
    if (!r.deleted.empty()) return "deleted tag " + r.deleted;
    if (!r.name.empty()) return "tagged " + r.id.substr(0, 12) + " as " + r.name;
    std::string text;
    for (const auto& t : r.tags.value_or(std::vector<control::TagEntry>{})) text += t.name + "  " + t.id.substr(0, 12) + "\n";
    return text.empty() ? std::string("no tags") : text;
  });
}

}  // namespace agentenv::cli

// The "one way" rules of docs/design.md ("Durable writes, one way",
// "Locking rules the compiler checks", "One pool", "Threads",
// "Repository layout"), read from the sources like the include rule
// (include_rule_test.cc): each rule is a pattern that may appear only in
// the files that own the thing, every other place is named with the line.
// Each exception is listed with its reason, and an exception that no
// longer matches anything fails too, so the lists cannot rot.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace agentenv::test {
namespace {

namespace fs = std::filesystem;

// The project's own code: every folder with a CMakeLists.txt but tests/,
// bench/ and fuzz/ (test code may sleep, read streams and spawn threads).
struct Source {
  std::string rel;                 // "snap/scan.cc"
  std::vector<std::string> code;   // lines, comments blanked out
  std::vector<std::string> notes;  // the comments of each line
};

// Splits `line` into code and comment, keeping string and character
// literals in the code (a "//" inside a literal is no comment). `in_block`
// carries a /* */ comment across lines.
void SplitComment(const std::string& line, bool& in_block, std::string& code, std::string& note) {
  code.clear();
  note.clear();
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (in_block) {
      if (c == '*' && i + 1 < line.size() && line[i + 1] == '/') {
        in_block = false;
        ++i;
      } else {
        note += c;
      }
      continue;
    }
    if (quote) {
      code += c;
      if (c == '\\' && i + 1 < line.size()) code += line[++i];
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') {
      // A digit separator (1'000) is no literal.
      if (c == '\'' && i > 0 && std::isxdigit(static_cast<unsigned char>(line[i - 1]))) {
        code += c;
        continue;
      }
      quote = c;
      code += c;
    } else if (c == '/' && i + 1 < line.size() && line[i + 1] == '/') {
      note += line.substr(i + 2);
      return;
    } else if (c == '/' && i + 1 < line.size() && line[i + 1] == '*') {
      in_block = true;
      ++i;
    } else {
      code += c;
    }
  }
}

Source Read(const fs::path& root, const fs::path& file) {
  Source s;
  s.rel = fs::relative(file, root).generic_string();
  std::ifstream in(file);
  bool in_block = false;
  std::string line, code, note;
  while (std::getline(in, line)) {
    SplitComment(line, in_block, code, note);
    s.code.push_back(code);
    s.notes.push_back(note);
  }
  return s;
}

bool IsModule(const fs::path& dir) {
  const std::string name = dir.filename();
  return fs::exists(dir / "CMakeLists.txt") && name != "tests" && name != "bench" && name != "fuzz";
}

std::vector<Source> Sources(const fs::path& root) {
  std::vector<Source> out;
  for (const auto& d : fs::directory_iterator(root)) {
    if (!d.is_directory() || !IsModule(d.path())) continue;
    for (const auto& e : fs::recursive_directory_iterator(d.path())) {
      const std::string ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".h" || ext == ".cc")) out.push_back(Read(root, e.path()));
    }
  }
  return out;
}

// A pattern that only the files in `owners` may contain (in code, not in
// comments), each owner with the reason it may.
struct Rule {
  std::string name;     // the rule, as docs/design.md says it
  std::regex pattern;
  std::map<std::string, std::string> owners;  // file -> why it may
};

struct Finding {
  std::string where;  // "file:line: text"
  std::string rule;
};

// Every line breaking a rule, and every owner that no longer matches
// (an exception left behind by a change).
std::vector<Finding> Check(const std::vector<Source>& sources, const std::vector<Rule>& rules) {
  std::vector<Finding> out;
  for (const Rule& r : rules) {
    std::set<std::string> used;
    for (const Source& s : sources) {
      for (size_t i = 0; i < s.code.size(); ++i) {
        if (!std::regex_search(s.code[i], r.pattern)) continue;
        if (r.owners.count(s.rel)) {
          used.insert(s.rel);
          continue;
        }
        out.push_back({s.rel + ":" + std::to_string(i + 1) + ": " + s.code[i], r.name});
      }
    }
    for (const auto& [file, why] : r.owners)
      if (!used.count(file)) out.push_back({file + ": listed as an exception (" + why + ") but never matches", r.name});
  }
  return out;
}

// The names snap/layout.h gives the entries of a repository's root
// ("store", "meta", "work", "config", ...).
std::set<std::string> LayoutNames(const fs::path& root) {
  std::set<std::string> names;
  std::ifstream in(root / "snap/layout.h");
  static const std::regex entry(R"re(root \+ "/([A-Za-z0-9_.-]+))re");
  std::string line;
  while (std::getline(in, line))
    for (std::sregex_iterator it(line.begin(), line.end(), entry), end; it != end; ++it) names.insert((*it)[1]);
  return names;
}

std::vector<Rule> Rules(const fs::path& root) {
  std::vector<Rule> rules;
  rules.push_back(
      {"durable writes go through common/durable.h (WriteFileDurably, FsyncDir)",
       std::regex(R"(\b(fsync|fdatasync)\s*\()"),
       {{"common/durable.cc", "the one way"},
        {"store/batch.cc", "packs: appended in place and fsynced before the index commit names them"},
        {"store/gc.cc", "compaction: the new pack is durable and indexed before the old one is unlinked"},
        {"snap/restore_marker.cc", "the `restoring` marker: written in place under its flock, which is its meaning"},
        {"snap/repo.cc", "the `initializing` marker: written in place under its flock, which is its meaning"},
        {"mounts/views.cc", "a view's record: made O_EXCL and flocked, the lock is the lease"},
        {"archive/oci_layout.cc", "content-named blobs: hashed while written, verified before the rename"},
        {"registry/transfer.cc", "content-named blobs: hashed while written, verified before the rename"}}});
  rules.push_back({"whole files are read with common/read_all.h (ReadUpTo, ReadFileUpTo), not streams",
                   std::regex(R"(\b(std::)?(i|io)?fstream\b|\brdbuf\s*\(|\bfopen\s*\(|istreambuf_iterator)"),
                   {{"serve/mcp.cc", "MCP over stdio reads its input a line at a time as it comes, no file"},
                    {"store/map_trim.cc", "scans /proc/self/maps a line at a time for one mapping"}}});
  rules.push_back(
      {"data-parallel work runs on the one pool (store/worker_pool.h); other threads are long-lived owners",
       std::regex(R"(\bstd::(j?thread|async)\b(?!::)|\bpthread_create\b)"),
       {{"store/worker_pool.h", "the pool"},
        {"snap/scan.cc", "the walk: deepest directory first from a shared stack (a FIFO pool would hold a level's fds)"},
        {"snap/restore_write.cc", "one std::async commits a stat-cache batch while the next is written"},
        {"snap/restore_early.cc", "the early writer: one thread writes a fresh tree while its scan goes on"},
        {"watch/debounce.h", "the watcher's thread, reading inotify"},
        {"watch/debounce.cc", "the watcher's thread, reading inotify"},
        {"capture/capture.h", "the capture's thread, waiting for the writer mutex"},
        {"capture/capture.cc", "the capture's thread, waiting for the writer mutex"},
        {"serve/socket.h", "the socket's acceptor"},
        {"serve/socket.cc", "the socket's acceptor and one reader per client"},
        {"serve/request_threads.cc", "request threads: one per request in flight, never queued"},
        {"serve/http_loop.h", "the HTTP listener's event loop"},
        {"serve/http_loop.cc", "the HTTP listener's event loop"},
        {"web/events.h", "the DVR's event poller"},
        {"web/events.cc", "the DVR's event poller"},
        {"cli/progress.h", "the progress line, drawn every 200 ms"},
        {"cli/progress.cc", "the progress line, drawn every 200 ms"}}});
  rules.push_back({"random bytes come from common/random.h (getrandom, never a weaker source)",
                   std::regex(R"(\bgetrandom\s*\(|random_device|/dev/u?random|\bs?rand\s*\(|\bmt19937|\barc4random)"),
                   {{"common/random.cc", "the one source"}}});
  std::string names;
  for (const std::string& n : LayoutNames(root)) names += (names.empty() ? "" : "|") + std::regex_replace(n, std::regex(R"([.])"), R"(\.)");
  rules.push_back({"paths of the repository are named by snap/layout.h only",
                   std::regex(R"(\broot\w*(\(\))?\s*\+\s*"/()" + names + R"()[/"])"),
                   {{"snap/layout.h", "the one place"}}});
  rules.push_back(
      {"shared state is guarded by common/mutex.h's Mutex, which clang's -Wthread-safety checks",
       std::regex(R"(\bstd::(mutex|shared_mutex|recursive_mutex|timed_mutex|condition_variable)\b)"),
       {{"common/mutex.h", "the annotated wrapper"},
        {"store/index.h", "resize_mu_ is a reader/writer lock: Mutex has no shared mode"},
        {"store/index.cc", "resize_mu_ is a reader/writer lock: Mutex has no shared mode"},
        {"snap/repo.h", "write_mu_ is held by a WriteLock that moves between callers, which the analysis cannot follow"},
        {"snap/repo.cc", "write_mu_ is held by a WriteLock that moves between callers, which the analysis cannot follow"}}});
  return rules;
}

// Paths named in comments ("see snap/scan.h") that exist in the tree:
// a comment naming a file that was moved or removed misleads its reader.
std::vector<Finding> StaleFileNames(const fs::path& root, const std::vector<Source>& sources) {
  std::set<std::string> top;
  for (const auto& d : fs::directory_iterator(root))
    if (d.is_directory()) top.insert(d.path().filename());
  static const std::regex path_re(R"re((?:^|[^\w./-])((?:[a-z0-9_]+/)+[A-Za-z0-9_.-]+\.(?:h|cc|md|sh|mjs|json|yml)))re");
  std::vector<Finding> out;
  for (const Source& s : sources) {
    for (size_t i = 0; i < s.notes.size(); ++i) {
      const std::string& note = s.notes[i];
      for (std::sregex_iterator it(note.begin(), note.end(), path_re), end; it != end; ++it) {
        const std::string p = (*it)[1];
        if (!top.count(p.substr(0, p.find('/')))) continue;
        if (fs::exists(root / p) || fs::exists(root / fs::path(s.rel).parent_path() / p)) continue;
        out.push_back({s.rel + ":" + std::to_string(i + 1) + ": names " + p, "comments name files that exist"});
      }
    }
  }
  return out;
}

TEST_CASE("design rules: durable writes, reads, threads, random, repository paths and mutexes each have one way",
          "[design]") {
  const fs::path root = AGENTENV_SOURCE_DIR;
  REQUIRE(fs::exists(root / "snap/layout.h"));
  const auto sources = Sources(root);
  REQUIRE(sources.size() > 100);
  REQUIRE(LayoutNames(root).count("meta"));
  for (const Finding& f : Check(sources, Rules(root))) FAIL_CHECK(f.where << "\n  rule: " << f.rule << " (docs/design.md)");
}

TEST_CASE("design rules: comments name files that exist", "[design]") {
  const fs::path root = AGENTENV_SOURCE_DIR;
  for (const Finding& f : StaleFileNames(root, Sources(root))) FAIL_CHECK(f.where);
}

// The checker itself: a scratch tree breaking each rule once, and a
// comment that only mentions what a rule forbids.
TEST_CASE("design rules: a breach of each rule is found, a comment or a string is not code", "[design]") {
  const fs::path dir = fs::temp_directory_path() / ("agentenv-design-rules-" + std::to_string(::getpid()));
  fs::create_directories(dir / "snap");
  fs::create_directories(dir / "mounts");
  std::ofstream(dir / "snap/CMakeLists.txt") << "";
  std::ofstream(dir / "mounts/CMakeLists.txt") << "";
  std::ofstream(dir / "snap/layout.h") << "inline std::string Meta(const std::string& root) { return root + \"/meta\"; }\n";
  std::ofstream(dir / "mounts/a.cc")
      << "void Save() { ::fsync(fd); }\n"                       // durable by hand
      << "std::ifstream in(path);\n"                            // a stream read
      << "auto f = std::async(std::launch::async, Check);\n"    // a thread of its own
      << "uint64_t t = NowNs() ^ getpid(); rand();\n"           // a weaker random source
      << "std::string m = repo.root() + \"/meta\";\n"           // a path by hand
      << "std::mutex mu;\n"                                     // a lock the analysis cannot see
      << "// std::thread in a comment; see snap/gone.h\n"       // comments: only the file name counts
      << "const char* s = \"std::mutex // not a comment\";\n";  // a literal is code
  std::ofstream(dir / "mounts/b.cc") << "unsigned n = std::thread::hardware_concurrency(); std::this_thread::yield();\n";
  const auto sources = Sources(dir);
  std::vector<Rule> rules = Rules(dir);
  // The real exceptions name files this tree lacks; layout.h is the one it has.
  for (Rule& r : rules) std::erase_if(r.owners, [](const auto& o) { return o.first != "snap/layout.h"; });
  auto found = Check(sources, rules);
  auto stale = StaleFileNames(dir, sources);
  fs::remove_all(dir);
  std::multiset<std::string> where;
  for (const Finding& f : found) where.insert(f.where.substr(0, f.where.find(':', f.where.find(':') + 1)));
  CHECK(where == std::multiset<std::string>{"mounts/a.cc:1", "mounts/a.cc:2", "mounts/a.cc:3", "mounts/a.cc:4",
                                             "mounts/a.cc:5", "mounts/a.cc:6", "mounts/a.cc:8"});
  REQUIRE(stale.size() == 1);
  CHECK(stale[0].where == "mounts/a.cc:7: names snap/gone.h");
}

}  // namespace
}  // namespace agentenv::test

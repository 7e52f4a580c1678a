// IgnoreRules: which tree paths the change journal (and snapshots) skip.
//
// gitignore-style patterns, with one deliberate difference: every pattern is
// anchored at the tree root. "/tmp", "var/tmp" and also "*.swp" (no slash)
// match from the root only; a name at any depth must be written "**/*.swp".
// (git would let "*.swp" float to any depth; anchoring everything means a
// rule never silently reaches into /usr or /home.)
//
// Syntax per line: '#' comment, blank lines skipped, trailing spaces dropped
// (unless escaped), leading '!' negates, trailing '/' matches directories
// only, '*' '?' '[...]' ('!' or '^' negates a class, ranges a-z) within one
// path component, '**' as a whole component matches zero or more components,
// '\' escapes the next character. The last matching rule wins; a path is
// ignored when it or any ancestor directory is ignored (so, as in git, '!'
// cannot re-include something below an ignored directory).
//
// Paths are tree-relative byte strings ("usr/lib/x", no leading slash, ""
// is the root, which is never ignored); no encoding is assumed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace agentenv::watch {

class IgnoreRules {
 public:
  IgnoreRules() = default;  // ignores nothing

  // System noise every rootfs has: /proc /sys /dev /run /tmp /var/tmp, apt
  // caches and lists, editor swap/backup files at any depth.
  static IgnoreRules Defaults();

  // Parses a whole rules file. Errors (kInvalid): "line N: <why>" for an
  // unterminated '[', a dangling '\', or a pattern that is empty after '!'.
  static Result<IgnoreRules> Parse(std::string_view text);

  // Defaults() plus the rules file at `path` (a repository's <root>/ignore;
  // absent: the defaults alone). Errors: kInvalid "<path>: line N: ...",
  // I/O reading it.
  static Result<IgnoreRules> WithFile(const std::string& path);

  // Appends one pattern line (same syntax and errors as Parse, without the
  // line number); comments and blank lines are accepted and do nothing.
  Result<void> AddPattern(std::string_view line);

  // Appends all rules of `more` after ours (so they win over ours).
  void Add(const IgnoreRules& more);

  // True when relpath or any of its ancestors is ignored. is_dir says
  // whether relpath itself is a directory (for dir-only rules). Allocation
  // free for paths up to 64 components. Thread-safe for concurrent readers.
  bool Ignored(std::string_view relpath, bool is_dir) const;

  // The verdict for relpath alone, ancestors not consulted. Equal to
  // Ignored() when the parent is known not to be ignored, e.g. for an entry
  // of a watched directory; cheaper by the depth of the path.
  bool Matches(std::string_view relpath, bool is_dir) const;

  // The rules as one directory's entries see them, for asking about many
  // entries of it: DirView(dir).Matches(name, d) == Matches(dir + "/" +
  // name, d) for a clean `dir` ("" for the root; no empty components) and
  // a name without '/'. Made once per directory, it keeps only the rules
  // that can match there (a rule without "**" only at its depth and below
  // its literal prefix), so a scan's verdict per entry costs about one
  // lookup by the name's last byte. Holds a pointer to these rules: they
  // must outlive it and not change meanwhile. Thread-safe like Matches.
  class DirView {
   public:
    bool Matches(std::string_view name, bool is_dir) const;

   private:
    friend class IgnoreRules;
    const IgnoreRules* rules_ = nullptr;
    std::string dir_;               // for rules that need the whole path
    std::vector<uint32_t> last_;    // rules_ of fixed depth whose prefix matched: the name decides
    std::vector<uint32_t> whole_;   // rules with an inner "**": matched against dir_/name
  };
  DirView ForDir(std::string_view dir) const;

  // The paths that rules name literally (no wildcard, no '!'), e.g. "tmp",
  // "var/lib/apt/lists": where ignored content can be found without a walk.
  // Other rules ("**/*.swp") may match anywhere. Not filtered by later
  // '!' rules: ask Ignored() about each.
  std::vector<std::string> LiteralPaths() const;

  size_t size() const { return rules_.size(); }

 private:
  struct Segment {
    enum Kind { kLiteral, kGlob, kAnyDepth } kind;
    std::string text;  // literal bytes (escapes resolved) or the glob source
    // For kAnyDepth: how many segments follow when none of them is another
    // "**" (then only one split of the path can match), else -1.
    int fixed_tail = -1;
    // For kGlob: the literal bytes every match starts and ends with (before
    // the first wildcard or escape; after the last '*' when nothing else
    // special follows it): a quick reject before the glob runs, since a
    // scan asks about every entry of the tree ("*.swp" against "libc.so.6").
    std::string prefix, suffix;
  };
  struct Rule {
    std::vector<Segment> segments;
    int fixed_len = -1;  // component count when there is no "**": a quick reject
    bool last_name_only = false;  // "**/<one segment>": only the last name decides
    bool negate = false;
    bool dir_only = false;
  };

  // -1: no rule matched, 0: kept by a '!' rule, 1: ignored.
  int Verdict(const std::string_view* comps, size_t n, bool is_dir) const;
  // Files rule `i` in by_last_ or other_.
  void Index(uint32_t i);

  std::vector<Rule> rules_;
  // Indexes of rules_, each list in rule order. "**/<name>" rules by the
  // byte a matching name must end with (its literal suffix's last byte;
  // 256: any), so that Matches tries only those that can match the name
  // at hand ("*.swp" is never tried against "copyright"); other_: every
  // other rule.
  std::vector<uint32_t> by_last_[257];
  std::vector<uint32_t> other_;
};

}  // namespace agentenv::watch

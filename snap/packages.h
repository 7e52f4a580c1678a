// snap/packages: which packages a node installed, removed or changed, read
// from the trees alone: the agent cooperates in nothing.
//
// A diff already visits every changed path of a snapshot; PackageWatch
// looks at each (a few string comparisons) and keeps the handful that name
// a package database: dpkg's var/lib/dpkg/status, Python's *.dist-info and
// *.egg-info under any site-packages or dist-packages, npm's
// node_modules/[@scope/]<name>/package.json, and a new .git directory.
// Resolve then reads only those files (old content from the parent's
// trees, new content from the scan's batch or the store), so the cost
// follows what changed: a snapshot that did not touch the status file
// never reads it. Its input is the agent's bytes: parsing is bounded
// (snap/package_parse.h), and nothing here fails a snapshot.
//
// What is reported (docs/design.md, "Package deltas"):
//   apt  every package whose dpkg state moved between "on disk" (installed,
//        triggers-pending/-awaited) and not (absent, config-files,
//        not-installed): +installed, -removed, ~version changed; a package
//        dpkg left unpacked, half-installed or half-configured is
//        !unfinished. Dependencies: apt's extended_states Auto-Installed.
//   pip  a distribution directory (or egg-info file) appearing or going;
//        the same normalized name going and appearing in one
//        site-packages is ~. Dependencies: no REQUESTED file while another
//        new one in that site-packages has it. usr/lib/python3*/
//        dist-packages is left to apt (the distribution's own packages).
//   npm  a package.json added, removed or changed in version. Dependencies:
//        nested (node_modules/a/node_modules/b), or not named by the
//        project's package.json beside node_modules; without one (a global
//        prefix) every top-level package was asked for.
//   git  a .git directory holding HEAD appearing (+) or going (-).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "snap/diff.h"
#include "snap/varint.h"
#include "store/store.h"

namespace agentenv::snap {

enum class Ecosystem : uint8_t { kApt = 1, kPip = 2, kNpm = 3, kGit = 4 };
// "apt", "pip", "npm", "git"; "other" for a value a newer binary wrote.
std::string_view EcosystemName(Ecosystem e);

struct PackageDelta {
  Ecosystem ecosystem = Ecosystem::kApt;
  // '+' installed, '-' removed, '~' version changed (up or down), '!' left
  // unfinished by dpkg (unpacked, half-installed, half-configured).
  char op = '+';
  // The package's name as its ecosystem spells it (apt: "name", or
  // "name:arch" for a foreign architecture; npm: "@scope/name"; git: the
  // repository directory's last component). Names and versions are valid
  // UTF-8 without control characters (other bytes read as '?').
  std::string name;
  std::string old_version;  // '-', '~'; '!': the version installed before, if any
  std::string new_version;  // '+', '~', '!'
  // Tree-relative directory, raw bytes: pip the site-packages directory,
  // npm the node_modules directory, git the repository (the directory
  // holding .git); apt empty.
  std::string where;
  bool dependency = false;  // pulled in for another package (see above)
  bool operator==(const PackageDelta&) const = default;
};

struct PackageDeltas {
  // apt, pip, npm, git; in each, asked-for packages before dependencies,
  // then by name. At most kMaxListed per ecosystem.
  std::vector<PackageDelta> items;
  // Deltas of an ecosystem past kMaxListed (or past what one snapshot
  // inspects: kMaxSeen paths per kind), counted but not listed.
  std::map<Ecosystem, uint64_t> omitted;
  static constexpr size_t kMaxListed = 256;
  bool empty() const { return items.empty() && omitted.empty(); }
  bool operator==(const PackageDeltas&) const = default;
};

// ---- labels: what `log` shows and a model reads first

// One line, at most ~kMaxLabelPrefix bytes plus one item:
//   "apt +jq 1.6-2.1 +libjq1 +libonig5; pip +requests 2.31.0 (+4 deps);
//    npm ~left-pad 1.1.0 -> 1.3.0; new git repo /root/proj"
// Asked-for packages with versions; up to 3 dependencies by name, more as
// a count ("(+12 deps)"); what does not fit as "(+N more)". "" when empty.
std::string PackageLabel(const PackageDeltas& d);
inline constexpr size_t kMaxLabelPrefix = 150;
// "<PackageLabel>; <label>" (either alone when the other is empty). A
// label that already leads with PackageLabel(d) is returned as is: a node
// replayed from an OCI image carries its original label.
std::string LeadWithPackages(const PackageDeltas& d, std::string_view label);
// `title` without the PackageLabel(d) it leads with (as is when it does not).
std::string_view WithoutPackages(std::string_view title, const PackageDeltas& d);

// ---- byte format (the package section of a node record, snap/meta.h;
// docs/store-format.md)

void EncodePackageDeltas(ByteWriter& w, const PackageDeltas& d);
// False on malformed or truncated input (counts are checked against the
// bytes left, so nothing is allocated for lies).
bool DecodePackageDeltas(ByteReader& r, size_t max_items, PackageDeltas* d);

// ---- detection

// Reads one object's bytes (a chunk or a manifest).
using ObjectLoader = std::function<Result<std::vector<uint8_t>>(const store::ObjectId&)>;

// Collects the package-relevant differences of one diff, then reads them.
// Not thread-safe; one per diff.
class PackageWatch {
 public:
  // Paths of one kind kept at most; more are counted in `omitted`.
  static constexpr size_t kMaxSeen = 4096;
  // One difference of the diff (Delta's `seen` callback).
  void See(const Difference& d);
  // Whether any difference seen names a package database.
  bool any() const;
  // Reads the files seen (old_root's trees side by side with new_root's)
  // and says what changed. Never fails: a file that cannot be read or
  // parsed (missing object, over a cap, malformed) gives no deltas, or a
  // name from its path; at most kMaxReadBytes of METADATA and package.json
  // content are read, beyond which names come from paths alone.
  PackageDeltas Resolve(const TreeLoader& trees, const ObjectLoader& objects, const store::ObjectId& old_root,
                        const store::ObjectId& new_root) const;
  static constexpr uint64_t kMaxReadBytes = uint64_t{64} << 20;

  struct Ref {
    Kind kind = Kind::kFile;
    store::ObjectId id;
    store::ObjectType content = store::ObjectType::kChunk;
    uint64_t size = 0;
  };
  struct Seen {
    char op = '+';
    std::string path;
    std::optional<Ref> old_ref, new_ref;
  };

 private:
  std::optional<Seen> dpkg_;
  std::vector<Seen> py_, npm_, git_;
  std::map<Ecosystem, uint64_t> overflow_;
};

// The package deltas from tree `from` to `to`: a diff (O(changes)) watched
// by a PackageWatch. For nodes whose record holds none (Repo::Packages).
// Errors: the diff's (missing or corrupt trees).
Result<PackageDeltas> PackageDeltasBetween(const TreeLoader& trees, const ObjectLoader& objects,
                                           const store::ObjectId& from, const store::ObjectId& to);

// Whether snapshots compute package deltas: unless AGENTENV_PACKAGES=off
// (for measuring what they cost).
bool PackageDeltasEnabled();

}  // namespace agentenv::snap

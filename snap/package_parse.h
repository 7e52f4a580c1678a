// snap/package_parse: parsers for the package databases a tree holds:
// dpkg's status file, apt's extended_states, Python's METADATA / PKG-INFO
// and npm's package.json (snap/packages.h reads them to say which
// packages a node installed).
//
// Their input is whatever the agent wrote into its tree: any bytes. Every
// parser makes one pass, caps sizes and counts (input past a cap is
// refused whole, never half read: a status file cut short would report
// every package after the cut as removed), allocates no more than a small
// multiple of its input, throws nothing and never crashes. Pure functions,
// thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace agentenv::snap {

// A dpkg status file or extended_states larger than this is not read.
inline constexpr size_t kMaxDpkgText = size_t{32} << 20;
// Paragraphs of one file; a Debian system has a few thousand packages.
inline constexpr size_t kMaxDpkgPackages = 100000;
// A package.json larger than this is not read (they are a few KiB).
inline constexpr size_t kMaxPackageJson = size_t{1} << 20;
// Names, versions and architectures longer than this are not believed:
// the paragraph (or file) counts as naming no package.
inline constexpr size_t kMaxPackageField = 256;
// Dependency names kept from one package.json.
inline constexpr size_t kMaxNpmDependencies = 10000;

// A package's state in dpkg's database (the third word of Status:).
enum class DpkgState : unsigned char {
  kNotInstalled,  // not-installed, or a word dpkg does not write
  kConfigFiles,   // removed, its conffiles kept
  kUnfinished,    // unpacked, half-installed, half-configured: dpkg stopped midway
  kInstalled,     // installed, triggers-pending, triggers-awaited
};

struct DpkgPackage {
  std::string name, arch, version;
  DpkgState state = DpkgState::kNotInstalled;
  bool operator==(const DpkgPackage&) const = default;
};
// Keyed by "name:arch" (arch as written, empty when absent): Multi-Arch
// packages are installed once per architecture.
using DpkgStatus = std::map<std::string, DpkgPackage>;

// The Package, Architecture, Version and Status fields of each paragraph
// (field names case-insensitive, continuation lines skipped). A paragraph
// without Package, or with a field over kMaxPackageField, is left out.
// nullopt: over kMaxDpkgText or kMaxDpkgPackages.
std::optional<DpkgStatus> ParseDpkgStatus(std::string_view text);

// The "name:arch" keys apt's extended_states marks `Auto-Installed: 1`
// (installed as a dependency). nullopt: over the caps, as above.
std::optional<std::set<std::string>> ParseAptAutoInstalled(std::string_view text);

struct PyMetadata {
  std::string name, version;
};
// Name: and Version: from the header block of a METADATA or PKG-INFO file
// (up to the first empty line; the description after it is not read).
// nullopt: no Name, or one over kMaxPackageField.
std::optional<PyMetadata> ParsePyMetadata(std::string_view text);

// A project name as PEP 503 compares them: lowercase, each run of '-',
// '_' and '.' one '-'.
std::string NormalizePyName(std::string_view name);

struct NpmManifest {
  std::string name, version;  // empty when absent or not a string
  // With want_deps: the names under dependencies, devDependencies,
  // optionalDependencies and peerDependencies (at most
  // kMaxNpmDependencies).
  std::set<std::string> dependencies;
};
// The top-level fields of a package.json, read by a streaming parser: no
// document is built, so nesting costs a bit per level, not a node.
// nullopt: not a JSON object, malformed, or over kMaxPackageJson.
std::optional<NpmManifest> ParsePackageJson(std::string_view text, bool want_deps);

}  // namespace agentenv::snap

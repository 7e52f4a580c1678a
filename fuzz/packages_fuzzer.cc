// Package databases as an agent could write them (snap/package_parse.h,
// snap/packages.h): dpkg's status file, apt's extended_states, METADATA,
// package.json, and a node record's package section. The first byte picks
// the input, the rest is its bytes. Selectors 5 and 6 go through
// PackageWatch::Resolve with in-memory trees, as a snapshot would: the
// deltas it reports must be printable (valid UTF-8, no control
// characters) and within the caps, whatever the files held.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "fuzz/fuzz_env.h"
#include "snap/package_parse.h"
#include "snap/packages.h"

namespace {

using namespace agentenv;
using namespace agentenv::snap;

// Valid UTF-8 (no overlong forms, surrogates or values past U+10FFFF)
// without C0 controls or DEL.
bool Printable(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    auto c = uint8_t(s[i]);
    if (c < 0x20 || c == 0x7f) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      auto x = uint8_t(s[i + k]);
      if ((x & 0xc0) != 0x80) return false;
      cp = cp << 6 | (x & 0x3f);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n;
  }
  return true;
}

void CheckDeltas(const PackageDeltas& d) {
  std::map<Ecosystem, size_t> per;
  for (const PackageDelta& x : d.items) {
    FUZZ_CHECK(Printable(x.name) && Printable(x.old_version) && Printable(x.new_version),
               "a delta names " + x.name + " " + x.old_version + " " + x.new_version);
    FUZZ_CHECK(x.name.size() <= kMaxPackageField && x.old_version.size() <= kMaxPackageField &&
                   x.new_version.size() <= kMaxPackageField,
               "a delta's name or version is over the cap");
    FUZZ_CHECK(++per[x.ecosystem] <= PackageDeltas::kMaxListed, "more deltas listed than kMaxListed");
  }
  std::string label = PackageLabel(d);
  FUZZ_CHECK(Printable(label), "the label is not printable: " + label);
  FUZZ_CHECK(label.size() <= 2 * kMaxLabelPrefix + 4 * 200, "a label of " + std::to_string(label.size()) + " bytes");
}

// In-memory trees and objects: a snapshot's view of the files.
struct Fake {
  Fake() { trees[root] = {}; }
  store::ObjectId root;  // all zero: the root on both sides
  std::map<store::ObjectId, Tree> trees;
  std::map<store::ObjectId, std::vector<uint8_t>> objects;
  Entry File(const std::string& name, std::string_view content) {
    std::vector<uint8_t> b(content.begin(), content.end());
    Entry e;
    e.name = name;
    e.kind = Kind::kFile;
    e.size = b.size();
    e.id = store::ObjectId::Of(b);
    objects[e.id] = std::move(b);
    return e;
  }
  Entry Dir(const std::string& name, Tree t, uint8_t tag) {
    Entry e;
    e.name = name;
    e.kind = Kind::kDir;
    e.id.bytes.fill(tag);
    trees[e.id] = std::move(t);
    return e;
  }
  PackageDeltas Resolve(const PackageWatch& w) {
    TreeLoader tl = [this](const store::ObjectId& id) -> Result<Tree> {
      auto it = trees.find(id);
      if (it == trees.end()) return Fail(ErrorCode::kNotFound, "tree");
      return it->second;
    };
    ObjectLoader ol = [this](const store::ObjectId& id) -> Result<std::vector<uint8_t>> {
      auto it = objects.find(id);
      if (it == objects.end()) return Fail(ErrorCode::kNotFound, "object");
      return it->second;
    };
    return w.Resolve(tl, ol, root, root);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 7) {
    case 0: {
      auto db = ParseDpkgStatus(text);
      if (!db) return 0;
      FUZZ_CHECK(db->size() <= kMaxDpkgPackages, "too many packages kept");
      for (const auto& [key, p] : *db) {
        FUZZ_CHECK(!p.name.empty() && key == p.name + ":" + p.arch, "key " + key + " for " + p.name);
        FUZZ_CHECK(p.name.size() <= kMaxPackageField && p.version.size() <= kMaxPackageField &&
                       p.arch.size() <= kMaxPackageField,
                   "a field over the cap was kept");
      }
      break;
    }
    case 1: {
      auto a = ParseAptAutoInstalled(text);
      if (a) FUZZ_CHECK(a->size() <= kMaxDpkgPackages, "too many names kept");
      break;
    }
    case 2: {
      auto m = ParsePyMetadata(text);
      if (m) FUZZ_CHECK(!m->name.empty() && m->name.size() <= kMaxPackageField && m->version.size() <= kMaxPackageField,
                        "METADATA name or version over the cap");
      break;
    }
    case 3: {
      auto j = ParsePackageJson(text, true);
      if (j) {
        FUZZ_CHECK(j->name.size() <= kMaxPackageField && j->version.size() <= kMaxPackageField,
                   "package.json name or version over the cap");
        FUZZ_CHECK(j->dependencies.size() <= kMaxNpmDependencies, "too many dependencies kept");
      }
      break;
    }
    case 4: {
      std::span<const uint8_t> b(data + 1, size - 1);
      ByteReader r(b);
      PackageDeltas d;
      if (!DecodePackageDeltas(r, b.size(), &d)) return 0;
      ByteWriter w;
      EncodePackageDeltas(w, d);
      std::vector<uint8_t> again = std::move(w).bytes();
      ByteReader r2(again);
      PackageDeltas back;
      FUZZ_CHECK(DecodePackageDeltas(r2, again.size(), &back) && r2.done(), "re-encoded deltas do not decode");
      FUZZ_CHECK(back == d, "deltas changed through their encoding");
      (void)PackageLabel(d);  // any stored bytes: must not crash
      break;
    }
    case 5: {
      // dpkg: the old status file, a NUL, the new one (and extended_states
      // after a second NUL).
      size_t nul = text.find('\0');
      std::string_view old_text = text.substr(0, nul);
      std::string_view new_text = nul == std::string_view::npos ? std::string_view() : text.substr(nul + 1);
      size_t nul2 = new_text.find('\0');
      std::string_view ext = nul2 == std::string_view::npos ? std::string_view() : new_text.substr(nul2 + 1);
      new_text = new_text.substr(0, nul2);
      Fake f;
      Entry o = f.File("status", old_text), n = f.File("status", new_text);
      PackageWatch w;
      w.See(Difference{{'M', "var/lib/dpkg/status", false}, &o, &n});
      if (!ext.empty()) {
        Entry apt = f.Dir("apt", {f.File("extended_states", ext)}, 3);
        Entry lib = f.Dir("lib", {apt}, 2);
        Entry var = f.Dir("var", {lib}, 1);
        f.trees[f.root] = {var};
      }
      CheckDeltas(f.Resolve(w));
      break;
    }
    case 6: {
      // A dist-info directory's METADATA and an npm package.json, both new.
      size_t nul = text.find('\0');
      std::string_view meta = text.substr(0, nul);
      std::string_view json = nul == std::string_view::npos ? std::string_view() : text.substr(nul + 1);
      Fake f;
      Entry dist = f.Dir("x-1.dist-info", {f.File("METADATA", meta), f.File("REQUESTED", "")}, 4);
      Entry pj = f.File("package.json", json);
      PackageWatch w;
      w.See(Difference{{'+', "usr/lib/site-packages/x-1.dist-info", true}, nullptr, &dist});
      w.See(Difference{{'+', "app/node_modules/@s/x/package.json", false}, nullptr, &pj});
      CheckDeltas(f.Resolve(w));
      break;
    }
  }
  return 0;
}

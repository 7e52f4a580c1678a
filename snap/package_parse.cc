#include "snap/package_parse.h"

#include <strings.h>

#include <array>

#include <nlohmann/json.hpp>

namespace agentenv::snap {
namespace {

// One line of a deb822 or RFC 822 style file, without its '\n' (and a
// '\r' before it).
struct Lines {
  std::string_view rest;
  bool Next(std::string_view* line) {
    if (rest.empty()) return false;
    size_t nl = rest.find('\n');
    *line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    return true;
  }
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "Name: value" -> true with both parts (value trimmed); continuation
// lines (leading blank) and lines without a colon -> false.
bool Field(std::string_view line, std::string_view* name, std::string_view* value) {
  if (line.empty() || line.front() == ' ' || line.front() == '\t') return false;
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return false;
  *name = line.substr(0, colon);
  *value = Trim(line.substr(colon + 1));
  return true;
}

bool Is(std::string_view field, std::string_view want) {
  return field.size() == want.size() && ::strncasecmp(field.data(), want.data(), want.size()) == 0;
}

DpkgState StateOf(std::string_view status) {
  // "want flag status": the last word is what is on disk.
  size_t sp = status.rfind(' ');
  std::string_view word = sp == std::string_view::npos ? status : status.substr(sp + 1);
  if (word == "installed" || word == "triggers-pending" || word == "triggers-awaited") return DpkgState::kInstalled;
  if (word == "unpacked" || word == "half-installed" || word == "half-configured") return DpkgState::kUnfinished;
  if (word == "config-files") return DpkgState::kConfigFiles;
  return DpkgState::kNotInstalled;
}

// Calls para(fields) for each paragraph, fields being the wanted ones
// found (by index in `want`). Returns false past the caps.
template <size_t N, typename Fn>
bool ForEachParagraph(std::string_view text, const std::array<std::string_view, N>& want, Fn&& para) {
  if (text.size() > kMaxDpkgText) return false;
  std::array<std::string_view, N> got{};
  bool any = false, too_long = false;
  size_t paragraphs = 0;
  auto flush = [&] {
    if (any && !too_long) {
      if (++paragraphs > kMaxDpkgPackages) return false;
      para(got);
    }
    got = {};
    any = too_long = false;
    return true;
  };
  Lines lines{text};
  std::string_view line;
  while (lines.Next(&line)) {
    if (Trim(line).empty()) {
      if (!flush()) return false;
      continue;
    }
    std::string_view name, value;
    if (!Field(line, &name, &value)) continue;
    for (size_t i = 0; i < N; ++i) {
      if (!Is(name, want[i])) continue;
      if (value.size() > kMaxPackageField) too_long = true;
      got[i] = value;
      any = true;
    }
  }
  return flush();
}

}  // namespace

std::optional<DpkgStatus> ParseDpkgStatus(std::string_view text) {
  static constexpr std::array<std::string_view, 4> kWant = {"Package", "Architecture", "Version", "Status"};
  DpkgStatus out;
  bool ok = ForEachParagraph(text, kWant, [&](const std::array<std::string_view, 4>& f) {
    if (f[0].empty()) return;
    DpkgPackage p{std::string(f[0]), std::string(f[1]), std::string(f[2]), StateOf(f[3])};
    std::string key = p.name + ":" + p.arch;
    out.insert_or_assign(std::move(key), std::move(p));
  });
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::set<std::string>> ParseAptAutoInstalled(std::string_view text) {
  static constexpr std::array<std::string_view, 3> kWant = {"Package", "Architecture", "Auto-Installed"};
  std::set<std::string> out;
  bool ok = ForEachParagraph(text, kWant, [&](const std::array<std::string_view, 3>& f) {
    if (!f[0].empty() && f[2] == "1") out.insert(std::string(f[0]) + ":" + std::string(f[1]));
  });
  if (!ok) return std::nullopt;
  return out;
}

std::optional<PyMetadata> ParsePyMetadata(std::string_view text) {
  PyMetadata m;
  bool have_name = false, have_version = false;
  Lines lines{text};
  std::string_view line;
  while (lines.Next(&line) && !line.empty()) {
    std::string_view name, value;
    if (!Field(line, &name, &value)) continue;
    if (!have_name && Is(name, "Name")) {
      if (value.empty() || value.size() > kMaxPackageField) return std::nullopt;
      m.name = value;
      have_name = true;
    } else if (!have_version && Is(name, "Version")) {
      if (value.size() <= kMaxPackageField) m.version = value;
      have_version = true;
    }
    if (have_name && have_version) break;
  }
  if (!have_name) return std::nullopt;
  return m;
}

std::string NormalizePyName(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  bool sep = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      sep = true;
      continue;
    }
    if (sep && !out.empty()) out += '-';
    sep = false;
    out += (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
  }
  return out;
}

namespace {

// Streams a package.json, keeping only what NpmManifest holds.
class NpmSax {
 public:
  using json = nlohmann::json;
  NpmSax(NpmManifest* out, bool want_deps) : out_(out), want_deps_(want_deps) {}

  bool null() { return Value(); }
  bool boolean(bool) { return Value(); }
  bool number_integer(json::number_integer_t) { return Value(); }
  bool number_unsigned(json::number_unsigned_t) { return Value(); }
  bool number_float(json::number_float_t, const json::string_t&) { return Value(); }
  bool binary(json::binary_t&) { return Value(); }
  bool string(json::string_t& s) {
    if (depth_ == 0) return false;  // the document is not an object
    if (depth_ == 1 && s.size() <= kMaxPackageField) {
      if (key_ == "name") out_->name = s;
      if (key_ == "version") out_->version = s;
    }
    return true;
  }
  bool start_object(std::size_t) {
    if (depth_ == 1 && want_deps_ &&
        (key_ == "dependencies" || key_ == "devDependencies" || key_ == "optionalDependencies" ||
         key_ == "peerDependencies"))
      in_deps_ = true;
    ++depth_;
    return true;
  }
  bool key(json::string_t& k) {
    if (depth_ == 1) key_ = k.size() <= 64 ? k : std::string();
    if (depth_ == 2 && in_deps_ && k.size() <= kMaxPackageField &&
        out_->dependencies.size() < kMaxNpmDependencies)
      out_->dependencies.insert(k);
    return true;
  }
  bool end_object() {
    if (--depth_ == 1) in_deps_ = false;
    return true;
  }
  bool start_array(std::size_t) {
    if (depth_ == 0) return false;
    ++depth_;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

 private:
  bool Value() { return depth_ > 0; }
  NpmManifest* out_;
  bool want_deps_;
  size_t depth_ = 0;
  bool in_deps_ = false;
  std::string key_;
};

}  // namespace

std::optional<NpmManifest> ParsePackageJson(std::string_view text, bool want_deps) {
  if (text.size() > kMaxPackageJson) return std::nullopt;
  NpmManifest m;
  NpmSax sax(&m, want_deps);
  try {
    if (!nlohmann::json::sax_parse(text.begin(), text.end(), &sax)) return std::nullopt;
  } catch (...) {  // the parser reports through the handler; this is belt and braces (bad_alloc)
    return std::nullopt;
  }
  return m;
}

}  // namespace agentenv::snap

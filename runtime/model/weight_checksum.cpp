// Published SHA-256 digests of weight files and their check (see weight_checksum.h).
#include "runtime/model/weight_checksum.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/core/error.h"
#include "runtime/core/sha256.h"

namespace conveyor {

namespace fs = std::filesystem;

namespace {

bool is_hex(const std::string& s, size_t n) {
  return s.size() == n && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  CONVEYOR_CHECK(in.good(), "cannot read checksum file '", p.string(), "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

std::optional<std::string> hf_cache_blob_sha256(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  if (!fs::is_symlink(p, ec)) return std::nullopt;
  fs::path target = fs::read_symlink(p, ec);
  if (ec) return std::nullopt;
  if (target.is_relative()) target = p.parent_path() / target;
  target = target.lexically_normal();
  // <cache>/models--org--name/snapshots/<rev>/<file> -> <cache>/models--org--name/blobs/<digest>; a
  // file in a subfolder of the snapshot goes up more levels, so only the blob's own folder is checked.
  fs::path abs_file = fs::absolute(p, ec).lexically_normal();
  bool in_snapshot = false;
  for (fs::path d = abs_file.parent_path(); d.has_relative_path(); d = d.parent_path()) {
    if (d.parent_path().filename() == "snapshots") {
      in_snapshot = true;
      break;
    }
  }
  std::string blob = target.filename().string();
  if (!in_snapshot || target.parent_path().filename() != "blobs" || !is_hex(blob, 64)) return std::nullopt;
  return lower(blob);
}

std::map<std::string, std::string> parse_sha256sums(const std::string& text, const std::string& origin) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::string hex = line.substr(0, 64);
    bool ok = line.size() > 66 && is_hex(hex, 64) && line[64] == ' ' && (line[65] == ' ' || line[65] == '*');
    CONVEYOR_CHECK(ok, "'", origin, "' line ", n, " is not '<64 hex digits>  <file name>' (sha256sum's format): '",
                   line.substr(0, 100), "'");
    std::string name = line.substr(66);
    if (name.rfind("./", 0) == 0) name = name.substr(2);
    out[name] = lower(hex);
  }
  return out;
}

std::optional<ExpectedSha256> expected_sha256(const std::string& path) {
  if (auto blob = hf_cache_blob_sha256(path))
    return ExpectedSha256{*blob, "the name of its Hugging Face cache blob"};
  fs::path p(path);
  fs::path side = p.string() + ".sha256";
  std::error_code ec;
  if (fs::is_regular_file(side, ec)) {
    std::string text = read_text(side);
    std::string hex = text.substr(0, std::min<size_t>(text.size(), 64));
    CONVEYOR_CHECK(is_hex(hex, 64) && (text.size() == 64 || std::isspace(static_cast<unsigned char>(text[64]))),
                   "checksum file '", side.string(), "' does not start with a 64-digit SHA-256");
    return ExpectedSha256{lower(hex), side.string()};
  }
  fs::path sums = p.parent_path() / "SHA256SUMS";
  if (fs::is_regular_file(sums, ec)) {
    auto entries = parse_sha256sums(read_text(sums), sums.string());
    auto it = entries.find(p.filename().string());
    if (it != entries.end()) return ExpectedSha256{it->second, sums.string()};
  }
  return std::nullopt;
}

void verify_sha256(const std::string& path, const ExpectedSha256& expected) {
  std::string actual = sha256_file(path);
  CONVEYOR_CHECK(actual == expected.hex, "weight file '", path, "' is corrupt or not the published file: its SHA-256 is ",
                 actual, " but ", expected.source, " says ", expected.hex,
                 "; download it again (or fix the checksum if the file was changed on purpose)");
}

}  // namespace conveyor

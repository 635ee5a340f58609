// BatchManifest (see manifest.h). A model is the same model when its files have the same sizes and,
// once known, the same content digests, whatever path reached them.
#include "runtime/batch/manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/core/error.h"
#include "runtime/core/sha256.h"

namespace conveyor {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json files_json(const std::vector<WeightFileInfo>& files) {
  json out = json::array();
  for (const WeightFileInfo& f : files) {
    json j = {{"path", f.path}, {"size", f.size}};
    if (!f.digest.empty()) j[kDigestScheme] = f.digest;
    out.push_back(j);
  }
  return out;
}

std::vector<WeightFileInfo> files_from_json(const json& arr) {
  std::vector<WeightFileInfo> out;
  for (const json& j : arr) {
    WeightFileInfo f{j.at("path").get<std::string>(), j.at("size").get<uint64_t>(), ""};
    if (j.contains(kDigestScheme)) f.digest = j.at(kDigestScheme).get<std::string>();
    out.push_back(f);
  }
  return out;
}

// Two spellings of one path (relative vs absolute, through a symlink); the earlier run's relative
// path can only be resolved against today's directory, which is the usual case of a rerun.
bool same_path(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code e1, e2;
  fs::path ca = fs::weakly_canonical(a, e1), cb = fs::weakly_canonical(b, e2);
  return !e1 && !e2 && ca == cb;
}

}  // namespace

json BatchManifest::to_json() const {
  json j = {{"input", input_path},
            {"input_sha256", input_sha256},
            {"model", model},
            {"sampling_defaults", sampling_defaults},
            {"conveyor_version", conveyor_version}};
  if (has_model_files) j["model_files"] = files_json(model_files);
  return j;
}

BatchManifest BatchManifest::from_json(const json& j, const std::string& origin) {
  BatchManifest m;
  try {
    m.input_path = j.at("input").get<std::string>();
    m.input_sha256 = j.at("input_sha256").get<std::string>();
    m.model = j.at("model").get<std::string>();
    m.sampling_defaults = j.at("sampling_defaults");
    m.conveyor_version = j.at("conveyor_version").get<std::string>();
    m.has_model_files = j.contains("model_files");
    if (m.has_model_files) m.model_files = files_from_json(j.at("model_files"));
  } catch (const json::exception& e) {
    CONVEYOR_THROW("manifest '", origin, "' is incomplete (", e.what(),
                   "); delete it together with the output to start the job over");
  }
  return m;
}

bool BatchManifest::has_digests() const {
  if (!has_model_files || model_files.empty()) return false;
  for (const WeightFileInfo& f : model_files)
    if (f.digest.empty()) return false;
  return true;
}

std::vector<std::string> BatchManifest::differences(const BatchManifest& previous) const {
  std::vector<std::string> out;
  if (input_sha256 != previous.input_sha256) {
    out.push_back(detail::concat("the input differs: '", input_path, "' has sha256 ", input_sha256,
                                 ", the earlier run read '", previous.input_path, "' with sha256 ",
                                 previous.input_sha256));
  }
  bool by_files = has_model_files && previous.has_model_files && !(model_files.empty() && previous.model_files.empty());
  if (!by_files && !same_path(model, previous.model)) {
    out.push_back(detail::concat("the model differs: now '", model, "', earlier '", previous.model, "'"));
  } else if (by_files && model_files.size() != previous.model_files.size()) {
    out.push_back(detail::concat("the model differs: '", model, "' has ", model_files.size(), " weight file(s), the "
                                 "earlier run's '", previous.model, "' had ", previous.model_files.size()));
  } else if (by_files) {
    for (size_t i = 0; i < model_files.size(); ++i) {
      const WeightFileInfo &now = model_files[i], &then = previous.model_files[i];
      if (now.size != then.size)
        out.push_back(detail::concat("the model file '", now.path, "' differs from the earlier run's '", then.path,
                                     "': its size is ", now.size, " bytes, earlier ", then.size, " bytes"));
    }
  }
  if (sampling_defaults != previous.sampling_defaults) {
    out.push_back(detail::concat("the sampling defaults differ: now ", sampling_defaults.dump(), ", earlier ",
                                 previous.sampling_defaults.dump()));
  }
  return out;
}

std::vector<std::string> BatchManifest::content_differences(const BatchManifest& previous) const {
  std::vector<std::string> out;
  if (!has_model_files || !previous.has_model_files || model_files.size() != previous.model_files.size()) return out;
  for (size_t i = 0; i < model_files.size(); ++i) {
    const WeightFileInfo &now = model_files[i], &then = previous.model_files[i];
    if (!now.digest.empty() && !then.digest.empty() && now.digest != then.digest)
      out.push_back(detail::concat("the model file '", now.path, "' differs from the earlier run's '", then.path,
                                   "': same size (", now.size, " bytes) but other content (", kDigestScheme, " ",
                                   now.digest, ", earlier ", then.digest, ")"));
  }
  return out;
}

std::string manifest_path_for(const std::string& output_path) { return output_path + ".manifest.json"; }

BatchManifest make_manifest(const std::string& input_path, const std::string& model, const json& sampling_defaults,
                            std::vector<WeightFileInfo> model_files) {
  BatchManifest m;
  m.input_path = input_path;
  m.input_sha256 = sha256_file(input_path);
  m.model = model;
  m.model_files = std::move(model_files);
  m.has_model_files = true;
  m.sampling_defaults = sampling_defaults;
  m.conveyor_version = CONVEYOR_VERSION;
  return m;
}

std::optional<BatchManifest> read_manifest(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  std::ifstream in(path);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  CONVEYOR_CHECK(!j.is_discarded() && j.is_object(), "the manifest '", path,
                 "' is not valid JSON; delete it together with the output to start the job over");
  return BatchManifest::from_json(j, path);
}

void write_manifest(const BatchManifest& m, const std::string& path) {
  std::string tmp = path + ".tmp";
  std::string text = m.to_json().dump(2) + "\n";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  CONVEYOR_CHECK(fd >= 0, "creating the manifest '", tmp, "' failed: ", std::strerror(errno),
                 "; check that the directory exists, is writable and has free space");
  ssize_t n = ::write(fd, text.data(), text.size());
  bool ok = n == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  CONVEYOR_CHECK(ok, "writing the manifest '", tmp, "' failed: ", std::strerror(err), "; check the free space");
  CONVEYOR_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, "renaming the manifest into '", path,
                 "' failed: ", std::strerror(errno));
}

}  // namespace conveyor

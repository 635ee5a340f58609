// The manifest <output>.manifest.json of a batch job: what a resume must agree on (the input's
// SHA-256, the model's files by size and content digest, the sampling defaults). Written through a
// temporary file and rename, so a kill never leaves half a manifest.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/model/weight_digest.h"

namespace conveyor {

// What a resume must agree on. The model is identified by its files' sizes and content digests,
// not by the path string, so the same file reached through a symlink or a relative path resumes.
struct BatchManifest {
  std::string input_path;
  std::string input_sha256;
  std::string model;  // the path as given, for people; compared only when no files are recorded
  std::vector<WeightFileInfo> model_files;  // sizes at open; digests once the weights have loaded
  bool has_model_files = false;             // false: a manifest from before files were recorded
  nlohmann::json sampling_defaults = nlohmann::json::object();
  std::string conveyor_version;

  nlohmann::json to_json() const;
  static BatchManifest from_json(const nlohmann::json& j, const std::string& origin);
  // Human sentences for each field that differs in a way that forbids resuming (input, model files
  // by number and size, sampling defaults); empty when a resume is allowed. The version may differ.
  std::vector<std::string> differences(const BatchManifest& previous) const;
  // Sentences naming each model file whose digest differs from `previous`'s (both known).
  std::vector<std::string> content_differences(const BatchManifest& previous) const;
  bool has_digests() const;  // every model file has one
};
std::string manifest_path_for(const std::string& output_path);  // "<output>.manifest.json"
// The manifest of a job: hashes the input file; `model_files` are the checkpoint's files with sizes.
BatchManifest make_manifest(const std::string& input_path, const std::string& model,
                            const nlohmann::json& sampling_defaults, std::vector<WeightFileInfo> model_files = {});

// The manifest at `path`, or nullopt when there is none; throws naming it when it is unreadable.
std::optional<BatchManifest> read_manifest(const std::string& path);
void write_manifest(const BatchManifest& m, const std::string& path);

}  // namespace conveyor

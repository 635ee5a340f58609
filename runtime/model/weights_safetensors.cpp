// WeightSource over safetensors (see weights_source.h): one file, or the shards listed by
// model.safetensors.index.json. Every tensor must appear exactly once across the shards, and every
// weight_map entry must be found in the shard it names.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/model/safetensors_file.h"
#include "runtime/model/weights_source.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class SafetensorsSource : public WeightSource {
 public:
  explicit SafetensorsSource(const std::string& path) : path_(path) {
    if (fs::is_directory(path)) open_dir(path);
    else add_file(path);
    std::sort(tensors_.begin(), tensors_.end(), [](const SourceTensor& a, const SourceTensor& b) { return a.name < b.name; });
  }

  SourceFormat format() const override { return SourceFormat::kSafetensors; }
  const std::string& path() const override { return path_; }
  const std::vector<SourceTensor>& tensors() const override { return tensors_; }

  void read_range(const std::string& name, int64_t begin, int64_t end, float* out) const override {
    auto it = where_.find(name);
    CONVEYOR_CHECK(it != where_.end(), "no tensor '", name, "' in ", path_);
    const SafetensorsFile& f = *files_[it->second.first];
    const SafetensorsTensor& t = *it->second.second;
    int64_t numel = static_cast<int64_t>(t.nbytes() / safetensors_dtype_size(t.dtype));
    CONVEYOR_CHECK(begin >= 0 && begin <= end && end <= numel, "read of elements [", begin, ", ", end, ") of tensor '",
                   name, "' in '", f.path(), "' is outside its ", numel, " elements");
    size_t es = safetensors_dtype_size(t.dtype);
    safetensors_to_f32(t.dtype, f.tensor_data(t) + static_cast<size_t>(begin) * es, static_cast<size_t>(end - begin), out);
  }

 private:
  void open_dir(const std::string& dir) {
    fs::path index = fs::path(dir) / "model.safetensors.index.json";
    fs::path single = fs::path(dir) / "model.safetensors";
    if (!fs::exists(index)) {
      CONVEYOR_CHECK(fs::exists(single), "'", dir, "' has neither model.safetensors.index.json nor model.safetensors; ",
                     "conveyor loads HF checkpoints in safetensors format (or pass a .gguf file)");
      add_file(single.string());
      return;
    }
    json j;
    try {
      std::ifstream in(index);
      j = json::parse(in);
    } catch (const json::exception& e) {
      CONVEYOR_THROW("'", index.string(), "' is not valid JSON: ", e.what());
    }
    CONVEYOR_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), "'", index.string(),
                   "' has no weight_map object; the index is corrupt");
    std::vector<std::string> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      CONVEYOR_CHECK(it->is_string(), "'", index.string(), "': weight_map entry '", it.key(), "' is not a file name");
      std::string shard = it->get<std::string>();
      CONVEYOR_CHECK(shard.find('/') == std::string::npos && shard != ".." && !shard.empty(), "'", index.string(),
                     "': weight_map entry '", it.key(), "' names '", shard, "', which is not a file in the directory");
      if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
    }
    for (const auto& shard : shards) add_file((fs::path(dir) / shard).string());
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      auto w = where_.find(it.key());
      std::string want = (fs::path(dir) / it->get<std::string>()).string();
      CONVEYOR_CHECK(w != where_.end() && files_[w->second.first]->path() == want, "'", index.string(),
                     "' maps tensor '", it.key(), "' to '", it->get<std::string>(), "' but that shard does not hold it");
    }
  }

  void add_file(const std::string& file) {
    CONVEYOR_CHECK(fs::exists(file), "safetensors shard '", file, "' does not exist; the checkpoint is incomplete");
    files_.push_back(std::make_unique<SafetensorsFile>(file));
    size_t idx = files_.size() - 1;
    for (const auto& t : files_.back()->tensors()) {
      auto [it, fresh] = where_.emplace(t.name, std::make_pair(idx, &t));
      CONVEYOR_CHECK(fresh, "tensor '", t.name, "' appears in both '", files_[it->second.first]->path(), "' and '", file,
                     "'; every tensor must be stored once");
      tensors_.push_back({t.name, t.shape, safetensors_dtype_name(t.dtype), t.nbytes(), file});
    }
  }

  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<size_t, const SafetensorsTensor*>> where_;
  std::vector<SourceTensor> tensors_;
};

}  // namespace

std::unique_ptr<WeightSource> open_safetensors_source(const std::string& path) {
  return std::make_unique<SafetensorsSource>(path);
}

const SourceTensor* WeightSource::find(const std::string& name) const {
  const auto& ts = tensors();
  auto it = std::lower_bound(ts.begin(), ts.end(), name, [](const SourceTensor& t, const std::string& n) { return t.name < n; });
  return it != ts.end() && it->name == name ? &*it : nullptr;
}

const SourceTensor& WeightSource::at(const std::string& name) const {
  const SourceTensor* t = find(name);
  if (!t) {
    std::vector<std::string> names;
    for (const auto& x : tensors()) names.push_back(x.name);
    CONVEYOR_THROW("checkpoint '", path(), "' has no tensor '", name, "'", did_you_mean(name, names),
                   "; the checkpoint is incomplete or of another architecture");
  }
  return *t;
}

std::unique_ptr<WeightSource> open_weight_source(const std::string& path) {
  if (ends_with(path, ".gguf")) return open_gguf_source(path);
  CONVEYOR_CHECK(fs::exists(path), "model path '", path, "' does not exist");
  return open_safetensors_source(path);
}

}  // namespace conveyor

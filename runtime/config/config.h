// Effective configuration: a fixed schema of dotted keys (model.*, parallel.*, scheduler.*, cache.*,
// sampling.*, io.*, logging.*, runtime.*) with defaults, overlaid by a YAML file and then by the
// command line (defaults < YAML < CLI). Every value remembers where it came from, so an error names
// the key path and the file:line or flag that set it. Validation happens here, before any GPU work.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace conveyor {

enum class ValueType { kBool, kInt, kFloat, kString, kIntList };
const char* value_type_name(ValueType t);

struct KeySpec {
  std::string path;           // "parallel.pipeline"
  ValueType type;
  std::string default_text;   // parsed like a CLI value
  std::optional<double> min;  // numeric bounds (inclusive unless *_exclusive)
  std::optional<double> max;
  bool min_exclusive = false;
  std::vector<std::string> choices;  // allowed strings, empty = any
  std::string help;
};

// The whole schema, in section order.
const std::vector<KeySpec>& config_schema();
const KeySpec* find_key_spec(const std::string& path);
std::vector<std::string> config_key_paths();

struct ConfigValue {
  ValueType type = ValueType::kString;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::vector<int64_t> list;
  std::string origin;  // "default", "run.yaml:12", "--set", "--max-num-seqs"
  std::string text() const;  // canonical text form
};

class Config {
 public:
  // All keys at their defaults.
  Config();

  // Overlay a YAML document; `name` is used in messages (usually the file path).
  void merge_yaml_file(const std::string& path);
  void merge_yaml_text(const std::string& text, const std::string& name);

  // Set one key from text, e.g. set("parallel.pipeline", "4", "--set").
  void set(const std::string& path, const std::string& text, const std::string& origin);

  bool get_bool(const std::string& path) const;
  int64_t get_int(const std::string& path) const;
  double get_float(const std::string& path) const;
  const std::string& get_string(const std::string& path) const;
  const std::vector<int64_t>& get_int_list(const std::string& path) const;
  const ConfigValue& value(const std::string& path) const;

  // Cross-key checks that need no world (e.g. partition length vs pipeline size).
  void validate() const;
  // data * pipeline * tensor must equal the number of ranks launched.
  void check_world_size(int world_size) const;

  // The effective config as YAML, each value commented with its origin.
  std::string to_yaml() const;

 private:
  std::map<std::string, ConfigValue> values_;
};

// Parses `text` as a value of `spec` and checks its bounds; `origin` names where it came from.
ConfigValue parse_config_value(const KeySpec& spec, const std::string& text, const std::string& origin);

}  // namespace conveyor

// Config parsing, overlay and validation (see config.h).
#include "runtime/config/config.h"

// GCC 12 reports a false dangling-pointer warning inside yaml-cpp's node templates.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"

namespace conveyor {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::kBool: return "a boolean (true/false)";
    case ValueType::kInt: return "an integer";
    case ValueType::kFloat: return "a number";
    case ValueType::kString: return "a string";
    case ValueType::kIntList: return "a list of integers, e.g. [19, 21]";
  }
  return "?";
}

namespace {

bool parse_int(const std::string& t, int64_t* out) {
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno != 0 || end != t.c_str() + t.size()) return false;
  *out = v;
  return true;
}

bool parse_float(const std::string& t, double* out) {
  if (t.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (errno != 0 || end != t.c_str() + t.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool parse_bool(const std::string& t, bool* out) {
  static const char* yes[] = {"true", "True", "TRUE", "yes", "on", "1"};
  static const char* no[] = {"false", "False", "FALSE", "no", "off", "0"};
  for (const char* y : yes)
    if (t == y) return (*out = true), true;
  for (const char* n : no)
    if (t == n) return (*out = false), true;
  return false;
}

// A leading `~/` in a string value is the user's home, as in a shell: run configs name files under
// ~/.cache and the like, and sbatch scripts run from the spool where no shell expanded them.
std::string expand_home(const std::string& t) {
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0' || !(t == "~" || starts_with(t, "~/"))) return t;
  return std::string(home) + t.substr(1);
}

[[noreturn]] void bad_value(const KeySpec& spec, const std::string& text, const std::string& origin,
                            const std::string& why) {
  CONVEYOR_THROW("config key '", spec.path, "' (set by ", origin, "): ", why, "; got '", text, "'");
}

void check_bounds(const KeySpec& spec, double v, const std::string& text, const std::string& origin) {
  bool low = spec.min && (spec.min_exclusive ? v <= *spec.min : v < *spec.min);
  bool high = spec.max && v > *spec.max;
  if (!low && !high) return;
  std::ostringstream range;
  range << "must be in " << (spec.min_exclusive ? "(" : "[") << *spec.min << ", " << *spec.max << "]";
  bad_value(spec, text, origin, range.str());
}

}  // namespace

std::string ConfigValue::text() const {
  std::ostringstream os;
  switch (type) {
    case ValueType::kBool: os << (b ? "true" : "false"); break;
    case ValueType::kInt: os << i; break;
    case ValueType::kFloat: os << f; break;
    case ValueType::kString: os << s; break;
    case ValueType::kIntList: {
      os << "[";
      for (size_t k = 0; k < list.size(); ++k) os << (k ? ", " : "") << list[k];
      os << "]";
      break;
    }
  }
  return os.str();
}

ConfigValue parse_config_value(const KeySpec& spec, const std::string& raw, const std::string& origin) {
  ConfigValue v;
  v.type = spec.type;
  v.origin = origin;
  std::string t = trim(raw);
  switch (spec.type) {
    case ValueType::kBool:
      if (!parse_bool(t, &v.b)) bad_value(spec, t, origin, std::string("expected ") + value_type_name(spec.type));
      break;
    case ValueType::kInt:
      if (!parse_int(t, &v.i)) bad_value(spec, t, origin, std::string("expected ") + value_type_name(spec.type));
      check_bounds(spec, static_cast<double>(v.i), t, origin);
      break;
    case ValueType::kFloat:
      if (!parse_float(t, &v.f)) bad_value(spec, t, origin, std::string("expected ") + value_type_name(spec.type));
      check_bounds(spec, v.f, t, origin);
      break;
    case ValueType::kString:
      v.s = expand_home(t);
      break;
    case ValueType::kIntList: {
      std::string body = t;
      if (!body.empty() && body.front() == '[') {
        if (body.back() != ']') bad_value(spec, t, origin, "unterminated list");
        body = body.substr(1, body.size() - 2);
      }
      if (!trim(body).empty()) {
        for (const auto& part : split(body, ',')) {
          int64_t x = 0;
          if (!parse_int(trim(part), &x))
            bad_value(spec, t, origin, std::string("expected ") + value_type_name(spec.type));
          v.list.push_back(x);
        }
      }
      break;
    }
  }
  if (!spec.choices.empty()) {
    std::string canon = v.text();
    bool ok = false;
    for (const auto& c : spec.choices) ok = ok || c == canon;
    if (!ok) bad_value(spec, t, origin, "must be one of " + join(spec.choices, ", ") + did_you_mean(canon, spec.choices));
  }
  return v;
}

Config::Config() {
  for (const auto& spec : config_schema()) values_[spec.path] = parse_config_value(spec, spec.default_text, "default");
}

void Config::set(const std::string& path, const std::string& text, const std::string& origin) {
  const KeySpec* spec = find_key_spec(path);
  if (!spec) CONVEYOR_THROW("unknown config key '", path, "' (set by ", origin, ")", did_you_mean(path, config_key_paths()));
  values_[path] = parse_config_value(*spec, text, origin);
}

namespace {

std::string mark_of(const std::string& name, const YAML::Node& node) {
  return name + ":" + std::to_string(node.Mark().line + 1);
}

void merge_node(Config* cfg, const YAML::Node& node, const std::string& prefix, const std::string& name) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string k = it->first.as<std::string>();
    std::string path = prefix.empty() ? k : prefix + "." + k;
    const YAML::Node& val = it->second;
    const KeySpec* spec = find_key_spec(path);
    std::string where = mark_of(name, it->first);
    if (!spec) {
      bool is_section = false;
      for (const auto& p : config_key_paths()) is_section = is_section || starts_with(p, path + ".");
      if (is_section && val.IsMap()) {
        merge_node(cfg, val, path, name);
        continue;
      }
      if (val.IsMap()) {
        std::vector<std::string> sections;
        for (const auto& p : config_key_paths()) sections.push_back(p.substr(0, p.rfind('.')));
        CONVEYOR_THROW("unknown config section '", path, "' at ", where, did_you_mean(path, sections));
      }
      CONVEYOR_THROW("unknown config key '", path, "' at ", where, did_you_mean(path, config_key_paths()));
    }
    if (spec->type == ValueType::kIntList) {
      if (val.IsSequence()) {
        std::string text = "[";
        for (size_t i = 0; i < val.size(); ++i) {
          if (!val[i].IsScalar())
            CONVEYOR_THROW("config key '", path, "' at ", where, ": expected ", value_type_name(spec->type));
          text += (i ? "," : "") + val[i].Scalar();
        }
        cfg->set(path, text + "]", where);
        continue;
      }
    }
    if (val.IsNull()) {
      cfg->set(path, spec->type == ValueType::kString ? "" : spec->default_text, where);
      continue;
    }
    if (!val.IsScalar())
      CONVEYOR_THROW("config key '", path, "' at ", where, ": expected ", value_type_name(spec->type),
                     ", got a ", val.IsMap() ? "mapping" : "list");
    cfg->set(path, val.Scalar(), where);
  }
}

}  // namespace

void Config::merge_yaml_text(const std::string& text, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    CONVEYOR_THROW("cannot parse YAML config ", name, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg);
  }
  if (root.IsNull()) return;  // an empty file changes nothing
  if (!root.IsMap()) CONVEYOR_THROW("config ", name, " must be a mapping of sections (model:, parallel:, ...)");
  merge_node(this, root, "", name);
}

void Config::merge_yaml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) CONVEYOR_THROW("cannot open config file '", path, "': ", std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  merge_yaml_text(ss.str(), path);
}

const ConfigValue& Config::value(const std::string& path) const {
  auto it = values_.find(path);
  if (it == values_.end()) CONVEYOR_THROW("internal: config key '", path, "' is not in the schema");
  return it->second;
}

namespace {
const ConfigValue& typed(const Config& c, const std::string& path, ValueType t) {
  const ConfigValue& v = c.value(path);
  CONVEYOR_CHECK(v.type == t, "internal: config key '", path, "' read as ", value_type_name(t));
  return v;
}
}  // namespace

bool Config::get_bool(const std::string& path) const { return typed(*this, path, ValueType::kBool).b; }
int64_t Config::get_int(const std::string& path) const { return typed(*this, path, ValueType::kInt).i; }
double Config::get_float(const std::string& path) const { return typed(*this, path, ValueType::kFloat).f; }
const std::string& Config::get_string(const std::string& path) const {
  return typed(*this, path, ValueType::kString).s;
}
const std::vector<int64_t>& Config::get_int_list(const std::string& path) const {
  return typed(*this, path, ValueType::kIntList).list;
}

void Config::validate() const {
  const auto& part = value("parallel.partition");
  int64_t pp = get_int("parallel.pipeline");
  if (!part.list.empty()) {
    if (static_cast<int64_t>(part.list.size()) != pp)
      CONVEYOR_THROW("config key 'parallel.partition' (set by ", part.origin, ") has ", part.list.size(),
                     " entries but parallel.pipeline is ", pp, " (set by ", value("parallel.pipeline").origin,
                     "): give one layer count per stage");
    for (size_t s = 0; s < part.list.size(); ++s)
      if (part.list[s] < 1)
        CONVEYOR_THROW("config key 'parallel.partition' (set by ", part.origin, "): stage ", s, " gets ",
                       part.list[s], " layers; every stage needs at least one");
  }
  if (get_int("sampling.max_tokens") > 0 && get_int("sampling.min_tokens") > get_int("sampling.max_tokens"))
    CONVEYOR_THROW("sampling.min_tokens (", get_int("sampling.min_tokens"), ", set by ",
                   value("sampling.min_tokens").origin, ") must not exceed sampling.max_tokens (",
                   get_int("sampling.max_tokens"), ", set by ", value("sampling.max_tokens").origin, ")");
}

void Config::check_world_size(int world_size) const {
  int64_t dp = get_int("parallel.data"), pp = get_int("parallel.pipeline"), tp = get_int("parallel.tensor");
  if (dp * pp * tp != world_size)
    CONVEYOR_THROW("layout does not match the job: data (", dp, ") x pipeline (", pp, ") x tensor (", tp,
                   ") = ", dp * pp * tp, " ranks, but the job has ", world_size,
                   " ranks; change -dp/-pp/-tp or the number of processes (mpirun -np / srun -n)");
}

std::string Config::to_yaml() const {
  std::ostringstream os;
  std::string section;
  for (const auto& spec : config_schema()) {
    auto dot = spec.path.find('.');
    std::string sec = spec.path.substr(0, dot);
    if (sec != section) {
      os << sec << ":\n";
      section = sec;
    }
    const ConfigValue& v = value(spec.path);
    std::string text = v.text();
    if (v.type == ValueType::kString) text = "\"" + text + "\"";
    os << "  " << spec.path.substr(dot + 1) << ": " << text;
    if (v.origin != "default") os << "  # " << v.origin;
    os << "\n";
  }
  return os.str();
}

}  // namespace conveyor

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic pop
#endif

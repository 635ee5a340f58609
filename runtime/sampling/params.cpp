// Validation and parsing of SamplingParams (see runtime/sampling/params.h). Messages follow vLLM's wording
// ("top_p must be in (0, 1], got 1.5") so users who know vLLM recognise them. Range checks are
// written so that NaN fails them.
#include "runtime/sampling/params.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/config/config.h"
#include "runtime/core/error.h"

namespace conveyor {

namespace {

using nlohmann::json;

std::optional<SamplingViolation> violation(const char* parameter, const std::string& message) {
  return SamplingViolation{parameter, message};
}

std::optional<SamplingViolation> check_penalty(const char* name, double v) {
  if (v >= -2.0 && v <= 2.0) return std::nullopt;
  return violation(name, detail::concat(name, " must be in [-2, 2], got ", v));
}

// A short rendering of a JSON value for error messages: its type and (clipped) text.
std::string describe(const json& v) {
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return detail::concat(v.type_name(), " ", text);
}

[[noreturn]] void wrong_type(const char* field, const char* expected, const json& v) {
  CONVEYOR_THROW("request field '", field, "' must be ", expected, ", got ", describe(v));
}

// Each reader leaves `out` alone when the field is absent or null (OpenAI clients send null for
// "use the default").
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

void read_number(const json& body, const char* name, double* out) {
  const json* v = field(body, name);
  if (!v) return;
  if (!v->is_number()) wrong_type(name, "a number", *v);
  *out = v->get<double>();
}

int64_t as_int(const char* name, const json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      wrong_type(name, "an integer that fits in 64 bits", v);
    }
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  // 5.0 is accepted as 5 (as pydantic does for vLLM); 5.5 is not.
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return static_cast<int64_t>(d);
  }
  wrong_type(name, "an integer", v);
}

void read_int(const json& body, const char* name, int64_t* out) {
  const json* v = field(body, name);
  if (v) *out = as_int(name, *v);
}

void read_bool(const json& body, const char* name, bool* out) {
  const json* v = field(body, name);
  if (!v) return;
  if (!v->is_boolean()) wrong_type(name, "true or false", *v);
  *out = v->get<bool>();
}

// stop: a string or a list of strings.
void read_stop(const json& body, std::vector<std::string>* out) {
  const json* v = field(body, "stop");
  if (!v) return;
  if (v->is_string()) {
    *out = {v->get<std::string>()};
    return;
  }
  if (!v->is_array()) wrong_type("stop", "a string or a list of strings", *v);
  out->clear();
  for (const json& s : *v) {
    if (!s.is_string()) wrong_type("stop", "a string or a list of strings (an element is not)", s);
    out->push_back(s.get<std::string>());
  }
}

void read_stop_token_ids(const json& body, std::vector<int32_t>* out) {
  const json* v = field(body, "stop_token_ids");
  if (!v) return;
  if (!v->is_array()) wrong_type("stop_token_ids", "a list of integers", *v);
  out->clear();
  for (const json& id : *v) {
    int64_t t = as_int("stop_token_ids", id);
    if (t < 0 || t > std::numeric_limits<int32_t>::max()) {
      CONVEYOR_THROW("stop_token_ids must be non-negative token ids, got ", t, " at index ", out->size());
    }
    out->push_back(static_cast<int32_t>(t));
  }
}

// logprobs is an integer in the completions API and a boolean (with top_logprobs) in chat.
void read_logprobs(const json& body, std::optional<int64_t>* out) {
  const json* lp = field(body, "logprobs");
  const json* top = field(body, "top_logprobs");
  if (lp && lp->is_boolean()) {
    if (!lp->get<bool>()) {
      if (top) CONVEYOR_THROW("request field 'top_logprobs' needs \"logprobs\": true, got \"logprobs\": false");
      *out = std::nullopt;
      return;
    }
    *out = top ? as_int("top_logprobs", *top) : 0;
    return;
  }
  if (top) {
    CONVEYOR_THROW("request field 'top_logprobs' needs \"logprobs\": true (chat completions); got ",
                   lp ? describe(*lp) : std::string("no logprobs field"));
  }
  if (lp) *out = as_int("logprobs", *lp);
}

// Fields that would change what is sampled but are not implemented: refused rather than ignored,
// so a request never silently gets different behaviour than it asked for.
void reject_unsupported(const json& body) {
  if (const json* v = field(body, "best_of"); v && as_int("best_of", *v) != 1) {
    CONVEYOR_THROW("request field 'best_of' must be 1 (parallel sampling is not supported yet), got ", describe(*v));
  }
  if (const json* v = field(body, "use_beam_search"); v && (!v->is_boolean() || v->get<bool>())) {
    CONVEYOR_THROW("request field 'use_beam_search' is not supported (beam search is not implemented), got ",
                   describe(*v));
  }
  if (const json* v = field(body, "logit_bias"); v && !v->empty()) {
    CONVEYOR_THROW("request field 'logit_bias' is not supported yet; remove it from the request, got ", describe(*v));
  }
}

}  // namespace

std::optional<SamplingViolation> SamplingParams::first_violation() const {
  if (n != 1) return violation("n", detail::concat("n must be 1 (parallel sampling is not supported yet), got ", n));
  if (!(temperature >= 0.0) || !std::isfinite(temperature)) {
    return violation("temperature", detail::concat("temperature must be non-negative and finite, got ", temperature));
  }
  if (!(top_p > 0.0 && top_p <= 1.0)) return violation("top_p", detail::concat("top_p must be in (0, 1], got ", top_p));
  if (top_k < -1) {
    return violation("top_k", detail::concat("top_k must be 0 or -1 (disable), or at least 1, got ", top_k));
  }
  if (!(min_p >= 0.0 && min_p <= 1.0)) return violation("min_p", detail::concat("min_p must be in [0, 1], got ", min_p));
  if (!(repetition_penalty > 0.0) || !std::isfinite(repetition_penalty)) {
    return violation("repetition_penalty",
                     detail::concat("repetition_penalty must be greater than zero and finite, got ", repetition_penalty));
  }
  if (auto v = check_penalty("presence_penalty", presence_penalty)) return v;
  if (auto v = check_penalty("frequency_penalty", frequency_penalty)) return v;
  if (max_tokens < 0) {
    return violation("max_tokens", detail::concat("max_tokens must be at least 1 (or 0: no limit), got ", max_tokens));
  }
  if (min_tokens < 0) {
    return violation("min_tokens", detail::concat("min_tokens must be greater than or equal to 0, got ", min_tokens));
  }
  if (max_tokens > 0 && min_tokens > max_tokens) {
    return violation("min_tokens", detail::concat("min_tokens must be less than or equal to max_tokens=", max_tokens,
                                                  ", got ", min_tokens));
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) return violation("stop", detail::concat("stop cannot contain an empty string (index ", i, ")"));
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    if (stop_token_ids[i] < 0) {
      return violation("stop_token_ids", detail::concat("stop_token_ids must be non-negative, got ",
                                                        stop_token_ids[i], " at index ", i));
    }
  }
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return violation("logprobs", detail::concat("logprobs must be in [0, ", kMaxLogprobs, "], got ", *logprobs));
  }
  return std::nullopt;
}

void SamplingParams::validate() const {
  if (auto v = first_violation()) CONVEYOR_THROW("invalid sampling parameter: ", v->message);
}

SamplingParams SamplingParams::from_json(const nlohmann::json& body, const SamplingParams& defaults) {
  if (!body.is_object()) CONVEYOR_THROW("request body must be a JSON object, got ", describe(body));
  reject_unsupported(body);
  SamplingParams p = defaults;
  read_int(body, "n", &p.n);
  read_number(body, "temperature", &p.temperature);
  read_number(body, "top_p", &p.top_p);
  read_int(body, "top_k", &p.top_k);
  read_number(body, "min_p", &p.min_p);
  if (const json* s = field(body, "seed")) p.seed = as_int("seed", *s);
  read_number(body, "repetition_penalty", &p.repetition_penalty);
  read_number(body, "presence_penalty", &p.presence_penalty);
  read_number(body, "frequency_penalty", &p.frequency_penalty);
  // Chat's newer name wins over the deprecated max_tokens, as in vLLM. A request that names a limit must
  // name a real one: 0 would read as "no limit" here but is an error to vLLM and OpenAI.
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (const json* v = field(body, name)) {
      p.max_tokens = as_int(name, *v);
      if (p.max_tokens < 1) CONVEYOR_THROW("request field '", name, "' must be at least 1, got ", p.max_tokens);
    }
  }
  read_int(body, "min_tokens", &p.min_tokens);
  read_stop(body, &p.stop);
  read_stop_token_ids(body, &p.stop_token_ids);
  read_bool(body, "ignore_eos", &p.ignore_eos);
  read_bool(body, "include_stop_str_in_output", &p.include_stop_str_in_output);
  read_bool(body, "skip_special_tokens", &p.skip_special_tokens);
  read_logprobs(body, &p.logprobs);
  p.validate();
  return p;
}

nlohmann::json SamplingParams::to_json() const {
  json j = {{"n", n},
            {"temperature", temperature},
            {"top_p", top_p},
            {"top_k", top_k},
            {"min_p", min_p},
            {"repetition_penalty", repetition_penalty},
            {"presence_penalty", presence_penalty},
            {"frequency_penalty", frequency_penalty},
            {"max_tokens", max_tokens},
            {"min_tokens", min_tokens},
            {"stop", stop},
            {"stop_token_ids", stop_token_ids},
            {"ignore_eos", ignore_eos},
            {"include_stop_str_in_output", include_stop_str_in_output},
            {"skip_special_tokens", skip_special_tokens}};
  if (seed) j["seed"] = *seed;
  if (logprobs) j["logprobs"] = *logprobs;
  return j;
}

SamplingParams SamplingParams::from_config(const Config& config) {
  SamplingParams p;
  p.temperature = config.get_float("sampling.temperature");
  p.top_p = config.get_float("sampling.top_p");
  p.top_k = config.get_int("sampling.top_k");
  p.min_p = config.get_float("sampling.min_p");
  p.max_tokens = config.get_int("sampling.max_tokens");
  p.min_tokens = config.get_int("sampling.min_tokens");
  p.repetition_penalty = config.get_float("sampling.repetition_penalty");
  p.presence_penalty = config.get_float("sampling.presence_penalty");
  p.frequency_penalty = config.get_float("sampling.frequency_penalty");
  p.ignore_eos = config.get_bool("sampling.ignore_eos");
  if (auto v = p.first_violation()) {
    std::string key = "sampling." + v->parameter;
    std::string origin = find_key_spec(key) ? config.value(key).origin : "?";
    CONVEYOR_THROW("config key '", key, "' (set by ", origin, "): ", v->message,
                   "; fix it in the YAML file or on the command line");
  }
  return p;
}

}  // namespace conveyor

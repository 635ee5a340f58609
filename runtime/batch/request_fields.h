// Which fields of a request body the engine honours. A field that would change the answer and is not
// implemented (streaming, tools, structured output, echo, ...) fails its line with the reason; a field
// that changes nothing here (user, metadata, an unknown extension) is reported as ignored in the run
// summary. No field is dropped without a word.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace conveyor {

// Throws an Error naming the first field set to something the engine does not implement; returns the
// names of the fields it ignores, in the body's order. "prompt" and "messages" are left to read_body,
// which refuses the one that does not belong to the endpoint.
std::vector<std::string> check_body_fields(const nlohmann::json& body);

// "ignored request fields (no effect here): metadata (2 requests), user (1 request)".
std::string describe_ignored_fields(const std::map<std::string, int64_t>& counts);

// A request naming a model this job does not serve fails as vLLM's server answers it
// ("The model `gpt-9` does not exist."), followed by the names it serves.
void check_model_name(const std::string& requested, const std::vector<std::string>& served);

}  // namespace conveyor

// Small string helpers shared by config, CLI and I/O code: splitting, trimming and the
// "did you mean" suggestion used by every unknown-name error.
#pragma once

#include <string>
#include <vector>

namespace conveyor {

std::vector<std::string> split(const std::string& s, char sep);
std::string trim(const std::string& s);
std::string join(const std::vector<std::string>& parts, const std::string& sep);
bool starts_with(const std::string& s, const std::string& prefix);
bool ends_with(const std::string& s, const std::string& suffix);

size_t edit_distance(const std::string& a, const std::string& b);
// The candidate closest to `word` by edit distance, or "" when none is plausibly meant.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);
// " (did you mean 'x'?)" or "" — ready to append to an error message.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// Human-readable byte counts: "1.50 GiB".
std::string format_bytes(double bytes);

}  // namespace conveyor

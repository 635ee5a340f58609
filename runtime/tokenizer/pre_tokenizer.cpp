// Normalizer and pre-tokenizer steps (see runtime/tokenizer/pre_tokenizer.h). The split behaviours follow
// HF tokenizers' definitions: a piece is cut into alternating non-match / match spans, which each
// behaviour then keeps, drops or merges.
#include "runtime/tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/strings.h"
#include "runtime/tokenizer/byte_level.h"

namespace conveyor {

namespace {

struct Span {
  size_t begin, end;
  bool is_match;
};

// Covers all of `text` with alternating non-match / match spans.
std::vector<Span> match_spans(const Regex& pattern, const std::string& text, bool invert) {
  std::vector<Span> spans;
  size_t prev = 0;
  for (const auto& [b, e] : pattern.find_all(text)) {
    if (prev != b) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), invert});
  return spans;
}

// Applies a behaviour: the spans that become pieces (each as [begin, end)).
std::vector<std::pair<size_t, size_t>> apply_behavior(const std::vector<Span>& spans, SplitBehavior behavior) {
  std::vector<std::pair<size_t, size_t>> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) out.emplace_back(s.begin, s.end);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const Span& s : spans) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kMergedWithPrevious:
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        const bool merge = behavior == SplitBehavior::kContiguous ? s.is_match == previous_match
                                                                   : s.is_match && !previous_match;
        if (merge && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t i = spans.size(); i-- > 0;) {
        const Span& s = spans[i];
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().first = s.begin;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  return out;
}

std::string replace_all(const Regex& pattern, const std::string& text, const std::string& content) {
  std::string out;
  size_t prev = 0;
  for (const auto& [b, e] : pattern.find_all(text)) {
    out.append(text, prev, b - prev);
    out += content;
    prev = e;
  }
  out.append(text, prev, std::string::npos);
  return out;
}

}  // namespace

void Normalizer::add_prepend(const std::string& prefix) { steps_.push_back({nullptr, prefix}); }

void Normalizer::add_replace(std::shared_ptr<const Regex> pattern, const std::string& content) {
  steps_.push_back({std::move(pattern), content});
}

std::string Normalizer::apply(const std::string& text) const {
  std::string s = text;
  for (const Step& step : steps_) {
    if (!step.pattern) {
      if (!s.empty()) s = step.content + s;  // HF prepends only to non-empty text
    } else {
      s = replace_all(*step.pattern, s, step.content);
    }
  }
  return s;
}

SplitBehavior parse_split_behavior(const std::string& name, const std::string& origin) {
  static const std::vector<std::string> kNames = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                                  "Contiguous"};
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return static_cast<SplitBehavior>(i);
  }
  CONVEYOR_THROW(origin, ": unknown split behavior '", name, "'", did_you_mean(name, kNames),
                 "; expected one of ", join(kNames, ", "));
}

PrependScheme parse_prepend_scheme(const std::string& name, const std::string& origin) {
  if (name == "always") return PrependScheme::kAlways;
  if (name == "first") return PrependScheme::kFirst;
  if (name == "never") return PrependScheme::kNever;
  CONVEYOR_THROW(origin, ": unknown Metaspace prepend_scheme '", name, "'; expected always, first or never");
}

const std::string& gpt2_split_pattern() {
  static const std::string kPattern =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  return kPattern;
}

void PreTokenizer::add_split(std::shared_ptr<const Regex> pattern, SplitBehavior behavior, bool invert) {
  Step s;
  s.kind = Kind::kSplit;
  s.pattern = std::move(pattern);
  s.behavior = behavior;
  s.invert = invert;
  steps_.push_back(std::move(s));
}

void PreTokenizer::add_digits(bool individual) {
  // Digits means Unicode numeric (Nd, Nl, No), which is what \p{N} matches.
  static const auto kOne = std::make_shared<const Regex>(R"(\p{N})", "Digits pre-tokenizer");
  static const auto kRun = std::make_shared<const Regex>(R"(\p{N}+)", "Digits pre-tokenizer");
  add_split(individual ? kOne : kRun, SplitBehavior::kIsolated, false);
}

void PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  static const auto kGpt2 = std::make_shared<const Regex>(gpt2_split_pattern(), "ByteLevel pre-tokenizer");
  Step s;
  s.kind = Kind::kByteLevel;
  s.pattern = use_regex ? kGpt2 : nullptr;
  s.add_prefix_space = add_prefix_space;
  steps_.push_back(std::move(s));
  byte_level_ = true;
}

void PreTokenizer::add_metaspace(const std::string& replacement, PrependScheme scheme, bool split) {
  Step s;
  s.kind = Kind::kMetaspace;
  s.replacement = replacement;
  s.scheme = scheme;
  s.split = split;
  s.behavior = SplitBehavior::kMergedWithNext;  // each "▁" starts a piece
  if (split) s.pattern = std::make_shared<const Regex>(Regex::escape(replacement), "Metaspace pre-tokenizer");
  steps_.push_back(std::move(s));
}

void PreTokenizer::split_piece(const Step& step, const Piece& piece, std::vector<Piece>& out) {
  const auto ranges = apply_behavior(match_spans(*step.pattern, piece.text, step.invert), step.behavior);
  for (const auto& [b, e] : ranges) {
    if (e > b) out.push_back({piece.text.substr(b, e - b), piece.at_start && b == 0});
  }
}

void PreTokenizer::apply_step(const Step& step, std::vector<Piece>& pieces) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (Piece& p : pieces) {
    if (step.kind == Kind::kByteLevel) {
      if (step.add_prefix_space && !p.text.empty() && p.text[0] != ' ') p.text = " " + p.text;
    } else if (step.kind == Kind::kMetaspace) {
      static const Regex kSpace(" ", "Metaspace pre-tokenizer");
      p.text = replace_all(kSpace, p.text, step.replacement);
      const bool starts = p.text.compare(0, step.replacement.size(), step.replacement) == 0;
      if (!starts && (step.scheme == PrependScheme::kAlways || (step.scheme == PrependScheme::kFirst && p.at_start))) {
        p.text = step.replacement + p.text;
      }
    }
    if (step.pattern) {
      split_piece(step, p, out);
    } else if (!p.text.empty()) {
      out.push_back(std::move(p));
    }
  }
  if (step.kind == Kind::kByteLevel) {
    for (Piece& p : out) p.text = byte_level_encode(p.text);
  }
  pieces = std::move(out);
}

void PreTokenizer::run(const std::string& segment, bool at_text_start, std::vector<std::string>& pieces) const {
  if (segment.empty()) return;
  std::vector<Piece> work{{segment, at_text_start}};
  for (const Step& step : steps_) apply_step(step, work);
  for (Piece& p : work) pieces.push_back(std::move(p.text));
}

}  // namespace conveyor

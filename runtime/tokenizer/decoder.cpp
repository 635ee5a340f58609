// Incremental token decoding (see runtime/tokenizer/decoder.h). Byte-fallback groups are resolved as HF's
// ByteFallback does: a group that is valid UTF-8 becomes its text, otherwise one U+FFFD per byte;
// so a group is only emitted when a non-byte token (or the end) closes it.
#include "runtime/tokenizer/decoder.h"

#include "runtime/tokenizer/byte_level.h"

namespace conveyor {

namespace {

std::string replace_literal(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  size_t prev = 0, pos;
  while ((pos = s.find(from, prev)) != std::string::npos) {
    out.append(s, prev, pos - prev);
    out += to;
    prev = pos + from.size();
  }
  out.append(s, prev, std::string::npos);
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a "<0xXX>" token string, or -1.
int fallback_byte(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::string strip_token(const std::string& s, const std::string& content, size_t start, size_t stop) {
  if (content.empty()) return s;
  size_t b = 0, e = s.size();
  for (size_t i = 0; i < start && s.compare(b, content.size(), content) == 0; ++i) b += content.size();
  for (size_t i = 0; i < stop && e >= b + content.size() && s.compare(e - content.size(), content.size(), content) == 0;
       ++i) {
    e -= content.size();
  }
  return s.substr(b, e - b);
}

}  // namespace

std::string TokenDecoder::rewrite(const std::string& token) const {
  std::string s = token;
  for (const DecoderSpec::Rewrite& r : spec_->rewrites) {
    s = replace_literal(s, r.from, r.drop_in_first_token && index_ == 0 ? std::string() : r.to);
  }
  if (!spec_->strip_after_fuse && (spec_->strip_start > 0 || spec_->strip_stop > 0)) {
    s = strip_token(s, spec_->strip_content, spec_->strip_start, spec_->strip_stop);
  }
  return s;
}

std::string TokenDecoder::flush_bytes() {
  if (byte_group_.empty()) return "";
  std::string text;
  if (utf8_first_invalid(byte_group_) == std::string::npos) {
    text = byte_group_;
  } else {
    for (size_t i = 0; i < byte_group_.size(); ++i) text += kReplacementChar;
  }
  byte_group_.clear();
  return emit(text);
}

std::string TokenDecoder::emit(const std::string& bytes) {
  std::string text = settler_.push(bytes);
  if (spec_->strip_after_fuse && !started_) {
    const std::string& c = spec_->strip_content;
    while (strip_left_ > 0 && !c.empty() && text.compare(0, c.size(), c) == 0) {
      text.erase(0, c.size());
      --strip_left_;
    }
    if (!text.empty()) started_ = true;
  }
  return text;
}

std::string TokenDecoder::push(const std::string& token) {
  if (spec_->join_with_space) {
    return emit(index_++ == 0 ? token : " " + token);
  }
  std::string text = rewrite(token);
  ++index_;
  if (spec_->byte_fallback) {
    const int b = fallback_byte(text);
    if (b >= 0) {
      byte_group_ += static_cast<char>(b);
      return "";
    }
  }
  std::string out = flush_bytes();
  if (spec_->byte_level) {
    std::string bytes;
    if (!byte_level_decode(text, bytes)) bytes = text;  // a token outside the alphabet stays as written
    out += emit(bytes);
  } else {
    out += emit(text);
  }
  return out;
}

std::string TokenDecoder::finish() {
  std::string out = flush_bytes();
  // A cut-off character becomes U+FFFD, never the strip content, so the strip has nothing to do here.
  out += settler_.finish();
  return out;
}

}  // namespace conveyor

// The encode/decode pipeline of Tokenizer (see tokenizer.h): added tokens are cut out of the raw
// text first, then normalized added tokens out of each normalized segment, then the pre-tokenizer
// splits what is left and BPE turns each piece into ids; the post-processor adds BOS/EOS.
#include "runtime/tokenizer/tokenizer.h"

#include <algorithm>

#include "runtime/core/error.h"
#include "runtime/tokenizer/impl.h"
#include "runtime/tokenizer/utf8.h"

namespace conveyor {

Tokenizer make_tokenizer(std::shared_ptr<Tokenizer::Impl> impl) { return Tokenizer(std::move(impl)); }

Tokenizer::Tokenizer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

const std::string* Tokenizer::Impl::decoder_token(int32_t id, bool skip_special) const {
  if (const AddedToken* t = added.find_id(id)) {
    return skip_special && t->special ? nullptr : &t->content;
  }
  if (id < 0 || id >= model->vocab_size() || model->id_to_token(id).empty()) return nullptr;
  return &model->id_to_token(id);
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool add_bos, bool parse_special) const {
  const Impl& im = *impl_;
  const size_t bad = utf8_first_invalid(text);
  CONVEYOR_CHECK(bad == std::string::npos, "text to encode is not valid UTF-8 at byte ", bad, " of ", text.size(),
                 "; pass UTF-8 text (or token ids) instead");
  std::vector<int32_t> ids;
  if (add_bos) ids = im.prefix_ids;
  std::vector<std::string> pieces;
  for (const TextSegment& raw : im.added.split(text, /*normalized=*/false, parse_special)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    const std::string normalized = im.normalizer.apply(text.substr(raw.begin, raw.end - raw.begin));
    for (const TextSegment& seg : im.added.split(normalized, /*normalized=*/true, parse_special)) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
        continue;
      }
      pieces.clear();
      im.pre_tokenizer.run(normalized.substr(seg.begin, seg.end - seg.begin), raw.begin == 0 && seg.begin == 0,
                           pieces);
      for (const std::string& p : pieces) im.model->tokenize(p, ids);
    }
  }
  if (add_bos) ids.insert(ids.end(), im.suffix_ids.begin(), im.suffix_ids.end());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  TokenDecoder decoder(impl_->decoder);
  std::string out;
  for (int32_t id : ids) {
    if (const std::string* t = impl_->decoder_token(id, skip_special)) out += decoder.push(*t);
  }
  out += decoder.finish();
  return out;
}

int32_t Tokenizer::vocab_size() const {
  int32_t n = impl_->model->vocab_size();
  for (const AddedToken& t : impl_->added.tokens()) n = std::max(n, t.id + 1);
  return n;
}

int32_t Tokenizer::bos_id() const { return impl_->bos_id; }

const std::vector<int32_t>& Tokenizer::eos_ids() const { return impl_->eos_ids; }

std::optional<int32_t> Tokenizer::token_to_id(const std::string& token) const {
  if (const AddedToken* t = impl_->added.find_content(token)) return t->id;
  const int32_t id = impl_->model->token_to_id(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* t = impl_->decoder_token(id, false);
  return t ? *t : std::string();
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* t = impl_->added.find_id(id);
  return t != nullptr && t->special;
}

const std::string& Tokenizer::kind() const { return impl_->kind; }

void Tokenizer::set_bos_eos(int32_t bos_id, std::vector<int32_t> eos_ids) {
  auto copy = std::make_shared<Impl>(*impl_);
  copy->bos_id = bos_id;
  copy->eos_ids = std::move(eos_ids);
  impl_ = std::move(copy);
}

// ---- StreamDecoder ----------------------------------------------------------------------------

struct StreamDecoder::State {
  std::shared_ptr<const Tokenizer::Impl> impl;  // keeps the spec alive while decoding
  bool skip_special;
  TokenDecoder decoder;
  State(std::shared_ptr<const Tokenizer::Impl> i, bool skip)
      : impl(std::move(i)), skip_special(skip), decoder(impl->decoder) {}
};

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : state_(std::make_unique<State>(tokenizer.impl_, skip_special)) {}
StreamDecoder::~StreamDecoder() = default;
StreamDecoder::StreamDecoder(StreamDecoder&&) noexcept = default;
StreamDecoder& StreamDecoder::operator=(StreamDecoder&&) noexcept = default;

std::string StreamDecoder::step(int32_t id) {
  const std::string* t = state_->impl->decoder_token(id, state_->skip_special);
  return t ? state_->decoder.push(*t) : std::string();
}

std::string StreamDecoder::flush() {
  std::string out = state_->decoder.finish();
  state_->decoder = TokenDecoder(state_->impl->decoder);  // ready for a next sequence
  return out;
}

}  // namespace conveyor

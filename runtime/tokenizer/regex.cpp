// PCRE2 wrapper (see runtime/tokenizer/regex.h). JIT code runs on a per-thread JIT stack larger than the
// 32 KiB default, so lookahead patterns over long whitespace runs do not hit the stack limit.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "runtime/tokenizer/regex.h"

#include <pcre2.h>

#include <cctype>

#include "runtime/core/error.h"
#include "runtime/tokenizer/utf8.h"

namespace conveyor {

namespace {

constexpr size_t kJitStackMax = 8u << 20;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// One match context + JIT stack per thread, shared by every Regex.
struct ThreadMatchContext {
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadMatchContext() {
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, kJitStackMax, nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchContext() {
    if (stack) pcre2_jit_stack_free(stack);
    if (context) pcre2_match_context_free(context);
  }
};

pcre2_match_context* thread_match_context() {
  thread_local ThreadMatchContext ctx;
  return ctx.context;
}

}  // namespace

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(const std::string& pattern, const std::string& origin) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  auto code = std::make_shared<Code>();
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  CONVEYOR_CHECK(code->code != nullptr, "bad regex in ", origin, " at offset ", err_offset, ": ",
                 pcre2_message(err), " (pattern: ", pattern, ")");
  // JIT is an optimisation: when the platform lacks it, the interpreter gives the same matches.
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);
  code_ = std::move(code);
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(const std::string& text) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  CONVEYOR_CHECK(md != nullptr, "out of memory creating PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, md,
                               thread_match_context());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      CONVEYOR_THROW("regex match failed (", pcre2_message(rc), ") for pattern ", pattern_,
                     " on a text of ", text.size(), " bytes");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      start = e;
    } else {  // an empty match: step over one whole character
      if (b >= text.size()) break;
      const size_t n = utf8_valid_char_len(text, b);
      start = b + (n == 0 ? 1 : n);
    }
  }
  pcre2_match_data_free(md);
  return out;
}

std::string Regex::escape(const std::string& literal) {
  // A backslash before any ASCII non-alphanumeric makes it literal in PCRE2; other bytes are literal.
  std::string out;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace conveyor

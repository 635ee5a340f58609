// libFuzzer target: parse_gguf on arbitrary bytes. A conveyor::Error is the expected way to reject
// input; anything else (crash, sanitizer report, other exception) is a finding. Accepted files have
// their metadata printed to text and every dequantizable tensor decoded, so validated offsets and
// sizes are exercised against the real buffer.
//   ./gguf_fuzz -max_total_time=60 corpus/   (seeds: tests/data/formats/*.gguf)
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/model/gguf_dequant.h"
#include "runtime/model/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    conveyor::GgufContents c = conveyor::parse_gguf(data, size, "fuzz.gguf");
    size_t text = 0;
    for (const auto& [key, value] : c.metadata) text += value.short_text().size() + value.type_text().size();
    std::vector<float> out;
    for (const auto& t : c.tensors) {
      if (!conveyor::gguf_can_dequantize(t.type) || t.numel() > (1 << 20)) continue;
      out.resize(static_cast<size_t>(t.numel()));
      conveyor::gguf_dequantize(t.type, data + c.data_start + t.offset, t.numel(), out.data());
    }
    (void)text;
  } catch (const conveyor::Error&) {
  }
  return 0;
}

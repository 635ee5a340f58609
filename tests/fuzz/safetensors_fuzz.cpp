// libFuzzer target: parse_safetensors on arbitrary bytes. A conveyor::Error is the expected way to
// reject input; anything else (crash, sanitizer report, other exception) is a finding. Accepted
// files have every tensor converted, which proves the validated offsets stay inside the buffer.
//   ./safetensors_fuzz -max_total_time=60 corpus/  (seed: tests/data/formats/*/*.safetensors)
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/model/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    conveyor::SafetensorsHeader h = conveyor::parse_safetensors(data, size, "fuzz.safetensors");
    std::vector<float> out;
    for (const auto& t : h.tensors) {
      size_t n = t.nbytes() / conveyor::safetensors_dtype_size(t.dtype);
      if (n > (1u << 20)) continue;  // bound the work; offsets were validated regardless
      out.resize(n);
      conveyor::safetensors_to_f32(t.dtype, data + h.data_start + t.begin, n, out.data());
    }
  } catch (const conveyor::Error&) {
  }
  return 0;
}

// The request mix of the pipeline tests (CPU and GPU): 18 greedy requests with prompt lengths 1..40
// of random ids and outputs of 1..max_out tokens, EOS ignored so every length is fixed in advance.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/engine/request.h"

namespace conveyor::testing {

inline std::vector<Request> mixed_greedy_requests(int64_t vocab, uint64_t seed, int max_out) {
  std::mt19937_64 rng(seed);
  const int lengths[] = {1, 7, 33, 3, 12, 40, 2, 19, 5, 26, 9, 1, 15, 31, 4, 11, 22, 6};
  std::vector<Request> out;
  for (int i = 0; i < 18; ++i) {
    Request r;
    r.id = i;
    r.index = static_cast<uint64_t>(i);
    for (int t = 0; t < lengths[i]; ++t) r.prompt_ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    r.params.max_tokens = 1 + (i * 7) % max_out;
    r.label = "request " + std::to_string(i);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace conveyor::testing

// CudaSampler against the CPU reference Sampler::sample: the same random logits, histories and
// parameters must give EXACTLY the same token per row (greedy, temperature, top-k, top-p, min-p,
// penalties, min_tokens, ties), the same logprob ranks and top ids, and logprobs within 1e-4.
// The counter-based noise is checked bit for bit (uniform) on the device against the host.
#include "kernels/cuda/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include "runtime/core/cuda_buffer.h"
#include "runtime/core/cuda_check.h"
#include "runtime/core/error.h"
#include "runtime/sampling/sampler.h"
#include "stages/cuda/cuda_stage_sampler.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

using conveyor::testing::random_floats;

// n elements of T in a CudaBuffer (runtime/core/cuda_buffer.h), freed at scope exit so that failing
// tests do not leak.
template <typename T>
struct TypedBuffer {
  CudaBuffer buffer;
  T* ptr;
  explicit TypedBuffer(size_t n) : buffer(std::max<size_t>(n, 1) * sizeof(T), "a test buffer"), ptr(buffer.as<T>()) {}
  void upload(const std::vector<T>& v) {
    CONVEYOR_CUDA_CHECK(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download(size_t n) const {
    std::vector<T> v(n);
    CONVEYOR_CUDA_CHECK(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

// A CudaSampler and the workspace it works in, allocated as a stage does at start-up.
struct OwnedSampler {
  OwnedSampler(int64_t vocab, int rows, std::vector<int32_t> eos)
      : workspace(cuda_sampler_workspace_bytes(vocab, rows), "a test sampler workspace"),
        sampler(vocab, rows, std::move(eos), workspace.data(), workspace.bytes()) {}
  CudaBuffer workspace;
  CudaSampler sampler;
};

TEST(SamplingNoiseGpu, DeviceBitsEqualHost) {
  const int64_t n = 1 << 16;
  std::mt19937_64 rng(7);
  std::vector<uint64_t> seed(n), step(n), token(n);
  for (int64_t i = 0; i < n; ++i) {
    seed[i] = i % 3 == 0 ? static_cast<uint64_t>(i) : rng();  // small and large seeds alike
    step[i] = rng() % 5000;
    token[i] = rng() % 200000;
  }
  TypedBuffer<uint64_t> d_seed(n), d_step(n), d_token(n);
  TypedBuffer<double> d_u(n), d_g(n);
  d_seed.upload(seed);
  d_step.upload(step);
  d_token.upload(token);
  sampling_noise_cuda(d_seed.ptr, d_step.ptr, d_token.ptr, n, d_u.ptr, d_g.ptr, nullptr);
  CONVEYOR_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<double> u = d_u.download(n), g = d_g.download(n);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double hu = sampling_uniform(seed[i], step[i], token[i]);
    const double hg = sampling_gumbel(seed[i], step[i], token[i]);
    // The uniform is integer arithmetic and one exact scaling: bit-equal. The Gumbel goes through two
    // library logs (1 ulp each on either side): a few ulps.
    if (u[i] != hu || std::fabs(g[i] - hg) > 1e-14 * std::max(1.0, std::fabs(hg))) {
      if (bad++ == 0) {
        ADD_FAILURE() << "first mismatch at " << i << " (seed " << seed[i] << ", step " << step[i] << ", token "
                      << token[i] << "): uniform " << u[i] << " vs " << hu << ", gumbel " << g[i] << " vs " << hg;
      }
    }
  }
  EXPECT_EQ(bad, 0) << "mismatches out of " << n;
}

// One row's request state, as the engine would hold it.
struct RowCase {
  SamplingParams params;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  uint64_t seed = 0;
};

SamplingRowParams to_row(const RowCase& c) { return sampling_row_params(c.params, c.seed, c.output.size()); }

// Samples `cases` on the GPU and on the CPU and checks every row; logits are [rows, vocab].
void check_against_cpu(const std::vector<float>& logits, int64_t vocab, const std::vector<RowCase>& cases,
                       const std::vector<int32_t>& eos, const std::string& what) {
  const int rows = static_cast<int>(cases.size());
  std::vector<SamplingRowParams> params;
  std::vector<int64_t> hist_off{0}, mask_off{0};
  std::vector<int32_t> hist, num_out, mask;
  for (const RowCase& c : cases) {
    params.push_back(to_row(c));
    hist.insert(hist.end(), c.prompt.begin(), c.prompt.end());
    hist.insert(hist.end(), c.output.begin(), c.output.end());
    hist_off.push_back(static_cast<int64_t>(hist.size()));
    num_out.push_back(static_cast<int32_t>(c.output.size()));
    mask.insert(mask.end(), c.params.stop_token_ids.begin(), c.params.stop_token_ids.end());
    mask_off.push_back(static_cast<int64_t>(mask.size()));
  }
  TypedBuffer<float> d_logits(logits.size());
  d_logits.upload(logits);
  OwnedSampler owned(vocab, rows + 3, eos);
  CudaSampler& gpu = owned.sampler;  // spare rows: the batch need not fill the sampler
  const std::vector<SampledToken> got =
      gpu.sample(d_logits.ptr, rows, params, hist_off, hist, num_out, mask_off, mask, nullptr);
  // The device copy of the logits must be left as it was (logprobs are of the raw logits).
  EXPECT_TRUE(d_logits.download(logits.size()) == logits) << what << ": the sampler modified its input";
  Sampler cpu(eos);
  int mismatches = 0;
  for (int r = 0; r < rows; ++r) {
    const RowCase& c = cases[r];
    const SampleResult want = cpu.sample(logits.data() + r * vocab, vocab, SequenceView{c.prompt, c.output, c.seed}, c.params);
    std::ostringstream where;
    where << what << ", vocab " << vocab << ", row " << r << " of " << rows;
    if (got[r].token != want.token && mismatches++ < 3) {
      ADD_FAILURE() << where.str() << ": token " << got[r].token << ", CPU " << want.token;
    }
    if (!c.params.logprobs) continue;
    EXPECT_NEAR(got[r].logprob, want.logprob, 1e-4) << where.str();
    EXPECT_EQ(got[r].rank, want.rank) << where.str();
    ASSERT_EQ(got[r].num_top, static_cast<int32_t>(want.top.size())) << where.str();
    for (size_t j = 0; j < want.top.size(); ++j) {
      EXPECT_EQ(got[r].top_ids[j], want.top[j].token) << where.str() << ", top " << j;
      EXPECT_NEAR(got[r].top_logprobs[j], want.top[j].logprob, 1e-4) << where.str() << ", top " << j;
    }
  }
  EXPECT_EQ(mismatches, 0) << what << ": rows whose token differs from the CPU sampler";
}

std::vector<int32_t> random_ids(size_t n, int64_t vocab, std::mt19937_64& rng, int64_t distinct) {
  std::vector<int32_t> v(n);
  // Drawn from a small pool so that repeats (frequency counts) happen.
  for (auto& x : v) x = static_cast<int32_t>((rng() % distinct) * 7919 % vocab);
  return v;
}

using ParamsFor = std::function<SamplingParams(int row, std::mt19937_64& rng)>;

// Random logits and histories for each (vocab, rows) of the brief; params per row from `make`.
void run_sweep(const std::string& what, const ParamsFor& make, float lo = -8.f, float hi = 8.f,
               bool quantize = false) {
  for (int64_t vocab : {int64_t(1000), int64_t(32000), int64_t(128256)}) {
    for (int rows : {1, 7, 64}) {
      std::mt19937_64 rng(static_cast<uint64_t>(vocab * 131 + rows));
      std::vector<float> logits = random_floats(static_cast<size_t>(vocab) * rows, rng(), lo, hi);
      // Quantized logits make many exact ties: ordering must fall back to the lower id, as on the CPU.
      if (quantize) {
        for (float& x : logits) x = std::round(x * 4.f) / 4.f;
      }
      const std::vector<int32_t> eos{2, static_cast<int32_t>(vocab - 5)};
      std::vector<RowCase> cases(rows);
      for (int r = 0; r < rows; ++r) {
        cases[r].params = make(r, rng);
        cases[r].params.validate();
        cases[r].prompt = random_ids(5 + rng() % 40, vocab, rng, 60);
        cases[r].output = random_ids(rng() % 12, vocab, rng, 20);
        cases[r].seed = rng();
        if (cases[r].params.min_tokens > 0) {
          // EOS and stop ids far above the rest: they win unless the mask removes them.
          for (int32_t id : eos) logits[r * vocab + id] = hi + 20.f;
          for (int32_t id : cases[r].params.stop_token_ids) logits[r * vocab + id] = hi + 19.f;
        }
      }
      check_against_cpu(logits, vocab, cases, eos, what);
    }
  }
}

SamplingParams with_logprobs(SamplingParams p, int row) {
  const int choice[] = {-1, 0, 5, 20};
  if (choice[row % 4] >= 0) p.logprobs = choice[row % 4];
  return p;
}

TEST(CudaSamplerGpu, Greedy) {
  run_sweep("greedy", [](int r, std::mt19937_64&) {
    SamplingParams p;
    p.temperature = 0.0;
    return with_logprobs(p, r);
  });
}

TEST(CudaSamplerGpu, GreedyTies) {
  run_sweep("greedy with ties", [](int r, std::mt19937_64&) {
    SamplingParams p;
    p.temperature = 0.0;
    return with_logprobs(p, r);
  }, -3.f, 3.f, true);
}

TEST(CudaSamplerGpu, Temperature) {
  run_sweep("temperature", [](int r, std::mt19937_64&) {
    SamplingParams p;
    p.temperature = 0.3 + 0.4 * (r % 4);
    return with_logprobs(p, r);
  });
}

TEST(CudaSamplerGpu, TopK) {
  run_sweep("top-k", [](int r, std::mt19937_64& rng) {
    SamplingParams p;
    p.temperature = 1.5;  // flat enough that tokens past k would often win
    const int64_t ks[] = {1, 2, 40, 1000};
    p.top_k = ks[rng() % 4];
    return with_logprobs(p, r);
  });
}

TEST(CudaSamplerGpu, TopKWithTies) {
  run_sweep("top-k with ties", [](int r, std::mt19937_64& rng) {
    SamplingParams p;
    p.temperature = 2.0;
    p.top_k = 1 + static_cast<int64_t>(rng() % 50);
    return with_logprobs(p, r);
  }, -3.f, 3.f, true);
}

TEST(CudaSamplerGpu, TopP) {
  run_sweep("top-p", [](int r, std::mt19937_64& rng) {
    SamplingParams p;
    p.temperature = 0.7 + 0.5 * (r % 3);
    const double ps[] = {0.05, 0.5, 0.9, 0.99};
    p.top_p = ps[rng() % 4];
    return with_logprobs(p, r);
  });
}

TEST(CudaSamplerGpu, TopPWithTies) {
  run_sweep("top-p with ties", [](int r, std::mt19937_64& rng) {
    SamplingParams p;
    p.temperature = 1.0;
    p.top_p = 0.1 + 0.2 * static_cast<double>(rng() % 4);
    return with_logprobs(p, r);
  }, -2.f, 2.f, true);
}

TEST(CudaSamplerGpu, MinP) {
  run_sweep("min-p", [](int r, std::mt19937_64& rng) {
    SamplingParams p;
    p.temperature = 1.2;
    const double mps[] = {0.01, 0.1, 0.5};
    p.min_p = mps[rng() % 3];
    return with_logprobs(p, r);
  });
}

TEST(CudaSamplerGpu, AllFiltersTogether) {
  run_sweep("top-k + top-p + min-p", [](int r, std::mt19937_64& rng) {
    SamplingParams p;
    p.temperature = 0.9;
    p.top_k = 20 + static_cast<int64_t>(rng() % 500);
    p.top_p = 0.8;
    p.min_p = 0.02;
    return with_logprobs(p, r);
  });
}

TEST(CudaSamplerGpu, Penalties) {
  run_sweep("penalties", [](int r, std::mt19937_64& rng) {
    SamplingParams p;
    p.temperature = r % 3 == 0 ? 0.0 : 0.8;  // greedy rows too: penalties apply before the argmax
    p.repetition_penalty = 0.7 + 0.3 * static_cast<double>(rng() % 4);
    p.frequency_penalty = r % 2 ? 0.5 : -0.4;
    p.presence_penalty = r % 5 ? 0.3 : 0.0;
    if (r % 4 == 1) p.top_p = 0.9;
    return with_logprobs(p, r);
  }, -2.f, 2.f);  // a narrow range so the penalised history tokens compete for the top
}

TEST(CudaSamplerGpu, MinTokensMasksEosAndStopIds) {
  run_sweep("min_tokens", [](int r, std::mt19937_64&) {
    SamplingParams p;
    p.temperature = r % 2 ? 0.0 : 1.0;
    p.max_tokens = 100;
    p.min_tokens = 50;          // more than any test history's outputs: the mask is active
    p.stop_token_ids = {3, 11};
    p.ignore_eos = r % 3 == 2;  // these rows must pick EOS
    return with_logprobs(p, r);
  });
}

TEST(CudaSamplerGpu, MixedRowsInOneBatch) {
  run_sweep("mixed", [](int r, std::mt19937_64& rng) {
    SamplingParams p;
    switch (r % 6) {
      case 0: p.temperature = 0.0; break;
      case 1: p.top_k = 7; break;
      case 2: p.top_p = 0.6; p.temperature = 0.5; break;
      case 3: p.min_p = 0.2; break;
      case 4: p.repetition_penalty = 1.2; p.top_k = 3; p.top_p = 0.7; break;
      default: p.temperature = 1.0 + static_cast<double>(rng() % 3); break;
    }
    return with_logprobs(p, r);
  });
}

TEST(CudaSamplerGpu, NonFiniteLogitsThrow) {
  const int64_t vocab = 3000;
  std::vector<float> logits = random_floats(vocab * 2, 5, -4.f, 4.f);
  logits[vocab + 1234] = std::numeric_limits<float>::quiet_NaN();
  TypedBuffer<float> d(logits.size());
  d.upload(logits);
  OwnedSampler owned(vocab, 2, {0});
  CudaSampler& gpu = owned.sampler;
  std::vector<SamplingRowParams> params(2);
  try {
    gpu.sample(d.ptr, 2, params, {0, 0, 0}, {}, {0, 0}, {0, 0, 0}, {}, nullptr);
    FAIL() << "a NaN logit was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 1234 of row 1"), std::string::npos) << e.what();
  }
}

// Greedy rows without penalties are direct: select_kernel takes their argmax and the NaN / +inf check from the
// logits in one pass (16-byte loads where vocab % 4 == 0, one at a time otherwise). Both spreads: the argmax with
// a tie (the lower id wins, as on the CPU), then the lowest non-finite id of the row named in the error.
TEST(CudaSamplerGpu, DirectGreedyRowsCheckTheirOwnLogits) {
  for (int64_t vocab : {int64_t(3000), int64_t(3001)}) {
    std::vector<float> logits = random_floats(vocab * 2, 7, -4.f, 4.f);
    logits[vocab + 2999] = logits[vocab + 17] = 9.f;  // a tie at the top of row 1
    logits[1500] = -std::numeric_limits<float>::infinity();
    TypedBuffer<float> d(logits.size());
    d.upload(logits);
    OwnedSampler owned(vocab, 2, {0});
    std::vector<SamplingRowParams> params(2);
    for (SamplingRowParams& p : params) p.temperature = 0.f;
    const auto got = owned.sampler.sample(d.ptr, 2, params, {0, 0, 0}, {}, {0, 0}, {0, 0, 0}, {}, nullptr);
    const int64_t row0 = std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin();
    EXPECT_EQ(got[0].token, row0) << "vocab " << vocab;
    EXPECT_EQ(got[1].token, 17) << "vocab " << vocab;
    logits[vocab + 2000] = std::numeric_limits<float>::quiet_NaN();
    logits[vocab + 1234] = std::numeric_limits<float>::infinity();
    logits[vocab + 2500] = std::numeric_limits<float>::infinity();
    d.upload(logits);
    try {
      owned.sampler.sample(d.ptr, 2, params, {0, 0, 0}, {}, {0, 0}, {0, 0, 0}, {}, nullptr);
      ADD_FAILURE() << "non-finite logits were accepted (vocab " << vocab << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token 1234 of row 1"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaSamplerGpu, BadTokenIdsThrow) {
  const int64_t vocab = 100;
  std::vector<float> logits = random_floats(vocab, 6, -4.f, 4.f);
  TypedBuffer<float> d(logits.size());
  d.upload(logits);
  OwnedSampler owned(vocab, 1, {0});
  CudaSampler& gpu = owned.sampler;
  std::vector<SamplingRowParams> params(1);
  params[0].repetition_penalty = 1.5f;
  EXPECT_THROW(gpu.sample(d.ptr, 1, params, {0, 2}, {5, 100}, {1}, {0, 0}, {}, nullptr), Error);
  params[0].repetition_penalty = 1.f;
  EXPECT_THROW(gpu.sample(d.ptr, 1, params, {0, 0}, {}, {0}, {0, 1}, {-1}, nullptr), Error);
}

}  // namespace
}  // namespace conveyor

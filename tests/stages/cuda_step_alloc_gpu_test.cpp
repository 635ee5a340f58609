// No device or pinned allocation inside a decode step of the CUDA stage: every CUDA runtime and driver
// API call is seen through CUPTI's callback API while one decode step runs (the first after a prefill,
// and one after the bucket's graph was captured), and
// any cudaMalloc*/cudaFree*/cudaHostAlloc/cuMemAlloc*/cuMemFree*/cuMemCreate/cuMemRelease fails the
// test by name. A second test plants one CudaBuffer inside the window and requires the counter to
// see it, so a counter that sees nothing cannot pass the first test vacuously.
#include <cupti.h>
#include <execinfo.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/core/cuda_buffer.h"
#include "runtime/model/spec.h"
#include "stages/cuda/cuda_ops.h"
#include "tests/stages/model_driver.h"
#include "tests/support/test_support.h"

namespace conveyor {
namespace {

bool is_allocation_call(const char* name) {
  static const char* const kPrefixes[] = {"cudaMalloc", "cudaFree",  "cudaHostAlloc", "cuMemAlloc",
                                          "cuMemFree",  "cuMemCreate", "cuMemRelease", "cuMemHostAlloc"};
  if (name == nullptr) return false;
  for (const char* p : kPrefixes)
    if (std::strncmp(name, p, std::strlen(p)) == 0) return true;
  return false;
}

// Counts allocation API calls (by function name) between construction and destruction.
class AllocationCounter {
 public:
  AllocationCounter() {
    const CUptiResult rc = cuptiSubscribe(&subscriber_, &on_api, this);
    const char* msg = nullptr;
    if (rc != CUPTI_SUCCESS) cuptiGetResultString(rc, &msg);
    EXPECT_EQ(rc, CUPTI_SUCCESS) << "cuptiSubscribe: " << (msg ? msg : "?");
    if (rc != CUPTI_SUCCESS) return;
    subscribed_ = true;
    EXPECT_EQ(cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API), CUPTI_SUCCESS);
    EXPECT_EQ(cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API), CUPTI_SUCCESS);
  }
  ~AllocationCounter() { stop(); }
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;

  void stop() {
    if (subscribed_) cuptiUnsubscribe(subscriber_);
    subscribed_ = false;
  }
  bool subscribed() const { return subscribed_; }
  // "cudaMalloc_v3020 x2, cuMemAlloc_v2 x2" or "" when none.
  // The call stack of the first call of each allocating function (symbols need -rdynamic).
  std::string where() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& [name, stack] : stacks_) out += "\n" + name + " first called from:\n" + stack;
    return out;
  }
  std::string calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& [name, n] : calls_) out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
    return out;
  }
  int total_api_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return api_calls_;
  }

 private:
  static void CUPTIAPI on_api(void* self, CUpti_CallbackDomain, CUpti_CallbackId, const void* data) {
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    if (info->callbackSite != CUPTI_API_ENTER) return;
    auto* c = static_cast<AllocationCounter*>(self);
    std::lock_guard<std::mutex> lock(c->mu_);
    ++c->api_calls_;
    if (!is_allocation_call(info->functionName)) return;
    if (c->calls_[info->functionName]++ == 0) {
      void* frames[24];
      const int n = backtrace(frames, 24);
      char** names = backtrace_symbols(frames, n);
      std::string stack;
      for (int i = 0; i < n && names; ++i) stack += std::string("  ") + names[i] + "\n";
      free(names);
      c->stacks_[info->functionName] = stack;
    }
  }

  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool subscribed_ = false;
  mutable std::mutex mu_;
  std::map<std::string, int> calls_;
  std::map<std::string, std::string> stacks_;
  int api_calls_ = 0;
};

struct Golden {
  ModelSpec spec;
  std::string dir;
  std::vector<std::vector<int32_t>> prompts;
};

Golden load_golden(const std::string& name) {
  Golden g;
  g.dir = testing::data_path("goldens/" + name);
  g.spec = load_model_spec(g.dir);
  std::ifstream in(g.dir + "/golden.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  for (const auto& p : doc["prompts"]) g.prompts.push_back(p["prompt_ids"].get<std::vector<int32_t>>());
  return g;
}

// Two sequences prefilled, then decode steps of both; returns the driver ready for the next step.
struct TwoSequences {
  TwoSequences(const Golden& g, const CudaOpsSizes& sizes) : driver(g.spec, g.dir, make_cuda_ops(0, DType::kBF16, sizes)) {
    StepPlan prefill;
    for (int64_t id = 0; id < 2; ++id) driver.add(prefill, id, g.prompts[static_cast<size_t>(id)], true);
    last = driver.run(prefill, &rows);
  }
  void decode() {
    StepPlan plan;
    for (int64_t id = 0; id < 2; ++id) driver.add(plan, id, {last[static_cast<size_t>(id)]}, true);
    last = driver.run(plan, &rows);
    ASSERT_EQ(last.size(), 2u);
  }
  testing::ModelDriver driver;
  std::vector<int32_t> last;
  std::vector<std::vector<float>> rows;
};

// The decode steps of a bucket: the first runs eagerly (GEMMs autotune for its shapes), the second
// captures the bucket's CUDA graph, drawing from the graphs' pool, and every later one replays it.
constexpr int kCaptureStep = 1;

// The ops as a stage makes them: both pools with a slab (the memory plan sizes them; generous here).
CudaOpsSizes stage_sizes() {
  CudaOpsSizes s;
  s.activation_pool_bytes = size_t{64} << 20;
  s.graph_pool_bytes = size_t{64} << 20;
  return s;
}

// Prefills two sequences, runs `decodes_before` decode steps, then requires the next one to make CUDA
// API calls and no allocation among them.
void expect_decode_allocates_nothing(int decodes_before, const char* which, const CudaOpsSizes& sizes) {
  const Golden g = load_golden("llama3_rope");
  ASSERT_GE(g.prompts.size(), 2u);
  TwoSequences seqs(g, sizes);
  for (int i = 0; i < decodes_before; ++i) seqs.decode();
  AllocationCounter counter;
  ASSERT_TRUE(counter.subscribed());
  seqs.decode();
  counter.stop();
  EXPECT_GT(counter.total_api_calls(), 0) << "CUPTI saw no CUDA API call during " << which;
  EXPECT_EQ(counter.calls(), "") << "allocation API calls inside " << which << counter.where();
}

// The first decode step after a prefill allocates nothing, even with pools that allocate on demand:
// the metadata buffers and pinned slots are sized at start-up, and the pool's best fit serves the
// step's smaller tensors from the blocks the prefill left cached.
TEST(CudaStepAllocations, FirstDecodeAfterPrefillAllocatesNothing) {
  expect_decode_allocates_nothing(0, "the first decode step after a prefill", CudaOpsSizes{});
}

// The step that captures the bucket's graph allocates nothing: its tensors come from the graphs'
// slab, its metadata from the fixed buffer.
TEST(CudaStepAllocations, CaptureStepAllocatesNothing) {
  expect_decode_allocates_nothing(kCaptureStep, "the decode step that captures its graph", stage_sizes());
}

// Once the bucket's graph exists, a decode step allocates nothing.
TEST(CudaStepAllocations, DecodeStepAllocatesNothing) {
  expect_decode_allocates_nothing(kCaptureStep + 1, "a decode step after the graph capture", stage_sizes());
}

// The counter is live: an allocation planted in the window is seen by name.
TEST(CudaStepAllocations, CounterSeesAPlantedAllocation) {
  const Golden g = load_golden("llama3_rope");
  TwoSequences seqs(g, stage_sizes());
  seqs.decode();
  AllocationCounter counter;
  ASSERT_TRUE(counter.subscribed());
  seqs.decode();
  { CudaBuffer planted(size_t{1} << 20, "a planted allocation"); }
  counter.stop();
  const std::string calls = counter.calls();
  EXPECT_NE(calls.find("cudaMalloc"), std::string::npos) << calls;
  EXPECT_NE(calls.find("cudaFree"), std::string::npos) << calls;
}

}  // namespace
}  // namespace conveyor

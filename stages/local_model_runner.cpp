// LocalModelRunner (see local_model_runner.h): forward, then sample on this rank.
#include "stages/local_model_runner.h"

#include "runtime/core/error.h"

namespace conveyor {

void LocalModelRunner::submit(const StepPlan& plan) {
  sampler_.apply(plan);
  forward(plan, &logits_);
  const int64_t vocab = spec().vocab;
  const size_t sampled = plan.num_logits() * static_cast<size_t>(vocab);
  CONVEYOR_CHECK(logits_.size() == sampled + plan.num_score_rows() * static_cast<size_t>(vocab), "runner returned ",
                 logits_.size(), " logits for ", plan.num_logits() + plan.num_score_rows(), " rows of vocab ", vocab);
  done_.push_back(sampler_.sample(plan, logits_.data(), vocab));
  done_.back().scores = score_plan(plan, logits_.data() + sampled, vocab);
}

StepResult LocalModelRunner::wait() {
  CONVEYOR_CHECK(!done_.empty(), "internal: wait() with no plan submitted");
  StepResult r = std::move(done_.front());
  done_.pop_front();
  return r;
}

}  // namespace conveyor

// Data-parallel replicas (see runtime/engine/replica_router.h). Tags: kRequests (rank 0 -> replica: JSON array of requests),
// kStop (rank 0 -> replica: empty), kOutputs (replica -> rank 0: {"outputs": [...], "preemptions": n}).
#include "runtime/engine/replica_router.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/core/error.h"

namespace conveyor {

namespace {

constexpr int kRequests = 301;
constexpr int kStop = 302;
constexpr int kOutputs = 303;

void send_json(const nlohmann::json& j, int dest, int tag, MPI_Comm comm) {
  const std::string text = j.dump();
  CONVEYOR_MPI_CHECK(MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, dest, tag, comm));
}

// Receives the message `status` announced (after a probe).
nlohmann::json recv_json(const MPI_Status& status, MPI_Comm comm) {
  int count = 0;
  CONVEYOR_MPI_CHECK(MPI_Get_count(&status, MPI_CHAR, &count));
  std::string text(static_cast<size_t>(count), '\0');
  CONVEYOR_MPI_CHECK(
      MPI_Recv(text.data(), count, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, comm, MPI_STATUS_IGNORE));
  return text.empty() ? nlohmann::json() : nlohmann::json::parse(text);
}

bool probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  int flag = 0;
  CONVEYOR_MPI_CHECK(MPI_Iprobe(source, tag, comm, &flag, status));
  return flag != 0;
}

nlohmann::json request_to_json(const Request& r) {
  return {{"id", r.id}, {"index", r.index}, {"prompt_ids", r.prompt_ids}, {"params", r.params.to_json()},
          {"label", r.label}};
}

Request request_from_json(const nlohmann::json& j) {
  Request r;
  r.id = j.at("id").get<int64_t>();
  r.index = j.at("index").get<uint64_t>();
  r.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
  r.params = SamplingParams::from_json(j.at("params"), SamplingParams{});
  r.label = j.at("label").get<std::string>();
  return r;
}

}  // namespace

ReplicaRouter::ReplicaRouter(Engine& local, MPI_Comm leaders) : local_(local), leaders_(leaders) {
  MPI_Comm_size(leaders_, &replicas_);
  int rank = -1;
  MPI_Comm_rank(leaders_, &rank);
  CONVEYOR_CHECK(rank == 0, "internal: the replica router runs on replica 0's leader");
  outstanding_.assign(static_cast<size_t>(replicas_), 0);
  completed_.assign(static_cast<size_t>(replicas_), 0);
}

ReplicaRouter::~ReplicaRouter() = default;

void ReplicaRouter::add_request(Request request) {
  // The replica with the least work; replica 0 counts what its engine holds.
  std::vector<int64_t> load = outstanding_;
  for (const auto& [replica, reqs] : pending_) load[static_cast<size_t>(replica)] += static_cast<int64_t>(reqs.size());
  load[0] = static_cast<int64_t>(owner_.size()) - std::accumulate(load.begin() + 1, load.end(), int64_t{0});
  const int target = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
  if (target == 0) {
    const int64_t id = request.id;
    local_.add_request(std::move(request));  // validates; throws before we record it
    owner_[id] = 0;
    return;
  }
  // Validate here as the local engine would: a remote replica must never fail on a request.
  request.params.validate();
  validate_request(request, local_.runner().spec().vocab, local_.max_model_len());
  CONVEYOR_CHECK(local_.tokenizer() || request.params.stop.empty(), request.label,
                 ": stop strings need a tokenizer to match text, and the model has none; use stop_token_ids");
  owner_[request.id] = target;
  pending_[target].push_back(std::move(request));
}

void ReplicaRouter::flush_pending() {
  for (auto& [replica, reqs] : pending_) {
    if (reqs.empty()) continue;
    nlohmann::json batch = nlohmann::json::array();
    for (const Request& r : reqs) batch.push_back(request_to_json(r));
    send_json(batch, replica, kRequests, leaders_);
    outstanding_[static_cast<size_t>(replica)] += static_cast<int64_t>(reqs.size());
    reqs.clear();
  }
}

void ReplicaRouter::receive_outputs(std::vector<CompletionOutput>& out, bool block) {
  MPI_Status status;
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    if (probe(MPI_ANY_SOURCE, kOutputs, leaders_, &status)) {
      const nlohmann::json msg = recv_json(status, leaders_);
      remote_preemptions_ += msg.value("preemptions_delta", int64_t{0});
      remote_generated_ += msg.value("generated_delta", int64_t{0});
      for (const auto& o : msg.at("outputs")) {
        CompletionOutput c = completion_from_json(o);
        outstanding_[static_cast<size_t>(status.MPI_SOURCE)] -= 1;
        completed_[static_cast<size_t>(status.MPI_SOURCE)] += 1;
        owner_.erase(c.request_id);
        out.push_back(std::move(c));
      }
      block = false;
      continue;
    }
    if (!block) return;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

std::vector<CompletionOutput> ReplicaRouter::step() {
  flush_pending();
  std::vector<CompletionOutput> out;
  if (local_.has_unfinished()) {
    for (CompletionOutput& c : local_.step()) {
      owner_.erase(c.request_id);
      completed_[0] += 1;
      out.push_back(std::move(c));
    }
  }
  receive_outputs(out, /*block=*/out.empty() && !local_.has_unfinished() && has_unfinished());
  return out;
}

bool ReplicaRouter::has_unfinished() const { return !owner_.empty(); }

void ReplicaRouter::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  for (int r = 1; r < replicas_; ++r) send_json(nlohmann::json(), r, kStop, leaders_);
  local_.shutdown();
  std::string line = "data parallel: requests finished per replica:";
  for (int r = 0; r < replicas_; ++r) line += " " + std::to_string(completed_[static_cast<size_t>(r)]);
  std::fprintf(stderr, "%s\n", line.c_str());
}

void serve_replica(Engine& engine, MPI_Comm leaders) {
  MPI_Status status;
  int64_t reported_preemptions = 0, reported_generated = 0;
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    if (probe(0, kStop, leaders, &status)) {
      recv_json(status, leaders);
      break;
    }
    if (probe(0, kRequests, leaders, &status)) {
      for (const auto& r : recv_json(status, leaders)) engine.add_request(request_from_json(r));
      pause = std::chrono::microseconds(20);
      continue;
    }
    if (!engine.has_unfinished()) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
      continue;
    }
    nlohmann::json outputs = nlohmann::json::array();
    for (const CompletionOutput& o : engine.step()) outputs.push_back(completion_to_json(o));
    if (outputs.empty()) continue;
    const int64_t now = engine.preemptions(), generated = engine.generated_tokens();
    send_json({{"outputs", outputs}, {"preemptions_delta", now - reported_preemptions},
               {"generated_delta", generated - reported_generated}}, 0, kOutputs, leaders);
    reported_preemptions = now;
    reported_generated = generated;
  }
  engine.shutdown();
}

}  // namespace conveyor

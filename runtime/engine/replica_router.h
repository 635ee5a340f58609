// Data-parallel replicas: each replica is a whole pipeline with its own leader and Engine. World rank
// 0 (replica 0's leader) owns the job: a ReplicaRouter hands each request to the replica with the
// fewest outstanding and gathers finished outputs; the other leaders run serve_replica(), which feeds
// their Engine with what arrives and sends back what finishes. Messages (JSON text over MPI between
// the leaders) are small next to the work; outputs are written only by rank 0, as on one replica.
#pragma once

#include <mpi.h>

#include <map>
#include <vector>

#include "runtime/engine/engine.h"

namespace conveyor {

class ReplicaRouter final : public Generator {
 public:
  // leaders: the communicator of the replicas' leaders (rank = replica), this rank being 0.
  ReplicaRouter(Engine& local, MPI_Comm leaders);
  ~ReplicaRouter() override;

  void add_request(Request request) override;
  std::vector<CompletionOutput> step() override;
  bool has_unfinished() const override;
  const Tokenizer* tokenizer() const override { return local_.tokenizer(); }
  std::vector<int32_t> encode(const std::string& text) const override { return local_.encode(text); }
  int64_t preemptions() const override { return local_.preemptions() + remote_preemptions_; }
  // Other replicas report their tokens with their finished outputs, so theirs arrive in steps.
  int64_t generated_tokens() const override { return local_.generated_tokens() + remote_generated_; }
  // Stops the remote replicas (their unfinished requests are dropped) and the local engine.
  void shutdown() override;

 private:
  void flush_pending();
  void receive_outputs(std::vector<CompletionOutput>& out, bool block);

  Engine& local_;
  MPI_Comm leaders_;
  int replicas_;
  std::vector<int64_t> outstanding_;                  // per remote replica (index 0 unused)
  std::map<int, std::vector<Request>> pending_;      // requests not yet sent, per replica
  std::map<int64_t, int> owner_;                     // request id -> replica
  std::vector<int64_t> completed_;                   // per replica, reported at shutdown
  int64_t remote_preemptions_ = 0;
  int64_t remote_generated_ = 0;
  bool shut_down_ = false;
};

// A remote replica's leader: runs requests from rank 0 until told to stop. Returns when stopped.
void serve_replica(Engine& engine, MPI_Comm leaders);

}  // namespace conveyor

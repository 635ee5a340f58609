// Heartbeats between the ranks of a job, so that the rank whose watchdog fires can name the rank that
// stopped (host, rank, stage, tensor rank) instead of only what it was waiting for. Each rank's
// watchdog thread sends its beat (progress counter, whether it waits, its last operation) to every
// other rank with a non-blocking MPI_Isend on a communicator of its own, at most one in flight per
// peer (a stopped peer gets no pile-up), and reads what arrived with MPI_Iprobe: nothing here ever
// blocks on a peer. Why point-to-point: passive-target RMA on a stopped target needs the target's
// progress in Open MPI's pt2pt/ucx paths, so the reader could hang exactly when a rank stops; a
// non-blocking collective never completes when one member stops and shows nobody's share.
// The first rank to fire also tells every peer, so the job prints one diagnosis.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor {

struct BeatState {
  int64_t progress = 0;  // waits completed so far
  bool waiting = false;  // inside a watchdog scope now
  double idle_s = 0;     // since the last progress
  std::string op;        // the current or last operation, "recv of micro-batch 17 from stage 0"
};

class Heartbeat {
 public:
  using Clock = std::chrono::steady_clock;

  // Collective over `world`: duplicates it and gathers every rank's host, stage and tensor rank.
  Heartbeat(MPI_Comm world, int stage, int tensor_rank);
  ~Heartbeat();  // local: frees what is in flight without waiting for any peer
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Sends `mine` to every peer whose previous beat has been delivered.
  void send(const BeatState& mine);
  // Takes in every message that arrived; true once some peer has announced that it fired.
  bool receive(Clock::time_point now);
  // Tells every peer that this rank fired (it prints the diagnosis; they stay quiet).
  void announce_fired();
  bool peer_fired() const { return peer_fired_ >= 0; }
  int fired_peer() const { return peer_fired_; }

  // "rank 1 (host h, stage 1, tensor rank 0)".
  std::string describe(int rank) const;
  // The ranks to blame when this one has waited too long: those silent for more than `silent_s`
  // (stopped, or dead), else those that beat but have made no progress outside a wait for more than
  // `silent_s` (stuck in compute). "" when every peer is alive and waiting too.
  std::string blame(Clock::time_point now, double silent_s) const;

 private:
  struct Peer {
    std::string host;
    int stage = -1, tensor_rank = -1;
    Clock::time_point heard;  // when the last beat arrived (construction time before the first)
    bool ever_heard = false;
    BeatState last;
  };
  struct Wire;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<Peer> peers_;                 // by world rank
  std::vector<MPI_Request> pending_;        // the beat in flight to each peer
  std::vector<std::vector<char>> out_;      // its buffer
  std::vector<MPI_Request> notices_;        // the fired notice to each peer
  int peer_fired_ = -1;
};

}  // namespace conveyor

// Heartbeat (see heartbeat.h). Messages are fixed-size byte records, well under the eager limit, so a
// send to a live peer completes locally; one to a stopped peer stays pending and that peer is skipped
// until it completes.
#include "runtime/dist/heartbeat.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "runtime/core/error.h"

namespace conveyor {

namespace {

constexpr int kTagBeat = 1;
constexpr int kTagFired = 2;
constexpr size_t kHostBytes = 64;

std::string seconds(double s) {
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << s << " s";
  return os.str();
}

}  // namespace

struct Heartbeat::Wire {
  int64_t progress;
  int32_t waiting;
  int32_t unused;
  double idle_s;
  char op[176];

  static Wire from(const BeatState& s) {
    Wire w{};
    w.progress = s.progress;
    w.waiting = s.waiting ? 1 : 0;
    w.idle_s = s.idle_s;
    std::strncpy(w.op, s.op.c_str(), sizeof w.op - 1);
    return w;
  }
  BeatState state() const {
    BeatState s;
    s.progress = progress;
    s.waiting = waiting != 0;
    s.idle_s = idle_s;
    s.op.assign(op, strnlen(op, sizeof op));
    return s;
  }
};

Heartbeat::Heartbeat(MPI_Comm world, int stage, int tensor_rank) {
  CONVEYOR_MPI_CHECK(MPI_Comm_dup(world, &comm_));
  CONVEYOR_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  CONVEYOR_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  char host[kHostBytes] = {};
  std::strncpy(host, process_identity().host.c_str(), kHostBytes - 1);
  std::vector<char> hosts(kHostBytes * static_cast<size_t>(size_));
  CONVEYOR_MPI_CHECK(MPI_Allgather(host, kHostBytes, MPI_CHAR, hosts.data(), kHostBytes, MPI_CHAR, comm_));
  const int coord[2] = {stage, tensor_rank};
  std::vector<int> coords(2 * static_cast<size_t>(size_));
  CONVEYOR_MPI_CHECK(MPI_Allgather(coord, 2, MPI_INT, coords.data(), 2, MPI_INT, comm_));
  peers_.resize(static_cast<size_t>(size_));
  const Clock::time_point now = Clock::now();
  for (int r = 0; r < size_; ++r) {
    Peer& p = peers_[static_cast<size_t>(r)];
    const char* h = hosts.data() + kHostBytes * static_cast<size_t>(r);
    p.host.assign(h, strnlen(h, kHostBytes));
    p.stage = coords[2 * static_cast<size_t>(r)];
    p.tensor_rank = coords[2 * static_cast<size_t>(r) + 1];
    p.heard = now;
  }
  pending_.assign(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  notices_.assign(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  out_.assign(static_cast<size_t>(size_), std::vector<char>(sizeof(Wire)));
}

Heartbeat::~Heartbeat() {
  // A request still in flight goes to a stopped or departed peer: free it rather than wait for it.
  for (std::vector<MPI_Request>* reqs : {&pending_, &notices_})
    for (MPI_Request& r : *reqs)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  receive(Clock::now());  // drain what peers sent, so none of it is left unmatched
  MPI_Comm_free(&comm_);
}

void Heartbeat::send(const BeatState& mine) {
  const Wire w = Wire::from(mine);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request& req = pending_[static_cast<size_t>(r)];
    if (req != MPI_REQUEST_NULL) {
      int done = 0;
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (!done) continue;
    }
    std::memcpy(out_[static_cast<size_t>(r)].data(), &w, sizeof w);
    MPI_Isend(out_[static_cast<size_t>(r)].data(), sizeof w, MPI_BYTE, r, kTagBeat, comm_, &req);
  }
}

bool Heartbeat::receive(Clock::time_point now) {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &st) != MPI_SUCCESS || !flag) break;
    Wire w{};
    MPI_Recv(&w, sizeof w, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm_, MPI_STATUS_IGNORE);
    if (st.MPI_TAG == kTagFired && peer_fired_ < 0) peer_fired_ = st.MPI_SOURCE;
    Peer& p = peers_[static_cast<size_t>(st.MPI_SOURCE)];
    p.heard = now;
    p.ever_heard = true;
    if (st.MPI_TAG == kTagBeat) p.last = w.state();
  }
  return peer_fired();
}

void Heartbeat::announce_fired() {
  static const Wire notice{};
  for (int r = 0; r < size_; ++r)
    if (r != rank_) MPI_Isend(&notice, sizeof notice, MPI_BYTE, r, kTagFired, comm_, &notices_[static_cast<size_t>(r)]);
}

std::string Heartbeat::describe(int rank) const {
  const Peer& p = peers_.at(static_cast<size_t>(rank));
  std::ostringstream os;
  os << "rank " << rank << " (host " << (p.host.empty() ? "?" : p.host) << ", stage " << p.stage << ", tensor rank "
     << p.tensor_rank << ")";
  return os.str();
}

std::string Heartbeat::blame(Clock::time_point now, double silent_s) const {
  std::vector<std::string> silent, busy;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const Peer& p = peers_[static_cast<size_t>(r)];
    const double quiet = std::chrono::duration<double>(now - p.heard).count();
    const std::string last = p.ever_heard && !p.last.op.empty() ? "; its last operation: " + p.last.op : "";
    if (quiet > silent_s) {
      silent.push_back(describe(r) + " has sent no heartbeat for " + seconds(quiet) +
                       " (stopped, or its host is gone" + last + ")");
    } else if (p.ever_heard && !p.last.waiting && p.last.idle_s > silent_s) {
      busy.push_back(describe(r) + " is alive but has made no progress for " + seconds(p.last.idle_s) +
                     " outside any wait" + last);
    }
  }
  const std::vector<std::string>& named = silent.empty() ? busy : silent;
  std::string out;
  for (const std::string& s : named) out += (out.empty() ? "" : "; ") + s;
  return out;
}

}  // namespace conveyor

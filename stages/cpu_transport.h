// How CPU pipeline stages exchange messages. Without a single-copy mechanism MPI moves a message above
// its transport's eager limit only inside an MPI call of its sender, so a stage busy computing would hold
// up the next one: messages go in eager-sized pieces instead (MpiCommunicator::set_message_limit), which
// reach the receiver without the sender. Their sends, though, complete only once the receiver has taken
// them (Open MPI's shared-memory fragments are handed back then), so a stage keeps several micro-batches'
// sends in flight (kCpuOutgoingMicroBatches) instead of waiting for a busy successor. Long waits sleep
// between tests (wait_politely): MPI's blocking calls busy-poll, starving ranks that share the CPU.
#pragma once

#include <cstddef>

#include "runtime/dist/communicator.h"

namespace conveyor {

// Pipeline messages on the CPU backend go in pieces of at most this: under the eager limit of Open MPI's
// shared-memory transport (4 KiB with its headers) and of MPICH's. Both sides must use the same limit.
constexpr size_t kCpuMessageBytes = 4000;

// Micro-batches whose sends a CPU stage keeps in flight before it waits for the oldest: more than a
// pipeline's micro-batches in flight at once (parallel.micro_batches defaults to the stage count).
constexpr size_t kCpuOutgoingMicroBatches = 16;

// Tests `request` with sleeps between (2 us doubling to 100 us) until it is done, then waits it.
void wait_politely(CommRequest& request);

}  // namespace conveyor

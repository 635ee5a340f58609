// Checks of every Communicator call, written once over a Device so the same assertions run on the MPI
// transport (host memory) and on NCCL (device memory). Values are random per rank and call; every
// element is compared with the result computed on the host.
#pragma once

#include "runtime/dist/communicator.h"
#include "runtime/dist/device.h"

namespace conveyor::testing {

// Each runs the named calls over `comm` with buffers on `dev` and ADD_FAILUREs on any mismatch.
void check_send_recv(Communicator& comm, Device& dev, Stream s);
void check_isend_irecv(Communicator& comm, Device& dev, Stream s);
void check_all_reduce(Communicator& comm, Device& dev, Stream s);
void check_all_gather(Communicator& comm, Device& dev, Stream s);
void check_broadcast(Communicator& comm, Device& dev, Stream s);
void check_barrier(Communicator& comm, Device& dev, Stream s);
void check_all_calls(Communicator& comm, Device& dev, Stream s);

}  // namespace conveyor::testing

// Communicator checks (see communicator_checks.h). Every rank derives every other rank's inputs from
// the same seeds, so the expected result is computed locally without extra communication.
#include "tests/support/communicator_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstring>
#include <vector>

#include "tests/support/test_support.h"

namespace conveyor::testing {

namespace {

// Deterministic inputs of (rank, call) in a dtype, as host bytes, and their float values.
struct Payload {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
};

Payload make_payload(DType t, size_t n, uint64_t seed) {
  Payload p;
  p.bytes.resize(n * dtype_size(t));
  p.values.resize(n);
  std::vector<float> f = random_floats(n, seed, -4.f, 4.f);
  for (size_t i = 0; i < n; ++i) {
    double v = 0;
    uint8_t* dst = p.bytes.data() + i * dtype_size(t);
    switch (t) {
      case DType::kF32: { float x = f[i]; std::memcpy(dst, &x, 4); v = x; break; }
      case DType::kF64: { double x = f[i] * 1.000001; std::memcpy(dst, &x, 8); v = x; break; }
      case DType::kBF16: { uint16_t h = float_to_bf16(f[i]); std::memcpy(dst, &h, 2); v = bf16_to_float(h); break; }
      case DType::kF16: { uint16_t h = float_to_f16(f[i]); std::memcpy(dst, &h, 2); v = f16_to_float(h); break; }
      case DType::kI32: { int32_t x = static_cast<int32_t>(f[i] * 1000); std::memcpy(dst, &x, 4); v = x; break; }
      case DType::kI64: { int64_t x = static_cast<int64_t>(f[i] * 1e6) << 20; std::memcpy(dst, &x, 8); v = static_cast<double>(x); break; }
      case DType::kU8: { uint8_t x = static_cast<uint8_t>(static_cast<int>((f[i] + 4) * 31) & 0xff); *dst = x; v = x; break; }
    }
    p.values[i] = v;
  }
  return p;
}

double read_value(DType t, const uint8_t* src) {
  switch (t) {
    case DType::kF32: { float x; std::memcpy(&x, src, 4); return x; }
    case DType::kF64: { double x; std::memcpy(&x, src, 8); return x; }
    case DType::kBF16: { uint16_t h; std::memcpy(&h, src, 2); return bf16_to_float(h); }
    case DType::kF16: { uint16_t h; std::memcpy(&h, src, 2); return f16_to_float(h); }
    case DType::kI32: { int32_t x; std::memcpy(&x, src, 4); return x; }
    case DType::kI64: { int64_t x; std::memcpy(&x, src, 8); return static_cast<double>(x); }
    case DType::kU8: return *src;
  }
  return 0;
}

// Tolerance of one reduction result in a dtype (relative to the sum of magnitudes).
double tolerance(DType t, double magnitude) {
  switch (t) {
    case DType::kBF16: return 1.6e-2 * magnitude + 1e-2;
    case DType::kF16: return 2e-3 * magnitude + 2e-3;
    case DType::kF32: return 1e-5 * magnitude + 1e-6;
    default: return 1e-9 * magnitude;
  }
}

void upload(Device& dev, const std::vector<uint8_t>& host, DeviceBuffer* buf) {
  dev.copy_from_host(buf->data(), host.data(), host.size());
}

std::vector<uint8_t> to_host(Device& dev, Stream s, const DeviceBuffer& buf, size_t bytes) {
  dev.synchronize(s);
  std::vector<uint8_t> out(bytes);
  dev.copy_to_host(out.data(), buf.data(), bytes);
  return out;
}

const DType kAllTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI32, DType::kI64, DType::kU8};

}  // namespace

void check_send_recv(Communicator& comm, Device& dev, Stream s) {
  int r = comm.rank(), n = comm.size();
  if (n == 1) return;  // a group of one has no peer (pipeline of one stage)
  for (DType t : kAllTypes) {
    // Sizes: 1 element, odd, and large (> 1 MiB) for protocol changes.
    for (size_t count : {size_t(1), size_t(1237), size_t(300001)}) {
      int next = (r + 1) % n, prev = (r + n - 1) % n;
      Payload mine = make_payload(t, count, 1000 + r * 7 + count);
      Payload want = make_payload(t, count, 1000 + prev * 7 + count);
      DeviceBuffer sb(&dev, mine.bytes.size()), rb(&dev, mine.bytes.size());
      upload(dev, mine.bytes, &sb);
      // Even ranks send first to avoid a cycle of blocking sends on the MPI transport.
      if (r % 2 == 0) {
        comm.send(sb.data(), count, t, next, s);
        comm.recv(rb.data(), count, t, prev, s);
      } else {
        comm.recv(rb.data(), count, t, prev, s);
        comm.send(sb.data(), count, t, next, s);
      }
      std::vector<uint8_t> got = to_host(dev, s, rb, mine.bytes.size());
      EXPECT_EQ(got, want.bytes) << "send/recv " << dtype_name(t) << " x" << count << " on " << comm.name()
                                 << " rank " << r << " from " << prev;
    }
  }
}

void check_isend_irecv(Communicator& comm, Device& dev, Stream s) {
  int r = comm.rank(), n = comm.size();
  const size_t count = 4099;
  std::vector<DeviceBuffer> sends, recvs;
  std::vector<std::unique_ptr<CommRequest>> reqs;
  // Every rank exchanges with every other rank at once: only non-blocking calls make this deadlock-free.
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r) continue;
    Payload mine = make_payload(DType::kF32, count, 50 + r * 100 + peer);
    sends.emplace_back(&dev, mine.bytes.size());
    recvs.emplace_back(&dev, mine.bytes.size());
    upload(dev, mine.bytes, &sends.back());
  }
  size_t k = 0;
  comm.group_start();
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r) continue;
    reqs.push_back(comm.irecv(recvs[k].data(), count, DType::kF32, peer, s));
    reqs.push_back(comm.isend(sends[k].data(), count, DType::kF32, peer, s));
    ++k;
  }
  comm.group_end();
  for (auto& q : reqs) q->wait();
  for (auto& q : reqs) EXPECT_TRUE(q->done());
  k = 0;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r) continue;
    Payload want = make_payload(DType::kF32, count, 50 + peer * 100 + r);
    EXPECT_EQ(to_host(dev, s, recvs[k], want.bytes.size()), want.bytes) << "irecv from " << peer;
    ++k;
  }
}

void check_all_reduce(Communicator& comm, Device& dev, Stream s) {
  int r = comm.rank(), n = comm.size();
  for (DType t : kAllTypes) {
    if (t == DType::kU8) continue;  // sums overflow; NCCL and MPI would differ
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
      for (bool in_place : {true, false}) {
        const size_t count = 10007;
        std::vector<Payload> all;
        for (int q = 0; q < n; ++q) all.push_back(make_payload(t, count, 300 + q * 11 + static_cast<int>(op)));
        DeviceBuffer a(&dev, all[r].bytes.size()), b(&dev, all[r].bytes.size());
        upload(dev, all[r].bytes, &a);
        comm.all_reduce(a.data(), in_place ? a.data() : b.data(), count, t, op, s);
        std::vector<uint8_t> got = to_host(dev, s, in_place ? a : b, all[r].bytes.size());
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < count; ++i) {
          double want = all[0].values[i], mag = std::fabs(all[0].values[i]);
          for (int q = 1; q < n; ++q) {
            double v = all[q].values[i];
            want = op == ReduceOp::kSum ? want + v : op == ReduceOp::kMax ? std::max(want, v) : std::min(want, v);
            mag += std::fabs(v);
          }
          double g = read_value(t, got.data() + i * dtype_size(t));
          double tol = op == ReduceOp::kSum ? tolerance(t, mag) : 0.0;
          if (!(std::fabs(g - want) <= tol) && bad++ == 0) first = i;
        }
        EXPECT_EQ(bad, 0u) << "all_reduce " << dtype_name(t) << " op " << static_cast<int>(op)
                           << (in_place ? " in place" : "") << ": first mismatch at " << first;
      }
    }
  }
}

void check_all_gather(Communicator& comm, Device& dev, Stream s) {
  int r = comm.rank(), n = comm.size();
  for (DType t : {DType::kF32, DType::kBF16, DType::kI64}) {
    const size_t count = 777;
    Payload mine = make_payload(t, count, 900 + r);
    DeviceBuffer a(&dev, mine.bytes.size()), all(&dev, mine.bytes.size() * n);
    upload(dev, mine.bytes, &a);
    comm.all_gather(a.data(), all.data(), count, t, s);
    std::vector<uint8_t> got = to_host(dev, s, all, mine.bytes.size() * n);
    for (int q = 0; q < n; ++q) {
      Payload want = make_payload(t, count, 900 + q);
      std::vector<uint8_t> part(got.begin() + q * want.bytes.size(), got.begin() + (q + 1) * want.bytes.size());
      EXPECT_EQ(part, want.bytes) << "all_gather " << dtype_name(t) << " slot " << q;
    }
  }
}

void check_broadcast(Communicator& comm, Device& dev, Stream s) {
  int r = comm.rank(), n = comm.size();
  for (int root = 0; root < n; ++root) {
    const size_t count = 5003;
    Payload src = make_payload(DType::kF32, count, 1700 + root);
    Payload junk = make_payload(DType::kF32, count, 2700 + r);
    DeviceBuffer b(&dev, src.bytes.size());
    upload(dev, r == root ? src.bytes : junk.bytes, &b);
    comm.broadcast(b.data(), count, DType::kF32, root, s);
    EXPECT_EQ(to_host(dev, s, b, src.bytes.size()), src.bytes) << "broadcast from root " << root;
  }
}

void check_barrier(Communicator& comm, Device& dev, Stream s) {
  // The last rank arrives late; nobody may leave the barrier before it arrives.
  comm.barrier(s);
  auto t0 = std::chrono::steady_clock::now();
  if (comm.rank() == comm.size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  comm.barrier(s);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 0.25) << "rank " << comm.rank() << " left the barrier before the late rank arrived";
}

void check_all_calls(Communicator& comm, Device& dev, Stream s) {
  check_send_recv(comm, dev, s);
  check_isend_irecv(comm, dev, s);
  check_all_reduce(comm, dev, s);
  check_all_gather(comm, dev, s);
  check_broadcast(comm, dev, s);
  check_barrier(comm, dev, s);
}

}  // namespace conveyor::testing

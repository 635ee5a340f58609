// Blocked matmul (see matmul.h). Work is split over output columns (rows of W) so that each thread
// streams its own slice of the weights once per call; inside, a tile of kTileT tokens x kTileN
// weight rows is accumulated in kLanes-wide partial sums that the compiler keeps in vector
// registers. On x86-64 the tile loop is compiled twice (AVX2+FMA and baseline) and picked at load.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstddef>

#include "runtime/core/error.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define CONVEYOR_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CONVEYOR_MULTIVERSION
#endif

namespace conveyor {
namespace {

constexpr int kLanes = 8;  // partial sums per (token, row) pair: one AVX2 register
constexpr int kTileT = 4;
constexpr int kTileN = 4;
constexpr int kRowsPerTask = 16;  // weight rows one thread takes at a time

// Accumulates a TT x TN tile of y over the whole k. Always inlined so each clone of
// matmul_rows gets its own vectorised copy.
template <int TT, int TN>
[[gnu::always_inline]] inline void tile(float* y, int ldy, const float* x, int ldx, const float* w, int ldw,
                                        const float* bias, int k) {
  float acc[TT][TN][kLanes] = {};
  int k0 = 0;
  for (; k0 + kLanes <= k; k0 += kLanes) {
    for (int j = 0; j < TN; ++j) {
      const float* wr = w + static_cast<size_t>(j) * ldw + k0;
      for (int i = 0; i < TT; ++i) {
        const float* xr = x + static_cast<size_t>(i) * ldx + k0;
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) acc[i][j][l] += xr[l] * wr[l];
      }
    }
  }
  for (int i = 0; i < TT; ++i) {
    for (int j = 0; j < TN; ++j) {
      float s = 0.f;
      for (int l = 0; l < kLanes; ++l) s += acc[i][j][l];
      const float* xr = x + static_cast<size_t>(i) * ldx;
      const float* wr = w + static_cast<size_t>(j) * ldw;
      for (int kk = k0; kk < k; ++kk) s += xr[kk] * wr[kk];
      y[static_cast<size_t>(i) * ldy + j] = s + (bias ? bias[j] : 0.f);
    }
  }
}

// Dispatches a partial tile (edges of t or n) to the matching instantiation.
template <int TT>
[[gnu::always_inline]] inline void tile_n(int tn, float* y, int ldy, const float* x, int ldx, const float* w,
                                          int ldw, const float* bias, int k) {
  switch (tn) {
    case 4: tile<TT, 4>(y, ldy, x, ldx, w, ldw, bias, k); break;
    case 3: tile<TT, 3>(y, ldy, x, ldx, w, ldw, bias, k); break;
    case 2: tile<TT, 2>(y, ldy, x, ldx, w, ldw, bias, k); break;
    default: tile<TT, 1>(y, ldy, x, ldx, w, ldw, bias, k); break;
  }
}

// y[:, n_begin:n_end] for all tokens.
CONVEYOR_MULTIVERSION
void matmul_rows(float* y, const float* x, const float* w, const float* bias, int tokens, int n, int k,
                 int n_begin, int n_end) {
  for (int j0 = n_begin; j0 < n_end; j0 += kTileN) {
    const int tn = std::min(kTileN, n_end - j0);
    const float* wj = w + static_cast<size_t>(j0) * k;
    const float* bj = bias ? bias + j0 : nullptr;
    for (int t0 = 0; t0 < tokens; t0 += kTileT) {
      const int tt = std::min(kTileT, tokens - t0);
      float* yt = y + static_cast<size_t>(t0) * n + j0;
      const float* xt = x + static_cast<size_t>(t0) * k;
      switch (tt) {
        case 4: tile_n<4>(tn, yt, n, xt, k, wj, k, bj, k); break;
        case 3: tile_n<3>(tn, yt, n, xt, k, wj, k, bj, k); break;
        case 2: tile_n<2>(tn, yt, n, xt, k, wj, k, bj, k); break;
        default: tile_n<1>(tn, yt, n, xt, k, wj, k, bj, k); break;
      }
    }
  }
}

}  // namespace

void matmul_ref(float* y, const float* x, const float* w, const float* bias, int tokens, int n, int k) {
  CONVEYOR_CHECK(tokens >= 0 && n > 0 && k > 0, "matmul: bad shape tokens=", tokens, " n=", n, " k=", k);
  if (tokens == 0) return;
  const int tasks = (n + kRowsPerTask - 1) / kRowsPerTask;
  // Small problems are not worth waking the thread team.
  const bool parallel = static_cast<long long>(tokens) * n * k > (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int task = 0; task < tasks; ++task) {
    const int n_begin = task * kRowsPerTask;
    matmul_rows(y, x, w, bias, tokens, n, k, n_begin, std::min(n, n_begin + kRowsPerTask));
  }
}

}  // namespace conveyor

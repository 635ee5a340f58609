// FP8 quantization and epilogue kernels (see fp8.h). Encoding uses the hardware conversion with
// satfinite (round to nearest even, +-448 on overflow, NaN -> 0x7f), which is what the CPU twin
// emulates bit for bit; the division x / s is IEEE (no fast math), as on the CPU.
#include "kernels/cuda/fp8.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cfloat>
#include <initializer_list>

#include "kernels/cuda/dense_vec.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/row_ops.cuh"
#include "runtime/core/cuda_check.h"
#include "runtime/core/env_switch.h"
#include "runtime/core/error.h"

namespace conveyor {
namespace {

using cuda_detail::load_as_f32;
using cuda_detail::store_from_f32;

constexpr int kThreads = 256;

// satfinite already clamps to +-448 (as the twin's clamp does); an explicit fminf/fmaxf clamp would turn
// NaN into -448, where the twin keeps it NaN.
__device__ __forceinline__ uint8_t encode(float x, float s) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fdiv_rn(x, s), __NV_SATFINITE, __NV_E4M3));
}

// The row's scale, for every thread of the block: static_scale when > 0, else the block's amax (each
// thread's `amax` reduced through `partial`, one float per warp of the block, at most kWarps) over 448, a
// zero scale replaced by fp32 epsilon. Thread 0 also stores it in scales[blockIdx.x].
template <int kWarps>
__device__ __forceinline__ float block_row_scale(float amax, float static_scale, float* scales) {
  __shared__ float partial[kWarps];
  const int warps = static_cast<int>(blockDim.x / 32);
  __shared__ float row_scale;
  if (static_scale > 0.0f) {
    if (threadIdx.x == 0) row_scale = static_scale;
  } else {
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = amax;
    __syncthreads();
    if (threadIdx.x == 0) {
      float m = 0.0f;
      for (int w = 0; w < warps; ++w) m = fmaxf(m, partial[w]);
      const float s = __fdiv_rn(m, 448.0f);
      row_scale = s == 0.0f ? FLT_EPSILON : s;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) scales[blockIdx.x] = row_scale;
  return row_scale;
}

// One block per row: the row's amax (block reduction), then its codes.
__global__ void quantize_rows_kernel(uint8_t* q, float* scales, const void* x, DType dt, int64_t cols,
                                     float static_scale) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float amax = 0.0f;
  if (static_scale <= 0.0f)
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) amax = fmaxf(amax, fabsf(load_as_f32(x, dt, base + c)));
  const float s = block_row_scale<kThreads / 32>(amax, static_scale, scales);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) q[base + c] = encode(load_as_f32(x, dt, base + c), s);
}

// Decode's few rows: one block of kHeldThreads per row, each thread holding its up to kHeld values in
// registers, so x is read once (the kernel above reads it twice with a quarter of the threads). The
// same amax, scale and encoding, so the same codes.
constexpr int kHeldThreads = 1024;
constexpr int kHeld = 16;  // values per thread: rows of up to 16,384 columns
constexpr int64_t kHeldMaxRows = 64;

__global__ void __launch_bounds__(kHeldThreads)
    quantize_rows_held_kernel(uint8_t* q, float* scales, const void* x, DType dt, int64_t cols, float static_scale) {
  cuda_detail::pdl_launch_dependents();  // a GEMV launched after this may start now (pdl.cuh)
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float v[kHeld];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * kHeldThreads;
    v[i] = c < cols ? load_as_f32(x, dt, base + c) : 0.0f;
    amax = fmaxf(amax, fabsf(v[i]));
  }
  const float s = block_row_scale<kHeldThreads / 32>(amax, static_scale, scales);
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * kHeldThreads;
    if (c < cols) q[base + c] = encode(v[i], s);
  }
}

// Prefill's many rows: one block per row, each thread holding up to kVecChunks chunks of 8 elements
// (one 16-byte load of bf16/f16, two of f32) in registers, so x is read once with full-width loads
// and a warp's 8-byte code stores cover 256 contiguous bytes. The block size follows cols so that
// most threads hold a full set of chunks. Same amax, scale and encoding as above, so the same codes.
constexpr int kVecChunk = 8;   // elements per chunk: 8 codes, one 8-byte store
constexpr int kVecChunks = 4;  // chunks per thread: 32 values, 16-32 registers
constexpr int kVecBlocks[] = {128, 256, 512, 1024};

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    quantize_rows_vec_kernel(uint8_t* q, float* scales, const T* x, int64_t cols, float static_scale) {
  using cuda_detail::load_pack;
  using cuda_detail::Pack;
  using cuda_detail::to_f32;
  constexpr int kLoads = kVecChunk / Pack<T>::kSize;  // 16-byte loads per chunk
  const int64_t chunks = cols / kVecChunk;
  const T* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  Pack<T> held[kVecChunks][kLoads];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kVecChunks; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * kBlock;
    if (c >= chunks) continue;
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      held[i][l] = load_pack(row + c * kVecChunk + l * Pack<T>::kSize);
#pragma unroll
      for (int e = 0; e < Pack<T>::kSize; ++e) amax = fmaxf(amax, fabsf(to_f32(held[i][l].v[e])));
    }
  }
  const float s = block_row_scale<kBlock / 32>(amax, static_scale, scales);
  uint8_t* q_row = q + static_cast<int64_t>(blockIdx.x) * cols;
#pragma unroll
  for (int i = 0; i < kVecChunks; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * kBlock;
    if (c >= chunks) continue;
    uint32_t word[2] = {0u, 0u};  // codes 0-3 and 4-7, little-endian as in memory
#pragma unroll
    for (int e = 0; e < kVecChunk; ++e) {
      const float v = to_f32(held[i][e / Pack<T>::kSize].v[e % Pack<T>::kSize]);
      word[e / 4] |= static_cast<uint32_t>(encode(v, s)) << (8 * (e % 4));
    }
    *reinterpret_cast<uint2*>(q_row + c * kVecChunk) = make_uint2(word[0], word[1]);
  }
}

// The block size the vectorized kernel takes a row of `cols` with, or 0 when the row is too long.
int vec_block(int64_t cols) {
  for (int block : kVecBlocks)
    if (cols <= static_cast<int64_t>(block) * kVecChunks * kVecChunk) return block;
  return 0;
}

template <typename T>
void launch_quantize_vec(uint8_t* q, float* scales, const void* x, int64_t rows, int64_t cols, float static_scale,
                         cudaStream_t stream) {
  const auto* xt = static_cast<const T*>(x);
  const auto grid = static_cast<unsigned>(rows);
  switch (vec_block(cols)) {
    case 128: quantize_rows_vec_kernel<T, 128><<<grid, 128, 0, stream>>>(q, scales, xt, cols, static_scale); break;
    case 256: quantize_rows_vec_kernel<T, 256><<<grid, 256, 0, stream>>>(q, scales, xt, cols, static_scale); break;
    case 512: quantize_rows_vec_kernel<T, 512><<<grid, 512, 0, stream>>>(q, scales, xt, cols, static_scale); break;
    default: quantize_rows_vec_kernel<T, 1024><<<grid, 1024, 0, stream>>>(q, scales, xt, cols, static_scale);
  }
}

// Whether the vectorized kernel takes these rows: 16-byte aligned x (rows of a multiple of 8
// elements keep every row aligned), 8-byte aligned codes, a row short enough to be held.
bool vec_takes(const uint8_t* q, const void* x, int64_t cols) {
  return cols % kVecChunk == 0 && vec_block(cols) > 0 && cuda_detail::is_aligned16(x) &&
         reinterpret_cast<uintptr_t>(q) % 8 == 0;
}

// A row produced in the block's registers, then quantized: rms_norm(x) * w (kernels/cuda/rms_norm.h) or
// silu(gate) * up (silu_mul.h), each thread holding its packs as row_ops.cuh spreads them, then the same
// amax, scale and encoding as the kernels above, so the codes are those of the op followed by
// quantize_rows_fp8_cuda. One block per row; 8 codes per pack, one 8-byte store.
template <typename T, int kPacks>
__device__ __forceinline__ void quantize_held_row(const cuda_detail::Pack<T> (&row)[kPacks], int packs, uint8_t* q,
                                                  float* scales, float static_scale) {
  constexpr int kN = cuda_detail::Pack<T>::kSize;
  static_assert(kN == 8, "16-bit elements: 8 per pack, one 8-byte store of codes");
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kPacks; ++i)
    if (static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x) < packs)
#pragma unroll
      for (int e = 0; e < kN; ++e) amax = fmaxf(amax, fabsf(cuda_detail::to_f32(row[i].v[e])));
  const float s = block_row_scale<cuda_detail::kRowMaxThreads / 32>(amax, static_scale, scales);
  uint8_t* q_row = q + static_cast<int64_t>(blockIdx.x) * packs * kN;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (p >= packs) continue;
    uint32_t word[2] = {0u, 0u};
#pragma unroll
    for (int e = 0; e < kN; ++e)
      word[e / 4] |= static_cast<uint32_t>(encode(cuda_detail::to_f32(row[i].v[e]), s)) << (8 * (e % 4));
    *reinterpret_cast<uint2*>(q_row + static_cast<int64_t>(p) * kN) = make_uint2(word[0], word[1]);
  }
}

template <typename T, int kPacks>
__global__ void __launch_bounds__(cuda_detail::kRowMaxThreads)
    rms_norm_quantize_kernel(uint8_t* q, float* scales, const T* x, const T* w, int64_t cols, float eps,
                             float static_scale) {
  cuda_detail::pdl_wait();
  cuda_detail::pdl_launch_dependents();
  __shared__ float scratch[32];
  const int packs = static_cast<int>(cols / cuda_detail::Pack<T>::kSize);
  cuda_detail::Pack<T> row[kPacks];
  cuda_detail::rms_norm_row<T, kPacks>(row, x + static_cast<int64_t>(blockIdx.x) * cols, w, packs, cols, eps, scratch);
  quantize_held_row<T, kPacks>(row, packs, q, scales, static_scale);
}

template <typename T, int kPacks>
__global__ void __launch_bounds__(cuda_detail::kRowMaxThreads)
    silu_mul_quantize_kernel(uint8_t* q, float* scales, const T* gate_up, int64_t inter, float static_scale) {
  cuda_detail::pdl_wait();
  cuda_detail::pdl_launch_dependents();
  using P = cuda_detail::Pack<T>;
  const int packs = static_cast<int>(inter / P::kSize);
  const T* g = gate_up + static_cast<int64_t>(blockIdx.x) * 2 * inter;
  P row[kPacks];
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int p = threadIdx.x + i * blockDim.x;
    if (p >= packs) continue;
    const P gp = cuda_detail::load_pack(g + static_cast<int64_t>(p) * P::kSize);
    const P up = cuda_detail::load_pack(g + inter + static_cast<int64_t>(p) * P::kSize);
#pragma unroll
    for (int e = 0; e < P::kSize; ++e) row[i].v[e] = cuda_detail::silu_mul_one(gp.v[e], up.v[e]);
  }
  quantize_held_row<T, kPacks>(row, packs, q, scales, static_scale);
}

// Rows up to which an order-free held-row kernel spreads each row over the widest block (fewer rows leave SMs
// idle, so each row's block should finish sooner). Round 22 (H100, fp8_quant_bench): 448 threads of 4 packs beat
// 224 of 8 at every count it timed, 64 to 512 rows (256: 12.45 -> 10.50 us; batch 256 FP8 decode -1.3%), so the
// wide spread goes up to 512 rows (the most it timed).
constexpr int64_t kWideMaxRows = 512;

// Whether order-free held rows may take the wide configuration: unless CONVEYOR_WIDE_HELD_ROWS=0 (read once per
// process; the A/B switch of its measurement).
bool wide_held_rows() {
  static const bool on = env_switch_on("CONVEYOR_WIDE_HELD_ROWS");
  return on;
}

// Launches Kernel<T, kPacks> over `rows` rows of `cols` 16-bit elements with row_ops.cuh's configuration
// (the one rms_norm.cu uses, so the norm's sums agree), or returns false, launching nothing, where the row
// is not whole packs, too long to hold, or a pointer is misaligned. order_free: the kernel's block reductions
// are maxima only, exact however a row is spread, so a few rows take the wide configuration.
template <typename T, template <typename, int> class Kernel, typename... Args>
bool launch_held_row(int64_t rows, int64_t cols, const uint8_t* q, std::initializer_list<const void*> in,
                     bool order_free, cudaStream_t stream, Args... args) {
  constexpr int kN = cuda_detail::Pack<T>::kSize;
  if (cols % kN != 0 || !cuda_detail::row_pack_fits(cols / kN) || reinterpret_cast<uintptr_t>(q) % 8 != 0) return false;
  for (const void* p : in)
    if (!cuda_detail::is_aligned16(p)) return false;
  if (rows == 0) return true;
  // A few rows (a small decode batch) of an op without a sum to match take the wide spread (row_ops.cuh).
  const bool wide = order_free && rows <= kWideMaxRows && wide_held_rows();
  const auto [k, threads] =
      wide ? cuda_detail::row_pack_config_wide(cols / kN) : cuda_detail::row_pack_config(cols / kN);
  auto* kernel = k == 1 ? Kernel<T, 1>::get() : k == 2 ? Kernel<T, 2>::get() : k == 4 ? Kernel<T, 4>::get()
                                                                                     : Kernel<T, 8>::get();
  cuda_detail::launch_maybe_pdl(kernel, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream, args...);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
  return true;
}

template <typename T, int kPacks>
struct RmsNormQuantize {
  static auto get() { return rms_norm_quantize_kernel<T, kPacks>; }
};
template <typename T, int kPacks>
struct SiluMulQuantize {
  static auto get() { return silu_mul_quantize_kernel<T, kPacks>; }
};

__global__ void epilogue_kernel(void* y, DType out, const float* acc, const float* a_scale, const float* b_scale,
                                const void* bias, DType bias_dt, int64_t m, int64_t n, bool accumulate) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= m * n) return;
  const int64_t row = i / n, col = i % n;
  float v = acc[i] * a_scale[row] * b_scale[col] + (bias ? load_as_f32(bias, bias_dt, col) : 0.0f);
  if (accumulate) v += load_as_f32(y, out, i);
  store_from_f32(y, out, i, v);
}

}  // namespace

void quantize_rows_fp8_cuda(uint8_t* q, float* scales, const void* x, DType dt, int64_t rows, int64_t cols,
                            float static_scale, cudaStream_t stream) {
  CONVEYOR_CHECK(dt == DType::kBF16 || dt == DType::kF16 || dt == DType::kF32, "quantize_rows_fp8_cuda: x is ",
                 dtype_name(dt), ", expected bf16, f16 or f32");
  if (rows == 0) return;
  if (rows <= kHeldMaxRows && cols <= static_cast<int64_t>(kHeld) * kHeldThreads) {
    quantize_rows_held_kernel<<<static_cast<unsigned>(rows), kHeldThreads, 0, stream>>>(q, scales, x, dt, cols,
                                                                                        static_scale);
  } else if (vec_takes(q, x, cols)) {
    if (dt == DType::kBF16) launch_quantize_vec<__nv_bfloat16>(q, scales, x, rows, cols, static_scale, stream);
    else if (dt == DType::kF16) launch_quantize_vec<__half>(q, scales, x, rows, cols, static_scale, stream);
    else launch_quantize_vec<float>(q, scales, x, rows, cols, static_scale, stream);
  } else {
    quantize_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(q, scales, x, dt, cols, static_scale);
  }
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

bool rms_norm_quantize_fp8_cuda(uint8_t* q, float* scales, const void* x, const void* w, DType dt, int64_t rows,
                                int64_t cols, float eps, float static_scale, cudaStream_t stream) {
  if (dt == DType::kBF16)
    return launch_held_row<__nv_bfloat16, RmsNormQuantize>(rows, cols, q, {x, w}, false, stream, q, scales,
                                                           static_cast<const __nv_bfloat16*>(x),
                                                           static_cast<const __nv_bfloat16*>(w), cols, eps,
                                                           static_scale);
  if (dt == DType::kF16)
    return launch_held_row<__half, RmsNormQuantize>(rows, cols, q, {x, w}, false, stream, q, scales,
                                                    static_cast<const __half*>(x), static_cast<const __half*>(w), cols,
                                                    eps, static_scale);
  return false;
}

bool silu_mul_quantize_fp8_cuda(uint8_t* q, float* scales, const void* gate_up, DType dt, int64_t rows, int64_t inter,
                                float static_scale, cudaStream_t stream) {
  // The up half starts inter elements into each row: whole packs keep it 16-byte aligned.
  if (dt == DType::kBF16)
    return launch_held_row<__nv_bfloat16, SiluMulQuantize>(rows, inter, q, {gate_up}, true, stream, q, scales,
                                                           static_cast<const __nv_bfloat16*>(gate_up), inter,
                                                           static_scale);
  if (dt == DType::kF16)
    return launch_held_row<__half, SiluMulQuantize>(rows, inter, q, {gate_up}, true, stream, q, scales,
                                                    static_cast<const __half*>(gate_up), inter, static_scale);
  return false;
}

void fp8_scale_epilogue_cuda(void* y, DType out, const float* acc, const float* a_scale, const float* b_scale,
                             const void* bias, DType bias_dt, int64_t m, int64_t n, bool accumulate,
                             cudaStream_t stream) {
  if (m * n == 0) return;
  const unsigned blocks = static_cast<unsigned>((m * n + kThreads - 1) / kThreads);
  epilogue_kernel<<<blocks, kThreads, 0, stream>>>(y, out, acc, a_scale, b_scale, bias, bias_dt, m, n, accumulate);
  CONVEYOR_CUDA_CHECK(cudaGetLastError());
}

}  // namespace conveyor

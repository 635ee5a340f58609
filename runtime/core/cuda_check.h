// CUDA, cuBLAS and NCCL error checks: always compiled in, they throw conveyor::Error naming the call,
// the library's error string, and (through Error) rank, host, device and file:line.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "runtime/core/error.h"

#define CONVEYOR_CUDA_CHECK(expr)                                                                         \
  do {                                                                                                    \
    cudaError_t conveyor_cuda_rc_ = (expr);                                                               \
    if (conveyor_cuda_rc_ != cudaSuccess) {                                                               \
      ::conveyor::throw_error(::conveyor::detail::concat("CUDA call failed: " #expr " — ",                \
                                                         cudaGetErrorName(conveyor_cuda_rc_), ": ",       \
                                                         cudaGetErrorString(conveyor_cuda_rc_)),          \
                              __FILE__, __LINE__);                                                        \
    }                                                                                                     \
  } while (0)

#define CONVEYOR_NCCL_CHECK(expr)                                                                         \
  do {                                                                                                    \
    ncclResult_t conveyor_nccl_rc_ = (expr);                                                              \
    if (conveyor_nccl_rc_ != ncclSuccess && conveyor_nccl_rc_ != ncclInProgress) {                        \
      ::conveyor::throw_error(::conveyor::detail::concat("NCCL call failed: " #expr " — ",                \
                                                         ncclGetErrorString(conveyor_nccl_rc_), " (",     \
                                                         ncclGetLastError(nullptr), ")"),                 \
                              __FILE__, __LINE__);                                                        \
    }                                                                                                     \
  } while (0)

#define CONVEYOR_CUBLAS_CHECK(expr)                                                                  \
  do {                                                                                               \
    cublasStatus_t conveyor_cublas_rc_ = (expr);                                                     \
    if (conveyor_cublas_rc_ != CUBLAS_STATUS_SUCCESS) {                                              \
      ::conveyor::throw_error(::conveyor::detail::concat("cuBLASLt call failed: " #expr " — ",       \
                                                         cublasLtGetStatusName(conveyor_cublas_rc_), \
                                                         ": ", cublasLtGetStatusString(conveyor_cublas_rc_)), \
                              __FILE__, __LINE__);                                                   \
    }                                                                                                \
  } while (0)

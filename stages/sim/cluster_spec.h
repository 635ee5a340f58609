// A cluster for `conveyor plan --cluster`: nodes of GPUs, each GPU's ceilings (a preset, optionally
// with the measured speeds of a `conveyor doctor --output-json` file), the intra-node link (TP
// all-reduce and same-node pipeline edges) and the network between nodes (pipeline edges that cross
// nodes), and the precision. A CPU host is `gpu: {preset: cpu, doctor_json: ...}`: its "GPUs" are the
// MPI ranks of the CPU backend, every speed (and how ranks share its cores) from the doctor JSON.
// docs/cluster.md documents the YAML; presets live in cluster_spec.cpp.
#pragma once

#include <string>

#include "stages/partitioner.h"

namespace conveyor {

enum class Precision { kBf16, kFp8, kFp32 };  // kFp32: the CPU backend

// A link: bandwidth and per-message latency; for the intra-node link also the all-reduce bus bandwidth.
struct LinkSpec {
  std::string name;
  double bandwidth = 0;        // bytes/s, one p2p stream
  double latency = 0;          // s per message
  double allreduce_busbw = 0;  // bytes/s (nccl-tests' busbw); 0 for the network
  double allreduce_latency = -1;  // s per all-reduce; < 0: the p2p latency
};

struct ClusterSpec {
  std::string source;          // the YAML file
  std::string name;
  int nodes = 1;
  int gpus_per_node = 8;
  std::string gpu_name;
  DeviceCeilings gpu;          // bf16 ceilings; `measured` from doctor_json when given
  double fp8_flops = 1480e12;  // dense FP8 GEMM ceiling
  LinkSpec intra_node;
  LinkSpec network;
  Precision precision = Precision::kBf16;

  int gpus() const { return nodes * gpus_per_node; }
  bool cpu() const { return gpu_name == "cpu"; }  // the CPU backend: ranks on host cores
  // Bytes per element as the runtime keeps them: FP8 (`--quantization fp8 --kv-cache-dtype fp8`) holds the
  // layers' linear weights and the KV cache in e4m3 (dtype_bytes), the activations, embeddings and LM head
  // in bf16 (activation_bytes), as stages/layout_plan.cpp plans a run.
  int activation_bytes() const { return precision == Precision::kFp32 ? 4 : 2; }
  int dtype_bytes() const { return precision == Precision::kFp8 ? 1 : activation_bytes(); }
  // The ceilings a GPU runs at in this precision: FP8 halves weight and KV bytes (Workload's dtype
  // bytes) and raises the compute ceiling to fp8_flops; the prefill GEMM rate is doctor's FP8 linears'
  // (device.gemm_decode_fp8.prefill_tflops) where measured, else the bf16 one scaled alike.
  DeviceCeilings ceilings() const;
  // TP links inside a node (LinkCosts of the partitioner).
  LinkCosts tensor_links() const;
};

// Reads a cluster YAML; every error names the file and the key.
ClusterSpec load_cluster_spec(const std::string& path);

std::string precision_name(Precision p);

}  // namespace conveyor

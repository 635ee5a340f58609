#!/usr/bin/env python3
"""Reference dequantization data for tests/runtime/model/gguf_dequant_test.cpp, from the `gguf` package.

  python3 scripts/gguf_reference.py [model.gguf] [out_dir]
      model.gguf defaults to the output of scripts/fetch_test_model.sh; out_dir to tests/data/formats.

Writes into out_dir:
  quant_blocks.gguf          one small tensor per type (F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q4_K Q6_K) of random
                             blocks with sane f16 scales, written by gguf.GGUFWriter
  quant_blocks/<type>.f32    gguf.quants.dequantize of each, little-endian float32, every element
  smollm2_ref.json           for chosen tensors of the real SmolLM2 GGUF: type, element count, float64
                             sum, and two exact checksums of the fp32 bit patterns over ALL elements
  smollm2/<tensor>.f32       the first 4096 dequantized values of each chosen tensor
Checksums (uint64, wrapping): bits_sum = sum(bits[i]), bits_wsum = sum(bits[i] * (i + 1)).
"""
import json
import os
import subprocess
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

HERE = os.path.dirname(os.path.abspath(__file__))
CHOSEN = ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.ffn_down.weight",
          "blk.29.ffn_up.weight", "blk.0.attn_norm.weight", "output_norm.weight"]
FIRST = 4096


def checksums(values):
    bits = values.astype(np.float32).reshape(-1).view(np.uint32).astype(np.uint64)
    idx = np.arange(1, bits.size + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return int(bits.sum(dtype=np.uint64)), int((bits * idx).sum(dtype=np.uint64))


def random_blocks(qtype, n_blocks, rng):
    """Random block bytes whose f16 scale fields hold finite, modest values."""
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    def f16(lo, hi):
        return rng.uniform(lo, hi, size=(n_blocks, 1)).astype(np.float16).view(np.uint8)
    if qtype in (Q.Q8_0, Q.Q4_0):
        raw[:, 0:2] = f16(-0.05, 0.05)
    elif qtype == Q.Q4_1:
        raw[:, 0:2] = f16(0.0, 0.05)
        raw[:, 2:4] = f16(-0.5, 0.0)
    elif qtype == Q.Q4_K:
        raw[:, 0:2] = f16(0.0, 0.01)
        raw[:, 2:4] = f16(0.0, 0.01)
    elif qtype == Q.Q6_K:
        raw[:, 208:210] = f16(-0.01, 0.01)
    return raw


def write_quant_blocks(out, rng):
    rows = 3
    path = os.path.join(out, "quant_blocks.gguf")
    wr = gguf.GGUFWriter(path, "llama")
    os.makedirs(os.path.join(out, "quant_blocks"), exist_ok=True)
    for qtype in (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q4_K, Q.Q6_K):
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
        per_row = 512 // block_elems
        raw = random_blocks(qtype, rows * per_row, rng).reshape(rows, per_row * block_bytes)
        wr.add_tensor(qtype.name, raw, raw_shape=raw.shape, raw_dtype=qtype)
        ref = gguf.quants.dequantize(raw, qtype).astype(np.float32)
        ref.tofile(os.path.join(out, "quant_blocks", qtype.name + ".f32"))
    vals = rng.standard_normal((rows, 512)).astype(np.float32)
    wr.add_tensor("F32", vals)
    vals.tofile(os.path.join(out, "quant_blocks", "F32.f32"))
    f16 = vals.astype(np.float16)
    wr.add_tensor("F16", f16)
    f16.astype(np.float32).tofile(os.path.join(out, "quant_blocks", "F16.f32"))
    bf16 = gguf.quants.quantize(vals, Q.BF16)
    wr.add_tensor("BF16", bf16, raw_shape=bf16.shape, raw_dtype=Q.BF16)
    gguf.quants.dequantize(bf16, Q.BF16).astype(np.float32).tofile(os.path.join(out, "quant_blocks", "BF16.f32"))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def write_model_reference(model, out):
    reader = gguf.GGUFReader(model)
    by_name = {t.name: t for t in reader.tensors}
    os.makedirs(os.path.join(out, "smollm2"), exist_ok=True)
    ref = {}
    for name in CHOSEN:
        t = by_name[name]
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        s, ws = checksums(values)
        ref[name] = {"type": t.tensor_type.name, "numel": int(values.size), "sum": float(values.astype(np.float64).sum()),
                     "bits_sum": str(s), "bits_wsum": str(ws)}
        values[:FIRST].tofile(os.path.join(out, "smollm2", name + ".f32"))
    with open(os.path.join(out, "smollm2_ref.json"), "w") as f:
        json.dump(ref, f, indent=2)


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else subprocess.check_output(
        [os.path.join(HERE, "fetch_test_model.sh")], text=True).strip()
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "tests", "data", "formats")
    rng = np.random.default_rng(7)
    write_quant_blocks(out, rng)
    write_model_reference(model, out)


if __name__ == "__main__":
    main()

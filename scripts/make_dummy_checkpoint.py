#!/usr/bin/env python3
"""Writes a dummy Hugging Face checkpoint of Llama-3-8B's real layout and size: config.json,
generation_config.json, model.safetensors.index.json and 4 bf16 safetensors shards (~16 GB, the
tensor names, shapes and shard split of meta-llama/Meta-Llama-3-8B). The values are random finite
bf16 (|x| < 2, so the NaN/Inf scan at load passes); what matters is the bytes, to time a load with
and without hashing (benchmarks/load_bench, `conveyor generate`).

Usage:  python3 scripts/make_dummy_checkpoint.py OUT_DIR [--layers N] [--shards N] [--sha256sums]
  --layers N     fewer decoder layers (32 is the real model; 2 gives ~2.6 GB for a quick check)
  --shards N     number of shards (default 4)
  --sha256sums   also write OUT_DIR/SHA256SUMS, so a load verifies every shard's SHA-256 too
Needs numpy only; writes each tensor in pieces, so memory stays ~64 MiB whatever the size.
"""
import argparse
import hashlib
import json
import os
import struct

import numpy as np

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "rope_scaling": None,
    "tie_word_embeddings": False, "bos_token_id": 128000, "eos_token_id": 128001,
    "torch_dtype": "bfloat16", "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1,
    "initializer_range": 0.02, "use_cache": True, "transformers_version": "4.40.0",
}
POOL_BYTES = 64 << 20


def tensors(cfg):
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * h // cfg["num_attention_heads"]
    out = [("model.embed_tokens.weight", [v, h])]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        out += [(p + "input_layernorm.weight", [h]),
                (p + "self_attn.q_proj.weight", [h, h]), (p + "self_attn.k_proj.weight", [kv, h]),
                (p + "self_attn.v_proj.weight", [kv, h]), (p + "self_attn.o_proj.weight", [h, h]),
                (p + "post_attention_layernorm.weight", [h]),
                (p + "mlp.gate_proj.weight", [i, h]), (p + "mlp.up_proj.weight", [i, h]),
                (p + "mlp.down_proj.weight", [h, i])]
    out += [("model.norm.weight", [h]), ("lm_head.weight", [v, h])]
    return out


def nbytes(shape):
    n = 2
    for d in shape:
        n *= d
    return n


def split(items, shards):
    """Consecutive groups of about equal bytes, as save_pretrained's max_shard_size does."""
    total = sum(nbytes(s) for _, s in items)
    groups, cur, acc = [], [], 0
    for name, shape in items:
        if cur and acc + nbytes(shape) / 2 > total * (len(groups) + 1) / shards and len(groups) < shards - 1:
            groups.append(cur)
            cur = []
        cur.append((name, shape))
        acc += nbytes(shape)
    groups.append(cur)
    return groups


def write_shard(path, items, pool, rng, sums):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in items:
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + nbytes(shape)]}
        offset += nbytes(shape)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    digest = hashlib.sha256() if sums else None
    with open(path, "wb") as f:
        def put(b):
            f.write(b)
            if digest:
                digest.update(b)
        put(struct.pack("<Q", len(text)) + text)
        for _, shape in items:
            left = nbytes(shape)
            while left:
                start = int(rng.integers(0, POOL_BYTES // 2)) & ~1
                n = min(left, POOL_BYTES - start)
                put(pool[start:start + n])
                left -= n
    return digest.hexdigest() if digest else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--sha256sums", action="store_true")
    a = ap.parse_args()
    cfg = dict(CONFIG, num_hidden_layers=a.layers)
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(0)
    # Random bf16 with the top exponent bit cleared: every value finite, |x| < 2.
    pool = (rng.integers(0, 1 << 16, POOL_BYTES // 2, dtype=np.uint16) & 0xBFFF).tobytes()
    items = tensors(cfg)
    groups = split(items, a.shards)
    weight_map, sums = {}, []
    for k, group in enumerate(groups):
        name = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        sha = write_shard(os.path.join(a.out, name), group, pool, rng, a.sha256sums)
        if sha:
            sums.append(f"{sha}  {name}\n")
        for t, _ in group:
            weight_map[t] = name
        print(f"wrote {name}: {sum(nbytes(s) for _, s in group) / 1e9:.2f} GB, {len(group)} tensors", flush=True)
    total = sum(nbytes(s) for _, s in items)
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 128000, "eos_token_id": 128001, "do_sample": True, "temperature": 0.6,
                   "top_p": 0.9}, f, indent=2)
    if sums:
        with open(os.path.join(a.out, "SHA256SUMS"), "w") as f:
            f.writelines(sums)
    print(f"{a.out}: {total / 1e9:.2f} GB in {len(groups)} shards, {cfg['num_hidden_layers']} layers")


if __name__ == "__main__":
    main()

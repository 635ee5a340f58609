#!/usr/bin/env python3
"""Writes the tiny checkpoints the format tests load, into tests/data/formats/:

  tiny_llama/          config.json + generation_config.json + model.safetensors (bf16, untied)
  tiny_llama_sharded/  the same weights in two shards with model.safetensors.index.json
  tiny_llama.gguf      the same weights as F32 GGUF, Q/K rows permuted as llama.cpp's converter does
  tiny_qwen2/          qwen2 (QKV biases, tied embeddings), f16, single file

Usage:  python3 scripts/make_tiny_checkpoint.py [out_dir]      (default tests/data/formats)
Needs numpy, safetensors and gguf (pip). Deterministic: same seed, same bytes. transformers is not
installed here, so the files are written directly in the layout transformers' save_pretrained uses.
"""
import json
import os
import sys

import gguf
import numpy as np
from safetensors.numpy import save_file

LLAMA = dict(hidden=32, inter=64, layers=4, heads=4, kv=2, vocab=101)
QWEN2 = dict(hidden=32, inter=64, layers=2, heads=4, kv=2, vocab=77)


def hf_config(arch, s, tied, dtype):
    cls = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[arch]
    cfg = {
        "architectures": [cls], "model_type": arch, "hidden_act": "silu",
        "hidden_size": s["hidden"], "intermediate_size": s["inter"], "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv"], "vocab_size": s["vocab"],
        "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None,
        "tie_word_embeddings": tied, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": dtype,
        "initializer_range": 0.02, "use_cache": True, "transformers_version": "4.44.0",
    }
    if arch == "llama":
        cfg.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    else:
        cfg.update(use_sliding_window=False, sliding_window=4096, max_window_layers=2)
    return cfg


def make_weights(s, rng, bias, tied):
    h, i, hd = s["hidden"], s["inter"], s["hidden"] // s["heads"]
    q, kv = s["heads"] * hd, s["kv"] * hd
    def rnd(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)
    w = {"model.embed_tokens.weight": rnd(s["vocab"], h), "model.norm.weight": 1 + rnd(h)}
    if not tied:
        w["lm_head.weight"] = rnd(s["vocab"], h)
    for l in range(s["layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + rnd(h)
        w[p + "post_attention_layernorm.weight"] = 1 + rnd(h)
        w[p + "self_attn.q_proj.weight"] = rnd(q, h)
        w[p + "self_attn.k_proj.weight"] = rnd(kv, h)
        w[p + "self_attn.v_proj.weight"] = rnd(kv, h)
        w[p + "self_attn.o_proj.weight"] = rnd(h, q)
        if bias:
            for n, size in (("q", q), ("k", kv), ("v", kv)):
                w[p + f"self_attn.{n}_proj.bias"] = rnd(size)
        w[p + "mlp.gate_proj.weight"] = rnd(i, h)
        w[p + "mlp.up_proj.weight"] = rnd(i, h)
        w[p + "mlp.down_proj.weight"] = rnd(h, i)
    return w


def to_bf16_bits(a):
    u = a.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def write_dir(path, cfg, tensors, shards=1):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": [2, 5], "temperature": 0.6, "top_p": 0.9,
                   "do_sample": True}, f, indent=2)
    names = sorted(tensors)
    if shards == 1:
        save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
        return
    weight_map = {}
    per = (len(names) + shards - 1) // shards
    for k in range(shards):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k * per:(k + 1) * per]}
        save_file(part, os.path.join(path, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in part})
    total = sum(t.nbytes for t in tensors.values())
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def permute_for_gguf(w, n_heads):
    """llama.cpp stores each head's rows as interleaved rotary pairs; HF stores two halves."""
    rows = w.shape[0]
    return w.reshape(n_heads, 2, rows // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def write_gguf(path, s, weights):
    hd = s["hidden"] // s["heads"]
    wr = gguf.GGUFWriter(path, "llama")
    wr.add_block_count(s["layers"])
    wr.add_context_length(256)
    wr.add_embedding_length(s["hidden"])
    wr.add_feed_forward_length(s["inter"])
    wr.add_head_count(s["heads"])
    wr.add_head_count_kv(s["kv"])
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_rope_freq_base(10000.0)
    wr.add_rope_dimension_count(hd)
    wr.add_vocab_size(s["vocab"])
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_tokenizer_model("gpt2")
    for name, t in weights.items():
        if name == "model.embed_tokens.weight": gname = "token_embd.weight"
        elif name == "model.norm.weight": gname = "output_norm.weight"
        elif name == "lm_head.weight": gname = "output.weight"
        else:
            layer, rest = name[len("model.layers."):].split(".", 1)
            gname = f"blk.{layer}.{GGUF_NAMES[rest]}"
            if rest == "self_attn.q_proj.weight": t = permute_for_gguf(t, s["heads"])
            if rest == "self_attn.k_proj.weight": t = permute_for_gguf(t, s["kv"])
        wr.add_tensor(gname, np.ascontiguousarray(t, dtype=np.float32))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data", "formats")
    rng = np.random.default_rng(20240601)
    w = make_weights(LLAMA, rng, bias=False, tied=False)
    # Round to bf16 once so the bf16 safetensors and the F32 GGUF hold exactly the same values.
    bits = {n: to_bf16_bits(t) for n, t in w.items()}
    exact = {n: (b.astype(np.uint32) << 16).view(np.float32) for n, b in bits.items()}
    bf16 = {n: b.view(np.uint16) for n, b in bits.items()}
    cfg = hf_config("llama", LLAMA, tied=False, dtype="bfloat16")
    # safetensors.numpy has no bfloat16: write_bf16_dir stores the bits as F16 and retags them BF16.
    write_bf16_dir(os.path.join(out, "tiny_llama"), cfg, bf16, 1)
    write_bf16_dir(os.path.join(out, "tiny_llama_sharded"), cfg, bf16, 2)
    write_gguf(os.path.join(out, "tiny_llama.gguf"), LLAMA, exact)
    q = make_weights(QWEN2, rng, bias=True, tied=True)
    write_dir(os.path.join(out, "tiny_qwen2"), hf_config("qwen2", QWEN2, tied=True, dtype="float16"),
              {n: t.astype(np.float16) for n, t in q.items()})


def write_bf16_dir(path, cfg, bf16, shards):
    """Writes bf16 bit patterns through safetensors.numpy (which lacks bfloat16) as F16, then retags."""
    write_dir(path, cfg, {n: b.view(np.float16) for n, b in bf16.items()}, shards)
    for fname in os.listdir(path):
        if fname.endswith(".safetensors"):
            retag_f16_as_bf16(os.path.join(path, fname))


def retag_f16_as_bf16(path):
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    for k, v in header.items():
        if k != "__metadata__":
            v["dtype"] = "BF16"
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data[8 + n:])


if __name__ == "__main__":
    main()

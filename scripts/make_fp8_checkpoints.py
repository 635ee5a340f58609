#!/usr/bin/env python3
"""Writes the tiny FP8 Llama checkpoints of tests/stages/fp8_checkpoint_test.cpp into tests/data/fp8/:

  twin_fp32/       a random Llama in fp32 whose linears are exactly the per-channel checkpoint's
                   dequantized weights (e4m3 code x scale), so `--quantization fp8` re-derives its codes
  ct_channel/      compressed-tensors float-quantized FP8: per-channel weight_scale, dynamic per-token
                   activations (the "FP8-dynamic" layout)
  ct_tensor/       compressed-tensors FP8: per-tensor weight_scale, static per-tensor input_scale
                   (calibrated on the prompts: amax / 448 of each linear's input, as llm-compressor does)
  fp8_block/       quant_method fp8, weight_block_size [128, 128], weight_scale_inv per block
  ct_kv/           ct_channel plus a kv_cache_scheme (FP8, per tensor, static): k_scale / v_scale per layer,
                   amax / 448 of the cached K (post-rope; bounded by each rotary pair's norm) and V over the
                   prompts' greedy runs, as llm-compressor calibrates them (layer 1's as 0-d tensors, the
                   other form a checkpoint may use). No HF reference: transformers has no FP8 KV cache.
  reference.json   prompts and HF transformers' greedy ids for each (fp32 on the CPU; compressed-tensors
                   runs the same activation quantization; fp8 blocks are dequantized by HF)

Usage:  python3 scripts/make_fp8_checkpoints.py [out_dir]      (default tests/data/fp8)
        python3 scripts/make_fp8_checkpoints.py --only ct_kv [out_dir]   (ct_kv alone, from ct_channel)
Needs torch, transformers, safetensors and compressed-tensors (scripts/requirements.txt). Deterministic.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file

SHAPE = dict(hidden=192, inter=256, layers=2, heads=6, kv=2, vocab=384)
PROMPTS, PROMPT_LEN, NEW_TOKENS = 12, 8, 24
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
FP8_MAX = 448.0
E4M3 = torch.float8_e4m3fn


def config(extra=None):
    s = SHAPE
    cfg = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": s["hidden"], "intermediate_size": s["inter"], "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv"], "vocab_size": s["vocab"],
        "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
        "attention_bias": False, "mlp_bias": False,
    }
    if extra:
        cfg["quantization_config"] = extra
    return cfg


def quantize(w, scale):
    """compressed-tensors' fake quantization: e4m3(clamp(w / scale)) (scale broadcast)."""
    return torch.clamp(w / scale, -FP8_MAX, FP8_MAX).to(E4M3)


def row_scales(w):
    s = w.abs().amax(dim=1, keepdim=True) / FP8_MAX
    return torch.where(s == 0, torch.finfo(torch.float32).eps, s)


def random_model(gen):
    s = SHAPE
    h, i, hd = s["hidden"], s["inter"], s["hidden"] // s["heads"]
    q, kv = s["heads"] * hd, s["kv"] * hd
    def rnd(*shape, std=0.08):
        return torch.randn(*shape, generator=gen) * std
    w = {"model.embed_tokens.weight": rnd(s["vocab"], h, std=1.0), "model.norm.weight": 1 + rnd(h, std=0.1),
         "lm_head.weight": rnd(s["vocab"], h)}
    shapes = {"q_proj": (q, h), "k_proj": (kv, h), "v_proj": (kv, h), "o_proj": (h, q),
              "gate_proj": (i, h), "up_proj": (i, h), "down_proj": (h, i)}
    for l in range(s["layers"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + rnd(h, std=0.1)
        w[p + "post_attention_layernorm.weight"] = 1 + rnd(h, std=0.1)
        for name in LINEARS:
            w[p + name + ".weight"] = rnd(*shapes[name.split(".")[1]])
    return w


def linear_names():
    return [f"model.layers.{l}.{n}" for l in range(SHAPE["layers"]) for n in LINEARS]


def save(out, name, tensors, quant=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, os.path.join(d, "model.safetensors"),
              metadata={"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config(quant), f, indent=2, sort_keys=True)
    return d


def ct_config(weight_strategy, static_input):
    args = lambda strategy, dynamic: {"num_bits": 8, "type": "float", "symmetric": True, "strategy": strategy,
                                      "dynamic": dynamic, "group_size": None, "block_structure": None,
                                      "observer": None if dynamic else "minmax", "actorder": None}
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
            "ignore": ["lm_head"], "kv_cache_scheme": None,
            "config_groups": {"group_0": {"targets": ["Linear"], "output_activations": None,
                                          "weights": args(weight_strategy, False),
                                          "input_activations": args("tensor" if static_input else "token",
                                                                    not static_input)}}}


def input_amax(dense_dir, prompts):
    """amax of every linear's input over the prompts (and their greedy continuations) in fp32."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(dense_dir, dtype=torch.float32).eval()
    amax, hooks = {}, []
    for name, mod in model.named_modules():
        if name in linear_names():
            def hook(m, inp, _out, name=name):
                amax[name] = max(amax.get(name, 0.0), inp[0].abs().max().item())
            hooks.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        model.generate(torch.tensor(prompts), max_new_tokens=NEW_TOKENS, do_sample=False)
    for h in hooks:
        h.remove()
    return amax


def kv_amax(dense_dir, prompts):
    """Per layer, amax of the cached K (bounded by the norm of each rotary pair, which rope preserves) and V."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(dense_dir, dtype=torch.float32).eval()
    half = SHAPE["hidden"] // SHAPE["heads"] // 2
    amax, hooks = {}, []
    for l in range(SHAPE["layers"]):
        for kind in ("k", "v"):
            mod = model.get_submodule(f"model.layers.{l}.self_attn.{kind}_proj")
            def hook(m, _inp, out, key=(l, kind)):
                x = out.reshape(*out.shape[:-1], -1, 2 * half)
                if key[1] == "k":
                    x = torch.sqrt(x[..., :half] ** 2 + x[..., half:] ** 2)
                amax[key] = max(amax.get(key, 0.0), x.abs().max().item())
            hooks.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        model.generate(torch.tensor(prompts), max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
    for h in hooks:
        h.remove()
    return amax


def write_ct_kv(out, prompts):
    """ct_channel's tensors and config plus kv_cache_scheme and per-layer k_scale / v_scale."""
    from safetensors.torch import load_file
    tensors = load_file(os.path.join(out, "ct_channel", "model.safetensors"))
    amax = kv_amax(os.path.join(out, "twin_fp32"), prompts)
    for l in range(SHAPE["layers"]):
        for kind in ("k", "v"):
            scale = torch.tensor([amax[(l, kind)] / FP8_MAX], dtype=torch.float32)
            tensors[f"model.layers.{l}.self_attn.{kind}_scale"] = scale.reshape(()) if l == 1 else scale
    quant = ct_config("channel", False)
    quant["kv_cache_scheme"] = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor",
                                "dynamic": False, "group_size": None, "block_structure": None,
                                "observer": "minmax", "actorder": None}
    save(out, "ct_kv", tensors, quant)
    print("ct_kv scales:", {f"{l}.{k}": v / FP8_MAX for (l, k), v in sorted(amax.items())})


def greedy_ids(d, prompts):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None  # plain argmax for every step, EOS included
    with torch.no_grad():
        out = model.generate(torch.tensor(prompts), max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
    return out[:, PROMPT_LEN:].tolist()


def main():
    args = sys.argv[1:]
    only = None
    if args[:1] == ["--only"]:
        only, args = args[1], args[2:]
    out = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "tests", "data", "fp8")
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(15)
    dense = random_model(gen)
    prompts = torch.randint(3, SHAPE["vocab"], (PROMPTS, PROMPT_LEN), generator=gen).tolist()
    if only == "ct_kv":
        write_ct_kv(out, prompts)
        return

    channel, twin = dict(dense), dict(dense)
    for n in linear_names():
        w = dense[n + ".weight"]
        s = row_scales(w)
        codes = quantize(w, s)
        channel[n + ".weight"], channel[n + ".weight_scale"] = codes, s
        twin[n + ".weight"] = codes.to(torch.float32) * s
    dirs = {"twin_fp32": save(out, "twin_fp32", twin),
            "ct_channel": save(out, "ct_channel", channel, ct_config("channel", False))}

    amax = input_amax(dirs["twin_fp32"], prompts)
    static = dict(dense)
    for n in linear_names():
        w = dense[n + ".weight"]
        s = (w.abs().max() / FP8_MAX).reshape(1)
        static[n + ".weight"], static[n + ".weight_scale"] = quantize(w, s), s
        static[n + ".input_scale"] = torch.tensor([amax[n] / FP8_MAX], dtype=torch.float32)
    dirs["ct_tensor"] = save(out, "ct_tensor", static, ct_config("tensor", True))

    block = dict(dense)
    for n in linear_names():
        w = dense[n + ".weight"]
        rows, cols = w.shape
        br, bc = (rows + 127) // 128, (cols + 127) // 128
        padded = torch.zeros(br * 128, bc * 128)
        padded[:rows, :cols] = w
        tiles = padded.reshape(br, 128, bc, 128)
        s = tiles.abs().amax(dim=(1, 3)) / FP8_MAX
        codes = quantize(tiles, s[:, None, :, None]).reshape(br * 128, bc * 128)[:rows, :cols]
        block[n + ".weight"], block[n + ".weight_scale_inv"] = codes, s
    dirs["fp8_block"] = save(out, "fp8_block", block, {"quant_method": "fp8", "activation_scheme": "dynamic",
                                                       "fmt": "e4m3", "weight_block_size": [128, 128]})

    write_ct_kv(out, prompts)

    ref = {"prompts": prompts, "new_tokens": NEW_TOKENS,
           "generated": {name: greedy_ids(d, prompts) for name, d in dirs.items()}}
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)
    for name, ids in ref["generated"].items():
        same = sum(a == b for a, b in zip(ids, ref["generated"]["ct_channel"]))
        print(f"{name}: {same}/{PROMPTS} prompts equal ct_channel's ids")


if __name__ == "__main__":
    main()

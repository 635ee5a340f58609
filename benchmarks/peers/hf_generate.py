#!/usr/bin/env python3
"""The peer for conveyor's suite: HF transformers `generate` with random weights built from a model config.

Greedy, EOS ignored (min_new_tokens = max_new_tokens), random prompt ids; one untimed warm-up call, then
--iters timed calls. --cache default is transformers' dynamic cache (warm-up: 8 new tokens); --cache
static preallocates the cache for input + output length and compiles the decode step, so its warm-up
generates the full --output-len (the same cache shape as the timed calls: nothing recompiles there)
and its time is reported separately as compile_time_s (compilation plus one generate). With --devices N > 1 the
decoder layers are split evenly across cuda:0..N-1 (embedding on the first, norm and LM head on the
last), with pre-hooks that move every tensor argument to the layer's GPU: plain layer pipelining, no
overlap, as `device_map` would do. Prints one JSON object (output tokens/s and the settings).

    python3 benchmarks/peers/hf_generate.py --config configs/models/llama-3-8b.yaml --batch 64 \\
        --input-len 512 --output-len 256 --cache static
    python3 benchmarks/peers/hf_generate.py --config tests/data/goldens/llama_deep/config.json \\
        --device cpu --dtype float32 --batch 2 --input-len 8 --output-len 4   # CPU smoke run
"""
import argparse
import json
import sys
import time

import torch
import transformers
import yaml
from transformers import AutoConfig, AutoModelForCausalLM

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def load_config(path):
    with open(path) as f:
        raw = json.load(f) if path.endswith(".json") else yaml.safe_load(f)
    raw = {k: v for k, v in raw.items() if v is not None}
    return AutoConfig.for_model(raw.pop("model_type"), **raw)


def move_to(device, obj):
    if torch.is_tensor(obj):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, tuple):
        return tuple(move_to(device, x) for x in obj)
    if isinstance(obj, list):
        return [move_to(device, x) for x in obj]
    if isinstance(obj, dict):
        return {k: move_to(device, v) for k, v in obj.items()}
    return obj


def place_on(module, device):
    def hook(_mod, args, kwargs):
        return move_to(device, args), move_to(device, kwargs)

    module.register_forward_pre_hook(hook, with_kwargs=True)


def materialize(module, device):
    """Allocates a meta module on `device` with random weights (norm weights 1, matrices N(0, 0.02))."""
    module.to_empty(device=device)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)


def build_model(cfg, args):
    dtype = DTYPES[args.dtype]
    if args.devices == 1:
        with torch.device(args.device):  # random init straight on the device
            return AutoModelForCausalLM.from_config(cfg, dtype=dtype).eval()
    # Split: build on the meta device (a 70B model fits no single GPU), then give every piece its GPU.
    devices = [torch.device("cpu" if args.device == "cpu" else f"cuda:{i}") for i in range(args.devices)]
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    inner = model.model
    materialize(inner.embed_tokens, devices[0])
    per = -(-len(inner.layers) // args.devices)
    for i, layer in enumerate(inner.layers):
        materialize(layer, devices[i // per])
        place_on(layer, devices[i // per])
    for module in (inner.norm, model.lm_head):
        materialize(module, devices[-1])
        place_on(module, devices[-1])
    # The rotary table is a computed buffer, which to_empty would leave as garbage: rebuild it.
    with torch.device(devices[0]):
        inner.rotary_emb = type(inner.rotary_emb)(config=cfg)
    if cfg.tie_word_embeddings:
        model.lm_head.weight = inner.embed_tokens.weight  # tied: one tensor on the first device
    return model.eval()


def run(model, cfg, args, batch, output_len, cache):
    device = next(model.parameters()).device
    ids = torch.randint(0, cfg.vocab_size, (batch, args.input_len), device=device,
                        generator=torch.Generator(device=device).manual_seed(args.seed))
    kwargs = dict(max_new_tokens=output_len, min_new_tokens=output_len, do_sample=False,
                  attention_mask=torch.ones_like(ids), pad_token_id=0)
    if cache == "static":
        kwargs["cache_implementation"] = "static"
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids, **kwargs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    generated = (out.shape[1] - args.input_len) * batch
    return elapsed, generated


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="configs/models/*.yaml or an HF config.json")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--cache", choices=["default", "static"], default="default")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    ap.add_argument("--device", default="cuda", help="cuda or cpu (one device)")
    ap.add_argument("--devices", type=int, default=1,
                    help="GPUs to split the layers over (with --device cpu: the same split on the host, to test it)")
    ap.add_argument("--iters", type=int, default=1, help="timed generate calls")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--output-json", help="also write the result here")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    cfg = load_config(args.config)
    result = {"peer": "hf_transformers_generate", "cache": args.cache, "config": args.config, "batch": args.batch,
              "input_len": args.input_len, "output_len": args.output_len, "dtype": args.dtype,
              "devices": args.devices if args.device != "cpu" else 0,
              "split_layers": args.devices > 1, "iters": args.iters,
              "transformers_version": transformers.__version__, "torch_version": torch.__version__,
              "command_line": " ".join(["python3"] + sys.argv)}
    try:
        model = build_model(cfg, args)
        if args.cache == "static":
            # A shorter warm-up would size the static cache differently and the timed call would recompile.
            warm, _ = run(model, cfg, args, args.batch, args.output_len, args.cache)
            result["compile_time_s"] = warm
        else:
            run(model, cfg, args, args.batch, min(args.output_len, 8), args.cache)
        times, tokens = [], 0
        for _ in range(args.iters):
            elapsed, generated = run(model, cfg, args, args.batch, args.output_len, args.cache)
            times.append(elapsed)
            tokens += generated
        result.update(elapsed_time=sum(times), latencies=times, total_output_tokens=tokens,
                      output_tokens_per_second=tokens / sum(times))
    except torch.cuda.OutOfMemoryError as e:
        result.update(oom=True, error=str(e).splitlines()[0])
    print(json.dumps(result))
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump(result, f, indent=2)
    return 3 if result.get("oom") else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Builds tiny random HF checkpoints and records transformers' outputs for them: the golden
references the CPU and CUDA forward passes are tested against.

    python3 scripts/make_goldens.py            # (re)writes tests/data/goldens/<model>/
    python3 scripts/make_goldens.py --check    # regenerates in memory, compares with what is committed

Needs torch and transformers 5.x (the GPU machine has both). Runs on the CPU in fp32 with the eager
attention implementation, one thread, seeded: the same versions give byte-identical files. Writes
nothing outside tests/data/goldens (no hub access, no cache).

Per model directory:
  config.json, generation_config.json, model.safetensors   the checkpoint (save_pretrained, fp32)
  golden.json        prompts (token ids), greedy continuations, last-prompt-position logits (fp32, and
                     fp64 from the same weights: the exact answer both fp32 stacks approximate),
                     the smallest top-1/top-2 logit gap over the greedy steps
  step_logits.bin    raw little-endian float32 [num_prompts, new_tokens, vocab_size]: the logits from
                     which greedy token i was chosen (step 0 = last prompt position, then decode steps)
Greedy decoding ignores EOS (as vLLM's ignore_eos): every continuation has exactly new_tokens ids.
"""

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tests" / "data" / "goldens"
PROMPT_LENGTHS = [1, 7, 33, 100]
NEW_TOKENS = 32
MAX_MODEL_BYTES = 2 * 1024 * 1024
WEIGHT_STD = 0.15  # large enough that greedy choices are not near-ties, small enough to stay tame

# name -> (model class, config class, config kwargs, seed). Each model covers a different path.
MODELS = {
    # Llama 3.1-style RoPE scaling, GQA 4:2. original_max_position_embeddings is small so that the
    # head_dim-32 frequencies fall in all three llama3 bands (kept, blended, divided).
    "llama3_rope": (LlamaForCausalLM, LlamaConfig, dict(
        vocab_size=320, hidden_size=128, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
        rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                             high_freq_factor=4.0, original_max_position_embeddings=32)), 1001),
    # Qwen2: QKV bias, tied embeddings, one KV head (MQA), head_dim 32.
    "qwen2_tied_mqa": (Qwen2ForCausalLM, Qwen2Config, dict(
        vocab_size=384, hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=3,
        num_key_value_heads=1, max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=True,
        bos_token_id=1, eos_token_id=2, rope_parameters=dict(rope_type="default", rope_theta=1000000.0)), 1002),
    # Mistral: GQA 8:2, head_dim 16, sliding window 48 so the 100-token prompt crosses it.
    "mistral_swa": (MistralForCausalLM, MistralConfig, dict(
        vocab_size=320, hidden_size=128, intermediate_size=224, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=2, max_position_embeddings=1024, rms_norm_eps=1e-5, sliding_window=48,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0)), 1003),
    # head_dim 128 (wider than hidden / heads), MHA, tied embeddings, linear RoPE scaling.
    "llama_hd128": (LlamaForCausalLM, LlamaConfig, dict(
        vocab_size=256, hidden_size=128, intermediate_size=160, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, head_dim=128, max_position_embeddings=512, rms_norm_eps=1e-6,
        tie_word_embeddings=True, rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=2.0)), 1004),
    # Dynamic NTK: max_position_embeddings 64, so the 100-token prompt and long decodes rescale.
    "llama_dynamic": (LlamaForCausalLM, LlamaConfig, dict(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, max_position_embeddings=64, rms_norm_eps=1e-5,
        rope_parameters=dict(rope_type="dynamic", rope_theta=10000.0, factor=2.0)), 1005),
    # Five layers, so pipelines of 2, 3 and 4 stages (and uneven splits like [1, 3, 1]) have layers
    # on every stage; GQA 4:2 splits over tp = 2.
    "llama_deep": (LlamaForCausalLM, LlamaConfig, dict(
        vocab_size=288, hidden_size=64, intermediate_size=96, num_hidden_layers=5, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-5,
        rope_parameters=dict(rope_type="default", rope_theta=10000.0)), 1006),
}


def randomize(model, seed):
    """Every parameter random (norm weights too, so a wrong or missing norm weight shows)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                p.copy_(torch.rand(p.shape, generator=gen) + 0.5)
            elif name.endswith(".bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * WEIGHT_STD)


def prompts_for(vocab, seed):
    gen = torch.Generator().manual_seed(seed + 7)
    return [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in PROMPT_LENGTHS]


def load(model_cls, path):
    # A fresh model per prompt: dynamic NTK keeps state between calls in transformers.
    model = model_cls.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    model.generation_config.eos_token_id = None  # greedy runs ignore EOS; the saved file keeps it
    return model


def run_prompt(model_cls, path, ids):
    """Greedy continuation plus the raw logits of every step, and a plain forward's last logits."""
    model = load(model_cls, path)
    x = torch.tensor([ids])
    with torch.no_grad():
        forward_last = model(x).logits[0, -1].float()
        exact_last = model.double()(x).logits[0, -1]
    model = load(model_cls, path)
    gc = GenerationConfig(do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=0, eos_token_id=None,
                          pad_token_id=0, num_beams=1, repetition_penalty=1.0, use_cache=True)
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), generation_config=gc, output_logits=True,
                             return_dict_in_generate=True)
    tokens = out.sequences[0, len(ids):].tolist()
    steps = torch.stack([s[0].float() for s in out.logits])  # [new_tokens, vocab]
    assert len(tokens) == NEW_TOKENS and steps.shape[0] == NEW_TOKENS, "generation stopped early"
    assert tokens == steps.argmax(-1).tolist(), "greedy tokens are not the argmax of their logits"
    return tokens, forward_last, exact_last, steps


def top2_gap(logits):
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def build(name, workdir):
    model_cls, config_cls, kwargs, seed = MODELS[name]
    torch.manual_seed(seed)
    config = config_cls(**kwargs)
    model = model_cls(config).to(torch.float32)
    randomize(model, seed)
    model.generation_config = GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id)
    path = workdir / name
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)

    records, all_steps = [], []
    for ids in prompts_for(config.vocab_size, seed):
        tokens, forward_last, exact_last, steps = run_prompt(model_cls, path, ids)
        records.append({
            "prompt_ids": ids,
            "greedy_ids": tokens,
            "last_logits": [float(v) for v in forward_last.numpy().astype(np.float32)],
            "last_logits_f64": [float(v) for v in exact_last.numpy()],
            "min_top2_gap": min(top2_gap(s) for s in steps),
        })
        all_steps.append(steps.numpy().astype("<f4"))
    step_logits = np.stack(all_steps)
    (path / "step_logits.bin").write_bytes(step_logits.tobytes())

    golden = {
        "model": name,
        "architecture": model_cls.__name__,
        "generated_by": "python3 scripts/make_goldens.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "reference": "transformers, fp32, CPU, attn_implementation=eager, greedy (do_sample=False), EOS ignored",
        "new_tokens": NEW_TOKENS,
        "vocab_size": config.vocab_size,
        "step_logits": {"file": "step_logits.bin", "dtype": "float32-le",
                        "shape": [len(records), NEW_TOKENS, config.vocab_size]},
        # fp32 noise of transformers itself reaches ~3e-5 absolute on logits of magnitude ~5 over the
        # decode steps, so a pure relative bound fails on logits near zero: check |d| <= atol + rtol|want|.
        "tolerance": {"logits_atol": 1e-4, "logits_rtol": 1e-4},
        "prompts": records,
    }
    (path / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    size = sum(f.stat().st_size for f in path.iterdir())
    assert size < MAX_MODEL_BYTES, f"{name} is {size} bytes, over the {MAX_MODEL_BYTES}-byte budget"
    return path, size


def digest(path):
    h = hashlib.sha256()
    for f in sorted(path.iterdir()):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="regenerate into a temp dir and compare")
    parser.add_argument("--only", nargs="*", choices=sorted(MODELS), help="models to build (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    names = args.only or list(MODELS)
    if args.check:
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            bad = [n for n in names if digest(build(n, Path(tmp))[0]) != digest(OUT_DIR / n)]
        print("goldens differ: " + ", ".join(bad) if bad else "goldens reproduce")
        return 1 if bad else 0
    for n in names:
        path, size = build(n, OUT_DIR)
        print(f"{path.relative_to(ROOT)}: {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

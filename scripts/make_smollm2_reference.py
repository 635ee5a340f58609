#!/usr/bin/env python3
"""Records transformers' greedy continuations of the real SmolLM2-135M-Instruct Q4_1 GGUF: the
reference tests/stages/smollm2_test.cpp checks conveyor's CPU runner against.

    python3 scripts/make_smollm2_reference.py      # writes tests/data/smollm2_reference.json

transformers dequantizes the GGUF (through the `gguf` package) to fp32; the model runs on the CPU
with eager attention, one thread. Per prompt: its text, whether the chat template wraps it, the
token ids from the GGUF's own tokenizer, NEW_TOKENS greedy ids (EOS ignored) and the top-1/top-2
logit gap at every step (where a gap is tiny, fp32 noise may legitimately pick the other token).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "smollm2_reference.json"
NEW_TOKENS = 32

# (text, use the chat template)
PROMPTS = [
    ("The capital of France is", False),
    ("Once upon a time, in a small village by the sea,", False),
    ("def fibonacci(n):\n", False),
    ("The three primary colors are", False),
    ("Water boils at a temperature of", False),
    ("What is the capital of Japan?", True),
    ("Write a haiku about autumn leaves.", True),
    ("Explain in one sentence why the sky is blue.", True),
    ("List three fruits that are red.", True),
]


def model_path():
    out = subprocess.run([str(ROOT / "scripts" / "fetch_test_model.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def main():
    torch.set_num_threads(1)
    path = model_path()
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    # Greedy must see the raw logits: with an EOS id set, generate would stop or (min_new_tokens)
    # mask EOS, and the reference would no longer be the argmax the runner computes.
    model.generation_config.eos_token_id = None
    gc = GenerationConfig(do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=0, eos_token_id=None,
                          pad_token_id=0, num_beams=1, repetition_penalty=1.0, use_cache=True)
    records = []
    for text, chat in PROMPTS:
        if chat:
            ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                          tokenize=True, return_dict=False)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
        else:
            ids = tok(text)["input_ids"]
        ids = [int(i) for i in ids]
        x = torch.tensor([ids])
        with torch.no_grad():
            out = model.generate(x, attention_mask=torch.ones_like(x), generation_config=gc, output_logits=True,
                                 return_dict_in_generate=True)
        greedy = out.sequences[0, len(ids):].tolist()
        assert len(greedy) == NEW_TOKENS, "generation stopped early"
        assert greedy == [int(step[0].argmax()) for step in out.logits], "greedy ids are not the argmax of the logits"
        gaps = []
        for step in out.logits:
            top = torch.topk(step[0].float(), 2).values
            gaps.append(round(float(top[0] - top[1]), 6))
        records.append({"text": text, "chat": chat, "prompt_ids": ids, "greedy_ids": greedy, "top2_gaps": gaps,
                        "continuation": tok.decode(greedy)})
        print(f"{text!r}: {tok.decode(greedy)!r} (min gap {min(gaps):.4g})", file=sys.stderr)
    doc = {
        "model": path.name,
        "generated_by": "python3 scripts/make_smollm2_reference.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "reference": "transformers from the GGUF (dequantized to fp32), CPU, eager attention, greedy, EOS ignored",
        "new_tokens": NEW_TOKENS,
        "prompts": records,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

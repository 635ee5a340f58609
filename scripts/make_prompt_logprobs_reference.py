#!/usr/bin/env python3
"""transformers' prompt log-probabilities on a tiny committed checkpoint, the reference of
tests/launch/prompt_logprobs.sh (batch requests with prompt_logprobs, vLLM's parameter).

    python3 scripts/make_prompt_logprobs_reference.py   # writes tests/data/perplexity/prompt_logprobs_reference.json

fp32 on the CPU, eager attention; log_softmax in fp64. For every prompt token i >= 1: its logprob
given tokens < i, its rank (1 + tokens with a strictly larger logit) and the TOP most likely tokens.
"""

import json
import os
import random
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "data" / "goldens" / "llama_deep"
OUT = ROOT / "tests" / "data" / "perplexity" / "prompt_logprobs_reference.json"
TOP = 5
LENGTHS = [7, 12, 20, 33]


def main():
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    vocab = model.config.vocab_size
    rng = random.Random(20261202)
    prompts = []
    for n in LENGTHS:
        ids = [rng.randrange(3, vocab) for _ in range(n)]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0]
        logp = torch.log_softmax(logits.double(), dim=-1)
        rows = []
        for i in range(1, n):
            row, tok = logits[i - 1], ids[i]
            top = torch.topk(logp[i - 1], TOP)
            rows.append({"token": tok, "logprob": float(logp[i - 1, tok]), "rank": int((row > row[tok]).sum()) + 1,
                         "top": [[int(t), float(v)] for v, t in zip(top.values, top.indices)]})
        prompts.append({"prompt_ids": ids, "positions": rows})
    doc = {"model": str(MODEL.relative_to(ROOT)), "generated_by": "python3 scripts/make_prompt_logprobs_reference.py",
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__}, "top": TOP,
           "prompts": prompts}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

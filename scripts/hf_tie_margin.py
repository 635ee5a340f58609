#!/usr/bin/env python3
"""Tells a near-tie from a defect where two greedy runs of one prompt part ways: HF transformers' fp32
logits, teacher-forced on the reference run's ids, at each position asked; prints HF's top 3 and the
top-2 gap as a share of max(1, max |logit|), the measure tests/stages/gpu_tie_rule.h uses (bf16 runs
accept a gap up to 6% of it, f16 3%).

Usage: scripts/hf_tie_margin.py MODEL_DIR PROMPT_IDS REFERENCE_IDS POSITION [POSITION ...]
  PROMPT_IDS, REFERENCE_IDS: comma-separated (REFERENCE_IDS: the generated ids of the reference run,
  as `conveyor generate --print-ids` prints them); POSITION: index into REFERENCE_IDS.
"""
import sys

import torch
import transformers


def main(model_dir, prompt_s, ids_s, positions):
    prompt = [int(x) for x in prompt_s.split(",")]
    ids = [int(x) for x in ids_s.split(",")]
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0]
    for i in positions:
        row = logits[len(prompt) - 1 + i]
        top = torch.topk(row, 3)
        gap = (top.values[0] - top.values[1]).item()
        scale = max(1.0, row.abs().max().item())
        print(f"{model_dir.rstrip('/').split('/')[-1]} position {i}: HF top 3 {top.indices.tolist()} "
              f"{[round(v, 4) for v in top.values.tolist()]}, top-2 gap {gap:.4f} = {100 * gap / scale:.2f}% "
              f"of max(1, max|logit|) {scale:.3f}; the reference run chose {ids[i]}")


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4:]])

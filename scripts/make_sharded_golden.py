#!/usr/bin/env python3
"""Re-saves one golden checkpoint with transformers as a sharded bf16 checkpoint, so the tests read a
sharded directory exactly as HF writes it (model.safetensors.index.json, model-0000k-of-0000n files).

    python3 scripts/make_sharded_golden.py     # writes tests/data/formats/llama_dynamic_sharded_bf16/

Source: tests/data/goldens/llama_dynamic (fp32, written by scripts/make_goldens.py). bf16 halves it to
about 200 KB, and max_shard_size 96KB makes several shards. Needs torch and transformers 5.x (CPU is
enough); deterministic for fixed versions. The test compares each tensor with the fp32 golden rounded
to bf16 (round to nearest even, as torch's .to(torch.bfloat16)).
"""
import os
import shutil
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "tests" / "data" / "goldens" / "llama_dynamic"
OUT = ROOT / "tests" / "data" / "formats" / "llama_dynamic_sharded_bf16"
MAX_SHARD_SIZE = "96KB"


def main():
    model = LlamaForCausalLM.from_pretrained(SRC, dtype=torch.bfloat16)
    if OUT.exists():
        shutil.rmtree(OUT)
    model.save_pretrained(OUT, max_shard_size=MAX_SHARD_SIZE)
    shards = sorted(p.name for p in OUT.glob("*.safetensors"))
    assert len(shards) > 1, f"expected several shards, got {shards}"
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT}: {len(shards)} shards, {total} bytes")


if __name__ == "__main__":
    main()

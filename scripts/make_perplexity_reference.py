#!/usr/bin/env python3
"""The transformers side of `conveyor perplexity`: the same protocol on the real SmolLM2-135M-Instruct
Q4_1 GGUF (dequantized to fp32 by transformers through the `gguf` package), on the CPU, eager
attention. Writes tests/data/perplexity/reference.json, which tests/launch/perplexity.sh and the
acceptance run compare against.

    python3 scripts/make_perplexity_reference.py [--ctx-size 512] [--chunks K]

Protocol (llama.cpp's): the whole text tokenized once (BOS first when the tokenizer adds one);
n_chunks = floor(n_tokens / ctx); chunk i is tokens [i*ctx, (i+1)*ctx) with its first token replaced
by BOS when the tokenizer adds one, run from an empty cache; the NLL is averaged over the tokens at
positions ctx/2+1 .. ctx-1 of every chunk (logits at ctx/2 .. ctx-2); PPL = exp(mean NLL), +/- is
PPL times the standard error of the mean NLL.
"""

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "perplexity"


def model_path():
    out = subprocess.run([str(ROOT / "scripts" / "fetch_test_model.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def tokenize(tok, text):
    with_special = tok(text, add_special_tokens=True)["input_ids"]
    plain = tok(text, add_special_tokens=False)["input_ids"]
    adds_bos = tok.bos_token_id is not None and len(with_special) > len(plain) and with_special[0] == tok.bos_token_id
    return [int(i) for i in with_special], adds_bos


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctx-size", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=-1)
    ap.add_argument("--text", default=str(DATA / "text.txt"))
    ap.add_argument("--output", default=str(DATA / "reference.json"))
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    path = model_path()
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    text = Path(args.text).read_text()
    tokens, adds_bos = tokenize(tok, text)
    n = args.ctx_size
    n_chunks = len(tokens) // n
    if args.chunks >= 0:
        n_chunks = min(n_chunks, args.chunks)
    first = n // 2
    nll_sum = nll2_sum = 0.0
    count = 0
    running, chunk_nll = [], []
    for i in range(n_chunks):
        ids = tokens[i * n:(i + 1) * n]
        if adds_bos:
            ids[0] = tok.bos_token_id
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].double()
        logp = torch.log_softmax(logits, dim=-1)
        targets = torch.tensor(ids[first + 1:])
        nll = -logp[first:n - 1].gather(1, targets[:, None])[:, 0]
        nll_sum += float(nll.sum())
        nll2_sum += float((nll * nll).sum())
        count += len(targets)
        chunk_nll.append(float(nll.mean()))
        running.append(math.exp(nll_sum / count))
        print(f"[{i + 1}]{running[-1]:.4f}", file=sys.stderr, flush=True)
    mean = nll_sum / count
    var = nll2_sum / count - mean * mean
    se = math.sqrt(var / (count - 1)) if var > 0 and count > 1 else 0.0
    ppl = math.exp(mean)
    doc = {
        "model": path.name,
        "generated_by": "python3 scripts/make_perplexity_reference.py --ctx-size %d" % n,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "reference": "transformers from the GGUF (dequantized to fp32), CPU, eager attention, fp64 log-softmax",
        "text": os.path.relpath(args.text, ROOT),
        "ctx_size": n,
        "n_tokens": len(tokens),
        "adds_bos": adds_bos,
        "n_chunks": n_chunks,
        "scored_per_chunk": n - 1 - first,
        "running_ppl": running,
        "chunk_mean_nll": chunk_nll,
        "mean_nll": mean,
        "ppl": ppl,
        "ppl_error": ppl * se,
    }
    Path(args.output).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"Final estimate: PPL = {ppl:.4f} +/- {ppl * se:.5f}; wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Expected ids (and decodes) from HF `tokenizers` for every string of the tokenizer corpus.

    python3 scripts/make_tokenizer_expected.py --tokenizer-json TOKENIZER.json CORPUS.jsonl OUT.jsonl
    python3 scripts/make_tokenizer_expected.py --gguf-meta META.json CORPUS.jsonl OUT.jsonl

The first line is a header {"prefix": ids the post-processor puts first (BOS), "count": strings}; then
one JSON object per corpus line:
  ids              encode(s) as HF does by default: special tokens in the text recognised, post-processor
                   (BOS) applied
  plain            encode(s, add_special_tokens=False) with encode_special_tokens on (special tokens in
                   the text are plain text); left out when equal to ids without the prefix
  decoded          decode(ids, skip_special_tokens=True); left out when equal to s
  decoded_special  decode(ids, skip_special_tokens=False); left out when equal to decoded
With --random-decode OUT2 it also writes 300 seeded random id sequences (cut characters, stray bytes,
specials) with HF's decode of each, skip_special_tokens true ("decoded") and false ("decoded_special").
With --gguf-meta the reference is HF's conversion of that GGUF metadata (scripts/export_gguf_tokenizer.py).
"""
import argparse
import json
import os
import random
import sys

from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser()
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokenizer-json")
    src.add_argument("--gguf-meta")
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--random-decode")
    args = ap.parse_args()
    if args.tokenizer_json:
        tok = Tokenizer.from_file(args.tokenizer_json)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from export_gguf_tokenizer import hf_from_meta
        tok = hf_from_meta(json.load(open(args.gguf_meta, encoding="utf-8")))
    plain = Tokenizer.from_str(tok.to_str())
    plain.encode_special_tokens = True

    with open(args.corpus, encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f]
    total = 0
    prefix = tok.encode("").ids
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(json.dumps({"prefix": prefix, "count": len(corpus)}) + "\n")
        for s in corpus:
            ids = tok.encode(s).ids
            assert ids[:len(prefix)] == prefix, s
            rec = {"ids": ids}
            p = plain.encode(s, add_special_tokens=False).ids
            if p != ids[len(prefix):]:
                rec["plain"] = p
            dec = tok.decode(ids, skip_special_tokens=True)
            if dec != s:
                rec["decoded"] = dec
            dec_special = tok.decode(ids, skip_special_tokens=False)
            if dec_special != dec:
                rec["decoded_special"] = dec_special
            total += len(ids)
            out.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"wrote {args.out}: {len(corpus)} strings, {total} ids")
    if args.random_decode:
        rng = random.Random(4321)
        n = tok.get_vocab_size()
        with open(args.random_decode, "w", encoding="utf-8") as out:
            for _ in range(300):
                ids = [rng.randrange(n) for _ in range(rng.randrange(1, 30))]
                rec = {"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=True),
                       "decoded_special": tok.decode(ids, skip_special_tokens=False)}
                out.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
        print(f"wrote {args.random_decode}")


if __name__ == "__main__":
    main()

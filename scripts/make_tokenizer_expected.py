#!/usr/bin/env python3
"""Expected ids (and decodes) from HF `tokenizers` for every string of the tokenizer corpus.

    python3 scripts/make_tokenizer_expected.py --tokenizer-json TOKENIZER.json CORPUS.jsonl OUT.jsonl
    python3 scripts/make_tokenizer_expected.py --gguf-meta META.json CORPUS.jsonl OUT.jsonl

The first line is a header {"prefix"/"suffix": ids the post-processor puts around the text (BOS, EOS),
"count": strings, "head"/"stride": which corpus strings, see --stride}; then
one JSON object per corpus line:
  ids              encode(s) as HF does by default: special tokens in the text recognised, post-processor
                   (BOS) applied
  plain            encode(s, add_special_tokens=False) with encode_special_tokens on (special tokens in
                   the text are plain text); left out when equal to ids without prefix and suffix
  decoded          decode(ids, skip_special_tokens=True); left out when equal to s
  decoded_special  decode(ids, skip_special_tokens=False); left out when equal to decoded
With --random-decode OUT2 it also writes 300 seeded random id sequences (cut characters, stray bytes,
specials) with HF's decode of each, skip_special_tokens true ("decoded") and false ("decoded_special").
--patch PATCH.json changes the tokenizer.json first (top-level keys replace, "model" keys merge,
"added_tokens" are appended; the C++ test applies the same rules), --pre NAME overrides the GGUF
tokenizer.ggml.pre, and --stride N --head H keep the first H corpus strings (the hand-written edge
cases) and then every N-th one (the header says so).
With --gguf-meta the reference is HF's conversion of that GGUF metadata (scripts/export_gguf_tokenizer.py).
"""
import argparse
import json
import os
import random
import sys

from tokenizers import Tokenizer


def apply_patch(definition, patch):
    for key, value in patch.items():
        if key.startswith("_"):
            continue
        if key == "model":
            definition["model"].update(value)
        elif key == "added_tokens":
            definition["added_tokens"] = definition.get("added_tokens", []) + value
        else:
            definition[key] = value
    return definition


def main():
    ap = argparse.ArgumentParser()
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokenizer-json")
    src.add_argument("--gguf-meta")
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--random-decode")
    ap.add_argument("--patch")
    ap.add_argument("--pre")
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--head", type=int, default=0)
    args = ap.parse_args()
    if args.tokenizer_json:
        definition = json.load(open(args.tokenizer_json, encoding="utf-8"))
        if args.patch:
            definition = apply_patch(definition, json.load(open(args.patch, encoding="utf-8")))
        tok = Tokenizer.from_str(json.dumps(definition))
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from export_gguf_tokenizer import hf_from_meta
        meta = json.load(open(args.gguf_meta, encoding="utf-8"))
        if args.pre:
            meta["pre"] = args.pre
        tok = hf_from_meta(meta)
    plain = Tokenizer.from_str(tok.to_str())
    plain.encode_special_tokens = True

    with open(args.corpus, encoding="utf-8") as f:
        corpus = [json.loads(line) for i, line in enumerate(f) if i < args.head or i % args.stride == 0]
    total = 0
    # What the post-processor adds around a text: "x" with and without it.
    body, framed = tok.encode("x", add_special_tokens=False).ids, tok.encode("x").ids
    k = next(k for k in range(len(framed) - len(body) + 1) if framed[k:k + len(body)] == body)
    prefix, suffix = framed[:k], framed[k + len(body):]
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(json.dumps({"prefix": prefix, "suffix": suffix, "count": len(corpus), "stride": args.stride,
                              "head": args.head}) + "\n")
        for s in corpus:
            ids = tok.encode(s).ids
            assert ids[:len(prefix)] == prefix and ids[len(ids) - len(suffix):] == suffix, s
            rec = {"ids": ids}
            p = plain.encode(s, add_special_tokens=False).ids
            if p != ids[len(prefix):len(ids) - len(suffix)]:
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

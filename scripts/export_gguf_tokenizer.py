#!/usr/bin/env python3
"""GGUF tokenizer metadata as JSON, and the HF `tokenizers` reference built from it.

    # the tokenizer.ggml.* keys of a GGUF file, plus HF's tokenizer.json converted from them:
    python3 scripts/export_gguf_tokenizer.py from-gguf MODEL.gguf META.json --hf-out tokenizer.json
    # GGUF-style metadata ("llama" model: tokens, scores, token types) for one of our SentencePiece-style
    # tokenizer.json files, plus HF's conversion of that metadata:
    python3 scripts/export_gguf_tokenizer.py from-json sp_bpe.json META.json --hf-out sp_bpe_gguf.json
    # the same metadata as a real (tensor-less) GGUF file, for the C++ GGUF reader's tests:
    python3 scripts/export_gguf_tokenizer.py from-json tests/data/tokenizer/sp_bpe.json /tmp/meta.json \
        --gguf-out tests/data/tokenizer/sp_bpe_tokenizer.gguf

META.json holds the keys without the "tokenizer.ggml." prefix (model, pre, tokens, token_type, scores,
merges, bos_token_id, ...) and "architecture"; the C++ test fills GgufTokenizerMetadata from it.
The HF tokenizer comes from transformers' own GGUF converter (the code AutoTokenizer.from_pretrained(
dir, gguf_file=...) runs; called directly because its GGUF reader imports torch, absent here), with
tokenizer.ggml.add_bos_token turned into a TemplateProcessing post-processor as that wrapper would.
One correction: transformers ignores tokenizer.ggml.pre "smollm", which llama.cpp (and SmolLM2's own
tokenizer.json) splits digits one by one before the GPT-2 regex; we set that pre-tokenizer so the
reference is the model's real tokenizer.
"""
import argparse
import json

from tokenizers import Tokenizer, pre_tokenizers, processors

# Pre-tokenizers transformers' converter does not know but llama.cpp does (digit-by-digit, then GPT-2).
DIGIT_SPLIT_PRES = {"smollm", "starcoder", "refact", "codeshell"}


def read_gguf(path):
    import gguf
    reader = gguf.GGUFReader(path)
    meta = {"architecture": reader.fields["general.architecture"].contents()}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.ggml."):
            meta[key[len("tokenizer.ggml."):]] = field.contents()
    return meta


def meta_from_sp_json(path):
    model = json.load(open(path, encoding="utf-8"))
    vocab = model["model"]["vocab"]
    tokens = [None] * len(vocab)
    for piece, i in vocab.items():
        tokens[i] = piece
    specials = {t["content"] for t in model["added_tokens"] if t["special"]}
    types, scores = [], []
    for i, piece in enumerate(tokens):
        if piece == model["model"]["unk_token"]:
            types.append(2)  # UNKNOWN
        elif piece in specials:
            types.append(3)  # CONTROL
        elif piece.startswith("<0x") and len(piece) == 6:
            types.append(6)  # BYTE
        else:
            types.append(1)  # NORMAL
        # SentencePiece BPE scores: later pieces (later merges) score lower.
        scores.append(0.0 if types[-1] != 1 else -float(i))
    return {"architecture": "llama", "model": "llama", "pre": "default", "tokens": tokens,
            "token_type": types, "scores": scores, "bos_token_id": vocab["<s>"],
            "eos_token_id": vocab["</s>"], "unknown_token_id": vocab["<unk>"],
            "add_bos_token": True, "add_eos_token": False, "add_space_prefix": True}


def hf_from_meta(meta):
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (GGUF_TOKENIZER_MAPPING,
                                                                       convert_gguf_tokenizer)
    td = {name: meta[key[len("ggml."):]] for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
          if key[len("ggml."):] in meta}
    tok, _ = convert_gguf_tokenizer(meta["architecture"], td)
    if meta.get("pre") in DIGIT_SPLIT_PRES and meta.get("model") == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    if meta.get("add_bos_token"):
        # What AutoTokenizer's wrapper does with tokenizer.ggml.add_bos_token, done in the backend.
        bos = meta["tokens"][meta["bos_token_id"]]
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                           special_tokens=[(bos, meta["bos_token_id"])])
    return Tokenizer.from_str(tok.to_str())


def write_gguf(meta, path):
    """META as tokenizer.ggml.* keys of a GGUF file with no tensors (types as llama.cpp writes them)."""
    import gguf
    w = gguf.GGUFWriter(path, meta["architecture"])
    w.add_tokenizer_model(meta["model"])
    if meta.get("pre"):
        w.add_tokenizer_pre(meta["pre"])
    w.add_token_list(meta["tokens"])
    if "token_type" in meta:
        w.add_token_types(meta["token_type"])
    if "scores" in meta:
        w.add_token_scores(meta["scores"])
    if meta.get("merges"):
        w.add_token_merges(meta["merges"])
    for key, add in (("bos_token_id", w.add_bos_token_id), ("eos_token_id", w.add_eos_token_id),
                     ("unknown_token_id", w.add_unk_token_id), ("padding_token_id", w.add_pad_token_id)):
        if key in meta:
            add(meta[key])
    for key, add in (("add_bos_token", w.add_add_bos_token), ("add_eos_token", w.add_add_eos_token),
                     ("add_space_prefix", w.add_add_space_prefix)):
        if key in meta:
            add(meta[key])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["from-gguf", "from-json"])
    ap.add_argument("src")
    ap.add_argument("meta_out")
    ap.add_argument("--hf-out")
    ap.add_argument("--gguf-out")
    args = ap.parse_args()
    meta = read_gguf(args.src) if args.mode == "from-gguf" else meta_from_sp_json(args.src)
    meta.pop("chat_template", None)
    with open(args.meta_out, "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, separators=(",", ":"))
    print(f"wrote {args.meta_out}: model {meta['model']}, pre {meta.get('pre')}, {len(meta['tokens'])} tokens")
    if args.gguf_out:
        write_gguf(meta, args.gguf_out)
        print(f"wrote {args.gguf_out}")
    if args.hf_out:
        hf_from_meta(meta).save(args.hf_out, pretty=False)
        print(f"wrote {args.hf_out}")


if __name__ == "__main__":
    main()

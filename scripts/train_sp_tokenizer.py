#!/usr/bin/env python3
"""Trains a small Llama-2-style (SentencePiece-style) BPE tokenizer with HF `tokenizers` and writes
its tokenizer.json: Prepend("▁") + Replace(" ", "▁") normalizer, no pre-tokenizer, byte fallback
(<0x00>..<0xFF> at ids 3..258), <unk>/<s>/</s> at 0/1/2, TemplateProcessing adding <s>.

    python3 scripts/train_sp_tokenizer.py tests/data/tokenizer/corpus.jsonl tests/data/tokenizer/sp_bpe.json

Deterministic for a given corpus and tokenizers version; the file is ours and committed.
"""
import json
import sys

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

VOCAB_SIZE = 1400
LIMIT_ALPHABET = 120  # small, so rare characters go through byte fallback
SPECIALS = ["<unk>", "<s>", "</s>"]


def train_merges(texts):
    # Training splits on spaces (Metaspace) so merges stay inside words, like SentencePiece; the
    # final tokenizer has no pre-tokenizer, as Llama 2's tokenizer.json.
    tok = Tokenizer(BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    trainer = BpeTrainer(vocab_size=VOCAB_SIZE, limit_alphabet=LIMIT_ALPHABET, special_tokens=SPECIALS,
                         show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return json.loads(tok.to_str())["model"]


def build(trained):
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    tok = Tokenizer(BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in SPECIALS])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return tok


def main():
    corpus_path, out_path = sys.argv[1], sys.argv[2]
    with open(corpus_path, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f]
    tok = build(train_merges(texts))
    tok.save(out_path, pretty=False)
    print(f"wrote {out_path}: vocab {tok.get_vocab_size()}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Renders conversations with HF transformers' apply_chat_template to make the expected strings that
tests/runtime/tokenizer/chat_template_test.cpp compares ChatTemplate::render against, character for character.

    python3 scripts/make_chat_template_expected.py \
        --smollm2-gguf ~/.cache/conveyor/SmolLM2-135M-Instruct.Q4_1.gguf \
        --tokenizer ~/.cache/conveyor/smollm2_tokenizer.json \
        --out tests/data/chat_template/expected.jsonl

The ChatML case uses the real chat_template read from the SmolLM2 GGUF (scripts/fetch_test_model.sh).
The Qwen2-style ChatML, Llama-3 and Llama-2 cases use Jinja templates written below from the
published prompt formats of those model families (no network access to the Hub here); they exercise
the same Jinja features (trim, strip, role alternation check, bos/eos tokens) as the originals.
Conversations are random (seeded): multi-turn, with and without system messages, content with
leading/trailing whitespace, newlines and non-ASCII text.
"""
import argparse
import json
import random

from gguf import GGUFReader
from transformers import PreTrainedTokenizerFast

QWEN2_STYLE_CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

LLAMA3 = (
    "{% for message in messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")

LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}")

WORDS = ["hello", "world", "Zürich", "naïve", "日本語", "emoji 🙂", "x=1;", "tab\there", "line\nbreak",
         "  spaced  ", "end.", "?", "42", "café", "\"quoted\"", "back\\slash"]


def random_text(rng):
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
    pad = rng.choice(["", "", " ", "\n", "  \n", "\t"])
    return rng.choice(["", pad]) + text + rng.choice(["", pad])


def random_conversation(rng):
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": "system", "content": random_text(rng)})
    turns = rng.randint(1, 4)
    for t in range(turns):
        messages.append({"role": "user", "content": random_text(rng)})
        if t + 1 < turns or rng.random() < 0.3:
            messages.append({"role": "assistant", "content": random_text(rng)})
    return messages


def smollm2_template(path):
    reader = GGUFReader(path)
    field = reader.fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm2-gguf", required=True)
    ap.add_argument("--tokenizer", required=True, help="any tokenizer.json; only its Jinja renderer is used")
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", type=int, default=12)
    args = ap.parse_args()

    families = [
        ("chatml", "smollm2-gguf", smollm2_template(args.smollm2_gguf), "<|im_start|>", "<|im_end|>"),
        ("chatml", "qwen2-style", QWEN2_STYLE_CHATML, "", "<|im_end|>"),
        ("llama3", "llama3-format", LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
        ("llama2", "llama2-format", LLAMA2, "<s>", "</s>"),
    ]
    rng = random.Random(1234)
    with open(args.out, "w", encoding="utf-8") as out:
        for family, source, template, bos, eos in families:
            tok = PreTrainedTokenizerFast(tokenizer_file=args.tokenizer, bos_token=bos or None, eos_token=eos)
            cases = []
            for _ in range(args.cases):
                messages = random_conversation(rng)
                gen = rng.random() < 0.7
                text = tok.apply_chat_template(messages, chat_template=template, tokenize=False,
                                               add_generation_prompt=gen)
                cases.append({"messages": messages, "add_generation_prompt": gen, "expected": text})
            # A template read from the model file is the model's text: the test reads it from the GGUF again.
            record = {"family": family, "source": source,
                      "chat_template": None if source.endswith("-gguf") else template, "bos": bos, "eos": eos,
                      "cases": cases}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

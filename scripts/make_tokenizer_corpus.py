#!/usr/bin/env python3
"""Writes the tokenizer test corpus: >= 1,000 deterministic strings across scripts, emoji, code,
whitespace runs, numbers and special tokens, one JSON string per line (UTF-8, ensure_ascii off).

    python3 scripts/make_tokenizer_corpus.py tests/data/tokenizer/corpus.jsonl

Same seed, same file: the expected ids in tests/data/tokenizer/ are made from this output.
"""
import json
import random
import sys

SEED = 20240607
TARGET = 1200

SENTENCES = [
    # Latin with accents
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "¿Dónde está la biblioteca? ¡Aquí, señor!",
    "Ça va très bien, merci — et vous ?",
    "Zażółć gęślą jaźń; Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Ärger, Öl und Übermut: straße vs STRASSE.",
    "Não há açúcar no café da manhã.",
    "Hvað segirðu? Þetta er ágætt.",
    # Cyrillic, Greek
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Привет, мир! Как дела? 123 рубля.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "Γειά σου Κόσμε· τί κάνεις;",
    # Arabic, Hebrew (right to left)
    "مرحبا بالعالم! كيف حالك اليوم؟",
    "اللغة العربية جميلة ١٢٣٤٥٦",
    "שלום עולם, מה שלומך?",
    "עברית נכתבת מימין לשמאל.",
    # Hindi, Thai
    "नमस्ते दुनिया, आप कैसे हैं?",
    "हिन्दी में संख्या ०१२३४५६७८९ लिखी जाती है।",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    # CJK, Korean, Japanese
    "你好，世界！今天天气很好。",
    "机器学习模型的分词器需要处理中文字符。",
    "日本語のテキストとカタカナ、ひらがな。",
    "東京都渋谷区で会いましょう。",
    "안녕하세요 세계! 한국어 문장입니다.",
    "대한민국의 수도는 서울입니다.",
    # others
    "Բարեւ աշխարհ", "გამარჯობა მსოფლიო", "Selam dünya! Çok güzel.", "Xin chào thế giới, tiếng Việt có dấu.",
    "ሰላም ልዑል", "ᐊᐃᓐᓇᖅ", "Ẓ̤̈ȧ̧l̳g̃o̊ text with combining marks: e\u0301 a\u0308 n\u0303",
    # English with contractions in several cases
    "I'm sure you'll see they've done what we'd said it's not.",
    "DON'T SHOUT! I'M HERE AND YOU'LL HEAR ME, WE'VE SAID IT'S FINE.",
    "She's got John's book; they'd've known.",
    "The quick brown fox jumps over the lazy dog.",
    "rock 'n' roll, 'quoted', \"double\", `backticks`.",
]

EMOJI = [
    "😀", "🚀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🇯🇵", "🇺🇸🇩🇪", "❤️", "🧑🏿‍💻", "🤷‍♀️", "✅", "🔥🔥🔥",
    "👩🏻‍🔬", "🐈‍⬛", "1️⃣", "©️", "🫠", "😶‍🌫️",
]

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <vector>\nint main() { std::vector<int> v{1, 2, 3}; return v.size(); }\n",
    "const add = (a, b) => a + b;\nconsole.log(`sum=${add(2, 3)}`);\n",
    "fn main() {\n    let x: Vec<u8> = vec![0xFF; 16];\n    println!(\"{:?}\", x);\n}\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "<div class=\"card\"><p>Hello &amp; welcome</p></div>",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
    "if [[ -f \"$HOME/.bashrc\" ]]; then source ~/.bashrc; fi",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "    indented    with    spaces\n\t\ttabs\t\tand\ttabs",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares",
    "public static void main(String[] args) { System.out.println(\"Hello\"); }",
    "a->b; c::d; e<<=1; f>>>2; g!==h; i ?? j; k?.l",
    "    \n    \n\n\n   trailing   \n",
]

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "<file_sep>", "<repo_name>"]

WORDS = ("the of and to in is was for on that with as by at from it this be are an or have not but "
         "tokenizer model pipeline tensor parallel stage batch memory kernel byte merge rank").split()

SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2009", "\u200b", "    "]


def number(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return str(rng.randrange(10 ** rng.randrange(1, 25)))
    if kind == 1:
        return f"{rng.uniform(-1e6, 1e6):.{rng.randrange(1, 8)}f}"
    if kind == 2:
        return f"{rng.randrange(1, 10**9):,}"
    if kind == 3:
        return f"{rng.random():.3e}"
    if kind == 4:
        return f"+1 ({rng.randrange(100, 999)}) {rng.randrange(100, 999)}-{rng.randrange(1000, 9999)}"
    return f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T12:34:56Z"


def fragment(rng):
    kind = rng.randrange(10)
    if kind < 3:
        s = rng.choice(SENTENCES)
        if rng.random() < 0.3:  # a slice, which may start or end mid-word
            a = rng.randrange(len(s))
            s = s[a:a + rng.randrange(1, 40)]
        return s
    if kind == 3:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randrange(1, 4)))
    if kind == 4:
        return rng.choice(CODE)
    if kind == 5:
        return number(rng)
    if kind == 6:
        return rng.choice(SPECIALS)
    if kind == 7:
        return rng.choice(SPACES) * rng.randrange(1, 4)
    if kind == 8:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 8)))
    # random code points from a few blocks, to hit rare characters and byte fallback
    blocks = [(0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x0400, 0x04FF), (0x0600, 0x06FF), (0x1F300, 0x1F6FF),
              (0x0900, 0x097F), (0x0E00, 0x0E7F), (0x20, 0x7E), (0xA0, 0x24F)]
    lo, hi = rng.choice(blocks)
    return "".join(chr(rng.randrange(lo, hi + 1)) for _ in range(rng.randrange(1, 8)))


def edge_cases():
    out = ["", " ", "  ", "\n", "\t", "\r\n", " \n", "\n ", "a", " a", "a ", "  a  ", "\n\n\nx\n\n\n",
           "Hello", " Hello", "Hello ", "hello world", "Hello  world", "Hello   world   ",
           "1", "12", "123", "1234", "12345", " 123", "a1b2c3", "3.14159", "1,000,000", "٣٤٥", "²³",
           "'s", "'S", "'ll", "it's", "IT'S", "x's'", "''", "'", "\"",
           "<|im_start|>", "<|im_start|><|im_end|>", "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
           "text<|endoftext|>more", " <|endoftext|> ", "<|endoftext", "|endoftext|>", "<|im_start|x",
           "<s>", "</s>", "<s>Hello</s>", " <s> ", "<unk>", "<<s>>", "<s><s></s>",
           "\u00a0", "a\u00a0b", "\u3000全角", "x\u2009y", "zero\u200bwidth", "\ufeffBOM", "\u00ad",
           "🇫🇷", "👨‍👩‍👧‍👦", "🏳️‍🌈", "e\u0301", "\u0301", "�", "\U0010FFFD", "\x7f\x01\x1b[0m",
           "a" * 300, "ab" * 200, " " * 50, "\n" * 20, "1" * 60, "🚀" * 30, "中" * 80,
           "x" + " " * 7 + "y", "\t\tz", "A\n\nB", "end.\n",
           # added tokens with lstrip / rstrip / single_word (used by the variant tokenizers)
           "x <think> y", "  <think>", "a<think>b", "[INST] hi [INST]  there", "a[INST]b", "the theory; the",
           "bathe the\tthe_ the", "Don't WON'T i'M We'Ve", "a\r\n\r\nb \n\n  c", "1234567 12 3"]
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "tests/data/tokenizer/corpus.jsonl"
    rng = random.Random(SEED)
    corpus = edge_cases() + SENTENCES + CODE + [e for e in EMOJI]
    corpus += [" " + s for s in SENTENCES[:12]] + [s + "  " for s in SENTENCES[12:24]]
    while len(corpus) < TARGET:
        parts = [fragment(rng) for _ in range(rng.randrange(1, 6))]
        joins = [rng.choice(["", " ", " ", "\n", "  "]) for _ in parts]
        s = "".join(j + p for j, p in zip(joins, parts))
        if len(s) > 600:
            s = s[:600]
        corpus.append(s)
    with open(path, "w", encoding="utf-8") as f:
        for s in corpus:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    print(f"wrote {len(corpus)} strings to {path}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes tests/data/perplexity/text.txt, the perplexity test text: the project's own prose (README,
docs/*.md, and the opening comment of every header under runtime/ and stages/), so it can be
committed. Deterministic for a given tree; the committed file is the snapshot the reference JSON
(scripts/make_perplexity_reference.py) was computed on, so regenerate both together.

    python3 scripts/make_perplexity_text.py
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "perplexity" / "text.txt"


def header_prose(path):
    """The leading // comment block of a source file, as plain sentences."""
    lines = []
    for line in path.read_text().splitlines():
        s = line.strip()
        if not s.startswith("//"):
            break
        lines.append(s[2:].strip())
    return " ".join(l for l in lines if l)


def main():
    parts = [(ROOT / "README.md").read_text()]
    parts += [p.read_text() for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "perplexity.md"]
    for folder in ("runtime", "stages"):
        for p in sorted((ROOT / folder).rglob("*.h")):
            prose = header_prose(p)
            if prose:
                parts.append(f"{p.relative_to(ROOT)}: {prose}\n")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(parts))
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

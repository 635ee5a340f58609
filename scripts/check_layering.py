#!/usr/bin/env python3
"""Fails on an include that points up or sideways in the layer table of docs/architecture.md.

The table (the rows between the markers `<!-- layers -->` and `<!-- /layers -->`) has the columns
layer | folder | may include; "may include" lists other layers by name, and a layer may always
include its own folder. A file belongs to the row whose folder is the longest prefix of its path
(runtime/core/ before runtime/). Every `#include "..."` of a project path is checked; system and
library headers (<...>) are not. Usage: check_layering.py [ROOT] (default: the repository root).
Prints one line per violation (file:line: include, the two layers, what the layer may include) and
exits 1 if there is any.
"""
import os
import re
import sys

SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_table(doc_path):
    rows, inside = [], False
    with open(doc_path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if "<!-- layers -->" in line:
                inside = True
                continue
            if "<!-- /layers -->" in line:
                break
            if not inside or not line.strip().startswith("|"):
                continue
            cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            if len(cells) < 3 or cells[0] in ("layer", "") or set(cells[0]) <= set("-: "):
                continue
            allowed = {a.strip().strip("`") for a in cells[2].split(",") if a.strip() not in ("", "-", "—")}
            rows.append((cells[0], cells[1].rstrip("/") + "/", allowed, n))
    if not rows:
        sys.exit(f"{doc_path}: no layer table between <!-- layers --> and <!-- /layers -->")
    names = {r[0] for r in rows}
    for name, _, allowed, n in rows:
        unknown = allowed - names
        if unknown:
            sys.exit(f"{doc_path}:{n}: layer '{name}' may include unknown layer(s) {sorted(unknown)}")
    return rows


def layer_of(path, rows):
    best = None
    for row in rows:
        if path.startswith(row[1]) and (best is None or len(row[1]) > len(best[1])):
            best = row
    return best


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    rows = read_table(os.path.join(root, "docs", "architecture.md"))
    violations, checked = [], 0
    for row in rows:
        top = os.path.join(root, row[1])
        for dirpath, _, files in os.walk(top):
            for fn in sorted(files):
                if not fn.endswith(SOURCE_EXT):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, fn), root)
                own = layer_of(rel, rows)
                if own is not row:
                    continue  # a deeper row owns it
                checked += 1
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = layer_of(m.group(1), rows)
                        if target is None:
                            if os.path.exists(os.path.join(root, m.group(1))):
                                violations.append(f"{rel}:{n}: #include \"{m.group(1)}\": "
                                                  "the included file is in no layer of the table")
                            continue
                        if target is own or target[0] in own[2]:
                            continue
                        may = ", ".join(sorted(own[2])) or "nothing else"
                        violations.append(f"{rel}:{n}: #include \"{m.group(1)}\": layer '{own[0]}' "
                                          f"includes layer '{target[0]}' (may include: {may})")
    for v in violations:
        print(v)
    print(f"check_layering: {checked} files, {len(violations)} include(s) against the table of "
          "docs/architecture.md")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())

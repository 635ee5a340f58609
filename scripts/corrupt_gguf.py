#!/usr/bin/env python3
"""Writes a copy of a GGUF file with BYTES bytes of its tensor data inverted (each byte XOR 0xff),
starting in the middle of the tensor data area: a model damaged the way a bad copy or a bad disk
damages it, for the test of `conveyor doctor --model` (tests/launch/doctor_model.sh). Prints the
tensor the damage starts in.

    python3 scripts/corrupt_gguf.py IN.gguf OUT.gguf [--bytes 65536]
"""

import argparse
import shutil
import sys

from gguf import GGUFReader


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--bytes", type=int, default=64 * 1024)
    args = ap.parse_args()
    reader = GGUFReader(args.src)
    begin = min(int(t.data_offset) for t in reader.tensors)
    end = max(int(t.data_offset) + int(t.n_bytes) for t in reader.tensors)
    start = begin + (end - begin) // 2
    hit = next(t for t in reader.tensors if t.data_offset <= start < t.data_offset + t.n_bytes)
    del reader
    shutil.copyfile(args.src, args.dst)
    with open(args.dst, "r+b") as f:
        f.seek(start)
        data = bytearray(f.read(args.bytes))
        for i in range(len(data)):
            data[i] ^= 0xFF
        f.seek(start)
        f.write(data)
    print(f"inverted {args.bytes} bytes at offset {start} (tensor {hit.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Run here (not on the GPU machine), from the project root: the SmolLM2 GGUF (98 MB, over the device's
# 64 MiB transfer, which the tracked tree, ~21 MB, shares) as zstd in three pieces, .smolA (with .gpu-deps:
# 29 MB), .smolB (40 MB), .smolC (the rest, plus the tokenizer files the tests read), each kept out of git via .git/info/exclude. The device
# calls then run, one right after the other while the machine stays warm (30 s):
#   callA.sh (carry .gpu-deps .smolA), `cp .smolB/p /tmp/smolB` (carry .smolB), callC.sh (carry .smolC .whl)
# .whl holds the zstandard wheel (the GPU machine has no zstd): see the device README's wheel recipe.
set -euo pipefail
gguf=$(bash scripts/fetch_test_model.sh)
cache=$(dirname "$gguf")
for d in .smolA .smolB .smolC; do
  grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude
  mkdir -p $d
done
zstd -q -19 -T0 -c "$gguf" > /tmp/smol.zst
head -c 29000000 /tmp/smol.zst > .smolA/p
dd if=/tmp/smol.zst of=.smolB/p bs=1M iflag=skip_bytes,count_bytes skip=29000000 count=40000000 status=none
tail -c +69000001 /tmp/smol.zst > .smolC/p
cp "$cache"/smollm2_tokenizer.json "$cache"/smollm2_gguf_tokenizer.json .smolC/
ls -l .smolA/p .smolB/p .smolC/p

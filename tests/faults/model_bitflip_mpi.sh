#!/usr/bin/env bash
# 64 KiB of flipped bytes in the GGUF's tensor data (size unchanged). (a) After a first run recorded
# the model's digest in the manifest, the resume is refused after the load, naming the file and both
# digests, and the output is left as it was. (b) With a SHA256SUMS of the published file beside it,
# the first run is refused naming the file, the expected and the actual SHA-256, and writes nothing.
source "$(dirname "${BASH_SOURCE[0]}")/model_common.bash"
model="$tmp/m/model.gguf"
size=$(stat -c %s "$model")
job "$tmp/a.jsonl" "$model" || fail "first run exited $?"
grep -q '"xxh3-128/16MiB"' "$tmp/a.jsonl.manifest.json" || fail "the manifest records no digest of the model file"
check_once_like "$tmp/a.jsonl" "$tmp/ref.jsonl"
flip_bytes "$model" $((size / 2)) 65536
snap "$tmp/a.jsonl"
job "$tmp/a.jsonl" "$model" && fail "the resume on the bit-flipped model exited 0"
grep -q "the model file '$model' differs from the earlier run's .*same size ($size bytes) but other content" \
  "$tmp/a.jsonl.err" || fail "the refusal does not name the changed file"
same "$tmp/a.jsonl"

(cd "$tmp/m" && sha256sum "$gguf" | sed "s#  .*#  model.gguf#" > SHA256SUMS)
want=$(cut -c1-64 "$tmp/m/SHA256SUMS") actual=$(sha256sum "$model" | cut -c1-64)
job "$tmp/b.jsonl" "$model" && fail "the first run on the bit-flipped model with a SHA256SUMS exited 0"
grep -q "weight file '$model' is corrupt or not the published file: its SHA-256 is $actual but $tmp/m/SHA256SUMS says $want" \
  "$tmp/b.jsonl.err" || fail "the refusal does not name the file and both digests"
[[ ! -s "$tmp/b.jsonl" ]] || fail "the refused first run wrote results"
echo ok

#!/usr/bin/env bash
# Published checksums are verified. SHA256SUMS beside the model: the right digest runs, a wrong one
# is refused naming the file, the expected and the actual digest. A Hugging Face cache
# (snapshots/<rev>/model.gguf -> ../../blobs/<sha256>): an intact blob runs, a blob with 64 KiB
# flipped is refused against its name. A refused run writes no result.
source "$(dirname "${BASH_SOURCE[0]}")/model_common.bash"
model="$tmp/m/model.gguf"
sum=$(sha256sum "$model" | cut -c1-64)
echo "$sum *model.gguf" > "$tmp/m/SHA256SUMS"
job "$tmp/a.jsonl" "$model" || fail "the run with a matching SHA256SUMS exited $?"
check_once_like "$tmp/a.jsonl" "$tmp/ref.jsonl"
wrong=$(echo "$sum" | tr 0-9a-f 1-9a-f0)
echo "$wrong  model.gguf" > "$tmp/m/SHA256SUMS"
job "$tmp/b.jsonl" "$model" && fail "the run with a wrong SHA256SUMS entry exited 0"
grep -q "weight file '$model' is corrupt or not the published file: its SHA-256 is $sum but $tmp/m/SHA256SUMS says $wrong" \
  "$tmp/b.jsonl.err" || fail "the SHA256SUMS refusal does not name the file and both digests"
[[ ! -s "$tmp/b.jsonl" ]] || fail "the refused run wrote results"

hub="$tmp/hub/models--HuggingFaceTB--SmolLM2-135M-Instruct-GGUF"
mkdir -p "$hub/blobs" "$hub/snapshots/0123abc"
mv "$model" "$hub/blobs/$sum"
ln -s "../../blobs/$sum" "$hub/snapshots/0123abc/model.gguf"
snapfile="$hub/snapshots/0123abc/model.gguf"
job "$tmp/c.jsonl" "$snapfile" || fail "the run from an intact Hugging Face cache exited $?"
check_once_like "$tmp/c.jsonl" "$tmp/ref.jsonl"
flip_bytes "$hub/blobs/$sum" 50000000 65536
actual=$(sha256sum "$hub/blobs/$sum" | cut -c1-64)
job "$tmp/d.jsonl" "$snapfile" && fail "the run from a corrupted Hugging Face blob exited 0"
grep -q "weight file '$snapfile' is corrupt or not the published file: its SHA-256 is $actual but the name of its Hugging Face cache blob says $sum" \
  "$tmp/d.jsonl.err" || fail "the Hugging Face cache refusal does not name the file and both digests"
[[ ! -s "$tmp/d.jsonl" ]] || fail "the refused run wrote results"
echo ok

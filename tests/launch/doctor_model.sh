#!/usr/bin/env bash
# conveyor doctor --model: the real SmolLM2 GGUF passes the built-in perplexity check, and a copy
# with 64 KiB of its tensor data inverted (made here by scripts/corrupt_gguf.py, never committed)
# is flagged with a non-zero exit status.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
dir="$(mktemp -d "${CONVEYOR_BINARY_DIR:-/tmp}/doctor_model.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
doctor() { "$bin" doctor --model "$1" --skip-device --bytes 1M --iters 2 --set runtime.backend=cpu > "$dir/out" 2>&1; }
doctor "$gguf" || { echo "FAIL: the real model was flagged (exit $?)"; cat "$dir/out"; exit 1; }
grep -q '^model check: PPL = [0-9.]* .*: ok$' "$dir/out" || { echo "FAIL: no passing model check line"; cat "$dir/out"; exit 1; }
grep '^model check' "$dir/out"
python3 "$here/../../scripts/corrupt_gguf.py" "$gguf" "$dir/bad.gguf" || { echo "FAIL: could not corrupt a copy"; exit 1; }
doctor "$dir/bad.gguf"
status=$?
[[ $status -ne 0 ]] || { echo "FAIL: the corrupt model passed"; cat "$dir/out"; exit 1; }
grep -q 'model check: .*FAILED' "$dir/out" || { echo "FAIL: exit $status without a FAILED verdict"; cat "$dir/out"; exit 1; }
grep 'model check' "$dir/out"
echo "PASS: real model ok, corrupt copy flagged (exit $status)"

#!/usr/bin/env bash
# A truncated GGUF (the last MiB cut, as by an interrupted download) is refused at open, before any
# weight is read, naming the file, its size and the size its header describes; the output an
# earlier run wrote with the whole file is left as it was.
source "$(dirname "${BASH_SOURCE[0]}")/model_common.bash"
model="$tmp/m/model.gguf"
job "$tmp/a.jsonl" "$model" || fail "first run exited $?"
size=$(stat -c %s "$model")
truncate -s $((size - 1048576)) "$model"
snap "$tmp/a.jsonl"
job "$tmp/a.jsonl" "$model" && fail "the run on a truncated model exited 0"
grep -q "GGUF file '$model' is $((size - 1048576)) bytes but its header describes $size bytes" "$tmp/a.jsonl.err" \
  || fail "the refusal does not name the file and both sizes"
grep -q "truncated" "$tmp/a.jsonl.err" || fail "the refusal does not say the file is truncated"
same "$tmp/a.jsonl"
check_once_like "$tmp/a.jsonl" "$tmp/ref.jsonl"
echo ok

#!/usr/bin/env bash
# Another file at the same path between two runs (here: the GGUF with 4 KiB appended, which its
# parser accepts): the resume is refused before the weights load, naming the file and both sizes,
# and the output, error file and manifest are left as they were.
source "$(dirname "${BASH_SOURCE[0]}")/model_common.bash"
model="$tmp/m/model.gguf"
size=$(stat -c %s "$model")
job "$tmp/a.jsonl" "$model" || fail "first run exited $?"
check_once_like "$tmp/a.jsonl" "$tmp/ref.jsonl"
head -c 4096 /dev/urandom >> "$model"
snap "$tmp/a.jsonl"
job "$tmp/a.jsonl" "$model" && fail "the resume on a changed model exited 0"
grep -q "the model file '$model' differs from the earlier run's '$model': its size is $((size + 4096)) bytes, earlier $size bytes" \
  "$tmp/a.jsonl.err" || fail "the refusal does not name the file and both sizes"
same "$tmp/a.jsonl"
echo ok

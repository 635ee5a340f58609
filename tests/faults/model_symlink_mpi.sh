#!/usr/bin/env bash
# The same model file by other paths resumes: a first run by absolute path, its last three results
# removed (as if it had stopped there), then a resume through a symlink and one by relative path. The
# model is identified by its files' sizes and digests, not the path string. Every custom_id once,
# with the text of an uninterrupted run.
source "$(dirname "${BASH_SOURCE[0]}")/model_common.bash"
model="$tmp/m/model.gguf"
job "$tmp/a.jsonl" "$model" || fail "first run exited $?"
head -n 3 "$tmp/a.jsonl" > "$tmp/a.head" && mv "$tmp/a.head" "$tmp/a.jsonl"
ln -s "$model" "$tmp/link.gguf"
job "$tmp/a.jsonl" "$tmp/link.gguf" || fail "the resume through a symlink exited $?"
grep -q "3 results, 0 errors" "$tmp/a.jsonl.err" || fail "the symlink resume did not do the 3 missing requests"
check_once_like "$tmp/a.jsonl" "$tmp/ref.jsonl"
head -n 4 "$tmp/a.jsonl" > "$tmp/a.head" && mv "$tmp/a.head" "$tmp/a.jsonl"
(cd "$tmp" && job "$tmp/a.jsonl" m/model.gguf) || fail "the resume by relative path exited $?"
grep -q "2 results, 0 errors" "$tmp/a.jsonl.err" || fail "the relative-path resume did not do the 2 missing requests"
check_once_like "$tmp/a.jsonl" "$tmp/ref.jsonl"
echo ok

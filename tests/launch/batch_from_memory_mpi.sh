#!/usr/bin/env bash
# Batch size from memory (issue 16, 4) end to end on the CPU backend with the 5-layer golden: without
# --max-num-seqs the start-up line and the bench JSON show the batch the KV room holds (the CPU cap 256
# when it is large, fewer on a small pool, which then needs no preemption), --max-num-seqs wins and is
# named as the user's, `conveyor generate` without a workload takes the fallback length and with a batch
# file the file's length (prompts + max_tokens), a 2-stage
# pipeline agrees one budget (one line, on rank 0), and `conveyor plan` says the batch it costs.
source "$(dirname "${BASH_SOURCE[0]}")/golden.bash"

# bench <name> <launcher ("" or mpirun ...)> <flags...>: a small throughput run (16 in / 8 out: 24 tokens,
# two blocks of 16 each) into $tmp/<name>.json, its stderr in $tmp/<name>.err.
bench() {
  local name=$1 launcher=$2; shift 2
  if ! timeout 300 $launcher "$bin" bench throughput --model "$model" --input-len 16 --output-len 8 --num-prompts 12 \
      --seed 5 --output-json "$tmp/$name.json" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
    echo "FAIL: bench $name exited non-zero:"; cat "$tmp/$name.err"; fail=1
  fi
}
# line <name> <wanted text>: the start-up line is there exactly once and holds the text.
line() {
  local n got
  n=$(grep -c "batch from memory: \|batch as configured: " "$tmp/$1.err")
  got=$(grep -h "batch from memory: \|batch as configured: " "$tmp/$1.err")
  [[ $n == 1 ]] || { echo "FAIL: $1: wanted one batch line, got $n:"; cat "$tmp/$1.err"; fail=1; }
  [[ "$got" == *"$2"* ]] || { echo "FAIL: $1: wanted '$2' in '$got'"; fail=1; }
  echo "$1: ${got#*info: }"
}
# json <name> <max_num_seqs> <max_num_batched_tokens> <from memory: True/False> <preemptions: N or any>
json() {
  python3 - "$tmp/$1.json" "$2" "$3" "$4" "$5" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
w, kv = d["workload"], d["kv_cache"]
assert w["max_num_seqs"] == int(sys.argv[2]), (sys.argv[1], w)
assert w["max_num_batched_tokens"] == int(sys.argv[3]), (sys.argv[1], w)
assert str(w["batch_from_memory"]) == sys.argv[4], (sys.argv[1], w)
assert d["num_requests"] == 12, d["num_requests"]
if sys.argv[5] != "any":
    assert kv["preemptions"] == int(sys.argv[5]), (sys.argv[1], kv)
PY
}

# A large pool (cache.cpu_kv_cache_space 4 GiB): the CPU cap.
bench auto ""
line auto "batch from memory: max_num_seqs 256, max_num_batched_tokens 8192 (KV holds "
line auto "sequences of 24; set --max-num-seqs / --max-num-batched-tokens to override)"
json auto 256 8192 True any

# 20 blocks of 16 = 320 tokens hold 10 sequences of 24 tokens in whole blocks: batch 10, no preemption.
bench small "" --num-gpu-blocks-override 20
line small "batch from memory: max_num_seqs 10, max_num_batched_tokens 8192 (KV holds 320 tokens = 10 sequences of 24"
json small 10 8192 True 0

# The user's value wins, even on the small pool, and is named as theirs.
bench user "" --num-gpu-blocks-override 20 --max-num-seqs 3
line user "batch from memory: max_num_seqs 3 (your value), max_num_batched_tokens 8192 (KV holds 320 tokens"
line user "set --max-num-batched-tokens to override)"
json user 3 8192 False any
bench both "" --num-gpu-blocks-override 20 --max-num-seqs 3 --max-num-batched-tokens 64
line both "batch as configured: max_num_seqs 3 (your value), max_num_batched_tokens 64 (your value)"
json both 3 64 False any

# Two pipeline stages of 2 and 3 layers on a 192 KiB pool each (a block of 16 tokens takes 4 KiB per
# layer at fp32): 24 and 16 blocks. The ranks agree on 16 blocks and the batch they hold, 8 (rank 0, the
# 2-layer stage, would take 12 alone), said once; the leader schedules 8, so nothing is preempted.
bench pp2 "$mpi -np 2" -pp 2 --set parallel.partition=2,3 --set cache.cpu_kv_cache_space=0.00018310546875
line pp2 "batch from memory: max_num_seqs 8, max_num_batched_tokens 8192 (KV holds 256 tokens = 8 sequences of 24"
json pp2 8 8192 True 0

# generate knows no workload length: the fallback, min(context, 2048) = the golden's 512 positions.
if timeout 120 "$bin" generate --model "$model" --prompt-ids 1,2,3 --max-tokens 4 --ignore-eos --temperature 0 \
    --num-gpu-blocks-override 96 >"$tmp/gen.out" 2>"$tmp/gen.err"; then
  line gen "batch from memory: max_num_seqs 3, max_num_batched_tokens 8192 (KV holds 1,536 tokens = 3 sequences of 512"
else
  echo "FAIL: generate exited non-zero:"; cat "$tmp/gen.err"; fail=1
fi

# generate --input: the batch file says its length (prompt ids + max_tokens: 5 + 11 = 16 for the first two,
# 7 + 9 for the third; the mean), and both ranks of the pipeline choose for it.
printf '%s\n' \
  '{"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"prompt": [1, 2, 3, 4, 5], "max_tokens": 11, "temperature": 0}}' \
  '{"custom_id": "b", "method": "POST", "url": "/v1/completions", "body": {"prompt": [6, 7, 8, 9, 10], "max_tokens": 11, "temperature": 0}}' \
  '{"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": [1, 2, 3, 4, 5, 6, 7], "max_tokens": 9, "temperature": 0}}' \
  >"$tmp/batch.jsonl"
if timeout 120 $mpi -np 2 "$bin" generate --model "$model" -pp 2 --input "$tmp/batch.jsonl" --output "$tmp/batch.out.jsonl" \
    --num-gpu-blocks-override 96 >"$tmp/genin.out" 2>"$tmp/genin.err"; then
  line genin "batch from memory: max_num_seqs 96, max_num_batched_tokens 8192 (KV holds 1,536 tokens = 96 sequences of 16"
  [[ $(wc -l <"$tmp/batch.out.jsonl") == 3 ]] || { echo "FAIL: genin: wanted 3 results"; cat "$tmp/batch.out.jsonl"; fail=1; }
else
  echo "FAIL: generate --input exited non-zero:"; cat "$tmp/genin.err"; fail=1
fi

# conveyor plan: the batch it costs is the one it says it chose (and the layout line carries it).
out=$("$bin" plan --set model.config="$configs/llama-3-8b.yaml" --device-memory 24G 2>&1)
seqs=$(sed -nE 's/^batch from memory: max_num_seqs ([0-9]+), .*/\1/p' <<<"$out")
[[ -n "$seqs" && "$out" == *"1 micro-batches of $seqs sequences"* ]] || { echo "FAIL: plan batch '$seqs':"; echo "$out"; fail=1; }
out=$("$bin" plan --set model.config="$configs/llama-3-8b.yaml" --device-memory 24G --batch 7 2>&1)
[[ "$out" == *"1 micro-batches of 7 sequences"* && "$out" == *"max_num_seqs 7 (your value)"* ]] || {
  echo "FAIL: plan --batch 7:"; echo "$out"; fail=1; }
echo "plan: 24 GiB holds $seqs sequences of 2048 for Llama-3-8B"

[ $fail = 0 ] && echo PASS
exit $fail

#!/usr/bin/env bash
# `conveyor plan` refuses the layouts `conveyor generate` refuses, with the same message (one check,
# check_layout): tp must split SmolLM2's 9 heads and 3 KV heads, pp <= its 30 layers, a partition must
# sum to the layers. Both exit 1 before any rank work.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
fail=0
check() {
  local want=$1; shift
  local plan gen
  plan=$(timeout 120 "$bin" plan --model "$gguf" "$@" 2>&1 >/dev/null); local prc=$?
  gen=$(timeout 120 "$bin" generate --model "$gguf" --prompt-ids 1,2 --max-tokens 1 "$@" 2>&1 >/dev/null); local grc=$?
  if [[ $prc != 1 || $grc != 1 ]]; then echo "FAIL: $*: plan exited $prc, generate $grc"; echo "$plan"; echo "$gen"; fail=1; fi
  if [[ "$plan" != *"$want"* ]]; then echo "FAIL: $*: plan said '$plan', wanted '$want'"; fail=1; fi
  if [[ "$plan" != "$gen" ]]; then echo "FAIL: $*: plan and generate differ:"; echo " plan: $plan"; echo " generate: $gen"; fail=1; fi
  echo "$*: $plan"
}
check "tensor-parallel size 2 does not divide the 9 attention heads" -tp 2
check "tensor-parallel size 4 does not divide the 9 attention heads" -tp 4 -pp 2
check "fewer than the 31 pipeline stages" -pp 31
check "parallel.partition sums to 20 layers but the model has 30" -pp 2 --partition 10,10
exit $fail

#!/usr/bin/env bash
# NaN and Inf in a tensor (three values of blk.20.attn_norm.weight, an F32 tensor the second stage
# loads): the load is refused by that rank naming the tensor and the count, and the output an
# earlier run wrote is left as it was. model.check_finite=false skips the scan at load.
source "$(dirname "${BASH_SOURCE[0]}")/model_common.bash"
model="$tmp/m/model.gguf"
job "$tmp/a.jsonl" "$model" || fail "first run exited $?"
python3 - "$model" <<'PY' || fail "could not plant NaN in the model"
import struct, sys
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
t = next(t for t in r.tensors if t.name == "blk.20.attn_norm.weight")
assert t.tensor_type.name == "F32", t.tensor_type
with open(sys.argv[1], "r+b") as f:
    f.seek(t.data_offset + 4 * 7)
    f.write(struct.pack("<fff", float("nan"), float("inf"), float("-inf")))
PY
snap "$tmp/a.jsonl"
job "$tmp/b.jsonl" "$model" && fail "the run on a model holding NaN exited 0"
grep -q "tensor 'blk.20.attn_norm.weight' in '$model' has 3 non-finite value(s) (NaN or Inf)" "$tmp/b.jsonl.err" \
  || fail "the refusal does not name the tensor and the count"
[[ ! -s "$tmp/b.jsonl" ]] || fail "the refused run wrote results"
same "$tmp/a.jsonl"
# With the scan off the load passes; the NaN then reaches the logits, where the sampler stops the run.
job "$tmp/c.jsonl" "$model" --set model.check_finite=false
! grep -q "non-finite value(s)" "$tmp/c.jsonl.err" || fail "model.check_finite=false still scanned the tensors"
echo ok

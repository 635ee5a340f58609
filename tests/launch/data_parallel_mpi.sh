#!/usr/bin/env bash
# Data-parallel replicas: a batch job over -dp 2 (2 ranks) and -dp 2 -pp 2 (4 ranks) splits the requests
# between the replicas (each finishes some) and writes the same greedy tokens as one rank, once each.
source "$(dirname "${BASH_SOURCE[0]}")/golden.bash"
python3 - > "$tmp/in.jsonl" <<'PY'
import json
for i in range(24):
    body = {"prompt": [1 + (i * 13 + t) % 250 for t in range(1 + i % 9)], "max_tokens": 2 + i % 11, "temperature": 0}
    print(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}))
PY
timeout 120 "$bin" generate --model "$model" --input "$tmp/in.jsonl" --output "$tmp/one.jsonl" 2> "$tmp/one.log" \
  || { echo "FAIL: one rank"; cat "$tmp/one.log"; exit 1; }
for layout in "2:-dp 2" "4:-dp 2 -pp 2"; do
  np=${layout%%:*}
  flags=${layout#*:}
  out="$tmp/dp$np.jsonl"
  # shellcheck disable=SC2086
  timeout 120 mpirun --oversubscribe -np $np "$bin" generate --model "$model" --input "$tmp/in.jsonl" --output "$out" \
    $flags 2> "$out.log" || { echo "FAIL: $flags exited $?"; cat "$out.log"; exit 1; }
  line=$(grep "requests finished per replica" "$out.log")
  echo "$flags: $line"
  read -r -a counts <<< "${line##*replica:}"
  [ ${#counts[@]} = 2 ] && [ "${counts[0]}" -gt 0 ] && [ "${counts[1]}" -gt 0 ] \
    || { echo "FAIL: both replicas should finish requests"; exit 1; }
  python3 - "$tmp/one.jsonl" "$out" <<'PY' || exit 1
import json, sys
def ids(path):
    d = {}
    for line in open(path):
        o = json.loads(line)
        assert o["custom_id"] not in d, "written twice: " + o["custom_id"]
        d[o["custom_id"]] = o["response"]["body"]["choices"][0]["token_ids"]
    return d
one, dp = ids(sys.argv[1]), ids(sys.argv[2])
assert len(one) == 24 and one == dp, [k for k in one if one[k] != dp.get(k)]
PY
done
echo ok

# Sourced by the tests/faults/model_*_mpi.sh cases (not a test itself): a private copy of the SmolLM2
# GGUF in $tmp to damage, a 6-request input, a 2-rank pipeline job (`job OUT MODEL [flags]`, its
# stderr in OUT.err), a check that every custom_id is written once with the text of an undamaged
# run, and byte flips in the tensor data. Fails (never skips) when the model is missing.
set -u
bin=$1
gguf="${CONVEYOR_TEST_MODEL:-${CONVEYOR_CACHE:-$HOME/.cache/conveyor}/SmolLM2-135M-Instruct.Q4_1.gguf}"
[[ -s "$gguf" ]] || { echo "FAIL: test model '$gguf' is missing: run scripts/fetch_test_model.sh"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/m"
cp "$gguf" "$tmp/m/model.gguf"
for i in 1 2 3 4 5 6; do
  echo "{\"custom_id\": \"r$i\", \"method\": \"POST\", \"url\": \"/v1/completions\", \"body\": {\"prompt\": \"Name $i colours:\", \"max_tokens\": 8, \"temperature\": 0}}"
done > "$tmp/in.jsonl"

fail() { echo "FAIL: $*"; for f in "$tmp"/*.err; do [[ -f $f ]] && { echo "--- $f"; tail -n 15 "$f"; }; done; exit 1; }

job() {  # job OUT MODEL [extra flags...]: exit status in $?
  local out=$1 model=$2
  shift 2
  timeout 300 mpirun --oversubscribe -np 2 "$bin" generate --model "$model" -pp 2 --input "$tmp/in.jsonl" \
    --output "$out" --num-gpu-blocks-override 64 "$@" 2>"$out.err"
}

# Every custom_id of the input once in OUT, each with the text REFERENCE has for it.
check_once_like() {
  python3 - "$1" "$2" <<'PY' || fail "$1 does not hold every custom_id once with the undamaged run's text"
import collections, json, sys
def texts(p):
    rows = [json.loads(l) for l in open(p)]
    ids = collections.Counter(r["custom_id"] for r in rows)
    assert all(n == 1 for n in ids.values()), f"{p}: ids written twice: {[i for i, n in ids.items() if n > 1]}"
    return {r["custom_id"]: r["response"]["body"]["choices"][0]["text"] for r in rows}
got, want = texts(sys.argv[1]), texts(sys.argv[2])
assert sorted(got) == [f"r{i}" for i in range(1, 7)], sorted(got)
bad = [i for i in got if got[i] != want[i]]
assert not bad, f"texts differ from the undamaged run for {bad}"
PY
}

# flip_bytes FILE OFFSET COUNT: inverts COUNT bytes at OFFSET (size unchanged).
flip_bytes() {
  python3 - "$@" <<'PY'
import sys
path, off, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "r+b") as f:
    f.seek(off)
    b = f.read(n)
    f.seek(off)
    f.write(bytes(x ^ 0xFF for x in b))
PY
}

# Unchanged since the snapshot: `snap OUT` then `same OUT` (output, error file and manifest bytes).
snap() { for f in "$1" "$1.errors.jsonl" "$1.manifest.json"; do [[ -f $f ]] && cp "$f" "$f.snap"; done; return 0; }
same() {
  for f in "$1" "$1.errors.jsonl" "$1.manifest.json"; do
    [[ ! -f $f.snap ]] || cmp -s "$f" "$f.snap" || fail "'$f' was changed by the refused run"
  done
}

# The reference: an undamaged run on the pristine model, written once per script.
job "$tmp/ref.jsonl" "$gguf" || fail "the reference run exited $?"

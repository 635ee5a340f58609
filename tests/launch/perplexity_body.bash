# Sourced by perplexity.sh and perplexity_mpi.sh (with `launch` and `layout` set): 2 chunks of 512
# tokens of tests/data/perplexity/text.txt must give transformers' running PPL
# (reference.json, scripts/make_perplexity_reference.py) within 0.05% (fp32 on both sides agrees to
# ~1e-6; the acceptance bound is 0.5%). Then the run is saved as a KL-divergence base, and a run
# compared against it gives KLD ~0 and the same top token everywhere.
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
dir="$(mktemp -d "${CONVEYOR_BINARY_DIR:-/tmp}/perplexity.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
run() {
  "${launch[@]}" "$bin" perplexity --model "$gguf" --file "$data/perplexity/text.txt" --ctx-size 512 --chunks 2 \
    --set runtime.backend=cpu "${layout[@]}" "$@" > "$dir/stdout" 2> "$dir/stderr" ||
    { echo "FAIL: perplexity $* exited $?"; cat "$dir/stdout" "$dir/stderr"; exit 1; }
}
run --kl-divergence-base "$dir/base.bin" --output-json "$dir/base.json"
grep -q '^\[1\][0-9.]*,\[2\][0-9.]*$' "$dir/stdout" || { echo "FAIL: no running PPL line"; cat "$dir/stdout"; exit 1; }
grep -q '^Final estimate: PPL = [0-9.]* +/- [0-9.]*$' "$dir/stdout" || { echo "FAIL: no final estimate"; cat "$dir/stdout"; exit 1; }
run --kl-divergence-base "$dir/base.bin" --kl-divergence --output-json "$dir/kld.json"
python3 - "$data/perplexity/reference.json" "$dir/base.json" "$dir/kld.json" <<'PY'
import json, sys
ref, base, kld = (json.load(open(p)) for p in sys.argv[1:])
assert base["n_tokens"] == ref["n_tokens"] and base["adds_bos"] == ref["adds_bos"], (base, ref["n_tokens"])
assert base["n_chunks"] == 2 and base["scored_tokens"] == 2 * ref["scored_per_chunk"], base
for i, (mine, want) in enumerate(zip(base["running_ppl"], ref["running_ppl"][:2]), start=1):
    assert abs(mine / want - 1) <= 5e-4, f"chunk {i}: running PPL {mine} vs transformers {want}"
k = kld["kld"]
assert abs(k["mean"]) < 1e-3 and k["same_top_share"] == 1.0 and k["positions"] == 510, k
assert kld["running_ppl"] == base["running_ppl"], (kld["running_ppl"], base["running_ppl"])
print(f"PASS: running PPL {base['running_ppl']} vs transformers {ref['running_ppl'][:2]}; self KLD {k['mean']:.2e}, "
      f"same top {k['same_top_share']:.0%}")
PY

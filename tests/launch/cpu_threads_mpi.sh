#!/usr/bin/env bash
# CPU threads per rank: each rank takes the CPUs the launcher gave it (2 ranks on one host share its
# CPUs instead of each spawning one thread per CPU), --set runtime.cpu_threads=N overrides, and the
# start-up line says the count. The greedy ids are the same whatever the thread count.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
cpus=$(nproc)
mpi=(timeout 300 mpirun --quiet --oversubscribe -np 2 -x OMPI_MCA_btl_vader_single_copy_mechanism=none)
gen=(generate --model "$gguf" --prompt-ids 1,2,3,4 --max-tokens 6 --ignore-eos --temperature 0 --print-ids
     --num-gpu-blocks-override 16)
# threads <name> <command...>: stdout's last line (the ids) in $tmp/<name>.ids, the count of the
# start-up line in $count.
count=""
threads() {
  local name=$1; shift
  env -u OMP_NUM_THREADS "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || { echo "FAIL: $name exited $?"; cat "$tmp/$name.err"; fail=1; }
  tail -n 1 "$tmp/$name.out" > "$tmp/$name.ids"
  local line
  line=$(grep -m1 "CPU thread(s) per rank" "$tmp/$name.err")
  echo "$name: $line"
  count=$(sed -E 's/.* ([0-9]+) CPU thread\(s\) per rank.*/\1/' <<<"$line")
}
threads one "$bin" "${gen[@]}"; one=$count
threads two "${mpi[@]}" "$bin" "${gen[@]}" -pp 2; two=$count
threads set "${mpi[@]}" "$bin" "${gen[@]}" -pp 2 --set runtime.cpu_threads=3; set1=$count
want_two=$(( cpus / 2 > 0 ? cpus / 2 : 1 ))
[[ "$one" == "$cpus" ]] || { echo "FAIL: one rank on $cpus CPUs runs '$one' threads"; fail=1; }
# Bound by mpirun (one core each) or sharing the host: never more than the host's CPUs over 2 ranks.
[[ "$two" =~ ^[0-9]+$ && "$two" -ge 1 && "$two" -le "$want_two" ]] || {
  echo "FAIL: each of 2 ranks on $cpus CPUs runs '$two' threads (want 1..$want_two)"; cat "$tmp/two.err"; fail=1; }
[[ "$set1" == 3 ]] && grep -q "(--set runtime.cpu_threads)" "$tmp/set.err" || {
  echo "FAIL: --set runtime.cpu_threads=3 gave '$set1'"; cat "$tmp/set.err"; fail=1; }
for name in two set; do
  cmp -s "$tmp/one.ids" "$tmp/$name.ids" || { echo "FAIL: ids of $name differ: $(cat "$tmp/$name.ids") vs $(cat "$tmp/one.ids")"; fail=1; }
done
echo "threads per rank: 1 rank $one, 2 ranks $two, --set 3 -> $set1; ids $(cat "$tmp/one.ids")"
exit $fail

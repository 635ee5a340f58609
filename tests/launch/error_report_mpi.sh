#!/usr/bin/env bash
# An error that ends a 2-rank job is one line naming the cause, the rank and the host, once per job:
# not the C++ check expression, not once per rank, not Open MPI's MPI_ABORT banner (our scripts run
# mpirun --quiet). Cases: every rank fails alike before MPI (a bad flag) and after it (a layout that
# does not match the job), rank 0 fails alone (a missing --input); --debug adds file:line.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
mpi=(timeout 120 mpirun --quiet --oversubscribe -np 2 -x OMPI_MCA_btl_vader_single_copy_mechanism=none)
# once <needle> <args...>: the job fails, stderr holds exactly one error line, with needle, rank and host.
once() {
  local want=$1; shift
  local err rc
  err=$("${mpi[@]}" "$bin" generate --model "$gguf" "$@" 2>&1 >/dev/null); rc=$?
  local n
  n=$(grep -c "conveyor: error:" <<<"$err")
  if [[ $rc == 0 || $rc == 124 ]]; then echo "FAIL: '$*' exited $rc"; fail=1; fi
  if [[ $n != 1 ]]; then echo "FAIL: '$*' printed $n error lines:"; echo "$err"; fail=1; fi
  if [[ "$err" != *"$want"* || ! "$err" =~ \[rank\ [01]\ on\ host\ [^]]+\] ]]; then
    echo "FAIL: '$*' did not name '$want', the rank and the host:"; echo "$err"; fail=1; fi
  for bad in "check failed" "MPI_ABORT" "internal error"; do
    if [[ "$err" == *"$bad"* ]]; then echo "FAIL: '$*' printed '$bad':"; echo "$err"; fail=1; fi
  done
  echo "$* -> status $rc: $(grep "conveyor: error:" <<<"$err")"
}
once "config key 'sampling.top_p'" --prompt-ids 1,2 --top-p 7
once "layout does not match the job" --prompt-ids 1,2 -pp 3
once "cannot open the batch input '$tmp/missing.jsonl'" --input "$tmp/missing.jsonl" --output "$tmp/o.jsonl" -pp 2
err=$("$bin" generate --model "$gguf" --prompt-ids 1,2 -tp 2 --debug 2>&1 >/dev/null)
if [[ ! "$err" =~ at\ .*stages/layout_plan.cpp:[0-9]+|at\ .*weights_layout.cpp:[0-9]+ ]]; then
  echo "FAIL: --debug did not add the source line: $err"; fail=1; fi
exit $fail

#!/usr/bin/env bash
# A file-size limit (RLIMIT_FSIZE, what `ulimit -f` sets; like a full disk) reached in the middle of a
# one-rank batch job: an error naming the output and "File too large", exit status 1 (SIGXFSZ is
# ignored, so the write fails with EFBIG instead of killing the job with status 153); the rerun
# without the limit completes the job as an uninterrupted run. The limit is put on the running job
# with prlimit once it generates: set before start-up, it breaks MPI_Init (PMIx writes files), which
# is also why this case runs on one rank.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
out="$tmp/out.jsonl"
start_job "$out"
wait_lines "$out" 2 || { echo "FAIL: no results after 30 s"; cat "$out.log"; kill -9 $pid; exit 1; }
limit=$(( $(stat -c %s "$out") + 600 ))
t0=$(date +%s.%N)
prlimit --pid $pid --fsize=$limit:$limit
reap $pid "$t0"
report "file-size limit of $limit bytes on the running job (prlimit, direct)" $rc "$took" "$(said "$out.log" "error")"
none_left "$out" || exit 1
[[ $rc == 1 ]] || { echo "FAIL: exit status $rc (want 1: an error)"; cat "$out.log"; exit 1; }
grep -q "'$out' failed: File too large" "$out.log" || { echo "FAIL: the error does not name the file"; cat "$out.log"; exit 1; }
resume_and_check "$out" "file-size limit" || exit 1
echo ok

#!/usr/bin/env bash
# A file-size limit (ulimit -f, as a full disk would) in the middle of a one-rank batch job: an error
# naming the output and "File too large" (SIGXFSZ is ignored, so the write fails with EFBIG instead of
# killing the job with 153), exit status 1; the rerun without the limit completes the job as an
# uninterrupted run. One rank: under mpirun, ulimit -f breaks MPI_Init itself.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
out="$tmp/out.jsonl"
t0=$(date +%s.%N)
( ulimit -f 4; exec "$bin" generate "${job_flags[@]}" --output "$out" --set io.fsync_interval=0 ) 2> "$out.log" &
reap $! "$t0"
msg=$(said "$out.log" "error")
report "ulimit -f 4 (4 KiB, direct)" $rc "$took" "$msg"
none_left "$out" || exit 1
[[ $rc == 1 ]] || { echo "FAIL: exit status $rc (want 1: an error)"; cat "$out.log"; exit 1; }
grep -q "'$out' failed: File too large" "$out.log" || { echo "FAIL: the error does not name the file"; cat "$out.log"; exit 1; }
resume_and_check "$out" "file-size limit" || exit 1
echo ok

#!/usr/bin/env bash
# Faults of the output of a one-rank batch job. A torn last line (a kill mid-write) is dropped and the
# rerun completes the job; a rerun with a changed input is refused naming the input; a second job
# on the same output while one runs is refused naming the holder. After each the output holds every
# custom_id once with the text of an uninterrupted run.
set -u
bin=$1
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
ref=$(reference)

out="$tmp/torn.jsonl"
start_job "$out"
wait_lines "$out" 3 || { echo "FAIL: no results after 30 s"; cat "$out.log"; kill -9 $pid; exit 1; }
kill -9 $pid; wait $pid 2>/dev/null
head -c 40 "$ref" | tail -c +1 | tr -d '\n' >> "$out"  # a torn line, as a kill mid-write leaves it
t0=$(date +%s.%N)
"$bin" generate "${job_flags[@]}" --output "$out" 2> "$out.log"
rc=$?
report "torn last line, then rerun (direct)" $rc "$(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$t0")" "$(said "$out.log" "torn|skipped")"
[[ $rc == 0 ]] || { echo "FAIL: resume of a torn output exited $rc"; cat "$out.log"; exit 1; }
check_output "$out" "torn last line" || exit 1

changed="$tmp/changed.jsonl"
sed 's/Story number 3:/Story number three:/' "$input" > "$changed"
cp "$out" "$tmp/before_changed.jsonl"
"$bin" generate "${job_flags[@]/$input/$changed}" --output "$out" 2> "$out.changed.log"
rc=$?
report "changed input between runs (direct)" $rc 0 "$(said "$out.changed.log" "error")"
[[ $rc != 0 ]] || { echo "FAIL: a changed input resumed silently"; exit 1; }
grep -q "input" "$out.changed.log" || { echo "FAIL: the refusal does not name the input"; cat "$out.changed.log"; exit 1; }
cmp -s "$out" "$tmp/before_changed.jsonl" || { echo "FAIL: the refused run changed the output"; exit 1; }
check_output "$out" "changed input refused" || exit 1

out="$tmp/concurrent.jsonl"
start_job "$out"
first=$pid
wait_lines "$out" 1 || { echo "FAIL: no results after 30 s"; cat "$out.log"; kill -9 $pid; exit 1; }
"$bin" generate "${job_flags[@]}" --output "$out" 2> "$out.second.log"
rc=$?
report "a second job on the same output (direct)" $rc 0 "$(said "$out.second.log" "in use|error")"
wait $first || { echo "FAIL: the first job exited $? next to a refused second"; cat "$out.log"; exit 1; }
[[ $rc != 0 ]] && grep -q "is in use by another job: pid $first" "$out.second.log" \
  || { echo "FAIL: the second job was not refused naming pid $first (exit $rc)"; cat "$out.second.log"; exit 1; }
check_output "$out" "a second job on the same output" || exit 1
echo ok

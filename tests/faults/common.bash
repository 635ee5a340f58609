# Sourced by the fault cases (tests/faults/*.sh; not a test itself). On top of tests/launch/common.bash
# (`here`, `data`, `gguf`): a small input, one uninterrupted reference run shared by every case (made
# once per build directory, under a lock), the job command, pids of MPI ranks, timing of a stop, and
# the check that an output holds every custom_id exactly once with the reference's text.
source "$(dirname "${BASH_SOURCE[0]}")/../launch/common.bash"
relay="$here/../../scripts/mpirun_relay.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One thread per rank: the CI host's cores are shared, and OpenMP's spinning threads crawl when
# oversubscribed.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
num_requests=10
input="$tmp/in.jsonl"
python3 - "$num_requests" > "$input" <<'PY'
import json, sys
for i in range(int(sys.argv[1])):
    body = {"prompt": f"Story number {i}: once upon a time", "max_tokens": 4 + (i * 3) % 10, "temperature": 0}
    print(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/completions", "body": body}))
PY
job_flags=(--model "$gguf" --input "$input" --max-num-seqs 4 --num-gpu-blocks-override 256)

# The reference output of an uninterrupted one-rank run of $input, shared by every case of the build.
reference() {
  local dir="${CONVEYOR_BINARY_DIR:-$tmp}/faults_reference"
  local key
  key=$({ cat "$input"; stat -c %s "$gguf"; } | sha256sum | cut -c1-16)
  mkdir -p "$dir"
  (
    flock 9
    if [[ ! -s "$dir/$key.jsonl" ]]; then
      rm -f "$dir/$key.part"*
      "$bin" generate "${job_flags[@]}" --output "$dir/$key.part" 2> "$dir/$key.log" || exit 1
      mv "$dir/$key.part" "$dir/$key.jsonl"
    fi
  ) 9> "$dir/lock" || { echo "FAIL: the reference run failed:"; cat "$dir/$key.log"; exit 1; }
  echo "$dir/$key.jsonl"
}

# Every custom_id of $input exactly once in <output>, each with the reference's text.
check_output() {  # <output> <what happened before>
  python3 - "$(reference)" "$1" "$num_requests" "$2" <<'PY'
import collections, json, sys
ref_path, out_path, n, what = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def texts(path):
    lines = [json.loads(l) for l in open(path)]
    counts = collections.Counter(o["custom_id"] for o in lines)
    twice = [k for k, c in counts.items() if c > 1]
    assert not twice, f"{what}: written more than once: {twice}"
    return {o["custom_id"]: o["response"]["body"]["choices"][0]["text"] for o in lines}
ref, out = texts(ref_path), texts(out_path)
assert len(ref) == n and sorted(out) == sorted(ref), f"{what}: {len(out)} of {n} ids after the resume"
diff = [k for k in ref if ref[k] != out[k]]
assert not diff, f"{what}: texts differ from the uninterrupted run: {diff}"
print(f"{what}: every custom_id once, texts equal the uninterrupted run")
PY
}

# The pid of MPI rank <rank> among the children of mpirun <pid> (or of a relay script's mpirun).
rank_pid() {
  local p q
  for p in $(pgrep -P "$1") $(for q in $(pgrep -P "$1"); do pgrep -P "$q"; done); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo $p; return; fi
  done
}

# Until <pid> catches SIGTERM (its stop handlers are in place), at most 5 s.
wait_handlers() {
  local mask
  for _ in $(seq 1 100); do
    mask=$(awk '/^SigCgt:/ {print $2}' /proc/$1/status 2>/dev/null)
    [[ -n "$mask" ]] && (( (16#$mask >> 14) & 1 )) && return 0
    sleep 0.05
  done
  return 1
}

# Until <file> holds at least <n> lines, at most 30 s.
wait_lines() {
  for _ in $(seq 1 300); do
    [[ -s "$1" ]] && (( $(wc -l < "$1") >= $2 )) && return 0
    sleep 0.1
  done
  return 1
}

# Waits for <pid> (a child of this shell) and sets `rc` and `took` (seconds since <t0>, date +%s.%N).
reap() {  # <pid> <t0>
  wait "$1"
  rc=$?
  took=$(python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$2")
}

# No process of the job on <output> is left.
none_left() {
  sleep 0.3
  if pgrep -f -- "--output $1" > /dev/null; then
    echo "FAIL: a process of the job outlived it:"; pgrep -af -- "--output $1"; return 1
  fi
}

# The line of <log> that matches <regex>, for the case's report.
said() { grep -m1 -E "$2" "$1" | cut -c1-240; }

# One line per case, collected by the report: case, status, time until every rank was gone, message.
report() { echo "CASE $1: exit $2, all gone after ${3}s, message: ${4:-(none)}"; }

# Starts the job on <output> in the background with `launch` (words before the binary; empty: direct,
# and then $pid is conveyor itself) and `layout` (flags after `generate`); sets `pid`. A background
# command of a script starts with SIGINT ignored, which a shell (the relay script) cannot undo: env
# puts the default back, as in a terminal's foreground job.
launch=()
layout=()
start_job() {
  if (( ${#launch[@]} )); then
    env --default-signal=INT "${launch[@]}" "$bin" generate "${layout[@]}" "${job_flags[@]}" --output "$1" 2> "$1.log" &
  else
    ( exec env --default-signal=INT "$bin" generate "${layout[@]}" "${job_flags[@]}" --output "$1" 2> "$1.log" ) &
  fi
  pid=$!
}

# Reruns the job on <output> in the foreground (same launch and layout) and checks the result.
resume_and_check() {  # <output> <what happened before>
  "${launch[@]}" "$bin" generate "${layout[@]}" "${job_flags[@]}" --output "$1" 2> "$1.resume.log" \
    || { echo "FAIL: $2: the rerun exited $?"; cat "$1.resume.log"; return 1; }
  check_output "$1" "$2"
}

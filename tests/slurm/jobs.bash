# Sourced by tests/slurm/run.sh: submit one sbatch job per case, act on it (stop, requeue, kill a
# rank), wait for its end while releasing requeued jobs Slurm holds for ~120 s, and check it.

results=()
failed=0

job_field() { scontrol show job -o "$1" 2>/dev/null | grep -o "\b$2=[^ ]*" | head -1 | cut -d= -f2; }
out_lines() { [[ -s "$1" ]] && wc -l < "$1" || echo 0; }

# Slurm holds a requeued job ~120 s (BeginTime = requeue + the credential lifetime) so the last run's
# steps are gone and its revoked credential cannot match the new one; the test starts it once no
# slurmstepd of the job is left and a few seconds have passed (slurmd compares credential times in
# whole seconds: a start in the second of the requeue fails with "Job credential revoked").
release_held() {
  [[ $(job_field "$1" Reason) == BeginTime ]] || return 0
  pgrep -f "^slurmstepd: \[$1\." >/dev/null && return 0
  local eligible
  eligible=$(date -d "$(job_field "$1" EligibleTime)" +%s 2>/dev/null) || return 0
  (( $(date +%s) >= eligible - 115 )) || return 0
  scontrol update jobid="$1" StartTime=now
}

# Waits up to $2 s for job $1 to end, releasing it when it is held after a requeue.
wait_end() {
  local job=$1 deadline=$(( SECONDS + $2 )) state
  while (( SECONDS < deadline )); do
    state=$(job_field "$job" JobState)
    case "$state" in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) echo "$state"; return 0 ;;
      PENDING) release_held "$job" ;;
    esac
    sleep 2
  done
  echo "STILL-${state:-UNKNOWN}"
}

# Waits until job $1 has written $3 results to $2, so a stop lands half-way.
wait_results() {
  local deadline=$(( SECONDS + 300 ))
  while (( SECONDS < deadline )); do
    (( $(out_lines "$2") >= $3 )) && return 0
    [[ $(job_field "$1" JobState) =~ ^(COMPLETED|FAILED|CANCELLED)$ ]] && return 1
    sleep 1
  done
  return 1
}

# The PID of rank $2 of job $1 on this host (both "nodes" are this host).
rank_pid() {
  local env
  for env in /proc/[0-9]*/environ; do
    [[ $(cat "${env%/environ}/comm" 2>/dev/null) == conveyor ]] || continue
    if tr '\0' '\n' < "$env" 2>/dev/null | grep -qx "SLURM_JOB_ID=$1" &&
       tr '\0' '\n' < "$env" 2>/dev/null | grep -qx "SLURM_PROCID=$2"; then
      env=${env#/proc/}; echo "${env%/environ}"; return 0
    fi
  done
  return 1
}

# Stops job $1 the way mode $2 says, once it is half-way; prints what it did.
stop_job() {
  local job=$1 mode=$2 out=$3 pid
  wait_results "$job" "$out" 2 || { echo "job ended before it could be stopped"; return 1; }
  case "$mode" in
    usr1) scancel --signal=USR1 --batch "$job" ;;  # a preemption hook's warning
    requeue) scontrol requeue "$job" ;;
    scancel) scancel "$job" ;;
    kill9) pid=$(rank_pid "$job" 1) || { echo "rank 1 not found"; return 1; }; kill -9 "$pid" ;;
  esac
  echo "$mode after $(out_lines "$out") results"
}

# Checks the end of a case: state, restarts and results against the one-rank reference.
check_case() {
  local job=$1 mode=$2 input=$3 dir=$4 state=$5 restarts
  restarts=$(job_field "$job" Restarts)
  case "$mode" in
    refused)
      [[ $state == FAILED ]] && grep -q "ranks, but the allocation has 2 tasks" "$dir/job.log" ;;
    scancel)
      sleep 5  # a job that would requeue itself shows up PENDING again by now
      [[ $state == CANCELLED && $(job_field "$job" JobState) == CANCELLED && ${restarts:-0} -eq 0 ]] &&
        python3 "$here/check_results.py" --partial "$tmp/$input.jsonl" "$tmp/$input.ref.jsonl" "$dir/out.jsonl" ;;
    *)
      # One stop, one requeue: a second would mean the requeued run tripped over the first.
      local want="^1$"
      [[ $mode == ok ]] && want="^0$"
      # A time limit stops each run; after a kill -9 Slurm's late cancel of the dead step's id can
      # stop the requeued run once more (it resumes again).
      [[ $mode =~ ^(timelimit|kill9)$ ]] && want="^[1-9]"
      [[ $state == COMPLETED && ${restarts:-0} =~ $want ]] &&
        python3 "$here/check_results.py" "$tmp/$input.jsonl" "$tmp/$input.ref.jsonl" "$dir/out.jsonl" ;;
  esac
}

# run_case NAME INPUT MODE -- VAR=VALUE... -- SBATCH_ARGS...
run_case() {
  local name=$1 input=$2 mode=$3 start=$SECONDS vars=() args=() job state note="" ok=1
  shift 4
  [[ $name =~ ${CASES:-.} ]] || return 0
  while [[ $1 != -- ]]; do vars+=("$1"); shift; done
  shift
  args=("$@")
  local dir="$tmp/$name"
  mkdir -p "$dir"
  job=$(env CONFIG="$tmp/run.yaml" INPUT="$tmp/$input.jsonl" OUTPUT="$dir/out.jsonl" "${vars[@]}" \
    sbatch --parsable --job-name="$name" --chdir="$dir" --output="$dir/job.log" "${args[@]}") || ok=0
  if (( ok )) && [[ $mode =~ ^(usr1|requeue|scancel|kill9)$ ]]; then
    note=$(stop_job "$job" "$mode" "$dir/out.jsonl") || ok=0
  fi
  (( ok )) && state=$(wait_end "$job" 600)
  (( ok )) && { check_case "$job" "$mode" "$input" "$dir" "$state" > "$dir/check.txt" 2>&1 || ok=0; }
  local line="$name: ${state:-no job} restarts=$(job_field "$job" Restarts) $(( SECONDS - start )) s ${note:+($note) }$(cat "$dir/check.txt" 2>/dev/null)"
  if (( ok )); then results+=("PASS $line"); else results+=("FAIL $line"); failed=1
    echo "--- $name job log:"; tail -n 30 "$dir/job.log" 2>/dev/null || true
  fi
  echo "${results[-1]}"
}

report_cases() {
  echo "=== Slurm cases"
  printf '%s\n' "${results[@]}"
  (( failed == 0 )) || { echo "FAIL: some Slurm cases failed"; exit 1; }
  echo "PASS: every Slurm case"
}

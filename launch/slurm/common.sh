# Shell shared by the sbatch scripts in this folder (sourced, not run). sbatch copies a job script
# into slurmd's spool before running it, so the scripts find this file next to the installed
# conveyor (<prefix>/share/conveyor/slurm/common.sh), not next to themselves.
#
# Documented variables: CONFIG, INPUT, OUTPUT, PP, TP. Everything else comes from the allocation:
# tasks = nodes x --ntasks-per-node, --cpus-per-task, --gpus-per-node (none = the CPU backend).

conveyor_share=$(cd "$(dirname "$(command -v conveyor)")/../share/conveyor" 2>/dev/null && pwd || true)
CONFIG=${CONFIG:-$conveyor_share/configs/smollm2-135m-instruct.yaml}
INPUT=${INPUT:-requests.jsonl}
OUTPUT=${OUTPUT:-results.jsonl}

# The layout: pipeline across nodes, tensor inside a node unless PP/TP say otherwise.
conveyor_tasks_per_node=${SLURM_NTASKS_PER_NODE:-1}
conveyor_tasks_per_node=${conveyor_tasks_per_node%%(*}
conveyor_tasks=${SLURM_NTASKS:-$(( SLURM_JOB_NUM_NODES * conveyor_tasks_per_node ))}
PP=${PP:-$SLURM_JOB_NUM_NODES}
TP=${TP:-$(( conveyor_tasks / PP ))}
if (( PP * TP != conveyor_tasks )); then
  echo "conveyor: PP x TP = $PP x $TP = $(( PP * TP )) ranks, but the allocation has $conveyor_tasks tasks" \
    "($SLURM_JOB_NUM_NODES nodes x --ntasks-per-node); set PP and TP or sbatch --nodes/--ntasks-per-node" >&2
  exit 2
fi

# srun (22.05+) no longer takes --cpus-per-task from the allocation; pass it on, and give each rank's
# OpenMP that many threads rather than one per core of the node.
conveyor_cpus=${SLURM_CPUS_PER_TASK:-1}
export SRUN_CPUS_PER_TASK=${SRUN_CPUS_PER_TASK:-$conveyor_cpus}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$conveyor_cpus}

# Every task sees every GPU of its node (NCCL keeps P2P/NVLink) and picks its own by local rank.
conveyor_gpus=${SLURM_GPUS_PER_NODE:-0}
conveyor_gpus=${conveyor_gpus##*:}
conveyor_backend=cuda
(( conveyor_gpus > 0 )) || conveyor_backend=cpu

# NVLink SHARP (multicast) needs a fabric manager and IMEX; keep it off unless the site documents it.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

# The conveyor command line every launcher runs.
conveyor_args=(generate --config "$CONFIG" --pipeline-parallel-size "$PP" --tensor-parallel-size "$TP"
  --backend "$conveyor_backend" --input "$INPUT" --output "$OUTPUT")

# USR1 (the --signal=B:USR1@N time-limit warning, or `scancel --signal=USR1 --batch` from a
# preemption hook) means "stop and come back"; TERM (a user's scancel, `scontrol requeue`, Slurm's
# own preemption) means Slurm decides what happens next, so the script never requeues after it.
conveyor_launcher_pid=""
conveyor_stop=""
conveyor_forward() {
  [[ -n "$conveyor_stop" ]] || conveyor_stop=$1
  [[ -n "$conveyor_launcher_pid" ]] && kill -USR1 "$conveyor_launcher_pid" 2>/dev/null || true
}
trap 'conveyor_forward USR1' USR1
trap 'conveyor_forward TERM' TERM

# Requeue this job unless Slurm already did (an outside requeue leaves it pending) or it is going away.
conveyor_requeue() {
  local state
  if (( ${SLURM_RESTART_COUNT:-0} >= ${CONVEYOR_MAX_REQUEUES:-10} )); then
    echo "conveyor: $1, but job $SLURM_JOB_ID was requeued ${SLURM_RESTART_COUNT} times already" \
      "(CONVEYOR_MAX_REQUEUES); not again" >&2
    exit 1
  fi
  state=$(squeue -h -j "$SLURM_JOB_ID" -o %T 2>/dev/null || true)
  if [[ "$state" != RUNNING ]]; then
    echo "conveyor: job $SLURM_JOB_ID is ${state:-gone}; not requeueing it again" >&2
    return 0
  fi
  # A step still ending on another node (srun returns once the first rank exits) would meet the
  # requeued job's step of the same id there: requeue when every step has gone (bounded by KillWait).
  local i
  for i in $(seq 40); do
    squeue -h -s -j "$SLURM_JOB_ID" -o %i 2>/dev/null | grep -qE '\.[0-9]+$' || break
    sleep 1
  done
  echo "conveyor: $1; requeueing job $SLURM_JOB_ID to resume from $OUTPUT" >&2
  scontrol requeue "$SLURM_JOB_ID"
}

# Runs the launcher command line ("$@") in the background, waits for it through forwarded signals,
# and requeues on a USR1 stop (status 75), a rank killed outright (128 + signal) or a failed srun
# (255; after two requeues only when the run wrote results), at most CONVEYOR_MAX_REQUEUES times.
conveyor_results() { [[ -s "$OUTPUT" ]] && wc -l < "$OUTPUT" || echo 0; }

conveyor_launch() {
  local results_before
  results_before=$(conveyor_results)
  "$@" &
  conveyor_launcher_pid=$!
  local rc
  set +e
  wait "$conveyor_launcher_pid"; rc=$?
  # `wait` returns early when a trapped signal arrives; wait again for the real exit status.
  while kill -0 "$conveyor_launcher_pid" 2>/dev/null; do wait "$conveyor_launcher_pid"; rc=$?; done
  set -e
  if [[ "$conveyor_stop" == TERM ]]; then
    echo "conveyor: stopped by SIGTERM (scancel or an outside requeue), status $rc; not requeueing" >&2
  elif [[ $rc -eq 75 && "$conveyor_stop" == USR1 ]]; then
    conveyor_requeue "stopped early by SIGUSR1"
    exit 0
  elif [[ $rc -eq 255 ]]; then
    # srun itself failed. Launching next to a dead run's step can fail so now and then; a bad srun
    # option or a broken node fails every time: after two requeues, a run without a new result is final.
    if (( ${SLURM_RESTART_COUNT:-0} >= 2 )) && (( $(conveyor_results) == results_before )); then
      echo "conveyor: srun failed (status 255) on run $(( SLURM_RESTART_COUNT + 1 )) and this run wrote no" \
        "result; not requeueing again (see srun's error above)" >&2
      exit "$rc"
    fi
    conveyor_requeue "srun failed (status 255)"
    exit 0
  elif (( rc > 128 )) || [[ $rc -eq 75 ]]; then
    conveyor_requeue "a rank was killed (status $rc)"
    exit 0
  fi
  exit "$rc"
}

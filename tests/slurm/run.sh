#!/usr/bin/env bash
# The sbatch scripts of launch/slurm on a real two-node Slurm cluster started here from nothing (see
# cluster.bash), on the CPU backend with the SmolLM2 GGUF, through their documented variables and
# sbatch flags only. Every job's results must hold every custom_id once, equal to a one-rank run.
# Usage: bash tests/slurm/run.sh BUILD_DIR   (fails, never skips, when Slurm cannot start);
# CASES=REGEX runs only the matching cases, KEEP_TMP=1 keeps the job folders.
set -euo pipefail
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
here="$repo/tests/slurm"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d /tmp/conveyor-slurm.XXXXXX)
source "$here/cluster.bash"
source "$here/jobs.bash"
trap 'stop_cluster; [[ -n "${KEEP_TMP:-}" ]] || rm -rf "$tmp"' EXIT

# The installed tree the jobs use: conveyor on PATH, the sbatch scripts' shared shell next to it.
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
export PATH="$tmp/prefix/bin:$PATH"
gguf=$(bash "$repo/scripts/fetch_test_model.sh")
# A run config as a user writes one (CONFIG), from the shipped one with this machine's model.
sed "s|^  path: .*|  path: $gguf|" "$repo/configs/smollm2-135m-instruct.yaml" > "$tmp/run.yaml"
# One request at a time makes a job slow enough to stop it half-way.
sed -E 's/^(  max_num_seqs:).*/\1 1/' "$tmp/run.yaml" > "$tmp/slow.yaml"

make_input() {  # make_input FILE N: N greedy requests, max_tokens set in each
  python3 - "$1" "$2" <<'PY'
import json, random, sys
random.seed(19)
words = "river stone cloud lamp orange violin harbor pencil meadow engine copper winter".split()
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        prompt = "Write about " + " and ".join(random.sample(words, 2)) + "."
        body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": random.randint(8, 16),
                "temperature": 0}
        f.write(json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions",
                            "body": body}) + "\n")
PY
}
make_input "$tmp/small.jsonl" 6
make_input "$tmp/long.jsonl" 24
# The time-limit case must still be running when Slurm's warning comes: slurmctld checks time limits
# about every 30 s, so USR1@50 of a 60 s limit lands 10-40 s in; 72 requests take over a minute here.
make_input "$tmp/timed.jsonl" 72
# The one-rank reference, outside Slurm.
for f in small long timed; do
  conveyor generate --config "$tmp/run.yaml" --backend cpu --input "$tmp/$f.jsonl" --output "$tmp/$f.ref.jsonl" \
    2>"$tmp/$f.ref.log" || { echo "FAIL: the one-rank reference run failed"; cat "$tmp/$f.ref.log"; exit 1; }
done

start_cluster
slurm="$repo/launch/slurm"
run_case srun_1node_pp2 small ok -- PP=2 -- --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 \
  "$slurm/generate_1node_srun.sbatch"
run_case srun_1node_pp2_tp3 small ok -- PP=2 -- --nodes=1 --ntasks-per-node=6 --cpus-per-task=1 \
  "$slurm/generate_1node_srun.sbatch"
run_case srun_2node_pp2 small ok -- -- --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 \
  "$slurm/generate_multinode_srun.sbatch"
run_case srun_2node_pp2_tp3 small ok -- -- --nodes=2 --ntasks-per-node=3 --cpus-per-task=1 \
  "$slurm/generate_multinode_srun.sbatch"
run_case mpirun_2node_pp2 small ok -- -- --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 \
  "$slurm/generate_mpirun.sbatch"
run_case layout_mismatch small refused -- PP=4 -- --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 \
  "$slurm/generate_multinode_srun.sbatch"
run_case preempt_usr1 long usr1 -- CONFIG="$tmp/slow.yaml" -- --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 \
  "$slurm/generate_multinode_srun.sbatch"
run_case scontrol_requeue long requeue -- CONFIG="$tmp/slow.yaml" -- --nodes=2 --ntasks-per-node=1 \
  --cpus-per-task=1 "$slurm/generate_multinode_srun.sbatch"
run_case time_limit timed timelimit -- CONFIG="$tmp/slow.yaml" -- --nodes=1 --ntasks-per-node=1 --cpus-per-task=1 \
  --time=1 --signal=B:USR1@50 "$slurm/generate_1node_srun.sbatch"
run_case kill9_rank long kill9 -- CONFIG="$tmp/slow.yaml" -- --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 \
  "$slurm/generate_multinode_srun.sbatch"
run_case plain_scancel long scancel -- CONFIG="$tmp/slow.yaml" -- --nodes=2 --ntasks-per-node=1 \
  --cpus-per-task=1 "$slurm/generate_multinode_srun.sbatch"

report_cases

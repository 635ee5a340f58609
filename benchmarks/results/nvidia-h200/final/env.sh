# Sourced by this folder's call scripts on the H200 machine (from the project root): the Debian packages
# it lacks (.gpu-deps, shared/gpu-machine/pack.sh, plus libxxhash), unpacked once into /opt/conveyor-deps
# and kept while the machine stays warm; CUDA on PATH; Open MPI as root.
d=/opt/conveyor-deps
if [ -f .gpu-deps/unpack.sh ]; then
  source .gpu-deps/unpack.sh
else  # a later call on the same machine: the packages are unpacked already
  export CMAKE_PREFIX_PATH=$d/usr Boost_ROOT=$d/usr BOOST_ROOT=$d/usr CPATH=$d/usr/include
  export LIBRARY_PATH=$d/usr/lib/x86_64-linux-gnu LD_LIBRARY_PATH=$d/usr/lib/x86_64-linux-gnu
  export PKG_CONFIG_PATH=$d/usr/lib/x86_64-linux-gnu/pkgconfig
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
sed -i "s|^prefix=/usr\$|prefix=$d/usr|" $d/usr/lib/x86_64-linux-gnu/pkgconfig/libxxhash.pc 2>/dev/null
export PATH=/usr/local/cuda/bin:$PATH
export CONVEYOR_CACHE=/tmp/conveyor-cache
t0=${t0:-$(date +%s)}
el() { echo "$(($(date +%s) - t0)) s"; }
left() { echo $((${BUDGET_S:-585} - ($(date +%s) - t0))); }  # seconds left of this call
mpi=(mpirun --oversubscribe -x NCCL_NVLS_ENABLE=0)
# A call's start (next/call_*.sh): `call_begin NAME TARGET...` makes /tmp/NAME ($r), defines save (tars /tmp/NAME
# into $OUT/NAME.tgz and prints the elapsed time and its arguments), records the GPU and builds the targets;
# it returns 1 (having saved the build log's first errors) when the build fails.
call_begin() {
  local name=$1; shift
  r=/tmp/$name; mkdir -p "$r"
  eval "save() { tar czf \"\$OUT/$name.tgz\" -C /tmp $name; echo \"[\$(el)] \$*\"; }"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$r/gpu.txt"
  (cmake -S . -B build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCONVEYOR_WERROR=OFF && ninja -C build -j16 "$@") \
    > "$r/build.log" 2>&1 || { grep -B2 -A12 -m3 "error" "$r/build.log"; save "build FAILED"; return 1; }
  save build
}
# `run_tests TEST...`: each GPU test binary (build/tests/TEST) with CONVEYOR_REQUIRE_GPU=1 and the caller's
# environment, its log in $r/TEST.log, one save line each with its exit code and gtest's summary.
run_tests() {
  local t
  for t in "$@"; do
    CONVEYOR_REQUIRE_GPU=1 timeout 120 build/tests/$t > "$r/$t.log" 2>&1
    save "$t rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$r/$t.log" | head -2 | tr '\n' ' ')"
  done
}
# `plan_here TAG PRECISION WORKLOAD`: conveyor plan --cluster for one GPU of this machine's kind with $r/doctor.json,
# Llama-3-8B, into $r/plan_TAG.{txt,json}; prints the top layout's line.
plan_here() {
  local gpu; gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100)
  printf 'name: 1 x %s (this call)\nnodes: 1\ngpus_per_node: 1\ngpu: {preset: %s, doctor_json: %s}\nintra_node: nvlink-%s\nnetwork: ib-ndr-400\nprecision: %s\n' \
    "$gpu" "$gpu" "$r/doctor.json" "$gpu" "$2" > "$r/cluster_$1.yaml"
  build/conveyor plan --cluster "$r/cluster_$1.yaml" --set model.config=configs/models/llama-3-8b.yaml \
    --workload "$3" --output-json "$r/plan_$1.json" > "$r/plan_$1.txt" 2>&1
  sed -n 6p "$r/plan_$1.txt" | tr -s ' '
}
# `latency_ab TAG VAR VALUE... -- ARGS...`: conveyor bench latency, batch 1 128/128 (3 warm-up, 10 timed), with ARGS
# once per VALUE of the environment variable VAR (in order; repeat a value to bracket the other), into
# $r/latency_b1.TAG.N.json and $r/b1_TAG.N.txt (N = 1, 2, ...), one save line each. `b256_ab`: the same at batch
# 256, 128 in / 512 out (a decode-heavy step; 1 warm-up, 3 timed), into latency_b256.TAG.N.json and b256_TAG.N.txt.
ab_runs() {
  local kind=$1 tag=$2 var=$3 vals=() i=0 v shape; shift 3
  shape=(--input-len 128 --output-len 128 --batch-size 1 --num-iters-warmup 3 --num-iters 10)
  [ "$kind" = b256 ] && shape=(--input-len 128 --output-len 512 --batch-size 256 --num-iters-warmup 1 --num-iters 3)
  while [ "$1" != -- ]; do vals+=("$1"); shift; done; shift
  for v in "${vals[@]}"; do
    i=$((i + 1))
    [ "$(left)" -lt 60 ] && { save "no time left for $kind $tag $var=$v"; continue; }
    env "$var=$v" timeout 120 build/conveyor bench latency "$@" "${shape[@]}" \
      --output-json "$r/latency_$kind.$tag.$i.json" > "$r/${kind}_$tag.$i.txt" 2>&1
    save "$kind $tag $var=$v rc=$? $(grep -iE 'Avg latency' "$r/${kind}_$tag.$i.txt")"
  done
}
latency_ab() { ab_runs b1 "$@"; }
b256_ab() { ab_runs b256 "$@"; }
# `ncu_pages TAG`: from $r/TAG_full.ncu-rep (an `ncu --set full -o $r/TAG_full` run), $r/TAG_details.csv and
# $r/TAG_sass.csv.gz; prints each launch's headline metrics (into $r/TAG_summary.txt) and where its warps stall
# (benchmarks/ncu_stalls.py, into $r/TAG_stalls.txt).
ncu_pages() {
  local tag=$1 ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
  $ncu -i $r/${tag}_full.ncu-rep --page details --csv > $r/${tag}_details.csv 2>/dev/null
  $ncu -i $r/${tag}_full.ncu-rep --page source --print-source sass --csv 2>/dev/null | gzip > $r/${tag}_sass.csv.gz
  python3 - $r/${tag}_details.csv <<'PY' | tee $r/${tag}_summary.txt
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = rows[0]; ix = {k: i for i, k in enumerate(h)}
want = ('Duration', 'DRAM Throughput', 'Memory Throughput', 'Achieved Occupancy', 'Theoretical Occupancy',
        'Registers Per Thread', 'Block Size', 'Grid Size', 'Waves Per SM', 'Warp Cycles Per Issued Instruction',
        'L2 Hit Rate', 'L1/TEX Hit Rate', 'Issue Slots Busy', 'Issued Warp Per Scheduler', 'Eligible Warps Per Scheduler',
        'No Eligible', 'Executed Ipc Active', 'Compute (SM) Throughput')
for r in rows[1:]:
    if r[ix['Metric Name']] in want:
        print(r[ix['ID']], r[ix['Metric Name']], r[ix['Metric Value']], r[ix['Metric Unit']])
PY
  python3 benchmarks/ncu_stalls.py $r/${tag}_sass.csv.gz 30 > $r/${tag}_stalls.txt 2>&1
  head -14 $r/${tag}_stalls.txt
}
# `throughput_seqs TAG N... -- ARGS...`: conveyor bench throughput, 1,000 prompts 1024/1024, with ARGS once per
# --max-num-seqs N (auto: the engine's own choice), into $r/throughput.TAG.seqs_N.json and $r/t1000_TAG_seqs_N.txt,
# one save line each; skipped when under 110 s of the call are left.
throughput_seqs() {
  local tag=$1 ns=() n s; shift
  while [ "$1" != -- ]; do ns+=("$1"); shift; done; shift
  for n in "${ns[@]}"; do
    [ "$(left)" -lt 110 ] && { save "no time left for $tag max_num_seqs $n"; continue; }
    s=(); [ "$n" = auto ] || s=(--max-num-seqs "$n")
    timeout $(($(left) - 10)) build/conveyor bench throughput "$@" "${s[@]}" --input-len 1024 --output-len 1024 \
      --num-prompts 1000 --output-json "$r/throughput.$tag.seqs_$n.json" > "$r/t1000_${tag}_seqs_$n.txt" 2>&1
    save "$tag 1000 prompts max_num_seqs $n rc=$? $(grep -iE 'Throughput|TTFT|preempt' "$r/t1000_${tag}_seqs_$n.txt" |
      tr '\n' ' ' | cut -c1-300)"
  done
}

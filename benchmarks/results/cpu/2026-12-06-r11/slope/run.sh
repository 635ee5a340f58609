#!/usr/bin/env bash
# pp 1 full-size workload at 8, 16, 32 layers: measured vs predicted, from one fresh doctor.
set -u
cd /work/main
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
o=/tmp/slope
mpirun --oversubscribe -np 4 -x OMPI_MCA_btl_vader_single_copy_mechanism=none build/conveyor doctor -pp 2 -tp 2 --set runtime.backend=cpu --set runtime.cpu_threads=1 --bytes 16M --iters 5 --output-json $o/doctor.json > $o/doctor.log 2>&1
printf 'name: cpu\nnodes: 1\ngpus_per_node: 4\ngpu:\n  preset: cpu\n  doctor_json: doctor.json\nintra_node: doctor\nprecision: fp32\n' > $o/cluster.yaml
for rep in 1 2; do
for L in 8 16 32; do
  c=(--set model.config=$o/cpu-sim-${L}l.yaml --set runtime.backend=cpu --set cache.cpu_kv_cache_space=0.25 --max-num-seqs 16 --set parallel.device_profile=$o/doctor.json)
  mpirun --oversubscribe -np 1 build/conveyor bench throughput --load-format dummy -pp 1 -tp 1 --set runtime.cpu_threads=1 --input-len 16 --output-len 32 --num-prompts 48 --output-json $o/bench_$L.json --trace $o/trace_$L.json "${c[@]}" > $o/bench_$L.log 2>&1
  build/conveyor plan --cluster $o/cluster.yaml -pp 1 -tp 1 --workload prompts=48,input=16,output=32 --output-json $o/plan_$L.json --trace $o/simtrace_$L.json "${c[@]}" > $o/plan_$L.log 2>&1
  python3 -c "
import json;b=json.load(open('$o/bench_$L.json'));p=json.load(open('$o/plan_$L.json'))['layouts'][0]
print('L=$L rep=$rep measured',round(b['elapsed_time'],3),'s',round(b['output_tokens_per_second'],1),'tok/s; predicted',round(p['elapsed_s'],3),'s',round(p['output_tokens_per_s'],1),'ratio',round(p['output_tokens_per_s']/b['output_tokens_per_second'],3))"
done
done

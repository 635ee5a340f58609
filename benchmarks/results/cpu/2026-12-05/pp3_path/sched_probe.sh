#!/bin/bash
# pp 3 bench as benchmarks/sim_cpu.py runs it (DIR's doctor), sampling per rank /proc/PID/schedstat
# (on-CPU ns, runnable-but-waiting ns, timeslices) and /proc/PID/sched, plus /proc/stat per CPU, every 0.2 s;
# the last sample before each rank exits is kept.   sched_probe.sh DIR OUTDIR
set -e
DIR=$1; OUT=$2; mkdir -p $OUT; ROOT=$(cd ../../../../.. && pwd)
grep -E "^cpu[0-9]" /proc/stat > $OUT/stat_before
mpirun --oversubscribe -np 3 -x OMPI_MCA_btl_vader_single_copy_mechanism=none $ROOT/build/conveyor bench throughput \
  --load-format dummy -pp 3 -tp 1 --set runtime.cpu_threads=1 --input-len 16 --output-len 32 --num-prompts 48 \
  --output-json $OUT/bench.json --trace $OUT/trace_pp3_tp1.json --set model.config=$ROOT/configs/models/cpu-sim-16l.yaml \
  --set runtime.backend=cpu --set cache.cpu_kv_cache_space=0.25 --max-num-seqs 16 \
  --set parallel.device_profile=$DIR/doctor.json > $OUT/bench.log 2>&1 &
MP=$!
PIDS=""
while kill -0 $MP 2>/dev/null && [ $(echo $PIDS | wc -w) -lt 3 ]; do sleep 0.05; PIDS=$(pgrep -f "build/conveyor bench" | grep -v $MP | tr '\n' ' '); done
# one cat per sample, no process scans while the ranks run
while kill -0 $MP 2>/dev/null; do
  echo "$(date +%s.%N) $(for p in $PIDS; do cat /proc/$p/schedstat 2>/dev/null || echo "- - -"; done | tr '\n' ' ') $(grep -E '^cpu ' /proc/stat)" >> $OUT/series.txt
  ps -eo pid,ppid,comm,time,cputimes 2>/dev/null > $OUT/ps_last.txt || ps -eo pid,ppid,comm,time > $OUT/ps_last.txt
  sleep 1
done
grep -E "^cpu[0-9]" /proc/stat > $OUT/stat_after

# Sourced by tests/slurm/run.sh: a two-node Slurm cluster on this host, from nothing, under $tmp.
# munged, slurmctld and two slurmd (n1, n2) run in the foreground of their own hostnames (a UTS
# namespace each: Open MPI keys its shared-memory segments by hostname, so two "nodes" with one name
# collide). Every daemon's PID goes into `daemons` (munged's into munged_pid, stopped last: a step
# still finishing needs it); stop_cluster cancels what is left and ends them by PID.

daemons=()
munged_pid=""

install_slurm() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null && [[ -e /usr/lib/x86_64-linux-gnu/libpmix.so ]] \
    && return 0
  echo "installing slurm-wlm, munge and libpmix-dev (Slurm's pmix plugin loads the unversioned libpmix.so)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq slurm-wlm munge libpmix-dev >/dev/null
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

write_slurm_conf() {
  local ctl_port n1_port n2_port
  ctl_port=$(free_port); n1_port=$(free_port); n2_port=$(free_port)
  mkdir -p "$tmp/state" "$tmp/log" "$tmp/spool/n1" "$tmp/spool/n2" "$tmp/tmpfs/n1" "$tmp/tmpfs/n2"
  cat > "$tmp/slurm.conf" <<EOF
ClusterName=ci
SlurmctldHost=ctl(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.sock
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool/%n
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd-%n.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=pmix
TmpFS=$tmp/tmpfs/%n
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=3600
KillWait=30
NodeName=n1 NodeHostname=n1 NodeAddr=127.0.0.1 Port=$n1_port CPUs=8 RealMemory=4000 State=UNKNOWN
NodeName=n2 NodeHostname=n2 NodeAddr=127.0.0.1 Port=$n2_port CPUs=8 RealMemory=4000 State=UNKNOWN
PartitionName=ci Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$tmp/slurm.conf"
}

start_munge() {
  dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 status=none
  chmod 400 "$tmp/munge.key"
  munged --foreground --force --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" \
    --pid-file="$tmp/munged.pid" --log-file="$tmp/log/munged.log" --seed-file="$tmp/munge.seed" \
    >>"$tmp/log/munged.out" 2>&1 &
  munged_pid=$!
}

# Runs "$@" under hostname $1 in a UTS namespace of its own; exec keeps the PID the daemon's.
start_as_host() {
  local host=$1; shift
  unshare --uts bash -c 'hostname "$0"; exec "$@"' "$host" "$@" >>"$tmp/log/$host.out" 2>&1 &
  daemons+=($!)
}

start_cluster() {
  install_slurm
  write_slurm_conf
  start_munge
  sleep 1
  start_as_host ctl slurmctld -D -i -f "$SLURM_CONF"
  start_as_host n1 slurmd -D -N n1 -f "$SLURM_CONF"
  start_as_host n2 slurmd -D -N n2 -f "$SLURM_CONF"
  local i
  for i in $(seq 60); do
    [[ $(sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle') -eq 2 ]] && return 0
    sleep 1
  done
  echo "FAIL: the Slurm cluster did not come up (two idle nodes) in 60 s"
  sinfo -N 2>&1 || true
  tail -n 20 "$tmp"/log/*.log
  return 1
}

stop_cluster() {
  local pid i
  if [[ ${#daemons[@]} -gt 0 ]]; then
    scancel --user=root 2>/dev/null || true
    for i in $(seq 40); do [[ -z $(squeue -h 2>/dev/null) ]] && break; sleep 1; done
  fi
  for pid in "${daemons[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${daemons[@]}"; do wait "$pid" 2>/dev/null || true; done
  [[ -z "$munged_pid" ]] || { kill "$munged_pid" 2>/dev/null; wait "$munged_pid" 2>/dev/null || true; }
}

#!/usr/bin/env bash
# A real one-node Slurm on this machine, for tests and for trying an emitted array by hand:
#   scripts/slurm/local-cluster.sh start DIR   # munged + slurmctld + slurmd, state under DIR
#   export SLURM_CONF=DIR/slurm.conf           # then sbatch / squeue / scancel / sinfo as usual
#   scripts/slurm/local-cluster.sh stop DIR
# Needs root and Debian's slurmctld, slurmd, slurm-client and munge (`./dev test` installs them).
# Nothing system-wide is touched: its own munge socket and key, ports and spool under DIR, no
# systemd. The node has no GPU (no gres): arrays emitted with --gpus-per-task 0 run on it.
set -euo pipefail
cmd=${1:?usage: local-cluster.sh start|stop DIR}
dir=$(realpath -m "${2:?usage: local-cluster.sh start|stop DIR}")

stop() {
  for d in slurmd slurmctld munged; do
    if [ -f "$dir/$d.pid" ]; then
      pid=$(cat "$dir/$d.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$dir/$d.pid"
    fi
  done
}

# slurmd runs jobs as their users, so it (and this script) must be root.
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "local-cluster.sh: needs root (or sudo)" >&2; exit 1; }
  exec sudo -n "$0" "$cmd" "$dir"
fi

case "$cmd" in
  stop) stop; exit 0 ;;
  start) ;;
  *) echo "usage: local-cluster.sh start|stop DIR" >&2; exit 2 ;;
esac

for b in munged slurmctld slurmd sbatch sinfo; do
  command -v "$b" >/dev/null || { echo "local-cluster.sh: $b not found (apt-get install slurmctld slurmd slurm-client munge)" >&2; exit 1; }
done
stop
mkdir -p "$dir"/{spool/ctld,spool/d,log,munge}
chmod 700 "$dir/munge"
# A key of our own: the cluster must not depend on (or disturb) a system munge.
[ -f "$dir/munge/munge.key" ] || { head -c 1024 /dev/urandom >"$dir/munge/munge.key"; chmod 400 "$dir/munge/munge.key"; }
munged --force --socket="$dir/munge/socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"

host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2/1024) - 1024}' /proc/meminfo)
# Ports from the directory's name, so two clusters (two CI jobs) do not collide.
base=$(( 20000 + $(printf '%s' "$dir" | cksum | cut -d' ' -f1) % 20000 ))
cat >"$dir/slurm.conf" <<CONF
ClusterName=quantenergy-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
SlurmctldPort=$base
SlurmdPort=$((base + 1))
StateSaveLocation=$dir/spool/ctld
SlurmdSpoolDir=$dir/spool/d
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
KillWait=10
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
  if sinfo -h -o '%t' 2>/dev/null | grep -qx idle; then
    echo "slurm up: SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "local-cluster.sh: the node did not become idle; logs in $dir/log" >&2
sinfo >&2 || true
tail -n 20 "$dir/log/"*.log >&2 || true
exit 1

#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for trying docs/launch.md's Slurm recipe.
#
#   scripts/slurm-local.sh start [DIR]   # prints DIR; then: export SLURM_CONF=DIR/slurm.conf
#   scripts/slurm-local.sh stop DIR      # stops what start started, removes DIR
#
# Run as root. `start` installs Debian's slurm-wlm and munge with apt-get when they are missing,
# then runs munged, slurmctld and slurmd with everything they write under DIR (default
# /tmp/placegroup-slurm-<pid>): the munge key and socket, slurm.conf, state, spool, logs and PID
# files. It returns once `sinfo` shows the node idle. The node is `hostname -s` at 127.0.0.1.
#
# The node declares CPUS (8) CPUs whatever the machine has (SlurmdParameters=config_overrides),
# so a job of 2 pservers + 2 trainers fits on a 2-core machine. Slurm's OverSubscribe shares
# CPUs between jobs, not between the tasks of one job: with it, a 4-task job still needs 4 CPUs
# unless every sbatch and srun says --overcommit, which a recipe for a real cluster should not.
# Tasks are not bound to cores (TaskPlugin=task/none) and no cgroups are used
# (ProctrackType=proctrack/linuxproc), so this also runs inside containers.
#
# Exit codes of start: 0 running; 2 usage or not root; 3 Slurm or munge missing and could not
# be installed; 4 a daemon did not start or the node did not become idle (the log's tail is
# printed). On any failure start stops what it had started and removes DIR.
set -euo pipefail

CPUS=${CPUS:-8}
WAIT_S=${WAIT_S:-60}

die() { local code=$1; shift; echo "slurm-local: $*" >&2; exit "$code"; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

install_if_missing() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
      && command -v sbatch >/dev/null; then
    return 0
  fi
  command -v apt-get >/dev/null || die 3 "slurmctld, slurmd or munged is missing and there is no apt-get to install them"
  echo "slurm-local: installing slurm-wlm and munge with apt-get (a minute or two)" >&2
  local log=$DIR/apt.log
  if ! { apt-get update && DEBIAN_FRONTEND=noninteractive \
           apt-get install -y --no-install-recommends slurm-wlm munge; } >"$log" 2>&1; then
    tail -n 5 "$log" >&2
    die 3 "apt-get could not install slurm-wlm and munge (is the Debian mirror reachable?)"
  fi
}

write_conf() {
  local host=$1 ctld_port=$2 slurmd_port=$3
  cat >"$DIR/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh: one node, everything under $DIR.
ClusterName=placegroup
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

# The PID in run/NAME.pid, if that process is alive.
pid_of() {
  local f=$DIR/run/$1.pid pid
  [ -s "$f" ] || return 1
  pid=$(tr -d '[:space:]' <"$f")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

stop_daemon() {
  local name=$1 pid i
  pid=$(pid_of "$name") || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "slurm-local: $name (pid $pid) ignored SIGTERM for 10 s; killing it" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  export SLURM_CONF=$DIR/slurm.conf
  # Jobs first: their slurmstepd processes outlive slurmd otherwise.
  if pid_of slurmctld >/dev/null; then
    local jobs i
    jobs=$(timeout 10 squeue -h -o %A 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086
      timeout 10 scancel $jobs 2>/dev/null || true
      for ((i = 0; i < 150; i++)); do
        [ -z "$(timeout 10 squeue -h -o %A 2>/dev/null || true)" ] && break
        sleep 0.2
      done
    fi
  fi
  # slurmstepd removes its socket in the spool directory when it ends.
  local i
  for ((i = 0; i < 100; i++)); do
    compgen -G "$DIR/spool/*_[0-9]*.*" >/dev/null || break
    sleep 0.1
  done
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon munged
  rm -rf "$DIR"
}

start() {
  [ "$(id -u)" = 0 ] || die 2 "run as root (slurmd starts jobs as their users and munged serves them)"
  mkdir -p "$DIR"
  DIR=$(cd "$DIR" && pwd)
  trap 'code=$?; if [ $code != 0 ]; then stop >/dev/null 2>&1 || true; fi; exit $code' EXIT
  install_if_missing
  mkdir -p "$DIR"/{munge,state,spool,log,run}
  chmod 700 "$DIR/munge"

  dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1 count=1024 status=none
  chmod 400 "$DIR/munge/munge.key"
  munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
    --seed-file="$DIR/munge/munged.seed" 2>>"$DIR/log/munged.log" \
    || { tail -n 5 "$DIR/log/munged.log" >&2; die 4 "munged did not start"; }

  local host
  host=$(hostname -s)
  write_conf "$host" "$(free_port)" "$(free_port)"
  export SLURM_CONF=$DIR/slurm.conf
  slurmctld -f "$SLURM_CONF" 2>>"$DIR/log/slurmctld.log" \
    || { tail -n 5 "$DIR/log/slurmctld.log" >&2; die 4 "slurmctld did not start"; }
  slurmd -f "$SLURM_CONF" -N "$host" 2>>"$DIR/log/slurmd.log" \
    || { tail -n 5 "$DIR/log/slurmd.log" >&2; die 4 "slurmd did not start"; }

  local i state=""
  for ((i = 0; i < WAIT_S * 2; i++)); do
    state=$(timeout 10 sinfo -h -n "$host" -o %T 2>/dev/null || true)
    case $state in idle*) break ;; esac
    for d in munged slurmctld slurmd; do
      pid_of "$d" >/dev/null || { tail -n 5 "$DIR/log/$d.log" >&2; die 4 "$d stopped while starting"; }
    done
    sleep 0.5
  done
  case $state in
    idle*) ;;
    *) tail -n 5 "$DIR/log/slurmd.log" "$DIR/log/slurmctld.log" >&2
       die 4 "node $host is '${state:-unknown}' after ${WAIT_S} s, not idle" ;;
  esac
  trap - EXIT
  echo "$DIR"
}

cmd=${1:-}
case $cmd in
  start) DIR=${2:-/tmp/placegroup-slurm-$$}; start ;;
  stop)
    [ -n "${2:-}" ] || die 2 "usage: $0 stop DIR"
    DIR=$2
    [ -f "$DIR/slurm.conf" ] || [ -d "$DIR/run" ] || die 2 "$DIR was not made by $0 start"
    stop ;;
  *) die 2 "usage: $0 start [DIR] | stop DIR" ;;
esac

#!/usr/bin/env bash
# stop-slurm.sh - stop exactly the daemons start-slurm.sh started: cancel this private cluster's jobs and
# wait for them to end, then stop each daemon by its PID file after checking the PID still belongs to the
# expected program. A munged that start-slurm.sh found running (no PID file here) is left alone.
# Puts back an /etc/slurm/*.conf that start-slurm.sh moved aside.
#   SLURM_CI_DIR   same dir as for start-slurm.sh (default: <repo>/.slurm-ci)
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
DIR="${SLURM_CI_DIR:-$REPO/.slurm-ci}"
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if alive "$DIR/run/slurmctld.pid"; then
  ids=$(timeout 10 squeue -h -o %i 2>/dev/null)
  if [ -n "$ids" ]; then
    echo "cancelling jobs: $(echo $ids)"
    timeout 10 scancel $ids || true
    # let slurmd's step daemons kill the jobs' processes before slurmd goes away
    for _ in $(seq 1 60); do
      [ -z "$(timeout 5 squeue -h -t PD,R,CG,S -o %i 2>/dev/null)" ] && break; sleep 0.5
    done
  fi
fi

stop() { # name pidfile expected-comm
  local name=$1 pf=$2 comm=$3 pid
  [ -s "$pf" ] || return 0
  pid=$(cat "$pf")
  if ! kill -0 "$pid" 2>/dev/null; then echo "$name: pid $pid not running"; rm -f "$pf"; return 0; fi
  if [ "$(cat /proc/"$pid"/comm 2>/dev/null)" != "$comm" ]; then
    echo "$name: pid $pid is '$(cat /proc/"$pid"/comm 2>/dev/null)', not $comm; left alone" >&2; return 1
  fi
  kill -TERM "$pid"
  for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then echo "$name: pid $pid ignored TERM, sending KILL"; kill -KILL "$pid"; fi
  rm -f "$pf"
  echo "$name: stopped (pid $pid)"
}
rc=0
stop slurmd    "$DIR/run/slurmd.pid"    slurmd    || rc=1
stop slurmctld "$DIR/run/slurmctld.pid" slurmctld || rc=1
stop munged    "$DIR/munge/munged.pid"  munged    || rc=1

for f in slurm.conf gres.conf; do
  if [ -L "/etc/slurm/$f" ] && [ "$(readlink "/etc/slurm/$f")" = "$DIR/etc/$f" ]; then
    rm -f "/etc/slurm/$f"
    orig=$(ls -1t /etc/slurm/"$f".orig.* 2>/dev/null | head -1)
    if [ -n "$orig" ]; then mv "$orig" "/etc/slurm/$f"; echo "restored /etc/slurm/$f"; fi
  fi
done
exit $rc

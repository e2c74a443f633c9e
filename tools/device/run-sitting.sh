#!/usr/bin/env bash
# One call of a measurement session that measures several variants on one machine, one after another
# (docs/running.md; examples/h200-qwen/defaults-and-int8-kv/ was measured so):
#   WARMUP=1 VARIANTS="bf16 int8_kv eager" CALL_BUDGET_S=595 tools/device/run-sitting.sh CONFIG
# runs tools/device/run-study.sh for one variant at a time, in the order VARIANTS gives (given several
# variants' targets, Snakemake picks its own order: in examples/h200-qwen/int8-kv-two-machines int8_kv ran before its baseline and the
# baseline never ran), each with what is left of this call's CALL_BUDGET_S. The same command in the next call
# resumes where this one stopped: a variant whose measurements are all on disk is skipped, and a variant is
# started only when the call has time left for what it still has to measure (NEED_S, default 330 s: a server
# start ~150 s, six load runs ~130 s and the 55 s run-study.sh keeps for stopping and packing; ACCURACY_S,
# default 80 s, more while its accuracy is missing), else the call ends and the next one starts with it. The
# first variant that has something left always runs (the call was made for it; run-study.sh stops it in time).
# Every run-study.sh log of the call is appended to $OUT/run-sitting.log; the other files in $OUT are the
# last run-study.sh's (results.tgz holds the whole study's results). FOLLOW=1 (below) runs the sitting
# across calls instead.
set -uo pipefail
CONFIG=$1; shift
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
t0=$(date +%s)
budget=${CALL_BUDGET_S:-570}
need=${NEED_S:-330}
acc_s=${ACCURACY_S:-80}
el() { echo "[run-sitting +$(( $(date +%s) - t0 ))s] $*"; }
study=$(sed -n 's/^study: *//p' "$CONFIG" | tr -d '"'"'"' ')
# FOLLOW=1: the whole sitting (VARIANTS one after another, as below) runs in the background across the calls
# (tools/device/follow.sh, no budget of its own), so no server start is cut at a call's end and no call ends
# early for want of NEED_S; each call follows it until CALL_BUDGET_S - 40 s and brings back a snapshot of the
# study's results (STOP=1: the measurements are asked to stop at the call's end, as run-study.sh does).
if [ -n "${FOLLOW:-}" ]; then
  mkdir -p /tmp/sitting-out
  FOLLOW_UNTIL=$(( t0 + budget - 40 )) FOLLOW_STOP_FILE=/tmp/worthit-stop FOLLOW_TAIL=40 \
    tools/device/follow.sh sitting -- env FOLLOW= OUT=/tmp/sitting-out CALL_BUDGET_S=86400 \
    SITTING_STOP_FILE=/tmp/worthit-stop tools/device/run-sitting.sh "$CONFIG" "$@"
  tools/device/pack-results.sh "results/$study"
  cp /tmp/follow-sitting.log "$OUT/run-sitting.log"
  el "packed: $(ls "$OUT" | tr '\n' ' ')"
  exit 0
fi
: > "${OUT:-/tmp}/run-sitting.log"
[ -n "${SITTING_STOP_FILE:-}" ] && rm -f "$SITTING_STOP_FILE"
first=1
for v in ${VARIANTS:?VARIANTS names the variants in order}; do
  # FOLLOW=1's stop: the measurement running ended on it; start no other variant
  if [ -n "${SITTING_STOP_FILE:-}" ] && [ -f "$SITTING_STOP_FILE" ]; then el "asked to stop"; break; fi
  left=$(( budget - ($(date +%s) - t0) ))
  # what v still has to measure (before the wheels are in, or before anything of the study was measured
  # here, all of it; snakemake --summary takes seconds)
  missing=""
  if [ -f /tmp/site/.done ] && [ -d "results/$study" ]; then
    missing=$(PYTHONPATH=/tmp/site:$PWD/src python3 tools/device/targets.py "$CONFIG" --missing "$v" 2>/dev/null) ||
      missing="unknown"
    if [ -z "$missing" ]; then el "$v: nothing left to measure"; continue; fi
  fi
  want=$need
  case " $missing " in *"/variant~$v/accuracy"*|" unknown "|"  ") want=$(( need + acc_s )) ;; esac
  if [ -z "$first" ] && [ "$left" -lt "$want" ]; then
    el "$v: ${left}s left in this call, it needs ~${want}s: the next call starts with it"
    break
  fi
  el "$v: ${left}s left (needs ~${want}s): ${missing:+$(echo "$missing" | wc -w) file(s)}${missing:-all} to make"
  VARIANTS="$v" CALL_BUDGET_S=$left tools/device/run-study.sh "$CONFIG" "$@"
  { echo "===== $v ($(date -u +%FT%TZ))"; cat /tmp/run-study.log 2>/dev/null; } >> "${OUT:-/tmp}/run-sitting.log"
  first=""
done
el "done; results of $study: $(find "results/$study" -name '*.parquet' 2>/dev/null | wc -l) Parquet file(s)"
exit 0

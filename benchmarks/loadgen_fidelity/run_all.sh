#!/usr/bin/env bash
# Every measurement of RESULTS.md, in one go. Hold the heavy lock: flock /tmp/worthit-heavy.lock benchmarks/loadgen_fidelity/run_all.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venvs/workflow/bin/python
B=benchmarks/loadgen_fidelity
uptime
$PY $B/run.py calibration --out $B/calibration-1x1.json || echo "FAILED: $PY $B/run.py calibration --out $B/calibration-1x1.json"
$PY $B/run.py calibration --server-workers 2 --client-processes 2 --tools worthit --levels 64,256 --out $B/calibration-2x2.json || echo "FAILED: $PY $B/run.py calibration --server-workers 2 --client-processes 2 --tools worthit --levels 64,256 --out $B/calibration-2x2.json"
$PY $B/run.py calibration --server-workers 2 --tools worthit,vllm_bench --levels 256 --out $B/calibration-2x1.json || echo "FAILED: $PY $B/run.py calibration --server-workers 2 --tools worthit,vllm_bench --levels 256 --out $B/calibration-2x1.json"
$PY $B/run.py vllm || echo "FAILED: $PY $B/run.py vllm"
uptime
# and the load generator's integration tests on real vLLM, while the lock is held
.venvs/workflow/bin/python -m pytest tests/integration/test_loadgen_vllm.py -q -p no:cacheprovider || true

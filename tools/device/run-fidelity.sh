#!/usr/bin/env bash
# The load generator against `vllm bench serve` on one H200
# (benchmarks/loadgen_fidelity/served.py): Qwen2.5-Coder-0.5B-Instruct served by vLLM 0.25, worthit's client
# and vllm bench alternating on the one server, with and without each other's sampling, every run bracketed
# by the server's /metrics. After the parts (tools/device/make-qwen-parts.sh; the 0.5B travels first, so the
# parts up to its end are enough: `WARMUP=1 tools/device/receive.sh`, one call per part):
#   WARMUP=1 CALL_BUDGET_S=585 tools/device/run-fidelity.sh [served.py measure args...]
# WARMUP=1: the machine's warm-up (tools/device/warmup.sh), started by the transfer calls once the wheels are in,
# is waited for, so the server's start does not compile this machine's kernels in the call's time: on a fresh
# H100 without it the 0.5B's engine took 118 s to start (94 s of it after CUDA-graph capture) and a 285 s call
# ended before its first measured run at 256 streams (benchmarks/loadgen_fidelity/RESULTS.md).
# Writes $OUT/served-gpu.json (the machine recorded in it) and its server log; `served.py report` turns it into
# RESULTS.md's table.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
t0=$(date +%s); el() { echo "[run-fidelity +$(( $(date +%s) - t0 ))s] $*"; }
budget=${CALL_BUDGET_S:-570}
python3 tools/device/parts.py receive >/dev/null 2>&1  # a part carried with this call, if any
[ -n "${WARMUP:-}" ] && { tools/device/warmup.sh after-wheels || exit 1; }
tools/device/prepare.sh wait wheels q05 || exit 1
[ -n "${WARMUP:-}" ] && tools/device/warmup.sh wait
el "prepared: $(cat /tmp/stage/*.log 2>/dev/null | grep -E ' done in ' | tr '\n' ' ')"
export PYTHONPATH=/tmp/site:$PWD/src
nvidia-smi --query-gpu=name,uuid,driver_version,compute_cap,memory.total --format=csv,noheader
python3 benchmarks/loadgen_fidelity/served.py measure --model /tmp/qwen/coder-0.5b --served-name qwen05 \
  --serve-cmd "python3 -m vllm.entrypoints.openai.api_server" \
  --serve-args "--gpu-memory-utilization 0.9 --max-model-len 8192" \
  --vllm-cmd "python3 -m vllm.entrypoints.cli.main" \
  --levels 1,16,64,256 --prompt-tokens 512 --output-tokens 256 --repeats 2 \
  --budget-s $(( budget - ($(date +%s) - t0) - 60 )) --out "$OUT/served-gpu.json" "$@"
el "served.py exit $?"
python3 benchmarks/loadgen_fidelity/served.py report "$OUT/served-gpu.json"
exit 0

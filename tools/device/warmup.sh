#!/usr/bin/env bash
# The machine's warm-up before a measurement session's first server (tools/device/warmup.py;
# examples/h200-qwen/README.md), once per machine, in the background (setsid: it outlives the call that starts it), and the
# carried vLLM's `vllm serve --help=all` kept as evidence of what it accepts (kv-cache-dtype choices, ...).
#   warmup.sh bg     start it if the wheels are installed (tools/device/prepare.sh) and it never ran here
#   warmup.sh after-wheels   wait for the wheels (prepare.sh wait wheels; exit 1 if they fail), then bg: what a
#                    sitting's call starts before it waits for its model's conversion
#   warmup.sh wait   start it if it never ran, wait for it (at most WARMUP_MAX_S, default 300 s from its
#                    start; then it is stopped), and print what it took; the GPU is free afterwards
# Logs: /tmp/stage/warmup.log, /tmp/stage/vllm-serve-help.txt (in run-study.sh's device-logs.tgz).
set -uo pipefail
S=/tmp/stage W=/tmp/warm
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$S" "$W"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

start() {
  [ -f /tmp/site/.done ] || { echo "warm-up: the wheels are not installed yet"; return 0; }
  [ -f "$S/warmup.started" ] && return 0
  date +%s > "$S/warmup.started"
  cp "$REPO/tools/device/warmup.py" "$W/warmup.py"  # a later call may replace the working tree
  setsid nohup bash -c "
    echo \$\$ > $S/warmup.pid  # the session's leader: its process group holds vLLM's engine core too
    cd $W
    { date -u +%FT%TZ; PYTHONPATH=/tmp/site python3 -m vllm.entrypoints.cli.main serve --help=all; } \
      > $S/vllm-serve-help.txt 2>&1
    # worthit's supervisor checks each server's engine arguments against these flags: keep them for it now
    PYTHONPATH=/tmp/site:$REPO/src python3 -c 'import sys; from worthit import vllm_flags as V; print(\"flags kept:\", V.remember(\"python3\", open(sys.argv[1]).read()))' $S/vllm-serve-help.txt
    echo \"warm-up started \$(date -u +%FT%TZ)\"
    VLLM_CACHE_ROOT=$W/cache PYTHONPATH=/tmp/site python3 $W/warmup.py $W/model
    echo \"warm-up exit \$? \$(date -u +%FT%TZ)\"
    touch $S/warmup.done
  " >> "$S/warmup.log" 2>&1 < /dev/null &
  echo "warm-up started in the background (log $S/warmup.log)"
}

case "${1:-}" in
  bg) start ;;
  after-wheels) "$REPO/tools/device/prepare.sh" wait wheels || exit 1; start ;;
  wait)
    start
    [ -f "$S/warmup.started" ] || exit 0
    deadline=$(( $(cat "$S/warmup.started") + ${WARMUP_MAX_S:-300} ))
    while [ ! -f "$S/warmup.done" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 2; done
    if [ ! -f "$S/warmup.done" ]; then
      echo "warm-up: not finished after ${WARMUP_MAX_S:-300} s, stopped"
      kill -TERM -- "-$(cat "$S/warmup.pid")" 2>/dev/null; sleep 10; kill -KILL -- "-$(cat "$S/warmup.pid")" 2>/dev/null
      touch "$S/warmup.done"
    fi
    for _ in $(seq 1 30); do  # its engine core must have let go of the GPU
      [ -z "$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null)" ] && break; sleep 1
    done
    grep -E "warm-up|init engine|Graph capturing finished|torch.compile took|Compiling a graph|Kernel JIT|Error|error" \
      "$S/warmup.log" | grep -v "^\s*$" | tail -15
    grep -m1 -A12 -- "--kv-cache-dtype" "$S/vllm-serve-help.txt" | head -14
    ;;
  *) sed -n '2,10p' "$0"; exit 2 ;;
esac
exit 0

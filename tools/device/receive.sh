#!/usr/bin/env bash
# One transfer call on the device machine (examples/h200-qwen/README.md): keep the part carried in this
# call (.gpu-qNN/), then start in the background whatever the parts so far allow (tools/device/prepare.sh).
#   device run: carry [".gpu-qNN"], command: tools/device/receive.sh   (WARMUP=1 ...: see tools/device/warmup.sh)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [ ! -f /tmp/stage/machine.txt ]; then
  mkdir -p /tmp/stage
  { date -u +%FT%TZ; nvidia-smi --query-gpu=name,uuid,driver_version,compute_cap,memory.total --format=csv,noheader
    python3 -c 'import sys, torch, transformers; print(sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)'
    nproc
    python3 -c 'import sys; print("dont_write_bytecode", sys.flags.dont_write_bytecode)'
    ls -d /opt/torch/.venv/lib/python3*/site-packages/torch/__pycache__ 2>&1 | head -1; } > /tmp/stage/machine.txt 2>&1
  cat /tmp/stage/machine.txt
fi
python3 tools/device/parts.py receive || exit 1
tools/device/prepare.sh bg
# WARMUP=1: once the wheels are in, a throwaway engine fills this machine's kernel caches (tools/device/warmup.sh)
[ -n "${WARMUP:-}" ] && tools/device/warmup.sh bg
for s in wheels q15 q05; do
  [ -f /tmp/stage/$s.failed ] && { echo "$s FAILED:"; tail -5 /tmp/stage/$s.log; }
  [ -f /tmp/stage/$s.done ] && echo "$s done"
done
exit 0

#!/usr/bin/env bash
# `worthit tune` on the H200 device machine (examples/h200-qwen/README.md, "The tune on an H100"), after the
# parts were carried (tools/device/receive.sh, one call per part):
#   CALL_BUDGET_S=585 tools/device/run-tune.sh config/studies/h200-qwen2.5-coder-tune.yaml [tune args...]
#   WARMUP=1 ...    before the first server, a throwaway engine fills the machine's kernel caches
# Waits for the preparation (wheels, the 1.5B's conversion: tools/device/prepare.sh), then starts the tune
# in the background (setsid: it outlives the call, as the preparation does) and follows it until the call's
# budget is nearly spent; the same command in the next call (within the machine's idle release) follows the
# same tune on, so no server start or level is cut at a call's end. STOP=1 (a sitting's last call, or one
# before a break) sends it SIGTERM at the budget instead: the running round's Snakemake stops its servers,
# keeps what finished (--keep-incomplete), no candidate is told an outcome, and the same command on that
# machine resumes the search, measuring nothing twice. Each call packs results/<study>-tune* and the model
# manifests into $OUT/results.tgz (results.tgz.NN past 15 MiB; a snapshot: every Parquet file is written
# whole or not at all), with the tune's log so far as $OUT/run-tune.log.
set -uo pipefail
CONFIG=$1; shift
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s); el() { echo "[run-tune +$(( $(date +%s) - t0 ))s] $*"; }
budget=${CALL_BUDGET_S:-570}
grace=${STOP_GRACE_S:-30}
python3 tools/device/parts.py receive >/dev/null 2>&1  # a part carried with this call, if any
[ -n "${WARMUP:-}" ] && { tools/device/warmup.sh after-wheels || exit 1; }
tools/device/prepare.sh wait wheels q15 || exit 1
[ -n "${WARMUP:-}" ] && tools/device/warmup.sh wait
el "prepared: $(cat /tmp/stage/*.log 2>/dev/null | grep -E ' done in ' | tr '\n' ' ')"
export PYTHONPATH=/tmp/site:$PWD/src
nvidia-smi --query-gpu=name,uuid,driver_version,compute_cap,memory.total --format=csv,noheader
study=$(python3 -c "import yaml; print(yaml.safe_load(open('$CONFIG'))['study'])")
# a workflow left by a tune that was killed outright (not one this machine's follow.sh still runs): stop it
# before its lock is taken from it (two Snakemakes on one round would each start its servers), lift its lock
if ! { [ -s /tmp/follow-tune.pid ] && kill -0 "$(cat /tmp/follow-tune.pid)" 2>/dev/null; }; then
  pkill -TERM -f "snakemake.*$study-tune/tune/study.yaml" 2>/dev/null
  for _ in $(seq 1 30); do pgrep -f "snakemake.*$study-tune/tune/study.yaml" >/dev/null || break; sleep 1; done
  python3 -m snakemake --unlock -s Snakefile -d . --configfile "results/$study-tune/tune/study.yaml" \
    >/dev/null 2>&1
  rm -f /tmp/follow-tune.rc  # a stopped tune (STOP=1) is resumed by this call
fi
gpu=${GPU:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)}  # the plan's prunes: this card
FOLLOW_UNTIL=$(( t0 + budget - grace - 20 )) STOP_GRACE_S=$grace FOLLOW_DROP="clean_up_tokenization|OMP_NUM_THREADS|APIServer pid" \
  tools/device/follow.sh tune -- python3 -m worthit.cli tune --config "$CONFIG" --cores 8 --gpu "$gpu" \
  --model-config qwen-coder-1.5b=/tmp/qwen/coder-1.5b/config.json --no-hub "$@" -- --keep-incomplete
tools/device/pack-results.sh results/"$study"-tune*
cp /tmp/follow-tune.log "$OUT/run-tune.log"
el "packed: $(ls "$OUT" | tr '\n' ' ')"
exit 0

#!/usr/bin/env bash
# `worthit tune` on the H200 device machine (examples/h200-qwen/README.md, "The tune on an H100"), after the
# parts were carried (tools/device/receive.sh, one call per part):
#   CALL_BUDGET_S=585 tools/device/run-tune.sh config/studies/h200-qwen2.5-coder-tune.yaml [tune args...]
#   WARMUP=1 ...    before the first server, a throwaway engine fills the machine's kernel caches
# Waits for the preparation (wheels, the 1.5B's conversion: tools/device/prepare.sh), then runs the tune's
# rounds and confirmation until the call's budget is nearly spent. Then it sends the tune SIGTERM: the
# running round's Snakemake stops its servers, keeps what finished (--keep-incomplete), and no candidate is
# told an outcome; the same command in the next call (same machine: results/ stays) resumes the search where
# it stopped, measuring nothing twice. Packs results/<study>-tune* and the model manifests into
# $OUT/results.tgz (results.tgz.NN past 15 MiB), with the tune's log as $OUT/run-tune.log.
set -uo pipefail
CONFIG=$1; shift
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s); el() { echo "[run-tune +$(( $(date +%s) - t0 ))s] $*"; }
budget=${CALL_BUDGET_S:-570}
grace=${STOP_GRACE_S:-30}
python3 tools/device/parts.py receive >/dev/null 2>&1  # a part carried with this call, if any
if [ -n "${WARMUP:-}" ]; then
  tools/device/prepare.sh wait wheels || exit 1
  tools/device/warmup.sh bg
fi
tools/device/prepare.sh wait wheels q15 || exit 1
[ -n "${WARMUP:-}" ] && tools/device/warmup.sh wait
el "prepared: $(cat /tmp/stage/*.log 2>/dev/null | grep -E ' done in ' | tr '\n' ' ')"
export PYTHONPATH=/tmp/site:$PWD/src
nvidia-smi --query-gpu=name,uuid,driver_version,compute_cap,memory.total --format=csv,noheader
study=$(python3 -c "import yaml; print(yaml.safe_load(open('$CONFIG'))['study'])")
# a previous call's workflow ends with its tune (worthit's guard); should one still run, stop it before its
# lock is taken from it: two Snakemakes on one round would each start its servers
pkill -TERM -f "snakemake.*$study-tune/tune/study.yaml" 2>/dev/null
for _ in $(seq 1 30); do pgrep -f "snakemake.*$study-tune/tune/study.yaml" >/dev/null || break; sleep 1; done
python3 -m snakemake --unlock -s Snakefile -d . --configfile "results/$study-tune/tune/study.yaml" \
  >/dev/null 2>&1  # a call's end that killed the workflow outright leaves its lock
: > /tmp/run-tune.log
gpu=${GPU:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)}  # the plan's prunes: this card
python3 -m worthit.cli tune --config "$CONFIG" --cores 8 --gpu "$gpu" \
  --model-config qwen-coder-1.5b=/tmp/qwen/coder-1.5b/config.json --no-hub "$@" -- --keep-incomplete \
  >> /tmp/run-tune.log 2>&1 &
pid=$!
end=$(( t0 + budget - grace - 20 ))
while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do sleep 2; done
if kill -0 "$pid" 2>/dev/null; then
  el "budget reached: the tune is asked to stop (SIGTERM); the next call resumes it"
  kill -TERM "$pid"
  for _ in $(seq 1 "$grace"); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL "$pid" 2>/dev/null
fi
wait "$pid"; rc=$?
grep -vE "^\s*$" /tmp/run-tune.log | grep -vE "clean_up_tokenization|OMP_NUM_THREADS" | tail -80
el "worthit tune exit $rc"
tools/device/pack-results.sh results/"$study"-tune*
cp /tmp/run-tune.log "$OUT/run-tune.log"
el "packed: $(ls "$OUT" | tr '\n' ' ')"
exit 0

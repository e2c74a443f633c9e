#!/usr/bin/env bash
# Build and install the carried sdists (/tmp/whl/src, tools/device/vllm-0.25.0-extra-sdists.txt) into /tmp/site,
# against the image's torch, cmake, ninja and nanobind (no build isolation: nothing can be fetched here).
# prepare.sh and run-study.sh call it after installing the wheels; nothing to do when no sdist travelled.
#   PY=python3 tools/device/build-sdists.sh
set -uo pipefail
PY=${PY:-python3}
ls /tmp/whl/src/*.tar.gz >/dev/null 2>&1 || exit 0
for sd in /tmp/whl/src/*.tar.gz; do
  t=$(date +%s)
  if PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} "$PY" -m pip install -q --no-index --no-deps --no-compile \
      --no-cache-dir --no-build-isolation --target /tmp/site "$sd" > /tmp/build-sdists.log 2>&1; then
    echo "built $(basename "$sd") into /tmp/site in $(( $(date +%s) - t )) s"
  else  # a method that needs it is then refused by the plan (its package does not import), the rest runs
    echo "could not build $(basename "$sd") (/tmp/build-sdists.log): $(tail -1 /tmp/build-sdists.log)"
  fi
done

#!/usr/bin/env bash
# Packs a sitting's results for the trip back: tools/device/pack-results.sh PATH... writes the PATHs (globs
# expanded by the caller; missing ones skipped) and the model manifests as $OUT/results.tgz, split into
# results.tgz.NN past 15 MiB (what a run's $OUT brings back per file). The next call resumes from them
# (run-study.sh reads .gpu-results/results.tgz*). Used by run-study.sh and run-tune.sh.
set -uo pipefail
tar czf /tmp/results.tgz "$@" resources/models/*/manifest.json 2>/dev/null
if [ "$(stat -c %s /tmp/results.tgz)" -le $((15 * 1024 * 1024)) ]; then
  cp /tmp/results.tgz "$OUT/results.tgz"
else
  split -b 15M -d /tmp/results.tgz "$OUT/results.tgz."
fi

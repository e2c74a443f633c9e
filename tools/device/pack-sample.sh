#!/usr/bin/env bash
# Make the resume tarball .gpu-results/results.tgz from a committed sample, for a measurement session on a fresh
# machine whose last call's tarball is gone (it is git-ignored, kept only in the checkout that made it):
#   tools/device/pack-sample.sh [SAMPLE [CONFIG]]   # default examples/h200-qwen, config/studies/h200-qwen2.5-coder.yaml
# The sample's measurements are on the evidence branch (examples/README.md): give SAMPLE in its checkout, e.g.
# ../worthit-evidence/examples/h200-qwen.
# Carries the sample's results/ (measurements, logs, Snakemake benchmark files) as results/<study>/ and its
# model manifests as resources/models/ (not those of quantised models: made again there); the rendered
# report stays behind (the workflow rebuilds it). lm-eval's raw folders, left out of the sample, come back
# empty: the accuracy rule's directory output, whose scores are in accuracy_samples.parquet. run-study.sh unpacks it on a machine with no results of the study.
#   REMEASURE="variant~bf16_control/load/conc~64.rep~3 ..." tools/device/pack-sample.sh
# leaves those results (paths below the sample's results/, .parquet optional) out of the tarball, so the
# session measures them again on its machine: a control's runs beside a candidate's missing ones, so that
# each run of both sides is measured on one machine (the report counts them as one machine).
#   REMEASURE_VARIANTS="bf16 spec_draft draft_alone" tools/device/pack-sample.sh
# leaves out every timed result of those variants (load, prefix, kv, specdec/verify: every table but accuracy,
# whose item scores no machine sets; worthit.report.context.MACHINE_FREE_TABLES, read by
# tools/device/timed_results.py from each file's metadata), so a session measures each of them whole on its one
# machine (examples/h200-qwen/h100-prefix-fp8-kv).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SAMPLE=${1:-examples/h200-qwen}
CONFIG=${2:-config/studies/h200-qwen2.5-coder.yaml}
study=$(sed -n 's/^study: *//p' "$CONFIG" | tr -d '"'"'"' ')
[ -n "$study" ] || { echo "$CONFIG: no 'study:' line" >&2; exit 1; }
[ -d "$SAMPLE/results" ] || { echo "$SAMPLE/results: no such folder" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/results/$study" "$tmp/resources/models"
cp -a "$SAMPLE/results/." "$tmp/results/$study/"
rm -rf "$tmp/results/$study/report" "$tmp/results/$study/report.html"
for r in ${REMEASURE:-}; do
  f="$tmp/results/$study/${r%.parquet}.parquet"
  [ -f "$f" ] || { echo "REMEASURE: $SAMPLE/results/${r%.parquet}.parquet: no such result" >&2; exit 1; }
  rm -f "$f" && echo "left out (measured again): ${r%.parquet}"
done
for v in ${REMEASURE_VARIANTS:-}; do
  d="$tmp/results/$study/variant~$v"
  [ -d "$d" ] || { echo "REMEASURE_VARIANTS: $SAMPLE/results/variant~$v: no such variant in the sample" >&2; exit 1; }
  n=$(PYTHONPATH=src "${PYTHON:-.venvs/workflow/bin/python}" tools/device/timed_results.py "$d" --delete | wc -l)
  echo "left out (measured again): $v's $n timed result(s)"
done
for f in "$tmp/results/$study"/variant~*/accuracy.parquet; do
  [ -e "$f" ] && mkdir -p "$(dirname "$f")/accuracy"
done
# A quantised model's manifest stays behind: its weights are not carried, so the device makes it again.
for m in "$SAMPLE"/models/*/manifest.json; do
  [ -e "$m" ] || continue
  grep -q '"source": *"quantize:' "$m" && continue
  mkdir -p "$tmp/resources/models/$(basename "$(dirname "$m")")" && cp -a "$m" "$tmp/resources/models/$(basename "$(dirname "$m")")/"
done
mkdir -p .gpu-results
rm -f .gpu-results/results.tgz*
tar czf .gpu-results/results.tgz -C "$tmp" results resources
echo ".gpu-results/results.tgz: $(du -h .gpu-results/results.tgz | cut -f1) ($(tar tzf .gpu-results/results.tgz | wc -l) entries) from $SAMPLE for study $study"

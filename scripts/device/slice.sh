#!/usr/bin/env bash
# One slice of an H200 campaign inside a device call: resume the plan's sweep on the jobs whose names
# contain one of PATTERNs, starting no job after START_BY seconds, and bring back only the reports this
# slice wrote, as $OUT/new-<time>.tgz (the device returns few files per call).
# Usage (on the device, from the repo root): [PLAN=data/measurements/h200/graph/plan.toml] \
#   scripts/device/slice.sh START_BY [PATTERN...]     (no PATTERN: every pending job)
# PLAN defaults to the eager engine's campaign; its committed reports are in <plan dir>/raw.
source scripts/device/env.sh
PLAN=${PLAN:-data/measurements/h200/plan.toml}
start_by=$1; shift
only=(); for p in "$@"; do only+=(--only "$p"); done
# The sweep writes outside $OUT (few files come back from it): only the bundles go there.
W=/tmp/slice; rm -rf "$W"; mkdir -p "$W/raw"
cp "$(dirname "$PLAN")"/raw/*.json "$W/raw/" 2>/dev/null   # so the sweep skips every committed job
touch "$W/.mark"; t0=$(date +%s)
stamp=$(date +%s)
# Bundle what this slice wrote so far, every 15 s and at the end: a call cut at its limit still
# brings back every finished job.
bundle() { (cd "$W" && find raw -type f -name '*.json' -newer .mark | tar czf "$OUT/new-$stamp.tmp" -T - && mv "$OUT/new-$stamp.tmp" "$OUT/new-$stamp.tgz"); }
(while sleep 15; do bundle; done) & bundler=$!
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader
$QE sweep "$PLAN" --out "$W/raw" "${only[@]}" --time-budget-s "$start_by" 2>&1 \
  | grep -E "jobs in the plan|wrote .*basis|mJ/token|FAILED|failed|stopping|error|panick"
echo "=== slice $* done after $(( $(date +%s) - t0 )) s"
kill $bundler 2>/dev/null; wait $bundler 2>/dev/null
bundle

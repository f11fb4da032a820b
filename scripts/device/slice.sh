#!/usr/bin/env bash
# One slice of the H200 campaign (issue 6) inside a device call: resume the plan's sweep on the jobs
# whose names contain one of PATTERNs, starting no job after START_BY seconds, and bring back only the
# reports this slice wrote, as $OUT/new-<time>.tgz (the device returns few files per call).
# Usage (on the device, from the repo root): scripts/device/slice.sh START_BY PATTERN...
source scripts/device/env.sh
start_by=$1; shift
only=(); for p in "$@"; do only+=(--only "$p"); done
mkdir -p "$OUT/raw"
cp data/measurements/h200/raw/*.json "$OUT/raw/"   # so the sweep skips every committed job
touch "$OUT/.mark"; t0=$(date +%s)
$QE sweep data/measurements/h200/plan.toml --out "$OUT/raw" "${only[@]}" --time-budget-s "$start_by" 2>&1 \
  | grep -E "jobs in the plan|wrote .*basis|mJ/token|FAILED|stopping|error" 
echo "=== slice $* done after $(( $(date +%s) - t0 )) s"
(cd "$OUT" && find raw -type f -name '*.json' -newer .mark | tar czf "new-$(date +%s).tgz" -T - && rm -rf raw .mark)

#!/usr/bin/env bash
# On the GPU machine, one call:
#  1. the GPU binding: `CUDA_VISIBLE_DEVICES` (an index, a UUID prefix) resolved to the card by UUID —
#     probe, then a short measurement bound to the last card, whose report must name that card;
#  2. a real sweep stopped by SIGTERM in the middle of a job, then resumed: what was left, what ran again.
# Everything goes to $OUT/faults.log and $OUT/faults.tgz. Usage (repo root): scripts/device/faults.sh
source scripts/device/env.sh
set -u
exec > >(tee "$OUT/faults.log") 2>&1
W=/tmp/qe-faults
rm -rf "$W" && mkdir -p "$W"
nvidia-smi --query-gpu=index,uuid,name,driver_version --format=csv,noheader
n=$(nvidia-smi -L | wc -l)
last=$((n - 1))
uuid_last=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i "$last")

echo "=== 1. binding ($n card(s); the last is NVML index $last, $uuid_last)"
for v in unset "$last" "${uuid_last:0:12}"; do
  echo "--- CUDA_VISIBLE_DEVICES=$v"
  if [ "$v" = unset ]; then $QE probe; else CUDA_VISIBLE_DEVICES=$v $QE probe; fi | grep -E "^(uuid|binding)"
done
echo "--- CUDA_VISIBLE_DEVICES=MIG-x (refused)"
CUDA_VISIBLE_DEVICES=MIG-x $QE probe
CUDA_VISIBLE_DEVICES=$last $QE measure --synthetic qwen2-0.5b --precision Q4_K --tokens 64 --iterations 3 \
  --warmup 1 --cooldown-max-s 5 --out "$W/bind" --name bound 2>&1 | grep -E "^wrote|mJ/token"
python3 - "$W/bind/bound.json" "$uuid_last" "$last" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); env = r["environment"]
ok = env.get("gpu_uuid") == sys.argv[2] and env.get("visible_devices") == sys.argv[3]
print(f"report: gpu_uuid {env.get('gpu_uuid')}, visible_devices {env.get('visible_devices')!r}, "
      f"basis {r['results']['basis']}: {'BOUND CARD OK' if ok else 'MISMATCH'}")
PY

echo "=== 2. a sweep stopped by SIGTERM mid-job, then resumed"
cat >"$W/plan.toml" <<'EOF'
out = "raw"
session = "h200-faults-2026-11-30"
[defaults]
engine = "graph"
repeats = 3
tokens = 128
iterations = 5
warmup = 1
cooldown_max_s = 10
[[run]]
synthetic = "qwen2-0.5b"
precisions = ["Q4_K"]
EOF
t0=$(date +%s.%N)
$QE sweep "$W/plan.toml" >"$W/sweep1.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -e "$W/raw/qwen2-0.5b_b1_r1_Q4_K.json" ] && break; sleep 0.2; done
sleep 6
echo "--- the sweep's job process before the signal:"; ps -o pid,etimes,args --ppid "$pid" | cut -c1-160
kill -TERM "$pid"
wait "$pid"; rc=$?
t1=$(date +%s.%N)
echo "sweep exit status $rc ($(python3 -c "print(f'{$t1-$t0:.1f}')") s after start)"
echo "--- its last lines:"; tail -n 4 "$W/sweep1.log" | cut -c1-200
echo "--- files left:"; ls -a "$W/raw"
echo "--- GPU processes left:"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
echo "--- resume:"
$QE sweep "$W/plan.toml" --dry-run
t2=$(date +%s.%N)
$QE sweep "$W/plan.toml" 2>&1 | grep -E "jobs in the plan|^wrote|FAILED|error" | cut -c1-160
echo "resume took $(python3 -c "print(f'{$(date +%s.%N)-$t2:.1f}')") s"
ls "$W/raw"
$QE aggregate "$W/raw" --markdown
tar czf "$OUT/faults.tgz" -C "$W" raw bind plan.toml sweep1.log

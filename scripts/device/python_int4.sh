#!/usr/bin/env bash
# Issue 34 on the GPU: why scripts/peers/torch_compile.py ran 19 % under a gpt-fast-style decode, and
# the wheel's Campaign over torch.compile FP16 / BF16 / weight-only int4. Carry .ship (the wheel).
#   bash scripts/device/python_int4.sh gap        torch_compile.py F16, inductor defaults vs gpt-fast's
#                                                 settings, alternating (two pairs), then int4 once
#   bash scripts/device/python_int4.sh campaign   python_campaign.py --repeats 3 (FP16, BF16, INT4-WO)
# Writes $OUT/*.json (gap) or $OUT/int4.tgz (campaign); the inductor cache lives in /tmp while the machine stays warm.
set -uo pipefail
PY=${PY:-/opt/torch/.venv/bin/python}
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/site
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit --format=csv,noheader
case "${1:-}" in
  gap)
    for i in 1 2; do
      for prof in default gpt-fast; do
        $PY scripts/peers/torch_compile.py --shape qwen2-0.5b --arm f16 --inductor $prof \
          --out "$OUT/gap-f16-$prof-$i.json" 2>&1 | tail -1
      done
    done
    $PY scripts/peers/torch_compile.py --shape qwen2-0.5b --arm int4 --inductor gpt-fast \
      --out "$OUT/gap-int4-gpt-fast.json" 2>&1 | tail -1
    ;;
  campaign)
    [ -e /tmp/site/quantenergy ] || $PY -m pip install -q --no-deps --target /tmp/site .ship/quantenergy-*.whl
    # A call returns at most 8 files: the campaign's reports come back as one archive.
    rm -rf /tmp/int4 && mkdir -p /tmp/int4
    PYTHONPATH=/tmp/site $PY scripts/device/python_campaign.py --shape qwen2-0.5b --repeats 3 \
      --session python-int4-2026-12-03 --out /tmp/int4 2>&1 | grep -v Warning
    tar czf "$OUT/int4.tgz" -C /tmp int4
    ;;
  *) echo "usage: $0 gap|campaign" >&2; exit 2 ;;
esac

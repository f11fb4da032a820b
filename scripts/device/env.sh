# Sourced on the GPU machine: unpack the carried meter binary, point it at the driver's NVML and
# the CUDA 13 libraries of the machine's torch install (cuBLAS, cuRAND, NVRTC).
set -u
mkdir -p /tmp/qe
# Unpacked beside and renamed over: a slice running at once on the other GPU (llama_pair.sh) may be
# executing the binary, which cannot be opened for writing then.
# xz when a call carries several builds (a call carries 64 MiB), else build-cuda.sh's gzip.
if [ -f .ship/quantenergy.xz ]; then unpack="xz -dc .ship/quantenergy.xz"; else unpack="gunzip -c .ship/quantenergy.gz"; fi
$unpack > /tmp/qe/quantenergy.$$ && chmod +x /tmp/qe/quantenergy.$$ \
  && mv -f /tmp/qe/quantenergy.$$ /tmp/qe/quantenergy
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export QE=/tmp/qe/quantenergy PYTHONUNBUFFERED=1 RUST_LOG=${RUST_LOG:-info}

# Stop llama-server processes a killed call left behind (the meter's children outlive it), and wait
# until they are gone: a live one draws power and holds GPU memory under the next job. -x matches
# the process name, never a shell whose command line mentions it. Returns 1 when none was running.
stop_llama_servers() {
  pgrep -x llama-server > /dev/null || return 1
  pkill -x llama-server
  for _ in $(seq 30); do pgrep -x llama-server > /dev/null || return 0; sleep 1; done
  pkill -9 -x llama-server; sleep 1; return 0
}

# Delete half-written GGUFs and those of shapes not named (kept by an earlier call for shapes this
# one will not run): /tmp/gguf/<shape>-<type>.gguf, 14 B's F16 maybe in /dev/shm.
prune_ggufs() {
  rm -f /tmp/gguf/*.part /dev/shm/*.gguf.part
  local f s keep
  for f in /tmp/gguf/*.gguf /dev/shm/*.gguf; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    keep=
    for s in "$@"; do case "$(basename "$f")" in "$s"-*.gguf) keep=1 ;; esac; done
    [ -n "$keep" ] || rm -f "$f"
  done
}

# Other builds of the meter carried as .ship/quantenergy-NAME.xz, unpacked to /tmp/qe/NAME.
unpack_builds() {
  local x n
  for x in .ship/quantenergy-*.xz; do
    [ -f "$x" ] || continue
    n=${x#.ship/quantenergy-}; n=${n%.xz}; xz -dc "$x" > "/tmp/qe/$n" && chmod +x "/tmp/qe/$n"
  done
}

# A run's setting into $bin and $env: `default` (the carried meter), VAR=VALUE for it, or NAME (an
# unpacked build), each optionally with variables joined by `+` (`base+QE_ATTN_U=4+QE_FOLD_KV=0`).
setting() {
  local s=$1 b=${1%%+*}
  env=""; bin=$QE
  [ "$b" = "$s" ] || env=${s#*+}
  case $b in default) ;; *=*) env=$s ;; *) bin=/tmp/qe/$b ;; esac
  env=${env//+/ }
}

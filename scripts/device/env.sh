# Sourced on the GPU machine: unpack the carried meter binary, point it at the driver's NVML and
# the CUDA 13 libraries of the machine's torch install (cuBLAS, cuRAND, NVRTC).
set -u
mkdir -p /tmp/qe
# Unpacked beside and renamed over: a slice running at once on the other GPU (llama_pair.sh) may be
# executing the binary, which cannot be opened for writing then.
gunzip -c .ship/quantenergy.gz > /tmp/qe/quantenergy.$$ && chmod +x /tmp/qe/quantenergy.$$ \
  && mv -f /tmp/qe/quantenergy.$$ /tmp/qe/quantenergy
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export QE=/tmp/qe/quantenergy PYTHONUNBUFFERED=1 RUST_LOG=${RUST_LOG:-info}

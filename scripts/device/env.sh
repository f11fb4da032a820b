# Sourced on the GPU machine: unpack the carried meter binary, point it at the driver's NVML and
# the CUDA 13 libraries of the machine's torch install (cuBLAS, cuRAND, NVRTC).
set -u
mkdir -p /tmp/qe
gunzip -c .ship/quantenergy.gz > /tmp/qe/quantenergy && chmod +x /tmp/qe/quantenergy
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib:${LD_LIBRARY_PATH:-}
export QE=/tmp/qe/quantenergy PYTHONUNBUFFERED=1 RUST_LOG=${RUST_LOG:-info}

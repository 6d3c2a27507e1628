#!/usr/bin/env bash
# Builds the calibration harness (src/calib/hip/) for the GPU at hand and runs it:
#   scripts/calib-hip.sh OUT.csv [harness options: --quick, --reps N, --only ...]
# hipcc (AMD; hipBLASLt when its headers are installed) or nvcc (NVIDIA through
# hip_compat.h; cuBLASLt). Appends the framework's fused attention timings
# (scripts/calib-attention.py, where PyTorch sees a GPU) and the clocks and power limit the
# vendor's tool reports. Then: madmax calibrate --from-csv OUT.csv --device hardware/devices/X.json
# MM_CALIB_ARCH overrides the target (gfx90a, gfx942, sm_90, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/calib-hip.sh OUT.csv [--quick] [--reps N] [--only LIST]}
shift
bin=build/madmax-calib
mkdir -p build
src=src/calib/hip/calib.cpp
if command -v nvcc >/dev/null; then
  arch=${MM_CALIB_ARCH:-native}
  if ! nvcc -O2 -std=c++17 -arch="$arch" -DMM_CALIB_BLASLT=1 -o "$bin" -x cu "$src" -lcublasLt 2>build/madmax-calib.log; then
    cat build/madmax-calib.log >&2
    echo "calib-hip: cuBLASLt build failed; building the tiled kernel only" >&2
    nvcc -O2 -std=c++17 -arch="$arch" -o "$bin" -x cu "$src"
  fi
  smi() { nvidia-smi --query-gpu="$1" --format=csv,noheader 2>/dev/null | head -1 || true; }
  power=$(smi power.limit) sm=$(smi clocks.max.sm) name=$(smi name) vbios=$(smi vbios_version)
elif command -v hipcc >/dev/null; then
  arch=${MM_CALIB_ARCH:-native}
  blas=()
  if [ -f /opt/rocm/include/hipblaslt/hipblaslt.h ] || [ -f /usr/include/hipblaslt/hipblaslt.h ]; then
    blas=(-DMM_CALIB_BLASLT=1 -lhipblaslt)
  fi
  hipcc -O2 -std=c++17 --offload-arch="$arch" "${blas[@]:0:1}" -o "$bin" "$src" "${blas[@]:1}"
  power=$(rocm-smi --showmaxpower 2>/dev/null | grep -m1 -oE '[0-9.]+ *W?$' || true)
  sm=$(rocm-smi --showclocks 2>/dev/null | grep -m1 -oE 'sclk.*' || true) name="" vbios=""
else
  echo "calib-hip: neither nvcc nor hipcc found; use madmax calibrate --backend cpu, or --from-csv" >&2
  exit 1
fi
"$bin" --out "$out" "$@"
{
  [ -n "$name" ] && echo "# smi_name: $name"
  [ -n "$power" ] && echo "# power_limit: $power"
  [ -n "$sm" ] && echo "# max_sm_clock: $sm"
  [ -n "$vbios" ] && echo "# vbios: $vbios"
} >>"$out" || true
if command -v python3 >/dev/null; then python3 scripts/calib-attention.py "$out" || echo "# attention (flash): failed" >>"$out"; fi
echo "calib-hip: wrote $out ($(grep -vc '^#' "$out") rows)" >&2

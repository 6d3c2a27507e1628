#!/usr/bin/env bash
# Builds madmax with warnings as errors and runs every test.
#   scripts/test.sh              release build in build/
#   scripts/test.sh --sanitize   clang + AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
if [[ "${1:-}" == "--sanitize" ]]; then
  CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMM_WERROR=ON -DMM_SANITIZE=ON >/dev/null
  cmake --build build-asan -j "$jobs"
  ctest --test-dir build-asan --output-on-failure -j "$jobs"
else
  mpi=OFF
  command -v mpicc >/dev/null && command -v mpirun >/dev/null && mpi=ON # the MPI sweep path, tested when present
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMM_WERROR=ON -DMM_MPI=$mpi >/dev/null
  cmake --build build -j "$jobs"
  ctest --test-dir build --output-on-failure -j "$jobs"
  # the GPU calibration harness compiles for MI210 (gfx90a) with Debian's hipcc (docs/CALIBRATION.md)
  if command -v hipcc >/dev/null; then
    hipcc --offload-arch=gfx90a -O2 -Wall -Werror -o build/madmax-calib-gfx90a src/calib/hip/calib.cpp
    echo "hip: src/calib/hip/calib.cpp compiles for gfx90a"
  else
    echo "hip: skipped the gfx90a compile check (no hipcc; scripts/install-deps.sh installs it where Debian has it)"
  fi
fi

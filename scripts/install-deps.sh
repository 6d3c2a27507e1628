#!/usr/bin/env bash
# Installs madmax's build and test dependencies from Debian packages. Idempotent.
set -euo pipefail

# clang builds the sanitizer tests and the fuzzers; libclang-rt-dev (-> libclang-rt-14-dev)
# holds the ASan, UBSan and libFuzzer runtimes (libclang_rt.fuzzer-x86_64.a).
pkgs=(build-essential cmake pkg-config libglib2.0-dev libcjson-dev check
      gnuplot-nox clang libclang-rt-dev libopenmpi-dev openmpi-bin)
# hipcc (Debian's HIP compiler, ROCm 5.x: gfx90a = MI210 and gfx940, not gfx942 = MI300X)
# compiles the GPU calibration harness as a check that it never rots. Optional: where the
# package cannot be installed, scripts/test.sh says the check was skipped.
optional=(hipcc)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done
want=()
for p in "${optional[@]}"; do installed "$p" || want+=("$p"); done
if ((${#missing[@]} == 0 && ${#want[@]} == 0)); then
  echo "install-deps: all packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
if ((${#missing[@]} > 0)); then
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "install-deps: installed ${missing[*]}"
fi
for p in "${want[@]}"; do
  if $sudo apt-get install -y -qq --no-install-recommends "$p"; then
    echo "install-deps: installed $p"
  else
    echo "install-deps: $p could not be installed; skipping it"
  fi
done

#!/usr/bin/env bash
# Installs madmax's build and test dependencies from Debian packages. Idempotent.
set -euo pipefail

# clang builds the sanitizer tests and the fuzzers; libclang-rt-dev (-> libclang-rt-14-dev)
# holds the ASan, UBSan and libFuzzer runtimes (libclang_rt.fuzzer-x86_64.a).
pkgs=(build-essential cmake pkg-config libglib2.0-dev libcjson-dev check
      gnuplot-nox clang libclang-rt-dev libopenmpi-dev openmpi-bin)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: installed ${missing[*]}"

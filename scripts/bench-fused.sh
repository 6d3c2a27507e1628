#!/usr/bin/env bash
# Benchmark: wall time of one fused-kernel op simulated at slice granularity with >= 100K
# logical WGs per rank (madmax op emb-a2a, batch 1600 x 64 tables = 102400 bags per rank, slices of
# 32), both schedules, on 4 MI210 (4 ranks) and on two nodes (2 ranks, NIC puts). Each number is
# the median of 5 runs of the whole command (loading the hardware file included). Builds what it
# needs (Release) in build-bench/.
# The last line is: fused_100k_wg_s=<S> fused_100k_wg_2node_s=<T> gemv_64k_s=<U>
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench -j "$(nproc 2>/dev/null || echo 2)" --target madmax >/dev/null
median_s() { # the median wall time of 5 runs of "$@"
  for _ in 1 2 3 4 5; do
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc -l
  done | sort -n | sed -n 3p
}
a=$(median_s build-bench/madmax op emb-a2a -H hardware/mi210-4.json --batch 1600 --tables 64 --json /dev/null)
b=$(median_s build-bench/madmax op emb-a2a -H hardware/mi210-2x4.json --ranks 2 --stride 4 --batch 1600 --tables 64 --json /dev/null)
c=$(median_s build-bench/madmax op gemv-ar -H hardware/mi210-4.json --m 65536 --json /dev/null)
printf 'fused_100k_wg_s=%.4f fused_100k_wg_2node_s=%.4f gemv_64k_s=%.4f\n' "$a" "$b" "$c"

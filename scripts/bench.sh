#!/usr/bin/env bash
# Benchmark: in-process simulations per second of LLaMA-2-70B pretraining with FSDP on
# 2048 A100s, and wall time + peak memory of the same run with --per-device (every one
# of the 2048 devices simulated). Builds what it needs (Release) in build-bench/.
# Then one pipeline-parallel simulation: Llama-3.1-405B, 16 interleaved stages x 128
# micro-batches on 2048 H100s (median of 7).
# The last line is: sims_per_s=<N> points_per_s=<P> per_device_2048_s=<T> peak_rss_mb=<M> pipeline_sim_s=<S>
# (sims: memory + plan + engine + metrics of a derived scenario; points: a whole point from the
# loaded inputs, scenario and graphs included)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench -j "$(nproc 2>/dev/null || echo 2)" --target madmax-bench >/dev/null
args=(models/llama2-70b.json hardware/dgx-a100-2048.json configs/llm-pretrain-fsdp.json)
sym=$(build-bench/madmax-bench "${args[@]}")
echo "symmetric:  $sym"
# per-device: the median of three runs (each a fresh process: load + plan + 2048-device simulation)
pd_runs=()
for _ in 1 2 3; do pd_runs+=("$(build-bench/madmax-bench "${args[@]}" --per-device)"); done
printf 'per-device: %s\n' "${pd_runs[@]}"
median() { sort -n | sed -n 2p; }
sims=$(sed -E 's/.*sims_per_s=([0-9.]+).*/\1/' <<<"$sym")
points=$(sed -E 's/.*points_per_s=([0-9.]+).*/\1/' <<<"$sym")
pd_s=$(printf '%s\n' "${pd_runs[@]}" | sed -E 's/.*per_device_s=([0-9.]+).*/\1/' | median)
rss=$(printf '%s\n' "${pd_runs[@]}" | sed -E 's/.*peak_rss_mb=([0-9.]+).*/\1/' | median)
pp=$(build-bench/madmax-bench models/llama3-405b.json hardware/dgx-h100-2048.json configs/llama3-405b-pretrain.json --single)
echo "pipeline:   $pp"
pp_s=$(sed -E 's/.*sim_s=([0-9.]+).*/\1/' <<<"$pp")
echo "sims_per_s=$sims points_per_s=$points per_device_2048_s=$pd_s peak_rss_mb=$rss pipeline_sim_s=$pp_s"

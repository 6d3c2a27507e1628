#!/usr/bin/env bash
# Benchmark: in-process simulations per second of LLaMA-2-70B pretraining with FSDP on
# 2048 A100s, and wall time + peak memory of the same run with --per-device (every one
# of the 2048 devices simulated). Builds what it needs (Release) in build-bench/.
# Then one pipeline-parallel simulation: Llama-3.1-405B, 16 interleaved stages x 128
# micro-batches on 2048 H100s (median of 7; its interleaved period of 64 steady pairs is too long
# for the steady-state reduction at 128 micro-batches, so it is simulated whole), and Llama-3-70B
# with 8 1F1B stages x 64 micro-batches, reduced (sim_s) and whole (whole_s).
# Then two sweeps with both cores (madmax sweep, points in the space / wall time, loading
# included; the median of five runs each): LLaMA-2-70B on 2048 A100s over
# bench/spaces/llama2-70b.json, and Llama-3-70B on 512 H100s with pipeline degrees over
# bench/spaces/llama3-70b-pp.json.
# Then the rows of the speed table (README "Speed"): the symmetric point with its three files
# loaded (us_per_load), symmetric TP(8)+FSDP (us_per_sim_tp_fsdp), and --per-device runs (a fresh
# process each, loading included, median of three): TP+FSDP on 1,024 GPUs, Llama-3.1-405B
# (configs/llama3-405b-pretrain.json) on 16,384 GPUs, and at 65,536 GPUs both layouts with 16
# micro-batches per pipeline / the batch scaled with the GPUs (one run each; skipped with
# BENCH_QUICK=1). scripts/bench-scale.sh draws the scaling figure.
# The last line is: sims_per_s=<N> points_per_s=<P> per_device_2048_s=<T> peak_rss_mb=<M> pipeline_sim_s=<S>
#   sweep_points_per_s=<W> sweep_pp_points_per_s=<X> pipeline_steady_sim_s=<Y> pipeline_steady_whole_s=<Z>
#   us_per_sim=.. us_per_load=.. us_per_sim_tp_fsdp=.. pd_tp_fsdp_1024_s=.. pd_405b_16384_s=.. pd_405b_16384_rss_mb=..
#   pd_tp_fsdp_65536_s=.. pd_tp_fsdp_65536_rss_mb=.. pd_405b_65536_s=.. pd_405b_65536_rss_mb=..
# (sims: memory + plan + engine + metrics of a derived scenario; points: a whole point from the
# loaded inputs, scenario and graphs included)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench -j "$(nproc 2>/dev/null || echo 2)" --target madmax-bench madmax >/dev/null
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
pd_s=$(printf '%s\n' "${pd_runs[@]}" | sed -E 's/.*wall_s=([0-9.]+).*/\1/' | median)
rss=$(printf '%s\n' "${pd_runs[@]}" | sed -E 's/.*peak_rss_mb=([0-9.]+).*/\1/' | median)
pp=$(build-bench/madmax-bench models/llama3-405b.json hardware/dgx-h100-2048.json configs/llama3-405b-pretrain.json --single)
echo "pipeline:   $pp"
pp_s=$(sed -E 's/.*sim_s=([0-9.]+).*/\1/' <<<"$pp")
# a 1F1B pipeline the steady-state reduction applies to: a sweep's cost (sim_s) and the whole timeline's (whole_s)
ps=$(build-bench/madmax-bench models/llama3-70b.json hardware/dgx-h100-2048.json bench/configs/llama3-70b-pp8-1f1b.json --single)
echo "steady:     $ps"
ps_s=$(sed -E 's/.*sim_s=([0-9.]+).*/\1/' <<<"$ps")
ps_whole=$(sed -E 's/.*whole_s=([0-9.]+).*/\1/' <<<"$ps")
# sweeps: points per second of wall time (both cores)
sweep_rate() { # OUT_NAME ARGS...: points/s of a sweep, the median of five runs (one 0.1 s run varies 30%)
  local dir; dir=$(mktemp -d)
  local t0 t1 n rates=()
  for k in 1 2 3 4 5; do
    t0=$(date +%s.%N)
    build-bench/madmax sweep "${@:2}" --out "$dir/s$k" --quiet --yes >/dev/null 2>&1
    t1=$(date +%s.%N)
    n=$(python3 -c "import json; print(json.load(open('$dir/s$k/summary.json'))['points']['in_space'])")
    rates+=("$(python3 -c "print(round($n / ($t1 - $t0)))")")
  done
  rm -rf "$dir"
  printf '%s\n' "${rates[@]}" | sort -n | sed -n 3p
}
sw=$(sweep_rate llama2 -m models/llama2-70b.json -H hardware/dgx-a100-2048.json -c configs/llm-pretrain-fsdp.json \
  --space bench/spaces/llama2-70b.json)
swpp=$(sweep_rate llama3 -m models/llama3-70b.json -H hardware/dgx-h100-2048.json -c configs/llama3-70b-pretrain.json \
  -n 64 --space bench/spaces/llama3-70b-pp.json)
echo "sweeps:     llama2-70b $sw points/s, llama3-70b with pipeline degrees $swpp points/s"
# the speed table's rows
field() { sed -E "s/.*(^| )$1=([0-9.]+).*/\2/"; }
tp=$(build-bench/madmax-bench models/llama2-70b.json hardware/dgx-a100-2048.json configs/llm-pretrain-tp-fsdp.json)
echo "TP8+FSDP:   $tp"
pd3() { # ARGS...: "wall_s rss_mb", medians of three fresh processes
  local runs=() r
  for _ in 1 2 3; do r=$(build-bench/madmax-bench "$@" --per-device); runs+=("$r"); echo "  $r" >&2; done
  echo "$(printf '%s\n' "${runs[@]}" | field wall_s | median) $(printf '%s\n' "${runs[@]}" | field peak_rss_mb | median)"
}
echo "per-device TP+FSDP, 1,024 GPUs:" >&2
read -r pd1k _ < <(pd3 models/llama2-70b.json hardware/dgx-a100-2048.json configs/llm-pretrain-tp-fsdp.json --nodes 128)
echo "per-device Llama-3.1-405B, 16,384 GPUs:" >&2
read -r pd16k pd16k_rss < <(pd3 models/llama3-405b.json hardware/dgx-h100-2048.json configs/llama3-405b-pretrain.json --nodes 2048)
big="pd_tp_fsdp_65536_s=- pd_tp_fsdp_65536_rss_mb=- pd_405b_65536_s=- pd_405b_65536_rss_mb=-"
if [[ -z ${BENCH_QUICK:-} ]]; then
  a=$(build-bench/madmax-bench models/llama2-70b.json hardware/dgx-a100-2048.json configs/llm-pretrain-tp-fsdp.json \
    --per-device --nodes 8192 --global-batch 65536)
  b=$(build-bench/madmax-bench models/llama3-405b.json hardware/dgx-h100-2048.json configs/llama3-405b-pretrain.json \
    --per-device --nodes 8192 --global-batch 8192)
  echo "per-device 65,536 GPUs: TP+FSDP $a; 405B $b"
  big="pd_tp_fsdp_65536_s=$(field wall_s <<<"$a") pd_tp_fsdp_65536_rss_mb=$(field peak_rss_mb <<<"$a")"
  big+=" pd_405b_65536_s=$(field wall_s <<<"$b") pd_405b_65536_rss_mb=$(field peak_rss_mb <<<"$b")"
fi
echo "sims_per_s=$sims points_per_s=$points per_device_2048_s=$pd_s peak_rss_mb=$rss pipeline_sim_s=$pp_s sweep_points_per_s=$sw sweep_pp_points_per_s=$swpp pipeline_steady_sim_s=$ps_s pipeline_steady_whole_s=$ps_whole \
us_per_sim=$(field us_per_sim <<<"$sym") us_per_load=$(field us_per_load <<<"$sym") \
us_per_sim_tp_fsdp=$(field us_per_sim <<<"$tp") pd_tp_fsdp_1024_s=$pd1k pd_405b_16384_s=$pd16k pd_405b_16384_rss_mb=$pd16k_rss $big"

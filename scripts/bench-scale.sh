#!/usr/bin/env bash
# Scaling benchmark: wall time (loading the three files included, one fresh process per run) and
# peak RSS of one simulated iteration against the GPU count, 64 to 131,072, for two layouts,
# each symmetric (one device per class) and --per-device (every device simulated):
#   tp-fsdp  LLaMA-2-70B, TP 8 inside a DGX A100 node x FSDP across (configs/llm-pretrain-tp-fsdp.json),
#            global batch = GPUs samples
#   405b     Llama-3.1-405B, TP 8 x 16 interleaved pipeline stages x ZeRO-2 data parallelism on DGX
#            H100 (configs/llama3-405b-pretrain.json), global batch = GPUs / 8 sequences (16 micro-batches
#            per pipeline at every size; 128 GPUs at least)
# Weak scaling: the work per device is the same at every size. Writes bench/data/scaling.csv and,
# with gnuplot, docs/figures/scaling.png beside ASTRA-sim analytical's figures
# (bench/data/astra-sim-analytical.csv). About 4 minutes on 2 cores; 131,072 GPUs of the 405b
# layout needs about 10 GB of memory.
# Usage: scripts/bench-scale.sh [MAX_GPUS]   (default 131072)
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-131072}
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-bench -j "$(nproc 2>/dev/null || echo 2)" --target madmax-bench >/dev/null
out=bench/data/scaling.csv
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "layout,mode,gpus,wall_s,peak_rss_mb,events,iteration_s" >"$tmp"
run() { # LAYOUT MODE GPUS ARGS...
  local r
  r=$(build-bench/madmax-bench "${@:4}")
  sed -E "s/^wall_s=([0-9.]+) peak_rss_mb=([0-9.]+) devices=[0-9]+ events=([0-9]+) iteration_s=([0-9.e+-]+)$/$1,$2,$3,\1,\2,\3,\4/" <<<"$r" >>"$tmp"
  tail -1 "$tmp" >&2
}
for gpus in 64 128 256 1024 4096 16384 65536 131072; do
  ((gpus <= max)) || continue
  nodes=$((gpus / 8))
  for mode in once per-device; do
    if ((gpus != 128)); then
      run tp-fsdp "$mode" "$gpus" models/llama2-70b.json hardware/dgx-a100-2048.json configs/llm-pretrain-tp-fsdp.json \
        "--$mode" --nodes "$nodes" --global-batch "$gpus"
    fi
    if ((gpus >= 128)); then
      run 405b "$mode" "$gpus" models/llama3-405b.json hardware/dgx-h100-2048.json configs/llama3-405b-pretrain.json \
        "--$mode" --nodes "$nodes" --global-batch $((gpus / 8))
    fi
  done
done
# one series after another (the figure draws each as one line)
{ head -1 "$tmp"; tail -n +2 "$tmp" | sed 's/,once,/,symmetric,/' | LC_ALL=C sort -t, -k1,1 -k2,2 -k3,3n; } >"$out"
rm -f "$tmp"
trap - EXIT
echo "wrote $out"
if command -v gnuplot >/dev/null; then
  gnuplot -c scripts/scaling.gp "$out" bench/data/astra-sim-analytical.csv docs/figures/scaling.png
  echo "wrote docs/figures/scaling.png"
fi

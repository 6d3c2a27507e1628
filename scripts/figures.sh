#!/usr/bin/env bash
# Regenerates docs/figures/ from shipped examples with `madmax plot` (needs build/madmax
# and gnuplot). The figures are illustrations; the numbers behind them are the runs'. They use
# plot's defaults (page width, titles and labels from the runs' names) as a user gets them.
set -euo pipefail
cd "$(dirname "$0")/.."
mm=build/madmax
[[ -x $mm ]] || { echo "figures: build first (scripts/test.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/runs"
out=docs/figures

# a pipeline: Llama-3-70B, 4 stages x 2 interleaved chunks, TP8 + SP, ZeRO-1, 64 DGX H100 nodes
$mm run -m models/llama3-70b.json -H hardware/dgx-h100-2048.json -c configs/llama3-70b-pretrain.json \
  --nodes 64 --trace "$tmp/pp.trace.json" --json "$tmp/runs/c-llama3-70b-tp8-pp4x2-zero1-512xH100.json" >/dev/null
$mm plot "$tmp/pp.trace.json" --kind timeline --window 0:4000 --out "$out/llama3-70b-pipeline-timeline.png" >/dev/null

# where the time goes: LLaMA-2-70B on 2048 A100 under FSDP and under TP + FSDP, next to the pipeline
$mm run -m models/llama2-70b.json -H hardware/dgx-a100-2048.json -c configs/llm-pretrain-fsdp.json \
  --json "$tmp/runs/a-llama2-70b-fsdp-2048xA100.json" >/dev/null
$mm run -m models/llama2-70b.json -H hardware/dgx-a100-2048.json -c configs/llm-pretrain-tp-fsdp.json \
  --json "$tmp/runs/b-llama2-70b-tp8-fsdp-2048xA100.json" >/dev/null
$mm plot "$tmp/runs" --kind breakdown --out "$out/training-breakdown.png" >/dev/null

# a design-space sweep: DLRM-A on 16 ZionEX nodes (128 A100-40GB), every strategy of its MLPs and
# tables: the 20 fastest against the FSDP baseline, and memory per device against throughput
dlrm=(-m models/dlrm-a.json -H hardware/zionex-a100-128.json -c configs/dlrm-pretrain-fsdp-mp.json)
$mm sweep "${dlrm[@]}" --out "$tmp/dlrm-a" --quiet >/dev/null
$mm plot "$tmp/dlrm-a" --kind ranking --out "$out/dlrm-a-sweep-ranking.png" >/dev/null
$mm plot "$tmp/dlrm-a" --kind pareto --out "$out/dlrm-a-sweep-pareto.png" >/dev/null

# what-if: each hardware component of the same system 10x better, alone and all together
$mm whatif "${dlrm[@]}" --json "$tmp/dlrm-a-whatif.json" >/dev/null
$mm plot "$tmp/dlrm-a-whatif.json" --kind whatif --out "$out/dlrm-a-whatif.png" >/dev/null
# several systems: LLaMA-2-70B on DGX A100 and DGX H100 clusters at 16 to 256 nodes, time against
# A100-normalized GPU-hours, the front across both (8,100 points, about a second on 2 cores)
$mm sweep -m models/llama2-70b.json -H hardware/dgx-a100-2048.json -H hardware/dgx-h100-2048.json \
  -c configs/llm-pretrain-fsdp.json --space configs/sweeps/llama2-70b-nodes.json --out "$tmp/a100-h100" --quiet >/dev/null
$mm plot "$tmp/a100-h100" --kind systems --out "$out/llama2-70b-a100-h100-systems.png" >/dev/null
ls -l "$out"

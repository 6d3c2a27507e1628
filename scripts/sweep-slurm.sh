#!/usr/bin/env bash
# A madmax sweep spread over a Slurm job array: each array task runs one shard of the points
# (i mod N = K) into its own folder; a last job merges them into one points.csv (the same bytes
# as one process would write) and writes the summary. HARDWARE may list several systems, comma-
# separated (hardware/dgx-a100-2048.json,hardware/dgx-h100-2048.json): one sweep over all of them.
#
#   sbatch --array=0-15 scripts/sweep-slurm.sh MODEL HARDWARE CONFIG OUT [SPACE]
#   sbatch --dependency=afterok:<array job id> scripts/sweep-slurm.sh --merge MODEL HARDWARE CONFIG OUT [SPACE]
#
#SBATCH --job-name=madmax-sweep
#SBATCH --cpus-per-task=16
#SBATCH --time=02:00:00
set -euo pipefail
madmax=${MADMAX:-build/madmax}
merge=0
if [[ "${1:-}" == "--merge" ]]; then merge=1; shift; fi
if [[ $# -lt 4 ]]; then
  echo "usage: sbatch --array=0-(N-1) $0 MODEL HARDWARE CONFIG OUT [SPACE]; then $0 --merge ... (after the array)" >&2
  exit 1
fi
model=$1 config=$3 out=$4
IFS=, read -ra systems <<< "$2"
hardware=()
for h in "${systems[@]}"; do hardware+=(-H "$h"); done
space=()
[[ $# -ge 5 ]] && space=(--space "$5")
if [[ $merge == 1 ]]; then
  shards=("$out"/shard-*)
  "$madmax" sweep merge --out "$out" "${shards[@]}"
  # the summary of the merged points: the same inputs, resumed on a complete points.csv
  "$madmax" sweep -m "$model" "${hardware[@]}" -c "$config" "${space[@]}" --out "$out" --resume --quiet --yes
  exit 0
fi
k=${SLURM_ARRAY_TASK_ID:?run under sbatch --array}
n=${SLURM_ARRAY_TASK_COUNT:?run under sbatch --array}
"$madmax" sweep -m "$model" "${hardware[@]}" -c "$config" "${space[@]}" --out "$out/shard-$k" \
  --shard "$k/$n" --jobs "${SLURM_CPUS_PER_TASK:-0}" --quiet --yes

#!/usr/bin/env bash
# The MPI path of madmax sweep: mpirun -np 2 ends with the same points.csv and summary.json
# bytes as one process. Run by ctest in an MM_MPI build (MM_BINARY, MM_SOURCE_DIR set).
set -euo pipefail
cd "$MM_SOURCE_DIR"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(sweep -m models/dlrm-a.json -H hardware/zionex-a100-128.json -c configs/dlrm-pretrain-fsdp-mp.json --quiet)
"$MM_BINARY" "${args[@]}" --out "$tmp/one" >/dev/null 2>&1
# as root (CI containers) OpenMPI wants to be told twice; more ranks than cores is fine here
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpirun -np 2 "$MM_BINARY" "${args[@]}" --out "$tmp/mpi" >/dev/null 2>&1
cmp "$tmp/one/points.csv" "$tmp/mpi/points.csv"
cmp "$tmp/one/summary.json" "$tmp/mpi/summary.json"
test -d "$tmp/mpi/rank-1"
# two systems in one sweep: the same bytes too
echo '{"nodes": [8, 16], "strategies": {"mlp": ["fsdp", "ddp", "tp"], "embedding_bag": ["mp", "ddp"]}}' > "$tmp/space.json"
two=(sweep -m models/dlrm-a.json -H hardware/zionex-a100-128.json -H hardware/h100-superpod-256.json
     -c configs/dlrm-pretrain-fsdp-mp.json --space "$tmp/space.json" --quiet)
"$MM_BINARY" "${two[@]}" --out "$tmp/two-one" >/dev/null 2>&1
mpirun -np 2 "$MM_BINARY" "${two[@]}" --out "$tmp/two-mpi" >/dev/null 2>&1
cmp "$tmp/two-one/points.csv" "$tmp/two-mpi/points.csv"
cmp "$tmp/two-one/summary.json" "$tmp/two-mpi/summary.json"
head -1 "$tmp/two-mpi/points.csv" | grep -q '^point,system,'
echo "2 passed, 0 failed"

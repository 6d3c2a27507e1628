#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ (clang, AddressSanitizer + UndefinedBehaviorSanitizer)
# in build-fuzz/ and runs each for SECONDS (default 60), seeded from the shipped files.
#   scripts/fuzz.sh [SECONDS [HARNESS...]]     harnesses: model hardware device config trace validate space convert
# The corpus grows in build-fuzz/corpus/HARNESS across runs; a crash is saved as
# build-fuzz/crashes/HARNESS-crash-* (reproduce: build-fuzz/fuzz/fuzz_HARNESS FILE) and fails the run.
# The last lines are a table: harness, executions, executions per second, corpus, result.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
all=(model hardware device config trace validate space convert)
harnesses=("${@:-${all[@]}}")
jobs=$(nproc 2>/dev/null || echo 2)

CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMM_WERROR=ON -DMM_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$jobs" --target madmax "${harnesses[@]/#/fuzz_}" >/dev/null

out=build-fuzz
rm -rf "$out/seeds"
mkdir -p "$out/seeds" "$out/crashes" "$out/logs"
# A dictionary of every key and allowed value the schema lists.
{ grep -o '^| `[A-Za-z0-9_]*`' docs/SCHEMA.md | sed 's/^| `\(.*\)`/"\\"\1\\""/'
  grep -o '"[a-z0-9_.]*"' docs/SCHEMA.md | sed 's/"\(.*\)"/"\\"\1\\""/'
  printf '"%s"\n' '{' '}' '[' ']' ':' ',' 'true' 'false' 'null' '1e308' '-1' '0' '9007199254740993' '\\u0000'
} | sort -u >"$out/json.dict"

seed() { # HARNESS FILE...: copies the files into the harness's seed folder
  local h=$1
  shift
  mkdir -p "$out/seeds/$h"
  cp "$@" "$out/seeds/$h/"
}
seed model models/*.json
seed hardware hardware/*.json
seed device hardware/devices/*.json
seed config configs/*.json configs/validation/*.json
seed space configs/sweeps/*.json
# calibration inputs: a format byte (0 rocblas-bench, 1 hipblaslt-bench, 2 nccl-tests, 3 CSV), then the file
mkdir -p "$out/seeds/convert"
for f in hardware/calibration/*.csv; do { printf '\3'; head -c 4000 "$f"; } >"$out/seeds/convert/$(basename "$f")"; done
printf '\0rocblas-bench -f gemm -r s\ntransA,transB,M,N,K,alpha,lda,beta,ldb,ldc,rocblas-Gflops,us\nN,T,4000,4000,4000,1,4000,0,4000,4000,97190.6,1317\n' \
  >"$out/seeds/convert/rocblas.txt"
printf '\1[0]:transA,transB,grouped_gemm,batch_count,m,n,k,a_type,d_type,hipblaslt-Gflops,hipblaslt-GB/s,us\n    T,N,0,1,4096,65536,14336,f8_r,bf16_r,3.2733e+06,608.035,2351.32\n    --Solution index: 1\n' \
  >"$out/seeds/convert/hipblaslt.txt"
printf '\2# nThread 1 nGpus 8 minBytes 8\n#  Rank  0 Group  0 Pid 1 on h device  0 [0x00] GPU\n# all_reduce_perf\n#  (us)\n  1048576  262144  float  sum  -1  203.2  5.16  9.68  0  207.2  5.06  9.49  0\n' \
  >"$out/seeds/convert/nccl.txt"
mkdir -p "$out/seeds/trace" "$out/seeds/validate"
# traces and results of a few small runs (what `madmax plot` reads)
runs=("models/llama3-8b.json hardware/dgx-h200-8.json configs/llama3-8b-pretrain.json"
      "models/mixtral-8x7b.json hardware/dgx-h200-8.json configs/mixtral-serving-tp2.json"
      "models/dlrm-a.json hardware/zionex-a100-128.json configs/dlrm-pretrain-fsdp-mp.json")
i=0
for r in "${runs[@]}"; do
  read -r m h c <<<"$r"
  "$out/madmax" run -m "$m" -H "$h" -c "$c" --nodes 1 --json "$out/seeds/trace/result-$i.json" \
    --trace "$out/seeds/trace/trace-$i.json" >/dev/null 2>&1 || true
  i=$((i + 1))
done
# a small sweep's folder (points.csv, NUL, summary.json) and a what-if study
space="$out/seeds/space.json"
echo '{"strategies": {"transformer": ["fsdp", "ddp", "tp"]}}' >"$space"
for m in llama3-8b mixtral-8x7b; do
  if "$out/madmax" sweep -m "models/$m.json" -H hardware/dgx-h200-8.json -c configs/llama3-8b-pretrain.json \
    --space "$space" --include-oom --out "$out/seeds/sweep-$m" >/dev/null 2>&1; then
    { cat "$out/seeds/sweep-$m/points.csv"; printf '\0'; cat "$out/seeds/sweep-$m/summary.json"; } \
      >"$out/seeds/trace/sweep-$m.bin"
  fi
  "$out/madmax" whatif -m "models/$m.json" -H hardware/dgx-h200-8.json -c configs/llama3-8b-pretrain.json \
    --space "$space" --scale compute=2,inter_bw=4 --json "$out/seeds/trace/whatif-$m.json" >/dev/null 2>&1 || true
done

export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export MM_FUZZ_SEEDS="$out/seeds/validate" # fuzz_validate writes the shipped cases there, one per file
failed=0
summary=()
for h in "${harnesses[@]}"; do
  mkdir -p "$out/corpus/$h"
  log="$out/logs/$h.log"
  echo "fuzz: $h for ${secs}s" >&2
  rc=0
  "$out/fuzz/fuzz_$h" -max_total_time="$secs" -timeout=60 -rss_limit_mb=4096 -print_final_stats=1 \
    -dict="$out/json.dict" -artifact_prefix="$out/crashes/$h-" "$out/corpus/$h" "$out/seeds/$h" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(find "$out/corpus/$h" -type f | wc -l)
  if ((rc != 0)); then
    failed=1
    result="FAILED (exit $rc): $(ls -t "$out/crashes/$h-"* 2>/dev/null | head -1)"
    grep -E 'ERROR|SUMMARY|runtime error|fuzz_[a-z]+\.c:[0-9]+:' "$log" | head -5 >&2 || true
  else
    result=ok
  fi
  summary+=("$(printf '%-9s %12s %8s %7s  %s' "$h" "${runs:-?}" "${rate:-?}" "$corpus" "$result")")
done
printf '%-9s %12s %8s %7s  %s\n' harness executions exec/s corpus result
printf '%s\n' "${summary[@]}"
exit "$failed"

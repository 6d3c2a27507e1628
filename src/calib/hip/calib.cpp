/* madmax-calib: the calibration harness for one GPU. Times kernels with events after warm-up
 * (median, min and max of several repetitions) and writes the calibration CSV that
 * `madmax calibrate --from-csv` fits (format: docs/CALIBRATION.md). One source for AMD
 * (hipcc) and NVIDIA (nvcc, through hip_compat.h); scripts/calib-hip.sh builds and runs it.
 *
 *   madmax-calib [--out FILE] [--quick] [--reps N] [--only bench,bench,...]
 *
 * Benches: launch, copy, gemm, gemv, attention, lookup, dil, cil, peer, fused (the names of the
 * CSV's `bench` column start with these). The vendor BLAS (hipBLASLt / cuBLASLt) runs the
 * GEMMs when built with MM_CALIB_BLASLT=1; the plain tiled kernel always runs a few shapes
 * (variant "tiled") and checks the vendor's results. */
#include "hip_compat.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#ifndef MM_CALIB_BLASLT
#define MM_CALIB_BLASLT 0
#endif
#ifndef MM_CALIB_BLAS_NAME
#define MM_CALIB_BLAS_NAME "none"
#endif

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    hipError_t e_ = (x);                                                                           \
    if (e_ != hipSuccess) {                                                                        \
      fprintf(stderr, "madmax-calib: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, hipGetErrorString(e_)); \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

/* ---- options and output --------------------------------------------------- */

static FILE *out = stdout;
static bool quick = false;
static int reps = 7;
static std::string only;
static double min_rep_s = 200e-6; /* one timed repetition runs at least this long */

static bool wanted(const char *bench)
{
  if (only.empty()) return true;
  std::string list = "," + only + ",";
  return list.find("," + std::string(bench) + ",") != std::string::npos;
}

struct Stat {
  double median, min, max;
  int reps;
};

/* One CSV row: see docs/CALIBRATION.md for the columns. */
static void row(const char *bench, const char *kind, const char *dtype, double m, double n, double k, double batch,
                double bytes, double flops, const std::string &variant, const Stat &s)
{
  fprintf(out, "%s,%s,%s,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%s,%d,%.6e,%.6e,%.6e,\n", bench, kind, dtype, m, n, k, batch,
          bytes, flops, variant.c_str(), s.reps, s.median, s.min, s.max);
  fflush(out);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(out, "# ");
  vfprintf(out, fmt, ap);
  fprintf(out, "\n");
  va_end(ap);
  fflush(out);
}

/* ---- timing ---------------------------------------------------------------- */

static hipStream_t stream, stream2;
static hipEvent_t ev0, ev1, ev2, ev3;

/* Times f(i) (one call per i) on `stream`: warm-up, then `reps` repetitions of `inner` calls
 * each, inner chosen so that a repetition lasts at least min_rep_s. Seconds per call. */
static Stat time_calls(const std::function<void(int)> &f)
{
  for (int i = 0; i < 3; i++) f(i);
  CHECK(hipStreamSynchronize(stream));
  CHECK(hipEventRecord(ev0, stream));
  f(0);
  CHECK(hipEventRecord(ev1, stream));
  CHECK(hipEventSynchronize(ev1));
  float ms = 0;
  CHECK(hipEventElapsedTime(&ms, ev0, ev1));
  int inner = (int)std::min(2000.0, std::max(1.0, std::ceil(min_rep_s / std::max(ms * 1e-3, 1e-7))));
  std::vector<double> t;
  int call = 0;
  for (int r = 0; r < reps; r++) {
    CHECK(hipEventRecord(ev0, stream));
    for (int i = 0; i < inner; i++) f(call++);
    CHECK(hipEventRecord(ev1, stream));
    CHECK(hipEventSynchronize(ev1));
    CHECK(hipEventElapsedTime(&ms, ev0, ev1));
    t.push_back(ms * 1e-3 / inner);
  }
  std::sort(t.begin(), t.end());
  return Stat{t[t.size() / 2], t.front(), t.back(), reps};
}

/* ---- data ------------------------------------------------------------------- */

__device__ __host__ static inline uint32_t mix(uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (uint32_t)x;
}

/* Random values of magnitude [1, 2) with random sign in 16-bit words (bf16 or fp16), or
 * bytes of fp8 e4m3 with a bounded exponent (never NaN): GEMMs on zeros run faster than on
 * data. */
__global__ void fill16(uint16_t *p, size_t n, int fp16, uint64_t seed)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = mix(i ^ seed);
    p[i] = fp16 ? (uint16_t)(0x3C00u | (h & 0x3FFu) | ((h >> 16) & 0x8000u))
                : (uint16_t)(0x3F80u | (h & 0x7Fu) | ((h >> 16) & 0x8000u));
  }
}

__global__ void fill8(uint8_t *p, size_t n, uint64_t seed)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (uint8_t)(mix(i ^ seed) & 0xF7u);
}

__global__ void fill32(float *p, size_t n, uint64_t seed)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (float)(mix(i ^ seed) & 0xFFFFu) / 65536.0f - 0.5f;
}

static void *dalloc(size_t bytes)
{
  void *p = nullptr;
  CHECK(hipMalloc(&p, std::max<size_t>(bytes, 256)));
  return p;
}

static void fill(void *p, size_t bytes, const char *dtype, uint64_t seed)
{
  if (!strcmp(dtype, "fp8"))
    fill8<<<1024, 256, 0, stream>>>((uint8_t *)p, bytes, seed);
  else if (!strcmp(dtype, "fp32"))
    fill32<<<1024, 256, 0, stream>>>((float *)p, bytes / 4, seed);
  else
    fill16<<<1024, 256, 0, stream>>>((uint16_t *)p, bytes / 2, !strcmp(dtype, "fp16"), seed);
  CHECK(hipGetLastError());
}

static size_t elem_bytes(const char *dtype)
{
  return !strcmp(dtype, "fp8") ? 1 : !strcmp(dtype, "fp32") ? 4 : 2;
}

__device__ __host__ static inline float bf16_to_f(uint16_t v)
{
  union {
    uint32_t u;
    float f;
  } c;
  c.u = (uint32_t)v << 16;
  return c.f;
}

__device__ __host__ static inline uint16_t f_to_bf16(float f)
{
  union {
    uint32_t u;
    float f;
  } c;
  c.f = f;
  return (uint16_t)((c.u + 0x7FFFu + ((c.u >> 16) & 1u)) >> 16);
}

/* ---- kernels ----------------------------------------------------------------- */

__global__ void empty_kernel() {}

/* y = x, 16-byte vectors: HBM bandwidth by bytes (the elementwise kind). */
__global__ void copy_kernel(const uint4 *__restrict__ x, uint4 *__restrict__ y, size_t n)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) y[i] = x[i];
}

/* The plain tiled GEMM (the fallback where no vendor BLAS is built): column-major
 * C[m x n] = A^T B with A stored k x m (lda = k) and B k x n (ldb = k), bf16 in, fp32
 * accumulate, bf16 out: the layout the vendor path uses. 64 x 64 tiles, 256 threads of 4 x 4. */
#define TT 64
#define TK 16
/* One 64 x 64 output tile at (row0, col0) of A^T B (A stored k x m, B k x n, both with
 * leading dimension k) into @acc (thread (tx, ty) holds rows tx*4.., columns ty*4..). The
 * plain kernel and the fused GEMM + All2All share it, so their results agree bit for bit. */
__device__ static void tile_mm(const uint16_t *__restrict__ A, const uint16_t *__restrict__ B, int m, int n, int k,
                               int row0, int col0, float acc[4][4])
{
  __shared__ float As[TK][TT + 1], Bs[TK][TT + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) acc[i][j] = 0.f;
  for (int kk = 0; kk < k; kk += TK) {
    for (int e = threadIdx.x; e < TK * TT; e += 256) {
      int kq = e % TK, r = e / TK;
      int gr = row0 + r, gc = col0 + r, gk = kk + kq;
      As[kq][r] = gr < m && gk < k ? bf16_to_f(A[(size_t)gr * k + gk]) : 0.f;
      Bs[kq][r] = gc < n && gk < k ? bf16_to_f(B[(size_t)gc * k + gk]) : 0.f;
    }
    __syncthreads();
    for (int kq = 0; kq < TK; kq++)
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] += As[kq][tx * 4 + i] * Bs[kq][ty * 4 + j];
    __syncthreads();
  }
}

__global__ void tiled_gemm(const uint16_t *__restrict__ A, const uint16_t *__restrict__ B, uint16_t *__restrict__ C,
                           int m, int n, int k)
{
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16, row0 = blockIdx.x * TT, col0 = blockIdx.y * TT;
  float acc[4][4];
  tile_mm(A, B, m, n, k, row0, col0, acc);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      int r = row0 + tx * 4 + i, c = col0 + ty * 4 + j;
      if (r < m && c < n) C[(size_t)c * m + r] = f_to_bf16(acc[i][j]);
    }
}

static void tiled_launch(const void *A, const void *B, void *C, int m, int n, int k, hipStream_t s)
{
  dim3 grid((m + TT - 1) / TT, (n + TT - 1) / TT);
  tiled_gemm<<<grid, 256, 0, s>>>((const uint16_t *)A, (const uint16_t *)B, (uint16_t *)C, m, n, k);
}

/* Row softmax in place over `cols` bf16 values per row, one block per row (the unfused
 * attention's middle pass). */
__global__ void softmax_rows(uint16_t *p, int cols)
{
  __shared__ float red[256];
  uint16_t *r = p + (size_t)blockIdx.x * cols;
  float mx = -1e30f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) mx = fmaxf(mx, bf16_to_f(r[i]));
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if ((int)threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  float sum = 0;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) sum += __expf(bf16_to_f(r[i]) - mx);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  float inv = 1.f / red[0];
  for (int i = threadIdx.x; i < cols; i += blockDim.x) r[i] = f_to_bf16(__expf(bf16_to_f(r[i]) - mx) * inv);
}

/* Embedding-bag sum pooling: out[b][t][:] = sum of `pool` rows of table t, one warp-sized
 * group of 32 threads per (sample, table), rows drawn by a hash (uniform access). */
__global__ void embedding_bag(const float *__restrict__ tables, float *__restrict__ outp, int batch, int n_tables,
                              int rows, int dim, int pool)
{
  int group = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (group >= batch * n_tables) return;
  int t = group % n_tables;
  const float *tab = tables + (size_t)t * rows * dim;
  for (int d = lane; d < dim; d += 32) {
    float acc = 0;
    for (int p = 0; p < pool; p++) acc += tab[(size_t)(mix((uint64_t)group * 1315423911u + p) % rows) * dim + d];
    outp[(size_t)group * dim + d] = acc;
  }
}

/* ---- vendor GEMM ----------------------------------------------------------------- */

#if MM_CALIB_BLASLT
static hipblasLtHandle_t lt;
static void *lt_ws;
static const size_t lt_ws_bytes = 64u << 20;

#define LTCHECK(x)                                                                 \
  do {                                                                             \
    hipblasStatus_t s_ = (x);                                                      \
    if (s_ != HIPBLAS_STATUS_SUCCESS) {                                            \
      fprintf(stderr, "madmax-calib: %s:%d: %s: status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      exit(2);                                                                     \
    }                                                                              \
  } while (0)

/* One planned vendor GEMM: column-major D[m x n] = A^T B (A stored k x m, "TN", the layout
 * FP8 requires), batch problems strided; bf16 output for bf16 and fp8 inputs, fp16 for fp16. */
struct LtGemm {
  hipblasLtMatmulDesc_t desc = nullptr;
  hipblasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  hipblasLtMatmulHeuristicResult_t heur;
  bool ok = false;
  float beta = 0;
};

static hipDataType lt_type(const char *dtype)
{
  return !strcmp(dtype, "fp8") ? MM_FP8_E4M3 : !strcmp(dtype, "fp16") ? HIP_R_16F : HIP_R_16BF;
}

static void lt_layout(hipblasLtMatrixLayout_t *l, hipDataType t, int64_t rows, int64_t cols, int64_t batch)
{
  LTCHECK(hipblasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, rows));
  if (batch > 1) {
    int32_t bc = (int32_t)batch;
    int64_t stride = rows * cols;
    LTCHECK(hipblasLtMatrixLayoutSetAttribute(*l, HIPBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
    LTCHECK(hipblasLtMatrixLayoutSetAttribute(*l, HIPBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
}

static LtGemm lt_plan(const char *dtype, int64_t m, int64_t n, int64_t k, int64_t batch, float beta = 0)
{
  LtGemm g;
  g.beta = beta;
  hipDataType in = lt_type(dtype), outt = !strcmp(dtype, "fp16") ? HIP_R_16F : HIP_R_16BF;
  LTCHECK(hipblasLtMatmulDescCreate(&g.desc, HIPBLAS_COMPUTE_32F, HIP_R_32F));
  hipblasOperation_t ta = HIPBLAS_OP_T, tb = HIPBLAS_OP_N;
  LTCHECK(hipblasLtMatmulDescSetAttribute(g.desc, HIPBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LTCHECK(hipblasLtMatmulDescSetAttribute(g.desc, HIPBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  lt_layout(&g.a, in, k, m, batch);
  lt_layout(&g.b, in, k, n, batch);
  lt_layout(&g.c, outt, m, n, batch);
  hipblasLtMatmulPreference_t pref;
  LTCHECK(hipblasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = lt_ws_bytes;
  LTCHECK(hipblasLtMatmulPreferenceSetAttribute(pref, HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  int found = 0;
  hipblasStatus_t st = hipblasLtMatmulAlgoGetHeuristic(lt, g.desc, g.a, g.b, g.c, g.c, pref, 1, &g.heur, &found);
  hipblasLtMatmulPreferenceDestroy(pref);
  g.ok = st == HIPBLAS_STATUS_SUCCESS && found > 0;
  return g;
}

static void lt_run(const LtGemm &g, const void *A, const void *B, void *C, hipStream_t s)
{
  float alpha = 1;
  LTCHECK(hipblasLtMatmul(lt, g.desc, &alpha, A, g.a, B, g.b, &g.beta, C, g.c, C, g.c, &g.heur.algo, lt_ws,
                          lt_ws_bytes, s));
}

static void lt_free(LtGemm &g)
{
  if (g.a) hipblasLtMatrixLayoutDestroy(g.a);
  if (g.b) hipblasLtMatrixLayoutDestroy(g.b);
  if (g.c) hipblasLtMatrixLayoutDestroy(g.c);
  if (g.desc) hipblasLtMatmulDescDestroy(g.desc);
  g = LtGemm();
}
#endif

/* Buffers for a GEMM of up to `bytes` per operand, filled once. */
struct GemmBufs {
  void *a = nullptr, *b = nullptr, *c = nullptr;
  size_t cap = 0;
};
static GemmBufs gb;

static void gemm_bufs(size_t bytes)
{
  if (bytes <= gb.cap) return;
  if (gb.a) hipFree(gb.a), hipFree(gb.b), hipFree(gb.c);
  gb.cap = bytes;
  gb.a = dalloc(bytes), gb.b = dalloc(bytes), gb.c = dalloc(bytes);
  fill(gb.a, bytes, "bf16", 1), fill(gb.b, bytes, "bf16", 2);
  CHECK(hipMemset(gb.c, 0, bytes));
}

/* Time one GEMM (vendor or tiled) and write its row; returns seconds per call (0: none). */
static double gemm_row(const char *bench, const char *kind, const char *dtype, int64_t m, int64_t n, int64_t k,
                       int64_t batch, bool tiled, const std::string &variant_extra = "")
{
  size_t es = elem_bytes(dtype);
  size_t need = (size_t)std::max({m * k, k * n, m * n * 2}) * batch * 2;
  gemm_bufs(need);
  if (!strcmp(dtype, "fp8") || !strcmp(dtype, "fp16")) {
    fill(gb.a, (size_t)m * k * batch * es, dtype, 3);
    fill(gb.b, (size_t)k * n * batch * es, dtype, 4);
  }
  double flops = 2.0 * m * n * k * batch;
  double bytes = (double)es * (m * k + k * n) * batch + 2.0 * m * n * batch;
  Stat s{};
  std::string variant;
  if (tiled) {
    if (batch != 1 || strcmp(dtype, "bf16")) return 0;
    s = time_calls([&](int) { tiled_launch(gb.a, gb.b, gb.c, (int)m, (int)n, (int)k, stream); });
    variant = "tiled";
  } else {
#if MM_CALIB_BLASLT
    LtGemm g = lt_plan(dtype, m, n, k, batch);
    if (!g.ok) {
      note("no %s algorithm for %s %s m=%lld n=%lld k=%lld batch=%lld", MM_CALIB_BLAS_NAME, bench, dtype, (long long)m,
           (long long)n, (long long)k, (long long)batch);
      lt_free(g);
      return 0;
    }
    s = time_calls([&](int) { lt_run(g, gb.a, gb.b, gb.c, stream); });
    lt_free(g);
    variant = "vendor";
#else
    return 0;
#endif
  }
  if (!variant_extra.empty()) variant += ";" + variant_extra;
  row(bench, kind, dtype, (double)m, (double)n, (double)k, (double)batch, bytes, flops, variant, s);
  return s.median;
}

/* ---- benches ------------------------------------------------------------------------- */

static void bench_launch()
{
  Stat s = time_calls([&](int) { empty_kernel<<<1, 1, 0, stream>>>(); });
  row("launch", "", "", 1, 1, 1, 1, 0, 0, "stream", s);
  /* graph replay: 100 empty kernels captured once */
  hipGraph_t graph;
  hipGraphExec_t exec;
  CHECK(hipStreamBeginCapture(stream2, hipStreamCaptureModeGlobal));
  for (int i = 0; i < 100; i++) empty_kernel<<<1, 1, 0, stream2>>>();
  CHECK(hipStreamEndCapture(stream2, &graph));
  CHECK(mmGraphInstantiate(&exec, graph));
  Stat g = time_calls([&](int) { CHECK(hipGraphLaunch(exec, stream)); });
  g.median /= 100, g.min /= 100, g.max /= 100;
  row("graph_launch", "", "", 1, 1, 1, 1, 0, 0, "graph100", g);
  hipGraphExecDestroy(exec);
  hipGraphDestroy(graph);
}

/* Copies from 4 KiB to 1 GiB by kernel and by DMA engine; buffers rotate through a 2 GiB pool
 * so that calls below it miss the cache as a training step's tensors do. bytes counts read +
 * write (madmax's HBM bytes). */
static void bench_copy()
{
  const size_t pool = (size_t)2 << 30;
  char *src = (char *)dalloc(pool), *dst = (char *)dalloc(pool);
  CHECK(hipMemset(src, 1, pool));
  CHECK(hipMemset(dst, 0, pool));
  for (size_t sz = 4096; sz <= ((size_t)1 << 30); sz *= quick ? 16 : 4) {
    size_t slots = pool / sz;
    Stat k = time_calls([&](int i) {
      size_t off = (size_t)(i % slots) * sz;
      size_t n = sz / 16;
      int blocks = (int)std::min<size_t>((n + 255) / 256, 4096);
      copy_kernel<<<blocks, 256, 0, stream>>>((const uint4 *)(src + off), (uint4 *)(dst + off), n);
    });
    row("copy", "elementwise", "bf16", (double)sz / 2, 1, 1, 1, 2.0 * sz, 0, "kernel", k);
    Stat d = time_calls([&](int i) {
      size_t off = (size_t)(i % slots) * sz;
      CHECK(hipMemcpyAsync(dst + off, src + off, sz, hipMemcpyDeviceToDevice, stream));
    });
    row("copy", "elementwise", "bf16", (double)sz / 2, 1, 1, 1, 2.0 * sz, 0, "dma", d);
  }
  hipFree(src);
  hipFree(dst);
}

static void bench_gemm(const std::vector<const char *> &dtypes)
{
  std::vector<int64_t> dims = quick ? std::vector<int64_t>{256, 2048, 8192}
                                    : std::vector<int64_t>{128, 512, 1024, 2048, 4096, 8192, 16384};
  for (const char *dt : dtypes)
    for (int64_t m : dims)
      for (int64_t n : dims)
        for (int64_t k : dims) gemm_row("gemm", "gemm", dt, m, n, k, 1, false);
  /* transformer shapes: tokens x (hidden, 3 hidden, 4 hidden) of 4096..16384-wide models */
  int64_t tokens[] = {2048, 8192, 32768};
  int64_t hidden[] = {4096, 5120, 8192, 12288, 16384};
  for (const char *dt : dtypes)
    for (int64_t t : tokens)
      for (int64_t h : hidden) {
        if (quick && h != 8192) continue;
        gemm_row("gemm", "gemm", dt, t, 3 * h, h, 1, false, "qkv");
        gemm_row("gemm", "gemm", dt, t, h, 4 * h, 1, false, "fc2");
      }
  /* the tiled fallback on a few shapes, and a check of the vendor's result against it */
  for (int64_t d : {512, 2048, 4096}) gemm_row("gemm", "gemm", "bf16", d, d, d, 1, true);
#if MM_CALIB_BLASLT
  {
    int64_t m = 256, n = 192, k = 320;
    gemm_bufs((size_t)4 << 20);
    fill(gb.a, (size_t)m * k * 2, "bf16", 7), fill(gb.b, (size_t)k * n * 2, "bf16", 8);
    void *c2 = dalloc((size_t)m * n * 2);
    LtGemm g = lt_plan("bf16", m, n, k, 1);
    if (g.ok) {
      lt_run(g, gb.a, gb.b, gb.c, stream);
      tiled_launch(gb.a, gb.b, c2, (int)m, (int)n, (int)k, stream);
      CHECK(hipStreamSynchronize(stream));
      std::vector<uint16_t> x((size_t)m * n), y((size_t)m * n);
      CHECK(hipMemcpy(x.data(), gb.c, x.size() * 2, hipMemcpyDeviceToHost));
      CHECK(hipMemcpy(y.data(), c2, y.size() * 2, hipMemcpyDeviceToHost));
      double worst = 0;
      for (size_t i = 0; i < x.size(); i++)
        worst = std::max(worst, std::fabs((double)bf16_to_f(x[i]) - bf16_to_f(y[i])) /
                                    std::max(1.0, std::fabs((double)bf16_to_f(y[i]))));
      note("check: %s vs tiled bf16 GEMM 256x192x320: max relative difference %.3g (%s)", MM_CALIB_BLAS_NAME, worst,
           worst < 0.05 ? "ok" : "MISMATCH");
    }
    lt_free(g);
    hipFree(c2);
  }
#endif
}

/* Matrix-vector products (m <= 16 rows: the gemv kind), weight-read bound. */
static void bench_gemv()
{
  std::vector<int64_t> rows = {1, 4, 16};
  std::vector<int64_t> dims = quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{1024, 4096, 8192, 16384, 28672};
  for (int64_t m : rows)
    for (int64_t n : dims)
      for (int64_t k : dims) gemm_row("gemv", "gemv", "bf16", m, n, k, 1, false);
}

/* Attention's core unfused (vendor's batched GEMMs + a softmax pass): QK^T [seq x seq] per
 * head, softmax, PV. FLOPs 4 seq^2 d per head (no causal skipping). The fused (flash) kernel
 * is measured by scripts/calib-attention.py through the framework's SDPA. */
static void bench_attention()
{
#if MM_CALIB_BLASLT
  for (int64_t d : {64, 128})
    for (int64_t seq : {512, 1024, 2048, 4096, 8192}) {
      if (quick && seq != 2048) continue;
      int64_t heads = std::max<int64_t>(1, (int64_t)32 * 4096 / seq); /* about the same work per point */
      size_t qkv = (size_t)seq * d * heads * 2, sc = (size_t)seq * seq * heads * 2;
      void *q = dalloc(qkv), *kk = dalloc(qkv), *v = dalloc(qkv), *o = dalloc(qkv), *s = dalloc(sc);
      fill(q, qkv, "bf16", 11), fill(kk, qkv, "bf16", 12), fill(v, qkv, "bf16", 13);
      LtGemm g1 = lt_plan("bf16", seq, seq, d, heads);   /* S = Q K^T */
      LtGemm g2 = lt_plan("bf16", d, seq, seq, heads);   /* O^T = V^T P^T */
      if (g1.ok && g2.ok) {
        Stat st = time_calls([&](int) {
          lt_run(g1, q, kk, s, stream);
          softmax_rows<<<(unsigned)(seq * heads), 256, 0, stream>>>((uint16_t *)s, (int)seq);
          lt_run(g2, v, s, o, stream);
        });
        double flops = 4.0 * seq * seq * d * heads;
        double bytes = 4.0 * qkv + 3.0 * sc;
        row("attention", "attention", "bf16", (double)seq, (double)seq, (double)d, (double)heads, bytes, flops,
            "unfused", st);
      }
      lt_free(g1), lt_free(g2);
      hipFree(q), hipFree(kk), hipFree(v), hipFree(o), hipFree(s);
    }
#endif
}

/* Embedding-bag pooling (the lookup kind): bytes are the rows read plus the pooled output. */
static void bench_lookup()
{
  const int n_tables = 16, rows = 1 << 19;
  for (int dim : {64, 128, 256}) {
    size_t tb = (size_t)n_tables * rows * dim * 4;
    float *tables = (float *)dalloc(tb);
    fill(tables, tb, "fp32", 21);
    for (int pool : {1, 16, 64})
      for (int batch : {512, 4096, 16384}) {
        if (quick && (batch != 4096 || pool != 16)) continue;
        float *o = (float *)dalloc((size_t)batch * n_tables * dim * 4);
        int threads = batch * n_tables * 32;
        Stat s = time_calls([&](int) {
          embedding_bag<<<(threads + 255) / 256, 256, 0, stream>>>(tables, o, batch, n_tables, rows, dim, pool);
        });
        double bytes = ((double)pool + 1) * batch * n_tables * dim * 4;
        row("lookup", "lookup", "fp32", (double)batch * pool, (double)dim, 1, n_tables, bytes, 0,
            "pool=" + std::to_string(pool), s);
        hipFree(o);
      }
    hipFree(tables);
  }
}

/* FiCCO's decomposition loss (DIL): a GEMM split n ways by M and by K (the pieces in series
 * on one stream) against the unsplit GEMM, and a DMA transfer split n ways. */
static void bench_dil()
{
#if MM_CALIB_BLASLT
  struct Shape { int64_t m, n, k; };
  for (Shape sh : {Shape{8192, 8192, 8192}, Shape{16384, 4096, 4096}, Shape{4096, 8192, 28672}, Shape{2048, 8192, 8192}}) {
    gemm_bufs((size_t)std::max({sh.m * sh.k, sh.k * sh.n, sh.m * sh.n}) * 2);
    double flops = 2.0 * sh.m * sh.n * sh.k;
    for (int ways : {1, 2, 4, 8}) {
      if (quick && ways == 8) continue;
      for (int by_k = 0; by_k < (ways == 1 ? 1 : 2); by_k++) {
        int64_t pm = by_k ? sh.m : sh.m / ways, pk = by_k ? sh.k / ways : sh.k;
        LtGemm g = lt_plan("bf16", pm, sh.n, pk, 1, by_k ? 1.f : 0.f);
        if (!g.ok) { lt_free(g); continue; }
        Stat s = time_calls([&](int) {
          for (int p = 0; p < ways; p++) {
            /* A is k x m: a slice by M starts p*pm columns in; by K, p*pk rows in (lda stays k only
             * for the unsplit: the pieces here are contiguous sub-problems of equal size) */
            const char *a = (const char *)gb.a + (size_t)p * pm * pk * 2 * (by_k ? 1 : 1);
            const char *b = (const char *)gb.b + (by_k ? (size_t)p * pk * sh.n * 2 : 0);
            char *c = (char *)gb.c + (by_k ? 0 : (size_t)p * pm * sh.n * 2);
            lt_run(g, a, b, c, stream);
          }
        });
        row("dil_gemm", "gemm", "bf16", (double)sh.m, (double)sh.n, (double)sh.k, 1,
            2.0 * (sh.m * sh.k + sh.k * sh.n + sh.m * sh.n), flops,
            std::string(by_k ? "split_k=" : "split_m=") + std::to_string(ways), s);
        lt_free(g);
      }
    }
  }
#endif
  size_t sz = (size_t)256 << 20;
  char *src = (char *)dalloc(sz), *dst = (char *)dalloc(sz);
  for (int ways : {1, 2, 4, 8, 16, 64}) {
    Stat s = time_calls([&](int) {
      for (int p = 0; p < ways; p++)
        CHECK(hipMemcpyAsync(dst + (size_t)p * (sz / ways), src + (size_t)p * (sz / ways), sz / ways,
                             hipMemcpyDeviceToDevice, stream));
    });
    row("dil_copy", "elementwise", "bf16", (double)sz / 2, 1, 1, 1, 2.0 * sz, 0, "dma;split=" + std::to_string(ways), s);
  }
  hipFree(src);
  hipFree(dst);
}

/* FiCCO's contention loss (CIL): a GEMM loop on one stream and a copy loop (kernel or DMA) of
 * about the same length on another, started together; each stream's time per call against
 * its time alone (rows "alone" and "with=..."). */
static void bench_cil()
{
#if MM_CALIB_BLASLT
  struct Shape { int64_t m, n, k; };
  size_t sz = (size_t)64 << 20;
  char *src = (char *)dalloc((size_t)1 << 30), *dst = (char *)dalloc((size_t)1 << 30);
  const int slots = 16;
  for (Shape sh : {Shape{8192, 8192, 8192}, Shape{4096, 4096, 4096}, Shape{16384, 1024, 4096}}) {
    gemm_bufs((size_t)std::max({sh.m * sh.k, sh.k * sh.n, sh.m * sh.n}) * 2);
    LtGemm g = lt_plan("bf16", sh.m, sh.n, sh.k, 1);
    if (!g.ok) { lt_free(g); continue; }
    double flops = 2.0 * sh.m * sh.n * sh.k, gbytes = 2.0 * (sh.m * sh.k + sh.k * sh.n + sh.m * sh.n);
    Stat ga = time_calls([&](int) { lt_run(g, gb.a, gb.b, gb.c, stream); });
    row("cil_gemm", "gemm", "bf16", (double)sh.m, (double)sh.n, (double)sh.k, 1, gbytes, flops, "alone", ga);
    for (int dma = 0; dma < 2; dma++) {
      auto copy = [&](int i, hipStream_t s) {
        size_t off = (size_t)(i % slots) * sz;
        if (dma)
          CHECK(hipMemcpyAsync(dst + off, src + off, sz, hipMemcpyDeviceToDevice, s));
        else
          copy_kernel<<<4096, 256, 0, s>>>((const uint4 *)(src + off), (uint4 *)(dst + off), sz / 16);
      };
      /* alone */
      CHECK(hipStreamSynchronize(stream));
      Stat ca = time_calls([&](int i) { copy(i, stream); });
      int ng = std::max(4, (int)(0.02 / ga.median)), nc = std::max(4, (int)(ng * ga.median / ca.median));
      std::vector<double> tg, tc;
      for (int r = 0; r < reps; r++) {
        CHECK(hipDeviceSynchronize());
        CHECK(hipEventRecord(ev0, stream));
        CHECK(hipStreamWaitEvent(stream2, ev0, 0));
        CHECK(hipEventRecord(ev2, stream2));
        for (int i = 0; i < ng; i++) lt_run(g, gb.a, gb.b, gb.c, stream);
        for (int i = 0; i < nc; i++) copy(i, stream2);
        CHECK(hipEventRecord(ev1, stream));
        CHECK(hipEventRecord(ev3, stream2));
        CHECK(hipDeviceSynchronize());
        float a = 0, b = 0;
        CHECK(hipEventElapsedTime(&a, ev0, ev1));
        CHECK(hipEventElapsedTime(&b, ev2, ev3));
        tg.push_back(a * 1e-3 / ng), tc.push_back(b * 1e-3 / nc);
      }
      std::sort(tg.begin(), tg.end()), std::sort(tc.begin(), tc.end());
      const char *by = dma ? "dma" : "kernel";
      row("cil_copy", "elementwise", "bf16", (double)sz / 2, 1, 1, 1, 2.0 * sz, 0, std::string(by) + ";alone", ca);
      row("cil_gemm", "gemm", "bf16", (double)sh.m, (double)sh.n, (double)sh.k, 1, gbytes, flops,
          std::string("with=") + by + "_copy", Stat{tg[tg.size() / 2], tg.front(), tg.back(), reps});
      row("cil_copy", "elementwise", "bf16", (double)sz / 2, 1, 1, 1, 2.0 * sz, 0, std::string(by) + ";with=gemm",
          Stat{tc[tc.size() / 2], tc.front(), tc.back(), reps});
    }
    lt_free(g);
  }
  hipFree(src);
  hipFree(dst);
#endif
}

/* ---- fused GEMV + AllReduce (the AMD paper's scale-up form), P logical ranks ----------------
 * Row-parallel GEMV: rank r holds rows [r K/P, (r+1) K/P) of W[K x N] and of x; its partial
 * y_r = x_r W_r is all-reduced. Fused: one persistent kernel whose workgroups take tasks from a
 * ticket counter. Phase 1, task (r, slice j): the partial of slice j's S columns, stored
 * straight into the receive buffer of the slice's owner (rank j mod P: zero-copy put), a fence,
 * then a flag per (slice, source rank). Phase 2, task j: the owner waits for its P flags,
 * reduces in rank order 0..P-1, stores the sum into every rank's output (the all-gather) and
 * sets a flag per (slice, destination). Tickets hand out every phase-1 task before any phase-2
 * one, so a waiting workgroup only waits for tasks already running: no deadlock at any
 * occupancy. Communication-aware order: each rank computes the slices other ranks own first.
 * Bulk: a GEMV kernel for every partial, then a reduce + broadcast kernel (the collective).
 * On one GPU the ranks' buffers share its memory: this measures the fused kernel's own costs
 * (puts, fences, flags, waits, occupancy) against the bulk pair, not the interconnect. */

/* One column chunk of a rank's partial: 64 columns from @col0, rows [k0, k1). The block's 256
 * threads are 8 row groups x 32 lanes of 2 columns (32-bit loads); the 8 group sums are added
 * in group order through shared memory, so bulk and fused results agree bit for bit.
 * Stores the chunk into out[col] (col < n). */
#define GV_COLS 64
#define GV_GROUPS 8
__device__ static void gemv_chunk(const uint16_t *__restrict__ W, const uint16_t *__restrict__ x, int k0, int k1,
                                  int n, int col0, float *out)
{
  __shared__ float sum[GV_GROUPS][GV_COLS];
  const int lane = threadIdx.x % 32, g = threadIdx.x / 32, c = col0 + 2 * lane;
  const int len = (k1 - k0 + GV_GROUPS - 1) / GV_GROUPS, a = k0 + g * len, b = min(k1, a + len);
  float s0 = 0.f, s1 = 0.f;
  if (c + 1 < n)
    for (int k = a; k < b; k++) {
      const uint32_t w = *(const uint32_t *)&W[(size_t)k * n + c];
      const float xv = bf16_to_f(x[k]);
      s0 = __fmaf_rn(xv, bf16_to_f((uint16_t)(w & 0xFFFFu)), s0);
      s1 = __fmaf_rn(xv, bf16_to_f((uint16_t)(w >> 16)), s1);
    }
  sum[g][2 * lane] = s0, sum[g][2 * lane + 1] = s1;
  __syncthreads();
  if (threadIdx.x < GV_COLS && col0 + (int)threadIdx.x < n) {
    float t = 0.f;
    for (int q = 0; q < GV_GROUPS; q++) t = t + sum[q][threadIdx.x];
    out[col0 + threadIdx.x] = t;
  }
  __syncthreads();
}

/* Bulk 1: every rank's partial, part[r][n], one 64-column chunk per block. */
__global__ void gemv_partials(const uint16_t *W, const uint16_t *x, float *part, int P, int K, int N)
{
  const int r = blockIdx.y;
  gemv_chunk(W, x, r * (K / P), (r + 1) * (K / P), N, blockIdx.x * GV_COLS, part + (size_t)r * N);
}

/* Bulk 2: the all-reduce: sum in rank order, stored into every rank's output y[d][n]. */
__global__ void reduce_broadcast(const float *part, float *y, int P, int N)
{
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= N) return;
  float s = 0.f;
  for (int r = 0; r < P; r++) s = s + part[(size_t)r * N + col];
  for (int d = 0; d < P; d++) y[(size_t)d * N + col] = s;
}

__global__ void fused_gemv_allreduce(const uint16_t *W, const uint16_t *x, float *recv, float *y,
                                     unsigned *flag1, unsigned *flag2, unsigned *tickets, const int *order, int P,
                                     int K, int N, int S, unsigned epoch)
{
  __shared__ int task;
  const int nslices = (N + S - 1) / S, t1 = P * nslices, total = t1 + nslices;
  for (;;) {
    if (threadIdx.x == 0) task = (int)atomicAdd(&tickets[epoch], 1u);
    __syncthreads();
    const int t = task;
    __syncthreads();
    if (t >= total) return;
    if (t < t1) {
      const int r = t % P, j = order[r * nslices + t / P];
      /* the put: the partial goes straight into the receive buffer of rank j % P */
      for (int col0 = j * S; col0 < min(N, (j + 1) * S); col0 += GV_COLS)
        gemv_chunk(W, x, r * (K / P), (r + 1) * (K / P), N, col0, recv + (size_t)r * N);
      __threadfence_system();
      __syncthreads();
      if (threadIdx.x == 0) atomicExch(&flag1[j * P + r], epoch);
    } else {
      const int j = t - t1;
      if (threadIdx.x == 0)
        for (int r = 0; r < P; r++)
          while (atomicAdd(&flag1[j * P + r], 0u) != epoch) {
          }
      __syncthreads();
      __threadfence();
      for (int col = j * S + threadIdx.x; col < min(N, (j + 1) * S); col += blockDim.x) {
        float s = 0.f;
        for (int r = 0; r < P; r++) s = s + *(volatile float *)&recv[(size_t)r * N + col];
        for (int d = 0; d < P; d++) y[(size_t)d * N + col] = s; /* the all-gather puts */
      }
      __threadfence_system();
      __syncthreads();
      if (threadIdx.x == 0)
        for (int d = 0; d < P; d++) atomicExch(&flag2[j * P + d], epoch);
    }
  }
}

/* ---- fused embedding + All2All: model-parallel tables -> data-parallel batch ----------------
 * T tables of R x D split contiguously over P ranks; B samples, L rows summed per (sample,
 * table). Rank d receives samples [d B/P, (d+1) B/P) of every table: out[d][b][t][D]. Fused:
 * persistent ticketed tasks (rank r, slice of S samples): pool r's tables for the slice and
 * store the result straight into the destination rank's output (the put), fence, flag per
 * (slice, source); then per slice a consumer task waits for its P flags (the next layer's
 * wait). Bulk: pool every rank's tables, then an All2All copy kernel. Sums in row order p =
 * 0..L-1 in both, so the outputs agree bit for bit. */

__device__ static inline float bag_sum(const float *__restrict__ tables, int b, int t, int T, int R, int D, int L,
                                       int d)
{
  const float *tab = tables + (size_t)t * R * D;
  float acc = 0.f;
  for (int p = 0; p < L; p++) acc = acc + tab[(size_t)(mix((uint64_t)(b * T + t) * 1315423911u + p) % R) * D + d];
  return acc;
}

/* Bulk 1: pooled[r][b][t_local][D] for every rank (one block per (sample, table)). */
__global__ void bag_pool_all(const float *tables, float *pooled, int P, int B, int T, int R, int D, int L)
{
  const int b = blockIdx.x, t = blockIdx.y, r = t / (T / P), tl = t % (T / P);
  for (int d = threadIdx.x; d < D; d += blockDim.x)
    pooled[(((size_t)r * B + b) * (T / P) + tl) * D + d] = bag_sum(tables, b, t, T, R, D, L, d);
}

/* Bulk 2: the All2All: rank r's rows of samples of rank d into d's output. */
__global__ void bag_alltoall(const float *pooled, float *out, int P, int B, int T, int D)
{
  const int b = blockIdx.x, t = blockIdx.y, r = t / (T / P), tl = t % (T / P), dst = b / (B / P), lb = b % (B / P);
  for (int d = threadIdx.x; d < D; d += blockDim.x)
    out[(((size_t)dst * (B / P) + lb) * T + t) * D + d] = pooled[(((size_t)r * B + b) * (T / P) + tl) * D + d];
}

__global__ void fused_bag_alltoall(const float *tables, float *out, unsigned *flags, unsigned *tickets, const int *order,
                                   int P, int B, int T, int R, int D, int L, int S, unsigned epoch)
{
  __shared__ int task;
  const int nslices = (B + S - 1) / S, t1 = P * nslices, total = t1 + nslices;
  for (;;) {
    if (threadIdx.x == 0) task = (int)atomicAdd(&tickets[epoch], 1u);
    __syncthreads();
    const int t = task;
    __syncthreads();
    if (t >= total) return;
    if (t < t1) {
      const int r = t % P, j = order[r * nslices + t / P];
      /* every (sample, table, element) of the slice across the block's threads: independent
       * gathers in flight, as the bulk kernel's many blocks have them */
      const int tl = T / P, n = min(S, B - j * S) * tl * D;
      for (int e = threadIdx.x; e < n; e += blockDim.x) {
        const int b = j * S + e / (tl * D), tt = r * tl + (e / D) % tl, d = e % D;
        const int dst = b / (B / P), lb = b % (B / P);
        out[(((size_t)dst * (B / P) + lb) * T + tt) * D + d] = bag_sum(tables, b, tt, T, R, D, L, d); /* the put */
      }
      __threadfence_system();
      __syncthreads();
      if (threadIdx.x == 0) atomicExch(&flags[j * P + r], epoch);
    } else if (threadIdx.x == 0) {
      const int j = t - t1; /* the consumer of slice j waits for every source */
      for (int r = 0; r < P; r++)
        while (atomicAdd(&flags[j * P + r], 0u) != epoch) {
        }
    }
  }
}

/* ---- fused GEMM + All2All ------------------------------------------------------------------------
 * Each of P logical ranks computes C_r = A_r^T B_r (M x N; the plain tiled kernel's 64 x 64
 * tiles); rank d receives rows [d M/P, (d+1) M/P) of every rank's C: out[d][src][row][N]
 * (fp32). Fused: persistent ticketed tasks (rank, tile) store the tile straight into its
 * destination (the put), fence, flag; then per destination a consumer task waits for every
 * tile meant for it. Bulk: the tiled GEMM of every rank, then an All2All copy. */

__device__ static void put_tile(float *out, const float acc[4][4], int r, int row0, int col0, int P, int M, int N)
{
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16, mp = M / P;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      const int row = row0 + tx * 4 + i, col = col0 + ty * 4 + j;
      if (row < M && col < N) out[(((size_t)(row / mp) * P + r) * mp + row % mp) * N + col] = acc[i][j];
    }
}

/* Bulk 1: every rank's C into c[r][col][row] (column-major, as the plain kernel stores). */
__global__ void gemm_all(const uint16_t *A, const uint16_t *B, float *c, int M, int N, int K)
{
  const int r = blockIdx.z, tx = threadIdx.x % 16, ty = threadIdx.x / 16, row0 = blockIdx.x * TT, col0 = blockIdx.y * TT;
  float acc[4][4];
  tile_mm(A + (size_t)r * M * K, B + (size_t)r * N * K, M, N, K, row0, col0, acc);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      const int row = row0 + tx * 4 + i, col = col0 + ty * 4 + j;
      if (row < M && col < N) c[((size_t)r * N + col) * M + row] = acc[i][j];
    }
}

/* Bulk 2: the All2All. */
__global__ void gemm_alltoall(const float *c, float *out, int P, int M, int N)
{
  const size_t total = (size_t)P * M * N;
  const int mp = M / P;
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
    const int col = (int)(e % N), row = (int)(e / N % M), r = (int)(e / ((size_t)M * N));
    out[(((size_t)(row / mp) * P + r) * mp + row % mp) * N + col] = c[((size_t)r * N + col) * M + row];
  }
}

__global__ void fused_gemm_alltoall(const uint16_t *A, const uint16_t *B, float *out, unsigned *flags,
                                    unsigned *tickets, const int *order, int P, int M, int N, int K, unsigned epoch)
{
  __shared__ int task;
  const int tm = (M + TT - 1) / TT, tn = (N + TT - 1) / TT, ntiles = tm * tn, t1 = P * ntiles, total = t1 + P;
  for (;;) {
    if (threadIdx.x == 0) task = (int)atomicAdd(&tickets[epoch], 1u);
    __syncthreads();
    const int t = task;
    __syncthreads();
    if (t >= total) return;
    if (t < t1) {
      const int r = t % P, q = order[r * ntiles + t / P], row0 = (q / tn) * TT, col0 = (q % tn) * TT;
      float acc[4][4];
      tile_mm(A + (size_t)r * M * K, B + (size_t)r * N * K, M, N, K, row0, col0, acc);
      put_tile(out, acc, r, row0, col0, P, M, N);
      __threadfence_system();
      __syncthreads();
      if (threadIdx.x == 0) atomicExch(&flags[q * P + r], epoch);
    } else if (threadIdx.x == 0) {
      const int d = t - t1, mp = M / P; /* destination d waits for the tiles of its rows from every rank */
      for (int q = 0; q < ntiles; q++)
        if ((q / tn) * TT / mp == d)
          for (int r = 0; r < P; r++)
            while (atomicAdd(&flags[q * P + r], 0u) != epoch) {
            }
    }
  }
}

/* What the calls of one fused kernel share: a ticket counter per call (the epoch), the flag
 * arrays (cleared with the counters when the epochs wrap, so no flag holds an old epoch), and
 * the bit-for-bit comparison of each variant's output with the bulk result. */
struct FusedCalls {
  unsigned *tickets;
  size_t n_tickets;
  std::vector<std::pair<void *, size_t>> flags;
  unsigned epoch = 0;
  int checked = 0, differ = 0;

  FusedCalls(unsigned *t, size_t n, std::vector<std::pair<void *, size_t>> f) : tickets(t), n_tickets(n), flags(f) {}

  unsigned next()
  {
    if (++epoch >= n_tickets) {
      CHECK(hipMemsetAsync(tickets, 0, n_tickets * 4, stream));
      for (auto &f : flags) CHECK(hipMemsetAsync(f.first, 0, f.second, stream));
      epoch = 1;
    }
    return epoch;
  }

  void compare(const float *out, std::vector<float> &got, const std::vector<float> &ref, const char *what, int P)
  {
    CHECK(hipDeviceSynchronize());
    CHECK(hipMemcpy(got.data(), out, got.size() * 4, hipMemcpyDeviceToHost));
    checked++;
    if (memcmp(got.data(), ref.data(), got.size() * 4) == 0) return;
    differ++;
    note("check: fused %s P=%d differs from the bulk result", what, P);
  }

  void report(const char *what) const
  {
    note("check: fused %s vs bulk, bit for bit: %d of %d variants %s", what, checked - differ, checked,
         differ ? "agree (see the lines above)" : "agree (ok)");
  }
};

/* The order in which rank r takes its slices: aware, the slices other ranks own (slice j of
 * @nslices belongs to rank owner(j)) first; oblivious, in index order. */
static std::vector<int> slice_order(int P, int nslices, bool aware, int (*owner)(int j, int nslices, int P))
{
  std::vector<int> ord((size_t)P * nslices);
  for (int r = 0; r < P; r++) {
    int i = 0;
    for (int pass = 0; pass < 2; pass++)
      for (int j = 0; j < nslices; j++)
        if (!aware ? pass == 0 : (pass == 0) == (owner(j, nslices, P) != r)) ord[(size_t)r * nslices + i++] = j;
  }
  return ord;
}

static int owner_mod(int j, int, int P) { return j % P; }
static int owner_block(int j, int nslices, int P) { return j / ((nslices + P - 1) / P); }

static void bench_fused()
{
  const int K = 8192, N = 8192, threads = 256;
  hipDeviceProp_t prop;
  CHECK(hipGetDeviceProperties(&prop, 0));
  int per_cu = 0;
  CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_cu, fused_gemv_allreduce, threads, 0));
  uint16_t *W = (uint16_t *)dalloc((size_t)K * N * 2), *x = (uint16_t *)dalloc((size_t)K * 2);
  fill(W, (size_t)K * N * 2, "bf16", 31), fill(x, (size_t)K * 2, "bf16", 32);
  const size_t max_p = 8, max_slices = N / 64 + 1;
  float *part = (float *)dalloc(max_p * N * 4), *recv = (float *)dalloc(max_p * N * 4);
  float *yb = (float *)dalloc(max_p * N * 4), *yf = (float *)dalloc(max_p * N * 4);
  unsigned *flag1 = (unsigned *)dalloc(max_p * max_slices * 4), *flag2 = (unsigned *)dalloc(max_p * max_slices * 4);
  const size_t n_tickets = (size_t)1 << 20;
  unsigned *tickets = (unsigned *)dalloc(n_tickets * 4);
  int *order = (int *)dalloc(max_p * max_slices * 4);
  CHECK(hipMemset(flag1, 0, max_p * max_slices * 4));
  CHECK(hipMemset(flag2, 0, max_p * max_slices * 4));
  CHECK(hipMemset(tickets, 0, n_tickets * 4));
  FusedCalls gv{tickets, n_tickets, {{flag1, max_p * max_slices * 4}, {flag2, max_p * max_slices * 4}}};
  const double flops = 2.0 * K * N, bytes = 2.0 * K * N + 2.0 * K;
  for (int P : {2, 4, 8}) {
    auto bulk = [&](int) {
      gemv_partials<<<dim3(N / GV_COLS, P), threads, 0, stream>>>(W, x, part, P, K, N);
      reduce_broadcast<<<(N + threads - 1) / threads, threads, 0, stream>>>(part, yb, P, N);
    };
    Stat b = time_calls(bulk);
    row("fused_gemv_allreduce", "gemv", "bf16", 1, N, K, 1, bytes, flops, "bulk;ranks=" + std::to_string(P), b);
    std::vector<float> ref((size_t)P * N), got((size_t)P * N);
    CHECK(hipMemcpy(ref.data(), yb, ref.size() * 4, hipMemcpyDeviceToHost));
    for (int S : {64, 256, 1024})
      for (int aware = 0; aware < 2; aware++) {
        const int nslices = (N + S - 1) / S;
        std::vector<int> ord = slice_order(P, nslices, aware, owner_mod);
        CHECK(hipMemcpy(order, ord.data(), ord.size() * 4, hipMemcpyHostToDevice));
        for (int wpc : {1, 2, 4}) {
          if (wpc > per_cu) continue;
          const int grid = prop.multiProcessorCount * wpc;
          Stat f = time_calls([&](int) {
            unsigned e = gv.next();
            fused_gemv_allreduce<<<grid, threads, 0, stream>>>(W, x, recv, yf, flag1, flag2, tickets, order, P, K, N,
                                                              S, e);
          });
          gv.compare(yf, got, ref, "gemv+allreduce", P);
          row("fused_gemv_allreduce", "gemv", "bf16", 1, N, K, 1, bytes, flops,
              "fused;slices=" + std::to_string(S) + ";order=" + (aware ? "aware" : "oblivious") + ";ranks=" +
                std::to_string(P) + ";wgs_per_cu=" + std::to_string(wpc),
              f);
        }
      }
  }
  gv.report("gemv+allreduce");
  hipFree(W), hipFree(x), hipFree(part), hipFree(recv), hipFree(yb), hipFree(yf);
  hipFree(flag1), hipFree(flag2), hipFree(tickets), hipFree(order);

  /* embedding + All2All */
  const int T = 64, R = 1 << 17, D = 128, L = 32, B = 2048, bag_threads = 512;
  int bag_per_cu = 0;
  CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&bag_per_cu, fused_bag_alltoall, bag_threads, 0));
  float *tables = (float *)dalloc((size_t)T * R * D * 4);
  fill(tables, (size_t)T * R * D * 4, "fp32", 33);
  float *pooled = (float *)dalloc((size_t)B * T * D * 4), *ob = (float *)dalloc((size_t)B * T * D * 4);
  float *of = (float *)dalloc((size_t)B * T * D * 4);
  const int max_bslices = B / 8 + 1;
  unsigned *bflags = (unsigned *)dalloc((size_t)max_p * max_bslices * 4);
  unsigned *btickets = (unsigned *)dalloc(n_tickets * 4);
  int *border = (int *)dalloc((size_t)max_p * max_bslices * 4);
  CHECK(hipMemset(bflags, 0, (size_t)max_p * max_bslices * 4));
  CHECK(hipMemset(btickets, 0, n_tickets * 4));
  FusedCalls eb{btickets, n_tickets, {{bflags, (size_t)max_p * max_bslices * 4}}};
  const double bbytes = ((double)L + 1) * B * T * D * 4;
  for (int P : {2, 4, 8}) {
    Stat b = time_calls([&](int) {
      bag_pool_all<<<dim3(B, T), D, 0, stream>>>(tables, pooled, P, B, T, R, D, L);
      bag_alltoall<<<dim3(B, T), D, 0, stream>>>(pooled, ob, P, B, T, D);
    });
    row("fused_embedding_alltoall", "lookup", "fp32", (double)B * L, D, 1, T, bbytes, 0,
        "bulk;ranks=" + std::to_string(P), b);
    std::vector<float> ref((size_t)B * T * D), got((size_t)B * T * D);
    CHECK(hipMemcpy(ref.data(), ob, ref.size() * 4, hipMemcpyDeviceToHost));
    for (int S : {8, 32})
      for (int aware = 0; aware < 2; aware++) {
        const int nslices = (B + S - 1) / S;
        std::vector<int> ord = slice_order(P, nslices, aware, owner_block);
        CHECK(hipMemcpy(border, ord.data(), ord.size() * 4, hipMemcpyHostToDevice));
        for (int wpc : {1, 2, 4}) {
          if (wpc > bag_per_cu) continue;
          const int grid = prop.multiProcessorCount * wpc;
          Stat f = time_calls([&](int) {
            unsigned e = eb.next();
            fused_bag_alltoall<<<grid, bag_threads, 0, stream>>>(tables, of, bflags, btickets, border, P, B, T, R, D,
                                                                L, S, e);
          });
          eb.compare(of, got, ref, "embedding+all2all", P);
          row("fused_embedding_alltoall", "lookup", "fp32", (double)B * L, D, 1, T, bbytes, 0,
              "fused;slices=" + std::to_string(S) + ";order=" + (aware ? "aware" : "oblivious") + ";ranks=" +
                std::to_string(P) + ";wgs_per_cu=" + std::to_string(wpc),
              f);
        }
      }
  }
  eb.report("embedding+all2all");
  hipFree(tables), hipFree(pooled), hipFree(ob), hipFree(of), hipFree(bflags), hipFree(btickets), hipFree(border);

  /* GEMM + All2All */
  const int GM = 1024, GN = 1024, GK = 1024, tiles = (GM / TT) * (GN / TT);
  uint16_t *GA = (uint16_t *)dalloc((size_t)max_p * GM * GK * 2), *GB = (uint16_t *)dalloc((size_t)max_p * GN * GK * 2);
  fill(GA, (size_t)max_p * GM * GK * 2, "bf16", 41), fill(GB, (size_t)max_p * GN * GK * 2, "bf16", 42);
  float *gc = (float *)dalloc((size_t)max_p * GM * GN * 4), *gob = (float *)dalloc((size_t)max_p * GM * GN * 4);
  float *gof = (float *)dalloc((size_t)max_p * GM * GN * 4);
  unsigned *gflags = (unsigned *)dalloc((size_t)max_p * tiles * 4), *gtickets = (unsigned *)dalloc(n_tickets * 4);
  int *gorder = (int *)dalloc((size_t)max_p * tiles * 4);
  CHECK(hipMemset(gflags, 0, (size_t)max_p * tiles * 4));
  CHECK(hipMemset(gtickets, 0, n_tickets * 4));
  FusedCalls ga{gtickets, n_tickets, {{gflags, (size_t)max_p * tiles * 4}}};
  int gemm_per_cu = 0;
  CHECK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&gemm_per_cu, fused_gemm_alltoall, 256, 0));
  for (int P : {2, 4, 8}) {
    const double gflops = 2.0 * GM * GN * GK * P, gbytes = 2.0 * (GM * GK + GN * GK) * P + 8.0 * GM * GN * P;
    Stat b = time_calls([&](int) {
      gemm_all<<<dim3(GM / TT, GN / TT, P), 256, 0, stream>>>(GA, GB, gc, GM, GN, GK);
      gemm_alltoall<<<4096, 256, 0, stream>>>(gc, gob, P, GM, GN);
    });
    row("fused_gemm_alltoall", "gemm", "bf16", GM, GN, GK, P, gbytes, gflops, "bulk;ranks=" + std::to_string(P), b);
    std::vector<float> ref((size_t)P * GM * GN), got((size_t)P * GM * GN);
    CHECK(hipMemcpy(ref.data(), gob, ref.size() * 4, hipMemcpyDeviceToHost));
    for (int aware = 0; aware < 2; aware++) {
      std::vector<int> ord((size_t)P * tiles);
      for (int r = 0; r < P; r++) {
        int i = 0;
        for (int pass = 0; pass < 2; pass++)
          for (int q = 0; q < tiles; q++)
            if (!aware ? pass == 0 : (pass == 0) == ((q / (GN / TT)) * TT / (GM / P) != r)) ord[(size_t)r * tiles + i++] = q;
      }
      CHECK(hipMemcpy(gorder, ord.data(), ord.size() * 4, hipMemcpyHostToDevice));
      for (int wpc : {1, 2, 4}) {
        if (wpc > gemm_per_cu) continue;
        const int grid = prop.multiProcessorCount * wpc;
        Stat f = time_calls([&](int) {
          unsigned e = ga.next();
          fused_gemm_alltoall<<<grid, 256, 0, stream>>>(GA, GB, gof, gflags, gtickets, gorder, P, GM, GN, GK, e);
        });
        ga.compare(gof, got, ref, "gemm+all2all", P);
        row("fused_gemm_alltoall", "gemm", "bf16", GM, GN, GK, P, gbytes, gflops,
            std::string("fused;tile=64x64;order=") + (aware ? "aware" : "oblivious") +
              ";ranks=" + std::to_string(P) + ";wgs_per_cu=" + std::to_string(wpc),
            f);
      }
    }
  }
  ga.report("gemm+all2all");
  hipFree(GA), hipFree(GB), hipFree(gc), hipFree(gob), hipFree(gof), hipFree(gflags), hipFree(gtickets), hipFree(gorder);
}

/* Peer copies between device 0 and 1 by kernel (zero-copy stores) and by DMA engine, where
 * two devices can reach each other. */
static void bench_peer()
{
  int count = 0;
  CHECK(hipGetDeviceCount(&count));
  int can = 0;
  if (count >= 2) CHECK(hipDeviceCanAccessPeer(&can, 0, 1));
  if (!can) {
    note("peer: skipped (%d device%s, no peer access)", count, count == 1 ? "" : "s");
    return;
  }
  CHECK(hipSetDevice(1));
  char *remote = (char *)dalloc((size_t)1 << 30);
  CHECK(hipSetDevice(0));
  hipDeviceEnablePeerAccess(1, 0);
  char *local = (char *)dalloc((size_t)1 << 30);
  for (size_t sz = (size_t)1 << 16; sz <= ((size_t)1 << 30); sz *= 8) {
    Stat k = time_calls([&](int) {
      copy_kernel<<<(unsigned)std::min<size_t>(sz / 16 / 256 + 1, 4096), 256, 0, stream>>>((const uint4 *)local,
                                                                                          (uint4 *)remote, sz / 16);
    });
    row("peer", "", "bf16", (double)sz / 2, 1, 1, 1, (double)sz, 0, "kernel", k);
    Stat d = time_calls([&](int) { CHECK(hipMemcpyPeerAsync(remote, 1, local, 0, sz, stream)); });
    row("peer", "", "bf16", (double)sz / 2, 1, 1, 1, (double)sz, 0, "dma", d);
  }
  hipFree(local);
  CHECK(hipSetDevice(1));
  hipFree(remote);
  CHECK(hipSetDevice(0));
}

int main(int argc, char **argv)
{
  const char *path = nullptr;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--out") && i + 1 < argc)
      path = argv[++i];
    else if (!strcmp(argv[i], "--quick"))
      quick = true;
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::max(3, atoi(argv[++i]));
    else if (!strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr,
              "usage: madmax-calib [--out FILE] [--quick] [--reps N] [--only launch,copy,gemm,gemv,attention,"
              "lookup,dil,cil,peer,fused]\n");
      return 1;
    }
  }
  if (path && !(out = fopen(path, "w"))) {
    fprintf(stderr, "madmax-calib: cannot write %s\n", path);
    return 1;
  }
  CHECK(hipSetDevice(0));
  hipDeviceProp_t prop;
  CHECK(hipGetDeviceProperties(&prop, 0));
  int drv = 0, rt = 0, clk = 0, mclk = 0, bus = 0;
  CHECK(hipDriverGetVersion(&drv));
  CHECK(hipRuntimeGetVersion(&rt));
  hipDeviceGetAttribute(&clk, hipDeviceAttributeClockRate, 0);
  hipDeviceGetAttribute(&mclk, hipDeviceAttributeMemoryClockRate, 0);
  hipDeviceGetAttribute(&bus, hipDeviceAttributeMemoryBusWidth, 0);
  CHECK(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
  CHECK(hipStreamCreateWithFlags(&stream2, hipStreamNonBlocking));
  CHECK(hipEventCreate(&ev0));
  CHECK(hipEventCreate(&ev1));
  CHECK(hipEventCreate(&ev2));
  CHECK(hipEventCreate(&ev3));
#if MM_CALIB_BLASLT
  LTCHECK(hipblasLtCreate(&lt));
  lt_ws = dalloc(lt_ws_bytes);
#endif
  fprintf(out, "# madmax calibration v1\n");
  note("device: %s", prop.name);
  note("platform: %s", MM_CALIB_PLATFORM);
#if defined(__HIP_PLATFORM_AMD__)
  note("arch: %s", prop.gcnArchName);
#else
  note("arch: sm_%d%d", prop.major, prop.minor);
#endif
  note("compute_units: %d", prop.multiProcessorCount);
  note("memory_GiB: %.1f", (double)prop.totalGlobalMem / (1u << 30));
  note("clock_mhz: %d", clk / 1000);
  note("memory_clock_mhz: %d", mclk / 1000);
  note("memory_bus_bits: %d", bus);
  note("driver_version: %d", drv);
  note("runtime_version: %d", rt);
#if MM_CALIB_BLASLT
  note("blas: %s %zu", MM_CALIB_BLAS_NAME, (size_t)hipblasLtGetVersion());
#else
  note("blas: none (the tiled kernel only)");
#endif
  note("date: %lld", (long long)time(nullptr));
  note("harness: src/calib/hip/calib.cpp%s, %d repetitions, each >= %.0f us after 3 warm-up calls", quick ? " --quick" : "",
       reps, min_rep_s * 1e6);
  fprintf(out, "bench,kind,dtype,m,n,k,batch,bytes,flops,variant,reps,median_s,min_s,max_s,source\n");
  std::vector<const char *> dtypes = {"bf16", "fp16"};
#if MM_CALIB_BLASLT
#if defined(__HIP_PLATFORM_AMD__)
  if (strstr(prop.gcnArchName, "gfx94") || strstr(prop.gcnArchName, "gfx95")) dtypes.push_back("fp8");
#else
  if (prop.major * 10 + prop.minor >= 89) dtypes.push_back("fp8");
#endif
#endif
  if (wanted("launch")) bench_launch();
  if (wanted("copy")) bench_copy();
  if (wanted("gemm")) bench_gemm(dtypes);
  if (wanted("gemv")) bench_gemv();
  if (wanted("attention")) bench_attention();
  if (wanted("lookup")) bench_lookup();
  if (wanted("dil")) bench_dil();
  if (wanted("cil")) bench_cil();
  if (wanted("peer")) bench_peer();
  if (wanted("fused")) bench_fused();
  CHECK(hipDeviceSynchronize());
  if (out != stdout) fclose(out);
  return 0;
}

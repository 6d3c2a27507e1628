/* cpu: the calibration harness on the CPU, threads as workgroups. The benches and the rows'
 * conventions are those of the GPU harness (src/calib/hip/calib.cpp), so that the fitter treats
 * both alike: a "kernel" is a task split over a pool of worker threads, a launch dispatches it
 * to the pool and waits for every worker; time per call is the median, min and max of `reps`
 * repetitions, each at least MIN_REP_S of calls after a warm-up. Timings are the machine's
 * (they vary run to run); the rows, their order and their shapes do not. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "cpu_fused.h"

/* One timed repetition runs at least this long (the GPU harness uses 200 us; CPU timers and
 * launches are coarser). */
#define MIN_REP_S 2e-3
#define WARMUP_CALLS 3
#define MAX_INNER 2000
#define DEFAULT_REPS 5

/* ---- the worker pool ------------------------------------------------------------------- */

typedef struct {
  MmCpuPool *pool;
  guint index;
} Worker;

struct MmCpuPool {
  GMutex lock;
  GCond go, done;
  GThread **threads;
  Worker *workers;
  guint n, started;
  guint64 epoch;   /* launches so far: a worker runs each epoch once */
  guint running;   /* workers still in the current launch */
  gboolean quit;
  MmCpuKernelFn fn;
  gpointer data;
};

static gpointer worker_main(gpointer p)
{
  Worker *w = p;
  MmCpuPool *pool = w->pool;
  guint64 seen = 0;
  g_mutex_lock(&pool->lock);
  for (;;) {
    while (pool->epoch == seen && !pool->quit) g_cond_wait(&pool->go, &pool->lock);
    if (pool->quit) break;
    seen = pool->epoch;
    MmCpuKernelFn fn = pool->fn;
    gpointer data = pool->data;
    g_mutex_unlock(&pool->lock);
    fn(w->index, pool->n, data);
    g_mutex_lock(&pool->lock);
    if (--pool->running == 0) g_cond_signal(&pool->done);
  }
  g_mutex_unlock(&pool->lock);
  return NULL;
}

MmCpuPool *mm__cpu_pool_new(guint n_workers, GError **error)
{
  g_return_val_if_fail(n_workers >= 1, NULL);
  MmCpuPool *pool = g_new0(MmCpuPool, 1);
  g_mutex_init(&pool->lock);
  g_cond_init(&pool->go);
  g_cond_init(&pool->done);
  pool->n = n_workers;
  pool->threads = g_new0(GThread *, n_workers);
  pool->workers = g_new0(Worker, n_workers);
  for (guint i = 0; i < n_workers; i++) {
    pool->workers[i] = (Worker){.pool = pool, .index = i};
    g_autoptr(GError) e = NULL;
    pool->threads[i] = g_thread_try_new("mm-calib", worker_main, &pool->workers[i], &e);
    if (!pool->threads[i]) {
      g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_BACKEND, "cpu: cannot start worker %u of %u: %s", i + 1,
                  n_workers, e->message);
      mm__cpu_pool_free(pool);
      return NULL;
    }
    pool->started++;
  }
  return pool;
}

void mm__cpu_pool_free(MmCpuPool *pool)
{
  if (!pool) return;
  g_mutex_lock(&pool->lock);
  pool->quit = TRUE;
  g_cond_broadcast(&pool->go);
  g_mutex_unlock(&pool->lock);
  for (guint i = 0; i < pool->started; i++) g_thread_join(pool->threads[i]);
  g_mutex_clear(&pool->lock);
  g_cond_clear(&pool->go);
  g_cond_clear(&pool->done);
  g_free(pool->threads);
  g_free(pool->workers);
  g_free(pool);
}

guint mm__cpu_pool_size(const MmCpuPool *pool)
{
  return pool->n;
}

void mm__cpu_pool_run(MmCpuPool *pool, MmCpuKernelFn fn, gpointer data)
{
  g_return_if_fail(pool != NULL && fn != NULL);
  g_mutex_lock(&pool->lock);
  g_assert(pool->running == 0);
  pool->fn = fn, pool->data = data;
  pool->running = pool->n;
  pool->epoch++;
  g_cond_broadcast(&pool->go);
  while (pool->running > 0) g_cond_wait(&pool->done, &pool->lock);
  g_mutex_unlock(&pool->lock);
}

/* ---- data ------------------------------------------------------------------------------ */

/* The GPU harness's mixer (src/calib/hip/calib.cpp mix, a 64-bit finalizer). */
static guint32 mix(guint64 x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return (guint32)x;
}

float mm__cpu_fill_value(guint64 i, guint64 seed)
{
  return (float)(mix(i ^ seed) & 0xFFFFu) / 65536.0f - 0.5f;
}

gsize mm__cpu_bag_row(guint64 group, guint p, gsize rows)
{
  return (gsize)(mix(group * 1315423911u + p) % rows);
}

static float *alloc_floats(gsize n, guint64 seed, GError **error)
{
  float *p = g_try_malloc(MAX(n, 1) * sizeof(float));
  if (!p) {
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_BACKEND, "cpu: cannot allocate %" G_GSIZE_FORMAT " bytes",
                n * sizeof(float));
    return NULL;
  }
  for (gsize i = 0; i < n; i++) p[i] = mm__cpu_fill_value(i, seed);
  return p;
}

static char *alloc_bytes(gsize n, GError **error)
{
  char *p = g_try_malloc(MAX(n, 1));
  if (!p)
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_BACKEND, "cpu: cannot allocate %" G_GSIZE_FORMAT " bytes", n);
  else
    memset(p, 1, n);
  return p;
}

/* ---- the harness ----------------------------------------------------------------------- */

typedef struct {
  MmCpuPool *pool;
  guint threads, reps;
  gboolean quick;
  MmCalibTable *out;
} Harness;

typedef struct {
  double median, min, max;
} Stat;

static double now_s(void)
{
  return (double)g_get_monotonic_time() * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static Stat stat_of(double *t, guint n)
{
  qsort(t, n, sizeof *t, cmp_double);
  return (Stat){t[n / 2], t[0], t[n - 1]};
}

typedef void (*CallFn)(gpointer data, guint call);

/* Times f(data, i) (one call per i): warm-up, then `reps` repetitions of `inner` calls each,
 * inner chosen so that a repetition lasts at least MIN_REP_S. Seconds per call (calib.cpp
 * time_calls). */
static Stat time_calls(const Harness *h, CallFn f, gpointer data)
{
  for (guint i = 0; i < WARMUP_CALLS; i++) f(data, i);
  double t0 = now_s();
  f(data, 0);
  double one = MAX(now_s() - t0, 1e-7);
  guint inner = (guint)MIN((double)MAX_INNER, MAX(1.0, ceil(MIN_REP_S / one)));
  g_autofree double *t = g_new(double, h->reps);
  guint call = 0;
  for (guint r = 0; r < h->reps; r++) {
    t0 = now_s();
    for (guint i = 0; i < inner; i++) f(data, call++);
    /* the clock's resolution is 1 us: never report a zero */
    t[r] = MAX(now_s() - t0, 1e-6) / inner;
  }
  return stat_of(t, h->reps);
}

/* One row: see docs/CALIBRATION.md for the columns. */
static void row(const Harness *h, const char *bench, const char *kind, const char *dtype, double m, double n, double k,
                double batch, double bytes, double flops, const char *variant, Stat s)
{
  MmCalibRow r = {.bench = (char *)bench, .kind = (char *)kind, .dtype = (char *)dtype, .m = m, .n = n, .k = k,
                  .batch = batch, .bytes = bytes, .flops = flops, .variant = (char *)variant, .reps = (int)h->reps,
                  .median_s = s.median, .min_s = s.min, .max_s = s.max, .source = ""};
  mm_calib_table_add(h->out, &r);
}

/* ---- kernels ----------------------------------------------------------------------------- */

static void empty_body(guint wg, guint n_wg, gpointer data)
{
  (void)wg, (void)n_wg, (void)data;
}

/* A copy split over the workers by contiguous slices. */
typedef struct {
  const char *src;
  char *dst;
  gsize bytes;
} Copy;

static void copy_body(guint wg, guint n_wg, gpointer data)
{
  const Copy *c = data;
  gsize a = c->bytes * wg / n_wg, b = c->bytes * (wg + 1) / n_wg;
  if (b > a) memcpy(c->dst + a, c->src + a, b - a);
}

/* fp32 GEMM C[m x n] (+)= A[m x k] B[k x n], row-major with leading dimensions; the workers
 * take GEMM_TM x GEMM_TN tiles of C round-robin. In each tile, a row of C stays in L1 while
 * the k rows of B's panel stream from L2; k is summed in ascending order. */
#define GEMM_TM 16
#define GEMM_TN 128
typedef struct {
  const float *A, *B;
  float *C;
  gsize m, n, k, lda, ldb, ldc;
  gboolean accumulate;
} Gemm;

static void gemm_body(guint wg, guint n_wg, gpointer data)
{
  const Gemm *g = data;
  gsize tm = (g->m + GEMM_TM - 1) / GEMM_TM, tn = (g->n + GEMM_TN - 1) / GEMM_TN;
  for (gsize t = wg; t < tm * tn; t += n_wg) {
    gsize i0 = t / tn * GEMM_TM, j0 = t % tn * GEMM_TN;
    gsize i1 = MIN(i0 + GEMM_TM, g->m), w = MIN(j0 + GEMM_TN, g->n) - j0;
    for (gsize i = i0; i < i1; i++) {
      float *c = g->C + i * g->ldc + j0;
      const float *a = g->A + i * g->lda;
      if (!g->accumulate) memset(c, 0, w * sizeof(float));
      for (gsize kk = 0; kk < g->k; kk++) {
        float av = a[kk];
        const float *b = g->B + kk * g->ldb + j0;
        for (gsize j = 0; j < w; j++) c[j] += av * b[j];
      }
    }
  }
}

/* Flash-style attention forward (no mask): per head and block of queries, an online softmax
 * over blocks of keys (running max and sum, the output rescaled when the max grows), so the
 * seq x seq scores are never stored. q, k, v, o are [heads][seq][d]. */
#define ATT_QB 16
#define ATT_KB 32
typedef struct {
  const float *q, *k, *v;
  float *o;
  gsize seq, d, heads;
} Attention;

static void attention_body(guint wg, guint n_wg, gpointer data)
{
  const Attention *a = data;
  gsize qb = (a->seq + ATT_QB - 1) / ATT_QB, d = a->d;
  float scale = 1.0f / sqrtf((float)d);
  float s[ATT_KB];
  for (gsize t = wg; t < qb * a->heads; t += n_wg) {
    gsize h = t / qb, i0 = t % qb * ATT_QB, i1 = MIN(i0 + ATT_QB, a->seq);
    const float *K = a->k + h * a->seq * d, *V = a->v + h * a->seq * d;
    for (gsize i = i0; i < i1; i++) {
      const float *q = a->q + (h * a->seq + i) * d;
      float *o = a->o + (h * a->seq + i) * d;
      float mx = -INFINITY, l = 0.0f;
      memset(o, 0, d * sizeof(float));
      for (gsize j0 = 0; j0 < a->seq; j0 += ATT_KB) {
        gsize nb = MIN(ATT_KB, a->seq - j0);
        float bmx = -INFINITY;
        for (gsize j = 0; j < nb; j++) {
          const float *kr = K + (j0 + j) * d;
          float acc = 0.0f;
          for (gsize e = 0; e < d; e++) acc += q[e] * kr[e];
          s[j] = acc * scale;
          bmx = fmaxf(bmx, s[j]);
        }
        float nmx = fmaxf(mx, bmx), corr = expf(mx - nmx);
        l *= corr;
        for (gsize e = 0; e < d; e++) o[e] *= corr;
        for (gsize j = 0; j < nb; j++) {
          float p = expf(s[j] - nmx);
          const float *vr = V + (j0 + j) * d;
          l += p;
          for (gsize e = 0; e < d; e++) o[e] += p * vr[e];
        }
        mx = nmx;
      }
      float inv = 1.0f / l;
      for (gsize e = 0; e < d; e++) o[e] *= inv;
    }
  }
}

/* Embedding-bag sum pooling: out[b][t][:] = the sum of `pool` rows of table t, the rows drawn
 * by the GPU harness's hash; the workers take (sample, table) groups round-robin. */
typedef struct {
  const float *tables;
  float *out;
  gsize batch, n_tables, rows, dim;
  guint pool;
} Bag;

static void bag_body(guint wg, guint n_wg, gpointer data)
{
  const Bag *b = data;
  for (gsize g = wg; g < b->batch * b->n_tables; g += n_wg) {
    const float *tab = b->tables + g % b->n_tables * b->rows * b->dim;
    float *o = b->out + g * b->dim;
    memset(o, 0, b->dim * sizeof(float));
    for (guint p = 0; p < b->pool; p++) {
      const float *r = tab + mm__cpu_bag_row(g, p, b->rows) * b->dim;
      for (gsize e = 0; e < b->dim; e++) o[e] += r[e];
    }
  }
}

/* ---- benches ----------------------------------------------------------------------------- */

typedef struct {
  const Harness *h;
  MmCpuKernelFn fn;
  gpointer data;
} Launch;

static void launch_call(gpointer data, guint call)
{
  const Launch *l = data;
  (void)call;
  mm__cpu_pool_run(l->h->pool, l->fn, l->data);
}

static Stat time_kernel(const Harness *h, MmCpuKernelFn fn, gpointer data)
{
  Launch l = {h, fn, data};
  return time_calls(h, launch_call, &l);
}

static gboolean bench_launch(const Harness *h, GError **error)
{
  (void)error;
  row(h, "launch", "", "", 1, 1, 1, 1, 0, 0, "stream", time_kernel(h, empty_body, NULL));
  return TRUE;
}

/* Copies rotating through a pool of buffers (so that small ones miss the cache, as a training
 * step's tensors do): by the workers (kernel) and by one memcpy of the launching thread (dma,
 * the CPU's stand-in for a copy engine). bytes counts read + write. */
typedef struct {
  const char *src;
  char *dst;
  gsize bytes, slots;
  const Harness *h;
} CopyBench;

static void copy_kernel_call(gpointer data, guint call)
{
  const CopyBench *c = data;
  gsize off = call % c->slots * c->bytes;
  Copy cp = {c->src + off, c->dst + off, c->bytes};
  mm__cpu_pool_run(c->h->pool, copy_body, &cp);
}

static void copy_dma_call(gpointer data, guint call)
{
  const CopyBench *c = data;
  gsize off = call % c->slots * c->bytes;
  memcpy(c->dst + off, c->src + off, c->bytes);
}

static gboolean bench_copy(const Harness *h, GError **error)
{
  gsize pool = (gsize)(h->quick ? 32 : 128) << 20, top = (gsize)(h->quick ? 16 : 64) << 20;
  g_autofree char *src = alloc_bytes(pool, error);
  if (!src) return FALSE;
  g_autofree char *dst = alloc_bytes(pool, error);
  if (!dst) return FALSE;
  for (gsize sz = 4096; sz <= top; sz *= h->quick ? 16 : 4) {
    CopyBench c = {src, dst, sz, pool / sz, h};
    row(h, "copy", "elementwise", "bf16", (double)sz / 2, 1, 1, 1, 2.0 * (double)sz, 0, "kernel",
        time_calls(h, copy_kernel_call, &c));
    row(h, "copy", "elementwise", "bf16", (double)sz / 2, 1, 1, 1, 2.0 * (double)sz, 0, "dma",
        time_calls(h, copy_dma_call, &c));
  }
  return TRUE;
}

/* Buffers for GEMMs up to @elems floats per operand. */
typedef struct {
  float *a, *b, *c;
} GemmBufs;

static gboolean gemm_bufs(GemmBufs *g, gsize elems, GError **error)
{
  return (g->a = alloc_floats(elems, 1, error)) && (g->b = alloc_floats(elems, 2, error)) &&
         (g->c = alloc_floats(elems, 3, error));
}

static void gemm_bufs_free(GemmBufs *g)
{
  g_free(g->a), g_free(g->b), g_free(g->c);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(GemmBufs, gemm_bufs_free)

static double gemm_bytes(double m, double n, double k)
{
  return 4.0 * (m * k + k * n + m * n); /* fp32 in and out */
}

static Stat time_gemm(const Harness *h, const GemmBufs *g, gsize m, gsize n, gsize k)
{
  Gemm gm = {g->a, g->b, g->c, m, n, k, k, n, n, FALSE};
  return time_kernel(h, gemm_body, &gm);
}

/* One GEMM-like row (bench and kind @bench): its time, FLOPs and operand bytes. */
static void gemm_point(const Harness *h, const char *bench, const GemmBufs *g, gsize m, gsize n, gsize k)
{
  double dm = (double)m, dn = (double)n, dk = (double)k;
  row(h, bench, bench, "fp32", dm, dn, dk, 1, gemm_bytes(dm, dn, dk), 2.0 * dm * dn * dk, "cpu", time_gemm(h, g, m, n, k));
}

static gboolean bench_gemm(const Harness *h, GError **error)
{
  static const gsize quick_dims[] = {64, 256}, full_dims[] = {64, 128, 256, 512};
  const gsize *dims = h->quick ? quick_dims : full_dims;
  guint nd = h->quick ? G_N_ELEMENTS(quick_dims) : G_N_ELEMENTS(full_dims);
  g_auto(GemmBufs) g = {0};
  if (!gemm_bufs(&g, dims[nd - 1] * dims[nd - 1], error)) return FALSE;
  for (guint a = 0; a < nd; a++)
    for (guint b = 0; b < nd; b++)
      for (guint c = 0; c < nd; c++) gemm_point(h, "gemm", &g, dims[a], dims[b], dims[c]);
  return TRUE;
}

/* Matrix-vector products (m <= 16 rows: the gemv kind), weight-read bound. */
static gboolean bench_gemv(const Harness *h, GError **error)
{
  static const gsize rows[] = {1, 4, 16}, quick_dims[] = {1024}, full_dims[] = {1024, 4096};
  const gsize *dims = h->quick ? quick_dims : full_dims;
  guint nd = h->quick ? G_N_ELEMENTS(quick_dims) : G_N_ELEMENTS(full_dims);
  gsize top = dims[nd - 1];
  g_auto(GemmBufs) g = {0};
  if (!gemm_bufs(&g, top * top, error)) return FALSE;
  for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
    for (guint a = 0; a < nd; a++)
      for (guint b = 0; b < nd; b++) gemm_point(h, "gemv", &g, rows[r], dims[a], dims[b]);
  return TRUE;
}

/* Flash attention forward, no mask: FLOPs 4 seq^2 d per head (QK^T and PV); bytes Q, K, V read
 * and O written once (the scores stay on chip, which is the point of the flash kernel). */
static gboolean bench_attention(const Harness *h, GError **error)
{
  static const gsize quick_seq[] = {64, 256}, full_seq[] = {64, 128, 256, 512}, dims[] = {32, 64};
  const gsize *seqs = h->quick ? quick_seq : full_seq;
  guint ns = h->quick ? G_N_ELEMENTS(quick_seq) : G_N_ELEMENTS(full_seq);
  gsize heads = h->quick ? 2 : 8;
  gsize cap = seqs[ns - 1] * dims[G_N_ELEMENTS(dims) - 1] * heads;
  g_autofree float *q = alloc_floats(cap, 11, error);
  g_autofree float *k = q ? alloc_floats(cap, 12, error) : NULL;
  g_autofree float *v = k ? alloc_floats(cap, 13, error) : NULL;
  g_autofree float *o = v ? alloc_floats(cap, 14, error) : NULL;
  if (!o) return FALSE;
  for (guint di = 0; di < G_N_ELEMENTS(dims); di++)
    for (guint si = 0; si < ns; si++) {
      gsize d = dims[di], seq = seqs[si];
      Attention at = {q, k, v, o, seq, d, heads};
      Stat s = time_kernel(h, attention_body, &at);
      double flops = 4.0 * (double)seq * (double)seq * (double)d * (double)heads;
      double bytes = 4.0 * 4.0 * (double)(seq * d * heads);
      row(h, "attention", "attention", "fp32", (double)seq, (double)seq, (double)d, (double)heads, bytes, flops,
          "flash;fwd;causal=0", s);
    }
  return TRUE;
}

/* Embedding-bag pooling (the lookup kind): bytes are the rows read plus the pooled output. */
static gboolean bench_lookup(const Harness *h, GError **error)
{
  static const gsize quick_dim[] = {64}, full_dim[] = {32, 64, 128};
  static const guint quick_pool[] = {16}, full_pool[] = {1, 16, 64};
  static const gsize quick_batch[] = {512}, full_batch[] = {256, 1024};
  const gsize n_tables = 8, rows = h->quick ? (gsize)1 << 13 : (gsize)1 << 15;
  const gsize *dims = h->quick ? quick_dim : full_dim, *batches = h->quick ? quick_batch : full_batch;
  const guint *pools = h->quick ? quick_pool : full_pool;
  guint n_dim = h->quick ? 1 : G_N_ELEMENTS(full_dim), n_pool = h->quick ? 1 : G_N_ELEMENTS(full_pool);
  guint n_batch = h->quick ? 1 : G_N_ELEMENTS(full_batch);
  for (guint di = 0; di < n_dim; di++) {
    gsize dim = dims[di];
    g_autofree float *tables = alloc_floats(n_tables * rows * dim, 21, error);
    g_autofree float *out = tables ? alloc_floats(batches[n_batch - 1] * n_tables * dim, 22, error) : NULL;
    if (!out) return FALSE;
    for (guint pi = 0; pi < n_pool; pi++)
      for (guint bi = 0; bi < n_batch; bi++) {
        gsize batch = batches[bi];
        guint pool = pools[pi];
        Bag bag = {tables, out, batch, n_tables, rows, dim, pool};
        Stat s = time_kernel(h, bag_body, &bag);
        double bytes = ((double)pool + 1) * (double)batch * (double)n_tables * (double)dim * 4;
        g_autofree char *variant = g_strdup_printf("pool=%u", pool);
        row(h, "lookup", "lookup", "fp32", (double)batch * pool, (double)dim, 1, (double)n_tables, bytes, 0, variant, s);
      }
  }
  return TRUE;
}

/* FiCCO's decomposition loss (DIL): a GEMM split n ways by M and by K (the pieces launched in
 * series) against the unsplit GEMM, and a memcpy split n ways. */
typedef struct {
  const Harness *h;
  const GemmBufs *g;
  gsize m, n, k;
  guint ways;
  gboolean by_k;
} Split;

static void split_call(gpointer data, guint call)
{
  const Split *s = data;
  (void)call;
  gsize pm = s->by_k ? s->m : s->m / s->ways, pk = s->by_k ? s->k / s->ways : s->k;
  for (guint p = 0; p < s->ways; p++) {
    /* by M: rows p*pm.. of A and C; by K: columns p*pk.. of A, rows p*pk.. of B, C accumulated */
    Gemm gm = {.A = s->g->a + (s->by_k ? p * pk : p * pm * s->k),
               .B = s->g->b + (s->by_k ? p * pk * s->n : 0),
               .C = s->g->c + (s->by_k ? 0 : p * pm * s->n),
               .m = pm, .n = s->n, .k = pk, .lda = s->k, .ldb = s->n, .ldc = s->n,
               .accumulate = s->by_k && p > 0};
    mm__cpu_pool_run(s->h->pool, gemm_body, &gm);
  }
}

typedef struct {
  const char *src;
  char *dst;
  gsize bytes;
  guint ways;
} SplitCopy;

static void split_copy_call(gpointer data, guint call)
{
  const SplitCopy *c = data;
  (void)call;
  gsize piece = c->bytes / c->ways;
  for (guint p = 0; p < c->ways; p++) memcpy(c->dst + p * piece, c->src + p * piece, piece);
}

typedef struct {
  gsize m, n, k;
} Shape;

static gboolean bench_dil(const Harness *h, GError **error)
{
  static const Shape quick_shapes[] = {{256, 256, 256}}, full_shapes[] = {{512, 512, 512}, {1024, 256, 256}, {256, 256, 1024}};
  static const guint ways[] = {1, 2, 4};
  const Shape *shapes = h->quick ? quick_shapes : full_shapes;
  guint n_shapes = h->quick ? G_N_ELEMENTS(quick_shapes) : G_N_ELEMENTS(full_shapes);
  for (guint si = 0; si < n_shapes; si++) {
    Shape sh = shapes[si];
    g_auto(GemmBufs) g = {0};
    if (!gemm_bufs(&g, MAX(MAX(sh.m * sh.k, sh.k * sh.n), sh.m * sh.n), error)) return FALSE;
    for (guint wi = 0; wi < G_N_ELEMENTS(ways); wi++)
      for (int by_k = 0; by_k < (ways[wi] == 1 ? 1 : 2); by_k++) {
        Split s = {h, &g, sh.m, sh.n, sh.k, ways[wi], by_k};
        g_autofree char *variant = g_strdup_printf("%s=%u", by_k ? "split_k" : "split_m", ways[wi]);
        row(h, "dil_gemm", "gemm", "fp32", (double)sh.m, (double)sh.n, (double)sh.k, 1,
            gemm_bytes((double)sh.m, (double)sh.n, (double)sh.k), 2.0 * (double)sh.m * (double)sh.n * (double)sh.k,
            variant, time_calls(h, split_call, &s));
      }
  }
  static const guint copy_ways[] = {1, 2, 4, 8, 16, 64};
  gsize sz = (gsize)(h->quick ? 4 : 64) << 20;
  g_autofree char *src = alloc_bytes(sz, error);
  if (!src) return FALSE;
  g_autofree char *dst = alloc_bytes(sz, error);
  if (!dst) return FALSE;
  for (guint wi = 0; wi < G_N_ELEMENTS(copy_ways); wi++) {
    SplitCopy c = {src, dst, sz, copy_ways[wi]};
    g_autofree char *variant = g_strdup_printf("dma;split=%u", copy_ways[wi]);
    row(h, "dil_copy", "elementwise", "bf16", (double)sz / 2, 1, 1, 1, 2.0 * (double)sz, 0, variant,
        time_calls(h, split_copy_call, &c));
  }
  return TRUE;
}

/* FiCCO's contention loss (CIL): GEMMs on the pool and a loop of copies on another thread (the
 * second "stream"), started together; each side's time per call against its time alone. */
typedef struct {
  CopyBench copy;
  guint calls;
  atomic_int *go;
  double per_call_s;
} CopyLoop;

static gpointer copy_loop_main(gpointer p)
{
  CopyLoop *c = p;
  while (!atomic_load_explicit(c->go, memory_order_acquire)) g_thread_yield();
  double t0 = now_s();
  for (guint i = 0; i < c->calls; i++) copy_dma_call(&c->copy, i);
  c->per_call_s = MAX(now_s() - t0, 1e-6) / c->calls;
  return NULL;
}

static gboolean bench_cil(const Harness *h, GError **error)
{
  static const Shape quick_shapes[] = {{256, 256, 256}}, full_shapes[] = {{512, 512, 512}, {1024, 256, 512}};
  const Shape *shapes = h->quick ? quick_shapes : full_shapes;
  guint n_shapes = h->quick ? G_N_ELEMENTS(quick_shapes) : G_N_ELEMENTS(full_shapes);
  gsize sz = (gsize)(h->quick ? 2 : 16) << 20, pool = 4 * sz;
  g_autofree char *src = alloc_bytes(pool, error);
  if (!src) return FALSE;
  g_autofree char *dst = alloc_bytes(pool, error);
  if (!dst) return FALSE;
  CopyBench cb = {src, dst, sz, pool / sz, h};
  for (guint si = 0; si < n_shapes; si++) {
    Shape sh = shapes[si];
    g_auto(GemmBufs) g = {0};
    if (!gemm_bufs(&g, MAX(MAX(sh.m * sh.k, sh.k * sh.n), sh.m * sh.n), error)) return FALSE;
    double flops = 2.0 * (double)sh.m * (double)sh.n * (double)sh.k;
    double gbytes = gemm_bytes((double)sh.m, (double)sh.n, (double)sh.k);
    Stat ga = time_gemm(h, &g, sh.m, sh.n, sh.k);
    row(h, "cil_gemm", "gemm", "fp32", (double)sh.m, (double)sh.n, (double)sh.k, 1, gbytes, flops, "alone", ga);
    Stat ca = time_calls(h, copy_dma_call, &cb);
    guint ng = (guint)MIN(1000.0, MAX(4.0, 0.02 / ga.median));
    guint nc = (guint)MIN(1000.0, MAX(4.0, ng * ga.median / ca.median));
    g_autofree double *tg = g_new(double, h->reps);
    g_autofree double *tc = g_new(double, h->reps);
    Gemm gm = {g.a, g.b, g.c, sh.m, sh.n, sh.k, sh.k, sh.n, sh.n, FALSE};
    for (guint r = 0; r < h->reps; r++) {
      atomic_int go = 0;
      CopyLoop loop = {cb, nc, &go, 0};
      g_autoptr(GError) e = NULL;
      GThread *t = g_thread_try_new("mm-calib-copy", copy_loop_main, &loop, &e);
      if (!t) {
        g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_BACKEND, "cpu: cannot start the copy thread: %s", e->message);
        return FALSE;
      }
      atomic_store_explicit(&go, 1, memory_order_release);
      double t0 = now_s();
      for (guint i = 0; i < ng; i++) mm__cpu_pool_run(h->pool, gemm_body, &gm);
      tg[r] = MAX(now_s() - t0, 1e-6) / ng;
      g_thread_join(t);
      tc[r] = loop.per_call_s;
    }
    /* the copy is a single thread's memcpy loop: the CPU's core-driven copy ("kernel") */
    row(h, "cil_copy", "elementwise", "bf16", (double)sz / 2, 1, 1, 1, 2.0 * (double)sz, 0, "kernel;alone", ca);
    row(h, "cil_gemm", "gemm", "fp32", (double)sh.m, (double)sh.n, (double)sh.k, 1, gbytes, flops, "with=kernel_copy",
        stat_of(tg, h->reps));
    row(h, "cil_copy", "elementwise", "bf16", (double)sz / 2, 1, 1, 1, 2.0 * (double)sz, 0, "kernel;with=gemm",
        stat_of(tc, h->reps));
  }
  return TRUE;
}

/* The fused computation-collective kernels (cpu_fused.c) against their bulk references, among
 * FUSED_MAX_RANKS or fewer simulated ranks (at least 2) sharing the threads as workgroups. The
 * fused and bulk outputs are compared bit for bit before any timing. */
#define FUSED_MAX_RANKS 8 /* the paper's scale-up node: 4 MI210s (intra-node), 8 in a full mesh */
typedef struct {
  MmFused *f;
  MmFusedRun run;
} FusedCall;

static void fused_call(gpointer data, guint call)
{
  FusedCall *c = data;
  (void)call;
  mm__fused_run(c->f, &c->run);
}

static gboolean same_outputs(const MmFused *a, const MmFused *b, guint ranks)
{
  for (guint r = 0; r < ranks; r++) {
    gsize la, lb;
    const float *x = mm__fused_output(a, r, &la), *y = mm__fused_output(b, r, &lb);
    if (la != lb || memcmp(x, y, la * sizeof(float))) return FALSE;
  }
  return TRUE;
}

typedef struct {
  const char *bench, *kind;
  MmFusedSpec quick, full;
  gsize quick_slices[3], full_slices[3]; /* 0-terminated */
} FusedBench;

static const FusedBench fused_benches[] = {
  {"fused_gemv_allreduce", "gemv",
   {.op = MM_FUSED_GEMV_ALLREDUCE, .n = 2048, .k = 2048},
   {.op = MM_FUSED_GEMV_ALLREDUCE, .n = 4096, .k = 4096},
   {256}, {64, 256, 1024}},
  {"fused_embedding_alltoall", "lookup",
   {.op = MM_FUSED_EMBEDDING_ALLTOALL, .batch = 512, .tables = 8, .rows = 1 << 13, .dim = 64, .pool = 16},
   {.op = MM_FUSED_EMBEDDING_ALLTOALL, .batch = 2048, .tables = 16, .rows = 1 << 14, .dim = 64, .pool = 32},
   {32}, {8, 32, 128}},
  {"fused_gemm_alltoall", "gemm",
   {.op = MM_FUSED_GEMM_ALLTOALL, .m = 256, .n = 256, .k = 256},
   {.op = MM_FUSED_GEMM_ALLTOALL, .m = 512, .n = 512, .k = 512},
   {32}, {16, 64}},
};

/* The row's shape and work, by the conventions of the compute kind's own bench: GEMV (m = 1)
 * and GEMM like gemm (the GEMM one per rank: batch = ranks), embedding like lookup. */
static void fused_work(const MmFusedSpec *s, double shape[4], double *bytes, double *flops)
{
  double P = s->ranks;
  switch (s->op) {
  case MM_FUSED_GEMV_ALLREDUCE:
    shape[0] = 1, shape[1] = (double)s->n, shape[2] = (double)s->k, shape[3] = 1;
    *bytes = gemm_bytes(1, (double)s->n, (double)s->k), *flops = 2.0 * (double)s->n * (double)s->k;
    break;
  case MM_FUSED_EMBEDDING_ALLTOALL:
    shape[0] = (double)(s->batch * s->pool), shape[1] = (double)s->dim, shape[2] = 1, shape[3] = (double)s->tables;
    *bytes = ((double)s->pool + 1) * (double)s->batch * (double)s->tables * (double)s->dim * 4, *flops = 0;
    break;
  case MM_FUSED_GEMM_ALLTOALL:
  default:
    shape[0] = (double)s->m, shape[1] = (double)s->n, shape[2] = (double)s->k, shape[3] = P;
    *bytes = P * gemm_bytes((double)s->m, (double)s->n, (double)s->k);
    *flops = P * 2.0 * (double)s->m * (double)s->n * (double)s->k;
    break;
  }
}

static gboolean bench_fused(const Harness *h, GError **error)
{
  guint ranks = CLAMP(h->threads, 2, FUSED_MAX_RANKS), wgs = MAX(1, h->threads / ranks);
  for (guint b = 0; b < G_N_ELEMENTS(fused_benches); b++) {
    const FusedBench *fb = &fused_benches[b];
    MmFusedSpec spec = h->quick ? fb->quick : fb->full;
    spec.ranks = ranks, spec.wgs = wgs;
    const gsize *slices = h->quick ? fb->quick_slices : fb->full_slices;
    g_autoptr(MmFused) fused = mm__fused_new(&spec, error);
    if (!fused) return FALSE;
    g_autoptr(MmFused) bulk = mm__fused_new(&spec, error);
    if (!bulk) return FALSE;
    double shape[4], bytes, flops;
    fused_work(&spec, shape, &bytes, &flops);
    FusedCall bc = {bulk, {.fused = FALSE, .slice = slices[0]}};
    mm__fused_run(bulk, &bc.run);
    for (guint si = 0; si < G_N_ELEMENTS(fb->full_slices) && slices[si]; si++)
      for (int aware = 1; aware >= 0; aware--) {
        FusedCall fc = {fused, {.fused = TRUE, .slice = slices[si], .aware = aware}};
        mm__fused_run(fused, &fc.run);
        if (!same_outputs(fused, bulk, ranks)) {
          g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_BACKEND,
                      "cpu: %s (slices=%" G_GSIZE_FORMAT ", order=%s): the fused result differs from the bulk one",
                      fb->bench, slices[si], aware ? "aware" : "oblivious");
          return FALSE;
        }
        g_autofree char *variant = g_strdup_printf("fused;slices=%" G_GSIZE_FORMAT ";order=%s;ranks=%u", slices[si],
                                                   aware ? "aware" : "oblivious", ranks);
        row(h, fb->bench, fb->kind, "fp32", shape[0], shape[1], shape[2], shape[3], bytes, flops, variant,
            time_calls(h, fused_call, &fc));
      }
    g_autofree char *variant = g_strdup_printf("bulk;ranks=%u", ranks);
    row(h, fb->bench, fb->kind, "fp32", shape[0], shape[1], shape[2], shape[3], bytes, flops, variant,
        time_calls(h, fused_call, &bc));
  }
  return TRUE;
}

/* ---- the run ------------------------------------------------------------------------------ */

/* The benches in the GPU harness's order, then the fused ones (CPU only). */
static const struct {
  const char *name;
  gboolean (*run)(const Harness *h, GError **error);
} benches[] = {
  {"launch", bench_launch}, {"copy", bench_copy},     {"gemm", bench_gemm}, {"gemv", bench_gemv},
  {"attention", bench_attention}, {"lookup", bench_lookup}, {"dil", bench_dil},   {"cil", bench_cil},
  {"fused", bench_fused},
};

/* "CPU: <model name>" from /proc/cpuinfo, or "CPU: unknown". (transfer full) */
static char *cpu_model(void)
{
  g_autofree char *text = NULL;
  if (g_file_get_contents("/proc/cpuinfo", &text, NULL, NULL)) {
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
      const char *colon = strchr(lines[i], ':');
      if (g_str_has_prefix(lines[i], "model name") && colon) {
        g_autofree char *name = g_strstrip(g_strdup(colon + 1));
        if (*name) return g_strdup_printf("CPU: %s", name);
      }
    }
  }
  return g_strdup("CPU: unknown");
}

gboolean mm_calib_cpu_run(const MmCalibCpuOptions *opt, MmCalibTable *out, GError **error)
{
  g_return_val_if_fail(opt != NULL && out != NULL, FALSE);
  if (opt->threads > 1024 || opt->reps > 1000) {
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT,
                "cpu: threads %u, reps %u: threads must be 0 (all cores) to 1024 and reps 0 (%d) to 1000",
                opt->threads, opt->reps, DEFAULT_REPS);
    return FALSE;
  }
  Harness h = {.threads = opt->threads ? opt->threads : g_get_num_processors(),
               .reps = opt->reps ? opt->reps : DEFAULT_REPS, .quick = opt->quick, .out = out};
  g_autoptr(MmCpuPool) pool = mm__cpu_pool_new(h.threads, error);
  if (!pool) return FALSE;
  h.pool = pool;
  g_autofree char *device = cpu_model();
  g_autofree char *cus = g_strdup_printf("%u", h.threads);
  g_autofree char *reps = g_strdup_printf("%u", h.reps);
  mm_calib_table_set_meta(out, "device", device);
  mm_calib_table_set_meta(out, "platform", "cpu");
  mm_calib_table_set_meta(out, "compute_units", cus);
  mm_calib_table_set_meta(out, "blas", "none (the blocked fp32 kernel of src/calib/cpu.c)");
  mm_calib_table_set_meta(out, "harness", "src/calib/cpu.c");
  mm_calib_table_set_meta(out, "grid", opt->quick ? "quick" : "full");
  mm_calib_table_set_meta(out, "reps", reps);
  for (guint i = 0; i < G_N_ELEMENTS(benches); i++)
    if (!benches[i].run(&h, error)) {
      g_prefix_error(error, "calibrate --backend cpu: %s: ", benches[i].name);
      return FALSE;
    }
  return TRUE;
}

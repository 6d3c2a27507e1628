/* cpu_fused: fused computation-collective kernels among simulated ranks on the CPU (GEMV +
 * AllReduce, Embedding + All2All, GEMM + All2All), each with its bulk-synchronous reference.
 *
 * The scheme is the AMD paper's (papers/fused-computation-collective-ops.txt, sections on the
 * fused embedding + All-to-All and the zero-copy GEMV + AllReduce): every rank is a group of
 * persistent workgroups (threads) that run a task loop over logical workgroups (tiles); a tile
 * stores its result directly into the destination rank's buffer (a zero-copy put); the last
 * logical workgroup to finish a slice (found with a WG_Done counter) sets the slice's ready
 * flag on the destination after a release fence; consumers poll their flags with acquire
 * loads. Communication-aware order computes the slices bound for other ranks first.
 *
 * Results are bitwise those of the reference: every output element is computed by the same
 * function in the same summation order (k ascending, pool rows ascending, AllReduce partials
 * folded from rank 0 to P-1), only where it is stored and when it is published differ. */
#include "cpu_fused.h"

#include <stdatomic.h>
#include <string.h>

#include "calib.h"

/* Logical workgroup sizes (units per tile): one tile is what one GPU workgroup computes. */
#define GEMV_TILE 64 /* outputs */
#define EMB_TILE 1   /* samples (each with all of the rank's tables) */
#define GEMM_TILE 8  /* rows */

/* Spins before a waiting workgroup yields its core: with more ranks than cores a pure spin
 * would starve the producer it waits for. */
#define SPINS_BEFORE_YIELD 64

/* One slice of the output space: units [begin, end) owned by rank `dest`. */
typedef struct {
  guint dest;
  gsize begin, end;
  guint tiles; /* logical workgroups that compute it */
} Slice;

/* A logical workgroup of a rank's task loop: tile [begin, end) of slice `slice`. */
typedef struct {
  guint slice;
  gsize begin, end;
} Item;

struct MmFused {
  MmFusedSpec s;
  MmCpuPool *pool; /* ranks x wgs: worker t is workgroup t % wgs of rank t / wgs */
  gsize units;     /* the output space split over the ranks: GEMV n, embedding batch, GEMM m */
  gsize tile;
  float **in_a, **in_b; /* per rank: GEMV x-slice, W-slice; embedding tables; GEMM A, B */
  float **stage;        /* per rank: the bulk reference's local result */
  float **recv;         /* per rank (GEMV): P x n partials received */
  float **out;          /* per rank: the output */
  gsize *out_len;
  /* the slicing of the current run (rebuilt when the slice size or order changes) */
  gsize cur_slice;
  gboolean cur_aware, have_plan;
  Slice *slices;
  guint n_slices;
  Item **items; /* per rank, in schedule order */
  guint *n_items;
  atomic_uint *done;   /* [src][slice]: logical workgroups finished (WG_Done) */
  atomic_uint *ready;  /* [dest][slice][src]: slice from src has landed on dest */
  atomic_uint *gready; /* [dst][slice] (GEMV): the reduced slice has landed on dst */
  atomic_uint puts, waits;
  gboolean last_fused;
};

/* The first unit of rank @r's part of @len units split contiguously over @p ranks. */
static gsize part(gsize len, guint p, guint r)
{
  return len * r / p;
}

/* ---- the compute tiles (shared by the fused kernels and the references) ---------------- */

/* GEMV partial of rank @r: outputs [a, b) of x_r W_r, written to out[0 .. b-a). */
static void gemv_tile(const MmFused *f, guint r, gsize a, gsize b, float *out)
{
  gsize n = f->s.n, kr = part(f->s.k, f->s.ranks, r + 1) - part(f->s.k, f->s.ranks, r);
  const float *x = f->in_a[r], *w = f->in_b[r];
  float acc[GEMV_TILE];
  gsize width = b - a;
  g_assert(width <= GEMV_TILE);
  for (gsize j = 0; j < width; j++) acc[j] = 0.0f;
  for (gsize kk = 0; kk < kr; kk++) {
    float xv = x[kk];
    const float *row = w + kk * n + a;
    for (gsize j = 0; j < width; j++) acc[j] += xv * row[j];
  }
  memcpy(out, acc, width * sizeof(float));
}

/* Embedding bags of rank @r's tables for samples [a, b): sample a + i's vectors at
 * out + i * ld, table after table (dim floats each). */
static void emb_tile(const MmFused *f, guint r, gsize a, gsize b, float *out, gsize ld)
{
  gsize t0 = part(f->s.tables, f->s.ranks, r), t1 = part(f->s.tables, f->s.ranks, r + 1);
  gsize dim = f->s.dim, rows = f->s.rows;
  for (gsize smp = a; smp < b; smp++)
    for (gsize t = t0; t < t1; t++) {
      const float *tab = f->in_a[r] + (t - t0) * rows * dim;
      float *o = out + (smp - a) * ld + (t - t0) * dim;
      guint64 group = (guint64)smp * f->s.tables + t; /* the global (sample, table): P-independent */
      for (gsize d = 0; d < dim; d++) o[d] = 0.0f;
      for (guint p = 0; p < f->s.pool; p++) {
        const float *row = tab + mm__cpu_bag_row(group, p, rows) * dim;
        for (gsize d = 0; d < dim; d++) o[d] += row[d];
      }
    }
}

/* Rows [a, b) of rank @r's C = A B at out + (i - a) * ld. */
static void gemm_tile(const MmFused *f, guint r, gsize a, gsize b, float *out, gsize ld)
{
  gsize n = f->s.n, k = f->s.k;
  const float *A = f->in_a[r], *B = f->in_b[r];
  for (gsize i = a; i < b; i++) {
    float *c = out + (i - a) * ld;
    for (gsize j = 0; j < n; j++) c[j] = 0.0f;
    for (gsize kk = 0; kk < k; kk++) {
      float av = A[i * k + kk];
      const float *brow = B + kk * n;
      for (gsize j = 0; j < n; j++) c[j] += av * brow[j];
    }
  }
}

/* Units of one source's payload per unit, and where src's unit @u lands on @dest (the zero-copy
 * put's address) with the stride between units there. */
static float *remote(const MmFused *f, guint src, guint dest, gsize u, gsize *ld)
{
  gsize d0 = part(f->units, f->s.ranks, dest), d1 = part(f->units, f->s.ranks, dest + 1);
  switch (f->s.op) {
  case MM_FUSED_GEMV_ALLREDUCE:
    *ld = 1;
    return f->recv[dest] + src * f->s.n + u;
  case MM_FUSED_EMBEDDING_ALLTOALL:
    *ld = f->s.tables * f->s.dim;
    return f->out[dest] + (u - d0) * *ld + part(f->s.tables, f->s.ranks, src) * f->s.dim;
  case MM_FUSED_GEMM_ALLTOALL:
  default:
    *ld = f->s.n;
    return f->out[dest] + (src * (d1 - d0) + (u - d0)) * f->s.n;
  }
}

/* Where src's unit @u lands in its own staging buffer (the reference), and the stride. */
static float *staged(const MmFused *f, guint src, gsize u, gsize *ld)
{
  switch (f->s.op) {
  case MM_FUSED_GEMV_ALLREDUCE:
    *ld = 1;
    return f->stage[src] + u;
  case MM_FUSED_EMBEDDING_ALLTOALL:
    *ld = (part(f->s.tables, f->s.ranks, src + 1) - part(f->s.tables, f->s.ranks, src)) * f->s.dim;
    return f->stage[src] + u * *ld;
  case MM_FUSED_GEMM_ALLTOALL:
  default:
    *ld = f->s.n;
    return f->stage[src] + u * f->s.n;
  }
}

static void compute(const MmFused *f, guint r, gsize a, gsize b, float *out, gsize ld)
{
  switch (f->s.op) {
  case MM_FUSED_GEMV_ALLREDUCE: gemv_tile(f, r, a, b, out); break;
  case MM_FUSED_EMBEDDING_ALLTOALL: emb_tile(f, r, a, b, out, ld); break;
  case MM_FUSED_GEMM_ALLTOALL:
  default: gemm_tile(f, r, a, b, out, ld); break;
  }
}

/* ---- the plan: slices, schedules, flags ------------------------------------------------ */

static void plan_clear(MmFused *f)
{
  if (f->items)
    for (guint r = 0; r < f->s.ranks; r++) g_free(f->items[r]);
  g_clear_pointer(&f->items, g_free);
  g_clear_pointer(&f->n_items, g_free);
  g_clear_pointer(&f->slices, g_free);
  g_clear_pointer(&f->done, g_free);
  g_clear_pointer(&f->ready, g_free);
  g_clear_pointer(&f->gready, g_free);
  f->have_plan = FALSE;
}

static guint count_slices(const MmFused *f, gsize slice)
{
  guint n = 0;
  for (guint d = 0; d < f->s.ranks; d++) {
    gsize len = part(f->units, f->s.ranks, d + 1) - part(f->units, f->s.ranks, d);
    n += (guint)((len + slice - 1) / slice);
  }
  return n;
}

static void plan(MmFused *f, gsize slice, gboolean aware)
{
  if (f->have_plan && f->cur_slice == slice && f->cur_aware == aware) return;
  plan_clear(f);
  guint P = f->s.ranks;
  f->n_slices = count_slices(f, slice);
  f->slices = g_new(Slice, MAX(f->n_slices, 1));
  guint j = 0;
  gsize n_tiles = 0;
  for (guint d = 0; d < P; d++)
    for (gsize u = part(f->units, P, d); u < part(f->units, P, d + 1); u += slice) {
      gsize end = MIN(u + slice, part(f->units, P, d + 1));
      f->slices[j++] = (Slice){.dest = d, .begin = u, .end = end, .tiles = (guint)((end - u + f->tile - 1) / f->tile)};
      n_tiles += f->slices[j - 1].tiles;
    }
  g_assert(j == f->n_slices);
  /* each rank's task loop: destinations in order (oblivious), or r+1, ..., r+P-1, r (aware:
   * the remote slices first, the local ones last, so the puts overlap the local work) */
  f->items = g_new0(Item *, P);
  f->n_items = g_new0(guint, P);
  for (guint r = 0; r < P; r++) {
    f->items[r] = g_new(Item, MAX(n_tiles, 1));
    guint n = 0;
    for (guint q = 0; q < P; q++) {
      guint d = aware ? (r + 1 + q) % P : q;
      for (guint s = 0; s < f->n_slices; s++) {
        if (f->slices[s].dest != d) continue;
        for (gsize u = f->slices[s].begin; u < f->slices[s].end; u += f->tile)
          f->items[r][n++] = (Item){.slice = s, .begin = u, .end = MIN(u + f->tile, f->slices[s].end)};
      }
    }
    g_assert(n == n_tiles);
    f->n_items[r] = n;
  }
  gsize nf = (gsize)P * MAX(f->n_slices, 1);
  f->done = g_new0(atomic_uint, nf);
  f->ready = g_new0(atomic_uint, nf * P);
  f->gready = g_new0(atomic_uint, nf);
  f->cur_slice = slice, f->cur_aware = aware, f->have_plan = TRUE;
}

static atomic_uint *ready_flag(const MmFused *f, guint dest, guint slice, guint src)
{
  return &f->ready[((gsize)dest * f->n_slices + slice) * f->s.ranks + src];
}

/* Polls @flag until a producer has set it (acquire: the producer's puts are then visible). */
static void wait_flag(MmFused *f, atomic_uint *flag)
{
  for (guint spins = 0; atomic_load_explicit(flag, memory_order_acquire) == 0; spins++)
    if (spins >= SPINS_BEFORE_YIELD) g_thread_yield();
  atomic_fetch_add_explicit(&f->waits, 1, memory_order_relaxed);
}

/* Publishes to the consumer: the release orders every put before it (and, through the
 * acq_rel WG_Done counter, the other logical workgroups' puts of the slice too). */
static void set_flag(MmFused *f, atomic_uint *flag)
{
  atomic_fetch_add_explicit(flag, 1, memory_order_release);
  atomic_fetch_add_explicit(&f->puts, 1, memory_order_relaxed);
}

/* ---- the fused kernel ------------------------------------------------------------------ */

static void fused_body(guint t, guint n_workers, gpointer data)
{
  MmFused *f = data;
  guint W = f->s.wgs, r = t / W, w = t % W, P = f->s.ranks;
  g_assert(n_workers == P * W);
  /* phase 1: the task loop; each tile stored straight into its destination */
  for (guint i = w; i < f->n_items[r]; i += W) {
    const Item *it = &f->items[r][i];
    const Slice *sl = &f->slices[it->slice];
    gsize ld;
    float *dst = remote(f, r, sl->dest, it->begin, &ld);
    compute(f, r, it->begin, it->end, dst, ld);
    atomic_uint *done = &f->done[(gsize)r * f->n_slices + it->slice];
    if (atomic_fetch_add_explicit(done, 1, memory_order_acq_rel) + 1 == sl->tiles)
      set_flag(f, ready_flag(f, sl->dest, it->slice, r));
  }
  /* phase 2: each workgroup waits on a distinct subset of its rank's slices */
  guint q = 0;
  for (guint s = 0; s < f->n_slices; s++) {
    const Slice *sl = &f->slices[s];
    if (sl->dest != r) continue;
    if (q++ % W != w) continue;
    for (guint src = 0; src < P; src++) wait_flag(f, ready_flag(f, r, s, src));
    if (f->s.op != MM_FUSED_GEMV_ALLREDUCE) continue;
    /* the owner reduces its slice in rank order and puts it to every rank (all-gather) */
    gsize n = f->s.n;
    float *mine = f->out[r];
    for (gsize u = sl->begin; u < sl->end; u++) {
      float v = f->recv[r][u];
      for (guint src = 1; src < P; src++) v += f->recv[r][src * n + u];
      mine[u] = v;
    }
    for (guint d = 0; d < P; d++) {
      if (d != r) memcpy(f->out[d] + sl->begin, mine + sl->begin, (sl->end - sl->begin) * sizeof(float));
      set_flag(f, &f->gready[(gsize)d * f->n_slices + s]);
    }
  }
  /* phase 3 (GEMV): the reduced slices from their owners */
  if (f->s.op == MM_FUSED_GEMV_ALLREDUCE)
    for (guint s = w; s < f->n_slices; s += W) wait_flag(f, &f->gready[(gsize)r * f->n_slices + s]);
}

/* ---- the bulk reference: compute, then a separate collective --------------------------- */

static void bulk_compute(guint t, guint n_workers, gpointer data)
{
  MmFused *f = data;
  guint W = f->s.wgs, r = t / W, w = t % W;
  (void)n_workers;
  for (guint i = w; i < f->n_items[r]; i += W) {
    const Item *it = &f->items[r][i];
    gsize ld;
    float *dst = staged(f, r, it->begin, &ld);
    compute(f, r, it->begin, it->end, dst, ld);
  }
}

/* All-to-All: rank d's workgroups copy their share of d's units from every source. AllReduce
 * (reduce-scatter half): the owner folds the partials of its units in rank order. */
static void bulk_exchange(guint t, guint n_workers, gpointer data)
{
  MmFused *f = data;
  guint W = f->s.wgs, d = t / W, w = t % W, P = f->s.ranks;
  (void)n_workers;
  gsize d0 = part(f->units, P, d), d1 = part(f->units, P, d + 1);
  gsize a = d0 + (d1 - d0) * w / W, b = d0 + (d1 - d0) * (w + 1) / W;
  if (f->s.op == MM_FUSED_GEMV_ALLREDUCE) {
    for (gsize u = a; u < b; u++) {
      float v = f->stage[0][u];
      for (guint src = 1; src < P; src++) v += f->stage[src][u];
      f->out[d][u] = v;
    }
    return;
  }
  for (guint src = 0; src < P; src++)
    for (gsize u = a; u < b; u++) {
      gsize lds, ldr;
      const float *from = staged(f, src, u, &lds);
      float *to = remote(f, src, d, u, &ldr);
      gsize width = f->s.op == MM_FUSED_EMBEDDING_ALLTOALL ? lds : f->s.n;
      memcpy(to, from, width * sizeof(float));
    }
}

/* AllReduce (all-gather half): rank d copies every other owner's reduced units. */
static void bulk_allgather(guint t, guint n_workers, gpointer data)
{
  MmFused *f = data;
  guint W = f->s.wgs, d = t / W, w = t % W, P = f->s.ranks;
  (void)n_workers;
  for (guint o = 0; o < P; o++) {
    if (o == d) continue;
    gsize o0 = part(f->units, P, o), o1 = part(f->units, P, o + 1);
    gsize a = o0 + (o1 - o0) * w / W, b = o0 + (o1 - o0) * (w + 1) / W;
    if (b > a) memcpy(f->out[d] + a, f->out[o] + a, (b - a) * sizeof(float));
  }
}

/* ---- public ---------------------------------------------------------------------------- */

static float *alloc_floats(gsize n, GError **error)
{
  float *p = g_try_malloc(MAX(n, 1) * sizeof(float));
  if (!p)
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_BACKEND, "fused: cannot allocate %" G_GSIZE_FORMAT " floats", n);
  return p;
}

static void fill(float *p, gsize n, guint64 first, guint64 seed)
{
  for (gsize i = 0; i < n; i++) p[i] = mm__cpu_fill_value(first + i, seed);
}

MmFused *mm__fused_new(const MmFusedSpec *spec, GError **error)
{
  g_return_val_if_fail(spec != NULL && spec->op < MM_FUSED_OP_COUNT, NULL);
  const MmFusedSpec *s = spec;
  gboolean ok = s->ranks >= 1 && s->ranks <= 256 && s->wgs >= 1 && s->wgs <= 64;
  if (s->op == MM_FUSED_GEMV_ALLREDUCE) ok = ok && s->n >= 1 && s->k >= 1;
  if (s->op == MM_FUSED_EMBEDDING_ALLTOALL)
    ok = ok && s->batch >= 1 && s->tables >= 1 && s->rows >= 1 && s->dim >= 1 && s->pool >= 1;
  if (s->op == MM_FUSED_GEMM_ALLTOALL) ok = ok && s->m >= 1 && s->n >= 1 && s->k >= 1;
  if (!ok) {
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT,
                "fused: ranks must be 1..256, workgroups 1..64 and every dimension of the shape positive");
    return NULL;
  }
  g_autoptr(MmFused) f = g_new0(MmFused, 1);
  f->s = *s;
  guint P = s->ranks;
  f->in_a = g_new0(float *, P), f->in_b = g_new0(float *, P), f->stage = g_new0(float *, P);
  f->recv = g_new0(float *, P), f->out = g_new0(float *, P), f->out_len = g_new0(gsize, P);
  switch (s->op) {
  case MM_FUSED_GEMV_ALLREDUCE: f->units = s->n, f->tile = GEMV_TILE; break;
  case MM_FUSED_EMBEDDING_ALLTOALL: f->units = s->batch, f->tile = EMB_TILE; break;
  case MM_FUSED_GEMM_ALLTOALL:
  default: f->units = s->m, f->tile = GEMM_TILE; break;
  }
  for (guint r = 0; r < P; r++) {
    gsize len_r = part(f->units, P, r + 1) - part(f->units, P, r);
    gsize na = 0, nb = 0, nstage = 0;
    switch (s->op) {
    case MM_FUSED_GEMV_ALLREDUCE: {
      gsize k0 = part(s->k, P, r), kr = part(s->k, P, r + 1) - k0;
      na = kr, nb = kr * s->n, nstage = s->n, f->out_len[r] = s->n;
      if (!(f->in_a[r] = alloc_floats(na, error)) || !(f->in_b[r] = alloc_floats(nb, error)) ||
          !(f->recv[r] = alloc_floats(P * s->n, error)))
        return NULL;
      fill(f->in_a[r], na, k0, 31);          /* the global x, sliced */
      fill(f->in_b[r], nb, k0 * s->n, 32);   /* the global W, rows k0.. */
      memset(f->recv[r], 0xff, P * s->n * sizeof(float));
      break;
    }
    case MM_FUSED_EMBEDDING_ALLTOALL: {
      gsize t0 = part(s->tables, P, r), tr = part(s->tables, P, r + 1) - t0;
      na = tr * s->rows * s->dim, nstage = s->batch * tr * s->dim, f->out_len[r] = len_r * s->tables * s->dim;
      if (!(f->in_a[r] = alloc_floats(na, error))) return NULL;
      fill(f->in_a[r], na, t0 * s->rows * s->dim, 41); /* the global tables, table t0.. */
      break;
    }
    case MM_FUSED_GEMM_ALLTOALL:
    default:
      na = s->m * s->k, nb = s->k * s->n, nstage = s->m * s->n, f->out_len[r] = P * len_r * s->n;
      if (!(f->in_a[r] = alloc_floats(na, error)) || !(f->in_b[r] = alloc_floats(nb, error))) return NULL;
      fill(f->in_a[r], na, 0, 50 + r), fill(f->in_b[r], nb, 0, 60 + r);
      break;
    }
    if (!(f->stage[r] = alloc_floats(nstage, error)) || !(f->out[r] = alloc_floats(f->out_len[r], error))) return NULL;
    /* NaN everywhere: an output element no call writes shows in a bitwise comparison */
    memset(f->out[r], 0xff, MAX(f->out_len[r], 1) * sizeof(float));
    memset(f->stage[r], 0xff, MAX(nstage, 1) * sizeof(float));
  }
  if (!(f->pool = mm__cpu_pool_new(P * s->wgs, error))) return NULL;
  return g_steal_pointer(&f);
}

void mm__fused_free(MmFused *f)
{
  if (!f) return;
  mm__cpu_pool_free(f->pool);
  plan_clear(f);
  for (guint r = 0; r < f->s.ranks; r++) {
    if (f->in_a) g_free(f->in_a[r]);
    if (f->in_b) g_free(f->in_b[r]);
    if (f->stage) g_free(f->stage[r]);
    if (f->recv) g_free(f->recv[r]);
    if (f->out) g_free(f->out[r]);
  }
  g_free(f->in_a), g_free(f->in_b), g_free(f->stage), g_free(f->recv), g_free(f->out), g_free(f->out_len);
  g_free(f);
}

void mm__fused_run(MmFused *f, const MmFusedRun *run)
{
  g_return_if_fail(f != NULL && run != NULL && run->slice >= 1);
  plan(f, run->slice, run->aware);
  f->last_fused = run->fused;
  if (!run->fused) {
    mm__cpu_pool_run(f->pool, bulk_compute, f);
    mm__cpu_pool_run(f->pool, bulk_exchange, f);
    if (f->s.op == MM_FUSED_GEMV_ALLREDUCE) mm__cpu_pool_run(f->pool, bulk_allgather, f);
    return;
  }
  /* flags start clear; the launch's mutex handoff publishes these stores to the workers */
  gsize nf = (gsize)f->s.ranks * MAX(f->n_slices, 1);
  for (gsize i = 0; i < nf; i++) {
    atomic_store_explicit(&f->done[i], 0, memory_order_relaxed);
    atomic_store_explicit(&f->gready[i], 0, memory_order_relaxed);
  }
  for (gsize i = 0; i < nf * f->s.ranks; i++) atomic_store_explicit(&f->ready[i], 0, memory_order_relaxed);
  atomic_store_explicit(&f->puts, 0, memory_order_relaxed);
  atomic_store_explicit(&f->waits, 0, memory_order_relaxed);
  mm__cpu_pool_run(f->pool, fused_body, f);
}

const float *mm__fused_output(const MmFused *f, guint rank, gsize *len)
{
  g_return_val_if_fail(f != NULL && rank < f->s.ranks && len != NULL, NULL);
  *len = f->out_len[rank];
  return f->out[rank];
}

MmFusedStats mm__fused_stats(const MmFused *f)
{
  MmFusedStats st = {0};
  g_return_val_if_fail(f != NULL, st);
  if (!f->have_plan || !f->last_fused) return st;
  guint P = f->s.ranks;
  st.slices = f->n_slices;
  gsize n_ready = (gsize)P * f->n_slices; /* each slice's dest holds one flag per source */
  for (guint s = 0; s < f->n_slices; s++)
    for (guint src = 0; src < P; src++) {
      st.flags++;
      st.flags_once += atomic_load_explicit(ready_flag(f, f->slices[s].dest, s, src), memory_order_relaxed) == 1;
    }
  if (f->s.op == MM_FUSED_GEMV_ALLREDUCE)
    for (gsize i = 0; i < n_ready; i++) {
      st.flags++;
      st.flags_once += atomic_load_explicit(&f->gready[i], memory_order_relaxed) == 1;
    }
  /* flags of (dest, slice) pairs that no slice goes to must never be set */
  for (guint d = 0; d < P; d++)
    for (guint s = 0; s < f->n_slices; s++)
      if (f->slices[s].dest != d)
        for (guint src = 0; src < P; src++)
          st.stray += atomic_load_explicit(ready_flag(f, d, s, src), memory_order_relaxed) != 0;
  st.puts = atomic_load_explicit(&f->puts, memory_order_relaxed);
  st.waits = atomic_load_explicit(&f->waits, memory_order_relaxed);
  return st;
}

guint mm__fused_n_slices(const MmFused *f, gsize slice)
{
  g_return_val_if_fail(f != NULL && slice >= 1, 0);
  return count_slices(f, slice);
}

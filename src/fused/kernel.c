/* kernel: fused compute-collective kernels (embedding + All2All, GEMV + AllReduce, GEMM + All2All)
 * simulated at slice granularity in the event engine, against the bulk-synchronous baseline.
 * Model and sources: docs/fused-kernels.md; the paper: "Optimizing Distributed ML Communication
 * with Fused Computation-Collective Operations" (Punniyamurthy et al., AMD), Sec. III-IV. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost.h"
#include "fused.h"

const char *const mm_fused_op_names[] = {"emb-a2a", "gemv-ar", "gemm-a2a", NULL};
const char *const mm_fused_schedule_names[] = {"aware", "oblivious", "interleaved", NULL};

/* One row per op: its defaults and how its kernel and collective are shaped (STYLE rule 15). */
typedef struct {
  MmDtype dtype;
  int64_t slice_wgs;  /* Sec. IV-A: 32 logical WGs per embedding slice; GEMV/GEMM: a WG's tile */
  int64_t wg_elems;   /* output elements per logical WG (emb-a2a: 0 = one vector of dim) */
  double thread_bytes; /* bytes in flight per thread */
  MmKernelKind kind;
  MmCollKind coll;
  gboolean two_phase; /* reduce-scatter, reduce, all-gather (GEMV + AllReduce) */
  gboolean flag_per_slice; /* emb-a2a: a sliceRdy flag per slice; else one per peer per physical WG */
} OpRow;

static const OpRow op_rows[MM_FUSED_OP_COUNT] = {
  /* emb-a2a: PyTorch's EmbeddingBag kernel, one thread per feature: each thread gathers one fp32
   * of a row per load, two loads in flight (8 B); fp32 tables as in the public DLRM code */
  [MM_FUSED_EMB_A2A] = {MM_DTYPE_FP32, 32, 0, 8, MM_KERNEL_LOOKUP, MM_COLL_ALL_TO_ALL, FALSE, TRUE},
  /* gemv-ar: 8 output rows per WG, one 16-byte load in flight per thread */
  [MM_FUSED_GEMV_AR] = {MM_DTYPE_FP16, 1, 8, 16, MM_KERNEL_GEMV, MM_COLL_ALL_REDUCE, TRUE, FALSE},
  /* gemm-a2a: Triton's GEMM tile 128 x 128 */
  [MM_FUSED_GEMM_A2A] = {MM_DTYPE_FP16, 1, 128 * 128, 16, MM_KERNEL_GEMM, MM_COLL_ALL_TO_ALL, FALSE, FALSE},
};

void mm_fused_spec_defaults(const MmHardware *hw, MmFusedSpec *s)
{
  g_return_if_fail(hw != NULL && s != NULL && s->op < MM_FUSED_OP_COUNT);
  const OpRow *row = &op_rows[s->op];
  if (!s->dtype_given) s->dtype = row->dtype;
  s->dtype_given = TRUE;
  if (!s->ranks) s->ranks = hw->gpus_per_node;
  if (!s->stride) s->stride = 1;
  /* Fig. 8/12 label {global batch | tables per GPU}; dimension 256 (Sec. IV-A); pooling 70 (Table II) */
  if (!s->batch) s->batch = 2048;
  if (!s->tables) s->tables = 64;
  if (!s->dim) s->dim = 256;
  if (!s->pooling) s->pooling = 70;
  /* gemv-ar: M 16K, K 4096 (the paper gives M only: a 16384-wide FFN split row-wise over 4 GPUs,
   * Fig. 3); gemm-a2a: an MoE expert's FFN output, 8192 tokens x 4096 x 4096 (Tutel-like sizes,
   * Sec. IV-A) */
  if (!s->m) s->m = s->op == MM_FUSED_GEMV_AR ? 16384 : 8192;
  if (!s->n) s->n = s->op == MM_FUSED_GEMV_AR ? 1 : 4096;
  if (!s->k) s->k = 4096;
  if (!s->slice_wgs) s->slice_wgs = row->slice_wgs;
  if (!s->wg_elems) s->wg_elems = row->wg_elems ? row->wg_elems : s->dim;
  if (!s->wg_threads) s->wg_threads = 256;
  if (!(s->thread_bytes > 0)) s->thread_bytes = row->thread_bytes;
  /* PyTorch's EmbeddingBag forward launches a fixed grid of 1024 blocks (ATen EmbeddingBag.cu) */
  if (!s->bulk_grid) s->bulk_grid = 1024;
  if (!(s->occupancy > 0)) s->occupancy = 1.0 - hw->device.fused.occupancy_loss.value;
}

void mm_fused_result_free(MmFusedResult *r)
{
  if (!r) return;
  g_free(r->rank_s);
  if (r->slices) g_array_unref(r->slices);
  g_free(r);
}

static gboolean invalid(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean invalid(GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error_literal(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID, msg);
  return FALSE;
}

/* The largest logical WG count per rank, and the most engine ops one simulation builds (slices
 * are what the engine sees, a round of a lane group one op; this bounds memory and time). */
#define MAX_LOGICAL_WGS ((int64_t)1 << 40)
#define MAX_OPS ((int64_t)1 << 22)

gboolean mm_fused_spec_check(const MmHardware *hw, const MmFusedSpec *s, GError **error)
{
  g_return_val_if_fail(hw != NULL && s != NULL, FALSE);
  if (s->op >= MM_FUSED_OP_COUNT) return invalid(error, "op: unknown fused op %d", (int)s->op);
  if (s->schedule >= MM_FUSED_SCHED_COUNT) return invalid(error, "schedule: unknown schedule %d", (int)s->schedule);
  const int64_t n = mm_hardware_devices(hw);
  if (s->ranks < 2 || s->ranks > 64)
    return invalid(error, "ranks: %" G_GINT64_FORMAT " is not in [2, 64]", s->ranks);
  if (s->stride < 1 || s->stride >= n || (s->ranks - 1) * s->stride >= n) /* stride < n: the product cannot overflow */
    return invalid(error, "ranks %" G_GINT64_FORMAT ", stride %" G_GINT64_FORMAT ": the group must fit the %"
                   G_GINT64_FORMAT " devices of %s", s->ranks, s->stride, n, hw->path ? hw->path : "the system");
  if (!mm_comm_group_even(hw, s->ranks, s->stride))
    return invalid(error, "ranks %" G_GINT64_FORMAT ", stride %" G_GINT64_FORMAT ": the group straddles nodes "
                   "unevenly", s->ranks, s->stride);
  const int64_t g = hw->gpus_per_node;
  if (s->ranks * s->stride > g && !hw->inter.present)
    return invalid(error, "ranks %" G_GINT64_FORMAT ": the group spans nodes but %s has no inter-node network",
                   s->ranks, hw->path ? hw->path : "the system");
  struct {
    const char *name;
    int64_t v, max;
  } ints[] = {{"batch", s->batch, (int64_t)1 << 30}, {"tables", s->tables, (int64_t)1 << 20},
              {"dim", s->dim, (int64_t)1 << 20},     {"pooling", s->pooling, (int64_t)1 << 20},
              {"m", s->m, (int64_t)1 << 30},         {"n", s->n, (int64_t)1 << 30},
              {"k", s->k, (int64_t)1 << 30},         {"slice-wgs", s->slice_wgs, (int64_t)1 << 20},
              {"wg-elems", s->wg_elems, (int64_t)1 << 30}, {"wg-threads", s->wg_threads, 4096}};
  for (guint i = 0; i < G_N_ELEMENTS(ints); i++)
    if (ints[i].v < 1 || ints[i].v > ints[i].max)
      return invalid(error, "%s: %" G_GINT64_FORMAT " is not in [1, %" G_GINT64_FORMAT "]", ints[i].name, ints[i].v,
                     ints[i].max);
  if (s->op == MM_FUSED_EMB_A2A && s->batch % s->ranks != 0)
    return invalid(error, "batch: %" G_GINT64_FORMAT " does not split evenly over %" G_GINT64_FORMAT " ranks",
                   s->batch, s->ranks);
  if (s->op != MM_FUSED_EMB_A2A && s->m % s->ranks != 0)
    return invalid(error, "m: %" G_GINT64_FORMAT " does not split evenly over %" G_GINT64_FORMAT " ranks", s->m,
                   s->ranks);
  const double max_occ = 1.0 - hw->device.fused.occupancy_loss.value;
  if (!(s->occupancy > 0 && s->occupancy <= max_occ + 1e-12))
    return invalid(error, "occupancy: %g is not in (0, %g] (the plain kernel's full occupancy less the fused "
                   "kernel's occupancy_loss)", s->occupancy, max_occ);
  if (!(s->thread_bytes > 0 && s->thread_bytes <= 4096))
    return invalid(error, "thread-bytes: %g is not in (0, 4096]", s->thread_bytes);
  if (s->bulk_grid < -1 || s->bulk_grid == 0 || s->bulk_grid > ((int64_t)1 << 30))
    return invalid(error, "bulk-grid: %" G_GINT64_FORMAT " is not -1 (one launch) or in [1, 2^30]", s->bulk_grid);
  if (mm_dtype_bytes(s->dtype) <= 0) return invalid(error, "dtype: unknown dtype %d", (int)s->dtype);
  return TRUE;
}

/* Little's law: W waves per CU of wave_lanes threads, each thread with @thread_bytes in flight
 * for a load latency, pull CUs x W x lanes x thread_bytes / latency; HBM serves at most
 * @hbm_Bps. Demand beyond that queues, and the queued fraction (1 - 1/x, x = demand / hbm) of
 * accesses conflicts in the row buffers,
 * each losing `contention` of its efficiency: traffic inflates by 1 / (1 - contention (1 - 1/x)).
 * Returns the rate the waves sustain (<= @hbm_Bps). docs/fused-kernels.md, "occupancy". */
double mm_fused_mem_rate(const MmDevice *dev, double occupancy, double thread_bytes, double hbm_Bps, double *inflate)
{
  const MmFusedCoeffs *f = &dev->fused;
  const double waves = occupancy * f->waves_per_cu.value;
  const double demand =
    f->compute_units.value * waves * f->wave_lanes.value * thread_bytes / f->mem_latency_s.value;
  const double x = demand / hbm_Bps;
  const double queued = x > 1 ? 1.0 - 1.0 / x : 0.0;
  if (inflate) *inflate = 1.0 / (1.0 - f->contention.value * queued);
  return MIN(demand, hbm_Bps);
}

static double lookup_time_per_byte(const MmDevice *dev, double occupancy, double hbm_Bps)
{
  double inflate = 1.0;
  const double rate = mm_fused_mem_rate(dev, occupancy, op_rows[MM_FUSED_EMB_A2A].thread_bytes, hbm_Bps, &inflate);
  return MAX(1.0 / rate, inflate / hbm_Bps);
}

double mm_fused_lookup_occupancy_factor(const MmDevice *dev, double occupancy)
{
  g_return_val_if_fail(dev != NULL && occupancy > 0 && occupancy <= 1, 1.0);
  const double hbm = dev->hbm_bw_Bps * dev->util_hbm.value;
  return lookup_time_per_byte(dev, occupancy, hbm) / lookup_time_per_byte(dev, 1.0, hbm);
}

/* The shape of one op on one rank. */
typedef struct {
  const OpRow *row;
  int64_t R;
  double out_bytes;      /* the kernel's output (what the collective moves, per rank) */
  double flops, bytes;   /* the plain kernel, per rank (bytes includes the output's store) */
  double compute_s, hbm_Bps; /* roofline compute time, achievable HBM rate (src/cost) */
  int64_t wgs;           /* logical WGs per rank */
  int64_t per_dest;      /* slices per destination block */
  double coll_bytes;     /* the baseline collective's size */
} Shape;

static void shape_of(const MmHardware *hw, const MmFusedSpec *s, Shape *sh)
{
  const double e = mm_dtype_bytes(s->dtype);
  sh->row = &op_rows[s->op];
  sh->R = s->ranks;
  MmKernel k = {.kind = sh->row->kind, .dtype = s->dtype, .m = 1, .n = 1, .k = 1, .batch = 1};
  switch (s->op) {
  case MM_FUSED_EMB_A2A:
    /* one logical WG pools one bag: pooling rows of dim elements and their int64 indices */
    sh->wgs = s->tables * s->batch;
    sh->out_bytes = (double)s->tables * (double)s->batch * (double)s->dim * e;
    sh->flops = (double)s->tables * (double)s->batch * (double)s->pooling * (double)s->dim;
    sh->bytes = (double)s->tables * (double)s->batch * (double)s->pooling * ((double)s->dim * e + 8) + sh->out_bytes;
    k = (MmKernel){.kind = MM_KERNEL_LOOKUP, .dtype = s->dtype, .m = (double)s->batch * (double)s->pooling,
                   .n = (double)s->dim, .k = 1, .batch = (double)s->tables};
    sh->coll_bytes = sh->out_bytes;
    break;
  case MM_FUSED_GEMV_AR:
    sh->wgs = (s->m + s->wg_elems - 1) / s->wg_elems;
    sh->out_bytes = (double)s->m * e;
    sh->flops = 2.0 * (double)s->m * (double)s->k;
    sh->bytes = ((double)s->m * (double)s->k + (double)s->k) * e + sh->out_bytes;
    k = (MmKernel){.kind = MM_KERNEL_GEMV, .dtype = s->dtype, .m = 1, .n = (double)s->m, .k = (double)s->k, .batch = 1};
    sh->coll_bytes = sh->out_bytes;
    break;
  default:
    sh->wgs = ((s->m * s->n) + s->wg_elems - 1) / s->wg_elems;
    sh->out_bytes = (double)s->m * (double)s->n * e;
    sh->flops = 2.0 * (double)s->m * (double)s->n * (double)s->k;
    sh->bytes = ((double)s->m * (double)s->k + (double)s->k * (double)s->n) * e + sh->out_bytes;
    k = (MmKernel){.kind = MM_KERNEL_GEMM, .dtype = s->dtype, .m = (double)s->m,
                   .n = (double)s->n, .k = (double)s->k, .batch = 1};
    sh->coll_bytes = sh->out_bytes;
    break;
  }
  MmCostWhy why;
  mm_cost_kernel_s(&hw->device, &k, sh->flops, sh->bytes, &why);
  sh->compute_s = why.compute_s;
  sh->hbm_Bps = why.memory_s > 0 ? sh->bytes / why.memory_s : hw->device.hbm_bw_Bps * hw->device.util_hbm.value;
  const int64_t wgs_per_dest = (sh->wgs + sh->R - 1) / sh->R;
  sh->per_dest = MAX(1, (wgs_per_dest + s->slice_wgs - 1) / s->slice_wgs);
}

/* The kernel alone at @occupancy: its SM-side and HBM-side seconds. The mechanism gives the
 * ratio to the plain kernel at full occupancy, whose time is src/cost's (the roofline, or a
 * calibrated curve or fit): the occupancy trade-off scales a measured time, never replaces it. */
typedef struct {
  double sm_s;     /* latency- or compute-bound time on the CUs */
  double hbm_s;    /* HBM time with contention */
  double inflate;  /* HBM traffic x this (contention, normalized to full occupancy) */
  double rate_Bps; /* the rate its waves sustain (normalized) */
} KernelAt;

static void raw_at(const MmHardware *hw, const MmFusedSpec *s, const Shape *sh, double occupancy, double *sm_s,
                   double *hbm_s, double *inflate, double *rate)
{
  const MmFusedCoeffs *f = &hw->device.fused;
  const double cus = f->compute_units.value;
  /* fewer logical WGs than the grid holds leave waves idle: the occupancy that counts */
  const double full = cus * f->waves_per_cu.value * f->wave_lanes.value / (double)s->wg_threads;
  const double physical = MAX(1.0, floor(full * occupancy));
  const double used = MIN(physical, (double)sh->wgs);
  const double occ = occupancy * used / physical;
  *rate = mm_fused_mem_rate(&hw->device, occ, s->thread_bytes, sh->hbm_Bps, inflate);
  /* compute needs a WG per CU to reach its roofline */
  const double fill = MIN(1.0, used / cus);
  *sm_s = MAX(sh->compute_s / fill, sh->bytes / *rate);
  *hbm_s = sh->bytes * *inflate / sh->hbm_Bps;
}

static KernelAt kernel_at(const MmHardware *hw, const MmFusedSpec *s, const Shape *sh, double occupancy)
{
  double sm1, hbm1, inf1, rate1, sm, hbm, inf, rate;
  raw_at(hw, s, sh, 1.0, &sm1, &hbm1, &inf1, &rate1);
  raw_at(hw, s, sh, occupancy, &sm, &hbm, &inf, &rate);
  const double roofline = MAX(sh->compute_s, sh->bytes / sh->hbm_Bps);
  const double scale = roofline / MAX(sm1, hbm1);
  return (KernelAt){sm * scale, hbm * scale, inf * scale, rate / scale};
}

static double kernel_alone_s(const KernelAt *k) { return MAX(k->sm_s, k->hbm_s); }

/* The baseline's kernel. emb-a2a: the public DLRM code pools each table with its own
 * nn.EmbeddingBag call, one launch per table, of PyTorch's EmbeddingBag_updateOutputKernel_sum_mean:
 * a fixed grid of bulk_grid (1024) blocks of wg_threads (256) threads, each wave one chunk of
 * wave_lanes features of one bag per loop iteration (ROCm: blocks of 64 x 4). A table's batch gives
 * work to min(grid, chunks / chunks per block) blocks; the device holds S of them at once, so the
 * launch runs in waves of S blocks, the last a tail, each at the occupancy its blocks fill, priced
 * by the occupancy mechanism (Little's law, contention) exactly as the fused kernel's. Scaled like
 * kernel_at: every table in one launch at full occupancy is src/cost's time. A table's kernel
 * lasts at least a launch (the host issues them one by one). Other ops (and bulk_grid < 0): the
 * plain kernel at full occupancy. docs/fused-kernels.md, "Baseline". */
static double bulk_kernel_s(const MmHardware *hw, const MmFusedSpec *s, const Shape *sh, const KernelAt *plain,
                            double launch_s)
{
  if (s->op != MM_FUSED_EMB_A2A || s->bulk_grid < 0) return kernel_alone_s(plain);
  const MmFusedCoeffs *f = &hw->device.fused;
  const double lanes = f->wave_lanes.value, cus = f->compute_units.value;
  const double chunks = (double)s->batch * ceil((double)s->dim / lanes);         /* per table */
  const double per_block = MAX(1.0, floor((double)s->wg_threads / lanes));       /* chunks per block-iteration */
  const double active = MIN((double)s->bulk_grid, ceil(chunks / per_block));     /* blocks with work */
  const double slots = MAX(1.0, floor(cus * f->waves_per_cu.value * lanes / (double)s->wg_threads));
  double sm1, hbm1, inf1, rate1;
  raw_at(hw, s, sh, 1.0, &sm1, &hbm1, &inf1, &rate1);
  double t = 0; /* every table, at the per-table launch's occupancy (the work is linear in tables) */
  for (double left = active; left > 0; left -= slots) {
    const double n = MIN(left, slots), share = n / active;
    double inflate;
    const double rate = mm_fused_mem_rate(&hw->device, n / slots, s->thread_bytes, sh->hbm_Bps, &inflate);
    const double fill = MIN(1.0, n / cus);
    t += share * MAX(MAX(sh->compute_s / fill, sh->bytes / rate), sh->bytes * inflate / sh->hbm_Bps);
  }
  const double roofline = MAX(sh->compute_s, sh->bytes / sh->hbm_Bps);
  const double per_table = t * roofline / MAX(sm1, hbm1) / (double)s->tables;
  return (double)s->tables * MAX(per_table, launch_s);
}

/* The link resource from rank @src to rank @dst, and whether it is zero-copy (same node). */
static uint32_t link_to(const MmHardware *hw, const MmFusedRes *res, const MmFusedSpec *s, int64_t src, int64_t dst,
                        gboolean *zero_copy)
{
  const int64_t g = hw->gpus_per_node, a = src * s->stride, b = dst * s->stride;
  *zero_copy = a / g == b / g;
  if (!*zero_copy) return res->links.nic;
  const int64_t off = ((b % g) - (a % g) + g) % g;
  if (hw->intra.topology == MM_TOPO_FULL_MESH && res->links.n_intra == (uint32_t)(g - 1))
    return res->links.intra_first + (uint32_t)(off - 1);
  if (res->links.n_intra == 2) return res->links.intra_first + (off <= g / 2 ? 0u : 1u);
  return res->links.intra_first;
}

/* Where one device's ops are, for reading its times back: one entry per engine op that
 * computes (a group of slices) or per put. */
typedef struct {
  GArray *items; /* Item */
  uint32_t end_op;
  MmFusedProg prog;
} Dev;

typedef struct {
  uint32_t compute, put; /* op indices (put: NONE when local) */
  uint32_t group, dest, phase; /* the lane group, destination, phase */
  uint64_t first, count;        /* slices [first, first + count) (can pass 2^32) */
} Item;

/* Lane groups: lanes with equal work progress at equal shares in the fluid model, so lanes that
 * start together finish together; up to MAX_GROUPS groups of them are simulated, each op of a
 * group standing for its lanes' slices of one round (exact in the fluid model, and it bounds the
 * flows sharing a device). */
#define MAX_GROUPS 32

/* Builds rank @d's program. Streams: groups [0, G), their puts [G, 2G), group signals [2G, 3G),
 * group waits [3G, 4G), device signals 4G, device waits 4G + 1, the end 4G + 2. Cross-device
 * flags are point-to-point engine collectives: the sender's op (after its puts) and the
 * receiver's wait end together, when both are done; ids are unique per (phase, group, src, dst). */
typedef struct {
  const MmHardware *hw;
  const MmFusedSpec *s;
  const Shape *sh;
  const MmFusedRes *res;
  double physical;   /* persistent WGs */
  double rate_Bps;   /* the fused kernel's memory rate (reduce ops) */
  double inflate;
  int64_t L;         /* lanes: slices in flight at once */
  int64_t G, gsz;    /* lane groups, lanes per group */
  gboolean symmetric; /* one class stands for every rank: a flag from rank d - j arrives when this
                       * rank's own puts to d + j are done (the rotated schedule, same links) */
  double sm_slice, hbm_in_slice, hbm_out_slice, slice_bytes; /* per slice: SM-ps, HBM work (inputs, output) */
} Build;

#define NONE UINT32_MAX

static uint32_t coll_id(const Build *b, int64_t phase, int64_t group, int64_t src, int64_t dst)
{
  return (uint32_t)((((phase * (b->G + 1) + group) * b->sh->R + src) * b->sh->R) + dst);
}

static uint32_t p2p(MmFusedProg *p, uint32_t stream, const uint32_t *deps, uint32_t n_deps, uint32_t coll, int32_t peer)
{
  const uint32_t i = mm_fused_prog_op(p, stream, 0, deps, n_deps, NULL, NULL, 0);
  MmEngineOp *op = &g_array_index(p->ops, MmEngineOp, i);
  op->coll = coll;
  op->peer = peer;
  return i;
}

static void add_item(Dev *dv, uint32_t c, uint32_t put, int64_t g, int64_t q, uint32_t phase, int64_t first,
                     int64_t count)
{
  Item it = {c, put, (uint32_t)g, (uint32_t)q, phase, (uint64_t)first, (uint64_t)count};
  g_array_append_val(dv->items, it);
}

/* What build_device shares with its per-round step. */
typedef struct {
  const Build *b;
  int64_t d;
  Dev *dv;
  MmFusedProg *p;
  uint32_t put0;   /* first put stream */
  gboolean per_dest_streams; /* a put stream per (group, destination), not per group */
  double per_wg_ps;
  const uint32_t *link;
  const gboolean *zc;
  uint32_t *last_put, *last_compute;
  int64_t *own;
} Ctx;

static uint32_t put_stream(const Ctx *x, int64_t l, int64_t q)
{
  return x->put0 + (uint32_t)(x->per_dest_streams ? l * x->b->sh->R + q : l);
}

/* Round @r of destination @q's block on lane group @l: one compute op for its slices, and their
 * put when @q is remote. */
static void round_op(Ctx *x, int64_t l, int64_t q, int64_t r, int64_t last_r)
{
  const Build *b = x->b;
  const int64_t R = b->sh->R, L = b->L, per = b->sh->per_dest, d = x->d;
  const MmFusedCoeffs *f = &b->hw->device.fused;
  const MmFusedRes *res = b->res;
  const int64_t lo = r * L + l * b->gsz, hi = MIN(MIN(lo + b->gsz, (r + 1) * L), per);
  if (lo >= hi) return;
  const gboolean remote = q != d, nic = remote && !x->zc[q];
  const double cnt = (double)(hi - lo);
  if (!remote) x->own[l] += hi - lo;
  /* WG_Done book-keeping (and the local flag) per slice; a NIC put's API call per remote slice:
   * work of one WG of the grid (Sec. III-C) */
  const double sm =
    cnt * (b->sm_slice + f->flag_s.value * x->per_wg_ps + (nic ? f->put_latency_s.value * x->per_wg_ps : 0));
  /* zero-copy: the output goes straight to the peer, no local store (Sec. III-B) */
  const double hbm = cnt * (b->hbm_in_slice + (remote && !nic ? 0 : b->hbm_out_slice));
  const uint32_t cres[2] = {res->sm, res->hbm};
  const double cw[2] = {sm, hbm};
  const uint32_t c = mm_fused_prog_op(x->p, (uint32_t)l, 0, NULL, 0, cres, cw, 2);
  uint32_t put = NONE;
  if (remote) {
    /* the put: the link; HBM for the NIC's read of the local copy, and the peer's store of what
     * it receives (by symmetry, as much as this rank receives). The slices' puts of one round go
     * in parallel: one API latency, and one fence + flag after the data */
    const gboolean flag = b->sh->row->flag_per_slice || r == last_r;
    const double tail = (nic ? f->put_latency_s.value : 0) + (flag ? f->flag_s.value : 0);
    const uint32_t pres[2] = {x->link[q], res->hbm};
    const double pw[2] = {cnt * b->slice_bytes, cnt * b->slice_bytes * (nic ? 2 : 1)};
    put = mm_fused_prog_op(x->p, put_stream(x, l, q), tail, &c, 1, pres, pw, 2);
    x->last_put[l * R + q] = put;
  }
  x->last_compute[l] = c;
  add_item(x->dv, c, put, l, q, 0, lo + q * per, hi - lo);
}

static void build_device(const Build *b, int64_t d, Dev *dv)
{
  const MmFusedSpec *s = b->s;
  const int64_t R = b->sh->R, L = b->L, G = b->G;
  const uint32_t Gu = (uint32_t)G;
  const gboolean interleaved = s->schedule == MM_FUSED_INTERLEAVED;
  /* streams: groups [0, G), puts, group signals, group waits, device signals, device waits, end */
  const uint32_t n_put = interleaved ? Gu * (uint32_t)R : Gu;
  const uint32_t SIG0 = Gu + n_put, WAIT0 = SIG0 + Gu, S_DEV = WAIT0 + Gu, W_DEV = S_DEV + 1, END = S_DEV + 2;
  MmFusedProg *p = &dv->prog;
  mm_fused_prog_init(p, END + 1);
  const MmFusedRes *res = b->res;
  const MmFusedCoeffs *f = &b->hw->device.fused;
  g_autofree int64_t *order = g_new(int64_t, R);
  for (int64_t i = 0; i < R; i++) order[i] = s->schedule == MM_FUSED_OBLIVIOUS ? i : (d + 1 + i) % R;
  g_autofree uint32_t *last_put = g_new(uint32_t, (gsize)(G * R)); /* per group x dest: the last put to it */
  g_autofree uint32_t *last_compute = g_new(uint32_t, (gsize)G);
  g_autofree int64_t *own = g_new0(int64_t, (gsize)G); /* gemv-ar: local tiles per group */
  for (int64_t i = 0; i < G * R; i++) last_put[i] = NONE;
  for (int64_t l = 0; l < G; l++) last_compute[l] = NONE;
  g_autofree uint32_t *link = g_new(uint32_t, R);
  g_autofree gboolean *zc = g_new0(gboolean, R);
  for (int64_t q = 0; q < R; q++) link[q] = q == d ? NONE : link_to(b->hw, res, s, d, q, &zc[q]);
  const int64_t per = b->sh->per_dest, rounds = (per + L - 1) / L;
  Ctx x = {b, d, dv, p, Gu, interleaved, MM_PS_PER_S / b->physical, link, zc, last_put, last_compute, own};

  /* phase 0: the slices, group by group, in schedule order; round r of a destination block is
   * its slices [r L, (r + 1) L), one per lane. aware / oblivious: block after block; interleaved:
   * each round across the remote blocks, then the local block */
  for (int64_t l = 0; l < G; l++) {
    int64_t last_r = -1;
    for (int64_t r = 0; r < rounds; r++)
      if (r * L + l * b->gsz < MIN((r + 1) * L, per)) last_r = r;
    if (interleaved) {
      for (int64_t r = 0; r <= last_r; r++)
        for (int64_t oi = 0; oi < R - 1; oi++) round_op(&x, l, order[oi], r, last_r);
      for (int64_t r = 0; r <= last_r; r++) round_op(&x, l, d, r, last_r);
    } else {
      for (int64_t oi = 0; oi < R; oi++)
        for (int64_t r = 0; r <= last_r; r++) round_op(&x, l, order[oi], r, last_r);
    }
  }

  if (b->sh->row->two_phase) {
    /* per group: its flags to each peer, the peers' flags to it, then the reduce of its local
     * tiles and their all-gather (Sec. III-B: one ready flag per peer per physical WG) */
    const double tile_bytes = b->slice_bytes;
    for (int64_t l = 0; l < G; l++) {
      for (int64_t q = 0; q < R && !b->symmetric; q++)
        if (q != d && last_put[l * R + q] != NONE)
          p2p(p, SIG0 + (uint32_t)l, &last_put[l * R + q], 1, coll_id(b, 1, l, d, q), (int32_t)((q - d) * s->stride));
      if (own[l] == 0) continue;
      uint32_t waits[64];
      uint32_t nw = 0;
      for (int64_t src = 0; src < R; src++) {
        if (src == d) continue;
        if (!b->symmetric) {
          waits[nw++] = p2p(p, WAIT0 + (uint32_t)l, NULL, 0, coll_id(b, 1, l, src, d), (int32_t)((src - d) * s->stride));
        } else {
          const uint32_t mine = last_put[l * R + (2 * d - src + 2 * R) % R];
          if (mine != NONE) waits[nw++] = mine;
        }
      }
      /* reads R partial tiles, writes the sum: memory-bound at the kernel's rate */
      const double rb = (double)own[l] * tile_bytes * (double)(R + 1);
      const uint32_t rres[2] = {res->sm, res->hbm};
      const double rw[2] = {rb / b->rate_Bps * MM_PS_PER_S, rb * b->inflate};
      const uint32_t red = mm_fused_prog_op(p, (uint32_t)l, 0, waits, nw, rres, rw, 2);
      last_compute[l] = red;
      add_item(dv, red, NONE, l, d, 1, 0, own[l]);
      for (int64_t oi = 0; oi < R; oi++) {
        const int64_t q = order[oi];
        if (q == d) continue;
        const uint32_t pres[2] = {link[q], res->hbm};
        const double pw[2] = {(double)own[l] * tile_bytes, (double)own[l] * tile_bytes};
        const uint32_t put = mm_fused_prog_op(p, put_stream(&x, l, q), f->flag_s.value, &red, 1, pres, pw, 2);
        last_put[l * R + q] = put;
        add_item(dv, red, put, l, q, 1, 0, own[l]);
      }
    }
  }

  /* device-level flags: to each peer once every put to it is done; from each peer */
  g_autoptr(GArray) deps = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  for (int64_t q = 0; q < R && !b->symmetric; q++) {
    if (q == d) continue;
    g_array_set_size(deps, 0);
    for (int64_t l = 0; l < G; l++)
      if (last_put[l * R + q] != NONE) g_array_append_val(deps, last_put[l * R + q]);
    p2p(p, S_DEV, (const uint32_t *)(void *)deps->data, deps->len, coll_id(b, 2, G, d, q),
        (int32_t)((q - d) * s->stride));
  }
  g_array_set_size(deps, 0);
  for (int64_t src = 0; src < R; src++) {
    if (src == d) continue;
    if (b->symmetric) {
      for (int64_t l = 0; l < G; l++) {
        const uint32_t mine = last_put[l * R + (2 * d - src + 2 * R) % R];
        if (mine != NONE) g_array_append_val(deps, mine);
      }
      continue;
    }
    const uint32_t w = p2p(p, W_DEV, NULL, 0, coll_id(b, 2, G, src, d), (int32_t)((src - d) * s->stride));
    g_array_append_val(deps, w);
  }
  /* the kernel exits when its WGs are done and its incoming flags are set; its own non-blocking
   * puts complete at the NIC or the peer (their receivers wait for them, Sec. IV-C) */
  for (int64_t l = 0; l < G; l++)
    if (last_compute[l] != NONE) g_array_append_val(deps, last_compute[l]);
  dv->end_op = mm_fused_prog_op(p, END, 0, (const uint32_t *)(void *)deps->data, deps->len, NULL, NULL, 0);
}

/* Union of intervals: time covered by compute only, puts only, both, on [0, end]. */
typedef struct {
  MmTime t;
  int kind; /* 0 compute, 1 comm */
  int delta;
} Edge;

static int edge_cmp(const void *a, const void *b)
{
  const Edge *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->delta - y->delta; /* ends before starts at one instant */
}

static void breakdown(const Dev *dv, const MmTime *st, const MmTime *en, MmTime end, double out[4])
{
  const guint n = dv->items->len;
  g_autoptr(GArray) edges = g_array_sized_new(FALSE, FALSE, sizeof(Edge), n * 4);
  uint32_t prev = NONE;
  for (guint i = 0; i < n; i++) {
    const Item *it = &g_array_index(dv->items, Item, i);
    if (it->compute != prev && en[it->compute] > st[it->compute]) { /* all-gather puts share their reduce */
      Edge a = {st[it->compute], 0, 1}, z = {en[it->compute], 0, -1};
      g_array_append_val(edges, a);
      g_array_append_val(edges, z);
    }
    prev = it->compute;
    if (it->put != NONE && en[it->put] > st[it->put]) {
      Edge a = {st[it->put], 1, 1}, z = {en[it->put], 1, -1};
      g_array_append_val(edges, a);
      g_array_append_val(edges, z);
    }
  }
  qsort(edges->data, edges->len, sizeof(Edge), edge_cmp);
  int active[2] = {0, 0};
  MmTime t = 0;
  double acc[4] = {0, 0, 0, 0}; /* compute only, comm only, both, neither */
  for (guint i = 0; i <= edges->len; i++) {
    const MmTime now = i < edges->len ? MIN(g_array_index(edges, Edge, i).t, end) : end;
    if (now > t) {
      const int k = active[0] > 0 && active[1] > 0 ? 2 : active[0] > 0 ? 0 : active[1] > 0 ? 1 : 3;
      acc[k] += mm_time_to_s(now - t);
      t = now;
    }
    if (i < edges->len) active[g_array_index(edges, Edge, i).kind] += g_array_index(edges, Edge, i).delta;
  }
  for (int k = 0; k < 4; k++) out[k] = acc[k];
}

MmFusedResult *mm_fused_kernel_run(const MmHardware *hw, const MmFusedSpec *spec, GError **error)
{
  g_return_val_if_fail(hw != NULL && spec != NULL, NULL);
  g_autoptr(MmFusedResult) r = g_new0(MmFusedResult, 1);
  r->spec = *spec;
  MmFusedSpec *s = &r->spec;
  if (s->op >= MM_FUSED_OP_COUNT) {
    invalid(error, "op: unknown fused op %d", (int)s->op);
    return NULL;
  }
  mm_fused_spec_defaults(hw, s);
  if (!mm_fused_spec_check(hw, s, error)) return NULL;
  Shape sh;
  shape_of(hw, s, &sh);
  if (sh.wgs > MAX_LOGICAL_WGS) {
    invalid(error, "the op has %" G_GINT64_FORMAT " logical WGs per rank; at most %" G_GINT64_FORMAT " are simulated",
            sh.wgs, MAX_LOGICAL_WGS);
    return NULL;
  }
  const int64_t R = s->ranks;
  MmFusedRes res;
  mm_fused_res_init(hw, &res);
  const MmFusedCoeffs *f = &hw->device.fused;

  /* the baseline: the plain kernel at full occupancy, then the library collective */
  const KernelAt plain = kernel_at(hw, s, &sh, 1.0);
  r->launch_s = hw->device.launch_overhead_s;
  r->kernel_s = bulk_kernel_s(hw, s, &sh, &plain, r->launch_s);
  MmCollective coll = {.kind = sh.row->coll, .bytes = sh.coll_bytes, .degree = R, .stride = s->stride,
                       .algorithm = MM_ALGO_AUTO, .skew = 1.0};
  MmCommCost cc;
  mm_comm_cost(hw, &res.links, &coll, &cc);
  r->coll_s = cc.time_s;
  r->coll_algorithm = mm_algorithm_names[cc.algorithm];
  r->baseline_s = r->launch_s + r->kernel_s + r->launch_s + r->coll_s;

  /* the fused kernel's grid, lanes and lane groups */
  const KernelAt at = kernel_at(hw, s, &sh, s->occupancy);
  Build b = {.hw = hw, .s = s, .sh = &sh, .res = &res, .rate_Bps = at.rate_Bps, .inflate = at.inflate};
  b.physical = MAX(1.0, floor(f->compute_units.value * f->waves_per_cu.value * f->wave_lanes.value * s->occupancy /
                              (double)s->wg_threads));
  const int64_t slices = sh.per_dest * R;
  b.L = MAX(1, MIN((int64_t)(b.physical / (double)s->slice_wgs), sh.per_dest));
  b.G = MIN(b.L, MAX_GROUPS);
  b.gsz = (b.L + b.G - 1) / b.G;
  b.G = (b.L + b.gsz - 1) / b.gsz;
  const int64_t rounds = (sh.per_dest + b.L - 1) / b.L;
  const int64_t ops = (s->schedule == MM_FUSED_OBLIVIOUS ? R : 1) * b.G * R * rounds * 2;
  if (ops > MAX_OPS) {
    invalid(error, "the op needs about %" G_GINT64_FORMAT " engine ops (%" G_GINT64_FORMAT " slices per rank in %"
            G_GINT64_FORMAT " rounds); at most %" G_GINT64_FORMAT ": use fewer ranks, a smaller shape or larger "
            "slices (slice-wgs)", ops, slices, rounds, MAX_OPS);
    return NULL;
  }
  r->logical_wgs = sh.wgs;
  r->n_slices = slices;
  r->physical_wgs = (int64_t)b.physical;
  r->lanes = b.L;
  r->groups = b.G;
  r->flops = sh.flops;
  r->hbm_bytes = sh.bytes;
  b.slice_bytes = sh.out_bytes / (double)slices;
  r->slice_bytes = b.slice_bytes;
  b.sm_slice = at.sm_s / (double)slices * MM_PS_PER_S;
  /* HBM work in bytes at the engine's HBM capacity, so that alone it takes at.hbm_s */
  const double hbm_work = at.hbm_s * res.cap[res.hbm] * MM_PS_PER_S;
  b.hbm_in_slice = hbm_work * (sh.bytes - sh.out_bytes) / sh.bytes / (double)slices;
  b.hbm_out_slice = hbm_work * sh.out_bytes / sh.bytes / (double)slices;
  r->comm_bytes = sh.out_bytes * (double)(R - 1) / (double)R * (sh.row->two_phase ? 2.0 : 1.0);

  /* one class per rank: the oblivious schedule makes ranks differ, and flags cross ranks. The
   * aware schedule is a rotation of one order; where the rotation keeps every link's kind (the
   * group inside one node, or one rank per node) one class stands for all ranks, exactly */
  const int64_t g = hw->gpus_per_node;
  const gboolean one_node = (R - 1) * s->stride < g;
  const gboolean one_per_node = s->stride % g == 0;
  b.symmetric = s->schedule != MM_FUSED_OBLIVIOUS && !s->per_rank && (one_node || one_per_node);
  const int64_t C = b.symmetric ? 1 : R;
  g_autofree Dev *devs = g_new0(Dev, C);
  g_autofree MmEngineProgram *progs = g_new(MmEngineProgram, C);
  g_autofree MmEngineClass *classes = g_new(MmEngineClass, C);
  for (int64_t d = 0; d < C; d++) {
    Dev *dv = &devs[d];
    dv->items = g_array_new(FALSE, FALSE, sizeof(Item));
    build_device(&b, d, dv);
    progs[d] = mm_fused_prog_view(&dv->prog, res.n);
    /* no interference term: the fused model prices its contention itself (CIL) */
    classes[d] = (MmEngineClass){(uint32_t)d, (const MmTime *)(void *)dv->prog.dur->data, (uint32_t)(d * s->stride),
                                 res.cap, 0};
  }
  g_autoptr(GError) eerr = NULL;
  g_autoptr(MmEngine) e = mm_engine_new(progs, (uint32_t)C, classes, (uint32_t)C, &eerr);
  const gboolean ok = e && mm_engine_run(e, &eerr);
  if (ok) {
    r->events = mm_engine_events(e);
    r->rank_s = g_new(double, R);
    if (s->timeline) r->slices = g_array_new(FALSE, FALSE, sizeof(MmFusedSlice));
    double worst = -1, best = 0;
    int64_t worst_d = 0;
    for (int64_t d = 0; d < C; d++) {
      const Dev *dv = &devs[d];
      const uint32_t n_ops = dv->prog.ops->len;
      g_autofree MmTime *st = g_new(MmTime, n_ops);
      g_autofree MmTime *en = g_new(MmTime, n_ops);
      mm_engine_class_times(e, (uint32_t)d, st, en);
      const double t = r->launch_s + mm_time_to_s(en[dv->end_op]);
      r->rank_s[d] = t;
      if (t > worst) {
        worst = t;
        worst_d = d;
      }
      if (d == 0 || t < best) best = t;
      for (guint i = 0; r->slices && i < dv->items->len; i++) {
        const Item *it = &g_array_index(dv->items, Item, i);
        MmFusedSlice sl = {(uint32_t)d, it->group, it->dest, it->phase, it->first, it->count, FALSE,
                           r->launch_s + mm_time_to_s(st[it->compute]), r->launch_s + mm_time_to_s(en[it->compute]),
                           0, 0};
        if (it->put != NONE) {
          link_to(hw, &res, s, d, it->dest, &sl.zero_copy);
          sl.put_start_s = r->launch_s + mm_time_to_s(st[it->put]);
          sl.put_end_s = r->launch_s + mm_time_to_s(en[it->put]);
        }
        g_array_append_val(r->slices, sl);
      }
    }
    if (b.symmetric) { /* every rank as rank 0, its destinations rotated */
      for (int64_t d = 1; d < R; d++) r->rank_s[d] = r->rank_s[0];
      const guint n0 = r->slices ? r->slices->len : 0;
      for (int64_t d = 1; d < R; d++)
        for (guint i = 0; i < n0; i++) {
          MmFusedSlice sl = g_array_index(r->slices, MmFusedSlice, i);
          sl.device = (uint32_t)d;
          sl.dest = (uint32_t)((sl.dest + (uint32_t)d) % (uint32_t)R);
          g_array_append_val(r->slices, sl);
        }
    }
    const Dev *dv = &devs[worst_d];
    g_autofree MmTime *st = g_new(MmTime, dv->prog.ops->len);
    g_autofree MmTime *en = g_new(MmTime, dv->prog.ops->len);
    mm_engine_class_times(e, (uint32_t)worst_d, st, en);
    double bd[4];
    breakdown(dv, st, en, en[dv->end_op], bd);
    r->compute_s = bd[0];
    r->comm_s = bd[1];
    r->both_s = bd[2];
    r->stalled_s = bd[3];
    r->fused_s = worst;
    r->fused_min_s = best;
    r->skew = worst / best - 1.0;
    r->speedup = r->baseline_s / r->fused_s;
    r->exposed_comm_s = MAX(0.0, r->fused_s - r->launch_s - r->compute_s - r->both_s);
    /* lower bounds: the fused kernel's compute alone (SMs or HBM), its busiest link alone */
    double sm = 0, hbm = 0, link[MM_LINKS_MAX + 2] = {0};
    const MmEngineProgram *pg = &progs[worst_d];
    for (uint32_t i = 0; i < pg->n_ops; i++)
      for (uint32_t x = 0; x < pg->ops[i].n_xfer; x++) {
        const uint32_t rr = pg->xfer_link[pg->ops[i].xfer_first + x];
        const double w = pg->xfer_bytes[pg->ops[i].xfer_first + x];
        if (rr == res.sm) sm += w;
        else if (rr == res.hbm) hbm += w;
        else link[rr] += w;
      }
    r->compute_alone_s = MAX(sm, hbm / res.cap[res.hbm]) / MM_PS_PER_S;
    double cm = 0;
    for (uint32_t i = 0; i < res.links.n; i++) cm = MAX(cm, link[i] / res.cap[i] / MM_PS_PER_S);
    r->comm_alone_s = cm;
    r->lower_bound_s = r->launch_s + MAX(r->compute_alone_s, r->comm_alone_s);
  }
  for (int64_t d = 0; d < C; d++) {
    mm_fused_prog_clear(&devs[d].prog);
    g_array_unref(devs[d].items);
  }
  if (!ok && g_error_matches(eerr, MM_ENGINE_ERROR, MM_ENGINE_ERROR_OVERFLOW)) {
    /* shapes inside every bound can still run longer than the engine's clock holds */
    invalid(error, "the op is too large to simulate: the fused kernel runs past %.3g s (the engine's picosecond "
            "clock); use a smaller shape", mm_time_to_s(MM_TIME_MAX));
    return NULL;
  }
  if (!ok) {
    g_set_error(error, MM_FUSED_ERROR, MM_FUSED_ERROR_ENGINE, "fused %s: the simulation failed: %s",
                mm_fused_op_names[s->op], eerr ? eerr->message : "unknown");
    return NULL;
  }
  return g_steal_pointer(&r);
}

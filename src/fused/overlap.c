/* overlap: decomposed compute-communication overlap (serial, shard overlap, FiCCO's four schedules,
 * XLA collective matmul, a Flux-style fused kernel) lowered to one device's engine program: GEMM
 * pieces are flows on SMs + HBM, transfers flows on links + HBM (+ SMs when compute units drive
 * them), so contention (CIL) comes out of max-min sharing; decomposition losses (DIL) come out of
 * the cost model per piece. docs/overlap.md has the equations and sources. */
#include <math.h>
#include <string.h>

#include "cost/cost.h"
#include "fused.h"

const char *const mm_overlap_op_names[] = {"ag-gemm", "a2a-gemm", "gemm-rs", NULL};
const char *const mm_overlap_schedule_names[] = {"serial",           "shard",           "uniform-fused-1d",
                                                 "hetero-fused-1d",  "hetero-unfused-1d", "uniform-fused-2d",
                                                 "cmm-x1",           "cmm-x2",          "flux",
                                                 NULL};
const char *const mm_overlap_comm_names[] = {"dma", "cu", NULL};
const char *const mm_overlap_step_names[] = {"gemm", "comm", "copy", NULL};

/* Streams of the program: compute, communication, a second compute stream (collective matmul x2),
 * gather copies, scatter copies. */
enum { S_GEMM, S_COMM, S_GEMM2, S_GATHER, S_SCATTER, S_COUNT };

/* What one lowering needs: the inputs, the device's resources, the program being built. */
typedef struct {
  const MmHardware *hw;
  const MmDevice *dev;
  const MmOverlapSpec *sp;
  MmFusedRes res;
  double b;        /* bytes per element */
  double p;        /* ranks */
  double tail_s;   /* per kernel: the graph-replay launch cost (FiCCO Sec. IV-A: graph launch keeps it in check) */
  gboolean cu;     /* transfers driven by compute units (else DMA engines) */
  double M, N, K;  /* the GEMM one GPU runs: ag-gemm / a2a-gemm N / p columns, gemm-rs K / p */
  MmFusedProg prog;
  GArray *steps;   /* MmOverlapStep, one per op */
} Ctx;

/* ---- costs of pieces alone ------------------------------------------------ */

/* Minimum HBM traffic of a GEMM, bytes: (MK + NK + MN) elements (FiCCO's MT), plus MN when it
 * accumulates into C. */
static double gemm_mt(const Ctx *x, double m, double n, double k, gboolean accumulate)
{
  return (m * k + n * k + m * n * (accumulate ? 2.0 : 1.0)) * x->b;
}

/* How a GEMM piece runs alone: its time (launch excluded) and its HBM traffic. */
typedef struct {
  double time_s;
  double bytes; /* MT: A and B read, C stored (and read first when accumulating) */
} GemmAlone;

/* A GEMM piece alone. The main loop: the cost model's compute and memory (A and B) times
 * (of its plain traffic MK + NK + MN; calibrated fits where the device has them: smaller GEMMs
 * reach less), compute stretched by wave quantization (output tiles of overlap.gemm_tile over
 * fused.compute_units, with the best split of K into 1..MAX_SPLIT_K parts: split-K / stream-K
 * kernels fill the device that way), max +
 * mem_unhidden x min (DIL grows as op-to-byte falls). An accumulating piece (C += A B: the 2D
 * schedule's K pieces) also reads C and writes it back in its epilogue, after its main loop, where
 * compute does not hide it: 2 MN elements at HBM bandwidth. (A plain piece's store is inside the
 * efficiency the utilization or fit was measured with on whole GEMMs, and row pieces store MN
 * once in all.) Kernel-level evidence: H200 GEMMs split by K into accumulating pieces
 * (calibration.overlap dil_gemm split_k=2..8) lose about the pieces' C read + write at HBM
 * bandwidth; with this term the model's 24 measured split ratios (by M and by K) fall from 12% to
 * 8% RMS log error. Charging split-K's fp32 partials the same way makes them worse (13%), so a
 * kernel's own K split stays free here (docs/overlap.md). */
#define MAX_SPLIT_K 8
static GemmAlone gemm_alone(const Ctx *x, double m, double n, double k, gboolean accumulate)
{
  const MmDevice *dev = x->dev;
  MmKernel kr = {.kind = MM_KERNEL_GEMM, .dtype = x->sp->dtype, .m = m, .n = n, .k = k, .batch = 1};
  MmCostWhy why;
  mm_cost_kernel_s(dev, &kr, 2.0 * m * n * k, gemm_mt(x, m, n, k, FALSE), &why);
  const double t = dev->overlap.gemm_tile.value, cu = fmax(1.0, floor(dev->fused.compute_units.value));
  const double tiles = ceil(m / t) * ceil(n / t), kmax = fmax(1.0, fmin(MAX_SPLIT_K, ceil(k / t)));
  double w = 0;
  for (double s = 1; s <= kmax; s++) w = fmax(w, tiles * s / (ceil(tiles * s / cu) * cu));
  const double tc = why.compute_s / w, tm = why.memory_s;
  const double epilogue = accumulate ? 2.0 * m * n * x->b / (dev->hbm_bw_Bps * dev->util_hbm.value) : 0.0;
  return (GemmAlone){fmax(tc, tm) + dev->overlap.mem_unhidden.value * fmin(tc, tm) + epilogue,
                     gemm_mt(x, m, n, k, accumulate)};
}

static double gemm_alone_s(const Ctx *x, double m, double n, double k, gboolean accumulate)
{
  return gemm_alone(x, m, n, k, accumulate).time_s;
}

static uint32_t add_op(Ctx *x, MmOverlapStepKind kind, uint32_t stream, uint32_t step, double alone_s, double tail_s,
                       const uint32_t *deps, uint32_t n_deps, const uint32_t *res, const double *work, uint32_t n_work)
{
  const uint32_t i = mm_fused_prog_op(&x->prog, stream, tail_s, deps, n_deps, res, work, n_work);
  MmOverlapStep s = {kind, stream, step, 0, 0, alone_s + tail_s};
  g_array_append_val(x->steps, s);
  return i;
}

/* A GEMM kernel: SM work its time alone, HBM work its minimum traffic, the launch as its tail. */
static uint32_t gemm(Ctx *x, uint32_t stream, uint32_t step, double m, double n, double k, gboolean accumulate,
                     const uint32_t *deps, uint32_t n_deps)
{
  const GemmAlone a = gemm_alone(x, m, n, k, accumulate);
  const double t = a.time_s;
  const uint32_t res[2] = {x->res.sm, x->res.hbm};
  const double work[2] = {t * MM_PS_PER_S, a.bytes};
  return add_op(x, MM_OVERLAP_STEP_GEMM, stream, step, t, x->tail_s, deps, n_deps, res, work, 2);
}

/* A tile range of one fused kernel: @frac of the whole GEMM's time and traffic; the kernel's launch
 * is charged to the range with @launch. */
static uint32_t gemm_tiles(Ctx *x, uint32_t stream, uint32_t step, double frac, gboolean launch, const uint32_t *deps,
                           uint32_t n_deps)
{
  const GemmAlone a = gemm_alone(x, x->M, x->N, x->K, FALSE);
  const double t = frac * a.time_s;
  const uint32_t res[2] = {x->res.sm, x->res.hbm};
  const double work[2] = {t * MM_PS_PER_S, frac * a.bytes};
  return add_op(x, MM_OVERLAP_STEP_GEMM, stream, step, t, launch ? x->tail_s : 0, deps, n_deps, res, work, 2);
}

/* A memory-bound copy kernel (gather, scatter, reduction) moving @bytes (read + write), on a share
 * of the compute units. */
static uint32_t copy(Ctx *x, uint32_t stream, uint32_t step, double bytes, const uint32_t *deps, uint32_t n_deps)
{
  const double t = bytes / (x->res.cap[x->res.hbm] * MM_PS_PER_S);
  const uint32_t res[2] = {x->res.sm, x->res.hbm};
  const double work[2] = {x->dev->overlap.cu_comm_sm.value * t * MM_PS_PER_S, bytes};
  return add_op(x, MM_OVERLAP_STEP_COPY, stream, step, t, x->tail_s, deps, n_deps, res, work, 2);
}

/* A transfer: one or more collectives' link traffic (src/comm) as one flow; HBM carries what the
 * device sends (read) and receives (write, the same by symmetry); compute-unit transfers also
 * hold cu_comm_sm of the SMs, DMA copies dma_contention of the compute pipeline (CIL beyond HBM,
 * FiCCO Sec. IV-D1). Tail: the collective's latency (CU) or one DMA batch's setup. */
static uint32_t xfer(Ctx *x, uint32_t stream, uint32_t step, const MmCollective *cs, uint32_t n_cs,
                     const uint32_t *deps, uint32_t n_deps)
{
  uint32_t res[MM_LINKS_MAX + 2];
  double work[MM_LINKS_MAX + 2] = {0};
  for (uint32_t r = 0; r < x->res.links.n; r++) res[r] = r;
  double sent = 0, latency = 0;
  const MmLinks *L = &x->res.links;
  const gboolean mesh = x->hw->intra.topology == MM_TOPO_FULL_MESH;
  for (uint32_t c = 0; c < n_cs; c++) {
    /* a peer p/2 or more ahead is reached the other way round (src/comm places a pair of
     * members stride apart from a multiple of 2 x stride): the same link count, mirrored */
    MmCollective one = cs[c];
    gboolean mirror = FALSE;
    if (one.kind == MM_COLL_P2P && one.stride > x->sp->ranks / 2) {
      one.stride = x->sp->ranks - one.stride;
      mirror = mesh;
    }
    MmCommCost o;
    mm_comm_cost(x->hw, L, &one, &o);
    for (uint32_t i = 0; i < o.n_use; i++) {
      uint32_t l = o.link[i];
      if (mirror && l >= L->intra_first && l < L->intra_first + L->n_intra)
        l = L->intra_first + (uint32_t)(x->hw->gpus_per_node - (int64_t)(l - L->intra_first + 1)) - 1;
      work[l] += o.bytes[i];
      sent += o.bytes[i];
    }
    latency = fmax(latency, o.latency_s);
  }
  double alone = 0;
  for (uint32_t r = 0; r < x->res.links.n; r++) alone = fmax(alone, work[r] / (x->res.cap[r] * MM_PS_PER_S));
  const gboolean cu = x->cu;
  const double share = cu ? x->dev->overlap.cu_comm_sm.value : x->dev->overlap.dma_contention.value;
  res[x->res.links.n] = x->res.hbm;
  work[x->res.links.n] = 2.0 * sent;
  res[x->res.links.n + 1] = x->res.sm;
  work[x->res.links.n + 1] = share * alone * MM_PS_PER_S;
  const double tail = cu ? latency : x->dev->overlap.dma_latency_s.value;
  return add_op(x, MM_OVERLAP_STEP_COMM, stream, step, alone, tail, deps, n_deps, res, work, x->res.links.n + 2);
}

static MmCollective coll(MmCollKind kind, double bytes, int64_t degree, int64_t stride)
{
  return (MmCollective){.kind = kind, .bytes = bytes, .degree = degree, .stride = stride, .algorithm = MM_ALGO_AUTO,
                        .skew = 1.0};
}

/* The undecomposed collective of @op (nccl-tests conventions for bytes). */
static MmCollective whole_coll(const Ctx *x)
{
  const MmOverlapSpec *sp = x->sp;
  const int64_t p = sp->ranks;
  const double mk = x->M * x->K * x->b, mn = x->M * x->N * x->b;
  switch (sp->op) {
  case MM_OVERLAP_AG_GEMM: return coll(MM_COLL_ALL_GATHER, mk, p, 1);
  case MM_OVERLAP_A2A_GEMM: return coll(MM_COLL_ALL_TO_ALL, mk, p, 1);
  case MM_OVERLAP_GEMM_RS: return coll(MM_COLL_REDUCE_SCATTER, mn, p, 1);
  default: g_assert_not_reached();
  }
}

/* ---- the schedules ------------------------------------------------------- */

static void lower_serial(Ctx *x)
{
  const MmOverlapSpec *sp = x->sp;
  const MmCollective c = whole_coll(x);
  const double M = x->M, N = x->N, K = x->K;
  x->cu = TRUE; /* the baseline is the library's collective (RCCL/NCCL) */
  if (sp->op == MM_OVERLAP_GEMM_RS) {
    const uint32_t g = gemm(x, S_GEMM, 0, M, N, K, FALSE, NULL, 0);
    xfer(x, S_COMM, 0, &c, 1, &g, 1);
  } else {
    const uint32_t t = xfer(x, S_COMM, 0, &c, 1, NULL, 0);
    gemm(x, S_GEMM, 0, M, N, K, FALSE, &t, 1);
  }
}

/* The peer-to-peer step structure shard overlap and the Flux-style kernel share; @piece lowers
 * step s's GEMM piece (@first: the op's first piece). gemm-rs: the partial of the block peer s
 * owns, sent to it, the own block last, then the reduction; ag-gemm: the own shard, then each
 * peer's shard as it arrives. */
typedef uint32_t (*PieceFn)(Ctx *x, uint32_t step, gboolean first, const uint32_t *deps, uint32_t n_deps);

static void peer_steps(Ctx *x, PieceFn piece)
{
  const int64_t p = x->sp->ranks;
  const double S = x->M / x->p;
  if (x->sp->op == MM_OVERLAP_GEMM_RS) {
    GArray *all = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    for (int64_t s = 1; s <= p; s++) {
      const uint32_t g = piece(x, (uint32_t)s, s == 1, NULL, 0);
      g_array_append_val(all, g);
      if (s == p) break;
      const MmCollective c = coll(MM_COLL_P2P, S * x->N * x->b, 2, s);
      const uint32_t t = xfer(x, S_COMM, (uint32_t)s, &c, 1, &g, 1);
      g_array_append_val(all, t);
    }
    copy(x, S_GEMM, (uint32_t)p, (x->p + 1.0) * S * x->N * x->b, (const uint32_t *)(void *)all->data, all->len);
    g_array_unref(all);
    return;
  }
  piece(x, 0, TRUE, NULL, 0);
  for (int64_t s = 1; s < p; s++) {
    const MmCollective c = coll(MM_COLL_P2P, S * x->K * x->b, 2, s);
    const uint32_t t = xfer(x, S_COMM, (uint32_t)s, &c, 1, NULL, 0);
    piece(x, (uint32_t)s, FALSE, &t, 1);
  }
}

static uint32_t shard_piece(Ctx *x, uint32_t step, gboolean first, const uint32_t *deps, uint32_t n_deps)
{
  (void)first;
  return gemm(x, S_GEMM, step, x->M / x->p, x->N, x->K, FALSE, deps, n_deps);
}

/* PyTorch async-TP: step s exchanges whole shards with the peer s away, over one link of a mesh. */
static void lower_shard(Ctx *x) { peer_steps(x, shard_piece); }

/* FiCCO: communication one level finer (every step 1/p of every peer's shard, all-to-all), p steps. */
static void lower_ficco(Ctx *x, MmOverlapSchedule s)
{
  const MmOverlapSpec *sp = x->sp;
  const uint32_t p = (uint32_t)sp->ranks;
  const double M = x->M, N = x->N, K = x->K, S = M / x->p, piece = S / x->p;
  /* every step gathers p pieces of S/p rows (1D) or S rows x K/p columns (2D): S x K elements */
  const MmCollective c = coll(MM_COLL_ALL_GATHER, S * K * x->b, sp->ranks, 1);
  const gboolean hetero = s == MM_OVERLAP_HETERO_FUSED_1D || s == MM_OVERLAP_HETERO_UNFUSED_1D;
  if (hetero) gemm(x, S_GEMM, 0, S, N, K, FALSE, NULL, 0); /* the local shard hides step 0 */
  for (uint32_t i = 0; i < p; i++) {
    const uint32_t t = xfer(x, S_COMM, i, &c, 1, NULL, 0);
    switch (s) {
    case MM_OVERLAP_UNIFORM_FUSED_1D: {
      const uint32_t gt = copy(x, S_GATHER, i, 2.0 * S * K * x->b, &t, 1);
      const uint32_t g = gemm(x, S_GEMM, i, S, N, K, FALSE, &gt, 1);
      copy(x, S_SCATTER, i, 2.0 * S * N * x->b, &g, 1);
      break;
    }
    case MM_OVERLAP_HETERO_FUSED_1D: {
      const double r = (x->p - 1.0) * piece;
      const uint32_t gt = copy(x, S_GATHER, i, 2.0 * r * K * x->b, &t, 1);
      const uint32_t g = gemm(x, S_GEMM, i, r, N, K, FALSE, &gt, 1);
      copy(x, S_SCATTER, i, 2.0 * r * N * x->b, &g, 1);
      break;
    }
    case MM_OVERLAP_HETERO_UNFUSED_1D:
      for (uint32_t j = 1; j < p; j++) gemm(x, S_GEMM, i, piece, N, K, FALSE, &t, 1);
      break;
    case MM_OVERLAP_UNIFORM_FUSED_2D: {
      const uint32_t gt = copy(x, S_GATHER, i, 2.0 * M * (K / x->p) * x->b, &t, 1);
      gemm(x, S_GEMM, i, M, N, K / x->p, i > 0, &gt, 1);
      break;
    }
    default: g_assert_not_reached();
    }
  }
}

/* XLA collective matmul: a while loop whose iteration runs a bidirectional collective-permute
 * beside the partial GEMMs of the shards that arrived before it; x2 puts an iteration's two GEMMs
 * on two compute streams. */
static void lower_cmm(Ctx *x, gboolean x2)
{
  const MmOverlapSpec *sp = x->sp;
  const int64_t p = sp->ranks;
  const double S = x->M / x->p, N = x->N, K = x->K;
  const double operand = sp->op == MM_OVERLAP_GEMM_RS ? x->M * N * x->b : x->M * K * x->b;
  if (operand < x->dev->overlap.cmm_threshold_bytes.value) { /* below XLA's threshold: not rewritten */
    lower_serial(x);
    return;
  }
  if (sp->op == MM_OVERLAP_GEMM_RS) {
    /* two accumulators (half the columns each) travel opposite ways round the ring: each step
     * computes the next block's partial, adds the received accumulator, forwards it */
    uint32_t last_t = UINT32_MAX;
    for (int64_t i = 0; i < p; i++) {
      const uint32_t st = x2 && i % 2 ? S_GEMM2 : S_GEMM;
      const uint32_t g = gemm(x, st, (uint32_t)i, S, N, K, FALSE, NULL, 0);
      uint32_t deps[2] = {g, last_t};
      const uint32_t add = copy(x, S_GEMM, (uint32_t)i, 3.0 * S * N * x->b, deps, i > 0 ? 2 : 1);
      if (i == p - 1) break;
      const MmCollective cs[2] = {coll(MM_COLL_P2P, S * N * x->b / 2, 2, 1), coll(MM_COLL_P2P, S * N * x->b / 2, 2, p - 1)};
      last_t = xfer(x, S_COMM, (uint32_t)i, cs, 2, &add, 1);
    }
    return;
  }
  /* iteration 0 computes the local shard; iteration i the two shards permute i brought */
  GArray *prev = g_array_new(FALSE, FALSE, sizeof(uint32_t)); /* the previous iteration's ops */
  const uint32_t g0 = gemm(x, S_GEMM, 0, S, N, K, FALSE, NULL, 0);
  g_array_append_val(prev, g0);
  int64_t left = p - 1;
  uint32_t last_t = UINT32_MAX;
  for (uint32_t it = 1; left > 0; it++) {
    const int64_t got = left >= 2 ? 2 : 1;
    left -= got;
    if (last_t != UINT32_MAX) g_array_append_val(prev, last_t);
    const MmCollective cs[2] = {coll(MM_COLL_P2P, S * K * x->b, 2, 1), coll(MM_COLL_P2P, S * K * x->b, 2, p - 1)};
    /* the permute of iteration it starts when iteration it - 1 is done (the loop's barrier) */
    const uint32_t t = xfer(x, S_COMM, it, cs, (uint32_t)got, (const uint32_t *)(void *)prev->data, prev->len);
    g_array_set_size(prev, 0);
    for (int64_t j = 0; j < got; j++) {
      const uint32_t g = gemm(x, x2 && j == 1 ? S_GEMM2 : S_GEMM, it, S, N, K, FALSE, &t, 1);
      g_array_append_val(prev, g);
    }
    last_t = t;
  }
  g_array_unref(prev);
}

/* Flux: one GEMM kernel whose tiles wait for (AG) or feed (RS) the transfers. AG: the copy engine
 * pulls the peers' shards one after another at the port's bandwidth while the local rows run; RS:
 * the epilogue writes each remote block's tiles to its owner (on the SMs), remote blocks first,
 * then a reduction of the p partials. */
static uint32_t flux_piece(Ctx *x, uint32_t step, gboolean first, const uint32_t *deps, uint32_t n_deps)
{
  return gemm_tiles(x, S_GEMM, step, 1.0 / x->p, first, deps, n_deps);
}

static void lower_flux(Ctx *x)
{
  /* gemm-rs: epilogue stores are issued by the GEMM's own threads; ag-gemm: cudaMemcpyAsync on
   * the copy engines */
  x->cu = x->sp->op == MM_OVERLAP_GEMM_RS;
  peer_steps(x, flux_piece);
}

/* ---- the table of schedules ----------------------------------------------- */

static void lower_serial_row(Ctx *x, MmOverlapSchedule s) { (void)s; lower_serial(x); }
static void lower_shard_row(Ctx *x, MmOverlapSchedule s) { (void)s; lower_shard(x); }
static void lower_cmm_row(Ctx *x, MmOverlapSchedule s) { lower_cmm(x, s == MM_OVERLAP_CMM_X2); }
static void lower_flux_row(Ctx *x, MmOverlapSchedule s) { (void)s; lower_flux(x); }

/* One row per schedule: which ops it applies to and its lowering. */
typedef struct {
  MmOverlapSchedule s;
  gboolean rs; /* applies to gemm-rs */
  gboolean ag; /* applies to ag-gemm / a2a-gemm */
  void (*lower)(Ctx *x, MmOverlapSchedule s);
} ScheduleRow;

static const ScheduleRow schedule_rows[MM_OVERLAP_SCHEDULE_COUNT] = {
  {MM_OVERLAP_SERIAL, TRUE, TRUE, lower_serial_row},
  {MM_OVERLAP_SHARD, TRUE, TRUE, lower_shard_row},
  {MM_OVERLAP_UNIFORM_FUSED_1D, FALSE, TRUE, lower_ficco},
  {MM_OVERLAP_HETERO_FUSED_1D, FALSE, TRUE, lower_ficco},
  {MM_OVERLAP_HETERO_UNFUSED_1D, FALSE, TRUE, lower_ficco},
  {MM_OVERLAP_UNIFORM_FUSED_2D, FALSE, TRUE, lower_ficco},
  {MM_OVERLAP_CMM_X1, TRUE, TRUE, lower_cmm_row},
  {MM_OVERLAP_CMM_X2, TRUE, TRUE, lower_cmm_row},
  {MM_OVERLAP_FLUX, TRUE, TRUE, lower_flux_row},
};

gboolean mm_overlap_applies(MmOverlapOp op, MmOverlapSchedule s)
{
  g_return_val_if_fail(s < MM_OVERLAP_SCHEDULE_COUNT && op < MM_OVERLAP_OP_COUNT, FALSE);
  return op == MM_OVERLAP_GEMM_RS ? schedule_rows[s].rs : schedule_rows[s].ag;
}

static int cmp_start(const void *a, const void *b)
{
  const double *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Simulates schedule @s; fills @run. */
static gboolean simulate(Ctx *x, MmOverlapSchedule s, MmOverlapRun *run, GError **error)
{
  x->cu = x->sp->comm == MM_OVERLAP_COMM_CU;
  mm_fused_prog_init(&x->prog, S_COUNT);
  x->steps = g_array_new(FALSE, FALSE, sizeof(MmOverlapStep));
  g_assert(schedule_rows[s].s == s);
  schedule_rows[s].lower(x, s);
  MmEngineProgram prog = mm_fused_prog_view(&x->prog, x->res.n);
  MmEngineClass cls = {0, (const MmTime *)(void *)x->prog.dur->data, 0, x->res.cap, 0}; /* its CIL is priced inside */
  GError *err = NULL;
  MmEngine *e = mm_engine_new(&prog, 1, &cls, 1, &err);
  if (!e || !mm_engine_run(e, &err)) {
    if (g_error_matches(err, MM_ENGINE_ERROR, MM_ENGINE_ERROR_OVERFLOW)) /* sizes in bounds, time past the clock */
      g_set_error(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID, "m %" G_GINT64_FORMAT ", n %" G_GINT64_FORMAT
                  ", k %" G_GINT64_FORMAT ": too large to simulate: %s runs past %.3g s (the engine's picosecond "
                  "clock); use smaller sizes", x->sp->m, x->sp->n, x->sp->k, mm_overlap_schedule_names[s],
                  mm_time_to_s(MM_TIME_MAX));
    else
      g_set_error(error, MM_FUSED_ERROR, MM_FUSED_ERROR_ENGINE, "%s: %s", mm_overlap_schedule_names[s], err->message);
    g_error_free(err);
    mm_engine_free(e);
    mm_fused_prog_clear(&x->prog);
    g_array_unref(g_steal_pointer(&x->steps));
    return FALSE;
  }
  const uint32_t n = prog.n_ops;
  g_autofree MmTime *t0 = g_new(MmTime, n);
  g_autofree MmTime *t1 = g_new(MmTime, n);
  mm_engine_class_times(e, 0, t0, t1);
  run->schedule = s;
  run->applies = TRUE;
  run->time_s = mm_time_to_s(mm_engine_makespan(e));
  double gemm_sim = 0, comm_sim = 0;
  g_autofree double *iv = g_new(double, 2 * n);
  uint32_t n_iv = 0;
  for (uint32_t i = 0; i < n; i++) {
    MmOverlapStep *st = &g_array_index(x->steps, MmOverlapStep, i);
    st->start_s = mm_time_to_s(t0[i]);
    st->end_s = mm_time_to_s(t1[i]);
    const double d = st->end_s - st->start_s;
    if (st->kind == MM_OVERLAP_STEP_GEMM) {
      run->gemm_alone_s += st->alone_s;
      gemm_sim += d;
      iv[2 * n_iv] = st->start_s;
      iv[2 * n_iv + 1] = st->end_s;
      n_iv++;
    } else if (st->kind == MM_OVERLAP_STEP_COMM) {
      run->comm_alone_s += st->alone_s;
      comm_sim += d;
    } else {
      run->copy_alone_s += st->alone_s;
    }
  }
  /* time some GEMM piece ran: the union of their intervals */
  qsort(iv, n_iv, 2 * sizeof(double), cmp_start);
  double busy = 0, cur0 = 0, cur1 = -1;
  for (uint32_t i = 0; i < n_iv; i++) {
    if (iv[2 * i] > cur1) {
      if (cur1 > cur0) busy += cur1 - cur0;
      cur0 = iv[2 * i];
      cur1 = iv[2 * i + 1];
    } else {
      cur1 = fmax(cur1, iv[2 * i + 1]);
    }
  }
  if (cur1 > cur0) busy += cur1 - cur0;
  run->exposed_comm_s = fmax(0.0, run->time_s - busy);
  run->gemm_cil = run->gemm_alone_s > 0 ? gemm_sim / run->gemm_alone_s : 1.0;
  run->comm_cil = run->comm_alone_s > 0 ? comm_sim / run->comm_alone_s : 1.0;
  run->steps = g_steal_pointer(&x->steps);
  mm_engine_free(e);
  mm_fused_prog_clear(&x->prog);
  return TRUE;
}

MmOverlapSchedule mm_overlap_heuristic(const MmDevice *dev, const MmOverlapSpec *sp, double *score)
{
  g_return_val_if_fail(dev && sp, MM_OVERLAP_UNIFORM_FUSED_1D);
  const double b = mm_dtype_bytes(sp->dtype), m = (double)sp->m, n = (double)sp->n, k = (double)sp->k;
  const double mt = (m * k + n * k + m * n) * b, otb = 2.0 * m * n * k / mt;
  /* the machine's OTB (peak / HBM B/s) times its HBM B/s: its peak FLOP/s (at its clocks), against
   * the GEMM's OTB x MT = its FLOPs (FiCCO Sec. V-C "op-to-byte x memory bandwidth = FLOPs"), per
   * second; the GEMM is the layer's (M, N, K), as FiCCO's Table I and its DIL study give it */
  const double peak = dev->peak_flops[sp->dtype] * dev->clock_derate.value;
  const double machine = peak > 0 ? peak : 1.0;
  const double r = otb * mt / machine;
  if (score) *score = r;
  if (!(m > k)) return MM_OVERLAP_UNIFORM_FUSED_2D; /* "1D if M > K or 2D otherwise" */
  if (r < dev->overlap.heuristic_low.value) return MM_OVERLAP_UNIFORM_FUSED_1D;
  if (r > dev->overlap.heuristic_high.value) return MM_OVERLAP_HETERO_UNFUSED_1D;
  return MM_OVERLAP_HETERO_FUSED_1D;
}

void mm_overlap_result_free(MmOverlapResult *r)
{
  if (!r) return;
  for (int s = 0; s < MM_OVERLAP_SCHEDULE_COUNT; s++)
    if (r->runs[s].steps) g_array_unref(r->runs[s].steps);
  g_free(r);
}

/* The largest dimension taken: 2^40 elements (sizes stay far inside a double's exact range). */
#define MAX_DIM 1099511627776.0
/* The most ranks simulated: hetero-unfused-1d runs ranks x (ranks - 1) GEMM pieces, so the engine
 * programs grow as ranks^2 (1024: about a million ops, half a second; 4096 took 4 GB). */
#define MAX_RANKS 1024

MmOverlapResult *mm_overlap_run(const MmHardware *hw, const MmOverlapSpec *sp, GError **error)
{
  g_return_val_if_fail(hw && sp, NULL);
  if (sp->op >= MM_OVERLAP_OP_COUNT || sp->comm >= MM_OVERLAP_COMM_COUNT || sp->dtype >= MM_DTYPE_COUNT) {
    g_set_error(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID, "overlap: unknown op, comm engine or dtype");
    return NULL;
  }
  const int64_t dims[3] = {sp->m, sp->n, sp->k};
  static const char *const dim_names[3] = {"m", "n", "k"};
  for (int i = 0; i < 3; i++) {
    if (dims[i] < 1 || (double)dims[i] > MAX_DIM) {
      g_set_error(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID, "%s %" G_GINT64_FORMAT ": expected 1 .. 2^40",
                  dim_names[i], dims[i]);
      return NULL;
    }
  }
  if (sp->ranks < 2 || sp->ranks > hw->gpus_per_node) {
    g_set_error(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID,
                "ranks %" G_GINT64_FORMAT ": expected 2 .. %" G_GINT64_FORMAT " (the GPUs of one node of %s)", sp->ranks,
                (int64_t)hw->gpus_per_node, hw->name);
    return NULL;
  }
  if (sp->ranks > MAX_RANKS) {
    g_set_error(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID,
                "ranks %" G_GINT64_FORMAT ": at most %d are simulated (hetero-unfused-1d runs ranks x (ranks - 1) "
                "GEMM pieces)", sp->ranks, MAX_RANKS);
    return NULL;
  }
  if (!(hw->device.peak_flops[sp->dtype] > 0)) {
    g_set_error(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID, "dtype %s: %s has no peak FLOP/s for it",
                mm_dtype_names[sp->dtype], hw->device.name);
    return NULL;
  }
  if (!mm_comm_group_even(hw, sp->ranks, 1)) {
    g_set_error(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID,
                "ranks %" G_GINT64_FORMAT ": not an even group of %s's %" G_GINT64_FORMAT "-GPU nodes", sp->ranks, hw->name,
                (int64_t)hw->gpus_per_node);
    return NULL;
  }
  g_autoptr(MmOverlapResult) r = g_new0(MmOverlapResult, 1);
  r->spec = *sp;
  Ctx x = {.hw = hw, .dev = &hw->device, .sp = &r->spec, .b = mm_dtype_bytes(sp->dtype), .p = (double)sp->ranks,
           .tail_s = hw->device.graph_launch_overhead_s};
  mm_fused_res_init(hw, &x.res);
  x.M = (double)sp->m;
  x.N = (double)sp->n / (sp->op == MM_OVERLAP_GEMM_RS ? 1.0 : x.p);
  x.K = (double)sp->k / (sp->op == MM_OVERLAP_GEMM_RS ? x.p : 1.0);
  const double M = x.M, N = x.N, K = x.K;
  r->gemm_s = gemm_alone_s(&x, M, N, K, FALSE) + x.tail_s;
  MmCommCost cc;
  const MmCollective wc = whole_coll(&x);
  mm_comm_cost(hw, &x.res.links, &wc, &cc);
  r->comm_s = cc.time_s;
  /* no schedule beats the whole GEMM's compute roofline at the device's efficiency (no waves, no
   * launch) nor the collective's busiest link at its bandwidth (no latency) */
  MmKernel whole = {.kind = MM_KERNEL_GEMM, .dtype = sp->dtype, .m = M, .n = N, .k = K, .batch = 1};
  MmCostWhy why;
  mm_cost_kernel_s(&hw->device, &whole, 2.0 * M * N * K, gemm_mt(&x, M, N, K, FALSE), &why);
  double link_s = 0;
  for (uint32_t i = 0; i < cc.n_use; i++) link_s = fmax(link_s, cc.bytes[i] / x.res.links.bw_Bps[cc.link[i]]);
  r->lower_bound_s = fmax(fmax(why.compute_s, why.memory_s), link_s);
  r->flops = 2.0 * M * N * K;
  r->mt_bytes = gemm_mt(&x, M, N, K, FALSE);
  r->otb_flop_per_B = r->flops / r->mt_bytes;
  r->machine_otb = hw->device.peak_flops[sp->dtype] * hw->device.clock_derate.value / hw->device.hbm_bw_Bps;
  r->heuristic = mm_overlap_heuristic(&hw->device, sp, &r->heuristic_score);
  double best = INFINITY, best_ficco = INFINITY;
  r->best = MM_OVERLAP_SERIAL;
  r->oracle = MM_OVERLAP_UNIFORM_FUSED_1D;
  for (int s = 0; s < MM_OVERLAP_SCHEDULE_COUNT; s++) {
    MmOverlapRun *run = &r->runs[s];
    run->schedule = (MmOverlapSchedule)s;
    if (!mm_overlap_applies(sp->op, (MmOverlapSchedule)s)) continue;
    if (!simulate(&x, (MmOverlapSchedule)s, run, error)) return NULL;
    run->gemm_dil = run->gemm_alone_s / r->gemm_s;
    run->comm_dil = r->comm_s > 0 ? run->comm_alone_s / r->comm_s : 1.0;
    if (run->time_s < best) best = run->time_s, r->best = (MmOverlapSchedule)s;
    if (s >= MM_OVERLAP_UNIFORM_FUSED_1D && s <= MM_OVERLAP_UNIFORM_FUSED_2D && run->time_s < best_ficco)
      best_ficco = run->time_s, r->oracle = (MmOverlapSchedule)s;
  }
  for (int s = 0; s < MM_OVERLAP_SCHEDULE_COUNT; s++)
    if (r->runs[s].applies) r->runs[s].speedup = r->runs[MM_OVERLAP_SERIAL].time_s / r->runs[s].time_s;
  return g_steal_pointer(&r);
}

/* overlap: TP collectives decomposed into per-step transfers and partial GEMMs (XLA collective matmul, PyTorch
 * async TP, Megatron/NeMo userbuffers), and the fused embedding + All2All of sharded tables (docs/tp-overlap.md). */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "fused/fused.h"

/* Transformer Engine's userbuffers "pipeline" method (GEMM + ReduceScatter) splits the GEMM
 * into this many chunks, each reduce-scattered while the next one computes: the default
 * num_splits of transformer_engine.pytorch.module.base.initialize_ub. */
#define UB_PIPELINE_SPLITS 4u

uint32_t mm__overlap_pieces(MmOverlap mode, gboolean comm_first, int64_t p)
{
  if (mode == MM_OVERLAP_USERBUFFERS && !comm_first) return UB_PIPELINE_SPLITS;
  return (uint32_t)p;
}

/* The time of one of @pieces equal pieces of part @part of layer @li, split along its token
 * dimension (m): 1/pieces of its FLOPs and activation bytes, all of its weight reads, through
 * the cost unit (a smaller GEMM reaches whatever efficiency the device's curves or fits give
 * it), plus one launch. An FP8 recipe's casts stay memory-bound kernels beside the GEMM, as for
 * the whole part (mm_plan_part_work): 1/pieces of their time each, never inside the piece's
 * roofline, where its compute would hide them. */
double mm__piece_s(const Lower *L, uint32_t li, Part part, uint32_t pieces)
{
  const MmLayer *l = &L->g->layers[li];
  const MmPlacement *p = mm__place(L, li);
  MmPartWork w;
  mm__part_work(L, li, part, &w);
  if (w.flops <= 0 && w.bytes <= 0) return 0;
  const double k = (double)pieces, bytes = w.bytes - w.cast_bytes;
  const double wb = part == PART_BWD_W ? 0 : MIN(bytes, l->cost.weight_bytes * p->weight_frac);
  MmKernel kp = w.kernel;
  kp.m = MAX(1.0, kp.m / k);
  return mm_cost_kernel_s(&L->s->hw->device, &kp, w.flops / k, (bytes - wb) / k + wb, NULL) + w.cast_s / k +
         L->launch_s;
}

/* The time of the local reduction async TP's GEMM + ReduceScatter ends with: @p partial
 * shards of @shard bytes read, one written (memory-bound, through the cost unit). */
double mm__reduce_s(const Lower *L, guint block, double shard, int64_t p)
{
  const MmKernel k = {.kind = MM_KERNEL_ELEMENTWISE, .dtype = L->s->blocks[block].compute_dtype, .m = 1,
                      .n = 1, .k = 1, .batch = 1};
  return mm_cost_kernel_s(&L->s->hw->device, &k, 0, shard * (double)(p + 1), NULL) + L->launch_s;
}

/* Marks the ops from @first on as pieces of group @group. */
static void mark(Lower *L, uint32_t first, uint32_t group, MmOverlap mode)
{
  for (uint32_t i = first; i < L->n_ops; i++) {
    L->info[i].fused = group;
    L->info[i].overlap = (uint8_t)mode;
  }
}

static uint32_t comm(Lower *L, guint block, uint32_t mask, MmCollKind kind, double bytes, const Deps *d,
                     uint32_t unit, uint32_t micro, MmPhase phase, uint32_t group, MmOverlap mode)
{
  const uint32_t first = L->n_ops;
  uint32_t op = mm__emit_coll(L, block, mask, kind, MM_REASON_TP, bytes, d, unit, micro, phase);
  mark(L, first, group, mode);
  return op;
}

static uint32_t piece(Lower *L, const MmOpInfo *info, const Deps *d, uint32_t group, MmOverlap mode)
{
  MmOpInfo in = *info;
  in.fused = group;
  in.overlap = (uint8_t)mode;
  return mm__emit(L, MM_STREAM_COMPUTE, d, &in, NULL, MM_NO_COLL, 0, 0, 0);
}

/* Shards a bidirectional collective-permute step @j (1-based) of a p-way loop moves: two (one
 * each way), the last step one when p - 1 is odd. */
static double bidir_shards(uint32_t j, int64_t p)
{
  return (double)MIN((int64_t)2, p - 1 - 2 * (int64_t)(j - 1));
}

uint32_t mm__emit_tp_overlap(Lower *L, guint block, MmOverlap mode, MmCollKind kind, gboolean comm_first,
                             uint32_t mask, double bytes, const MmOpInfo *info, uint32_t pieces, double extra_s,
                             const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase)
{
  const int64_t p = mm_plan_mask_degree(&L->s->blocks[block], mask);
  const double shard = bytes / (double)p;
  const uint32_t group = ++L->n_fused;
  g_assert(p > 1 && pieces >= 2);
  if (comm_first) { /* AllGather + GEMM: piece i computes on shard i once it is here */
    if (mode == MM_OVERLAP_COLLECTIVE_MATMUL) {
      /* XLA: p/2 bidirectional collective-permutes; step j brings shards 2j-1 and 2j. Unrolled
       * x2, step j+1's permute is issued while step j's GEMMs run; it waits for the GEMMs of
       * step j-1 only (two buffers in flight). Shard 0 is local. */
      const uint32_t steps = (uint32_t)(p / 2);
      uint32_t prev = NONE; /* the last GEMM of step j - 1 (none for the local step 0: no buffer) */
      uint32_t perm = comm(L, block, mask, MM_COLL_PERMUTE, shard * bidir_shards(1, p), d, unit, micro, phase, group,
                           mode);
      uint32_t last = piece(L, info, d, group, mode);
      for (uint32_t j = 1; j <= steps; j++) {
        uint32_t next = NONE;
        if (j < steps) {
          Deps nd = mm__deps_one(perm);
          mm__deps_add(L, &nd, prev);
          next = comm(L, block, mask, MM_COLL_PERMUTE, shard * bidir_shards(j + 1, p), &nd, unit, micro, phase, group,
                      mode);
        }
        for (uint32_t i = 2 * j - 1; i <= MIN(2 * j, (uint32_t)p - 1); i++) {
          Deps cd = mm__deps_one(perm);
          last = piece(L, info, &cd, group, mode);
        }
        prev = last;
        perm = next;
      }
      return last;
    }
    /* async TP (copy-engine peer copies into the symmetric buffer) and userbuffers' ring
     * exchange: p - 1 steps of one shard each, in order; the full gathered buffer is
     * allocated, so copies never wait for GEMMs */
    uint32_t last = NONE, copy = NONE;
    for (uint32_t j = 0; j < (uint32_t)p; j++) {
      uint32_t next = NONE;
      if (j + 1 < (uint32_t)p) {
        Deps nd;
        if (copy == NONE) deps_copy(&nd, d);
        else mm__deps_set_one(&nd, copy);
        next = comm(L, block, mask, MM_COLL_PERMUTE, shard, &nd, unit, micro, phase, group, mode);
      }
      Deps cd;
      if (copy == NONE) deps_copy(&cd, d);
      else mm__deps_set_one(&cd, copy);
      last = piece(L, info, &cd, group, mode);
      copy = next;
    }
    return last;
  }
  /* GEMM + ReduceScatter */
  if (mode == MM_OVERLAP_USERBUFFERS) {
    /* Transformer Engine's pipeline method: chunk i's output reduce-scattered while chunk
     * i + 1 computes */
    uint32_t rs = NONE;
    Deps cd;
    deps_copy(&cd, d);
    for (uint32_t i = 0; i < pieces; i++) {
      uint32_t c = piece(L, info, &cd, group, mode);
      mm__deps_set_one(&cd, c);
      Deps rd = mm__deps_one(c);
      rs = comm(L, block, mask, kind, bytes / (double)pieces, &rd, unit, micro, phase, group, mode);
    }
    return rs;
  }
  if (mode == MM_OVERLAP_COLLECTIVE_MATMUL) {
    /* XLA: step j computes the partial products bound for the ranks 2j-1 and 2j hops away
     * (added to the accumulators received) and sends them on; the last piece is the local
     * shard, once the last accumulators are in */
    const uint32_t steps = (uint32_t)(p / 2);
    uint32_t perm = NONE, c = NONE, idx = 0;
    Deps cd;
    deps_copy(&cd, d);
    for (uint32_t j = 1; j <= steps; j++) {
      for (uint32_t n = 0; n < 2 && idx + 1 < (uint32_t)p; n++, idx++) {
        c = piece(L, info, &cd, group, mode);
        mm__deps_set_one(&cd, c);
      }
      Deps pd = mm__deps_one(c);
      mm__deps_add(L, &pd, perm);
      perm = comm(L, block, mask, MM_COLL_PERMUTE, shard * bidir_shards(j, p), &pd, unit, micro, phase, group, mode);
    }
    Deps fd = mm__deps_one(perm);
    return piece(L, info, &fd, group, mode);
  }
  /* async TP: the partial product for each peer pushed to it by the copy engine as soon as
   * it exists; the local shard last, then the p partial sums reduced */
  uint32_t copy = NONE, c = NONE;
  Deps cd;
  deps_copy(&cd, d);
  for (uint32_t i = 0; i < (uint32_t)p; i++) {
    c = piece(L, info, &cd, group, mode);
    mm__deps_set_one(&cd, c);
    if (i + 1 < (uint32_t)p) {
      Deps pd = mm__deps_one(c);
      copy = comm(L, block, mask, MM_COLL_PERMUTE, shard, &pd, unit, micro, phase, group, mode);
    }
  }
  MmOpInfo red = *info;
  red.flops = red.model_flops = 0;
  red.bytes = shard * (double)(p + 1);
  red.time_s = red.fixed_s = extra_s;
  Deps rd = mm__deps_one(c);
  mm__deps_add(L, &rd, copy);
  return piece(L, &red, &rd, group, mode);
}

/* ---- fused embedding + All2All ------------------------------------------ *
 * The fused kernel of the AMD fused-kernel paper (Sec. III): persistent workgroups pool the
 * embeddings of a slice (32 pooled outputs) and the last one to finish puts the slice to its
 * destination, then a flag after a fence; remote slices are computed first. The plan keeps
 * the lookup on the compute stream and the exchange on a comm stream, in overlap_chunks
 * pieces: chunk i's All2All goes as soon as chunk i's lookups are done. The kernel's own
 * costs come from the device's "fused" coefficients: the lookup slowed by the occupancy the
 * communication API's registers cost (priced by the occupancy mechanism of src/fused: Little's
 * law against HBM contention, so on a device past its contention knee the lower occupancy costs
 * nothing, as the paper's Fig. 13 found), and per slice a put and the flag book-keeping, spread
 * over the compute units' workgroups. */

/* Pooled outputs per slice: the paper's evaluated slice size (Sec. IV, "slice size of 32
 * embeddings"). */
#define FUSED_SLICE_EMBEDDINGS 32.0

gboolean mm__mp_fused(const Lower *L, guint b)
{
  return L->m->blocks[b].kind == MM_BLOCK_EMBEDDING_BAG && L->s->blocks[b].degree[MM_STRAT_MP] > 1 &&
         L->s->blocks[b].mp_overlap == MM_OVERLAP_FUSED;
}

/* The fused kernel's time for the lookups @seg of block @b exchanging @bytes per device. */
static double fused_lookup_s(const Lower *L, guint b, const Seg *seg, double bytes)
{
  const MmFusedCoeffs *fc = &L->hw->device.fused;
  const MmBlock *bk = &L->m->blocks[b];
  const double kernel_s = MAX(0.0, seg->time_s - (double)seg->kernels * L->launch_s);
  const double slice_bytes = FUSED_SLICE_EMBEDDINGS * (double)bk->dim * mm_dtype_bytes(bk->dtype);
  const double slices = ceil(bytes / slice_bytes);
  const double units = MAX(1.0, fc->compute_units.value);
  const double occupancy = mm_fused_lookup_occupancy_factor(&L->hw->device, 1.0 - fc->occupancy_loss.value);
  return kernel_s * occupancy + slices * (fc->put_latency_s.value + fc->flag_s.value) / units + L->launch_s;
}

static MmOpInfo lookup_info(const Lower *L, const Seg *seg, uint32_t u, uint32_t micro, MmPhase phase, double frac,
                            double time_s, uint32_t group)
{
  (void)L;
  return (MmOpInfo){
    .what = MM_OP_LOOKUP, .phase = (uint8_t)phase, .unit = u, .micro = micro, .first_layer = seg->first,
    .last_layer = seg->last, .kernels = 1, .flops = seg->flops * frac, .model_flops = seg->model_flops * frac,
    .bytes = seg->bytes * frac, .time_s = time_s, .fixed_s = time_s, .overlap = MM_OVERLAP_FUSED, .fused = group,
  };
}

static Seg block_seg(Lower *L, uint32_t u0, uint32_t u1, gboolean bwd)
{
  Seg seg = {.what = MM_OP_LOOKUP};
  for (uint32_t u = u0; u < u1; u++) {
    const MmUnit *un = &L->g->units[u];
    for (uint32_t li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
      if (!bwd) {
        mm__seg_add(L, &seg, li, PART_FWD);
      } else {
        mm__seg_add(L, &seg, li, PART_BWD_IN);
        if (!L->s->blocks[un->block].frozen) mm__seg_add(L, &seg, li, PART_BWD_W);
      }
    }
  }
  return seg;
}

uint32_t mm__emit_fused_lookup_fwd(Lower *L, guint b, uint32_t u0, uint32_t u1, uint32_t micro, const Deps *in)
{
  const int64_t C = L->s->blocks[b].overlap_chunks;
  const uint32_t u = u1 - 1;
  MmCollKind kind;
  const double bytes = mm_plan_mp_exchange(L->s, L->g, b, MM_PHASE_FWD, &kind);
  const Seg seg = block_seg(L, u0, u1, FALSE);
  const double piece_s = fused_lookup_s(L, b, &seg, bytes) / (double)C;
  const uint32_t group = ++L->n_fused;
  Deps d;
  deps_copy(&d, in);
  uint32_t out = NONE;
  for (int64_t i = 0; i < C; i++) {
    const MmOpInfo info = lookup_info(L, &seg, u, micro, MM_PHASE_FWD, 1.0 / (double)C, piece_s, group);
    const uint32_t c = mm__emit(L, MM_STREAM_COMPUTE, &d, &info, NULL, MM_NO_COLL, 0, 0, 0);
    mm__deps_set_one(&d, c);
    const uint32_t first = L->n_ops;
    const Deps cd = mm__deps_one(c);
    out = mm__emit_coll(L, b, MM_STRAT_MASK(MM_STRAT_MP), kind, MM_REASON_MP, bytes / (double)C, &cd, u, micro,
                        MM_PHASE_FWD);
    mark(L, first, group, MM_OVERLAP_FUSED);
  }
  return out;
}

uint32_t mm__emit_fused_exchange_bwd(Lower *L, guint b, uint32_t micro, const Deps *d, uint32_t *first_op)
{
  const int64_t C = L->s->blocks[b].overlap_chunks;
  const uint32_t u = mm__block_last_unit(L, b);
  MmCollKind kind;
  const double bytes = mm_plan_mp_exchange(L->s, L->g, b, MM_PHASE_BWD, &kind);
  const uint32_t group = ++L->n_fused, first = L->n_ops;
  uint32_t out = NONE;
  for (int64_t i = 0; i < C; i++) /* FIFO on the comm stream: each chunk after the previous one */
    out = mm__emit_coll(L, b, MM_STRAT_MASK(MM_STRAT_MP), kind, MM_REASON_MP, bytes / (double)C, d, u, micro,
                        MM_PHASE_BWD);
  mark(L, first, group, MM_OVERLAP_FUSED);
  *first_op = first;
  return out;
}

uint32_t mm__emit_fused_lookup_bwd(Lower *L, guint b, uint32_t u0, uint32_t u1, uint32_t micro, const Deps *in,
                                   uint32_t a2a_first, uint32_t a2a_last)
{
  const int64_t C = L->s->blocks[b].overlap_chunks;
  const uint32_t per = (a2a_last - a2a_first + 1) / (uint32_t)C, group = L->info[a2a_last].fused;
  g_assert(per >= 1 && (a2a_last - a2a_first + 1) % (uint32_t)C == 0);
  MmCollKind kind;
  const double bytes = mm_plan_mp_exchange(L->s, L->g, b, MM_PHASE_BWD, &kind);
  const Seg seg = block_seg(L, u0, u1, TRUE);
  const double piece_s = fused_lookup_s(L, b, &seg, bytes) / (double)C;
  uint32_t c = NONE;
  for (int64_t i = 0; i < C; i++) {
    Deps d;
    deps_copy(&d, in);
    mm__deps_add(L, &d, a2a_first + (uint32_t)(i + 1) * per - 1);
    const MmOpInfo info = lookup_info(L, &seg, u1 - 1, micro, MM_PHASE_BWD, 1.0 / (double)C, piece_s, group);
    c = mm__emit(L, MM_STREAM_COMPUTE, &d, &info, NULL, MM_NO_COLL, 0, 0, 0);
  }
  return c;
}

/* ---- ep pipelined -------------------------------------------------------- */

uint32_t mm__emit_ep_pipelined(Lower *L, guint block, uint32_t mask, double first_bytes, double second_bytes,
                               const MmOpInfo *info, uint32_t chunks, const Deps *d, uint32_t unit, uint32_t micro,
                               MmPhase phase)
{
  const uint32_t group = ++L->n_fused;
  /* the first exchange's chunks in order on the comm stream; chunk i's experts once it is in;
   * the second exchange's chunk i once they are done (after every first-exchange chunk on the
   * FIFO comm stream) */
  g_autofree uint32_t *in = g_new(uint32_t, chunks);
  for (uint32_t i = 0; i < chunks; i++) {
    const uint32_t first = L->n_ops;
    in[i] = mm__emit_coll(L, block, mask, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, first_bytes / (double)chunks, d, unit,
                          micro, phase);
    mark(L, first, group, MM_OVERLAP_PIPELINED);
  }
  uint32_t out = NONE;
  for (uint32_t i = 0; i < chunks; i++) {
    Deps cd;
    deps_copy(&cd, d);
    mm__deps_add(L, &cd, in[i]);
    MmOpInfo pi = *info;
    pi.fused = group;
    pi.overlap = MM_OVERLAP_PIPELINED;
    const uint32_t c = mm__emit(L, MM_STREAM_COMPUTE, &cd, &pi, NULL, MM_NO_COLL, 0, 0, 0);
    const Deps od = mm__deps_one(c);
    const uint32_t first = L->n_ops;
    out = mm__emit_coll(L, block, mask, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, second_bytes / (double)chunks, &od, unit,
                        micro, phase);
    mark(L, first, group, MM_OVERLAP_PIPELINED);
    if (out == NONE) out = c;
  }
  return out;
}

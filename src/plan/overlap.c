/* overlap: TP collectives decomposed into per-step transfers and partial GEMMs (XLA collective matmul, PyTorch
 * async TP, Megatron/NeMo userbuffers), and the fused embedding + All2All of sharded tables (docs/tp-overlap.md). */
#include <math.h>
#include <string.h>

#include "internal.h"

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
 * it), plus one launch. */
double mm__piece_s(const Lower *L, uint32_t li, Part part, uint32_t pieces)
{
  const MmLayer *l = &L->g->layers[li];
  const MmPlacement *p = mm__place(L, li);
  MmPartWork w;
  mm_plan_part_work(L->s, L->g, li, (MmKernelPart)part, p, L->expert_load, &w, NULL);
  if (w.flops <= 0 && w.bytes <= 0) return 0;
  const double k = (double)pieces;
  const double wb = part == PART_BWD_W ? 0 : MIN(w.bytes, l->cost.weight_bytes * p->weight_frac);
  MmKernel kp = w.kernel;
  kp.m = MAX(1.0, kp.m / k);
  return mm_cost_kernel_s(&L->s->hw->device, &kp, w.flops / k, (w.bytes - wb) / k + wb, NULL) + L->launch_s;
}

/* The time of the local reduction async TP's GEMM + ReduceScatter ends with: @p partial
 * shards of @shard bytes read, one written (memory-bound, through the cost unit). */
double mm__reduce_s(const Lower *L, double shard, int64_t p)
{
  const MmKernel k = {MM_KERNEL_ELEMENTWISE, L->s->blocks[0].compute_dtype, 1, 1, 1, 1};
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
        else nd = mm__deps_one(copy);
        next = comm(L, block, mask, MM_COLL_PERMUTE, shard, &nd, unit, micro, phase, group, mode);
      }
      Deps cd;
      if (copy == NONE) deps_copy(&cd, d);
      else cd = mm__deps_one(copy);
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
      cd = mm__deps_one(c);
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
        cd = mm__deps_one(c);
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
    cd = mm__deps_one(c);
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

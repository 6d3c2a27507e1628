/* costs: what one device computes, reads and keeps of each layer part; MoE routing shares. */
#include <math.h>
#include <string.h>

#include "internal.h"


/* Placements of the canonical layers (identical layers share one). */
void mm__places_new(Lower *L)
{
  const MmGraph *g = L->g;
  uint32_t n = 0;
  L->place_of = g_new(uint32_t, g->n_layers + 1);
  L->canon_layer = g_new(uint32_t, g->n_layers + 1);
  for (uint32_t li = 0; li < g->n_layers; li++) {
    const uint32_t c = g->layers[li].canon;
    if (c == li) L->canon_layer[n] = li, L->place_of[li] = n++;
    else L->place_of[li] = L->place_of[c];
  }
  L->n_canon = n;
  L->place = g_new(MmPlacement, n + 1);
  for (uint32_t i = 0; i < n; i++) mm_plan_place(L->s, g, L->canon_layer[i], &L->place[i]);
}

/* Bytes per element an FP8 recipe's casts move to give one GEMM operand in the layout @part needs:
 * [recipe][part][operand A (m x k), B (k x n)]. A bf16 read is 2, an FP8 write 1; an amax pass
 * before a cast reads the operand once more (2). Forward: A = x, B = W; input gradient: A = dY,
 * B = W^T; weight gradient: A = x^T, B = dY. Delayed scaling (Transformer Engine): scales from the
 * amax history, cast and transpose fused (read 2, write 1 + 1), so x^T and dY^T come with the
 * forward and input-gradient casts, and W, W^T are cast once per iteration (CAST_ONCE: divided by
 * the micro-steps). Tensorwise (current scaling): an amax pass, then the fused cast-transpose (6),
 * weights every micro-batch. Rowwise, blockwise, MXFP8: scales local to rows or blocks (no amax
 * pass), but the transposed operand is scaled along the other axis, so it is cast again from bf16
 * (3 + 3); 128x128 weight blocks serve both layouts (blockwise W^T free). */
#define CAST_ONCE (-1.0) /* the weight's cast, amortized over the iteration */
static const double fp8_cast[MM_FP8_COUNT][MM_PART_COUNT][2] = {
  [MM_FP8_DELAYED] = {{4, 4 * CAST_ONCE}, {4, 0}, {0, 0}},
  [MM_FP8_TENSORWISE] = {{6, 6}, {6, 0}, {0, 0}},
  [MM_FP8_ROWWISE] = {{3, 3}, {3, 3}, {3, 3}},
  [MM_FP8_BLOCKWISE] = {{3, 3}, {3, 0}, {3, 3}},
  [MM_FP8_MXFP8] = {{3, 3}, {3, 3}, {3, 3}},
  [MM_FP8_ALL] = {{0, 0}, {0, 0}, {0, 0}},
};

gboolean mm_plan_fp8_recipe(const MmScenario *s, const MmBlockSetup *bs)
{
  return bs->compute_dtype == MM_DTYPE_FP8 && s->cfg->task != MM_TASK_INFERENCE && s->cfg->fp8_recipe != MM_FP8_ALL;
}

static gboolean gemm_kind(MmKernelKind k)
{
  return k == MM_KERNEL_GEMM || k == MM_KERNEL_GEMV;
}

/* Under an FP8 recipe only GEMMs run in FP8; the rest (attention, interactions, elementwise) in bf16. */
static MmDtype kernel_dtype(const MmScenario *s, const MmBlockSetup *bs, const MmLayer *l)
{
  const MmKernelKind k = l->kernel.kind;
  if (!mm_plan_fp8_recipe(s, bs) || gemm_kind(k)) return bs->compute_dtype;
  return s->hw->device.peak_flops[MM_DTYPE_BF16] > 0 ? MM_DTYPE_BF16 : MM_DTYPE_FP16;
}

double mm_plan_gemm_weight_elems(const MmScenario *s, const MmGraph *g, uint32_t li)
{
  const MmLayer *l = &g->layers[li];
  const MmBlock *b = &s->model->blocks[l->block];
  const double p = (double)l->cost.params;
  if (!gemm_kind(l->kernel.kind) || p <= 0) return 0;
  const double experts = l->expert && b->experts > 1 ? (double)b->experts : 1.0;
  return MIN(p, l->kernel.k * l->kernel.n * experts);
}

double mm_plan_gather_elem_bytes(const MmScenario *s, const MmGraph *g, uint32_t li)
{
  const MmLayer *l = &g->layers[li];
  const double e = mm_dtype_bytes(s->model->blocks[l->block].dtype), p = (double)l->cost.params;
  const double w = s->cfg->fp8_param_gather && mm_plan_fp8_recipe(s, &s->blocks[l->block]) ? mm_plan_gemm_weight_elems(s, g, li) : 0;
  if (w <= 0) return e;
  return (w * 1.0 + (p - w) * e) / p; /* the weight in FP8, a bias in the dtype */
}

/* The weight operand's casts under precision.fp8_param_gather, per micro-batch and element of the
 * device's whole weight; FALSE where nothing gathers its parameters (the recipe's table then).
 * Each gather casts its shard first (read 2, write 1: 3 / N for N shards); tensorwise scaling
 * takes its amax once per iteration over the shard (2 / N; torchao's
 * precompute_float8_dynamic_scale_for_fsdp), delayed scaling from its history. The input
 * gradient's W^T is the gathered FP8 weight transposed (read 1, write 1): under FSDP every
 * micro-batch (torchao), under ZeRO once per gather (Transformer Engine caches it). FSDP gathers
 * every micro-batch's forward and backward when it reshards, else once; ZeRO once per iteration. */
static gboolean fp8_gathered_weight(const MmScenario *s, const MmBlockSetup *bs, const MmLayer *l, MmKernelPart part,
                                    gboolean recompute, double *bytes)
{
  /* a weight of its own (a tied head's is the embedding table's, gathered in the dtype) */
  if (!s->cfg->fp8_param_gather || part == MM_PART_BWD_WEIGHT || l->cost.params <= 0) return FALSE;
  const double ms = (double)MAX(s->micro_steps, 1), amax = s->cfg->fp8_recipe == MM_FP8_TENSORWISE ? 2.0 : 0.0;
  if (bs->fsdp_shards > 1) {
    const double n = (double)bs->fsdp_shards, per_micro = s->cfg->fsdp_reshard ? 1.0 : 1.0 / ms;
    if (recompute) /* on the gathered weight; fsdp_regather_recompute gathers (and casts) once more */
      *bytes = mm_plan_regathers(s) ? 3.0 / n : 0.0;
    else
      *bytes = part == MM_PART_FWD ? 3.0 / n * per_micro + amax / (n * ms)
                                   : 2.0 + 3.0 / n * (s->cfg->fsdp_reshard ? 1.0 : 0.0);
    return TRUE;
  }
  const double z = mm_plan_zero_shards(s, l->block, l->expert);
  if (!mm_plan_zero_gathers(s, l->block) || z <= 1) return FALSE;
  *bytes = recompute ? 0.0 : part == MM_PART_FWD ? (3.0 + amax) / (z * ms) : 2.0 / ms;
  return TRUE;
}

/* The casts an FP8 recipe runs before GEMM @k of @part (layer @l): HBM bytes. */
static double fp8_cast_bytes(const MmScenario *s, const MmBlockSetup *bs, const MmLayer *l, const MmKernel *k,
                             MmKernelPart part, gboolean recompute)
{
  const double *f = fp8_cast[s->cfg->fp8_recipe][part];
  const double a = k->m * k->k * k->batch, b = k->k * k->n * k->batch;
  double fb = f[1] < 0 ? -f[1] / (double)MAX(s->micro_steps, 1) : f[1];
  if (gemm_kind(l->kernel.kind)) fp8_gathered_weight(s, bs, l, part, recompute, &fb);
  return f[0] * a + fb * b;
}

static void part_work(const MmScenario *s, const MmGraph *g, uint32_t li, MmKernelPart part, gboolean recompute,
                      const MmPlacement *p, double load, MmPartWork *out, MmCostWhy *why)
{
  const MmLayer *l = &g->layers[li];
  const MmBlockSetup *bs = &s->blocks[l->block];
  const MmCost *c = &l->cost;
  const double n = bs->samples_per_micro;
  /* an expert rank's work follows its routed tokens (hot or cold behaviour) */
  const double wf = p->load_scaled ? load * p->work_frac : p->work_frac;
  const double pf = p->weight_frac * mm_plan_experts_read(s, g, l, n);
  double flops = 0, mflops = 0, bytes = 0;
  switch (part) {
  case MM_PART_FWD:
    flops = n * c->fwd_exec_flops * wf;
    mflops = n * c->fwd_flops * wf;
    bytes = n * c->fwd_bytes * wf + c->weight_bytes * pf;
    break;
  case MM_PART_BWD_INPUT:
    flops = n * c->bwd_input_exec_flops * wf;
    mflops = n * c->bwd_input_flops * wf;
    bytes = n * c->bwd_input_bytes * wf + (flops > 0 ? c->weight_bytes * pf : 0);
    break;
  default: {
    double ge = mm_dtype_bytes(bs->grad_dtype) / mm_dtype_bytes(s->model->blocks[l->block].dtype);
    flops = n * c->bwd_weight_flops * wf;
    mflops = flops;
    bytes = n * c->bwd_weight_bytes * wf + c->weight_bytes * pf * ge; /* weight gradients written */
    break;
  }
  }
  const int64_t *deg = l->expert && mm_plan_folded(bs) ? bs->expert_degree : bs->degree; /* folded: ETP and EP */
  const double tp = (double)deg[MM_STRAT_TP], ep = (double)deg[MM_STRAT_EP];
  const MmKernelShare share = {.samples = n, .work = wf, .split = l->tp == MM_TP_REPLICATED ? 1.0 : 1.0 / tp,
                               .groups = l->expert && ep > 1 ? 1.0 / ep : 1.0};
  mm_kernel_for_part(l, part, &share, kernel_dtype(s, bs, l), &out->kernel);
  if (out->kernel.kind == MM_KERNEL_ATTENTION && out->kernel.flash) out->kernel.impl = s->cfg->attention_kernel;
  out->flops = flops;
  out->model_flops = mflops;
  out->bytes = bytes;
  out->time_s = flops > 0 || bytes > 0 ? mm_cost_kernel_s(&s->hw->device, &out->kernel, flops, bytes, why) : 0;
  out->cast_bytes = out->cast_s = 0;
  if (flops > 0 && out->kernel.dtype == MM_DTYPE_FP8 && mm_plan_fp8_recipe(s, bs)) {
    /* the recipe's casts: memory-bound elementwise kernels before the GEMM */
    static const MmKernel cast = {.kind = MM_KERNEL_ELEMENTWISE, .dtype = MM_DTYPE_BF16, .m = 1,
                                  .n = 1, .k = 1, .batch = 1};
    out->cast_bytes = fp8_cast_bytes(s, bs, l, &out->kernel, part, recompute);
    out->cast_s = out->cast_bytes > 0 ? mm_cost_kernel_s(&s->hw->device, &cast, 0, out->cast_bytes, NULL) : 0;
    out->bytes += out->cast_bytes;
    out->time_s += out->cast_s;
  }
}

void mm_plan_part_work(const MmScenario *s, const MmGraph *g, uint32_t li, MmKernelPart part, const MmPlacement *p,
                       double load, MmPartWork *out, MmCostWhy *why)
{
  part_work(s, g, li, part, FALSE, p, load, out, why);
}

void mm_plan_recompute_work(const MmScenario *s, const MmGraph *g, uint32_t li, const MmPlacement *p, double load,
                            MmPartWork *out, MmCostWhy *why)
{
  part_work(s, g, li, MM_PART_FWD, TRUE, p, load, out, why);
}

gboolean mm_plan_recompute_differs(const MmScenario *s, const MmGraph *g, uint32_t li)
{
  const MmLayer *l = &g->layers[li];
  const MmBlockSetup *bs = &s->blocks[l->block];
  double fwd = 0, rec = 0;
  return s->cfg->fp8_param_gather && mm_plan_fp8_recipe(s, bs) && gemm_kind(l->kernel.kind) &&
         fp8_gathered_weight(s, bs, l, MM_PART_FWD, FALSE, &fwd) && fp8_gathered_weight(s, bs, l, MM_PART_FWD, TRUE, &rec) &&
         fwd != rec;
}

void mm__part_work(const Lower *L, uint32_t li, Part part, MmPartWork *w)
{
  if (part == PART_RECOMPUTE || (part == PART_FWD && L->rec_mode && L->parts_rec))
    mm_plan_recompute_work(L->s, L->g, li, mm__place(L, li), L->expert_load, w, NULL);
  else
    mm_plan_part_work(L->s, L->g, li, (MmKernelPart)part, mm__place(L, li), L->expert_load, w, NULL);
}

void mm__part_cost(const Lower *L, uint32_t li, Part part, PartCost *pc)
{
  MmPartWork w;
  mm__part_work(L, li, part, &w);
  *pc = (PartCost){w.flops, w.model_flops, w.bytes, 0, L->g->layers[li].cls == MM_LAYER_LOOKUP};
  if (w.flops > 0 || w.bytes > 0) pc->time_s = w.time_s + L->launch_s;
}

void mm__seg_add(Lower *L, Seg *seg, uint32_t li, Part part)
{
  const PartCost *pc = mm__pc(L, li, part);
  if (pc->time_s <= 0) return;
  if (seg->kernels == 0) seg->first = li;
  seg->last = li;
  seg->kernels++;
  seg->flops += pc->flops;
  seg->model_flops += pc->model_flops;
  seg->bytes += pc->bytes;
  seg->time_s += pc->time_s;
  if (pc->lookup) seg->what = MM_OP_LOOKUP;
}

void mm__seg_add_frac(Lower *L, Seg *seg, uint32_t li, Part part, double frac, uint32_t kernels)
{
  const PartCost *pc = mm__pc(L, li, part);
  if (pc->time_s <= 0 || frac <= 0 || kernels == 0) return;
  if (seg->kernels == 0) seg->first = li;
  seg->last = li;
  seg->kernels += kernels;
  seg->flops += frac * pc->flops;
  seg->model_flops += frac * pc->model_flops;
  seg->bytes += frac * pc->bytes;
  seg->time_s += frac * (pc->time_s - L->launch_s) + (double)kernels * L->launch_s;
  if (pc->lookup) seg->what = MM_OP_LOOKUP;
}

/* ---- MoE routing ------------------------------------------------------- */

/* MoE: the experts of a layer are spread over the ep group (or, without one, over the TP
 * group, as MAD-Max models it, unless "experts": "sharded" splits each over the TP ranks:
 * no group, mask 0); tokens are dispatched to their experts before the first expert layer
 * and combined after the last, by All2All. A transformer MoE layer does
 * this per layer; an MLP MoE (DLRM) once around the whole expert stack. */
static uint32_t moe_mask(const MmScenario *s, guint block)
{
  const MmBlockSetup *bs = &s->blocks[block];
  if (mm_plan_folded(bs)) return MM_MASK_EXPERTS | MASK(MM_STRAT_EP); /* whole experts over EP, sliced by ETP */
  if (bs->degree[MM_STRAT_EP] > 1) return MASK(MM_STRAT_EP);
  return bs->experts_sharded ? 0u : MASK(MM_STRAT_TP);
}

/* Share of its experts' weights the busiest device of an expert group reads in one pass.
 * Only experts some token is routed to are read: with T tokens in the group (every EP rank's
 * micro-batch), each sent to k of E experts uniformly, an expert is touched with probability
 * q = 1 - (1 - k/E)^T. Each of the g devices the experts are spread over holds m = E/g; its
 * count is Binomial(m, q), and the step waits for the busiest: E[max] = sum_j P(max > j) with
 * P(max > 0) = 1 (some expert is always touched) and P(max > j) = 1 - F(j)^g above (devices
 * independent). 1 in training (q = 1); at decode batch 1 about k/E of a device holding all
 * experts, one whole expert on each of 8 devices holding one. */
double mm_plan_experts_read(const MmScenario *s, const MmGraph *gr, const MmLayer *l, double samples)
{
  const MmBlock *b = &s->model->blocks[l->block];
  if (!l->expert || b->experts <= 0 || b->top_k <= 0) return 1.0;
  const MmBlockSetup *bs = &s->blocks[l->block];
  const double E = (double)b->experts, g = (double)mm_plan_mask_degree(bs, moe_mask(s, l->block));
  /* folded: the tokens of the EP x ETP devices, each holding 1 / tp of its attention group's */
  const double group = mm_plan_folded(bs) ? (double)(bs->expert_degree[MM_STRAT_EP] * bs->expert_degree[MM_STRAT_TP]) /
                                                 (double)bs->degree[MM_STRAT_TP]
                                           : (double)bs->degree[MM_STRAT_EP];
  const double T = samples * (b->kind == MM_BLOCK_TRANSFORMER ? gr->tokens_per_sample : 1.0) * group;
  const double q = 1.0 - pow(1.0 - MIN(1.0, (double)b->top_k / E), T);
  const double m = MAX(1.0, ceil(E / g));
  if (q >= 1.0 - 1e-9 || q <= 0) return 1.0; /* every expert read (or no tokens: a degenerate pass) */
  /* binomial terms in log space: no underflow for thousands of experts per device */
  const double lq = log(q), l1q = log1p(-q), lm = lgamma(m + 1.0);
  double F = 0, emax = 0;
  for (double j = 0; j < m; j++) {
    F = MIN(1.0, F + exp(lm - lgamma(j + 1.0) - lgamma(m - j + 1.0) + j * lq + (m - j) * l1q));
    emax += j == 0 ? 1.0 : 1.0 - pow(F, g);
  }
  return MIN(1.0, emax / m);
}


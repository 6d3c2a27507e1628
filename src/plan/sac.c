/* sac: torchtitan's per-op selective activation checkpointing: which kernels of a transformer layer it saves and recomputes. */
#include "internal.h"

/* The matmuls (aten.mm calls) layer @l runs in its forward, in call order: each one's share of the
 * layer's FLOPs and its output as a multiple of the layer's output. torchtitan's Llama and DeepSeek
 * modules (torchtitan/models/llama3/model.py, deepseek_v3/model.py) project queries, keys and values
 * with separate Linear modules (wq, wk, wv; MLA: wq or wq_a then wq_b, wkv_a, wkv_b), run the FFN as
 * w2(silu(w1(x)) * w3(x)) (w1 before w3), and attention and FFN outputs through one Linear each.
 * Returns the count (0: the layer runs no counted matmul). */
static uint32_t layer_mms(const MmBlock *b, const MmLayer *l, double flops[4], double outs[4])
{
  if (l->cls != MM_LAYER_GEMM) return 0;
  const double a = (double)b->heads, dk = (double)b->head_dim, dv = (double)b->v_head_dim;
  const double g = (double)b->kv_heads, h = (double)b->hidden;
  switch (l->role) {
  case MM_ROLE_QKV: {
    if (b->kv_lora_rank == 0) {
      const double n = a * dk + g * (dk + dv), w[3] = {a * dk, g * dk, g * dv};
      for (int i = 0; i < 3; i++) flops[i] = outs[i] = w[i] / n;
      return 3;
    }
    /* MLA (graph.c, qkv_projection): the four (three without a query latent) matmuls; the output
     * of the layer is the per-head queries, keys and values, a x (2 dk + dv) per token */
    const double ql = (double)b->q_lora_rank, kl = (double)b->kv_lora_rank, r = (double)b->rope_head_dim;
    const double out = a * (2.0 * dk + dv);
    double fw[4], ow[4];
    uint32_t n = 0;
    if (ql > 0) {
      fw[n] = h * ql, ow[n++] = ql;
      fw[n] = ql * a * dk, ow[n++] = a * dk;
    } else {
      fw[n] = h * a * dk, ow[n++] = a * dk;
    }
    fw[n] = h * (kl + r), ow[n++] = kl + r;
    fw[n] = kl * a * (dk - r + dv), ow[n++] = a * (dk - r + dv);
    double total = 0;
    for (uint32_t i = 0; i < n; i++) total += fw[i];
    for (uint32_t i = 0; i < n; i++) flops[i] = fw[i] / total, outs[i] = ow[i] / out;
    return n;
  }
  case MM_ROLE_FFN_UP:
    if (b->ffn_kind == MM_FFN_SWIGLU || b->ffn_kind == MM_FFN_GEGLU) {
      flops[0] = flops[1] = outs[0] = outs[1] = 0.5; /* w1, then w3 */
      return 2;
    }
    flops[0] = outs[0] = 1.0;
    return 1;
  default:
    flops[0] = outs[0] = 1.0;
    return 1;
  }
}

void mm__sac_layer(const MmScenario *s, const MmGraph *g, uint32_t li, uint32_t *mm_count, MmSacLayer *out)
{
  const MmLayer *l = &g->layers[li];
  const MmBlock *b = &s->model->blocks[l->block];
  const MmBlockSetup *bs = &s->blocks[l->block];
  *out = (MmSacLayer){0};
  MmPlacement p;
  mm_plan_place(s, g, li, &p);
  /* reduce-scatters and all-to-alls are in the save list, and the recompute does not run them
   * again: a reduce-scatter's output (the rank's 1 / degree of its input) and what an all-to-all
   * delivers (as much as the rank sends) stay on the device */
  for (uint32_t i = 0; i < p.n_colls; i++) {
    const MmPlaceColl *c = &p.colls[i];
    if (c->fwd == MM_COLL_REDUCE_SCATTER) out->saved_bytes += c->fwd_bytes / (double)mm_plan_mask_degree(bs, c->mask);
    if (c->fwd == MM_COLL_ALL_TO_ALL) out->saved_bytes += c->fwd_bytes;
  }
  if (l->role == MM_ROLE_ATTN_CORE) {
    /* SDPA / flash attention is in the save list: its output and fp32 log-sum-exp are kept */
    out->saved_bytes += bs->samples_per_micro * (l->cost.out_bytes + l->kernel.m * l->kernel.batch * 4.0) * p.act_frac;
    return;
  }
  double flops[4], outs[4];
  const uint32_t n = layer_mms(b, l, flops, outs);
  if (n == 0 || l->expert || l->role == MM_ROLE_ROUTER) {
    /* elementwise kernels are not in the save list; routed experts run grouped GEMMs
     * (torch._grouped_mm), which it does not name either; the router's gate matmul is forced to
     * recompute without counting (per_op_sac_force_recompute_mm_shapes_by_fqns, default
     * ["moe.router.gate"]) */
    out->recompute_frac = 1.0;
    out->kernels = 1;
    return;
  }
  /* a row-parallel matmul's output is the whole partial sum on every TP rank (saved before its
   * reduction); a column-parallel one's is the rank's slice, as its work */
  const int64_t *deg = bs->degree;
  const double share = p.work_frac * (l->tp == MM_TP_ROW ? (double)deg[MM_STRAT_TP] : 1.0);
  for (uint32_t i = 0; i < n; i++) {
    /* torchtitan's _custom_policy: the counter goes up before the test, so the 1st, 3rd, ... mm
     * of the layer are saved and the 2nd, 4th, ... recomputed */
    if (++*mm_count % 2 == 0) {
      out->recompute_frac += flops[i];
      out->kernels++;
    } else {
      out->saved_bytes += bs->samples_per_micro * l->cost.out_bytes * outs[i] * share;
    }
  }
}

gboolean mm__sac_unit(const MmScenario *s, const MmGraph *g, uint32_t u)
{
  return s->cfg->recompute == MM_RECOMPUTE_OP_SELECTIVE &&
         s->model->blocks[g->units[u].block].kind == MM_BLOCK_TRANSFORMER;
}

/* memory: per-device bytes of weights, gradients, optimizer states, activations and comm buffers. */
#include <math.h>
#include <string.h>

#include "internal.h"

void mm_memory_free(MmMemory *m)
{
  if (!m) return;
  g_free(m->stage_bytes);
  g_free(m->stage_inflight);
  g_free(m->blocks);
  g_free(m);
}

double mm_plan_optimizer_bytes(const MmOptimizer *o, const MmBlock *b)
{
  double st = mm_dtype_bytes(o->state_dtype);
  double bytes = 0;
  switch (o->kind) {
  case MM_OPT_ADAM: bytes = 2.0 * st; break;
  case MM_OPT_SGD: bytes = o->momentum ? st : 0.0; break;
  case MM_OPT_ADAGRAD: bytes = st; break;
  case MM_OPT_ROWWISE_ADAGRAD: bytes = b->kind == MM_BLOCK_EMBEDDING_BAG ? st / (double)b->dim : st; break;
  case MM_OPT_LAMB: bytes = 2.0 * st; break;
  case MM_OPT_ADAFACTOR: {
    /* a row and a column vector per r x c matrix: (r + c) / (r c) per parameter, ~2 / width */
    const double width = (double)MAX(1, b->kind == MM_BLOCK_EMBEDDING_BAG ? b->dim : b->hidden > 0 ? b->hidden : b->width);
    bytes = 2.0 * st / width + (o->momentum ? st : 0.0);
    break;
  }
  }
  if (o->master_weights && mm_dtype_bytes(b->dtype) < 4.0) bytes += 4.0;
  return bytes;
}

void mm_plan_optimizer_step_add(double *bytes, const MmOptimizer *o, const MmBlock *b, double params, double e,
                                double ge)
{
  *bytes += params * (2.0 * e + ge + 2.0 * mm_plan_optimizer_bytes(o, b));
  /* LAMB reads the weights and the fp32 update again for their norms; Adafactor the gradient for its
   * row and column means */
  if (o->kind == MM_OPT_LAMB) *bytes += params * (e + 4.0);
  if (o->kind == MM_OPT_ADAFACTOR) *bytes += params * ge;
}


/* What one unit needs on one device (micro-batch quantities for one micro-batch). */
typedef struct {
  MmMemoryParts parts;  /* weights, gradients, optimizer; activations: kept per micro-batch */
  double transient;     /* full recompute: rebuilt during its backward; inference: its working set */
  double params_local;  /* parameters after TP/MP/EP, before FSDP */
  double gathered_bytes; /* those FSDP gathers, in bytes (per_tensor_list: without the persistent tensors;
                          * fp8_param_gather: FP8 weights at 1 byte) */
  double coll_buf;      /* largest buffer of a collective at a layer boundary (TP, SP, MoE, CP, Ulysses) */
  double a2a;           /* MP exchange buffers */
  double host;          /* optimizer offload: states and master weights in host memory */
} UnitMem;

static void unit_memory(const MmScenario *s, const MmGraph *g, guint u, guint ft, uint8_t recompute, UnitMem *um)
{
  const MmUnit *un = &g->units[u];
  const guint bi = un->block;
  const MmBlock *b = &s->model->blocks[bi];
  const MmBlockSetup *bs = &s->blocks[bi];
  const MmParallelConfig *c = s->cfg;
  const gboolean training = c->task != MM_TASK_INFERENCE;
  const double e = mm_dtype_bytes(b->dtype), ge = mm_dtype_bytes(bs->grad_dtype);
  const double samples = bs->samples_per_micro;
  const gboolean trained = training && !bs->frozen;
  /* ZeRO: optimizer states (stage 1) and gradients (stage 2) sharded over the replicas */
  double act = 0, in = 0, peak_io = 0, dropped = 0;
  /* skewed routing: the busiest ep rank keeps the expert activations of the tokens it computes */
  const double hot = mm_plan_hot_expert_load(s);
  memset(um, 0, sizeof *um);
  for (guint li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
    const MmLayer *l = &g->layers[li];
    MmPlacement p;
    mm_plan_place(s, g, li, &p);
    const double pf = p.param_frac, af = p.act_frac;
    double params = (double)l->cost.params * pf;
    double z = mm_plan_zero_shards(s, bi, l->expert);
    um->params_local += params * (double)bs->fsdp_shards;
    um->parts.weights += params * e;
    /* per_tensor_list FSDP: tensors under the persistence threshold are held whole, never gathered */
    const double persist = mm__persistent_elems(s, g, li, pf);
    um->gathered_bytes += (params * (double)bs->fsdp_shards - persist) * mm_plan_gather_elem_bytes(s, g, li);
    um->parts.weights += persist * (1.0 - 1.0 / (double)bs->fsdp_shards) * e;
    /* delayed scaling keeps each GEMM weight's FP8 copy and its transpose for the iteration */
    if (trained && c->fp8_recipe == MM_FP8_DELAYED && mm_plan_fp8_recipe(s, bs) &&
        (l->kernel.kind == MM_KERNEL_GEMM || l->kernel.kind == MM_KERNEL_GEMV))
      um->parts.weights += params * 2.0;
    if (trained) {
      double grads = params * ge / (bs->zero >= 2 ? z : 1.0);
      if (b->kind == MM_BLOCK_EMBEDDING_BAG) {
        /* fused backward + optimizer (FBGEMM TBE, as TorchRec and ZionEX): rows are updated in
         * place; only the gradient of the pooled outputs is materialized */
        double pooled = samples * l->cost.out_bytes / e * ge * pf * (double)bs->fsdp_shards;
        grads = MIN(grads, pooled);
      }
      um->parts.gradients += grads;
      const double opt = params * mm_plan_optimizer_bytes(bs->optimizer, b) / z;
      /* offload: the states and master weights live in host memory (ZeRO-Offload) */
      if (mm_plan_offloaded(s, bi)) um->host += opt;
      else um->parts.optimizer += opt;
    }
    const double load = p.load_scaled ? hot : 1.0;
    act += samples * mm_plan_kept_bytes(l, &p) * load;
    dropped += samples * l->cost.recompute_bytes * af * load;
    if (li == un->first_layer) in = samples * l->cost.act_bytes * af * load;
    peak_io = MAX(peak_io, samples * (l->cost.act_bytes + l->cost.out_bytes) * af * load);
    /* the collectives the lowering emits around this layer need their buffers */
    for (uint32_t i = 0; i < p.n_colls; i++)
      um->coll_buf = MAX(um->coll_buf, MAX(p.colls[i].fwd_bytes, p.colls[i].bwd_bytes));
    um->coll_buf = MAX(um->coll_buf, p.ring_bwd_bytes);
  }
  if (training && bi >= ft) {
    if (c->recompute == MM_RECOMPUTE_FULL && recompute == MM__RECOMPUTE_NONE) {
      um->parts.activations = act; /* block method: past the recomputed layers of its chunk */
    } else if (c->recompute == MM_RECOMPUTE_FULL) {
      /* its group's input kept (uniform groups of N layers: rebuilt N layers at a time) */
      const double group = c->recompute_method == MM_RECOMPUTE_UNIFORM ? (double)MAX(c->recompute_num_layers, 1) : 1.0;
      um->parts.activations = recompute == MM__RECOMPUTE_KEEP_INPUT ? in : 0;
      um->transient = group * act - in;
    } else if (mm__sac_unit(s, g, u)) {
      /* op_selective: the unit's input and the outputs the policy saves; the rest is rebuilt
       * during its backward */
      double kept = in;
      uint32_t mms = 0;
      for (guint li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
        MmSacLayer sl;
        mm__sac_layer(s, g, li, &mms, &sl);
        kept += sl.saved_bytes;
      }
      um->parts.activations = MIN(kept, act);
      um->transient = act - um->parts.activations;
    } else if (c->recompute == MM_RECOMPUTE_SELECTIVE) {
      um->parts.activations = act - dropped;
      um->transient = dropped;
    } else {
      um->parts.activations = act;
    }
  } else if (!training) {
    um->transient = peak_io;
  }
  if (bs->degree[MM_STRAT_MP] > 1) {
    const MmCost *cc = &g->block_cost[bi];
    MmCollKind kind;
    double send = mm_plan_mp_exchange(s, g, bi, MM_PHASE_FWD, &kind);
    double recv = (double)s->micro_batch * (double)s->dp_ref / (double)s->devices * cc->out_bytes;
    um->a2a = (trained ? 2.0 : 1.0) * (send + recv);
  }
}

/* KV-cache bytes of transformer unit @u on one device while serving: every resident
 * sequence's context (kv heads split by TP; MLA's latent is whole on every TP rank). */
static double unit_kv_cache(const MmScenario *s, const MmGraph *g, guint u)
{
  const MmServing *sv = &s->cfg->serving;
  const MmUnit *un = &g->units[u];
  const MmBlock *b = &s->model->blocks[un->block];
  const MmBlockSetup *bs = &s->blocks[un->block];
  if (!sv->present || b->kind != MM_BLOCK_TRANSFORMER) return 0;
  MmPlacement p;
  mm_plan_place(s, g, un->first_layer, &p); /* kv heads split by TP; MLA's latent is whole */
  double frac = p.kv_frac;
  double sequences = bs->samples_per_micro * (double)s->micro_steps;
  double tokens = (double)(sv->prompt_tokens + sv->output_tokens);
  const int64_t w = mm_block_layer_window(b, un->index); /* a sliding-window layer keeps its window */
  if (w > 0) tokens = MIN(tokens, (double)w);
  return sequences * tokens * mm_graph_kv_bytes_per_token(b) * frac;
}

/* The peak number of micro-batches whose activations chunk-local index c holds, weighted
 * by @chunk_act, over stage @st's schedule. */
static double stage_activations(const MmScenario *s, guint st, const double *chunk_act, double *inflight0)
{
  const guint p = (guint)s->pp, v = (guint)s->vstages, m = (guint)s->micro_steps;
  g_autofree MmPipeStep *steps = g_new(MmPipeStep, 3 * (gsize)m * v + 1);
  guint n = mm_pipe_schedule(s->cfg->pipeline.schedule, p, v, m, st, TRUE, steps);
  g_autofree int64_t *live = g_new0(int64_t, v + 1);
  double now = 0, peak = 0;
  int64_t peak0 = 0;
  for (guint i = 0; i < n; i++) {
    /* zb_h1: a micro-batch's activations count until its input-gradient pass, as 1F1B's until its
     * backward (Qi et al. Sec. 3.1 bound ZB-H1's peak by 1F1B's: the inputs its deferred weight
     * gradients still need are a fraction of a layer's activations) */
    if (steps[i].bwd == MM_PIPE_W) continue;
    const guint c = steps[i].chunk, k = mm_pipe_stage_chunk(s, st, c);
    live[c] += steps[i].bwd ? -1 : 1;
    now += (steps[i].bwd ? -1.0 : 1.0) * chunk_act[k];
    if (now > peak) peak = now;
    peak0 = MAX(peak0, live[0]);
  }
  *inflight0 = (double)peak0;
  return peak;
}

MmMemory *mm_memory_new(const MmScenario *s, const MmGraph *g)
{
  g_return_val_if_fail(s && g && g->model == s->model, NULL);
  const MmModel *m = s->model;
  const MmParallelConfig *c = s->cfg;
  const gboolean training = c->task != MM_TASK_INFERENCE;
  const guint ft = mm_plan_first_trained(s), p = (guint)s->pp, K = (guint)(s->pp * s->vstages);
  g_autofree uint32_t *chunk = mm_pipe_unit_chunks(s, g);
  g_autofree uint8_t *rec = mm__recompute_units(s, g, chunk);
  g_autofree uint8_t *off = mm__offload_units(s, g, chunk); /* activations on the host, not the device */
  g_autofree UnitMem *um = g_new(UnitMem, g->n_units + 1); /* each set below */
  g_autofree double *chunk_act = g_new0(double, K + 1);
  for (guint u = 0; u < g->n_units; u++) {
    const MmUnit *un = &g->units[u];
    if (u > 0 && g->layers[un->first_layer].canon != un->first_layer && rec[u] == rec[u - 1])
      um[u] = um[u - 1]; /* identical unit */
    else unit_memory(s, g, u, ft, rec[u], &um[u]);
    if (!off[u]) chunk_act[chunk[u]] += um[u].parts.activations;
  }

  MmMemory *mem = g_new0(MmMemory, 1);
  mem->n_blocks = m->n_blocks;
  mem->blocks = g_new0(MmMemoryParts, m->n_blocks);
  mem->n_stages = p;
  mem->stage_bytes = g_new0(double, p);
  mem->stage_inflight = g_new0(double, p);
  mem->kv_tokens = c->serving.present ? (double)(c->serving.prompt_tokens + c->serving.output_tokens) : 0;
  g_autofree MmMemoryParts *blocks = g_new0(MmMemoryParts, m->n_blocks);
  for (guint st = 0; st < p; st++) {
    memset(blocks, 0, sizeof(MmMemoryParts) * m->n_blocks);
    MmMemoryParts tot = {0};
    double transient = 0, fsdp_gather = 0, fsdp_held = 0, fsdp_grad = 0, coll_buf = 0, a2a_buf = 0, ddp_bucket = 0,
           kept = 0, offload_layer = 0, host = 0;
    int64_t offloaded = 0;
    for (guint u = 0; u < g->n_units; u++) {
      if (mm_pipe_chunk_stage(s, chunk[u]) != st) continue;
      const guint bi = g->units[u].block;
      const MmBlockSetup *bs = &s->blocks[bi];
      MmMemoryParts *bp = &blocks[bi];
      bp->weights += um[u].parts.weights;
      bp->gradients += um[u].parts.gradients;
      bp->optimizer += um[u].parts.optimizer;
      host += um[u].host;
      if (off[u]) {
        offloaded++;
        offload_layer = MAX(offload_layer, um[u].parts.activations);
      } else {
        bp->activations += um[u].parts.activations;
        kept += um[u].parts.activations;
      }
      bp->kv_cache += unit_kv_cache(s, g, u);
      transient = MAX(transient, um[u].transient);
      if (bs->fsdp_shards > 1) {
        fsdp_gather = MAX(fsdp_gather, (double)(1 + c->fsdp_prefetch) * um[u].gathered_bytes);
        fsdp_held += um[u].gathered_bytes; /* without resharding: every layer stays gathered */
        if (training && !bs->frozen) fsdp_grad = MAX(fsdp_grad, um[u].params_local * mm_dtype_bytes(bs->grad_dtype));
      }
      coll_buf = MAX(coll_buf, um[u].coll_buf);
      a2a_buf = MAX(a2a_buf, um[u].a2a);
    }
    double inflight0 = 1;
    double acts = p > 1 && training ? stage_activations(s, st, chunk_act, &inflight0) : kept;
    for (guint bi = 0; bi < m->n_blocks; bi++) {
      const MmBlockSetup *bs = &s->blocks[bi];
      if (training && !bs->frozen && bs->degree[MM_STRAT_DDP] > 1)
        ddp_bucket = MAX(ddp_bucket, MIN(2.0 * c->ddp_bucket_bytes, blocks[bi].gradients));
      if (kept > 0) blocks[bi].activations *= acts / kept; /* in-flight micro-batches, pro rata */
      tot.weights += blocks[bi].weights;
      tot.gradients += blocks[bi].gradients;
      tot.optimizer += blocks[bi].optimizer;
      tot.activations += blocks[bi].activations;
      tot.kv_cache += blocks[bi].kv_cache;
    }
    /* offload keeps two offloaded layers' activations on the device, one being copied while the next
     * is computed (Transformer Engine's double-buffered handler), but only while the first layers of
     * a chunk run: their forward comes before, their backward after, the layers the micro-batch keeps
     * on the device. The running micro-batch holds the larger of the two: the peak is the kept
     * activations plus what the buffer holds beyond one micro-batch's kept layers */
    transient += MAX(0.0, (double)MIN(offloaded, (int64_t)2) * offload_layer - kept);
    tot.activations += transient;
    if (!c->fsdp_reshard) fsdp_gather = MAX(fsdp_gather, fsdp_held);
    tot.comm_buffers = fsdp_gather + fsdp_grad + ddp_bucket + coll_buf + a2a_buf;
    const double bytes = mm_memory_parts_sum(&tot);
    mem->stage_bytes[st] = bytes;
    mem->stage_inflight[st] = inflight0;
    mem->host_bytes = MAX(mem->host_bytes, host);
    if (st == 0 || bytes > mem->per_device_bytes) {
      mem->stage = st;
      mem->total = tot;
      mem->per_device_bytes = bytes;
      mem->transient_activations = transient;
      memcpy(mem->blocks, blocks, sizeof(MmMemoryParts) * m->n_blocks);
    }
  }
  mem->capacity_bytes = s->hw->device.hbm_bytes;
  mem->fits = mem->per_device_bytes <= mem->capacity_bytes;
  return mem;
}

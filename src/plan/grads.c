/* grads: gradient synchronization (FSDP, DDP buckets, sparse), the tied embedding and the optimizer step. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- gradient synchronization ------------------------------------------ */

gboolean mm__block_reads(const MmBlock *c, guint b)
{
  for (guint i = 0; i < c->n_inputs; i++)
    if (c->inputs[i] == b) return TRUE;
  return FALSE;
}

gboolean mm__mp_block(const Lower *L, guint b)
{
  return L->m->blocks[b].kind == MM_BLOCK_EMBEDDING_BAG && L->s->blocks[b].degree[MM_STRAT_MP] > 1;
}

/* Last unit of block @b. */
uint32_t mm__block_last_unit(const Lower *L, guint b)
{
  return L->g->block_first_unit[b] + L->g->block_units[b] - 1;
}



/* ---- optimizer offload ------------------------------------------------- */

/* The part of @dense and @expert (non-expert and expert parameters of block @b on this device,
 * before FSDP) whose update this rank owns: its ZeRO shard of its FSDP shard. */
static double owned_params(const Lower *L, guint b, double dense, double expert)
{
  return (dense / mm_plan_zero_shards(L->s, b, FALSE) + expert / mm_plan_zero_shards(L->s, b, TRUE)) /
         (double)L->s->blocks[b].fsdp_shards;
}

/* Gradients go to the host in backward (@phase bwd), updated weights come back after the CPU step
 * (optimizer), on the host stream. */
static uint32_t emit_host_copy(Lower *L, double bytes, const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase)
{
  if (bytes <= 0) return NONE;
  return mm__emit_host_copy(L, MM_STREAM_HOST, MM_OP_HOST_COPY, phase, unit, micro, bytes, d);
}

/* Offload: this rank's shard of gradients (@dense, @expert: block @b's gradient bytes on this
 * device before FSDP) goes to the host once its synchronization (@d) is done, as ZeRO-Offload
 * overlaps the copies with the rest of the backward. */
static void offload_grads(Lower *L, guint b, double dense, double expert, const Deps *d, uint32_t unit, uint32_t micro)
{
  if (!mm_plan_offloaded(L->s, b)) return;
  emit_host_copy(L, owned_params(L, b, dense, expert), d, unit, micro, MM_PHASE_BWD);
}

/* Emits the backward exchange of MP tables once every trained consumer has its input gradient. */
void mm__hoist_mp_backward(Lower *L, IterState *st, uint32_t micro)
{
  const MmModel *m = L->m;
  const uint32_t *fwd = &st->fwd_out[micro * m->n_blocks];
  for (guint e = L->first_trained; e < m->n_blocks; e++) {
    if (!mm__mp_block(L, e) || st->mp_bwd[e] != NONE) continue;
    Deps d = {.n = 0};
    gboolean ready = TRUE, any = FALSE;
    for (guint c = e + 1; c < m->n_blocks; c++) {
      if (!mm__block_reads(&m->blocks[c], e)) continue;
      any = TRUE;
      if (!st->bwd_done[c]) ready = FALSE;
      else mm__deps_add(L, &d, st->bwd_out[c]);
    }
    if (!ready) continue;
    if (!any) mm__deps_add(L, &d, fwd[e]);
    if (mm__mp_fused(L, e)) st->mp_bwd[e] = mm__emit_fused_exchange_bwd(L, e, micro, &d, &st->mp_bwd_first[e]);
    else st->mp_bwd[e] = mm__emit_mp_exchange(L, mm__block_last_unit(L, e), micro, MM_PHASE_BWD, &d);
  }
}

/* All-reduce (ZeRO-2: reduce-scatter) of a gradient bucket; slot 0 non-expert, 1 expert. */
void mm__flush_bucket(Lower *L, IterState *st, guint b, int slot, uint32_t micro)
{
  const guint i = 2 * b + (guint)slot;
  if (st->bucket_bytes[i] <= 0) return;
  Deps d = mm__deps_one(st->bucket_dep[i]);
  MmCollKind kind = L->s->blocks[b].zero >= 2 ? MM_COLL_REDUCE_SCATTER : MM_COLL_ALL_REDUCE;
  uint32_t op = mm__emit_coll(L, b, mm_plan_grad_replicas(L->s, b, slot == 1), kind, MM_REASON_DDP,
                              st->bucket_bytes[i], &d, NONE, micro, MM_PHASE_BWD);
  Deps od = mm__deps_one(op == NONE ? st->bucket_dep[i] : op);
  offload_grads(L, b, slot == 0 ? st->bucket_bytes[i] : 0, slot == 1 ? st->bucket_bytes[i] : 0, &od, MM_NO_UNIT, micro);
  st->bucket_bytes[i] = 0;
}

/* The ddp level of a block that asked for sparse gradient synchronization, or -1. */
static int sparse_level(const Lower *L, guint b)
{
  const MmBlockSetup *bs = &L->s->blocks[b];
  int found = -1, ddp_levels = 0;
  for (guint i = 0; i < bs->n_levels; i++) {
    if (bs->levels[i].strategy != MM_STRAT_DDP || bs->levels[i].degree <= 1) continue;
    ddp_levels++;
    if (bs->levels[i].grad_sync != MM_GRAD_SYNC_DENSE) found = (int)i;
  }
  return ddp_levels == 1 ? found : -1; /* one data-parallel level: its group exchanges the rows */
}
static MmSparseGrad sparse_grad(const Lower *L, guint b, int level)
{
  const MmBlock *bk = &L->m->blocks[b];
  const MmBlockSetup *bs = &L->s->blocks[b];
  double rows, lookups, dim;
  if (bk->kind == MM_BLOCK_EMBEDDING_BAG) {
    rows = (double)bk->rows;
    dim = (double)bk->dim;
    lookups = bs->samples_per_micro * (double)L->s->micro_steps * bk->pooling; /* per table */
  } else {
    rows = (double)bk->vocab;
    dim = (double)bk->hidden;
    lookups = bs->samples_per_micro * (double)L->s->micro_steps * (double)bk->seq_len;
  }
  double p = (double)bs->levels[level].degree;
  double local = rows * -expm1(-lookups / rows), uni = rows * -expm1(-p * lookups / rows);
  double overlap = p > 1 && local > 0 ? CLAMP((p * local - uni) / ((p - 1.0) * local), 0.0, 1.0) : 1.0;
  double tables = bk->kind == MM_BLOCK_EMBEDDING_BAG ? (double)bk->tables * bs->mp_fraction : 1.0;
  MmSparseGrad g = {
    .rows = (int64_t)(rows * tables), .dim = (int64_t)dim, .elem_bytes = mm_dtype_bytes(bs->grad_dtype),
    .touched_frac = local / rows, .overlap = overlap, .degree = bs->levels[level].degree,
    .stride = bs->stride[level],
  };
  return g;
}

/* Sparse synchronization of an embedding gradient: all-gather of the (padded) local row
 * indices, de-duplication on the GPU, AllReduce of the union's rows; host staging folds
 * the CPU de-duplication into the exchange. */
static uint32_t emit_sparse_sync(Lower *L, guint b, int level, uint32_t u, uint32_t micro, uint32_t weights_done)
{
  const MmBlockSetup *bs = &L->s->blocks[b];
  MmSparseGrad g = sparse_grad(L, b, level);
  MmSparseCost sc;
  MmGradSync want = bs->levels[level].grad_sync;
  if (want == MM_GRAD_SYNC_AUTO) mm_comm_sparse_best(L->hw, L->links, &g, &sc);
  else mm_comm_sparse_cost(L->hw, L->links, &g, want == MM_GRAD_SYNC_HOST ? MM_SYNC_HOST : MM_SYNC_SPARSE, &sc);
  Deps d = mm__deps_one(weights_done);
  if (sc.method == MM_SYNC_DENSE)
    return mm__emit_coll(L, b, MASK(MM_STRAT_DDP), MM_COLL_ALL_REDUCE, MM_REASON_DDP, sc.value_bytes, &d, u, micro,
                         MM_PHASE_BWD);
  const MmCommCost *cag = &sc.gather, *car = &sc.reduce;
  const double dedup = sc.dedup_s;
  MmStreamId st = cag->shape.scope == MM_SCOPE_INTRA ? MM_STREAM_COMM_INTRA : MM_STREAM_COMM_INTER;
  MmOpInfo info = {.what = MM_OP_COLLECTIVE, .phase = MM_PHASE_BWD, .coll = MM_COLL_ALL_GATHER, .reason = MM_REASON_DDP,
                   .unit = u, .micro = micro, .first_layer = NONE, .last_layer = NONE, .bytes = sc.index_bytes,
                   .time_s = cag->time_s, .fixed_s = cag->latency_s, .algorithm = (uint8_t)cag->algorithm};
  uint32_t op = mm__emit(L, st, &d, &info, cag, COLL_SELF, g.degree, g.stride, 0);
  mm__deps_set_one(&d, op);
  if (sc.method == MM_SYNC_SPARSE && dedup > 0) {
    MmOpInfo di = {.what = MM_OP_COMPUTE, .phase = MM_PHASE_BWD, .unit = u, .micro = micro,
                   .first_layer = L->g->units[u].first_layer, .last_layer = L->g->units[u].first_layer, .kernels = 2,
                   .bytes = sc.dedup_bytes, .time_s = dedup, .fixed_s = dedup};
    op = mm__emit(L, MM_STREAM_COMPUTE, &d, &di, NULL, MM_NO_COLL, 0, 0, 0);
    mm__deps_set_one(&d, op);
  }
  info.coll = MM_COLL_ALL_REDUCE;
  info.bytes = sc.value_bytes;
  info.time_s = car->time_s + (sc.method == MM_SYNC_HOST ? dedup : 0);
  info.fixed_s = car->latency_s + (sc.method == MM_SYNC_HOST ? dedup : 0); /* CPU de-duplication, on the host path */
  info.algorithm = (uint8_t)car->algorithm;
  return mm__emit(L, st, &d, &info, car, COLL_SELF, g.degree, g.stride, 0);
}


/* "grad_accumulation": "separate": unit @u's new weight gradients (in its block's dtype) added to
 * the gradient buffer (grads dtype) after micro-batch @micro's backward, as Megatron-LM's DDP
 * param hook did in 2021 (main_grad.add_(grad), one kernel per parameter tensor; here one per
 * layer with parameters): read e + read and write the buffer, memory bound. */
double mm_plan_grad_accum_bytes(const MmScenario *s, guint b)
{
  const MmBlockSetup *bs = &s->blocks[b];
  if (s->cfg->grad_accum != MM_GRAD_ACCUM_SEPARATE || bs->frozen || bs->fsdp_shards > 1 ||
      s->model->blocks[b].kind == MM_BLOCK_EMBEDDING_BAG)
    return 0;
  return mm_dtype_bytes(s->model->blocks[b].dtype) + 2.0 * mm_dtype_bytes(bs->grad_dtype);
}

static uint32_t accumulate_grads(Lower *L, uint32_t u, uint32_t micro, uint32_t weights_done)
{
  const MmUnit *un = &L->g->units[u];
  const MmBlockSetup *bs = &L->s->blocks[un->block];
  const double bytes = mm__unit_params(L, u) * mm_plan_grad_accum_bytes(L->s, un->block);
  uint32_t kernels = 0;
  for (uint32_t li = un->first_layer; li < un->first_layer + un->n_layers; li++) kernels += L->g->layers[li].cost.params > 0;
  const MmKernel add = {.kind = MM_KERNEL_ELEMENTWISE, .dtype = bs->grad_dtype, .m = 1, .n = 1, .k = 1, .batch = 1};
  MmOpInfo info = {.what = MM_OP_GRAD_ACCUM, .phase = MM_PHASE_BWD, .unit = u, .micro = micro,
                   .first_layer = un->first_layer, .last_layer = un->first_layer + un->n_layers - 1,
                   .kernels = kernels, .bytes = bytes,
                   .time_s = mm_cost_kernel_s(&L->hw->device, &add, 0, bytes, NULL) + kernels * L->launch_s};
  info.fixed_s = info.time_s;
  const Deps d = mm__deps_one(weights_done);
  return mm__emit(L, MM_STREAM_COMPUTE, &d, &info, NULL, MM_NO_COLL, 0, 0, 0);
}

/* Gradient synchronization of one unit after its backward. */
void mm__sync_grads(Lower *L, IterState *st, uint32_t u, uint32_t micro, uint32_t weights_done)
{
  const MmUnit *un = &L->g->units[u];
  const guint b = un->block;
  const MmBlockSetup *bs = &L->s->blocks[b];
  if (bs->frozen || weights_done == NONE || un->cost.params == 0) return;
  const gboolean last_micro = micro + 1 == L->nm;
  const double ge = mm_dtype_bytes(bs->grad_dtype);
  const double grads[2] = {L->unit_dense[u] * ge, L->unit_expert[u] * ge};
  if (L->m->blocks[b].kind == MM_BLOCK_EMBEDDING_BAG && bs->fsdp_shards <= 1 && bs->degree[MM_STRAT_DDP] <= 1)
    return; /* sharded tables update in place */
  if (mm_plan_grad_accum_bytes(L->s, b) > 0) weights_done = accumulate_grads(L, u, micro, weights_done);
  Deps d; /* only v[0, n) is read */
  mm__deps_set_one(&d, weights_done);
  if (bs->fsdp_shards > 1) {
    /* FSDP reduce-scatters every micro-step; HSDP then all-reduces the shard across replicas */
    L->coll_tensors = L->unit_tensors ? L->unit_tensors[u] : NULL;
    uint32_t rs = mm__emit_coll(L, b, bs->fsdp_mask, MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, grads[0] + grads[1], &d,
                            u, micro, MM_PHASE_BWD);
    L->coll_tensors = NULL;
    if (!last_micro) return;
    Deps done, r;
    mm__deps_set_one(&done, rs == NONE ? weights_done : rs);
    mm__deps_set_one(&r, rs);
    for (int x = 0; x < 2; x++) {
      const uint32_t mask = L->grad_mask[2 * b + (guint)x];
      if (mm_plan_mask_degree(bs, mask) <= 1) continue; /* no replicas: mm__emit_coll would emit nothing */
      mm__deps_add(L, &done, mm__emit_coll(L, b, mask, MM_COLL_ALL_REDUCE, MM_REASON_DDP,
                                           grads[x] / (double)bs->fsdp_shards, &r, u, micro, MM_PHASE_BWD));
    }
    offload_grads(L, b, grads[0], grads[1], &done, u, micro);
  } else if (last_micro && bs->degree[MM_STRAT_DDP] > 1 && sparse_level(L, b) >= 0) {
    uint32_t op = emit_sparse_sync(L, b, sparse_level(L, b), u, micro, weights_done);
    Deps done = mm__deps_one(op == NONE ? weights_done : op);
    offload_grads(L, b, grads[0], grads[1], &done, u, micro);
  } else if (last_micro) {
    /* DDP accumulates locally (no_sync) and all-reduces buckets during the last backward */
    for (int x = 0; x < 2; x++) {
      if (grads[x] > 0 && mm_plan_mask_degree(bs, mm_plan_grad_replicas(L->s, b, x == 1)) <= 1) {
        offload_grads(L, b, x == 0 ? grads[x] : 0, x == 1 ? grads[x] : 0, &d, u, micro); /* nothing to reduce */
        continue;
      }
      if (grads[x] <= 0) continue;
      st->bucket_bytes[2 * b + (guint)x] += grads[x];
      st->bucket_dep[2 * b + (guint)x] = weights_done;
      if (L->s->cfg->ddp_overlap && st->bucket_bytes[2 * b + (guint)x] >= L->s->cfg->ddp_bucket_bytes)
        mm__flush_bucket(L, st, b, x, micro);
    }
  }
}


/* The tied word-embedding gradient, all-reduced between the first and the last stage; also the
 * embedding that multi-token prediction modules share on the last stage (Megatron-Core keeps a
 * copy there and reduces its gradient with the first stage's, as for a tied head). */
void mm__emit_tied(Lower *L)
{
  if (L->p <= 1 || !L->training) return;
  const MmModel *m = L->m;
  for (guint b = 0; b < m->n_blocks; b++) {
    const MmBlock *bk = &m->blocks[b];
    if (!((bk->kind == MM_BLOCK_LM_HEAD && bk->tied) || bk->mtp) || L->s->blocks[b].frozen) continue;
    const uint32_t k = L->unit_chunk[L->g->block_first_unit[b]];
    const uint32_t ks = mm_pipe_chunk_stage(L->s, k);
    if (ks == 0) return; /* head and embedding share a stage (dualpipev: always) */
    if (L->stage != 0 && L->stage != ks) return;
    const MmBlockSetup *bs = &L->s->blocks[b];
    /* the stage's copy of the tied gradient: its TP slice, and under FSDP its shard (the reduce-scatter ran) */
    const double bytes = (double)bk->vocab * (double)bk->hidden * mm_dtype_bytes(bs->grad_dtype) /
                         (double)bs->degree[MM_STRAT_TP] / (double)bs->fsdp_shards;
    const int64_t delta = (int64_t)ks * (L->stage == 0 ? 1 : -1);
    Deps d = mm__deps_all_streams(L);
    mm__emit_pair(L, MM_STREAM_COUNT, MM_COLL_ALL_REDUCE, TRUE, COLL_TIED, delta, bytes, &d, L->g->block_first_unit[b],
              L->nm - 1, MM_PHASE_BWD);
    return;
  }
}

/* Bytes of unit @u's non-expert (@x 0) or expert (1) parameters in a ZeRO gather: FP8 weights at
 * 1 byte (unit_gather) when the gather feeds the GEMMs, the dtype when it rebuilds an FSDP shard,
 * whose own gathers cast it. */
static double zero_gather_bytes(const Lower *L, uint32_t u, int x)
{
  const guint b = L->g->units[u].block;
  if (L->s->blocks[b].fsdp_shards <= 1) return L->unit_gather[2 * u + (uint32_t)x];
  return (x ? L->unit_expert[u] : L->unit_dense[u]) * mm_dtype_bytes(L->m->blocks[b].dtype);
}

/* Non-expert and expert parameters of block @b on this stage's device (after TP/MP/EP,
 * before FSDP), and with @gather their bytes in a ZeRO all-gather (zero_gather_bytes); FALSE when
 * the stage holds none of its units. */
static gboolean stage_block_params(const Lower *L, guint b, double *dense, double *expert, double *gather)
{
  gboolean any = FALSE;
  *dense = *expert = 0;
  if (gather) gather[0] = gather[1] = 0;
  for (uint32_t u = L->g->block_first_unit[b]; u < L->g->block_first_unit[b] + L->g->block_units[b]; u++) {
    if (mm_pipe_chunk_stage(L->s, L->unit_chunk[u]) != L->stage) continue;
    any = TRUE;
    *dense += L->unit_dense[u];
    *expert += L->unit_expert[u];
    if (gather) gather[0] += zero_gather_bytes(L, u, 0), gather[1] += zero_gather_bytes(L, u, 1);
  }
  return any;
}

/* Whether block @b's updated weights are all-gathered in the next forward (overlap_param_gather). */
static gboolean gathered_in_forward(const Lower *L, guint b)
{
  return L->param_gather && mm_plan_zero_gathers(L->s, b);
}

static void param_gather_emit(Lower *L, uint32_t u)
{
  const guint b = L->g->units[u].block;
  if (L->param_gather[2 * u] != NONE || L->param_gather[2 * u + 1] != NONE || !gathered_in_forward(L, b)) return;
  for (int x = 0; x < 2; x++) {
    /* the ZeRO shards of this rank's FSDP shard are gathered (unit_* are before FSDP) */
    const double bytes = zero_gather_bytes(L, u, x) / (double)L->s->blocks[b].fsdp_shards;
    if (bytes > 0)
      L->param_gather[2 * u + x] = mm__emit_coll(L, b, mm_plan_grad_replicas(L->s, b, x == 1), MM_COLL_ALL_GATHER,
                                                 MM_REASON_ZERO, bytes, NULL, u, 0, MM_PHASE_FWD);
  }
}

void mm__param_gather_deps(Lower *L, uint32_t u, uint32_t end, Deps *d)
{
  if (!L->param_gather) return;
  param_gather_emit(L, u);
  if (u + 1 < end) param_gather_emit(L, u + 1); /* one layer ahead, as Megatron's forward pre-hook */
  mm__deps_add(L, d, L->param_gather[2 * u]);
  mm__deps_add(L, d, L->param_gather[2 * u + 1]);
}

/* One optimizer step after every gradient has arrived; ZeRO-1/2 then all-gather the
 * updated weights (with overlap_param_gather: in the next iteration's forward instead).
 * Offloaded blocks (optimizer.offload: cpu) step on the CPU once every gradient copy has
 * reached the host, and their updated weights are copied back before being gathered. */
void mm__emit_optimizer(Lower *L)
{
  const MmModel *m = L->m;
  double bytes = 0, host_bytes = 0, host_weights = 0, dense, expert;
  uint32_t kernels = 0, host_kernels = 0;
  for (guint b = 0; b < m->n_blocks; b++) {
    const MmBlock *bk = &m->blocks[b];
    const MmBlockSetup *bs = &L->s->blocks[b];
    if (bs->frozen || bk->kind == MM_BLOCK_EMBEDDING_BAG || !stage_block_params(L, b, &dense, &expert, NULL)) continue;
    /* ZeRO shards the update over the replicas */
    double params = owned_params(L, b, dense, expert);
    double e = mm_dtype_bytes(bk->dtype), ge = mm_dtype_bytes(bs->grad_dtype);
    if (mm_plan_offloaded(L->s, b)) {
      mm_plan_optimizer_step_add(&host_bytes, bs->optimizer, bk, params, e, ge);
      host_weights += params * e;
      host_kernels++;
    } else {
      mm_plan_optimizer_step_add(&bytes, bs->optimizer, bk, params, e, ge);
      kernels++;
    }
  }
  uint32_t opt = NONE, to_device = NONE;
  if (kernels > 0) {
    Deps d = mm__deps_all_streams(L);
    const MmKernel upd = {.kind = MM_KERNEL_ELEMENTWISE, .dtype = MM_DTYPE_FP32, .m = 1,
                          .n = 1, .k = 1, .batch = 1}; /* the fused update: memory bound */
    MmOpInfo info = {
      .what = MM_OP_OPTIMIZER, .phase = MM_PHASE_OPTIMIZER, .unit = MM_NO_UNIT, .micro = 0, .first_layer = NONE,
      .last_layer = NONE, .kernels = kernels, .bytes = bytes,
      .time_s = mm_cost_kernel_s(&L->hw->device, &upd, 0, bytes, NULL) + kernels * L->launch_s,
    };
    info.fixed_s = info.time_s;
    opt = mm__emit(L, MM_STREAM_COMPUTE, &d, &info, NULL, MM_NO_COLL, 0, 0, 0);
  }
  if (host_kernels > 0) {
    /* the CPU step is memory-bound (ZeRO-Offload's vectorized CPU-Adam, Ren et al., USENIX ATC 2021): its bytes at
     * this GPU's share of the node's host memory bandwidth; it waits for the last gradient copy */
    Deps d = mm__deps_all_streams(L);
    const double host_Bps = L->hw->host_mem_Bps / (double)L->hw->gpus_per_node;
    MmOpInfo info = {
      .what = MM_OP_HOST_STEP, .phase = MM_PHASE_OPTIMIZER, .unit = MM_NO_UNIT, .micro = 0, .first_layer = NONE,
      .last_layer = NONE, .kernels = host_kernels, .bytes = host_bytes, .time_s = host_bytes / host_Bps,
    };
    info.fixed_s = info.time_s;
    uint32_t step = mm__emit(L, MM_STREAM_HOST, &d, &info, NULL, MM_NO_COLL, 0, 0, 0);
    Deps sd = mm__deps_one(step);
    to_device = emit_host_copy(L, host_weights, &sd, MM_NO_UNIT, 0, MM_PHASE_OPTIMIZER);
    if (to_device == NONE) to_device = step;
  }
  if (opt == NONE && to_device == NONE) return;
  for (guint b = 0; b < m->n_blocks; b++) {
    const MmBlockSetup *bs = &L->s->blocks[b];
    double gather[2];
    if (!mm_plan_zero_gathers(L->s, b) || gathered_in_forward(L, b) ||
        !stage_block_params(L, b, &dense, &expert, gather))
      continue;
    const double f = 1.0 / (double)bs->fsdp_shards; /* of this rank's FSDP shard */
    Deps od = mm__deps_one(mm_plan_offloaded(L->s, b) ? to_device : opt);
    mm__emit_coll(L, b, mm_plan_grad_replicas(L->s, b, FALSE), MM_COLL_ALL_GATHER, MM_REASON_ZERO, gather[0] * f, &od,
                  MM_NO_UNIT, 0, MM_PHASE_OPTIMIZER);
    mm__emit_coll(L, b, mm_plan_grad_replicas(L->s, b, TRUE), MM_COLL_ALL_GATHER, MM_REASON_ZERO, gather[1] * f, &od,
                  MM_NO_UNIT, 0, MM_PHASE_OPTIMIZER);
  }
}

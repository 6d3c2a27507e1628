/* memory: per-device bytes of weights, gradients, optimizer states, activations and comm buffers. */
#include <math.h>

#include "plan.h"

void mm_memory_free(MmMemory *m)
{
  if (!m) return;
  g_free(m->blocks);
  g_free(m);
}

double mm_plan_param_fraction(const MmScenario *s, guint block, const MmLayer *layer)
{
  const MmBlockSetup *bs = &s->blocks[block];
  double frac = bs->mp_fraction / (double)bs->degree[MM_STRAT_FSDP];
  if (layer && layer->tp != MM_TP_REPLICATED && s->model->blocks[block].kind != MM_BLOCK_EMBEDDING_BAG)
    frac /= (double)bs->degree[MM_STRAT_TP];
  return frac;
}

/* Fraction of a layer's activations kept on one device under TP / MP. */
static double act_fraction(const MmScenario *s, guint block, const MmLayer *l)
{
  const MmBlockSetup *bs = &s->blocks[block];
  if (s->model->blocks[block].kind == MM_BLOCK_EMBEDDING_BAG)
    return mm_plan_param_fraction(s, block, l) * (double)bs->degree[MM_STRAT_FSDP];
  if (l->tp == MM_TP_SHARDED || l->tp == MM_TP_ROW) return 1.0 / (double)bs->degree[MM_STRAT_TP];
  return 1.0;
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
  }
  if (o->master_weights && mm_dtype_bytes(b->dtype) < 4.0) bytes += 4.0;
  return bytes;
}

/* First block (forward order) that is trained: blocks before it run no backward. */
static guint first_trained_block(const MmScenario *s)
{
  for (guint i = 0; i < s->model->n_blocks; i++)
    if (!s->blocks[i].frozen) return i;
  return s->model->n_blocks;
}

MmMemory *mm_memory_new(const MmScenario *s, const MmGraph *g)
{
  g_return_val_if_fail(s && g && g->model == s->model, NULL);
  const MmModel *m = s->model;
  const MmParallelConfig *c = s->cfg;
  gboolean training = c->task != MM_TASK_INFERENCE;
  MmMemory *mem = g_new0(MmMemory, 1);
  mem->n_blocks = m->n_blocks;
  mem->blocks = g_new0(MmMemoryParts, m->n_blocks);
  guint ft = first_trained_block(s);

  double fsdp_gather = 0, fsdp_grad = 0, ddp_bucket = 0, tp_buf = 0, a2a_buf = 0;
  double max_unit_act = 0; /* full recompute: one unit's activations are rebuilt at a time */

  MmMemoryParts last = {0}; /* the previous unit's contributions, reused by identical units */
  double last_params = 0, last_act = 0, last_in = 0, last_io = 0, last_tp = 0;
  for (guint u = 0; u < g->n_units; u++) {
    const MmUnit *un = &g->units[u];
    const guint bi = un->block;
    const gboolean same = u > 0 && g->layers[un->first_layer].canon != un->first_layer;
    const MmBlock *b = &m->blocks[bi];
    const MmBlockSetup *bs = &s->blocks[bi];
    MmMemoryParts *p = &mem->blocks[bi];
    const double e = mm_dtype_bytes(b->dtype);
    const double ge = mm_dtype_bytes(bs->grad_dtype);
    const double samples = bs->samples_per_micro;
    const gboolean trained = training && !bs->frozen;
    const gboolean keeps_acts = training && bi >= ft;
    double unit_params_local = 0, unit_act = 0, unit_in = 0, unit_peak_io = 0, unit_tp_out = 0;
    MmMemoryParts mine = {0};

    for (guint li = un->first_layer; !same && li < un->first_layer + un->n_layers; li++) {
      const MmLayer *l = &g->layers[li];
      double pf = mm_plan_param_fraction(s, bi, l);
      double params = (double)l->cost.params * pf;
      unit_params_local += (double)l->cost.params * pf * (double)bs->degree[MM_STRAT_FSDP];
      mine.weights += params * e;
      if (trained) {
        double grads = params * ge;
        if (b->kind == MM_BLOCK_EMBEDDING_BAG) {
          /* fused backward + optimizer (FBGEMM TBE, as TorchRec and ZionEX): rows are updated in
           * place; only the gradient of the pooled outputs is materialized */
          double pooled = samples * l->cost.out_bytes / e * ge * pf * (double)bs->degree[MM_STRAT_FSDP];
          grads = MIN(grads, pooled);
        }
        mine.gradients += grads;
        mine.optimizer += params * mm_plan_optimizer_bytes(bs->optimizer, b);
      }
      double af = act_fraction(s, bi, l);
      double act = samples * l->cost.act_bytes * af;
      unit_act += act;
      if (li == un->first_layer) unit_in = act;
      unit_peak_io = MAX(unit_peak_io, samples * (l->cost.act_bytes + l->cost.out_bytes) * af);
      if (l->tp == MM_TP_ROW || l->tp == MM_TP_COLUMN) unit_tp_out = MAX(unit_tp_out, samples * l->cost.out_bytes);
    }
    if (same) {
      mine = last;
      unit_params_local = last_params, unit_act = last_act, unit_in = last_in, unit_peak_io = last_io;
      unit_tp_out = last_tp;
    } else {
      last = mine;
      last_params = unit_params_local, last_act = unit_act, last_in = unit_in, last_io = unit_peak_io;
      last_tp = unit_tp_out;
    }
    p->weights += mine.weights;
    p->gradients += mine.gradients;
    p->optimizer += mine.optimizer;

    if (keeps_acts) {
      if (c->recompute == MM_RECOMPUTE_FULL) {
        p->activations += unit_in;
        max_unit_act = MAX(max_unit_act, unit_act - unit_in);
      } else {
        p->activations += unit_act;
      }
    } else if (!training) {
      max_unit_act = MAX(max_unit_act, unit_peak_io);
    }

    /* Communication buffers: the largest need of each mechanism. */
    double tp = (double)bs->degree[MM_STRAT_TP];
    if (bs->degree[MM_STRAT_FSDP] > 1) {
      fsdp_gather = MAX(fsdp_gather, (double)(1 + c->fsdp_prefetch) * unit_params_local * e);
      if (trained) fsdp_grad = MAX(fsdp_grad, unit_params_local * ge);
    }
    if (tp > 1) tp_buf = MAX(tp_buf, unit_tp_out);
    if (bs->degree[MM_STRAT_MP] > 1) {
      const MmCost *cc = &g->block_cost[bi];
      double frac = mm_plan_param_fraction(s, bi, NULL) * (double)bs->degree[MM_STRAT_FSDP];
      double send = samples * cc->out_bytes * frac;
      double recv = (double)s->micro_batch * (double)s->dp_ref / (double)s->devices * cc->out_bytes;
      a2a_buf = MAX(a2a_buf, (trained ? 2.0 : 1.0) * (send + recv));
    }
  }
  for (guint bi = 0; bi < m->n_blocks; bi++) {
    const MmBlockSetup *bs = &s->blocks[bi];
    if (training && !bs->frozen && bs->degree[MM_STRAT_DDP] > 1)
      ddp_bucket = MAX(ddp_bucket, MIN(2.0 * c->ddp_bucket_bytes, mem->blocks[bi].gradients));
    mem->total.weights += mem->blocks[bi].weights;
    mem->total.gradients += mem->blocks[bi].gradients;
    mem->total.optimizer += mem->blocks[bi].optimizer;
    mem->total.activations += mem->blocks[bi].activations;
  }
  mem->transient_activations = max_unit_act;
  mem->total.activations += max_unit_act;
  mem->total.comm_buffers = fsdp_gather + fsdp_grad + ddp_bucket + tp_buf + a2a_buf;
  mem->per_device_bytes = mm_memory_parts_sum(&mem->total);
  mem->capacity_bytes = s->hw->device.hbm_bytes;
  mem->fits = mem->per_device_bytes <= mem->capacity_bytes;
  return mem;
}

/* fsdp: parameters per unit and the FSDP all-gather queue, issued `fsdp_prefetch` units ahead. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- FSDP gather sequence ---------------------------------------------- */

/* Whether a parameter tensor of @elems elements stays gathered (fsdp_persistence_threshold). */
static gboolean persistent(const MmScenario *s, double elems)
{
  return elems < (double)s->cfg->fsdp_persistence_threshold;
}

/* Adds @count tensors of @elems elements each (on one device before FSDP sharding) to @t, whose unit
 * gathers @unit elements. Past UNIT_TENSOR_SIZES distinct sizes the last slot takes their mean size
 * (the same bytes); it is persistent only if all its tensors are. */
static void tensors_add(const MmScenario *s, UnitTensors *t, double elems, uint32_t count, double unit)
{
  if (elems <= 0 || count == 0 || unit <= 0) return;
  const double f = elems / unit;
  const uint8_t persist = (uint8_t)persistent(s, elems);
  if (persist) t->persist_frac += f * count;
  guint i = 0;
  while (i < t->n && (t->frac[i] != f || t->persist[i] != persist)) i++;
  if (i == UNIT_TENSOR_SIZES) {
    i--;
    t->frac[i] = (t->frac[i] * t->count[i] + f * count) / (t->count[i] + count);
    t->persist[i] = t->persist[i] && persist;
  } else if (i == t->n) {
    t->frac[t->n] = f;
    t->persist[t->n++] = persist;
  }
  t->count[i] += count;
}

guint mm__layer_tensors(const MmScenario *s, const MmGraph *g, uint32_t li, double param_frac,
                        double elems[MM__LAYER_TENSOR_KINDS], uint32_t count[MM__LAYER_TENSOR_KINDS])
{
  const MmLayer *l = &g->layers[li];
  const MmBlock *b = &s->model->blocks[l->block];
  const MmBlockSetup *bs = &s->blocks[l->block];
  const double p = (double)l->cost.params, frac = param_frac * (double)bs->fsdp_shards;
  guint n = 0;
#define ADD(e, c) (elems[n] = (e), count[n++] = (c))
  if (p <= 0) return 0;
  switch (l->role) {
  case MM_ROLE_NORM_ATTN:
  case MM_ROLE_NORM_FFN:
  case MM_ROLE_NORM_FINAL:
  case MM_ROLE_MTP_NORM: {
    const uint32_t k = (b->norm == MM_NORM_LAYERNORM ? 2 : 1) * (l->role == MM_ROLE_MTP_NORM ? 2 : 1);
    ADD(p / k * frac, k);
    break;
  }
  case MM_ROLE_TOKEN_LOOKUP: {
    const double pos = (double)b->positions * (double)b->hidden;
    if (pos > 0 && pos < p) {
      ADD(pos * frac, 1);
      ADD((p - pos) * frac, 1);
    } else {
      ADD(p * frac, 1);
    }
    break;
  }
  default: {
    /* experts: each a tensor; a device holds experts / ep of them whole (param_frac counts 1 / ep) */
    const double experts = l->expert && b->experts > 1 ? (double)b->experts : 1;
    const double ep = experts > 1 ? (double)MAX(1, mm_plan_folded(bs) ? bs->expert_degree[MM_STRAT_EP]
                                                                      : bs->degree[MM_STRAT_EP]) : 1;
    const uint32_t local = (uint32_t)MAX(1.0, ceil(experts / ep));
    const double w = l->kernel.k * l->kernel.n * experts, bias = b->bias ? p - w : 0;
    if (bias > 0 && bias < p) {
      ADD(w / experts * frac * ep, local);
      ADD(bias / experts * frac * ep, local);
    } else {
      ADD(p / experts * frac * ep, local);
    }
    break;
  }
  }
#undef ADD
  return n;
}

double mm__persistent_elems(const MmScenario *s, const MmGraph *g, uint32_t li, double param_frac)
{
  if (s->cfg->fsdp_collectives != MM_FSDP_COLL_PER_TENSOR_LIST || s->blocks[g->layers[li].block].fsdp_shards <= 1)
    return 0;
  double elems[MM__LAYER_TENSOR_KINDS], sum = 0;
  uint32_t count[MM__LAYER_TENSOR_KINDS];
  const guint n = mm__layer_tensors(s, g, li, param_frac, elems, count);
  for (guint i = 0; i < n; i++)
    if (persistent(s, elems[i])) sum += elems[i] * count[i];
  return sum;
}

/* The parameter tensors of unit @u (mm__layer_tensors). */
static UnitTensors *unit_tensors(const Lower *L, uint32_t u)
{
  const MmUnit *un = &L->g->units[u];
  const double unit = mm__unit_params(L, u);
  UnitTensors *t = g_new0(UnitTensors, 1);
  for (uint32_t li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
    double elems[MM__LAYER_TENSOR_KINDS];
    uint32_t count[MM__LAYER_TENSOR_KINDS];
    const guint n = mm__layer_tensors(L->s, L->g, li, mm__place(L, li)->param_frac, elems, count);
    for (guint i = 0; i < n; i++) tensors_add(L->s, t, elems[i], count[i], unit);
  }
  return t;
}

void mm__precompute_units(Lower *L)
{
  const MmGraph *g = L->g;
  L->unit_dense = g_new0(double, g->n_units + 1);
  L->unit_expert = g_new0(double, g->n_units + 1);
  L->unit_gather = g_new0(double, 2 * (gsize)g->n_units + 1);
  L->fsdp_unit = g_new(uint8_t, g->n_units + 1);
  if (L->s->cfg->fsdp_collectives == MM_FSDP_COLL_PER_TENSOR_LIST) L->unit_tensors = g_new0(UnitTensors *, g->n_units + 1);
  L->grad_mask = g_new(uint32_t, 2 * (gsize)L->m->n_blocks + 1);
  for (guint b = 0; b < L->m->n_blocks; b++)
    for (int x = 0; x < 2; x++) L->grad_mask[2 * b + (guint)x] = mm_plan_grad_replicas(L->s, b, x == 1);
  for (uint32_t u = 0; u < g->n_units; u++) {
    const MmUnit *un = &g->units[u];
    const MmBlockSetup *bs = &L->s->blocks[un->block];
    L->fsdp_unit[u] = bs->fsdp_shards > 1 && un->cost.params > 0;
    if (u > 0 && g->layers[un->first_layer].canon != un->first_layer) { /* identical to the previous unit */
      L->unit_dense[u] = L->unit_dense[u - 1];
      L->unit_expert[u] = L->unit_expert[u - 1];
      L->unit_gather[2 * u] = L->unit_gather[2 * u - 2];
      L->unit_gather[2 * u + 1] = L->unit_gather[2 * u - 1];
      if (L->unit_tensors) L->unit_tensors[u] = L->unit_tensors[u - 1];
      continue;
    }
    for (uint32_t li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
      const MmLayer *l = &g->layers[li];
      double p = (double)l->cost.params * mm__place(L, li)->param_frac * (double)bs->fsdp_shards;
      if (l->expert) L->unit_expert[u] += p;
      else L->unit_dense[u] += p;
      L->unit_gather[2 * u + (l->expert ? 1 : 0)] += p * mm_plan_gather_elem_bytes(L->s, g, li);
    }
    if (L->unit_tensors) L->unit_tensors[u] = L->fsdp_unit[u] ? unit_tensors(L, u) : NULL;
  }
  /* every tensor persistent: nothing to gather (its gradients are still reduce-scattered) */
  for (uint32_t u = 0; L->unit_tensors && u < g->n_units; u++)
    if (L->unit_tensors[u] && L->unit_tensors[u]->persist_frac >= 1.0 - 1e-12) L->fsdp_unit[u] = 0;
}

void mm__unit_tensors_free(Lower *L)
{
  if (!L->unit_tensors) return;
  for (uint32_t u = 0; u < L->g->n_units; u++)
    if (u == 0 || L->unit_tensors[u] != L->unit_tensors[u - 1]) g_free(L->unit_tensors[u]);
  g_free(L->unit_tensors);
}

double mm__unit_params(const Lower *L, uint32_t u)
{
  return L->unit_dense[u] + L->unit_expert[u];
}

/* The order in which FSDP units compute over the stage's schedule: the order their
 * AllGathers are issued, `fsdp_prefetch` ahead of the compute. */
void mm__build_gather_queue(Lower *L, const MmPipeStep *steps, guint n_steps)
{
  /* per chunk of this stage, its units that gather in a forward and in a backward: a bound on
   * the queue, so it is sized once */
  g_autofree uint32_t *n_fwd = g_new0(uint32_t, 2 * (gsize)L->K + 1);
  uint32_t *n_bwd = n_fwd + L->K;
  for (uint32_t c = 0; c < L->v; c++) {
    const uint32_t k = mm_pipe_stage_chunk(L->s, L->stage, c);
    for (uint32_t u = L->chunk_first[k]; u < L->chunk_end[k]; u++)
      if (mm__fsdp_unit(L, u)) {
        n_fwd[k]++;
        n_bwd[k] += (L->g->units[u].block >= L->first_trained) * (mm__regathers(L, u) ? 2 : 1);
      }
  }
  gsize cap = 0;
  for (guint i = 0; i < n_steps; i++) {
    const uint32_t k = mm_pipe_stage_chunk(L->s, L->stage, steps[i].chunk);
    if (steps[i].bwd != MM_PIPE_W) cap += steps[i].bwd ? n_bwd[k] : n_fwd[k];
  }
  GatherItem *a = g_new(GatherItem, cap + 1);
  uint32_t n = 0;
  for (guint i = 0; i < n_steps; i++) {
    const uint32_t k = mm_pipe_stage_chunk(L->s, L->stage, steps[i].chunk);
    if (steps[i].bwd == MM_PIPE_W) continue; /* zb_h1: weight gradients gather nothing */
    if (!steps[i].bwd) {
      for (uint32_t u = L->chunk_first[k]; u < L->chunk_end[k]; u++)
        if (mm__fsdp_gathers(L, u, steps[i].micro, FALSE)) a[n++] = (GatherItem){u, steps[i].micro, FALSE, FALSE};
    } else {
      for (uint32_t u = L->chunk_end[k]; u-- > L->chunk_first[k];)
        if (L->g->units[u].block >= L->first_trained && mm__fsdp_gathers(L, u, steps[i].micro, TRUE)) {
          if (mm__regathers(L, u)) a[n++] = (GatherItem){u, steps[i].micro, TRUE, TRUE};
          a[n++] = (GatherItem){u, steps[i].micro, TRUE, FALSE};
        }
    }
  }
  g_assert(n <= cap);
  L->n_gq = n;
  L->gq = a;
  L->gq_op = g_new(uint32_t, L->n_gq + 1);
}

void mm__emit_gather(Lower *L, const Deps *d)
{
  uint32_t i = L->gq_emitted++;
  const GatherItem *it = &L->gq[i];
  const MmUnit *un = &L->g->units[it->unit];
  double bytes = L->unit_gather[2 * it->unit] + L->unit_gather[2 * it->unit + 1];
  L->coll_tensors = L->unit_tensors ? L->unit_tensors[it->unit] : NULL;
  if (L->coll_tensors) bytes *= 1.0 - L->coll_tensors->persist_frac; /* persistent tensors stay gathered */
  L->gq_op[i] = mm__emit_coll(L, un->block, L->s->blocks[un->block].fsdp_mask, MM_COLL_ALL_GATHER, MM_REASON_FSDP, bytes, d, it->unit,
                          it->micro, it->bwd ? MM_PHASE_BWD : MM_PHASE_FWD);
  L->coll_tensors = NULL;
}

/* The gather of the unit about to compute (issued earlier). */
uint32_t mm__gather_for(Lower *L, uint32_t u, uint32_t micro, gboolean bwd)
{
  g_assert(L->gq_pos < L->gq_emitted);
  const GatherItem *it = &L->gq[L->gq_pos];
  g_assert(it->unit == u && it->micro == micro && it->bwd == bwd);
  (void)u, (void)micro, (void)bwd;
  return L->gq_op[L->gq_pos];
}

/* Whether unit @u's backward gathers its parameters twice: once for its full recompute, which frees
 * them after it, and again for the backward (fsdp_regather_recompute). */
gboolean mm__regathers(const Lower *L, uint32_t u)
{
  return mm_plan_regathers(L->s) && L->recompute[u] != MM__RECOMPUTE_NONE && L->fsdp_unit[u];
}

gboolean mm_plan_regathers(const MmScenario *s)
{
  return s->cfg->fsdp_regather_recompute && s->cfg->recompute == MM_RECOMPUTE_FULL && s->cfg->fsdp_reshard;
}

/* Between unit @u's recompute (its last op @rec_last) and its backward, under
 * fsdp_regather_recompute: the recompute's parameters are freed and gathered again; @d (the
 * backward's dependencies) gains that gather. */
void mm__regather(Lower *L, uint32_t u, uint32_t micro, uint32_t rec_last, Deps *d)
{
  if (!mm__regathers(L, u) || rec_last == NONE) return;
  g_assert(L->gq[L->gq_pos].recompute);
  mm__gather_advance(L, rec_last);
  mm__deps_add(L, d, mm__gather_for(L, u, micro, TRUE));
}

/* After a unit computed: its buffer is free, so the gather `prefetch + 1` units ahead may go. */
void mm__gather_advance(Lower *L, uint32_t compute_done)
{
  L->gq_pos++;
  uint32_t want = L->gq_pos + (uint32_t)L->s->cfg->fsdp_prefetch + 1;
  while (L->gq_emitted < MIN(want, L->n_gq)) {
    Deps d; /* only v[0, n) is read */
    mm__deps_set_one(&d, compute_done);
    mm__emit_gather(L, &d);
  }
}

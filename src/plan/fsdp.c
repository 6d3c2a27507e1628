/* fsdp: parameters per unit and the FSDP all-gather queue, issued `fsdp_prefetch` units ahead. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- FSDP gather sequence ---------------------------------------------- */

void mm__precompute_units(Lower *L)
{
  const MmGraph *g = L->g;
  L->unit_dense = g_new0(double, g->n_units + 1);
  L->unit_expert = g_new0(double, g->n_units + 1);
  L->fsdp_unit = g_new(uint8_t, g->n_units + 1);
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
      continue;
    }
    for (uint32_t li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
      const MmLayer *l = &g->layers[li];
      double p = (double)l->cost.params * mm__place(L, li)->param_frac * (double)bs->fsdp_shards;
      if (l->expert) L->unit_expert[u] += p;
      else L->unit_dense[u] += p;
    }
  }
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
        n_bwd[k] += L->g->units[u].block >= L->first_trained;
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
        if (mm__fsdp_gathers(L, u, steps[i].micro, FALSE)) a[n++] = (GatherItem){u, steps[i].micro, FALSE};
    } else {
      for (uint32_t u = L->chunk_end[k]; u-- > L->chunk_first[k];)
        if (L->g->units[u].block >= L->first_trained && mm__fsdp_gathers(L, u, steps[i].micro, TRUE))
          a[n++] = (GatherItem){u, steps[i].micro, TRUE};
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
  double bytes = mm__unit_params(L, it->unit) * mm_dtype_bytes(L->m->blocks[un->block].dtype);
  L->gq_op[i] = mm__emit_coll(L, un->block, L->s->blocks[un->block].fsdp_mask, MM_COLL_ALL_GATHER, MM_REASON_FSDP, bytes, d, it->unit,
                          it->micro, it->bwd ? MM_PHASE_BWD : MM_PHASE_FWD);
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

/* offload: activations copied to host memory after a layer's forward and back before its backward (Megatron-Core / Transformer Engine cpu_offloading). */
#include "internal.h"

uint8_t *mm__offload_units(const MmScenario *s, const MmGraph *g, const uint32_t *chunk)
{
  uint8_t *r = g_new0(uint8_t, g->n_units + 1);
  const MmParallelConfig *c = s->cfg;
  if (c->offload_num_layers <= 0 || c->task == MM_TASK_INFERENCE) return r;
  const guint ft = mm_plan_first_trained(s);
  int64_t j = 0; /* layer units of the chunk so far */
  for (uint32_t u = 0; u < g->n_units; u++) {
    if (u > 0 && chunk[u] != chunk[u - 1]) j = 0;
    const guint b = g->units[u].block;
    if (!mm_block_is_layers(&s->model->blocks[b])) continue;
    /* Megatron-Core's TransformerBlock hands cpu_offloading_num_layers to Transformer Engine's
     * get_cpu_offload_context: the first N layers of the block (the model chunk) are offloaded */
    r[u] = b >= ft && j < c->offload_num_layers;
    j++;
  }
  return r;
}

double mm__unit_act_bytes(const MmScenario *s, const MmGraph *g, uint32_t u, double expert_load)
{
  const MmUnit *un = &g->units[u];
  const double samples = s->blocks[un->block].samples_per_micro;
  double act = 0;
  for (guint li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
    MmPlacement p;
    mm_plan_place(s, g, li, &p);
    act += samples * mm_plan_kept_bytes(&g->layers[li], &p) * (p.load_scaled ? expert_load : 1.0);
  }
  return act;
}

uint32_t mm__emit_offload_copy(Lower *L, uint32_t u, uint32_t micro, gboolean reload, const Deps *d)
{
  return mm__emit_host_copy(L, reload ? MM_STREAM_OFFLOAD_H2D : MM_STREAM_OFFLOAD_D2H, MM_OP_COPY,
                            reload ? MM_PHASE_BWD : MM_PHASE_FWD, u, micro,
                            mm__unit_act_bytes(L->s, L->g, u, L->expert_load), d);
}

/* plan: a model's layer graph under a parallel strategy and task -> per-device memory and op streams. */
#pragma once

#include "config/config.h"
#include "graph/graph.h"

G_BEGIN_DECLS

/* Bytes held by one device, by category. */
typedef struct {
  double weights;
  double gradients;
  double optimizer;
  double activations;
  double comm_buffers;
} MmMemoryParts;

static inline double mm_memory_parts_sum(const MmMemoryParts *p)
{
  return p->weights + p->gradients + p->optimizer + p->activations + p->comm_buffers;
}

/* Per-device memory of the busiest device (uneven table-wise sharding puts
 * ceil(tables / degree) tables on some devices). */
typedef struct {
  MmMemoryParts total;
  MmMemoryParts *blocks;    /* per model block; comm buffers are global (0 here) */
  double transient_activations; /* in total.activations: the unit being recomputed (full
                                 * recompute) or the largest working set (inference) */
  guint n_blocks;
  double per_device_bytes;  /* sum of total */
  double capacity_bytes;    /* HBM of the device */
  gboolean fits;
} MmMemory;

/* Computes per-device memory of @s (training: weights, gradients, optimizer
 * states, activations of one micro-batch, communication buffers; inference:
 * weights and the largest layer's working set). (transfer full) */
MmMemory *mm_memory_new(const MmScenario *s, const MmGraph *g);
void mm_memory_free(MmMemory *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmMemory, mm_memory_free)

/* Fraction of a block's parameters held by the busiest device. */
double mm_plan_param_fraction(const MmScenario *s, guint block, const MmLayer *layer);

G_END_DECLS

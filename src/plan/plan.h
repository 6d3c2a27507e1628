/* plan: a model's layer graph under a parallel strategy and task -> per-device memory and op streams. */
#pragma once

#include "comm/comm.h"
#include "config/config.h"
#include "engine/engine.h"
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

/* Optimizer bytes per trained parameter of block @b: states, plus an fp32 master copy. */
double mm_plan_optimizer_bytes(const MmOptimizer *o, const MmBlock *b);

/* Fraction of a block's parameters held by the busiest device. */
double mm_plan_param_fraction(const MmScenario *s, guint block, const MmLayer *layer);

/* ---- lowering: op streams ----------------------------------------------- */

typedef enum { MM_STREAM_COMPUTE, MM_STREAM_COMM_INTRA, MM_STREAM_COMM_INTER, MM_STREAM_COUNT } MmStreamId;
extern const char *const mm_stream_names[];

typedef enum { MM_PHASE_FWD, MM_PHASE_BWD, MM_PHASE_RECOMPUTE, MM_PHASE_OPTIMIZER, MM_PHASE_COUNT } MmPhase;
extern const char *const mm_phase_names[];

typedef enum { MM_OP_COMPUTE, MM_OP_LOOKUP, MM_OP_OPTIMIZER, MM_OP_COLLECTIVE } MmOpWhat;

/* Why a collective exists. */
typedef enum { MM_REASON_FSDP, MM_REASON_TP, MM_REASON_DDP, MM_REASON_MP, MM_REASON_MOE } MmReason;
extern const char *const mm_reason_names[];

#define MM_NO_UNIT UINT32_MAX

/* What an op is, for reports and traces (the engine sees only MmEngineOp). */
typedef struct {
  uint8_t what;     /* MmOpWhat */
  uint8_t phase;    /* MmPhase */
  uint8_t coll;     /* MmCollKind (collectives) */
  uint8_t reason;   /* MmReason (collectives) */
  uint32_t unit;    /* graph unit or MM_NO_UNIT */
  uint32_t micro;   /* micro-step */
  uint32_t first_layer, last_layer; /* compute: graph layers covered */
  uint32_t kernels;
  double flops;       /* executed FLOPs on one device */
  double model_flops; /* the MFU count */
  double bytes;       /* compute: HBM bytes; collective: buffer bytes */
  double time_s;      /* duration alone (collectives: on idle links) */
  double fixed_s;     /* the engine's fixed part: compute time, or a collective's latency */
  uint8_t algorithm;  /* collectives: MmAlgorithm chosen */
} MmOpInfo;

typedef struct {
  gboolean per_device; /* one class per device instead of one per behaviour */
} MmPlanOptions;

/* The lowered iteration: one program of ops, and the device classes running it. */
typedef struct {
  const MmScenario *scenario; /* (transfer none) */
  const MmGraph *graph;
  MmEngineProgram program;
  MmEngineOp *ops;
  MmOpInfo *info;
  uint32_t *deps;
  MmTime *dur;
  uint32_t n_ops;
  uint32_t *xfer_link; /* collectives' per-link traffic (MmEngineProgram.xfer_*) */
  double *xfer_bytes;
  MmLinks links;       /* the resources of one device */
  double *link_bw;     /* bytes per picosecond, per link */
  MmEngineClass *classes;
  int64_t *class_count; /* devices each class stands for */
  uint32_t n_classes;
  double model_flops_per_iteration; /* all devices */
  double peak_flops_per_device;     /* dense peak of the main block's compute dtype */
  MmDtype mfu_dtype;
} MmPlan;

/* Lowers one training (or inference) iteration of @s: forward, backward
 * (input- and weight-gradient), recompute, optimizer; FSDP gathers with
 * prefetch and reduce-scatters, TP all-reduces, DDP bucketed all-reduces,
 * MP and MoE all-to-alls. (transfer full) */
MmPlan *mm_plan_new(const MmScenario *s, const MmGraph *g, const MmPlanOptions *opt, GError **error);
void mm_plan_free(MmPlan *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmPlan, mm_plan_free)

/* "decoder.17 bwd" / "all_gather fsdp decoder.17 fwd" (transfer full) */
char *mm_plan_op_name(const MmPlan *p, uint32_t op);

/* Compute time of @flops executed FLOPs and @bytes of HBM traffic in @dtype:
 * the roofline max(flops / (peak x util_gemm), bytes / (hbm_bw x util_hbm)).
 * The one place compute utilization enters (calibration replaces it). */
double mm_plan_compute_time(const MmHardware *hw, MmDtype dtype, double flops, double bytes);

G_END_DECLS

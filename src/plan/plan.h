/* plan: a model's layer graph under a parallel strategy and task -> per-device memory and op streams. */
#pragma once

#include "comm/comm.h"
#include "cost/cost.h"
#include "config/config.h"
#include "engine/engine.h"
#include "graph/graph.h"

G_BEGIN_DECLS

/* ---- points: overrides of loaded inputs -------------------------------- */

/* Hardware what-if factors; 0 (or 1) keeps the loaded value. */
typedef enum {
  MM_SCALE_COMPUTE,   /* peak FLOP/s of every dtype */
  MM_SCALE_HBM_BW,    /* HBM bandwidth */
  MM_SCALE_HBM_BYTES, /* HBM capacity */
  MM_SCALE_INTRA_BW,  /* scale-up links (per GPU and per link) */
  MM_SCALE_INTER_BW,  /* scale-out NICs */
  MM_SCALE_LATENCY,   /* every network latency (per step and per collective, every protocol); < 1 is faster */
  MM_SCALE_COUNT
} MmScale;
extern const char *const mm_scale_names[]; /* "compute", "hbm_bw", "hbm_cap", "intra_bw", "inter_bw", "latency" */

/* One point of a study: what differs from the loaded files. Zero fields keep the file's
 * value. The loaded model, system and config are never edited: a scenario derives its own
 * views of them (see mm_scenario_new). */
typedef struct {
  int64_t nodes;           /* nodes of the system's design */
  int64_t global_batch;    /* samples per iteration (drops the config's global_batch_tokens) */
  int64_t micro_batch;     /* samples per data-parallel rank per micro-step */
  int64_t pipeline_degree; /* stages (a changed degree drops the config's per-chunk layer split) */
  int64_t virtual_stages;  /* model chunks per stage */
  int64_t seq_len;         /* tokens per sequence (else the config's seq_len, else the model's) */
  int recompute;           /* 1 + MmRecompute (0: the config's) */
  int schedule;            /* 1 + MmPipeSchedule (0: the config's); without virtual_stages, interleaved_1f1b
                            * keeps the config's chunks, dualpipev takes 2, the others 1 */
  MmAlgorithm algorithm[MM_COLL_COUNT]; /* forced collective algorithms (MM_ALGO_AUTO: the config's) */
  const MmStrategyEntry *strategies;    /* replaces the config's parallelism when non-NULL (borrowed) */
  guint n_strategies;
  double scale[MM_SCALE_COUNT];         /* hardware what-if factors */
  /* (a field added here goes into mm_point_key too) */
} MmPoint;

/* Appends to @key bytes that are equal for two points exactly when the points are: every field,
 * the strategy entries by their contents, not their address (doubles by their bits: 0.0 and
 * -0.0 differ). Points with equal keys derive the same scenario from the same inputs, and
 * simulate the same (a sweep evaluates such points once: a ZeRO stage is no part of a point
 * whose strategies have no ddp level). */
void mm_point_key(const MmPoint *pt, GByteArray *key);

/* ---- scenario: model x hardware x config, cross-checked ------------------ */

/* One block's strategy resolved against the system. */
typedef struct {
  const MmStrategyEntry *entry;           /* (transfer none) */
  MmLevel levels[MM_MAX_LEVELS];          /* degrees resolved, innermost first */
  int64_t stride[MM_MAX_LEVELS];          /* device-index distance between group members */
  guint n_levels;
  int64_t degree[MM_STRAT_COUNT];         /* product of the degrees of each strategy */
  int64_t dp;                             /* ranks with different samples: fsdp x ddp x ep */
  gboolean sp;                            /* Megatron sequence parallelism on its tp levels */
  gboolean experts_sharded;               /* without ep: experts split over the TP ranks, not spread */
  int zero;                               /* ZeRO stage of its ddp levels (0: plain DDP) */
  MmCpImpl cp_impl;
  uint32_t fsdp_mask;                     /* the strategies FSDP shards over: fsdp, and cp where its levels say fsdp */
  int64_t fsdp_shards;                    /* the ranks of that group (1: no FSDP) */
  MmOverlap tp_overlap, ep_overlap, mp_overlap; /* of its tp, ep, mp levels (bulk: none) */
  double tp_overlap_min_bytes;            /* tp overlap: smaller AllGathers / ReduceScatters stay bulk */
  int64_t overlap_chunks;                 /* ep pipelined, mp fused: pieces */
  gboolean frozen;                        /* no weight gradients, no optimizer state */
  MmDtype compute_dtype, grad_dtype;
  const MmOptimizer *optimizer;           /* (transfer none) */
  double samples_per_micro;               /* samples one device processes per micro-step */
  double mp_fraction;                     /* embedding_bag: pieces on the busiest device / all (1 otherwise) */
  /* parallel folding (the config's "experts"): the expert layers' own levels over the stage, innermost
   * first: tp (ETP), ep (EP), ddp (EDP, the block's ZeRO stage), as Megatron-Core's expert RankGenerator
   * orders them; n_expert_levels 0: the expert layers follow the block's levels */
  MmLevel expert_levels[3];
  int64_t expert_stride[3];
  guint n_expert_levels;
  int64_t expert_degree[MM_STRAT_COUNT];  /* product of the expert levels' degrees per strategy */
} MmBlockSetup;

/* Whether block @bs's expert layers take their own layout (parallel folding). */
static inline gboolean mm_plan_folded(const MmBlockSetup *bs)
{
  return bs->n_expert_levels > 0;
}

typedef struct {
  const MmModel *model;            /* the scenario's views of the loaded inputs (which outlive it) */
  const MmHardware *hw;
  const MmParallelConfig *cfg;
  int64_t devices;
  int64_t global_batch;            /* samples per iteration */
  guint ref_block;                 /* block whose data-parallel ranks micro_batch counts */
  int64_t dp_ref;
  int64_t micro_batch;             /* samples per dp_ref rank per micro-step */
  int64_t micro_steps;             /* gradient-accumulation steps (pipeline micro-batches) per iteration */
  int64_t pp;                      /* pipeline stages (outermost device digit) */
  int64_t vstages;                 /* model chunks per stage */
  int64_t stage_devices;           /* devices per stage: the block levels multiply to this */
  int64_t layer_units;             /* repeated layers the pipeline splits (transformer and mlp units) */
  int64_t ep_stride, ep_degree;    /* the expert-parallel group of the first MoE block (degree 1: none) */
  MmBlockSetup *blocks;            /* one per model block */
  /* the views a point derives (model, hw and cfg point at them; strings stay borrowed) */
  MmModel model_view;
  MmHardware hw_view;
  MmParallelConfig cfg_view;
  MmBlock *view_blocks;            /* a copy of the blocks when the point changes seq_len */
  char *view_hw_name;              /* "..., resized to N nodes" */
} MmScenario;

/* Derives the scenario of point @pt (NULL: the files as loaded) from loaded inputs, which
 * it never edits and which must outlive it: applies the overrides to views it owns,
 * resolves degrees ("node", "nodes", "all"), checks them against the system and the model
 * (product = devices, TP divides heads, MP fits the tables, ...) and derives the batch
 * split. Errors name the config file. (transfer full) */
MmScenario *mm_scenario_new(const MmModel *m, const MmHardware *hw, const MmParallelConfig *c, const MmPoint *pt,
                            GError **error);
void mm_scenario_free(MmScenario *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmScenario, mm_scenario_free)

/* True when every member of a level's group sits in one node. */
gboolean mm_level_intra_node(const MmScenario *s, const MmBlockSetup *b, guint level);


/* Bytes held by one device, by category. */
typedef struct {
  double weights;
  double gradients;
  double optimizer;
  double activations;
  double kv_cache;
  double comm_buffers;
} MmMemoryParts;

static inline double mm_memory_parts_sum(const MmMemoryParts *p)
{
  return p->weights + p->gradients + p->optimizer + p->activations + p->kv_cache + p->comm_buffers;
}

/* Per-device memory of the busiest device (uneven table-wise sharding puts
 * ceil(tables / degree) tables on some devices; with pipeline stages, the stage
 * that needs most). */
typedef struct {
  MmMemoryParts total;
  MmMemoryParts *blocks;    /* per model block (of the busiest stage); comm buffers are global (0 here) */
  double transient_activations; /* in total.activations: the unit being recomputed (full, op_selective
                                 * recompute), the largest working set (inference) or the two units of
                                 * the activation offload's double buffer */
  guint n_blocks;
  double per_device_bytes;  /* sum of total */
  double capacity_bytes;    /* HBM of the device */
  gboolean fits;
  uint32_t n_stages;        /* pipeline stages (1: none) */
  uint32_t stage;           /* the busiest */
  double *stage_bytes;      /* per stage: per-device bytes */
  double *stage_inflight;   /* per stage: micro-batches whose activations its first chunk holds at the peak */
  double kv_tokens;         /* serving: tokens of context one sequence caches */
  double host_bytes;        /* optimizer offload: states and master weights one device keeps in host
                             * memory (the fullest stage's); 0 without offload */
} MmMemory;

/* Computes per-device memory of @s (training: weights, gradients, optimizer
 * states, activations of one micro-batch, communication buffers; inference:
 * weights and the largest layer's working set). (transfer full) */
MmMemory *mm_memory_new(const MmScenario *s, const MmGraph *g);
void mm_memory_free(MmMemory *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmMemory, mm_memory_free)

/* Optimizer bytes per trained parameter of block @b: states, plus an fp32 master copy. */
double mm_plan_optimizer_bytes(const MmOptimizer *o, const MmBlock *b);
/* Adds to @bytes what the optimizer step of block @b moves to update @params parameters: the
 * weights read and written (@e bytes each), the gradient read (@ge), states and master weights
 * read and written; LAMB reads the weights and the fp32 update again, Adafactor the gradient. */
void mm_plan_optimizer_step_add(double *bytes, const MmOptimizer *o, const MmBlock *b, double params, double e,
                                double ge);

/* Megatron sequence parallelism applies to the sequence blocks of a tp group. */
static inline gboolean mm_plan_seq_parallel(const MmScenario *s, guint block)
{
  MmBlockKind k = s->model->blocks[block].kind;
  return s->blocks[block].sp && s->blocks[block].degree[MM_STRAT_TP] > 1 &&
         (k == MM_BLOCK_TRANSFORMER || k == MM_BLOCK_TOKEN_EMBEDDING || k == MM_BLOCK_LM_HEAD);
}


/* First block (forward order) that is trained: blocks before it run no backward;
 * n_blocks when none is. */
static inline guint mm_plan_first_trained(const MmScenario *s)
{
  for (guint i = 0; i < s->model->n_blocks; i++)
    if (!s->blocks[i].frozen) return i;
  return s->model->n_blocks;
}

/* Fixed cost of one kernel of a pass over @g: eager launch, or replay from a captured
 * graph (serving "cuda_graphs", decode steps only). */
static inline double mm_plan_launch_s(const MmScenario *s, const MmGraph *g)
{
  return g->pass.decode && s->cfg->serving.cuda_graphs ? s->hw->device.graph_launch_overhead_s
                                                        : s->hw->device.launch_overhead_s;
}

/* Fraction of a block's parameters held by the busiest device. */
double mm_plan_param_fraction(const MmScenario *s, guint block, const MmLayer *layer);

typedef enum { MM_PHASE_FWD, MM_PHASE_BWD, MM_PHASE_RECOMPUTE, MM_PHASE_OPTIMIZER, MM_PHASE_COUNT } MmPhase;
extern const char *const mm_phase_names[];

/* ---- strategies and placement ------------------------------------------- *
 * A strategy is one row of mm_strategy_rows: which block kinds it applies to, its checks,
 * and its place() function. The placement of a layer composes the rows of its block's
 * levels: the device's share of the layer's parameters, work, weight reads, activations,
 * the collectives at its boundaries and whose gradients are averaged over which groups.
 * Memory, lowering and describe all read placements, so they cannot disagree. */

#define MM_KIND(k) (1u << (k))
#define MM_KINDS_ALL ((1u << MM_BLOCK_KIND_COUNT) - 1u)
#define MM_KINDS_SEQUENCE (MM_KIND(MM_BLOCK_TRANSFORMER) | MM_KIND(MM_BLOCK_TOKEN_EMBEDDING) | MM_KIND(MM_BLOCK_LM_HEAD))
#define MM_STRAT_MASK(strategy) (1u << (strategy))
/* In a collective's strategy mask: its groups are those of the block's expert layout (parallel
 * folding: tp is ETP, ep is EP, ddp is EDP), not of its own levels. */
#define MM_MASK_EXPERTS (1u << 31)
G_STATIC_ASSERT(MM_STRAT_COUNT < 31);
#define MM_COLL_NONE MM_COLL_COUNT

/* One collective at a layer's boundary: before or after its compute in the forward (the
 * backward mirrors the order: the gradients of "after" collectives come before the input
 * gradient, those of "before" ones after it). */
typedef struct {
  uint8_t after;           /* 0: before the layer's compute, 1: after it */
  uint8_t outer;           /* wraps the others (MoE dispatch/combine around TP): first before, last after */
  uint8_t fwd, bwd;        /* MmCollKind in forward (and recompute) and in backward; MM_COLL_NONE: none */
  uint8_t reason;          /* MmReason */
  uint8_t input_grad_only; /* the backward one only where the layer computes its input gradient */
  uint8_t wgrad_beside;    /* the weight gradient runs beside the backward one (it waits for its input) */
  uint32_t mask;           /* strategies whose levels form the group */
  double fwd_bytes, bwd_bytes; /* one device, one micro-batch */
  double regather_bytes;   /* > 0: the input all-gathered again beside the backward one, for the
                            * weight gradient (sequence parallelism) */
} MmPlaceColl;

#define MM_PLACE_MAX_COLLS 6

typedef struct {
  double param_frac;  /* of the layer's parameters one device holds */
  double work_frac;   /* of its per-sample FLOPs and activation traffic one device runs (mean expert load) */
  double weight_frac; /* of its weights one device reads per pass */
  double act_frac;    /* of its kept activations one device holds */
  double mask_scale;  /* its output-side kept bytes (cost.mask_bytes) are mask_scale x act_frac of them: tp
                       * for a row-parallel layer without sequence parallelism, whose all-reduced output is
                       * whole on every TP rank; else 1 */
  double kv_frac;     /* transformer: of the K/V cache one device holds */
  double seq_split;   /* ranks each sequence's tokens are split over (context / Ulysses parallel) */
  gboolean load_scaled; /* an expert layer spread over an ep group: work follows the rank's routed load */
  uint32_t n_colls;
  MmPlaceColl colls[MM_PLACE_MAX_COLLS];
  uint32_t ring_mask;     /* ring attention: compute in pieces while K/V pass around this group (0: none) */
  double ring_fwd_bytes, ring_bwd_bytes;
} MmPlacement;

/* Whose gradients a strategy's groups average. */
typedef enum { MM_REPLICAS_NONE, MM_REPLICAS_ALL, MM_REPLICAS_DENSE } MmReplicas;

typedef struct {
  MmStrategy id;
  uint32_t kinds;          /* MM_KIND() of the block kinds it applies to */
  const char *kinds_hint;  /* appended to "... block X is a K": what to use instead */
  gboolean data_parallel;  /* its ranks process different samples */
  gboolean splits_sequence;/* its ranks hold different tokens of each sequence */
  MmReplicas replicas;     /* parameters whose gradients its groups average */
  /* Checks a level of block @b (degrees resolved in @bs); NULL or a message (transfer full)
   * with *@field set to the level key it is about ("strategy", "degree"). */
  char *(*check)(const MmScenario *s, const MmBlock *b, const MmBlockSetup *bs, const MmLevel *l,
                 const char **field);
  /* Applies the strategy (degree bs->degree[id] > 1) to the placement of layer @li. */
  void (*place)(const MmScenario *s, const MmGraph *g, uint32_t li, MmPlacement *p);
} MmStrategyRow;

/* The row of @st (NULL for PP and SP, which are not levels). */
const MmStrategyRow *mm_strategy_row(MmStrategy st);

/* The placement of layer @li of @g under @s. */
void mm_plan_place(const MmScenario *s, const MmGraph *g, uint32_t li, MmPlacement *out);

/* Bytes layer @l keeps for backward per sample on one device under placement @p: its input-side
 * activations split by act_frac, its output-side ones (dropout masks) as its output is. */
double mm_plan_kept_bytes(const MmLayer *l, const MmPlacement *p);

/* Strategies whose groups average the gradients of block @b's (expert or other) parameters. */
uint32_t mm_plan_grad_replicas(const MmScenario *s, guint b, gboolean expert);

/* Whether @st's ranks process different samples (FSDP, DDP, EP). */
gboolean mm_plan_data_parallel(MmStrategy st);

/* Pieces of embedding block @b that @sk sharding splits: tables, rows or columns. */
int64_t mm_plan_mp_pieces(const MmBlock *b, MmShardKind sk);

/* Product of block @b's degrees over the strategies in @mask (with MM_MASK_EXPERTS, of its
 * expert layout's). */
static inline int64_t mm_plan_mask_degree(const MmBlockSetup *bs, uint32_t mask)
{
  const int64_t *deg = mask & MM_MASK_EXPERTS ? bs->expert_degree : bs->degree;
  int64_t d = 1;
  /* the set strategy bits only, lowest first (the same product as a scan of every strategy) */
  for (uint32_t m = mask & (MM_STRAT_MASK(MM_STRAT_COUNT) - 1u); m; m &= m - 1u) d *= deg[__builtin_ctz(m)];
  return d;
}

/* The levels (and their strides) whose groups a collective of @mask spans: block @bs's own, or
 * with MM_MASK_EXPERTS its expert layout's. Returns how many. */
static inline guint mm_plan_mask_levels(const MmBlockSetup *bs, uint32_t mask, const MmLevel **levels,
                                        const int64_t **stride)
{
  const gboolean ex = (mask & MM_MASK_EXPERTS) != 0;
  *levels = ex ? bs->expert_levels : bs->levels;
  *stride = ex ? bs->expert_stride : bs->stride;
  return ex ? bs->n_expert_levels : bs->n_levels;
}

/* Whether block @b's optimizer runs on the host (optimizer.offload: cpu): a trained block of a
 * training task; embedding tables keep their fused in-place update. */
static inline gboolean mm_plan_offloaded(const MmScenario *s, guint b)
{
  const MmBlockSetup *bs = &s->blocks[b];
  return s->cfg->task != MM_TASK_INFERENCE && !bs->frozen && bs->optimizer->offload == MM_OFFLOAD_CPU &&
         s->model->blocks[b].kind != MM_BLOCK_EMBEDDING_BAG;
}

/* Whether ZeRO-1/2 all-gathers block @b's updated weights: a trained block under ZeRO (embedding
 * tables update in place, in their fused backward). */
static inline gboolean mm_plan_zero_gathers(const MmScenario *s, guint b)
{
  const MmBlockSetup *bs = &s->blocks[b];
  return bs->zero > 0 && !bs->frozen && s->model->blocks[b].kind != MM_BLOCK_EMBEDDING_BAG;
}

/* Expert load of the busiest expert-parallel rank (the lowering's hot class) under expert_skew:
 * (1 + skew) x the mean routed tokens; 1 without skew. */
static inline double mm_plan_hot_expert_load(const MmScenario *s)
{
  return s->cfg->expert_skew > 0 && s->ep_degree > 1 ? 1.0 + s->cfg->expert_skew : 1.0;
}

/* ZeRO-1/2: the ranks block @b's optimizer states (and stage-2 gradients) are sharded over,
 * its gradient replicas (mm_plan_grad_replicas); 1 without ZeRO. */
static inline double mm_plan_zero_shards(const MmScenario *s, guint b, gboolean expert)
{
  const MmBlockSetup *bs = &s->blocks[b];
  if (bs->zero <= 0) return 1.0;
  return (double)mm_plan_mask_degree(bs, mm_plan_grad_replicas(s, b, expert));
}

/* The exchange of a sharded embedding block's pooled outputs in @phase (fwd or bwd): its
 * kind and the bytes one device sends per micro-batch. */
double mm_plan_mp_exchange(const MmScenario *s, const MmGraph *g, guint b, MmPhase phase, MmCollKind *kind);

/* Whether layer @li combines its MoE layer's routed copies (top_k per token) back into one row per
 * token: a transformer layer's expert down-projection, an MoE MLP block's last layer. */
gboolean mm_plan_moe_combines(const MmScenario *s, const MmGraph *g, uint32_t li);
/* The graph passes scenario @s simulates: with a serving config its prefill (@first) and one
 * decode step at the average context (@decode; returns TRUE); otherwise one pass in @first (a
 * training iteration's, or the inference task's forward in eval mode: no dropout). */
gboolean mm_plan_graph_passes(const MmScenario *s, MmGraphPass *first, MmGraphPass *decode);
/* HBM bytes per local parameter of block @b that "grad_accumulation": "separate" moves after every
 * micro-batch's backward (the new gradient read in the block's dtype, the buffer read and written
 * in the grads dtype); 0 where gradients are not accumulated by a separate pass (fused, FSDP,
 * embedding_bag tables, frozen blocks). */
double mm_plan_grad_accum_bytes(const MmScenario *s, guint b);

/* ---- lowering: op streams ----------------------------------------------- */

typedef enum {
  MM_STREAM_COMPUTE,
  MM_STREAM_COMM_INTRA,
  MM_STREAM_COMM_INTER,
  MM_STREAM_PP_SEND_FWD, /* pipeline: activations to the next stage */
  MM_STREAM_PP_SEND_BWD, /* gradients to the previous stage */
  MM_STREAM_PP_RECV_FWD,
  MM_STREAM_PP_RECV_BWD,
  MM_STREAM_OFFLOAD_D2H, /* activation offload: copies to host memory after a layer's forward */
  MM_STREAM_OFFLOAD_H2D, /* and back before its backward */
  MM_STREAM_HOST, /* optimizer offload: gradient and weight copies over the host link, the CPU step */
  MM_STREAM_COUNT
} MmStreamId;
extern const char *const mm_stream_names[];


/* MM_OP_COPY: an activation copy between device and host memory (activation offload);
 * HOST_COPY: a copy between the device and host memory over the host link (optimizer offload);
 * HOST_STEP: the optimizer step on the CPU. None is device compute or a collective.
 * GRAD_ACCUM: a unit's weight gradients added to the gradient buffer after its backward
 * ("grad_accumulation": "separate"); device compute, memory bound. */
typedef enum { MM_OP_COMPUTE, MM_OP_LOOKUP, MM_OP_OPTIMIZER, MM_OP_COLLECTIVE, MM_OP_COPY, MM_OP_HOST_COPY,
               MM_OP_HOST_STEP, MM_OP_GRAD_ACCUM } MmOpWhat;

/* Why a collective exists. */
typedef enum {
  MM_REASON_FSDP,
  MM_REASON_TP,
  MM_REASON_DDP,
  MM_REASON_MP,
  MM_REASON_MOE,  /* expert dispatch / combine */
  MM_REASON_PP,   /* pipeline sends and receives, tied-embedding gradient */
  MM_REASON_CP,   /* context parallel K/V exchange */
  MM_REASON_ZERO, /* ZeRO-1/2: updated weights gathered after the optimizer step */
  MM_REASON_ULYSSES, /* DeepSpeed-Ulysses: sequence <-> heads All2All around attention */
  MM_REASON_COUNT
} MmReason;
extern const char *const mm_reason_names[];

#define MM_NO_UNIT UINT32_MAX

/* What an op is, for reports and traces (the engine sees only MmEngineOp). */
typedef struct {
  uint8_t what;     /* MmOpWhat */
  uint8_t phase;    /* MmPhase */
  uint8_t coll;     /* MmCollKind (collectives) */
  uint8_t reason;   /* MmReason (collectives) */
  uint16_t chunk;   /* pipeline model chunk (0 without pipeline) */
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
  uint8_t overlap;    /* MmOverlap of its fused group (bulk when fused is 0) */
  uint32_t fused;     /* the decomposed (overlapped) or fused op it is a piece of: a group id from 1, 0: none */
} MmOpInfo;

typedef struct {
  gboolean per_device; /* one class per device instead of one per behaviour */
  uint32_t micro_steps; /* micro-batches to lower (0: the scenario's); fewer for a steady-state run
                         * (mm_plan_steady_micro_steps) */
  gboolean no_replay;   /* lower every collective and template item by item, without the expansion
                         * cache and the recorded replays (the same program, slower: for tests) */
} MmPlanOptions;

/* One step of a pipeline schedule on one stage. */
typedef struct {
  uint8_t bwd;    /* 0 forward, 1 backward (zb_h1, dualpipev: its input gradient), MM_PIPE_W a weight-gradient
                   * pass, MM_PIPE_BW (dualpipev) a backward not split: both gradients */
  uint16_t chunk; /* local model chunk (0 .. virtual_stages - 1) */
  uint32_t micro; /* micro-batch */
} MmPipeStep;

enum { MM_PIPE_W = 2, MM_PIPE_BW = 3 };

/* The order in which stage @stage of @p stages runs the forwards (and with @backward the
 * backwards) of @m micro-batches over @v chunks: GPipe, 1F1B (PipeDream-Flush),
 * Megatron's interleaved 1F1B, ZB-H1 or DualPipeV (v = 2, m >= 2p). Writes m * v (x 2 with
 * backward; x 3 for zb_h1, whose weight-gradient passes are steps of their own; dualpipev: 4m
 * and a W for each of its 2p - stage - 1 split backwards) steps into @out. */
guint mm_pipe_schedule(MmPipeSchedule kind, guint p, guint v, guint m, guint stage, gboolean backward,
                       MmPipeStep *out);

/* The stage that runs model chunk @k (0 .. stages x virtual stages - 1, in model order): k mod
 * stages, or with dualpipev's V chunk k < p on stage k and chunk k >= p on stage 2p - 1 - k. */
uint32_t mm_pipe_chunk_stage(const MmScenario *s, uint32_t k);
/* The model chunk stage @stage runs as its local chunk @c (mm_pipe_chunk_stage's inverse). */
uint32_t mm_pipe_stage_chunk(const MmScenario *s, uint32_t stage, uint32_t c);

/* Model chunk (stage-major: chunk k runs on stage mm_pipe_chunk_stage(k)) of every graph unit:
 * transformer and mlp layers split by count (or per the config's layers), other
 * blocks with the neighbouring layers. (transfer full, n_units entries) */
uint32_t *mm_pipe_unit_chunks(const MmScenario *s, const MmGraph *g);

/* Ops [start, start + n_ops) of a program, replayed by the lowering from the record @rec of a
 * template (template.c): the same ops as every other replay of that record, each dependency on
 * the replay's inputs replay_in[in_first .. + in_n) and the rest on its own ops the same distance
 * back. Two replays of one record with one phase whose inputs are d ops apart and which start d
 * ops apart are the same ops d apart (mm_plan_runs compares them whole). */
typedef struct {
  uint32_t start, n_ops, rec, in_first;
  uint8_t in_n, phase;
} MmPlanReplay;

/* A device behaviour: its pipeline stage and, with routing skew, whether it is the ep
 * rank that receives the excess tokens. Each behaviour lowers to its own program. */
typedef struct {
  MmEngineProgram program;
  MmEngineOp *ops;
  MmOpInfo *info;
  uint32_t *deps;
  MmTime *dur;
  uint32_t n_ops;
  uint32_t *xfer_link; /* collectives' per-link traffic (MmEngineProgram.xfer_*) */
  double *xfer_bytes;
  uint32_t stage;
  gboolean hot;
  int64_t devices;     /* devices behaving like this */
  uint32_t rep_device; /* one of them */
  /* the steady 1F1B part of its schedule: pair j (a forward and a backward step) is ops
   * [pair_first[j], pair_first[j + 1]); n_pairs 0 without one (GPipe, inference) */
  uint32_t *pair_first;
  uint32_t n_pairs;
  /* the recorded replays in its ops, by start (none in a cut copy) */
  MmPlanReplay *replays;
  uint32_t n_replays;
  uint32_t *replay_in;
} MmPlanProgram;

/* A run of identical periods in a cut program (mm_plan_cut): ops [first, first + periods x len)
 * kept, @cut more periods in the whole program. Found in a whole program (mm_plan_runs): @need,
 * the ops a cut must keep at the run's head and tail (its own ops' longest reach back, and how
 * far from its nearer end lies any op of it that a later op depends on). */
typedef struct {
  uint32_t first, len, periods;
  uint32_t cut;
  uint32_t need;
} MmPlanRun;

/* The lowered iteration: a program per device behaviour, and the device classes running them. */
typedef struct {
  const MmScenario *scenario; /* (transfer none) */
  const MmGraph *graph;
  MmPlanProgram *programs;
  MmEngineProgram *engine_programs; /* the programs' engine views, for mm_engine_new */
  uint32_t n_programs;
  MmLinks links;       /* the resources of one device */
  double *link_bw;     /* bytes per picosecond, per link */
  MmEngineClass *classes;
  int64_t *class_count; /* devices each class stands for */
  uint32_t n_classes;
  gboolean per_device;  /* one class per device (--per-device), else one per program */
  double model_flops_per_iteration; /* all devices */
  double peak_flops_per_device;     /* dense peak of the main block's compute dtype */
  MmDtype mfu_dtype;
  uint32_t *unit_chunk; /* per graph unit: its pipeline chunk */
  uint32_t micro_steps;  /* micro-batches lowered (the scenario's unless a steady-state run asked fewer) */
  /* the schedule's period: adding period_micro micro-batches adds period_pairs steady pairs to
   * every stage's program, the same ops in the same order (0: no steady part) */
  uint32_t period_pairs, period_micro;
  /* a cut copy (mm_plan_cut): the runs of identical layer periods it shortened (NULL, 0: none) */
  MmPlanRun *runs;
  uint32_t n_runs;
} MmPlan;

/* The layer reduction. A symmetric program (one behaviour, one class, not --per-device) repeats
 * each transformer layer's forward, backward or recompute op sequence in a micro-step: a run of
 * identical periods, each op the same op as the one a period before it (the same stream, time,
 * transfers, group and kind, each dependency the same distance back). mm_plan_runs finds the runs
 * of at least 2 x MM_PLAN_CUT_KEEP periods (NULL: none, or not such a program); mm_plan_cut
 * copies @p with each run of at least 2 x @keep periods shortened to its first and last @keep / 2
 * periods, where no op after the run depends on one left out and the run's own ops reach back at
 * most @keep / 2 periods: the kept ops renumbered (a program collective's id is its new index),
 * c->runs saying what was left out. A run of the copy stands for the whole program when each run's
 * kept periods repeat exactly (mm_report_run_metrics_cut). NULL when nothing can be cut. */
#define MM_PLAN_CUT_KEEP 6
typedef GArray MmPlanRuns; /* of MmPlanRun, .first in @p's program, .cut 0, .need set */
MmPlanRuns *mm_plan_runs(const MmPlan *p);
MmPlan *mm_plan_cut(const MmPlan *p, const MmPlanRuns *runs, uint32_t keep);

/* Micro-batches to lower (congruent to the scenario's modulo the period) so that every stage's
 * schedule holds at least @periods whole periods of steady 1F1B pairs; 0 when the schedule has no
 * steady part (GPipe, inference) or that is not fewer than the scenario's. A run of that many
 * stands for the whole iteration when its periods repeat exactly (mm_report_run_metrics_steady). */
uint32_t mm_plan_steady_micro_steps(const MmScenario *s, uint32_t periods);
/* Whether FSDP gathers a fully recomputed layer again for its backward after its recompute
 * (fsdp_regather_recompute under full recompute, with fsdp_reshard_after_forward). */
gboolean mm_plan_regathers(const MmScenario *s);

/* The program class @c runs. */
static inline const MmPlanProgram *mm_plan_class_program(const MmPlan *p, uint32_t c)
{
  return &p->programs[p->classes[c].program];
}

/* What one scenario may ask for; mm_scenario_new rejects more (MM_CONFIG_ERROR_RANGE, naming the
 * config's batch, micro-batch, sequence length or serving keys). Ops: the lowering's estimate
 * of one device program's ops, 3 x (layers + 6 x units + 16) x micro-steps / pipeline stages
 * (an op holds about 230 bytes of plan and engine state; the estimate runs 1.5 to 15 times
 * the real count). Time: the larger of the serialized compute and the serialized
 * communication of the busiest device in one iteration (prefill, decode step), an estimate
 * within a factor of 2 of the simulated time, far below the 1.8e7 s the engine's picosecond
 * clock holds. */
#define MM_PLAN_MAX_OPS (1 << 24)
/* The programs of all pipeline stages are held at once: their estimated ops together. */
#define MM_PLAN_MAX_TOTAL_OPS (1 << 26)
#define MM_PLAN_MAX_ITERATION_S 1e6 /* 11.6 days */
/* --per-device runs a class per device, each with its program's op states (23 to 38 bytes per op
 * and device in the engine, measured: 2048 devices x 523,000 ops asked 41 GB; scripts/bench-scale.sh's
 * 405B layout on 131,072 GPUs runs about 4e8 ops in 9.3 GB): the ops of all devices together, at
 * most 2^29 (about 12-20 GB); and the streams of all devices, at most what the engine numbers
 * (MM_ENGINE_MAX_STREAMS). */
#define MM_PLAN_MAX_PER_DEVICE_OPS (1 << 29)

/* Lowers one training (or inference) iteration of @s: forward, backward
 * (input- and weight-gradient), recompute, optimizer; FSDP gathers with
 * prefetch and reduce-scatters, TP all-reduces (SP: reduce-scatters and
 * all-gathers), DDP bucketed all-reduces (ZeRO: reduce-scatters, weight
 * all-gathers), MP and MoE all-to-alls, CP K/V exchange, pipeline stages with
 * their schedule and point-to-point transfers. A resolved scenario always lowers (its
 * inputs were checked when it was derived). (transfer full) */
MmPlan *mm_plan_new(const MmScenario *s, const MmGraph *g, const MmPlanOptions *opt);
void mm_plan_free(MmPlan *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmPlan, mm_plan_free)

/* "decoder.17 bwd" / "all_gather fsdp decoder.17 fwd" (transfer full) */
char *mm_plan_op_name(const MmPlan *p, const MmPlanProgram *prog, uint32_t op);

/* What one device runs of one part of layer @li per micro-batch under placement @p, with
 * expert layers at @load x the mean routed tokens: the kernel's shape, executed and MFU
 * FLOPs, HBM bytes, and its time from the cost unit (mm_cost_kernel_s; launch not included).
 * Lowering and describe both call it. @why (may be NULL) receives the factors used. */
typedef struct {
  MmKernel kernel;
  double flops, model_flops, bytes;
  double time_s;
  double cast_bytes, cast_s; /* of bytes and time_s: an FP8 recipe's casts before the GEMM */
} MmPartWork;
void mm_plan_part_work(const MmScenario *s, const MmGraph *g, uint32_t li, MmKernelPart part, const MmPlacement *p,
                       double load, MmPartWork *out, MmCostWhy *why);
/* The forward part of layer @li as a recompute before its backward runs it: the forward's work,
 * but under precision.fp8_param_gather its weight is already gathered in FP8 (no shard cast,
 * unless fsdp_regather_recompute gathers it again for the recompute). */
void mm_plan_recompute_work(const MmScenario *s, const MmGraph *g, uint32_t li, const MmPlacement *p, double load,
                            MmPartWork *out, MmCostWhy *why);
/* Whether the recompute of layer @li costs otherwise than its forward (mm_plan_recompute_work). */
gboolean mm_plan_recompute_differs(const MmScenario *s, const MmGraph *g, uint32_t li);

/* Whether block @bs's GEMMs run under an FP8 recipe (training in fp8, recipe not "all"). */
gboolean mm_plan_fp8_recipe(const MmScenario *s, const MmBlockSetup *bs);
/* The elements of layer @li's GEMM weight (all its experts'; without a bias): 0 for a layer that is no
 * GEMM or has no weight of its own (a tied head reads the embedding table). */
double mm_plan_gemm_weight_elems(const MmScenario *s, const MmGraph *g, uint32_t li);
/* Bytes per element of layer @li's parameters in an FSDP or ZeRO parameter all-gather (and its
 * gathered buffer): its block's dtype, the weight of an FP8 GEMM at 1 under
 * precision.fp8_param_gather (its bias in the dtype). */
double mm_plan_gather_elem_bytes(const MmScenario *s, const MmGraph *g, uint32_t li);

/* Share of its experts' weights the busiest device of an expert group reads in one pass of
 * @samples samples (1 for non-expert layers, and in training). */
double mm_plan_experts_read(const MmScenario *s, const MmGraph *g, const MmLayer *l, double samples);
G_END_DECLS

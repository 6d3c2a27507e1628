/* plan internals: the lowering state and the seams between the plan's files (not a public header). */
#pragma once

#include "plan.h"

#define NONE UINT32_MAX
#define MAX_DEPS 16 /* more are compacted to one per stream (mm__deps_add) */
G_STATIC_ASSERT(MAX_DEPS > MM_STREAM_COUNT);
#define MASK(strategy) (1u << (strategy))
/* Collective ids shared by different programs: pipeline transfers and the tied-embedding
 * gradient. Other collectives use their op index (below 2^31). */
#define COLL_SELF (MM_NO_COLL - 1)
#define COLL_TIED 0x7ffffff0u
#define COLL_P2P 0x80000000u

typedef struct {
  uint32_t v[MAX_DEPS];
  uint32_t n;
} Deps;

/* A copy of @d's used entries (or an empty set). */
static inline void deps_copy(Deps *to, const Deps *d)
{
  to->n = d ? d->n : 0;
  for (uint32_t i = 0; i < to->n; i++) to->v[i] = d->v[i]; /* usually one or two: no memcpy call */
}

typedef enum { PART_FWD, PART_BWD_IN, PART_BWD_W, PART_RECOMPUTE } Part; /* PART_RECOMPUTE: the forward as a recompute
                                                                           * runs it (Lower.parts_rec) */

/* A compute segment: consecutive layer parts that no collective separates. */
typedef struct {
  double time_s, flops, model_flops, bytes;
  uint32_t kernels, first, last;
  MmOpWhat what;
} Seg;

/* One unit's turn in the FSDP gather sequence. */
typedef struct {
  uint32_t unit;
  uint32_t micro;
  gboolean bwd;
  gboolean recompute; /* fsdp_regather_recompute: the gather of a backward's recompute (another follows) */
} GatherItem;

/* Per-device cost of one part of one layer (computed once per canonical layer). */
typedef struct {
  double flops, model_flops, bytes, time_s;
  gboolean lookup;
} PartCost;

/* Costs computed per collective kind, the last MEMO_WAYS distinct ones: identical layers repeat
 * them, and a forward and its backward alternate a few (the embedding's, a layer's, the head's). */
#define MEMO_WAYS 4
typedef struct {
  MmCollective in;
  MmCommCost out;
} CommMemo;

static inline gboolean same_coll(const MmCollective *a, const MmCollective *b)
{
  return a->kind == b->kind && a->bytes == b->bytes && a->degree == b->degree && a->stride == b->stride &&
         a->algorithm == b->algorithm && a->skew == b->skew && a->one_shot == b->one_shot &&
         a->route_top_k == b->route_top_k && a->route_nodes == b->route_nodes;
}

/* One op of an expanded collective (see CollExp): what emit_one emitted for it. */
typedef struct {
  double size, time_s, latency_s;
  int64_t degree, stride;
  uint32_t xfer_first, n_use; /* its transfers: Lower.cx_link / cx_bytes [xfer_first, + n_use) */
  uint8_t kind, algorithm, stream, sequential;
} CollStep;

/* What mm__emit_coll emitted for one (block, mask, kind, reason, bytes): within one lowering the
 * same ops every time (identical layers repeat their collectives), so repeats copy the steps
 * instead of grouping levels and costing the collective again. */
typedef struct {
  double bytes;
  const struct UnitTensors *tensors; /* the per-tensor calls it stands for (NULL: one call) */
  uint32_t mask, bi;
  uint8_t kind, reason, valid;
  uint32_t step_first, n_steps; /* Lower.cx_step [step_first, + n_steps); none: nothing moves */
} CollExp;

#define CX_SLOTS 64 /* direct-mapped expansions */

typedef struct Template Template;
typedef struct Rec Rec;

/* The parameter tensors of an FSDP unit (fsdp_collectives per_tensor_list): @count[i] tensors of
 * @frac[i] of the unit's parameters each, @persist[i]: small enough to stay gathered (no
 * all-gather; their gradients are reduce-scattered like the others); @n distinct sizes;
 * @persist_frac: the persistent ones' share of the unit's parameters. */
#define UNIT_TENSOR_SIZES 16
typedef struct UnitTensors {
  double frac[UNIT_TENSOR_SIZES];
  uint32_t count[UNIT_TENSOR_SIZES];
  uint8_t persist[UNIT_TENSOR_SIZES];
  uint32_t n;
  double persist_frac;
} UnitTensors;

typedef struct {
  const MmScenario *s;
  const MmGraph *g;
  const MmModel *m;
  const MmHardware *hw;
  const MmLinks *links;
  MmEngineOp *ops;
  MmOpInfo *info;
  MmTime *dur; /* per op: mm_time_from_s(info.fixed_s) (cap_ops + 1) */
  uint32_t n_ops, cap_ops;
  uint32_t *deps;
  uint32_t n_deps, cap_deps;
  uint32_t *xfer_link;
  double *xfer_bytes;
  uint32_t n_xfer, cap_xfer;
  PartCost *parts;      /* 3 per layer, indexed by canonical layer */
  PartCost *parts_rec;  /* per layer (canonical), the forward as its recompute runs it (mm_plan_recompute_work);
                         * NULL when every recompute costs its forward */
  gboolean rec_mode;    /* recording a recompute template: a forward part costs parts_rec */
  double *unit_dense;   /* per unit: non-expert parameters on one device after TP/MP, before FSDP */
  double *unit_expert;  /* per unit: expert parameters on one device after TP/EP, before FSDP */
  double *unit_gather;  /* per unit x {non-expert, expert}: those parameters' bytes in an all-gather (FP8 weights
                         * at 1 byte under precision.fp8_param_gather, mm_plan_gather_elem_bytes) */
  uint8_t *fsdp_unit;   /* per unit: its block is FSDP-sharded and it has parameters */
  UnitTensors **unit_tensors; /* per unit under per_tensor_list FSDP collectives (identical units share one;
                                 * NULL: flat collectives) */
  const UnitTensors *coll_tensors; /* the FSDP collective being emitted is one call per these tensors (NULL: one) */
  uint32_t *grad_mask;  /* per block: mm_plan_grad_replicas of its non-expert and expert parameters */
  Template *templates;  /* V_COUNT per distinct unit (see tmpl_slot), built on first use */
  uint32_t *tmpl_slot;  /* per unit: its canonical unit's group of templates (NONE: not looked up yet) */
  uint32_t n_tmpl, cap_tmpl;
  /* the template replay being recorded (template.c: Rec; NULL: none): its first op, unit, micro-batch,
   * phase, the unit's first layer, its input dependencies; rec_fail: it cannot be replayed from the record */
  Rec *rec;
  uint32_t rec_start, rec_u, rec_micro, rec_first;
  MmPhase rec_phase;
  const Deps *rec_in;
  gboolean rec_fail;
  gboolean no_replay; /* MmPlanOptions.no_replay */
  uint32_t n_recs;    /* records made (each record's id) */
  MmPlanReplay *replays; /* the replays of records emitted, in order (MmPlanProgram.replays) */
  uint32_t n_replays, cap_replays;
  uint32_t *replay_in;
  uint32_t n_replay_in, cap_replay_in;
  MmPlacement *place;   /* per canonical layer (see place_of) */
  uint32_t *place_of;   /* per layer: its canonical layer's index into place */
  uint32_t *canon_layer; /* the canonical layers, in order (place[i] is canon_layer[i]'s) */
  uint32_t n_canon;
  CommMemo *memo; /* MEMO_WAYS per kind, allocated on first use; memo_n[kind] of them filled */
  CollExp cx[CX_SLOTS]; /* expanded collectives (valid: recorded) */
  CollExp *cx_rec; /* the expansion mm__emit_coll is recording (NULL: none) */
  CollStep *cx_step;
  uint32_t n_cx_step, cap_cx_step;
  uint32_t *cx_link;
  double *cx_bytes;
  uint32_t n_cx_xfer, cap_cx_xfer;
  uint8_t memo_n[MM_COLL_COUNT], memo_last[MM_COLL_COUNT], memo_next[MM_COLL_COUNT];
  uint32_t last_on[MM_STREAM_COUNT];
  guint first_trained;
  gboolean training;
  double launch_s; /* per kernel: eager launch, or replay from a captured graph */

  /* the behaviour this program lowers */
  uint32_t stage;
  double expert_load; /* routed tokens this device's experts get / the mean */
  double a2a_skew;    /* its All2All traffic / the mean */

  /* pipeline */
  const uint32_t *unit_chunk;
  uint32_t p, v, K, nm; /* stages, chunks per stage, chunks, micro-batches */
  uint32_t *chunk_first, *chunk_end; /* unit range of each chunk */
  gboolean *chunk_trained;           /* runs a backward */
  uint32_t cur_chunk;
  uint8_t *recompute;      /* per unit: MM__RECOMPUTE_* under full recompute */
  uint8_t *offload;        /* per unit: its activations go to host memory (offload_num_layers) */
  uint32_t *offload_d2h;   /* micro x unit: the copy to host of its activations (NONE: none yet) */
  uint32_t *param_gather; /* overlap_param_gather: per unit its ZeRO all-gather op (NONE: not issued) */
  uint32_t *pair_first; /* ops at the start of each steady 1F1B pair, and after the last */
  uint32_t n_pairs;

  uint32_t n_fused; /* fused / decomposed op groups emitted (MmOpInfo.fused) */
  gboolean zb;      /* zb_h1: backwards lower their input gradients, W steps their weight gradients */
  uint32_t last_side; /* the last off-chain collective the latest replay emitted (NONE: none) */

  GatherItem *gq;
  uint32_t n_gq, gq_emitted, gq_pos;
  uint32_t *gq_op; /* gather op of each item */
} Lower;

typedef struct {
  uint32_t *fwd_out;  /* m x blocks: the op producing a block's output, per micro-batch */
  uint32_t *bwd_out, *mp_bwd;
  uint32_t *mp_bwd_first; /* fused exchange: the first op of a block's backward All2All chunks */
  gboolean *bwd_done;
  double *bucket_bytes; /* 2 x blocks: non-expert, expert gradients waiting for their AllReduce */
  uint32_t *bucket_dep;
  /* zb_h1: backwards whose weight-gradient pass is pending, oldest first, in a ring of zb_cap:
   * per unit of the chunk what its W waits for (2 ops) and whether it has one */
  uint32_t *zb_deps;
  uint8_t *zb_has;
  uint32_t zb_head, zb_n, zb_cap, zb_width;
} IterState;

/* template variants; the _B ones are a backward's input gradient without its weight gradient,
 * WGRAD that weight gradient (zb_h1) */
enum { MM__V_FWD, MM__V_BWD_IN, MM__V_BWD_NOIN, MM__V_SELECTIVE, MM__V_OP_SELECTIVE, MM__V_BWD_IN_B, MM__V_BWD_NOIN_B,
       MM__V_WGRAD, MM__V_RECOMPUTE, MM__V_COUNT }; /* RECOMPUTE: a full recompute's forward, where parts_rec */

/* Keeps one op per stream in @d, the latest: a stream runs its ops one at a time in program
 * order, so its latest op implies every earlier one. Leaves at most MM_STREAM_COUNT. */
void mm__deps_compact(const Lower *L, Deps *d);

/* Adds @op to @d. A full set is first compacted to one op per stream, so however many blocks
 * feed a block its set stays bounded. */
static inline void mm__deps_add(const Lower *L, Deps *d, uint32_t op)
{
  if (op == NONE) return;
  for (uint32_t i = 0; i < d->n; i++)
    if (d->v[i] == op) return;
  if (d->n == MAX_DEPS) mm__deps_compact(L, d);
  d->v[d->n++] = op;
}

/* Makes @d the set of @op alone (or empty): in place, without clearing the unused slots. */
static inline void mm__deps_set_one(Deps *d, uint32_t op)
{
  d->n = 0;
  if (op != NONE) d->v[d->n++] = op;
}

static inline Deps mm__deps_one(uint32_t op)
{
  Deps d = {.n = 0};
  if (op != NONE) d.v[d.n++] = op;
  return d;
}

/* emit.c: grows the op arrays for @nops more ops with @nd dependencies and @nx transfers. */
void mm__emit_grow(Lower *L, uint32_t nops, uint32_t nd, uint32_t nx);

/* Room for @nops more ops with @nd dependencies and @nx transfers in all. */
static inline void mm__emit_reserve(Lower *L, uint32_t nops, uint32_t nd, uint32_t nx)
{
  g_assert(L->n_ops + nops <= COLL_TIED);
  if (G_UNLIKELY(L->n_xfer + nx > L->cap_xfer || L->n_ops + nops > L->cap_ops || L->n_deps + nd > L->cap_deps))
    mm__emit_grow(L, nops, nd, nx);
}

/* template.c: adds op @idx, just emitted, to the replay being recorded */
void mm__rec_op(Lower *L, uint32_t idx);

/* Appends the engine side of an op (its dependencies, and the transfers @xbytes[i] over links
 * @link[i]: @nx of them, @sequential phases); the caller fills L->info[returned index], then
 * calls mm__emit_finish. (mm__emit does both from a prepared MmOpInfo.) */
static inline uint32_t mm__emit_start(Lower *L, MmStreamId stream, const Deps *d, uint32_t nx, const uint32_t *link,
                                      const double *xbytes, gboolean sequential, uint32_t coll, int64_t degree,
                                      int64_t stride, int32_t peer)
{
  const uint32_t idx = L->n_ops, nd = d ? d->n : 0;
  mm__emit_reserve(L, 1, nd, nx);
  L->ops[idx] = (MmEngineOp){
    .stream = stream, .dep_first = L->n_deps, .n_deps = nd,
    .coll = coll == COLL_SELF ? idx : coll, .degree = (uint32_t)degree, .stride = (uint32_t)stride, .peer = peer,
    .xfer_first = L->n_xfer, .n_xfer = (uint16_t)nx, .sequential = (uint8_t)(sequential != 0),
  };
  for (uint32_t i = 0; i < nx; i++) {
    L->xfer_link[L->n_xfer] = link[i];
    L->xfer_bytes[L->n_xfer++] = xbytes[i];
  }
  for (uint32_t i = 0; i < nd; i++) {
    g_assert(d->v[i] < idx);
    L->deps[L->n_deps++] = d->v[i];
  }
  return idx;
}

/* Completes op @idx (its info filled): its chunk, its fixed duration (from info.fixed_s, which
 * nothing changes later), the stream's last op. Returns @idx. */
static inline uint32_t mm__emit_finish(Lower *L, MmStreamId stream, uint32_t idx)
{
  const MmOpInfo *in = &L->info[idx];
  L->info[idx].chunk = (uint16_t)L->cur_chunk;
  /* interference (engine.h): the device's compute kernels slow while a collective kernel runs;
   * point-to-point transfers, host and offload copies (copy engines) and the ops the TP-overlap
   * and fused models price themselves take no part */
  if (in->fused == 0 && in->overlap == 0) {
    if (stream == MM_STREAM_COMPUTE && in->what != MM_OP_COLLECTIVE && in->what != MM_OP_COPY &&
        in->what != MM_OP_HOST_COPY && in->what != MM_OP_HOST_STEP && L->ops[idx].n_xfer == 0 &&
        L->ops[idx].coll == MM_NO_COLL) /* fixed ops only (engine.h) */
      L->ops[idx].cil = MM_CIL_SLOWED;
    else if ((stream == MM_STREAM_COMM_INTRA || stream == MM_STREAM_COMM_INTER) && in->what == MM_OP_COLLECTIVE &&
             in->coll != MM_COLL_P2P && in->coll != MM_COLL_PERMUTE)
      L->ops[idx].cil = MM_CIL_INTERFERES;
  }
  L->dur[idx] = mm_time_from_s(L->info[idx].fixed_s);
  L->n_ops++;
  L->last_on[stream] = idx;
  if (G_UNLIKELY(L->rec != NULL)) mm__rec_op(L, idx);
  return idx;
}

/* emit.c: ops, dependencies and collectives over strategy levels */
uint32_t mm__emit(Lower *L, MmStreamId stream, const Deps *d, const MmOpInfo *info, const MmCommCost *cost,
                  uint32_t coll, int64_t degree, int64_t stride, int32_t peer);
Deps mm__deps_all_streams(const Lower *L);
const MmCommCost *mm__coll_cost(Lower *L, const MmCollective *c);
uint32_t mm__emit_coll(Lower *L, guint bi, uint32_t mask, MmCollKind kind, MmReason reason, double bytes,
                       const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase);
uint32_t mm__emit_pair(Lower *L, MmStreamId stream, MmCollKind kind, gboolean moves_data, uint32_t coll,
                       int64_t delta, double bytes, const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase);
/* A copy between device and host memory over the host link (activation and optimizer offload). */
uint32_t mm__emit_host_copy(Lower *L, MmStreamId stream, MmOpWhat what, MmPhase phase, uint32_t unit, uint32_t micro,
                            double bytes, const Deps *d);
uint32_t mm__emit_p2p(Lower *L, gboolean send, gboolean bwd, uint32_t boundary, uint32_t micro, int64_t delta,
                      double bytes, const Deps *d, uint32_t unit);

/* costs.c: per-device work of a layer part */
/* The placement of layer @li (its canonical layer's). */
static inline const MmPlacement *mm__place(const Lower *L, uint32_t li)
{
  return &L->place[L->place_of[li]];
}
void mm__places_new(Lower *L);
/* The work of part @part of layer @li as the template being recorded runs it (a forward part of a
 * recompute, and PART_RECOMPUTE: mm_plan_recompute_work), and its cost. */
void mm__part_work(const Lower *L, uint32_t li, Part part, MmPartWork *w);
void mm__part_cost(const Lower *L, uint32_t li, Part part, PartCost *pc);
/* The cost of part @part of layer @li as the template being recorded runs it (a forward part of a
 * recompute: parts_rec). */
static inline const PartCost *mm__pc(const Lower *L, uint32_t li, Part part)
{
  const uint32_t c = L->g->layers[li].canon;
  return part == PART_FWD && L->rec_mode && L->parts_rec ? &L->parts_rec[c] : &L->parts[3 * c + part];
}
void mm__seg_add(Lower *L, Seg *seg, uint32_t li, Part part);
/* @frac of part @part of layer @li as @kernels kernels (each with its launch). */
void mm__seg_add_frac(Lower *L, Seg *seg, uint32_t li, Part part, double frac, uint32_t kernels);

/* template.c: unit templates and their replay */
uint32_t mm__lower_fwd(Lower *L, uint32_t u, uint32_t micro, MmPhase phase, const Deps *in);
uint32_t mm__lower_bwd(Lower *L, uint32_t u, uint32_t micro, const Deps *in, gboolean need_input_grad,
                       uint32_t *weights_done);
/* zb_h1: the backward of one unit without its weight gradient; @w_deps receives the two ops its
 * weight-gradient pass waits for (NONE where none). Returns the op producing its input gradient. */
uint32_t mm__lower_bwd_input(Lower *L, uint32_t u, uint32_t micro, const Deps *in, gboolean need_input_grad,
                             uint32_t w_deps[2]);
/* zb_h1: the weight-gradient pass of one unit; its compute op, or NONE when it has none. */
uint32_t mm__lower_wgrad(Lower *L, uint32_t u, uint32_t micro, const Deps *in);
uint32_t mm__emit_mp_exchange(Lower *L, uint32_t u, uint32_t micro, MmPhase phase, const Deps *d);
void mm__templates_free(Lower *L);

/* fsdp.c: per-unit parameters and the FSDP gather queue */
void mm__precompute_units(Lower *L);
double mm__unit_params(const Lower *L, uint32_t u);
/* The parameter tensors of layer @li as DeepSpeed ZeRO-3 registers them (a torch.nn.Parameter each):
 * a linear layer's weight and its bias, a LayerNorm's weight and bias (RMSNorm: weight), the token
 * and position embeddings, each expert's weights (a device holds experts / ep of them); a fused
 * projection (QKV, gate and up, MLA's) and a layer of embedding tables count as one. @elems[i]:
 * elements of one tensor on one device before FSDP sharding (after TP and EP; @param_frac: the
 * layer's placement share), @count[i] how many. Returns the kinds. */
#define MM__LAYER_TENSOR_KINDS 4
guint mm__layer_tensors(const MmScenario *s, const MmGraph *g, uint32_t li, double param_frac,
                        double elems[MM__LAYER_TENSOR_KINDS], uint32_t count[MM__LAYER_TENSOR_KINDS]);
/* Elements of layer @li one device holds whole under per_tensor_list FSDP because its tensors are under
 * fsdp_persistence_threshold (0: none, or flat collectives). */
double mm__persistent_elems(const MmScenario *s, const MmGraph *g, uint32_t li, double param_frac);
void mm__unit_tensors_free(Lower *L);
/* Whether unit @u has FSDP shards to gather (mm__precompute_units). */
static inline gboolean mm__fsdp_unit(const Lower *L, uint32_t u)
{
  return L->fsdp_unit[u];
}
/* Whether unit @u all-gathers its FSDP shards for micro-batch @micro's forward (or backward):
 * every time, or without fsdp_reshard_after_forward only in its first forward. */
static inline gboolean mm__fsdp_gathers(const Lower *L, uint32_t u, uint32_t micro, gboolean bwd)
{
  return L->fsdp_unit[u] && (L->s->cfg->fsdp_reshard || (micro == 0 && !bwd));
}
void mm__build_gather_queue(Lower *L, const MmPipeStep *steps, guint n_steps);
void mm__emit_gather(Lower *L, const Deps *d);
uint32_t mm__gather_for(Lower *L, uint32_t u, uint32_t micro, gboolean bwd);
gboolean mm__regathers(const Lower *L, uint32_t u);
void mm__regather(Lower *L, uint32_t u, uint32_t micro, uint32_t rec_last, Deps *d);
void mm__gather_advance(Lower *L, uint32_t compute_done);

/* grads.c: gradient synchronization, the tied embedding, the optimizer step */
gboolean mm__block_reads(const MmBlock *c, guint b);
gboolean mm__mp_block(const Lower *L, guint b);
uint32_t mm__block_last_unit(const Lower *L, guint b);
void mm__hoist_mp_backward(Lower *L, IterState *st, uint32_t micro);
void mm__flush_bucket(Lower *L, IterState *st, guint b, int slot, uint32_t micro);
void mm__sync_grads(Lower *L, IterState *st, uint32_t u, uint32_t micro, uint32_t weights_done);
void mm__emit_tied(Lower *L);
void mm__emit_optimizer(Lower *L);

/* limits.c: the bounds mm_scenario_new checks last (see MM_PLAN_MAX_OPS) */
double mm__plan_ops_estimate(double layers, double units, int64_t micro_steps, int64_t stages);
gboolean mm__scenario_check_limits(const MmScenario *s, GError **error);

/* grads.c: overlap_param_gather: adds to @d the ZeRO all-gathers of unit @u's updated weights (none
 * when it has no ZeRO), issuing them and the next unit's (below @end) if not issued yet */
void mm__param_gather_deps(Lower *L, uint32_t u, uint32_t end, Deps *d);

/* schedule.c: full recompute per unit (Megatron's method and num_layers): none (activations kept),
 * recomputed keeping its input (a checkpoint), recomputed from the checkpoint of its group.
 * (transfer full) */
enum { MM__RECOMPUTE_NONE, MM__RECOMPUTE_KEEP_INPUT, MM__RECOMPUTE_IN_GROUP };
uint8_t *mm__recompute_units(const MmScenario *s, const MmGraph *g, const uint32_t *chunk);

/* sac.c: torchtitan's per-op selective checkpointing (recompute "op_selective") of one layer of a
 * transformer unit: the part of its forward re-run before its backward and the bytes it keeps. */
typedef struct {
  double recompute_frac; /* of its forward (FLOPs, bytes, kernel time) re-run */
  uint32_t kernels;      /* kernels re-run (the recomputed matmuls, or the layer's one kernel) */
  double saved_bytes;    /* outputs it keeps for the backward, one device, one micro-batch */
} MmSacLayer;
/* @mm_count: the matmuls of the unit so far (0 at its first layer); advanced past this layer's. */
void mm__sac_layer(const MmScenario *s, const MmGraph *g, uint32_t li, uint32_t *mm_count, MmSacLayer *out);
/* Whether unit @u is checkpointed per op (op_selective and a transformer unit: torchtitan wraps
 * model.layers only). */
gboolean mm__sac_unit(const MmScenario *s, const MmGraph *g, uint32_t u);

/* offload.c: activation offload to host (offload_num_layers; Megatron-Core cpu_offloading) */
/* Per unit: 1 when its activations are offloaded (the first N layer units of each chunk). (transfer full) */
uint8_t *mm__offload_units(const MmScenario *s, const MmGraph *g, const uint32_t *chunk);
/* The activations unit @u keeps for its backward on one device, one micro-batch (no recompute),
 * its expert layers' for @expert_load x the mean routed tokens (the device's behaviour, as memory.c). */
double mm__unit_act_bytes(const MmScenario *s, const MmGraph *g, uint32_t u, double expert_load);
/* Emits the copy of unit @u's activations to host memory (or, @reload, back) after @d. */
uint32_t mm__emit_offload_copy(Lower *L, uint32_t u, uint32_t micro, gboolean reload, const Deps *d);

/* schedule.c: steady pairs per period and micro-batches per period (0, 0: no steady part) */
void mm__pipe_period(const MmScenario *s, uint32_t *pairs, uint32_t *micro);
/* Forward steps stage @stage runs before its first backward (1F1B and interleaved 1F1B). */
guint mm__pipe_warmup(guint p, guint v, guint m, guint stage);

/* iteration.c: one stage's schedule of chunk forwards and backwards */
void mm__lower_program(Lower *L);

/* overlap.c: decomposed TP collectives and the fused embedding exchange (docs/tp-overlap.md) */
/* Compute pieces a decomposition of a p-way collective runs (p, or userbuffers' pipeline splits). */
uint32_t mm__overlap_pieces(MmOverlap mode, gboolean comm_first, int64_t p);
/* One of @pieces token-dimension pieces of part @part of layer @li, launch included. */
double mm__piece_s(const Lower *L, uint32_t li, Part part, uint32_t pieces);
/* Async TP's final local reduction of p partial shards of @shard bytes. */
double mm__reduce_s(const Lower *L, guint block, double shard, int64_t p);
/* Emits the TP collective @kind (AllGather before the compute when @comm_first, else ReduceScatter
 * after it) of @bytes (the full buffer) over block @block's @mask levels, decomposed per @mode
 * with the GEMM as @pieces pieces described by @info (one piece's time and work), after @d.
 * Returns the op that ends it (the last piece or transfer). */
uint32_t mm__emit_tp_overlap(Lower *L, guint block, MmOverlap mode, MmCollKind kind, gboolean comm_first,
                             uint32_t mask, double bytes, const MmOpInfo *info, uint32_t pieces, double extra_s,
                             const Deps *d, uint32_t unit, uint32_t micro, MmPhase phase);
/* Block @b's sharded tables exchange their pooled outputs through the fused embedding + All2All kernel. */
gboolean mm__mp_fused(const Lower *L, guint b);
/* Forward: the lookups of units [@u0, @u1) of block @b in chunks, each chunk's All2All after it.
 * Returns the last transfer (the block's output). */
uint32_t mm__emit_fused_lookup_fwd(Lower *L, guint b, uint32_t u0, uint32_t u1, uint32_t micro, const Deps *in);
/* Backward: the gradient All2All in chunks after @d; *@first_op gets the first op. Returns the last. */
uint32_t mm__emit_fused_exchange_bwd(Lower *L, guint b, uint32_t micro, const Deps *d, uint32_t *first_op);
/* Backward: the embedding backward of units [@u0, @u1) in chunks, chunk i after the i-th All2All
 * chunk of [@a2a_first, @a2a_last]. Returns the last compute op. */
uint32_t mm__emit_fused_lookup_bwd(Lower *L, guint b, uint32_t u0, uint32_t u1, uint32_t micro, const Deps *in,
                                   uint32_t a2a_first, uint32_t a2a_last);
/* ep pipelined: @first_bytes exchanged in @chunks All2All chunks after @d, the experts (@info: one
 * chunk's time and work) per chunk, the @second_bytes exchange per chunk after them. Returns the
 * last op. */
uint32_t mm__emit_ep_pipelined(Lower *L, guint block, uint32_t mask, double first_bytes, double second_bytes,
                               const MmOpInfo *info, uint32_t chunks, const Deps *d, uint32_t unit, uint32_t micro,
                               MmPhase phase);

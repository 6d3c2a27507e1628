/* config: JSON inputs (model, hardware, parallelism + task) -> validated, read-only structs. */
#pragma once

#include <glib.h>
#include <stdint.h>
#include <stdio.h>

G_BEGIN_DECLS

/* ---- errors ------------------------------------------------------------ */

#define MM_CONFIG_ERROR (mm_config_error_quark())
GQuark mm_config_error_quark(void);

/* Every config error message reads "FILE: $.json.path: what was expected". */
typedef enum {
  MM_CONFIG_ERROR_IO,           /* file missing or unreadable */
  MM_CONFIG_ERROR_PARSE,        /* not JSON, truncated JSON */
  MM_CONFIG_ERROR_MISSING_KEY,  /* a required key is absent */
  MM_CONFIG_ERROR_TYPE,         /* wrong JSON type (string for a number, ...) */
  MM_CONFIG_ERROR_RANGE,        /* number out of range, zero/negative size, non-integer, overflow */
  MM_CONFIG_ERROR_UNKNOWN_KEY,  /* a key the schema does not know (typo) */
  MM_CONFIG_ERROR_UNKNOWN_VALUE,/* a string not among the allowed values */
  MM_CONFIG_ERROR_INCONSISTENT, /* fields that contradict each other or the system */
  MM_CONFIG_ERROR_ENCODING,     /* a key or string not UTF-8, or holding NUL or control characters */
} MmConfigError;

/* A copy of @s safe to print on a terminal: control characters (ESC, ...) as \u001b, bytes
 * that are not UTF-8 as \xff; the rest as is. (transfer full) */
char *mm_config_printable(const char *s);

/* ---- data types -------------------------------------------------------- */

typedef enum {
  MM_DTYPE_FP32,
  MM_DTYPE_TF32,
  MM_DTYPE_FP16,
  MM_DTYPE_BF16,
  MM_DTYPE_FP8,
  MM_DTYPE_INT8,
  MM_DTYPE_COUNT
} MmDtype;

extern const char *const mm_dtype_names[]; /* NULL-terminated, indexed by MmDtype */

/* Storage size of one element in bytes (tf32 is stored as fp32). */
static inline double mm_dtype_bytes(MmDtype d)
{
  static const double bytes[MM_DTYPE_COUNT] = {4, 4, 2, 2, 1, 1};
  return d < MM_DTYPE_COUNT ? bytes[d] : 0;
}
const char *mm_dtype_name(MmDtype d);

/* ---- collectives (named by configs, costed by src/comm) ------------------- */

typedef enum {
  MM_COLL_ALL_REDUCE,
  MM_COLL_ALL_GATHER,
  MM_COLL_REDUCE_SCATTER,
  MM_COLL_ALL_TO_ALL,
  MM_COLL_P2P,
  MM_COLL_BROADCAST,
  MM_COLL_PERMUTE, /* collective-permute: every rank sends to the next (XLA) */
  MM_COLL_COUNT
} MmCollKind;

extern const char *const mm_coll_names[]; /* "all_reduce", ... (JSON keys) */

typedef enum {
  MM_ALGO_AUTO,
  MM_ALGO_RING,
  MM_ALGO_TREE,             /* double binary tree across nodes, chains inside */
  MM_ALGO_DIRECT,           /* one-shot: every rank reads every peer (AllReduce); direct sends (AG/RS) */
  MM_ALGO_TWO_PHASE,        /* direct reduce-scatter then direct all-gather over a mesh or switch */
  MM_ALGO_HALVING_DOUBLING, /* recursive halving (RS) and doubling (AG) */
  MM_ALGO_HIERARCHICAL,     /* intra reduce-scatter, inter all-reduce, intra all-gather, one after the other */
  MM_ALGO_IN_NETWORK,       /* the switch reduces (NVLink SHARP / SHARP) */
  MM_ALGO_PAIRWISE,         /* All2All: every pair at once */
  MM_ALGO_ONE_SHOT,         /* serving engines' custom AllReduce kernel inside a node (never NCCL's choice) */
  MM_ALGO_HOST,             /* staged through host memory over PCIe (Gloo, P2P disabled) */
  MM_ALGO_COUNT
} MmAlgorithm;

extern const char *const mm_algorithm_names[]; /* NULL-terminated; "auto", "ring", ... */

/* How an embedding table's gradient is synchronized across data-parallel ranks. */
typedef enum { MM_GRAD_SYNC_DENSE, MM_GRAD_SYNC_SPARSE, MM_GRAD_SYNC_HOST, MM_GRAD_SYNC_AUTO } MmGradSync;
extern const char *const mm_grad_sync_names[];

/* ---- model ------------------------------------------------------------- */

typedef enum {
  MM_BLOCK_EMBEDDING_BAG,   /* DLRM sparse tables: lookups + pooling */
  MM_BLOCK_MLP,             /* stack of dense layers */
  MM_BLOCK_INTERACTION,     /* DLRM feature interaction: dot or concat */
  MM_BLOCK_TRANSFORMER,     /* stack of transformer layers (attention + FFN or MoE FFN) */
  MM_BLOCK_TOKEN_EMBEDDING, /* LLM token (+ learned position) embedding */
  MM_BLOCK_LM_HEAD,         /* final norm + vocabulary projection */
  MM_BLOCK_KIND_COUNT
} MmBlockKind;

extern const char *const mm_block_kind_names[]; /* NULL-terminated */

typedef enum { MM_INTERACTION_DOT, MM_INTERACTION_CONCAT } MmInteractionOp;
typedef enum { MM_FFN_GELU, MM_FFN_RELU, MM_FFN_SWIGLU, MM_FFN_GEGLU } MmFfnKind;
typedef enum { MM_NORM_LAYERNORM, MM_NORM_RMSNORM } MmNormKind;
typedef enum { MM_ATTN_FLASH, MM_ATTN_EAGER } MmAttnImpl;
/* Which flash-attention kernel a run's software calls (the config's "attention_kernel"), and which
 * one an attention curve's point measured (its "kernel"): FlashAttention-2 (PyTorch SDPA's flash
 * backend, flash-attn 2.x), FlashAttention-3 (flash-attn's hopper/ build), cuDNN's fused attention
 * (Transformer Engine's FusedAttention, SDPA's cudnn backend). DEFAULT: the
 * kernel the curve names as its default_kernel (a point without "kernel" when it names none). */
typedef enum {
  MM_ATTN_KERNEL_DEFAULT,
  MM_ATTN_KERNEL_FA2,
  MM_ATTN_KERNEL_FA3,
  MM_ATTN_KERNEL_CUDNN,
  MM_ATTN_KERNEL_COUNT
} MmAttnKernel;
extern const char *const mm_attn_kernel_names[]; /* NULL-terminated: "default", "fa2", "fa3", "cudnn" */
/* What a training run's cross-entropy keeps for its backward (the config's "cross_entropy"): the
 * softmax in fp32 (Megatron-LM's native and fused vocab-parallel cross entropy, torchtitan and
 * Hugging Face upcast the logits), or the logits' gradient written over them in the forward, in
 * their dtype (Transformer Engine's parallel_cross_entropy: Megatron-Core's cross_entropy_fusion_impl
 * te, the default of Megatron-Bridge's performance recipes). */
typedef enum { MM_XENT_FP32, MM_XENT_INPLACE, MM_XENT_COUNT } MmCrossEntropy;
extern const char *const mm_cross_entropy_names[]; /* NULL-terminated: "fp32", "inplace" */
/* Sequential (x + Attn(LN x), then + MLP(LN x')) or parallel attention and MLP read by one
 * normalized input (GPT-J, PaLM, Falcon-7B) or by two norms of the same input (GPT-NeoX's
 * gpt_j_residual): y = x + Attn(LN1 x) + MLP(LN2 x). */
typedef enum { MM_PARALLEL_BLOCK_NONE, MM_PARALLEL_BLOCK_SHARED_NORM, MM_PARALLEL_BLOCK_TWO_NORMS } MmParallelBlock;

/* One entry of the model's "blocks" list. Fields not used by a kind are 0. */
typedef struct {
  char *name;
  MmBlockKind kind;
  MmDtype dtype;         /* weights and activations storage */
  MmDtype compute_dtype; /* math; peak FLOP/s is looked up for this type */

  int64_t count; /* repeated layers (mlp, transformer); 1 otherwise */

  /* embedding_bag */
  int64_t tables, rows, dim;
  double pooling; /* average lookups per table per sample */

  /* mlp: layer i maps in->width, last maps width->out */
  int64_t width, input_dim, output_dim;
  gboolean activation; /* elementwise op after each dense layer */

  /* interaction */
  MmInteractionOp op;
  int64_t features; /* vectors that interact (default: tables of the preceding embedding_bag + 1) */

  /* transformer, token_embedding, lm_head */
  int64_t hidden, heads, kv_heads, ffn, seq_len, vocab, positions;
  MmFfnKind ffn_kind;
  MmNormKind norm;
  MmAttnImpl attention;
  gboolean bias;
  gboolean causal;
  gboolean dropout;
  gboolean tied; /* lm_head shares the token embedding's matrix */
  /* sliding-window attention: layers attend to the last sliding_window tokens (0: all); with
   * global_every k, every k-th layer (k-1, 2k-1, ...) attends to all (0: none does) */
  int64_t sliding_window, global_every;
  MmParallelBlock parallel_block; /* transformer: attention and MLP in parallel (docs/MODEL.md) */
  /* DeepSeek-V3 multi-token prediction: a transformer block with mtp_depth > 0 makes the loader
   * append one block of mtp_depth MTP modules after the model's last block (mtp = TRUE: the
   * layer kind of block mtp_source, its vocab the lm_head's) */
  int64_t mtp_depth;
  gboolean mtp;
  guint mtp_source;

  /* blocks whose outputs this block reads (indices of earlier blocks); default: the previous one */
  guint *inputs;
  guint n_inputs;

  /* transformer attention shape: per-head query/key and value widths (default hidden / heads);
   * multi-head latent attention (DeepSeek MLA) when kv_lora_rank > 0 */
  int64_t head_dim, v_head_dim, q_lora_rank, kv_lora_rank, rope_head_dim;

  /* mixture of experts on mlp / transformer FFN (experts == 0: dense) */
  int64_t experts, top_k;
  double capacity_factor;
  int64_t shared_experts; /* transformer: experts every token uses (a dense FFN of shared x ffn) */
  /* group-limited routing (DeepSeek-V2/V3; Megatron-Core moe_router_num_groups / moe_router_group_topk):
   * the experts form router_groups contiguous groups and a token's top_k come from its
   * router_group_topk best groups; 0: unlimited */
  int64_t router_groups, router_group_topk;
} MmBlock;

/* The attention window of layer @i of transformer block @b: tokens, or 0 for full attention. */
static inline int64_t mm_block_layer_window(const MmBlock *b, int64_t i)
{
  if (b->sliding_window <= 0 || (b->global_every > 0 && (i + 1) % b->global_every == 0)) return 0;
  return b->sliding_window;
}

/* Blocks of repeated layers, the units pipeline stages split (transformer and mlp; MTP modules
 * join the chunk of the head before them, as the last stage holds them). */
static inline gboolean mm_block_is_layers(const MmBlock *b)
{
  return (b->kind == MM_BLOCK_TRANSFORMER && !b->mtp) || b->kind == MM_BLOCK_MLP;
}

typedef struct {
  char *path;  /* as given on the command line */
  char *name;
  char *source;
  int64_t seq_len; /* tokens per sample for sequence models; 0 for DLRM-style samples */
  MmBlock *blocks;
  guint n_blocks;
} MmModel;

/* ---- hardware ---------------------------------------------------------- */

typedef enum {
  MM_PROV_DATASHEET,
  MM_PROV_PAPER,
  MM_PROV_MEASUREMENT,
  MM_PROV_CALIBRATION,
  MM_PROV_ESTIMATE,
} MmProvenance;

extern const char *const mm_provenance_names[];

typedef struct {
  double value;
  MmProvenance provenance;
  char *source;
} MmUtil;

/* What a kernel is, for its cost: built by src/graph, costed by src/cost, named by the
 * "efficiency" curves of device files. */
typedef enum {
  MM_KERNEL_GEMM,        /* dense or grouped matrix multiply (batch > 1: experts, batched) */
  MM_KERNEL_GEMV,        /* a GEMM with an output side under one tensor-core tile (decode) */
  MM_KERNEL_ATTENTION,   /* fused attention: QK^T, softmax, AV per head */
  MM_KERNEL_INTERACTION, /* DLRM dot interaction: a batched X X^T */
  MM_KERNEL_ELEMENTWISE, /* norms, activations, softmax, copies */
  MM_KERNEL_LOOKUP,      /* embedding gathers */
  MM_KERNEL_KIND_COUNT
} MmKernelKind;

extern const char *const mm_kernel_kind_names[]; /* NULL-terminated; "gemm", ... (JSON keys) */

/* Index of @name in the NULL-terminated table @names (mm_dtype_names, mm_kernel_kind_names,
 * ...), or -1. */
int mm_name_index(const char *const *names, const char *name);

/* One measured point of an efficiency curve: a compute curve keys it by the shape of one
 * call (m, n, k, batch), a memory curve by the HBM bytes of one call. */
typedef struct {
  double m, n, k, batch;
  double bytes;
  double util; /* achieved / peak */
  /* attention points only: the kernel measured is the backward pass (dQ, dK, dV with the
   * recomputation of the scores) and / or runs under a causal mask (masked blocks skipped), and
   * eager: it times eager attention's batched GEMMs (cuBLAS bmm: QK^T and AV; backward dP, dV,
   * dQ, dK), never under a causal mask (eager kernels compute the whole matrix and mask it). A
   * point matches only kernels of the same pass, mask and kind of kernel (src/cost); other kinds'
   * kernels are forward and unmasked. bwd holds the "pass" key's index in mm_kernel_pass_names
   * (fwd 0, bwd 1). */
  gboolean bwd, causal, eager;
  int kernel; /* attention points only: the MmAttnKernel measured (0: unnamed) */
} MmEffPoint;

extern const char *const mm_kernel_pass_names[]; /* NULL-terminated: "fwd", "bwd" */

/* A measured or fitted efficiency curve of one kernel kind (and dtype, for compute). */
typedef struct {
  char *name;               /* "gemm.bf16", "hbm.lookup": the key path under "efficiency" */
  MmProvenance provenance;
  char *source;
  MmEffPoint *points;       /* memory curves: sorted by bytes, strictly increasing */
  guint n_points;
  int default_kernel;       /* attention curves: the MmAttnKernel whose points time a run that names none */
} MmEffCurve;

/* A fitted efficiency model of one kernel kind (and dtype, for compute) from a calibration
 * run (the device file's "calibration.fits"; docs/CALIBRATION.md). Time of one call:
 *   compute ("roofline_t0"):  max(flops / (peak x compute_fraction), bytes / (hbm_bw x memory_fraction)) + t0
 *   memory ("bandwidth_t0"):  bytes / (hbm_bw x memory_fraction) + t0
 * with bytes the kernel's operand bytes (mm_cost_fit_bytes) or the call's HBM bytes. */
typedef struct {
  char *name;               /* "gemm.bf16", "hbm.elementwise": the key under calibration.fits */
  gboolean memory;          /* the bandwidth_t0 model */
  double compute_fraction;  /* of peak FLOP/s (compute models) */
  double memory_fraction;   /* of peak HBM bandwidth */
  double t0_s;              /* fixed time per call on the device (launch overhead not included) */
  guint points;             /* measurements fitted */
  double rms_rel_err, max_rel_err; /* of the fit on its own points */
  guint held_out_points;    /* measurements predicted by a fit without them */
  double held_out_rms_rel_err;
  double lo, hi;            /* the range measured: FLOPs (compute) or bytes (memory) per call */
} MmEffFit;

/* Coefficients of fused compute-collective kernels: persistent workgroups, slice puts, flags,
 * occupancy (the device file's optional "fused" object; parsed by src/config/device_fused.c,
 * used by src/fused; docs/FUSED.md). Absent keys take their documented defaults. */
typedef struct {
  MmUtil compute_units;  /* CUs/SMs a persistent kernel spreads over */
  MmUtil occupancy_loss; /* fraction of occupancy the communication API's registers cost */
  MmUtil put_latency_s;  /* issuing one non-blocking put (API latency), seconds */
  MmUtil flag_s;         /* per slice: WG_Done book-keeping, fence and flag put, seconds */
  MmUtil waves_per_cu;   /* resident waves (warps) per CU (SM) at full occupancy */
  MmUtil wave_lanes;     /* threads per wave (64) or warp (32) */
  MmUtil mem_latency_s;  /* HBM load latency a wave waits on (Little's law), seconds */
  MmUtil contention;     /* HBM efficiency lost as demand exceeds the achievable bandwidth (0..1) */
} MmFusedCoeffs;

/* Coefficients of decomposed compute-communication overlap: decomposition (DIL) and contention
 * (CIL) losses, DMA engines (the device file's optional "overlap" object; parsed by
 * src/config/device_overlap.c, used by src/fused; docs/FUSED.md). Absent keys take their
 * documented defaults. */
typedef struct {
  MmUtil mem_unhidden;     /* DIL: fraction of a GEMM's memory time its compute does not hide */
  MmUtil gemm_tile;        /* DIL: output tile edge (elements) for wave quantization over compute units */
  MmUtil dma_latency_s;    /* DIL: fixed cost of one batch of DMA copies (seconds) */
  MmUtil dma_contention;   /* CIL: share of the compute pipeline a running DMA copy costs a GEMM (caches, NoC) */
  MmUtil cu_comm_sm;       /* CIL: share of the SMs a compute-unit-driven (RCCL/NCCL) transfer occupies */
  MmUtil collective_slowdown; /* CIL in the lowering: a compute kernel's extra time while a collective runs beside it */
  MmUtil heuristic_low;    /* FiCCO heuristic: OTB x MT below this x the machine's: uniform-fused-1d */
  MmUtil heuristic_high;   /* ... above this x the machine's: hetero-unfused-1d */
  MmUtil cmm_threshold_bytes; /* collective matmul: gathered operands below this stay serial (XLA threshold) */
} MmOverlapCoeffs;

typedef struct {
  char *path;
  char *name;
  char *source;
  double peak_flops[MM_DTYPE_COUNT]; /* FLOP/s, dense; 0 when the device lacks the type */
  double hbm_bytes;
  double hbm_bw_Bps;
  double launch_overhead_s;
  double graph_launch_overhead_s; /* the same for kernels replayed from a CUDA/HIP graph */
  MmUtil util_gemm;   /* fraction of peak that GEMM-like ops reach */
  MmUtil util_hbm;    /* fraction of HBM bandwidth that memory-bound ops reach */
  MmUtil clock_derate; /* fraction of the datasheet clocks the compute runs at (a power cap); 1 by default.
                        * Scales the peak FLOP/s every kernel's time uses, not MFU's denominator */
  /* optional curves replacing util_gemm / util_hbm where they cover a kernel (NULL: none);
   * src/cost/cost.h reads them */
  MmEffCurve *compute_eff[MM_KERNEL_KIND_COUNT][MM_DTYPE_COUNT];
  MmEffCurve *memory_eff[MM_KERNEL_KIND_COUNT];
  /* fitted models from a calibration run (NULL: none); they take precedence over curves */
  MmEffFit *compute_fit[MM_KERNEL_KIND_COUNT][MM_DTYPE_COUNT];
  MmEffFit *memory_fit[MM_KERNEL_KIND_COUNT];
  char *calibration_source; /* calibration.source (NULL: no calibration block) */
  MmFusedCoeffs fused;      /* "fused" (defaults when absent) */
  MmOverlapCoeffs overlap;  /* "overlap" (defaults when absent) */
} MmDevice;

typedef enum {
  MM_TOPO_SWITCH,
  MM_TOPO_FULL_MESH,
  MM_TOPO_RING,
  MM_TOPO_FAT_TREE,
  MM_TOPO_RAIL,
  MM_TOPO_TORUS2D,
  MM_TOPO_TORUS3D,
} MmTopology;

extern const char *const mm_topology_names[];

/* A full mesh gives each GPU one link resource per peer; src/comm sizes its per-device link
 * arrays for this many GPUs (the loader rejects larger meshes). */
#define MM_FULL_MESH_MAX_GPUS 64

/* NCCL's protocols: simple (bulk, fitted to large messages) and LL (low latency: a flag in
 * every 8-byte store; little latency, a fraction of the bandwidth). Their parameters are a
 * row of the protocol table in config/hardware.c; src/comm runs every algorithm under each. */
typedef enum { MM_PROTO_SIMPLE, MM_PROTO_LL, MM_PROTO_COUNT } MmProtocol;
extern const char *const mm_protocol_names[]; /* "simple", "ll" (JSON keys under "protocols") */

/* Where a behavioural number came from. */
typedef enum {
  MM_PARAM_DEFAULT, /* absent: the built-in default (docs/SCHEMA.md says where it comes from) */
  MM_PARAM_GIVEN,   /* a bare number, no provenance stated */
  MM_PARAM_CITED,   /* {value, provenance, source} */
} MmParamKind;

extern const char *const mm_param_kind_names[]; /* "default", "given", "cited" */

/* A behavioural number of a network (latency, efficiency) with its evidence, as MmUtil for
 * devices. value is in SI units (seconds, fractions). */
typedef struct {
  double value;
  MmParamKind kind;
  MmProvenance provenance; /* when cited */
  char *source;            /* when cited (transfer full: owned by the hardware) */
  const char *fit;         /* the fit file it was taken from, NULL when from the system file or a
                            * default (transfer none: the network's fit) */
} MmParam;

/* One protocol's parameters on one network. */
typedef struct {
  MmParam latency_s;      /* per algorithm step (alpha) */
  MmParam base_latency_s; /* per collective (launch, protocol setup) */
  MmParam efficiency;     /* its bandwidth / the network's effective (bulk) bandwidth; simple: 1 */
} MmProtocolParams;

typedef struct {
  gboolean present;
  MmTopology topology;
  double bw_per_gpu_Bps; /* per direction, line rate, all links/NICs of one GPU together */
  double link_bw_Bps;    /* one link or NIC, per direction */
  int64_t links;         /* links per GPU (intra) or NICs per node (inter) */
  MmParam efficiency;    /* achievable fraction of line rate with the bulk protocol */
  MmProtocolParams protocol[MM_PROTO_COUNT];
  MmParam one_shot_latency_s; /* intra: fixed cost of a serving engine's one-shot AllReduce kernel */
  gboolean in_network_reduction;
  MmParam in_network_efficiency; /* fraction of line rate the in-switch reduction delivers */
  int64_t dims[3];       /* torus: nodes along each dimension (product = nodes) */
  guint n_dims;
  char *source;
  char *fit;             /* the shared fit file the numbers come from (NULL: none) */
} MmNetwork;

typedef struct {
  char *path;
  char *name;
  char *source;
  MmDevice device;
  int64_t gpus_per_node;
  int64_t nodes;
  MmNetwork intra;
  MmNetwork inter;
  double host_bw_Bps;    /* GPU <-> host link (PCIe), per direction, effective */
  MmParam host_link_efficiency;
  double host_mem_Bps;   /* the node's CPU memory bandwidth, effective (peak x host_mem_efficiency) */
  MmParam host_mem_efficiency;
} MmHardware;

static inline int64_t mm_hardware_devices(const MmHardware *hw) { return hw->gpus_per_node * hw->nodes; }

/* ---- parallelism + task ------------------------------------------------- */

typedef enum { MM_TASK_PRETRAIN, MM_TASK_FINETUNE, MM_TASK_INFERENCE } MmTask;
extern const char *const mm_task_names[];

typedef enum {
  MM_STRAT_FSDP,
  MM_STRAT_TP,
  MM_STRAT_DDP,
  MM_STRAT_MP,
  MM_STRAT_PP, /* the top-level "pipeline" object; not a level */
  MM_STRAT_SP, /* a level name only: tp with sequence_parallel */
  MM_STRAT_EP, /* experts sharded; data parallel for the rest of the block */
  MM_STRAT_CP, /* sequence split: ring attention or K/V all-gather */
  MM_STRAT_ULYSSES, /* DeepSpeed-Ulysses: sequence split, heads split around attention by All2All */
  MM_STRAT_COUNT
} MmStrategy;
extern const char *const mm_strategy_names[];

typedef enum { MM_SHARD_TABLE, MM_SHARD_ROW, MM_SHARD_COLUMN } MmShardKind;
extern const char *const mm_shard_names[];

/* How a degree was written: a number, or a shorthand resolved against the system. */
typedef enum { MM_DEG_NUMBER, MM_DEG_NODE, MM_DEG_NODES, MM_DEG_ALL } MmDegreeSpec;

/* Context parallelism: how a rank gets the keys and values of the other sequence chunks. */
typedef enum { MM_CP_RING, MM_CP_ALL_GATHER } MmCpImpl;
extern const char *const mm_cp_impl_names[];

/* How a level's collectives overlap the compute they feed or follow (docs/tp-overlap.md):
 * bulk (one collective, then the GEMM), or decomposed into per-step transfers and partial
 * GEMMs. tp levels (with sequence parallelism): collective_matmul (XLA), async_tp (PyTorch
 * symmetric memory), userbuffers (Megatron-LM / NeMo, Transformer Engine); ep levels:
 * pipelined (All2All and expert GEMMs in chunks); mp levels: fused (the fused embedding +
 * All2All kernel of the AMD fused-kernel paper). */
typedef enum {
  MM_OVERLAP_BULK,
  MM_OVERLAP_COLLECTIVE_MATMUL,
  MM_OVERLAP_ASYNC_TP,
  MM_OVERLAP_USERBUFFERS,
  MM_OVERLAP_PIPELINED,
  MM_OVERLAP_FUSED,
  MM_OVERLAP_COUNT
} MmOverlap;
extern const char *const mm_overlap_names[];

#define MM_MAX_LEVELS 6

typedef struct {
  MmStrategy strategy;
  MmDegreeSpec spec;
  int64_t degree;       /* resolved (equals the number for MM_DEG_NUMBER) */
  MmShardKind sharding; /* mp only */
  MmGradSync grad_sync; /* ddp levels of embedding blocks: how their gradient is synchronized */
  gboolean sequence_parallel; /* tp levels: Megatron sequence parallelism */
  gboolean experts_sharded;   /* tp levels of MoE blocks: every rank holds a slice of every expert */
  int zero;             /* ddp levels: ZeRO stage 0 (plain), 1 (optimizer states sharded), 2 (+ gradients) */
  MmCpImpl cp_impl;     /* cp levels */
  gboolean cp_fsdp;     /* cp levels: FSDP shards over these ranks too (torchtitan's dp_shard_cp mesh) */
  MmOverlap overlap;    /* tp, ep and mp levels: bulk or a decomposed overlap */
  double overlap_min_bytes; /* tp overlap: collectives with a smaller full buffer stay bulk */
  int64_t overlap_chunks;   /* ep pipelined, mp fused: pieces the exchange and its compute are split into */
} MmLevel;

typedef struct {
  char *key; /* a block kind, a block name, or "default" */
  MmLevel levels[MM_MAX_LEVELS]; /* innermost first */
  guint n_levels;
} MmStrategyEntry;

typedef enum {
  MM_OPT_ADAM,
  MM_OPT_SGD,
  MM_OPT_ADAGRAD,
  MM_OPT_ROWWISE_ADAGRAD,
  MM_OPT_LAMB,      /* Adam's states; per-layer trust ratio: norms of the weights and of the update */
  MM_OPT_ADAFACTOR, /* factored second moment (a row and a column vector per matrix), momentum optional */
} MmOptimizerKind;
extern const char *const mm_optimizer_names[];

/* Where the optimizer's states and master weights live and its step runs: on the device, or in
 * host memory with the step on the CPU (DeepSpeed ZeRO-Offload, FSDP CPUOffload). */
typedef enum { MM_OFFLOAD_NONE, MM_OFFLOAD_CPU } MmOffload;
extern const char *const mm_offload_names[];

typedef struct {
  MmOptimizerKind kind;
  MmDtype state_dtype;
  gboolean master_weights; /* keep an fp32 copy when weights are lower precision */
  gboolean momentum;       /* sgd only */
  MmOffload offload;       /* dense optimizer only */
} MmOptimizer;

/* op_selective: torchtitan's per-op selective activation checkpointing (activation_checkpoint.mode
 * "selective", selective_ac_option "op"): the outputs of every other matmul, of attention and of
 * reduce-scatters and all-to-alls are saved, the rest of each transformer layer recomputed. */
typedef enum { MM_RECOMPUTE_NONE, MM_RECOMPUTE_FULL, MM_RECOMPUTE_SELECTIVE, MM_RECOMPUTE_OP_SELECTIVE } MmRecompute;
/* How an MoE All2All moves a token's top_k copies: each copy to its expert's GPU, or once per
 * destination node over the network and on to the experts over the node's links (DeepEP) */
typedef enum { MM_MOE_DISPATCH_PER_EXPERT, MM_MOE_DISPATCH_PER_NODE } MmMoeDispatch;
extern const char *const mm_moe_dispatch_names[];
extern const char *const mm_recompute_names[];
/* How a micro-batch's weight gradients join the gradient buffer: inside the weight-gradient GEMM
 * (Megatron-Core's gradient_accumulation_fusion; FSDP's reduce-scatter) or by a separate
 * elementwise add per parameter after each backward (Megatron-LM's DDP hook of 2021,
 * main_grad.add_(grad); PyTorch autograd's .grad accumulation). */
typedef enum { MM_GRAD_ACCUM_FUSED, MM_GRAD_ACCUM_SEPARATE } MmGradAccum;
extern const char *const mm_grad_accum_names[];

/* How FSDP's collectives are called: one per unit over its flattened parameters (PyTorch FSDP, FSDP2,
 * Megatron), or one per parameter tensor on a list of per-rank views (DeepSpeed ZeRO-3 of 2021). */
typedef enum { MM_FSDP_COLL_FLAT, MM_FSDP_COLL_PER_TENSOR_LIST } MmFsdpColl;
extern const char *const mm_fsdp_coll_names[];
/* Megatron's --recompute-method for full recompute with --recompute-num-layers N: uniform
 * checkpoints the input of every group of N layers (all recomputed); block recomputes the first N
 * layers of each model chunk and keeps the others' activations; every is torchtitan's layer-level
 * selective checkpointing (selective_ac_option N): every N-th layer of a stage checkpointed whole, the
 * others keep their activations. */
typedef enum { MM_RECOMPUTE_UNIFORM, MM_RECOMPUTE_BLOCK, MM_RECOMPUTE_EVERY } MmRecomputeMethod;
extern const char *const mm_recompute_method_names[];

/* How FP8 training runs (blocks whose compute dtype is fp8): which kernels run in FP8 and the
 * casts around them (docs/MODEL.md, "FP8 recipes"). ALL: every kernel at the FP8 peak, no casts. */
typedef enum {
  MM_FP8_DELAYED,    /* Transformer Engine DelayedScaling (its default) */
  MM_FP8_TENSORWISE, /* current per-tensor scaling (TE Float8CurrentScaling, torchao tensorwise) */
  MM_FP8_ROWWISE,    /* torchao rowwise */
  MM_FP8_BLOCKWISE,  /* 1x128 / 128x128 blocks (DeepSeek-V3, TE Float8BlockScaling) */
  MM_FP8_MXFP8,      /* OCP MX: 1x32 blocks, E8M0 scales (Blackwell) */
  MM_FP8_ALL,
  MM_FP8_COUNT
} MmFp8Recipe;
extern const char *const mm_fp8_recipe_names[];

typedef enum { MM_PIPE_GPIPE, MM_PIPE_1F1B, MM_PIPE_INTERLEAVED, MM_PIPE_ZB_H1, MM_PIPE_DUALPIPEV } MmPipeSchedule;
extern const char *const mm_pipe_schedule_names[];

/* Model chunks per stage schedule @k runs when nothing else says: dualpipev its V (2; 1 with a
 * single stage), interleaved_1f1b @interleaved, the others 1. */
static inline int64_t mm_pipe_schedule_vstages(MmPipeSchedule k, int64_t degree, int64_t interleaved)
{
  return k == MM_PIPE_DUALPIPEV ? (degree > 1 ? 2 : 1) : k == MM_PIPE_INTERLEAVED ? interleaved : 1;
}

/* Pipeline parallelism: the outermost digit of the device index. */
typedef struct {
  int64_t degree;          /* stages (1: none) */
  MmPipeSchedule schedule;
  int64_t virtual_stages;  /* model chunks per stage (interleaved 1F1B; 2 with DualPipeV) */
  gboolean overlap_p2p;    /* transfers overlap compute (else the stage waits for them) */
  int64_t *layers;         /* optional: layers per chunk, in model order (NULL: balanced) */
  guint n_layers;
} MmPipeline;

/* Serving: a prefill of the prompt, then one decode step per generated token. */
typedef struct {
  gboolean present;        /* the "inference" object was given (else: one forward pass) */
  int64_t prompt_tokens;
  int64_t output_tokens;
  gboolean cuda_graphs;       /* decode steps replayed from a captured graph */
  gboolean custom_all_reduce; /* one-shot AllReduce kernels where faster than NCCL (vLLM, SGLang, TensorRT-LLM) */
} MmServing;

typedef struct {
  char *path;
  char *name;
  MmTask task;
  int64_t global_batch;      /* samples per iteration */
  int64_t global_batch_tokens; /* alternative to global_batch for sequence models (0: unset) */
  int64_t micro_batch;       /* samples per data-parallel rank per micro-step (0: whole local batch) */
  int64_t seq_len;           /* overrides the model's sequence length (0: the model's) */
  gboolean grads_set;        /* precision.grads given */
  MmDtype grad_dtype;
  gboolean compute_set;      /* precision.compute given: overrides every block */
  MmDtype compute_dtype;
  MmOptimizer optimizer;        /* dense parameters */
  MmOptimizer sparse_optimizer; /* embedding_bag tables */
  MmRecompute recompute;
  MmRecomputeMethod recompute_method;
  int64_t recompute_num_layers; /* full recompute: layers per group (uniform), recomputed per chunk (block) or the
                                 * period (every); 0: all */
  int64_t offload_num_layers;   /* activation offload to host: the first N layers of each chunk (0: none) */
  MmFp8Recipe fp8_recipe;    /* training blocks computing in fp8 */
  gboolean fp8_param_gather; /* FSDP / ZeRO parameter all-gathers carry FP8 GEMM weights (1 byte) */
  MmAttnKernel attention_kernel; /* the flash-attention kernel the run's software calls (DEFAULT: the device's) */
  MmCrossEntropy cross_entropy;  /* what the training loss keeps for its backward */
  char **frozen; guint n_frozen; /* finetune: block names or kinds that are not trained */
  int64_t fsdp_prefetch;     /* units gathered ahead of the one computing */
  gboolean fsdp_reshard;     /* FSDP: gather again for every micro-batch's forward and backward (else once) */
  MmFsdpColl fsdp_collectives; /* FSDP: a collective per unit, or per parameter tensor on per-rank lists */
  int64_t fsdp_persistence_threshold; /* per_tensor_list: tensors of fewer elements stay gathered */
  gboolean fsdp_regather_recompute; /* full recompute: the recompute gathers and frees, the backward gathers again */
  double ddp_bucket_bytes;   /* gradient bucket size for DDP AllReduce */
  gboolean ddp_overlap;      /* all-reduce buckets during backward (else after it) */
  MmGradAccum grad_accum;    /* weight gradients added to the gradient buffer in the GEMM or by a separate pass */
  gboolean overlap_param_gather; /* ZeRO-1/2: gather updated weights in the next forward (else after the step) */
  MmAlgorithm algorithm[MM_COLL_COUNT]; /* forced collective algorithms (MM_ALGO_AUTO: choose) */
  MmPipeline pipeline;
  double expert_skew;        /* EP: the busiest rank's routed tokens / the mean, minus 1 */
  MmMoeDispatch moe_dispatch; /* EP All2All: a copy per expert, or per destination node */
  gboolean moe_dispatch_fp8; /* EP All2All: tokens to the experts (and gradients back to them) in FP8 */
  /* parallel folding ("experts"): the expert layers' own layout, independent of the attention's
   * levels (Megatron-Core expert_model_parallel_size / expert_tensor_parallel_size); ep 0: none */
  int64_t experts_ep, experts_etp; /* etp 0: the block's tp degree (Megatron-Core's default) */
  MmServing serving;
  MmStrategyEntry *strategies; guint n_strategies;
} MmParallelConfig;

/* ---- loaders ----------------------------------------------------------- */

/* Each returns a validated struct (transfer full) or NULL with @error set in
 * MM_CONFIG_ERROR. Messages name @path, the JSON path and what was expected. The _parse
 * forms read @len bytes of @text (a NUL at text[len]) as if they were the file @path. */
MmModel *mm_model_load(const char *path, GError **error);
MmModel *mm_model_parse(const char *path, const char *text, gsize len, GError **error);
void mm_model_free(MmModel *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmModel, mm_model_free)

/* A system file names its device file relative to its own directory. */
MmHardware *mm_hardware_load(const char *path, GError **error);
/* Appends to @paths the files loading the system file @path reads besides it (an output over one
 * would destroy it too): its device file, its networks' fit files and, with @calibrated, the
 * calibrated device that replaces the first (mm_hardware_use_calibrated); to @labels what each is,
 * "@label's device", "@label's intra_node fit", ... (both take g_free'd strings). A system that
 * does not load adds none (its own load reports why). */
void mm_hardware_list_files(const char *path, const char *label, gboolean calibrated, GPtrArray *labels,
                            GPtrArray *paths);
/* Replaces @h's device with its calibrated sibling (devices/h100-sxm.json ->
 * devices/h100-sxm-calibrated.json, written by `madmax calibrate`) where one exists; *@used
 * says whether it did. FALSE (device unchanged) when the sibling does not load. */
gboolean mm_hardware_use_calibrated(MmHardware *h, gboolean *used, GError **error);
/* Its device file is named relative to the directory of @path. */
MmHardware *mm_hardware_parse(const char *path, const char *text, gsize len, GError **error);
void mm_hardware_free(MmHardware *h);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmHardware, mm_hardware_free)

/* Uses @nodes nodes of the system's design instead of the file's count (a slice of a
 * cluster, or a larger one); fails when more than one node has no inter-node network. */
gboolean mm_hardware_set_nodes(MmHardware *h, int64_t nodes, GError **error);
/* Whether @nodes nodes of @h's design can be simulated (what mm_hardware_set_nodes checks). */
gboolean mm_hardware_check_nodes(const MmHardware *h, int64_t nodes, GError **error);

/* One behavioural number of a system, for reports. */
typedef struct {
  char *path;           /* JSON path in the system file: "$.intra_node.protocols.ll.latency_us" */
  double value;         /* in the JSON's unit */
  const char *unit;     /* "us", "fraction" */
  const MmParam *param; /* (transfer none) */
} MmParamRef;

/* Every behavioural network number of @h (present networks only), in schema order.
 * (transfer full: a GPtrArray of MmParamRef that frees its elements) */
GPtrArray *mm_hardware_params(const MmHardware *h);

/* Loads a device file alone (one of hardware/devices). */
gboolean mm_device_load(const char *path, MmDevice *out, GError **error);
gboolean mm_device_parse(const char *path, const char *text, gsize len, MmDevice *out, GError **error);
void mm_device_clear(MmDevice *d);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(MmDevice, mm_device_clear)

MmParallelConfig *mm_parallel_load(const char *path, GError **error);
MmParallelConfig *mm_parallel_parse(const char *path, const char *text, gsize len, GError **error);
void mm_parallel_free(MmParallelConfig *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmParallelConfig, mm_parallel_free)

/* Strategy for a block: entry keyed by the block's name, else its kind, else
 * "default". NULL if none applies (the block is then replicated, i.e. pure DDP). */
const MmStrategyEntry *mm_parallel_strategy_for(const MmParallelConfig *c, const MmBlock *b);

/* ---- documentation ----------------------------------------------------- */

/* Writes the schema of every input file as Markdown (docs/SCHEMA.md is this output). */
void mm_config_write_schema_markdown(FILE *out);

G_END_DECLS

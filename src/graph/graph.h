/* graph: a model's blocks expanded into layers with exact per-sample costs (no devices here). */
#pragma once

#include "config/config.h"

G_BEGIN_DECLS

/* What bounds a layer's time: FLOPs (gemm, attention) or bytes (the rest). */
typedef enum {
  MM_LAYER_GEMM,
  MM_LAYER_ATTENTION,
  MM_LAYER_ELEMENTWISE,
  MM_LAYER_LOOKUP,
  MM_LAYER_INTERACTION,
} MmLayerClass;

/* Role of a layer inside its block; names are stable (traces, JSON). */
typedef enum {
  MM_ROLE_EMB_LOOKUP,   /* embedding_bag lookup + pooling */
  MM_ROLE_MLP_FC,       /* one dense layer (all experts for MoE) */
  MM_ROLE_MLP_ACT,
  MM_ROLE_ROUTER,       /* MoE gate */
  MM_ROLE_INTERACT,
  MM_ROLE_NORM_ATTN,
  MM_ROLE_QKV,
  MM_ROLE_ATTN_CORE,    /* QK^T, softmax, AV */
  MM_ROLE_ATTN_OUT,
  MM_ROLE_NORM_FFN,
  MM_ROLE_FFN_UP,       /* up (+ gate) projection */
  MM_ROLE_FFN_ACT,
  MM_ROLE_FFN_DOWN,
  MM_ROLE_TOKEN_LOOKUP,
  MM_ROLE_NORM_FINAL,
  MM_ROLE_LOGITS,
  MM_ROLE_LOSS,         /* softmax cross-entropy over the vocabulary */
  MM_ROLE_MTP_NORM,     /* multi-token prediction: RMSNorms of the hidden state and the next token's embedding */
  MM_ROLE_MTP_PROJ,     /* multi-token prediction: their concatenation projected 2h -> h */
  MM_ROLE_COUNT
} MmLayerRole;

extern const char *const mm_role_names[];

/* How Megatron tensor parallelism splits a layer (see docs/MODEL.md). */
typedef enum {
  MM_TP_REPLICATED, /* every TP rank runs it whole (norms) */
  MM_TP_COLUMN,     /* weight split by output columns; input replicated; bwd input-grad AllReduce */
  MM_TP_ROW,        /* weight split by input rows; output partial sums; fwd AllReduce after */
  MM_TP_SHARDED,    /* no weights; runs on the TP-sharded tensor (attention core, activations) */
} MmTpMode;

/* Costs of one layer for ONE sample (a sequence for sequence models).
 * FLOPs are model FLOPs (the MFU convention: full seq^2 attention, no recompute);
 * *_exec_flops are what kernels execute (causal skipping, flash-attention recompute). */
typedef struct {
  double fwd_flops, bwd_input_flops, bwd_weight_flops;
  double fwd_exec_flops, bwd_input_exec_flops;
  double fwd_bytes, bwd_input_bytes, bwd_weight_bytes; /* activation HBM traffic */
  double weight_bytes; /* weights read per call (independent of the batch) */
  int64_t params;
  double act_bytes;    /* kept from forward for backward */
  double recompute_bytes; /* part of act_bytes that selective recompute drops (attention scores) */
  double mask_bytes;   /* part of act_bytes kept on the output side (a residual branch's dropout mask),
                        * split as the output is, not as the input */
  double out_bytes;    /* output activation */
} MmCost;

/* The kernel a layer runs, for ONE sample (one sequence): its shape, kind and compute dtype,
 * what efficiency tables are keyed by. GEMM-like kinds: y[m x n] = x[m x k] W[k x n], batch
 * independent problems (grouped experts: batch experts of m tokens each). Attention: m query
 * tokens, n keys, k the query/key head width, batch heads. Interaction: batch samples of an
 * F x d times d x F product (m = n = F, k = d). Elementwise and lookups: m rows (tokens,
 * lookups), n elements per row, k = 1 (lookups: batch tables). A layer of several matmuls
 * (MLA's projections) is one GEMM of the same FLOPs over its input width. Every dimension
 * is >= 1 per device; per sample, an expert's m may be a fraction (top_k / experts). */
typedef struct {
  MmKernelKind kind;
  MmDtype dtype;
  double m, n, k, batch;
  /* attention only: a flash kernel (FALSE: eager, QK^T, softmax and AV as separate kernels,
   * which measured flash curves do not describe), its backward pass, and a causal mask over a
   * whole sequence (q == kv: the kernel skips the masked half, see the executed FLOPs) */
  gboolean flash, bwd, causal;
  MmAttnKernel impl; /* flash attention only: the kernel the run calls (src/plan sets it from the config) */
} MmKernel;

/* The three kernels of a layer's iteration. */
typedef enum { MM_PART_FWD, MM_PART_BWD_INPUT, MM_PART_BWD_WEIGHT, MM_PART_COUNT } MmKernelPart;
extern const char *const mm_kernel_part_names[]; /* "fwd", "bwd_input", "bwd_weight" */

/* What one device runs of a layer per call, relative to the per-sample kernel. */
typedef struct {
  double samples; /* samples (sequences) in the call: the micro-batch on one device */
  double work;    /* fraction of those samples' work the device does (TP, CP, sequence parallel, MoE load) */
  double split;   /* the part of @work that tensor parallelism takes from the layer's split dimension:
                   * 1/tp for column, row and sharded layers, 1 for replicated ones */
  double groups;  /* fraction of the problems (experts) on this device: 1/ep for expert layers under
                   * expert parallelism (their tokens concentrate on fewer experts), else 1 */
} MmKernelShare;

/* GEMMs (and grouped GEMMs) with fewer output rows or columns than one tensor-core MMA tile
 * (mma.m16n8k16 on Ampere and Hopper: M = 16) leave the tensor cores partly idle and run
 * as matrix-vector products: cuBLAS and the serving engines pick GEMV kernels there. */
#define MM_KERNEL_GEMV_MAX_ROWS 16.0

typedef struct {
  guint block;
  guint unit;
  MmLayerRole role;
  MmLayerClass cls;
  MmTpMode tp;
  gboolean expert; /* MoE expert weights: params count all experts, work counts top_k */
  uint32_t canon;  /* the first layer of its block identical to it (role, costs): lets later
                    * stages compute once per distinct layer */
  MmCost cost;
  MmKernel kernel; /* its forward kernel, per sample */
} MmLayer;

/* A unit is one repeated layer of a block (one transformer layer, one dense
 * layer) or a whole non-repeated block: the FSDP wrapping granularity. */
typedef struct {
  guint block;
  guint index;        /* within the block (0..count-1) */
  guint first_layer;
  guint n_layers;
  MmCost cost;        /* sum over its layers */
} MmUnit;

/* Which pass of a sequence model the graph describes. Training and single-pass
 * inference: every block's seq_len against itself. Serving: a prefill of the prompt
 * (K/V written to the cache, logits for the last token) or a decode step (one query
 * token per sequence against a context of cached keys). */
typedef struct {
  int64_t tokens;       /* query tokens per sample (0: each block's seq_len) */
  int64_t context;      /* keys each query attends to (0: tokens) */
  gboolean kv_cache;    /* K/V of earlier tokens read from the cache, the new ones written */
  gboolean last_logits; /* lm_head projects the last token only */
  gboolean decode;      /* a generation step (kernels may be replayed from a graph) */
  gboolean inference;   /* forward only, in eval mode: no dropout (every serving pass is one too) */
  gboolean loss_inplace; /* training: the cross entropy keeps the logits' gradient in their dtype, not an fp32
                          * softmax (the config's cross_entropy) */
} MmGraphPass;

typedef struct {
  const MmModel *model; /* (transfer none) */
  MmGraphPass pass;
  MmLayer *layers;
  guint n_layers;
  MmUnit *units;
  guint n_units;
  MmCost *block_cost;   /* per block: sum over its units */
  guint *block_first_unit; /* per block: its units are block_first_unit[b] .. + block_units[b] - 1 */
  guint *block_units;
  MmCost total;         /* whole model, per sample */
  int64_t total_params;
  double active_params;      /* MoE: expert params scaled by top_k / experts */
  double tokens_per_sample; /* model seq_len, or 1 for non-sequence models */
} MmGraph;

/* Expands @model into layers and units. The model must outlive the graph. */
MmGraph *mm_graph_new(const MmModel *model);
/* The same for one serving pass (@pass NULL: as mm_graph_new). */
MmGraph *mm_graph_new_pass(const MmModel *model, const MmGraphPass *pass);

/* KV-cache bytes one token adds in one layer of transformer block @b (the whole
 * model width: K and V of every kv head, or MLA's latent and RoPE key). */
double mm_graph_kv_bytes_per_token(const MmBlock *b);
void mm_graph_free(MmGraph *g);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmGraph, mm_graph_free)

/* Training FLOPs per sample (fwd + bwd input + bwd weight) of the whole model. */
double mm_graph_train_flops_per_sample(const MmGraph *g);

/* "decoder.17.qkv" style name of a layer, or "decoder.17" for a unit. (transfer full) */
char *mm_graph_layer_name(const MmGraph *g, guint layer);
char *mm_graph_unit_name(const MmGraph *g, guint unit);

void mm_cost_add(MmCost *acc, const MmCost *c);

/* The kernel one device runs for @part of layer @l (forward y = x W: (m, n, k); backward
 * input-gradient dx = dy W^T: (m, k, n); weight-gradient dW = x^T dy: (k, n, m); attention,
 * elementwise and lookups keep their shape), scaled by @share: the samples multiply m
 * (attention and interaction: batch), work / split the rows m, split the layer's split
 * dimension (column: n, row: k, sharded attention: heads, other sharded kernels: n), groups
 * the batch (m grows by the inverse). Dimensions are clamped to >= 1. A GEMM whose output
 * has fewer than MM_KERNEL_GEMV_MAX_ROWS rows or columns becomes a GEMV. @dtype: the
 * scenario's compute dtype (a config may override the model's). */
void mm_kernel_for_part(const MmLayer *l, MmKernelPart part, const MmKernelShare *share, MmDtype dtype,
                        MmKernel *out);

G_END_DECLS

/* graph: expands model blocks into layers and computes exact per-sample FLOPs, bytes, params, activations. */
#include "graph.h"

#include <string.h>

const char *const mm_role_names[] = {
  "lookup", "fc", "act", "router", "interact", "norm_attn", "qkv", "attn_core", "attn_out",
  "norm_ffn", "ffn_up", "ffn_act", "ffn_down", "token_lookup", "norm_final", "logits", "loss", "mtp_norm", "mtp_proj",
  NULL,
};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_role_names) == MM_ROLE_COUNT + 1);

const char *const mm_kernel_part_names[] = {"fwd", "bwd_input", "bwd_weight", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_kernel_part_names) == MM_PART_COUNT + 1);

/* FLOPs per element of the elementwise kernels (forward); backward counts twice.
 * Small next to GEMMs; they matter through their bytes (memory-bound). */
#define FLOPS_LAYERNORM 8.0
#define FLOPS_RMSNORM 5.0
#define FLOPS_GELU 8.0
#define FLOPS_GATED 6.0 /* silu/gelu(gate) * up */
#define FLOPS_RELU 1.0
#define FLOPS_SOFTMAX 5.0

void mm_cost_add(MmCost *acc, const MmCost *c)
{
  acc->fwd_flops += c->fwd_flops;
  acc->bwd_input_flops += c->bwd_input_flops;
  acc->bwd_weight_flops += c->bwd_weight_flops;
  acc->fwd_exec_flops += c->fwd_exec_flops;
  acc->bwd_input_exec_flops += c->bwd_input_exec_flops;
  acc->fwd_bytes += c->fwd_bytes;
  acc->bwd_input_bytes += c->bwd_input_bytes;
  acc->bwd_weight_bytes += c->bwd_weight_bytes;
  acc->weight_bytes += c->weight_bytes;
  acc->params += c->params;
  acc->act_bytes += c->act_bytes;
  acc->recompute_bytes += c->recompute_bytes;
  acc->mask_bytes += c->mask_bytes;
  acc->out_bytes += c->out_bytes;
}

typedef struct {
  GArray *layers; /* MmLayer */
  GArray *units;  /* MmUnit */
  guint block;
  MmGraphPass pass;
} Builder;

/* Whether this pass trains (a backward follows): inference and serving passes do not. */
static gboolean training_pass(const Builder *bd)
{
  return !bd->pass.inference && !bd->pass.kv_cache;
}

/* Whether block @b drops out in this pass: a training pass of a block with dropout (inference
 * and serving run in eval mode). */
static gboolean dropout_on(const Builder *bd, const MmBlock *b)
{
  return b->dropout && training_pass(bd);
}

/* Query tokens and keys per query of block @b in this pass. */
static double pass_tokens(const Builder *bd, const MmBlock *b)
{
  return (double)(bd->pass.tokens > 0 ? bd->pass.tokens : b->seq_len);
}

static double pass_context(const Builder *bd, const MmBlock *b)
{
  return bd->pass.context > 0 ? (double)bd->pass.context : pass_tokens(bd, b);
}

double mm_graph_kv_bytes_per_token(const MmBlock *b)
{
  double e = mm_dtype_bytes(b->dtype);
  if (b->kv_lora_rank > 0) return (double)(b->kv_lora_rank + b->rope_head_dim) * e;
  return (double)b->kv_heads * (double)(b->head_dim + b->v_head_dim) * e;
}

/* Kernel descriptors (see MmKernel): a GEMM x[m x k] W[k x n] of @batch problems, an
 * elementwise pass over m rows of n, attention of @q queries against @kv keys. */
static MmKernel kernel(MmKernelKind kind, const MmBlock *b, double m, double n, double k, double batch)
{
  return (MmKernel){.kind = kind, .dtype = b->compute_dtype, .m = m, .n = n, .k = k, .batch = batch};
}

static MmKernel kgemm(const MmBlock *b, double m, double k, double n)
{
  return kernel(MM_KERNEL_GEMM, b, m, n, k, 1);
}

static MmKernel kelem(const MmBlock *b, double rows, double width)
{
  return kernel(MM_KERNEL_ELEMENTWISE, b, rows, width, 1, 1);
}

/* Expert layers run one problem per expert, each on its share of the routed tokens. */
static MmKernel per_expert(MmKernel k, double experts)
{
  k.m /= experts;
  k.batch *= experts;
  return k;
}

/* Appends a layer with its cost and kernel to the current unit. Costs are built in locals
 * first: pointers into the growing array would not survive the next append. */
static void push(Builder *bd, MmLayerRole role, MmLayerClass cls, MmTpMode tp, const MmCost *cost,
                 gboolean expert, const MmKernel *kern)
{
  MmLayer l = {0};
  l.block = bd->block;
  l.unit = bd->units->len - 1;
  l.role = role;
  l.cls = cls;
  l.tp = tp;
  l.expert = expert;
  l.cost = *cost;
  l.kernel = *kern;
  g_array_append_val(bd->layers, l);
  g_array_index(bd->units, MmUnit, bd->units->len - 1).n_layers++;
}

static void begin_unit(Builder *bd, guint index)
{
  MmUnit u = {0};
  u.block = bd->block;
  u.index = index;
  u.first_layer = bd->layers->len;
  g_array_append_val(bd->units, u);
}

/* y[m x n] = x[m x k] W[k x n] (+ b): 2mkn FLOPs for forward, input-grad and weight-grad each. */
static void gemm(MmCost *c, double m, double k, double n, double e, gboolean bias)
{
  double f = 2.0 * m * k * n;
  c->fwd_flops = c->fwd_exec_flops = f;
  c->bwd_input_flops = c->bwd_input_exec_flops = f;
  c->bwd_weight_flops = f + (bias ? m * n : 0);
  c->params = (int64_t)(k * n + (bias ? n : 0));
  c->weight_bytes = (double)c->params * e;
  c->fwd_bytes = (m * k + m * n) * e;
  c->bwd_input_bytes = (m * n + m * k) * e;
  c->bwd_weight_bytes = (m * n + m * k) * e;
  c->act_bytes = m * k * e;
  c->out_bytes = m * n * e;
}

/* Memory-bound map over @in elements producing @out, keeping @stored for backward. */
static void elementwise(MmCost *c, double in, double out, double flops_per, double e, double stored)
{
  c->fwd_flops = c->fwd_exec_flops = flops_per * out;
  c->bwd_input_flops = c->bwd_input_exec_flops = 2.0 * flops_per * out;
  c->fwd_bytes = (in + out) * e;
  c->bwd_input_bytes = (out + stored + in) * e;
  c->act_bytes = stored * e;
  c->out_bytes = out * e;
}

static void norm(MmCost *c, MmNormKind kind, double tokens, double h, double e)
{
  elementwise(c, tokens * h, tokens * h, kind == MM_NORM_RMSNORM ? FLOPS_RMSNORM : FLOPS_LAYERNORM, e,
              tokens * h);
  c->params = (int64_t)(kind == MM_NORM_RMSNORM ? h : 2 * h);
  c->weight_bytes = (double)c->params * e;
  c->bwd_weight_flops = 2.0 * tokens * h;
}

/* The residual adds of a layer (pre-norm: x + attention, then + MLP; a parallel block: x + both
 * at once), memory-bound kernels of their own in training frameworks (PyTorch's add, Megatron's
 * bias-dropout-add): @adds sums of the residual stream and @branches branch outputs of @n
 * elements, each reading them and writing the sum; backward, the residual stream's gradient and
 * the branches' input gradients are summed the same way. With dropout on the branches the same
 * kernel (Megatron's fused bias-dropout-add) also writes each branch's 1-byte mask, and backward
 * a pass per branch reads its output gradient and mask and writes its input gradient (the mask
 * itself is kept by the branch's GEMM: residual_dropout). Serving passes (a KV cache) fuse the add
 * into the norm after it (vLLM's fused_add_rms_norm, TensorRT-LLM, SGLang: read 2, write 2): one
 * read and one write more than the norm alone, per branch. Charged to a norm of the layer. */
static void residual_adds(MmCost *c, const Builder *bd, const MmBlock *b, double adds, double n, double branches, double e)
{
  if (bd->pass.kv_cache) {
    c->fwd_bytes += adds * (branches + 1.0) * n * e;
    return;
  }
  const gboolean drop = dropout_on(bd, b);
  c->fwd_bytes += adds * ((branches + 2.0) * n * e + (drop ? branches * n : 0.0));
  c->bwd_input_bytes += adds * ((branches + 2.0) * n * e + (drop ? branches * (2.0 * n * e + n) : 0.0));
}

/* Scales the per-token work of a layer (MoE: top_k experts at capacity). Params stay. */
static void scale_work(MmCost *c, double f)
{
  c->fwd_flops *= f;
  c->bwd_input_flops *= f;
  c->bwd_weight_flops *= f;
  c->fwd_exec_flops *= f;
  c->bwd_input_exec_flops *= f;
  c->fwd_bytes *= f;
  c->bwd_input_bytes *= f;
  c->bwd_weight_bytes *= f;
  c->act_bytes *= f;
  c->recompute_bytes *= f;
  c->mask_bytes *= f;
  c->out_bytes *= f;
}

static void scale_params(MmCost *c, double f)
{
  c->params = (int64_t)((double)c->params * f);
  c->weight_bytes *= f;
}

/* Attention core for one sequence of q query tokens against kv keys: QK^T (2 q kv a d_k)
 * + softmax + AV (2 q kv a d_v). Model FLOPs count the full q x kv matrix (the MFU
 * convention); executed FLOPs halve it for causal flash kernels over a whole sequence
 * (masked blocks skipped) and add the flash backward's recomputation of QK^T
 * (FlashAttention-2: 5 matmuls vs 2 forward). Serving reads the cached K/V of the
 * earlier kv - q tokens and writes the new ones. */
/* The keys one query of a pass of @kv context tokens attends to under window @w (0: all; flash
 * kernels skip what is outside the band, eager ones compute it and mask it). */
static double window_keys(const MmBlock *b, double kv, int64_t w)
{
  return w > 0 && b->attention == MM_ATTN_FLASH ? MIN((double)w, kv) : kv;
}

static void attention(MmCost *c, const MmBlock *b, double q, double kv, int64_t window, gboolean cache, gboolean drop,
                      double e)
{
  double a = (double)b->heads, dk = (double)b->head_dim, dv = (double)b->v_head_dim;
  double kvh = (double)b->kv_heads;
  gboolean flash = b->attention == MM_ATTN_FLASH;
  const double kw = window_keys(b, kv, window); /* the band of a sliding window; model FLOPs count it whole */
  double qk = 2.0 * q * kw * a * dk, av = 2.0 * q * kw * a * dv, mm = qk + av, sm = FLOPS_SOFTMAX * a * q * kw;
  c->fwd_flops = mm + sm;
  c->bwd_input_flops = 2.0 * mm + 2.0 * sm;
  /* causal flash kernels over a whole sequence skip the masked half; inside a band of w < s keys the
   * first w - 1 queries see fewer: s w - w (w - 1) / 2 of the s w (eager kernels compute it all) */
  double causal = 1.0;
  if (flash && b->causal && q == kv) causal = kw < kv ? 1.0 - (kw - 1.0) / (2.0 * kv) : 0.5;
  c->fwd_exec_flops = causal * c->fwd_flops;
  c->bwd_input_exec_flops = causal * (c->bwd_input_flops + (flash ? qk : 0));
  /* this pass's q, k, v (MLA: k and v expanded from the latent per head) */
  double kvw = b->kv_lora_rank > 0 ? a * (dk + dv) : kvh * (dk + dv);
  double qkv = q * (a * dk + kvw) * e, o = q * a * dv * e;
  c->fwd_bytes = qkv + o;
  c->bwd_input_bytes = qkv + 2.0 * o + qkv;
  c->act_bytes = qkv + q * a * 4.0; /* q, k, v + fp32 log-sum-exp per row */
  if (cache) {
    double per_token = mm_graph_kv_bytes_per_token(b);
    c->fwd_bytes += MAX(0.0, kw - q) * per_token + q * per_token; /* read the context (its window), write the new */
  }
  if (!flash) {
    double scores = a * q * kv * e;
    c->fwd_bytes += 4.0 * scores;
    c->bwd_input_bytes += 6.0 * scores;
    c->act_bytes += scores; /* softmax probabilities */
    c->recompute_bytes += scores;
    if (drop) {
      /* a separate pass over the probabilities; its 1-byte mask kept for backward, and its output,
       * the dropped probabilities, kept by the AV matmul (softmax's backward needs the probabilities
       * before dropout): Korthikanti et al. 2022 Sec. 4.1's 5as^2b = 2 + 1 + 2 */
      c->fwd_bytes += 2.0 * scores + a * q * kv;
      c->bwd_input_bytes += 2.0 * scores + a * q * kv;
      c->act_bytes += a * q * kv + scores;
      c->recompute_bytes += a * q * kv + scores;
    }
  }
  c->out_bytes = o;
}

/* Dropout on a residual branch of @n elements: its 1-byte mask is kept for backward (the kernel
 * that draws and applies it, fused with the residual add, is priced by residual_adds). */
static void residual_dropout(MmCost *c, double n)
{
  c->act_bytes += n;
  c->mask_bytes += n;
}

/* Query, key and value projections of one layer. MLA: x -> q latent -> per-head queries,
 * x -> kv latent + shared RoPE key -> per-head keys and values (no weight absorption);
 * the down-projections are counted with the column-parallel up-projections. */
static MmKernel qkv_projection(MmCost *c, const MmBlock *b, double s, double e)
{
  double h = (double)b->hidden, a = (double)b->heads, dk = (double)b->head_dim, dv = (double)b->v_head_dim;
  if (b->kv_lora_rank == 0) {
    double n = a * dk + 2.0 * (double)b->kv_heads * ((dk + dv) / 2.0);
    gemm(c, s, h, n, e, b->bias);
    return kgemm(b, s, h, n);
  }
  double ql = (double)b->q_lora_rank, kl = (double)b->kv_lora_rank, r = (double)b->rope_head_dim;
  MmCost part = {0};
  *c = (MmCost){0};
  if (ql > 0) {
    gemm(&part, s, h, ql, e, FALSE);
    mm_cost_add(c, &part);
    gemm(&part, s, ql, a * dk, e, FALSE);
    mm_cost_add(c, &part);
  } else {
    gemm(&part, s, h, a * dk, e, FALSE);
    mm_cost_add(c, &part);
  }
  gemm(&part, s, h, kl + r, e, FALSE);
  mm_cost_add(c, &part);
  gemm(&part, s, kl, a * (dk - r + dv), e, FALSE);
  mm_cost_add(c, &part);
  c->act_bytes = s * (h + ql + kl) * e; /* the inputs of the four matmuls */
  c->out_bytes = s * a * (2.0 * dk + dv) * e;
  return kgemm(b, s, h, c->fwd_flops / (2.0 * s * h)); /* one GEMM of the same FLOPs over the input width */
}

/* The FFN of one layer: up (+ gate), activation, down over @f inner width. */
static void ffn(Builder *bd, const MmBlock *b, double s, double f, double work, double copies, gboolean expert,
                gboolean shared_input)
{
  double h = (double)b->hidden, e = mm_dtype_bytes(b->dtype);
  gboolean gated = b->ffn_kind == MM_FFN_SWIGLU || b->ffn_kind == MM_FFN_GEGLU;
  double act_flops = gated ? FLOPS_GATED : b->ffn_kind == MM_FFN_RELU ? FLOPS_RELU : FLOPS_GELU;
  const double groups = expert ? copies : 1.0; /* one problem per expert, each on its share of the tokens */
  MmCost c = {0};
  gemm(&c, s, h, gated ? 2.0 * f : f, e, b->bias);
  scale_work(&c, work), scale_params(&c, copies);
  if (shared_input) c.act_bytes = 0; /* a parallel block's one norm output, kept once by qkv */
  MmKernel k = per_expert(kgemm(b, s * work, h, gated ? 2.0 * f : f), groups);
  push(bd, MM_ROLE_FFN_UP, MM_LAYER_GEMM, MM_TP_COLUMN, &c, expert, &k);
  c = (MmCost){0};
  elementwise(&c, (gated ? 2.0 : 1.0) * s * f, s * f, act_flops, e, (gated ? 2.0 : 1.0) * s * f);
  scale_work(&c, work);
  k = per_expert(kelem(b, s * work, f), groups);
  push(bd, MM_ROLE_FFN_ACT, MM_LAYER_ELEMENTWISE, MM_TP_SHARDED, &c, expert, &k);
  c = (MmCost){0};
  gemm(&c, s, f, h, e, b->bias);
  scale_work(&c, work), scale_params(&c, copies);
  /* one dropout on the layer's MLP output: a MoE layer's on its routed experts' (combined with its
   * shared experts' before it), not twice */
  if (dropout_on(bd, b) && (b->experts == 0 || expert)) residual_dropout(&c, s * h);
  k = per_expert(kgemm(b, s * work, f, h), groups);
  push(bd, MM_ROLE_FFN_DOWN, MM_LAYER_GEMM, MM_TP_ROW, &c, expert, &k);
}

static void head_layers(Builder *bd, const MmBlock *b, double s, gboolean shared);
static void token_lookup(Builder *bd, const MmBlock *b, double s, gboolean shared);

/* The input of a DeepSeek-V3 multi-token prediction module (arXiv:2412.19437 Sec. 2.2, Eq. 21):
 * the embedding of the token k ahead (the shared table: no parameters), RMSNorm of it and of the
 * previous depth's hidden state (two norms of h weights), their concatenation projected by
 * M_k (2h x h). A module sees T - k tokens; counted as the whole sequence (1/4096 more). */
static void mtp_input(Builder *bd, const MmBlock *b, double s)
{
  const double h = (double)b->hidden, e = mm_dtype_bytes(b->dtype);
  token_lookup(bd, b, s, TRUE);
  MmCost c = {0};
  norm(&c, b->norm, 2.0 * s, h, e);
  c.params *= 2;
  c.weight_bytes *= 2.0;
  MmKernel k = kelem(b, 2.0 * s, h);
  push(bd, MM_ROLE_MTP_NORM, MM_LAYER_ELEMENTWISE, MM_TP_REPLICATED, &c, FALSE, &k);
  c = (MmCost){0};
  gemm(&c, s, 2.0 * h, h, e, FALSE);
  k = kgemm(b, s, 2.0 * h, h);
  push(bd, MM_ROLE_MTP_PROJ, MM_LAYER_GEMM, MM_TP_COLUMN, &c, FALSE, &k);
}

static void build_transformer(Builder *bd, const MmBlock *b)
{
  double s = pass_tokens(bd, b), kvn = pass_context(bd, b), h = (double)b->hidden, f = (double)b->ffn;
  double e = mm_dtype_bytes(b->dtype);
  gboolean moe = b->experts > 0;
  double work = moe ? (double)b->top_k * b->capacity_factor : 1.0;

  const double a = (double)b->heads;
  const MmKernel k_norm = kelem(b, s, h);
  const MmKernel k_out = kgemm(b, s, a * (double)b->v_head_dim, h);
  const MmKernel k_router = kgemm(b, s, h, (double)b->experts);
  for (int64_t i = 0; i < b->count; i++) {
    MmCost c;
    begin_unit(bd, (guint)i);
    const int64_t window = mm_block_layer_window(b, i);
    MmKernel k_attn = kernel(MM_KERNEL_ATTENTION, b, s, window_keys(b, kvn, window), (double)b->head_dim, a);
    /* what a measured attention curve keys besides the shape: flash or eager, and the causal mask
     * whose masked half the executed FLOPs skip (attention() halves them under the same test) */
    k_attn.flash = b->attention == MM_ATTN_FLASH;
    k_attn.causal = k_attn.flash && b->causal && s == kvn;
    if (i > 0 && window == mm_block_layer_window(b, i - 1)) { /* alike (same window): repeat the one before */
      const MmUnit prev = g_array_index(bd->units, MmUnit, bd->units->len - 2);
      for (guint k = 0; k < prev.n_layers; k++) {
        MmLayer l = g_array_index(bd->layers, MmLayer, prev.first_layer + k);
        l.unit = bd->units->len - 1;
        g_array_append_val(bd->layers, l);
      }
      g_array_index(bd->units, MmUnit, bd->units->len - 1).n_layers = prev.n_layers;
      continue;
    }
    if (b->mtp) mtp_input(bd, b, s);
    c = (MmCost){0};
    norm(&c, b->norm, s, h, e);
    if (b->parallel_block == MM_PARALLEL_BLOCK_SHARED_NORM) residual_adds(&c, bd, b, 1.0, s * h, 2.0, e); /* its one norm */
    push(bd, MM_ROLE_NORM_ATTN, MM_LAYER_ELEMENTWISE, MM_TP_REPLICATED, &c, FALSE, &k_norm);
    c = (MmCost){0};
    MmKernel k_qkv = qkv_projection(&c, b, s, e);
    push(bd, MM_ROLE_QKV, MM_LAYER_GEMM, MM_TP_COLUMN, &c, FALSE, &k_qkv);
    c = (MmCost){0};
    attention(&c, b, s, kvn, window, bd->pass.kv_cache, dropout_on(bd, b), e);
    push(bd, MM_ROLE_ATTN_CORE, MM_LAYER_ATTENTION, MM_TP_SHARDED, &c, FALSE, &k_attn);
    c = (MmCost){0};
    gemm(&c, s, (double)b->heads * (double)b->v_head_dim, h, e, b->bias);
    if (dropout_on(bd, b)) residual_dropout(&c, s * h);
    push(bd, MM_ROLE_ATTN_OUT, MM_LAYER_GEMM, MM_TP_ROW, &c, FALSE, &k_out);
    /* a parallel block's MLP reads the attention's normalized input (PaLM Sec. 2, GPT-J), or
     * its own norm of the same input (GPT-NeoX gpt_j_residual) */
    if (b->parallel_block != MM_PARALLEL_BLOCK_SHARED_NORM) {
      c = (MmCost){0};
      norm(&c, b->norm, s, h, e);
      /* the layer's residual adds: after attention and after the MLP (a parallel block: one of both) */
      if (b->parallel_block == MM_PARALLEL_BLOCK_NONE) residual_adds(&c, bd, b, 2.0, s * h, 1.0, e);
      else residual_adds(&c, bd, b, 1.0, s * h, 2.0, e);
      push(bd, MM_ROLE_NORM_FFN, MM_LAYER_ELEMENTWISE, MM_TP_REPLICATED, &c, FALSE, &k_norm);
    }
    if (moe) {
      c = (MmCost){0};
      gemm(&c, s, h, (double)b->experts, e, FALSE);
      /* dispatch and combine permutations: each token copied to top_k experts and back */
      c.fwd_bytes += 2.0 * (double)b->top_k * s * h * e;
      c.bwd_input_bytes += 2.0 * (double)b->top_k * s * h * e;
      push(bd, MM_ROLE_ROUTER, MM_LAYER_GEMM, MM_TP_REPLICATED, &c, FALSE, &k_router);
      /* shared experts: a dense FFN every token goes through */
      if (b->shared_experts > 0) ffn(bd, b, s, f * (double)b->shared_experts, 1.0, 1.0, FALSE, FALSE);
    }
    /* FFN (per expert for MoE: work x top_k x capacity, params x experts) */
    ffn(bd, b, s, f, work, moe ? (double)b->experts : 1.0, moe, b->parallel_block == MM_PARALLEL_BLOCK_SHARED_NORM);
    if (b->mtp) head_layers(bd, b, s, TRUE); /* the shared output head (its own RMSNorm) and the module's loss */
  }
}

static void build_mlp(Builder *bd, const MmBlock *b)
{
  double e = mm_dtype_bytes(b->dtype);
  gboolean moe = b->experts > 0;
  double work = moe ? (double)b->top_k * b->capacity_factor : 1.0;
  for (int64_t i = 0; i < b->count; i++) {
    MmCost c;
    begin_unit(bd, (guint)i);
    double in = (double)(i == 0 ? b->input_dim : b->width);
    double out = (double)(i == b->count - 1 ? b->output_dim : b->width);
    const double groups = moe ? (double)b->experts : 1.0;
    if (moe && i == 0) {
      c = (MmCost){0};
      gemm(&c, 1, in, (double)b->experts, e, FALSE);
      MmKernel k = kgemm(b, 1, in, (double)b->experts);
      push(bd, MM_ROLE_ROUTER, MM_LAYER_GEMM, MM_TP_REPLICATED, &c, FALSE, &k);
    }
    c = (MmCost){0};
    gemm(&c, 1, in, out, e, FALSE);
    if (moe) scale_work(&c, work), scale_params(&c, (double)b->experts);
    MmKernel k = per_expert(kgemm(b, work, in, out), groups);
    push(bd, MM_ROLE_MLP_FC, MM_LAYER_GEMM, MM_TP_ROW, &c, moe, &k);
    if (b->activation) {
      c = (MmCost){0};
      elementwise(&c, out, out, FLOPS_RELU, e, out);
      if (moe) scale_work(&c, work);
      k = per_expert(kelem(b, work, out), groups);
      push(bd, MM_ROLE_MLP_ACT, MM_LAYER_ELEMENTWISE, MM_TP_REPLICATED, &c, moe, &k);
    }
  }
}

static void build_embedding_bag(Builder *bd, const MmBlock *b)
{
  double e = mm_dtype_bytes(b->dtype);
  double t = (double)b->tables, d = (double)b->dim, p = b->pooling;
  begin_unit(bd, 0);
  MmCost cost = {0}, *c = &cost;
  /* Lookup bytes as MAD-Max (Sec. IV-B): tables x pooling x dim x bytes per sample. */
  double rows = t * p * d * e;
  c->fwd_flops = c->fwd_exec_flops = t * p * d; /* pooling adds */
  c->bwd_weight_flops = t * p * d;
  c->fwd_bytes = rows + t * d * e;
  /* Backward scatters pooled gradients into the touched rows (read + write each). */
  c->bwd_weight_bytes = 2.0 * rows + t * d * e;
  c->params = (int64_t)(t * (double)b->rows * d); /* exact: a loaded model's counts stay below 2^53 */
  c->weight_bytes = 0; /* a lookup touches rows, not the table */
  c->act_bytes = t * p * 4.0; /* int32 indices */
  c->out_bytes = t * d * e;
  MmKernel k = kernel(MM_KERNEL_LOOKUP, b, p, d, 1, t); /* per table: pooling lookups of dim-wide rows */
  push(bd, MM_ROLE_EMB_LOOKUP, MM_LAYER_LOOKUP, MM_TP_REPLICATED, c, FALSE, &k);
}

static void build_interaction(Builder *bd, const MmBlock *b)
{
  double e = mm_dtype_bytes(b->dtype);
  double F = (double)b->features, d = (double)b->dim;
  begin_unit(bd, 0);
  MmCost cost = {0}, *c = &cost;
  if (b->op == MM_INTERACTION_DOT) {
    /* Batched X X^T: F x d times d x F per sample; the strict upper triangle is kept. */
    double pairs = F * (F - 1.0) / 2.0;
    c->fwd_flops = c->fwd_exec_flops = 2.0 * F * F * d;
    c->bwd_input_flops = c->bwd_input_exec_flops = 4.0 * F * F * d;
    c->fwd_bytes = (F * d + pairs) * e;
    c->bwd_input_bytes = (pairs + 2.0 * F * d) * e;
    c->out_bytes = (pairs + d) * e;
  } else {
    c->fwd_bytes = 2.0 * F * d * e;
    c->bwd_input_bytes = 2.0 * F * d * e;
    c->out_bytes = F * d * e;
  }
  c->act_bytes = F * d * e;
  MmKernel k = b->op == MM_INTERACTION_DOT ? kernel(MM_KERNEL_INTERACTION, b, F, F, d, 1) : kelem(b, F, d);
  push(bd, MM_ROLE_INTERACT, MM_LAYER_INTERACTION, MM_TP_REPLICATED, c, FALSE, &k);
}

/* Token (and learned position) lookup of @s tokens; @shared: the table is counted elsewhere. */
static void token_lookup(Builder *bd, const MmBlock *b, double s, gboolean shared)
{
  double e = mm_dtype_bytes(b->dtype);
  double h = (double)b->hidden;
  MmCost cost = {0}, *c = &cost;
  double pos = b->positions > 0 ? 1.0 : 0.0;
  c->fwd_flops = c->fwd_exec_flops = pos * s * h;
  c->fwd_bytes = (2.0 + pos) * s * h * e;
  c->bwd_weight_flops = (1.0 + pos) * s * h;
  c->bwd_weight_bytes = 2.0 * (1.0 + pos) * s * h * e;
  c->params = shared ? 0 : (int64_t)(((double)b->vocab + (double)b->positions) * h);
  c->act_bytes = s * 4.0;
  c->out_bytes = s * h * e;
  MmKernel k = kernel(MM_KERNEL_LOOKUP, b, s, h, 1, 1);
  push(bd, MM_ROLE_TOKEN_LOOKUP, MM_LAYER_LOOKUP, MM_TP_ROW, c, FALSE, &k);
}

static void build_token_embedding(Builder *bd, const MmBlock *b)
{
  begin_unit(bd, 0);
  token_lookup(bd, b, pass_tokens(bd, b), FALSE);
}

/* Final norm, vocabulary projection (no parameters of its own when @shared) and loss over @s tokens. */
static void head_layers(Builder *bd, const MmBlock *b, double s, gboolean shared)
{
  double e = mm_dtype_bytes(b->dtype);
  double h = (double)b->hidden, v = (double)b->vocab;
  MmCost c = {0};
  norm(&c, b->norm, s, h, e);
  MmKernel k = kelem(b, s, h);
  push(bd, MM_ROLE_NORM_FINAL, MM_LAYER_ELEMENTWISE, MM_TP_REPLICATED, &c, FALSE, &k);
  c = (MmCost){0};
  gemm(&c, s, h, v, e, FALSE);
  if (shared) c.params = 0; /* counted once, in the token embedding or the lm_head; still read per call */
  k = kgemm(b, s, h, v);
  push(bd, MM_ROLE_LOGITS, MM_LAYER_GEMM, MM_TP_COLUMN, &c, FALSE, &k);
  c = (MmCost){0};
  elementwise(&c, s * v, s, FLOPS_SOFTMAX * v, e, s * v);
  c.bwd_input_bytes = 2.0 * s * v * e; /* read logits, write their gradient */
  /* training keeps the softmax in fp32 for backward: Megatron's vocab-parallel cross-entropy runs on
   * logits.float() and saves its exp_logits, torchtitan and HF upcast the logits before
   * cross_entropy (Korthikanti et al. 2022 count the output layer's 4sbh/t (1 + v/h): its fp32 4sbv/t);
   * an in-place loss (Transformer Engine's parallel_cross_entropy) writes the gradient over the
   * logits in the forward and keeps them, in their dtype */
  if (training_pass(bd)) c.act_bytes = (bd->pass.loss_inplace ? e : 4.0) * s * v;
  k = kelem(b, s, v);
  push(bd, MM_ROLE_LOSS, MM_LAYER_ELEMENTWISE, MM_TP_SHARDED, &c, FALSE, &k);
}

static void build_lm_head(Builder *bd, const MmBlock *b)
{
  begin_unit(bd, 0);
  head_layers(bd, b, bd->pass.last_logits ? 1.0 : pass_tokens(bd, b), b->tied);
}

void mm_graph_free(MmGraph *g)
{
  if (!g) return;
  g_free(g->layers);
  g_free(g->units);
  g_free(g->block_cost);
  g_free(g->block_first_unit);
  g_free(g->block_units);
  g_free(g);
}

MmGraph *mm_graph_new(const MmModel *model)
{
  return mm_graph_new_pass(model, NULL);
}

MmGraph *mm_graph_new_pass(const MmModel *model, const MmGraphPass *pass)
{
  g_return_val_if_fail(model != NULL, NULL);
  /* sized once: a unit holds at most 12 layers (a MoE transformer layer with shared experts; an
   * MTP module 6 more: the array grows if needed) */
  guint units = 0;
  for (guint i = 0; i < model->n_blocks; i++)
    units += mm_block_is_layers(&model->blocks[i]) || model->blocks[i].mtp ? (guint)model->blocks[i].count : 1;
  Builder bd = {g_array_sized_new(FALSE, FALSE, sizeof(MmLayer), 12 * units),
                g_array_sized_new(FALSE, FALSE, sizeof(MmUnit), units), 0, {0}};
  if (pass) bd.pass = *pass;
  for (guint i = 0; i < model->n_blocks; i++) {
    const MmBlock *b = &model->blocks[i];
    bd.block = i;
    switch (b->kind) {
    case MM_BLOCK_EMBEDDING_BAG: build_embedding_bag(&bd, b); break;
    case MM_BLOCK_MLP: build_mlp(&bd, b); break;
    case MM_BLOCK_INTERACTION: build_interaction(&bd, b); break;
    case MM_BLOCK_TRANSFORMER: build_transformer(&bd, b); break;
    case MM_BLOCK_TOKEN_EMBEDDING: build_token_embedding(&bd, b); break;
    case MM_BLOCK_LM_HEAD: build_lm_head(&bd, b); break;
    case MM_BLOCK_KIND_COUNT: g_assert_not_reached();
    }
  }
  MmGraph *g = g_new0(MmGraph, 1);
  g->model = model;
  g->pass = bd.pass;
  g->n_layers = bd.layers->len;
  g->n_units = bd.units->len;
  g->layers = (MmLayer *)(void *)g_array_free(bd.layers, FALSE);
  g->units = (MmUnit *)(void *)g_array_free(bd.units, FALSE);
  g->block_cost = g_new0(MmCost, model->n_blocks);
  g->block_first_unit = g_new0(guint, model->n_blocks);
  g->block_units = g_new0(guint, model->n_blocks);
  for (guint u = g->n_units; u-- > 0;) {
    g->block_first_unit[g->units[u].block] = u;
    g->block_units[g->units[u].block]++;
  }
  for (guint u = 0; u < g->n_units; u++) {
    MmUnit *un = &g->units[u];
    for (guint l = un->first_layer; l < un->first_layer + un->n_layers; l++)
      mm_cost_add(&un->cost, &g->layers[l].cost);
    mm_cost_add(&g->block_cost[un->block], &un->cost);
    mm_cost_add(&g->total, &un->cost);
  }
  g->total_params = g->total.params;
  /* canonical layers: the same op at the same place of an identical earlier unit */
  for (guint u = 0; u < g->n_units; u++) {
    const MmUnit *un = &g->units[u];
    const MmUnit *prev = u > 0 ? &g->units[u - 1] : NULL;
    const MmBlock *bk = &model->blocks[un->block];
    gboolean same = prev && prev->block == un->block && prev->n_layers == un->n_layers;
    /* an MLP mixture's last layer combines the experts' outputs: never a copy of the others */
    if (bk->kind == MM_BLOCK_MLP && bk->experts > 0 && un->index == bk->count - 1) same = FALSE;
    for (guint k = 0; same && k < un->n_layers; k++) {
      const MmLayer *a = &g->layers[prev->first_layer + k], *b = &g->layers[un->first_layer + k];
      same = a->role == b->role && a->tp == b->tp && a->expert == b->expert && a->cls == b->cls &&
             memcmp(&a->cost, &b->cost, sizeof(MmCost)) == 0;
    }
    for (guint k = 0; k < un->n_layers; k++) {
      MmLayer *l = &g->layers[un->first_layer + k];
      l->canon = same ? g->layers[prev->first_layer + k].canon : un->first_layer + k;
    }
  }
  for (guint l = 0; l < g->n_layers; l++) {
    const MmLayer *ly = &g->layers[l];
    const MmBlock *b = &model->blocks[ly->block];
    g->active_params += (double)ly->cost.params * (ly->expert ? (double)b->top_k / (double)b->experts : 1.0);
  }
  g->tokens_per_sample = bd.pass.tokens > 0 ? (double)bd.pass.tokens : model->seq_len > 0 ? (double)model->seq_len : 1.0;
  return g;
}

double mm_graph_train_flops_per_sample(const MmGraph *g)
{
  return g->total.fwd_flops + g->total.bwd_input_flops + g->total.bwd_weight_flops;
}

char *mm_graph_unit_name(const MmGraph *g, guint unit)
{
  g_return_val_if_fail(unit < g->n_units, NULL);
  const MmUnit *u = &g->units[unit];
  const MmBlock *b = &g->model->blocks[u->block];
  return b->count > 1 ? g_strdup_printf("%s.%u", b->name, u->index) : g_strdup(b->name);
}

char *mm_graph_layer_name(const MmGraph *g, guint layer)
{
  g_return_val_if_fail(layer < g->n_layers, NULL);
  g_autofree char *unit = mm_graph_unit_name(g, g->layers[layer].unit);
  return g_strdup_printf("%s.%s", unit, mm_role_names[g->layers[layer].role]);
}

static gboolean gemm_like(MmKernelKind k)
{
  return k == MM_KERNEL_GEMM || k == MM_KERNEL_GEMV || k == MM_KERNEL_INTERACTION;
}

void mm_kernel_for_part(const MmLayer *l, MmKernelPart part, const MmKernelShare *share, MmDtype dtype,
                        MmKernel *out)
{
  g_return_if_fail(l != NULL && share != NULL && out != NULL && part < MM_PART_COUNT);
  MmKernel k = l->kernel;
  k.dtype = dtype;
  const double split = share->split > 0 ? share->split : 1.0;
  const double groups = share->groups > 0 ? share->groups : 1.0;
  /* one problem per sequence (attention, interaction), else the samples' rows stacked */
  if (k.kind == MM_KERNEL_ATTENTION || k.kind == MM_KERNEL_INTERACTION)
    k.batch *= share->samples;
  else
    k.m *= share->samples;
  k.m *= share->work / split;
  switch (l->tp) {
  case MM_TP_COLUMN: k.n *= split; break;
  case MM_TP_ROW:
    if (gemm_like(k.kind)) k.k *= split;
    else k.n *= split;
    break;
  case MM_TP_SHARDED:
    if (k.kind == MM_KERNEL_ATTENTION) k.batch *= split; /* heads */
    else k.n *= split;
    break;
  case MM_TP_REPLICATED: k.m *= split; break;
  }
  k.batch *= groups;
  k.m /= groups;
  k.m = MAX(k.m, 1.0), k.n = MAX(k.n, 1.0), k.k = MAX(k.k, 1.0), k.batch = MAX(k.batch, 1.0);
  if (gemm_like(k.kind) && part == MM_PART_BWD_INPUT) { /* dx[m x k] = dy[m x n] W^T[n x k] */
    double n = k.n;
    k.n = k.k, k.k = n;
  } else if (gemm_like(k.kind) && part == MM_PART_BWD_WEIGHT) { /* dW[k x n] = x^T[k x m] dy[m x n] */
    double m = k.m;
    k.m = k.k, k.k = m;
  }
  k.bwd = k.kind == MM_KERNEL_ATTENTION && part == MM_PART_BWD_INPUT; /* attention's one backward kernel */
  if (k.kind == MM_KERNEL_GEMM && (k.m < MM_KERNEL_GEMV_MAX_ROWS || k.n < MM_KERNEL_GEMV_MAX_ROWS))
    k.kind = MM_KERNEL_GEMV;
  *out = k;
}

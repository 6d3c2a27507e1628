/* model: model files (models/) -> MmModel, a validated list of layer blocks. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "json.h"

#define BLK(f) ((gssize)offsetof(MmBlock, f))
#define BIG MM_INT_MAX

static const char *const interaction_names[] = {"dot", "concat", NULL};
static const char *const ffn_names[] = {"gelu", "relu", "swiglu", "geglu", NULL};
static const char *const norm_names[] = {"layernorm", "rmsnorm", NULL};
static const char *const attention_names[] = {"flash", "eager", NULL};
static const char *const parallel_block_names[] = {"none", "shared_norm", "two_norms", NULL};

/* Top-level keys land here before moving into MmModel. */
typedef struct {
  char *name, *source;
  int64_t seq_len;
  int dtype;
} ModelTop;
#define TOP(f) ((gssize)offsetof(ModelTop, f))

static const MmField model_fields[] = {
  {"name", MM_F_STR, TRUE, 0, 0, 0, NULL, TOP(name), NULL, "display name"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, TOP(source), NULL, "where the dimensions come from"},
  {"seq_len", MM_F_INT, FALSE, 1, 1 << 24, 0, NULL, TOP(seq_len), "tokens",
   "tokens per sample for sequence models (LLMs); absent for DLRM-style samples; default of every block's seq_len"},
  {"dtype", MM_F_ENUM, FALSE, 0, 0, MM_DTYPE_BF16, mm_dtype_names, TOP(dtype), NULL,
   "default storage dtype of every block"},
  {"blocks", MM_F_ARRAY, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "layer blocks in execution order (forward); see the per-kind tables"},
  MM_FIELDS_END,
};

#define COMMON_FIELDS                                                                           \
  {"kind", MM_F_ENUM, TRUE, 0, 0, 0, mm_block_kind_names, BLK(kind), NULL, "block kind"},        \
  {"inputs", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,                              \
   "names of earlier blocks whose outputs this block reads (default: the previous block; [] = only the batch input)"}, \
  {"name", MM_F_STR, FALSE, 0, 0, 0, NULL, BLK(name), NULL,                                     \
   "unique name (default: the kind, suffixed with an index when repeated); configs may key strategies by it"}, \
  {"dtype", MM_F_ENUM, FALSE, 0, 0, NAN, mm_dtype_names, BLK(dtype), NULL,                      \
   "storage dtype of weights and activations (default: the model's dtype)"},                    \
  {"compute_dtype", MM_F_ENUM, FALSE, 0, 0, NAN, mm_dtype_names, BLK(compute_dtype), NULL,      \
   "dtype of the math; selects the peak FLOP/s (default: dtype)"}

#define MOE_FIELDS                                                                              \
  {"experts", MM_F_INT, FALSE, 0, 1 << 20, 0, NULL, BLK(experts), NULL,                          \
   "mixture of experts: number of experts (0: dense)"},                                         \
  {"top_k", MM_F_INT, FALSE, 1, 1 << 20, 1, NULL, BLK(top_k), NULL, "experts active per token/sample"}, \
  {"capacity_factor", MM_F_NUM, FALSE, 0.01, 64, 1.0, NULL, BLK(capacity_factor), NULL,         \
   "expert capacity relative to a perfectly balanced load; scales expert compute"},             \
  {"router_groups", MM_F_INT, FALSE, 0, 1 << 20, 0, NULL, BLK(router_groups), NULL,             \
   "group-limited routing (DeepSeek-V3: 8; HF n_group, Megatron-Core moe_router_num_groups): the experts form "  \
   "this many contiguous groups and a token takes its top_k from its router_group_topk best groups; expert "     \
   "parallelism placing a group per node makes it node-limited routing (0: unlimited)"},        \
  {"router_group_topk", MM_F_INT, FALSE, 0, 1 << 20, 0, NULL, BLK(router_group_topk), NULL,     \
   "group-limited routing: groups one token's experts come from (DeepSeek-V3: 4 nodes; HF topk_group, "          \
   "Megatron-Core moe_router_group_topk)"}

static const MmField embedding_bag_fields[] = {
  COMMON_FIELDS,
  {"tables", MM_F_INT, TRUE, 1, BIG, 0, NULL, BLK(tables), NULL, "number of tables"},
  {"rows", MM_F_INT, TRUE, 1, BIG, 0, NULL, BLK(rows), NULL, "rows per table"},
  {"dim", MM_F_INT, TRUE, 1, 1 << 20, 0, NULL, BLK(dim), NULL, "embedding dimension"},
  {"pooling", MM_F_NUM, TRUE, 1e-6, 1e9, 0, NULL, BLK(pooling), "lookups",
   "average lookups per table per sample (pooling factor)"},
  MM_FIELDS_END,
};

static const MmField mlp_fields[] = {
  COMMON_FIELDS,
  {"count", MM_F_INT, TRUE, 1, 1 << 20, 0, NULL, BLK(count), "layers", "dense layers in the stack"},
  {"width", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL, BLK(width), NULL, "hidden width of every layer"},
  {"input_dim", MM_F_INT, FALSE, 1, 1 << 30, NAN, NULL, BLK(input_dim), NULL,
   "input features of the first layer (default: width)"},
  {"output_dim", MM_F_INT, FALSE, 1, 1 << 30, NAN, NULL, BLK(output_dim), NULL,
   "outputs of the last layer (default: width)"},
  {"activation", MM_F_BOOL, FALSE, 0, 0, 1, NULL, BLK(activation), NULL,
   "elementwise activation after each layer"},
  MOE_FIELDS,
  MM_FIELDS_END,
};

static const MmField interaction_fields[] = {
  COMMON_FIELDS,
  {"op", MM_F_ENUM, TRUE, 0, 0, 0, interaction_names, BLK(op), NULL,
   "dot: pairwise dot products (F^2/2 x dim MACs); concat: copy only"},
  {"features", MM_F_INT, FALSE, 1, 1 << 24, NAN, NULL, BLK(features), "vectors",
   "vectors that interact (default: tables of the preceding embedding_bag blocks + 1 dense vector)"},
  {"dim", MM_F_INT, FALSE, 1, 1 << 20, NAN, NULL, BLK(dim), NULL,
   "vector dimension (default: dim of the preceding embedding_bag)"},
  MM_FIELDS_END,
};

static const MmField transformer_fields[] = {
  COMMON_FIELDS,
  {"count", MM_F_INT, TRUE, 1, 1 << 20, 0, NULL, BLK(count), "layers", "transformer layers"},
  {"hidden", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL, BLK(hidden), NULL, "model width d"},
  {"heads", MM_F_INT, TRUE, 1, 1 << 16, 0, NULL, BLK(heads), NULL, "attention (query) heads; must divide hidden"},
  {"kv_heads", MM_F_INT, FALSE, 1, 1 << 16, NAN, NULL, BLK(kv_heads), NULL,
   "key/value heads (GQA/MQA); must divide heads (default: heads)"},
  {"ffn", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL, BLK(ffn), NULL, "FFN inner width (per expert for MoE)"},
  {"ffn_kind", MM_F_ENUM, FALSE, 0, 0, MM_FFN_GELU, ffn_names, BLK(ffn_kind), NULL,
   "gelu/relu: 2 matrices; swiglu/geglu: gated, 3 matrices"},
  {"seq_len", MM_F_INT, FALSE, 1, 1 << 24, NAN, NULL, BLK(seq_len), "tokens",
   "sequence length (default: the model's seq_len)"},
  {"norm", MM_F_ENUM, FALSE, 0, 0, MM_NORM_LAYERNORM, norm_names, BLK(norm), NULL,
   "normalization before attention and FFN"},
  {"attention", MM_F_ENUM, FALSE, 0, 0, MM_ATTN_FLASH, attention_names, BLK(attention), NULL,
   "flash: scores never stored; eager: softmax probabilities kept for backward (s^2 memory)"},
  {"bias", MM_F_BOOL, FALSE, 0, 0, 0, NULL, BLK(bias), NULL, "linear layers have biases"},
  {"dropout", MM_F_BOOL, FALSE, 0, 0, 0, NULL, BLK(dropout), NULL,
   "dropout on attention probabilities and both residual branches: masks kept for backward, extra memory passes (fused into flash attention); training only (inference and serving run in eval mode)"},
  {"sliding_window", MM_F_INT, FALSE, 0, 1 << 30, 0, NULL, BLK(sliding_window), "tokens",
   "sliding-window attention: each query attends to the last this many tokens (Mistral 4096, Gemma 2 4096, "
   "Gemma 3 1024, GPT-OSS 128); K/V cache holds as many; 0: full attention"},
  {"global_every", MM_F_INT, FALSE, 0, 1 << 20, 0, NULL, BLK(global_every), "layers",
   "with sliding_window: every this-many-th layer (the k-th, 2k-th, ...) attends to the whole context "
   "(Gemma 2 and GPT-OSS 2, Gemma 3 6); 0: every layer windowed"},
  {"causal", MM_F_BOOL, FALSE, 0, 0, 1, NULL, BLK(causal), NULL,
   "causal (decoder) attention: flash kernels skip the masked half; model FLOPs still count the full matrix"},
  {"head_dim", MM_F_INT, FALSE, 1, 1 << 16, NAN, NULL, BLK(head_dim), NULL,
   "query/key width per head (default hidden / heads)"},
  {"v_head_dim", MM_F_INT, FALSE, 1, 1 << 16, NAN, NULL, BLK(v_head_dim), NULL,
   "value width per head (default head_dim)"},
  {"q_lora_rank", MM_F_INT, FALSE, 0, 1 << 20, 0, NULL, BLK(q_lora_rank), NULL,
   "MLA: queries through a low-rank bottleneck of this width (0: a full projection)"},
  {"kv_lora_rank", MM_F_INT, FALSE, 0, 1 << 20, 0, NULL, BLK(kv_lora_rank), NULL,
   "MLA (DeepSeek-V2/V3): keys and values from a compressed latent of this width, which is also what "
   "the KV cache stores (0: ordinary multi-/grouped-query attention)"},
  {"rope_head_dim", MM_F_INT, FALSE, 0, 1 << 16, 0, NULL, BLK(rope_head_dim), NULL,
   "MLA: decoupled RoPE key width shared by all heads (part of head_dim)"},
  {"shared_experts", MM_F_INT, FALSE, 0, 1024, 0, NULL, BLK(shared_experts), NULL,
   "MoE: experts every token goes through besides its top_k routed ones (DeepSeek)"},
  {"parallel_block", MM_F_ENUM, FALSE, 0, 0, MM_PARALLEL_BLOCK_NONE, parallel_block_names, BLK(parallel_block), NULL,
   "attention and MLP in parallel, y = x + Attn(LN x) + MLP(LN x): shared_norm (GPT-J, PaLM, Falcon-7B: one "
   "norm), two_norms (GPT-NeoX gpt_j_residual: LN1 for attention, LN2 for the MLP); under TP one all-reduce "
   "after both (none: sequential blocks; not with experts)"},
  {"mtp_depth", MM_F_INT, FALSE, 0, 16, 0, NULL, BLK(mtp_depth), "modules",
   "DeepSeek-V3 multi-token prediction modules (V3 trains with 1): each an embedding of the next token "
   "(shared), two RMSNorms, a 2h x h projection, one layer of this block's kind and the shared head + "
   "loss; appended after the model's last block (an lm_head) as block \"<name>_mtp\""},
  MOE_FIELDS,
  MM_FIELDS_END,
};

static const MmField token_embedding_fields[] = {
  COMMON_FIELDS,
  {"vocab", MM_F_INT, TRUE, 1, 1 << 28, 0, NULL, BLK(vocab), "tokens", "vocabulary size"},
  {"hidden", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL, BLK(hidden), NULL, "embedding width"},
  {"positions", MM_F_INT, FALSE, 0, 1 << 24, 0, NULL, BLK(positions), NULL,
   "rows of a learned position embedding (0: none, e.g. RoPE)"},
  {"seq_len", MM_F_INT, FALSE, 1, 1 << 24, NAN, NULL, BLK(seq_len), "tokens",
   "tokens per sample (default: the model's seq_len)"},
  MM_FIELDS_END,
};

static const MmField lm_head_fields[] = {
  COMMON_FIELDS,
  {"vocab", MM_F_INT, TRUE, 1, 1 << 28, 0, NULL, BLK(vocab), "tokens", "vocabulary size"},
  {"hidden", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL, BLK(hidden), NULL, "input width"},
  {"tied", MM_F_BOOL, FALSE, 0, 0, 0, NULL, BLK(tied), NULL,
   "shares the token embedding's matrix (no parameters of its own)"},
  {"norm", MM_F_ENUM, FALSE, 0, 0, MM_NORM_LAYERNORM, norm_names, BLK(norm), NULL,
   "final normalization before the projection"},
  {"seq_len", MM_F_INT, FALSE, 1, 1 << 24, NAN, NULL, BLK(seq_len), "tokens",
   "tokens per sample (default: the model's seq_len)"},
  MM_FIELDS_END,
};

static const MmField *const kind_fields[MM_BLOCK_KIND_COUNT] = {
  embedding_bag_fields, mlp_fields, interaction_fields, transformer_fields, token_embedding_fields,
  lm_head_fields,
};

void mm_model_free(MmModel *m)
{
  if (!m) return;
  for (guint i = 0; i < m->n_blocks; i++) {
    g_free(m->blocks[i].name);
    g_free(m->blocks[i].inputs);
  }
  g_free(m->blocks);
  g_free(m->path);
  g_free(m->name);
  g_free(m->source);
  g_free(m);
}

/* Cross-field checks and derived defaults of one block. */
static gboolean finish_block(const MmJsonCtx *ctx, MmModel *m, guint bi, const char *jp,
                             guint64 present, GError **error)
{
  MmBlock *b = &m->blocks[bi];
  const MmField *fields = kind_fields[b->kind];
#define GIVEN(key) ((present >> mm_json_field_index(fields, key)) & 1)
  if (!GIVEN("compute_dtype")) b->compute_dtype = b->dtype;
  if (b->kind != MM_BLOCK_MLP && b->kind != MM_BLOCK_TRANSFORMER) b->count = 1;

  switch (b->kind) {
  case MM_BLOCK_EMBEDDING_BAG:
    break;
  case MM_BLOCK_MLP:
    if (!GIVEN("input_dim")) b->input_dim = b->width;
    if (!GIVEN("output_dim")) b->output_dim = b->width;
    break;
  case MM_BLOCK_INTERACTION: {
    int64_t tables = 0, dim = 0;
    gboolean dense = FALSE;
    for (guint j = 0; j < bi; j++) {
      const MmBlock *p = &m->blocks[j];
      if (p->kind == MM_BLOCK_EMBEDDING_BAG) {
        tables += p->tables;
        dim = p->dim;
      } else if (p->kind == MM_BLOCK_MLP) {
        dense = TRUE;
      }
    }
    if (!GIVEN("features")) {
      if (tables == 0) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                      "no embedding_bag block precedes this interaction; give \"features\" and \"dim\"");
        return FALSE;
      }
      b->features = tables + (dense ? 1 : 0);
    }
    if (!GIVEN("dim")) {
      if (dim == 0) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                      "no embedding_bag block precedes this interaction; give \"dim\"");
        return FALSE;
      }
      b->dim = dim;
    }
    break;
  }
  case MM_BLOCK_TRANSFORMER:
    if (!GIVEN("kv_heads")) b->kv_heads = b->heads;
    if (!GIVEN("head_dim")) b->head_dim = b->hidden / b->heads;
    if (!GIVEN("v_head_dim")) b->v_head_dim = b->head_dim;
    if (b->rope_head_dim >= b->head_dim && b->kv_lora_rank > 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "rope_head_dim %" G_GINT64_FORMAT " must be less than head_dim %" G_GINT64_FORMAT,
                    b->rope_head_dim, b->head_dim);
      return FALSE;
    }
    if ((b->q_lora_rank > 0 || b->rope_head_dim > 0) && b->kv_lora_rank == 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "q_lora_rank and rope_head_dim describe latent attention; give kv_lora_rank too");
      return FALSE;
    }
    if (b->parallel_block != MM_PARALLEL_BLOCK_NONE && b->experts > 0) {
      g_autofree char *pp = g_strdup_printf("%s.parallel_block", jp);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, pp,
                    "parallel attention + MLP blocks are not modelled with experts; use \"none\" or experts 0");
      return FALSE;
    }
    if (b->shared_experts > 0 && b->experts == 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp, "shared_experts needs a mixture (experts >= 2)");
      return FALSE;
    }
    if (!GIVEN("head_dim") && b->hidden % b->heads != 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "heads %" G_GINT64_FORMAT " does not divide hidden %" G_GINT64_FORMAT, b->heads,
                    b->hidden);
      return FALSE;
    }
    if (b->heads % b->kv_heads != 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "kv_heads %" G_GINT64_FORMAT " does not divide heads %" G_GINT64_FORMAT,
                    b->kv_heads, b->heads);
      return FALSE;
    }
    G_GNUC_FALLTHROUGH;
  case MM_BLOCK_TOKEN_EMBEDDING:
  case MM_BLOCK_LM_HEAD:
    if (!GIVEN("seq_len")) {
      if (m->seq_len == 0) {
        mm_json_error(error, MM_CONFIG_ERROR_MISSING_KEY, ctx, jp,
                      "missing \"seq_len\" (tokens) here or at the top level of the model");
        return FALSE;
      }
      b->seq_len = m->seq_len;
    }
    break;
  case MM_BLOCK_KIND_COUNT:
    g_assert_not_reached();
  }
  if (b->kind == MM_BLOCK_MLP || b->kind == MM_BLOCK_TRANSFORMER) {
    if (b->experts == 1) {
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, jp,
                    "experts 1 is not a mixture; use 0 (dense) or at least 2");
      return FALSE;
    }
    if (b->experts > 0 && b->top_k > b->experts) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "top_k %" G_GINT64_FORMAT " exceeds experts %" G_GINT64_FORMAT, b->top_k,
                    b->experts);
      return FALSE;
    }
    if (b->experts == 0 && (GIVEN("top_k") || GIVEN("capacity_factor") || GIVEN("router_groups"))) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "top_k/capacity_factor/router_groups need \"experts\" >= 2");
      return FALSE;
    }
    if ((b->router_groups > 0) != (b->router_group_topk > 0)) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "group-limited routing needs both router_groups and router_group_topk (or neither)");
      return FALSE;
    }
    if (b->router_groups > 0 && b->experts % b->router_groups != 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "router_groups %" G_GINT64_FORMAT " does not divide experts %" G_GINT64_FORMAT,
                    b->router_groups, b->experts);
      return FALSE;
    }
    if (b->router_group_topk > b->router_groups) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "router_group_topk %" G_GINT64_FORMAT " exceeds router_groups %" G_GINT64_FORMAT,
                    b->router_group_topk, b->router_groups);
      return FALSE;
    }
    if (b->router_groups > 0 && b->top_k > b->router_group_topk * (b->experts / b->router_groups)) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "top_k %" G_GINT64_FORMAT " exceeds the %" G_GINT64_FORMAT
                    " experts of router_group_topk groups",
                    b->top_k, b->router_group_topk * (b->experts / b->router_groups));
      return FALSE;
    }
  }
#undef GIVEN
  return TRUE;
}

static gboolean check_model(const MmJsonCtx *ctx, MmModel *m, GError **error)
{
  g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);
  guint kind_count[MM_BLOCK_KIND_COUNT] = {0};
  guint kind_seen[MM_BLOCK_KIND_COUNT] = {0};
  for (guint i = 0; i < m->n_blocks; i++) kind_count[m->blocks[i].kind]++;
  for (guint i = 0; i < m->n_blocks; i++) {
    MmBlock *b = &m->blocks[i];
    if (!b->name) {
      b->name = kind_count[b->kind] == 1
                    ? g_strdup(mm_block_kind_names[b->kind])
                    : g_strdup_printf("%s_%u", mm_block_kind_names[b->kind], kind_seen[b->kind]);
    }
    kind_seen[b->kind]++;
    g_autofree char *jp = g_strdup_printf("$.blocks[%u].name", i);
    if (b->name[0] == '\0') {
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, jp, "a block name must not be empty");
      return FALSE;
    }
    if (!g_hash_table_add(names, b->name)) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "block name \"%s\" is used twice; names must be unique", b->name);
      return FALSE;
    }
  }
  return TRUE;
}

/* ---- size limits -------------------------------------------------------- *
 * The graph counts parameters in int64_t and sums them over layers, units and blocks; the
 * plan multiplies counts (tables x rows, params x bytes). Every such product of a loaded
 * model stays below MM_MODEL_MAX_PARAMS, so no later integer arithmetic can overflow and
 * every count is exact in a double. The layer limit bounds the graph (one unit per repeated
 * layer, about 16 layers per unit). */
#define MM_MODEL_MAX_PARAMS MM_INT_MAX /* 2^53, about 9.0e15 */
#define MM_MODEL_MAX_UNITS 65536       /* repeated layers (sum of count) in one model */

/* An upper bound of the parameters of block @b (the graph's count, with every bias and norm
 * included), in double so that the bound itself cannot overflow. */
static double block_params_bound(const MmBlock *b)
{
  const double h = (double)b->hidden, f = (double)b->ffn, a = (double)b->heads;
  const double dk = (double)b->head_dim, dv = (double)b->v_head_dim, kvh = (double)b->kv_heads;
  const double experts = (double)MAX(b->experts, 1), count = (double)b->count;
  switch (b->kind) {
  case MM_BLOCK_EMBEDDING_BAG:
    return (double)b->tables * (double)b->rows * (double)b->dim;
  case MM_BLOCK_MLP: {
    const double in = (double)b->input_dim, w = (double)b->width, out = (double)b->output_dim;
    double layers = count == 1 ? in * out : in * w + (count - 2.0) * w * w + w * out;
    return layers * experts + in * (double)b->experts;
  }
  case MM_BLOCK_TRANSFORMER: {
    const double ql = (double)b->q_lora_rank, kl = (double)b->kv_lora_rank, r = (double)b->rope_head_dim;
    double qkv = h * (a * dk + kvh * (dk + dv)) + a * dk + kvh * (dk + dv);
    if (kl > 0) qkv = h * ql + ql * a * dk + h * a * dk + h * (kl + r) + kl * a * (dk + dv);
    const double attn_out = a * dv * h + h, norms = 4.0 * h;
    const double ffn = 3.0 * (h * f + f + h) * (experts + (double)b->shared_experts) + h * (double)b->experts;
    const double mtp = b->mtp ? 2.0 * h * h + 3.0 * h : 0; /* MTP: projection and its norms */
    return count * (qkv + attn_out + norms + ffn + mtp);
  }
  case MM_BLOCK_TOKEN_EMBEDDING:
    return ((double)b->vocab + (double)b->positions) * h;
  case MM_BLOCK_LM_HEAD:
    return (double)b->vocab * h + 2.0 * h;
  case MM_BLOCK_INTERACTION:
  case MM_BLOCK_KIND_COUNT:
    break;
  }
  return 0;
}

/* The product of a block's sizes (what its parameters grow with), for messages. */
static const char *block_size_terms(const MmBlock *b)
{
  switch (b->kind) {
  case MM_BLOCK_EMBEDDING_BAG: return "tables x rows x dim";
  case MM_BLOCK_MLP: return "count x width^2 x experts";
  case MM_BLOCK_TRANSFORMER: return "count x (hidden^2 + hidden x ffn x experts)";
  case MM_BLOCK_TOKEN_EMBEDDING: return "(vocab + positions) x hidden";
  default: return "vocab x hidden";
  }
}

/* Rejects models whose parameter counts or layer counts exceed what madmax computes exactly. */
static gboolean check_sizes(const MmJsonCtx *ctx, const MmModel *m, GError **error)
{
  double total = 0, units = 0;
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlock *b = &m->blocks[i];
    const double p = block_params_bound(b);
    total += p;
    units += (double)b->count;
    /* the MTP modules' block is not in the file: name the key that made it */
    g_autofree char *jp = b->mtp ? g_strdup_printf("$.blocks[%u].mtp_depth", b->mtp_source)
                                 : g_strdup_printf("$.blocks[%u]", i);
    if (units > MM_MODEL_MAX_UNITS) {
      g_autofree char *cp = b->mtp ? g_strdup(jp) : g_strdup_printf("%s.count", jp);
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, cp,
                    "the blocks up to here repeat %.0f layers in all; a model may have at most %d", units,
                    MM_MODEL_MAX_UNITS);
      return FALSE;
    }
    if (p > MM_MODEL_MAX_PARAMS || total > MM_MODEL_MAX_PARAMS) {
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, jp,
                    "%s: about %.3g parameters%s; a model may have at most 2^53 (%.3g) in all",
                    block_size_terms(b), p, p > MM_MODEL_MAX_PARAMS ? "" : " (with the blocks before it)",
                    MM_MODEL_MAX_PARAMS);
      return FALSE;
    }
  }
  return TRUE;
}

/* Resolves "inputs" (names of earlier blocks) into indices. */
static gboolean resolve_inputs(const MmJsonCtx *ctx, MmModel *m, const cJSON *blocks, GError **error)
{
  guint i = 0;
  for (const cJSON *it = blocks->child; it; it = it->next, i++) {
    MmBlock *b = &m->blocks[i];
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(it, "inputs");
    if (!in) {
      b->n_inputs = i > 0 ? 1 : 0;
      b->inputs = g_new0(guint, 1);
      b->inputs[0] = i > 0 ? i - 1 : 0;
      continue;
    }
    b->inputs = g_new0(guint, (gsize)cJSON_GetArraySize(in) + 1);
    int k = 0;
    for (const cJSON *n = in->child; n; n = n->next, k++) {
      g_autofree char *jp = g_strdup_printf("$.blocks[%u].inputs[%d]", i, k);
      if (!mm_json_expect(ctx, n, jp, cJSON_String, "the name of an earlier block", error)) return FALSE;
      guint j;
      for (j = 0; j < i; j++)
        if (strcmp(m->blocks[j].name, n->valuestring) == 0) break;
      if (j == i) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                      "\"%s\" is not the name of an earlier block (inputs must precede their readers)",
                      n->valuestring);
        return FALSE;
      }
      for (guint q = 0; q < b->n_inputs; q++) {
        if (b->inputs[q] == j) {
          mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp, "\"%s\" is listed twice", n->valuestring);
          return FALSE;
        }
      }
      b->inputs[b->n_inputs++] = j;
    }
  }
  return TRUE;
}

static gboolean check_tied(const MmJsonCtx *ctx, const MmModel *m, GError **error)
{
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlock *b = &m->blocks[i];
    if (b->kind != MM_BLOCK_LM_HEAD || !b->tied) continue;
    const MmBlock *emb = NULL;
    for (guint j = 0; j < m->n_blocks; j++)
      if (m->blocks[j].kind == MM_BLOCK_TOKEN_EMBEDDING) emb = &m->blocks[j];
    g_autofree char *jp = g_strdup_printf("$.blocks[%u].tied", i);
    if (!emb || emb->vocab != b->vocab || emb->hidden != b->hidden) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "a tied lm_head needs a token_embedding block with the same vocab and hidden");
      return FALSE;
    }
  }
  return TRUE;
}

/* DeepSeek-V3 multi-token prediction (arXiv:2412.19437 Sec. 2.2): the transformer block that
 * gives mtp_depth > 0 lends its layer kind to a block of that many MTP modules, appended after
 * the model's last block, which must be the lm_head whose output head the modules share. */
static gboolean append_mtp(const MmJsonCtx *ctx, MmModel *m, GError **error)
{
  guint src = m->n_blocks;
  for (guint i = 0; i < m->n_blocks; i++) {
    if (m->blocks[i].mtp_depth == 0) continue;
    g_autofree char *jp = g_strdup_printf("$.blocks[%u].mtp_depth", i);
    if (src < m->n_blocks) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "mtp_depth is already given on block \"%s\"; one transformer block may carry it",
                    m->blocks[src].name);
      return FALSE;
    }
    src = i;
  }
  if (src == m->n_blocks) return TRUE;
  const MmBlock *last = &m->blocks[m->n_blocks - 1];
  g_autofree char *jp = g_strdup_printf("$.blocks[%u].mtp_depth", src);
  if (last->kind != MM_BLOCK_LM_HEAD || last->hidden != m->blocks[src].hidden) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                  "multi-token prediction shares the output head: the model's last block must be an lm_head "
                  "of hidden %" G_GINT64_FORMAT, m->blocks[src].hidden);
    return FALSE;
  }
  MmBlock b = m->blocks[src];
  b.name = g_strdup_printf("%s_mtp", m->blocks[src].name);
  for (guint i = 0; i < m->n_blocks; i++) {
    if (strcmp(m->blocks[i].name, b.name) == 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "the MTP modules' block would be named \"%s\", which block %u already is", b.name, i);
      g_free(b.name);
      return FALSE;
    }
  }
  b.count = b.mtp_depth;
  b.mtp_depth = 0;
  b.mtp = TRUE;
  b.mtp_source = src;
  b.vocab = last->vocab;
  b.n_inputs = 1;
  b.inputs = g_new0(guint, 1);
  b.inputs[0] = m->n_blocks - 1;
  m->blocks = g_renew(MmBlock, m->blocks, m->n_blocks + 1);
  m->blocks[m->n_blocks++] = b;
  return TRUE;
}

static MmModel *model_from_json(const char *path, const cJSON *root, GError **error)
{
  MmJsonCtx ctx = {path};
  g_autoptr(MmModel) m = g_new0(MmModel, 1);
  m->path = g_strdup(path);

  ModelTop top = {0};
  gboolean ok = mm_json_apply(&ctx, root, "$", model_fields, &top, NULL, error);
  m->name = top.name;
  m->source = top.source;
  if (!ok) return NULL;
  m->seq_len = top.seq_len;

  const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(root, "blocks");
  int n = cJSON_GetArraySize(blocks);
  if (n == 0) {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, "$.blocks", "expected at least one block");
    return NULL;
  }
  m->blocks = g_new0(MmBlock, (gsize)n);
  int i = 0;
  for (const cJSON *it = blocks->child; it; it = it->next, i++) {
    g_autofree char *jp = g_strdup_printf("$.blocks[%d]", i);
    if (!mm_json_expect(&ctx, it, jp, cJSON_Object, "a block object", error)) return NULL;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(it, "kind");
    if (!kind) {
      mm_json_error(error, MM_CONFIG_ERROR_MISSING_KEY, &ctx, jp, "missing required key \"kind\"");
      return NULL;
    }
    /* Parse "kind" alone first to select the table for the rest. */
    MmBlock *b = &m->blocks[i];
    m->n_blocks = (guint)i + 1;
    static const MmField kind_field = {"kind", MM_F_ENUM, TRUE, 0, 0, 0, mm_block_kind_names,
                                       BLK(kind), NULL, NULL};
    g_autofree char *kp = g_strdup_printf("%s.kind", jp);
    if (!mm_json_apply_field(&ctx, &kind_field, kind, kp, b, error)) return NULL;
    b->dtype = (MmDtype)top.dtype;
    guint64 present = 0;
    if (!mm_json_apply(&ctx, it, jp, kind_fields[b->kind], b, &present, error)) return NULL;
    if (!finish_block(&ctx, m, (guint)i, jp, present, error)) return NULL;
  }
  if (!check_model(&ctx, m, error)) return NULL;
  if (!resolve_inputs(&ctx, m, blocks, error)) return NULL;
  if (!check_tied(&ctx, m, error)) return NULL;
  if (!append_mtp(&ctx, m, error)) return NULL;
  if (!check_sizes(&ctx, m, error)) return NULL;
  return g_steal_pointer(&m);
}

MmModel *mm_model_parse(const char *path, const char *text, gsize len, GError **error)
{
  g_autoptr(cJSON) root = mm_json_parse_text(path, text, len, error);
  return root ? model_from_json(path, root, error) : NULL;
}

MmModel *mm_model_load(const char *path, GError **error)
{
  g_autoptr(cJSON) root = mm_json_load_file(path, error);
  return root ? model_from_json(path, root, error) : NULL;
}

void mm_model_write_schema(FILE *out)
{
  mm_json_write_schema(out, "Model file (`models/*.json`)",
                       "A model is a list of layer blocks in forward order. Each block's keys depend on "
                       "its `kind`; unknown keys are errors.",
                       model_fields);
  static const char *const intros[MM_BLOCK_KIND_COUNT] = {
    "DLRM sparse features: `tables` tables of `rows` x `dim`, `pooling` lookups per table per "
    "sample, summed. Memory-bound: time = lookup bytes / (HBM bandwidth x utilization).",
    "A stack of `count` dense layers (GEMMs), optionally a mixture of experts where each expert is "
    "the whole stack.",
    "DLRM feature interaction over `features` vectors of `dim`.",
    "`count` decoder/encoder layers: norm, QKV projection (GQA shrinks K/V), attention core "
    "(QK^T and AV, 2 x seq^2 x hidden FLOPs each per sample), output projection, norm, FFN "
    "(or MoE FFN: router + top_k experts of `ffn`).",
    "Token lookup (and learned positions); memory-bound gather.",
    "Final norm and the vocabulary projection (2 x hidden x vocab FLOPs per token).",
  };
  for (int k = 0; k < MM_BLOCK_KIND_COUNT; k++) {
    g_autofree char *title = g_strdup_printf("Block kind `%s`", mm_block_kind_names[k]);
    mm_json_write_schema(out, title, intros[k], kind_fields[k]);
  }
}

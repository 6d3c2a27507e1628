/* parallel: task + parallelism files (configs/) -> MmParallelConfig; scenario cross-checks. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "json.h"

#define CFG(f) ((gssize)offsetof(MmParallelConfig, f))
#define BIG MM_INT_MAX

static const MmField config_fields[] = {
  {"name", MM_F_STR, TRUE, 0, 0, 0, NULL, CFG(name), NULL, "display name"},
  {"task", MM_F_ENUM, TRUE, 0, 0, 0, mm_task_names, CFG(task), NULL,
   "pretrain: forward + backward + optimizer; finetune: frozen blocks skip weight gradients; inference: forward only"},
  {"global_batch", MM_F_INT, FALSE, 1, BIG, 0, NULL, CFG(global_batch), "samples",
   "samples (sequences for LLMs) per iteration; give this or global_batch_tokens"},
  {"global_batch_tokens", MM_F_INT, FALSE, 1, BIG, 0, NULL, CFG(global_batch_tokens), "tokens",
   "tokens per iteration; samples = tokens / the model's seq_len"},
  {"seq_len", MM_F_INT, FALSE, 1, 1 << 26, 0, NULL, CFG(seq_len), "tokens",
   "train or serve at this sequence length instead of the model's (every sequence block; e.g. a "
   "long-context stage)"},
  {"micro_batch", MM_F_INT, FALSE, 1, BIG, 0, NULL, CFG(micro_batch), "samples",
   "samples per data-parallel rank of the main dense block per micro-step (default: the whole "
   "local batch, no gradient accumulation)"},
  {"precision", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "dtype policy: {\"grads\": dtype, \"compute\": dtype}; grads default to each block's dtype, "
   "compute overrides every block's compute_dtype"},
  {"optimizer", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "optimizer of dense parameters (default adam, fp32 states, fp32 master weights)"},
  {"sparse_optimizer", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "optimizer of embedding_bag tables (default rowwise_adagrad, fp32 state)"},
  {"recompute", MM_F_ENUM, FALSE, 0, 0, MM_RECOMPUTE_NONE, mm_recompute_names, CFG(recompute), NULL,
   "activation recomputation: none keeps every activation; full keeps only layer inputs and "
   "recomputes the forward pass during backward; selective (Korthikanti et al. 2022) drops and "
   "recomputes only the attention core (its s x s scores; little with flash attention)"},
  {"frozen", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "finetune: block names or kinds that are not trained"},
  {"fsdp_prefetch", MM_F_INT, FALSE, 0, 16, 1, NULL, CFG(fsdp_prefetch), "units",
   "FSDP: layers whose AllGather is issued ahead of the one computing"},
  {"ddp_bucket_MB", MM_F_NUM, FALSE, 0.001, 1e6, 25, NULL, MM_NO_OFFSET, "MB",
   "DDP: gradient bucket size per AllReduce"},
  {"ddp_overlap", MM_F_BOOL, FALSE, 0, 0, 1, NULL, CFG(ddp_overlap), NULL,
   "DDP: all-reduce each bucket as soon as its gradients exist (PyTorch DDP); false: all "
   "buckets after the backward pass (Megatron-LM before 2023)"},
  {"collectives", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "force an algorithm per collective kind, e.g. {\"all_reduce\": \"ring\"}; unnamed kinds pick the fastest"},
  {"pipeline", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "pipeline parallelism, the outermost device digit: {\"degree\": stages, \"schedule\", "
   "\"virtual_stages\", \"layers\"}; the parallelism levels then split one stage's devices"},
  {"expert_skew", MM_F_NUM, FALSE, 0, 1e6, 0, NULL, CFG(expert_skew), NULL,
   "expert parallelism: routing imbalance; the busiest ep rank receives (1 + skew) x the mean "
   "tokens, the others share the rest (0: even)"},
  {"inference", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "task inference: {\"prompt_tokens\", \"output_tokens\", \"cuda_graphs\", \"custom_all_reduce\"}: a prefill "
   "of the prompt, then one decode step per generated token with a KV cache (without it: one forward pass "
   "of seq_len tokens)"},
  {"parallelism", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "per block kind, block name or \"default\": a list of levels, innermost first"},
  MM_FIELDS_END,
};

typedef struct {
  int64_t degree;
  int schedule;
  int64_t virtual_stages;
  gboolean overlap_p2p;
} PipelineRaw;

static const MmField pipeline_fields[] = {
  {"degree", MM_F_INT, TRUE, 1, 1 << 20, 1, NULL, (gssize)offsetof(PipelineRaw, degree), "stages",
   "pipeline stages; device index = local + stage x (devices / degree)"},
  {"schedule", MM_F_ENUM, FALSE, 0, 0, MM_PIPE_1F1B, mm_pipe_schedule_names, (gssize)offsetof(PipelineRaw, schedule),
   NULL, "gpipe: all forwards, then all backwards; 1f1b: warm-up forwards, then one forward one backward "
   "(PipeDream-Flush, Megatron); interleaved_1f1b: 1f1b over virtual_stages model chunks per stage"},
  {"virtual_stages", MM_F_INT, FALSE, 1, 1024, 1, NULL, (gssize)offsetof(PipelineRaw, virtual_stages), "chunks",
   "model chunks per stage (interleaved_1f1b); chunk c of stage s holds the (c x degree + s)-th slice of layers"},
  {"overlap_p2p", MM_F_BOOL, FALSE, 0, 0, 0, NULL, (gssize)offsetof(PipelineRaw, overlap_p2p), NULL,
   "false: a stage waits for its sends and receives before computing on (Megatron-LM and DeepSpeed "
   "exchange synchronously); true: transfers overlap the next micro-batch's compute"},
  {"layers", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, "layers",
   "layers per chunk in model order (degree x virtual_stages integers >= 1 summing to the model's "
   "transformer and mlp layers); default: as even as possible. Blocks before the first layer join "
   "the first chunk, the others the chunk of the layer before them"},
  MM_FIELDS_END,
};

static const MmField serving_fields[] = {
  {"prompt_tokens", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL, (gssize)offsetof(MmServing, prompt_tokens), "tokens",
   "prompt length per sequence (the prefill)"},
  {"output_tokens", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL, (gssize)offsetof(MmServing, output_tokens), "tokens",
   "tokens generated per sequence; the first comes from the prefill, each other from one decode step"},
  {"cuda_graphs", MM_F_BOOL, FALSE, 0, 0, 1, NULL, (gssize)offsetof(MmServing, cuda_graphs), NULL,
   "decode steps replayed from a captured CUDA/HIP graph, as vLLM, SGLang and TensorRT-LLM do by default: each "
   "kernel costs the device's graph_launch_overhead_us instead of launch_overhead_us; the prefill runs eagerly. "
   "false: an eager framework"},
  {"custom_all_reduce", MM_F_BOOL, FALSE, 0, 0, 1, NULL, (gssize)offsetof(MmServing, custom_all_reduce), NULL,
   "all-reduces inside a node may use the serving engines' one-shot kernel (algorithm one_shot) where it beats "
   "NCCL's choice, as vLLM, SGLang and TensorRT-LLM do by default for small messages. false: NCCL only"},
  MM_FIELDS_END,
};

typedef struct {
  int grads, compute;
} PrecisionRaw;

static const MmField precision_fields[] = {
  {"grads", MM_F_ENUM, FALSE, 0, 0, NAN, mm_dtype_names, (gssize)offsetof(PrecisionRaw, grads), NULL,
   "gradient dtype (default: each block's dtype)"},
  {"compute", MM_F_ENUM, FALSE, 0, 0, NAN, mm_dtype_names, (gssize)offsetof(PrecisionRaw, compute), NULL,
   "compute dtype of every block (default: each block's compute_dtype)"},
  MM_FIELDS_END,
};

static const MmField optimizer_fields[] = {
  {"kind", MM_F_ENUM, TRUE, 0, 0, 0, mm_optimizer_names, (gssize)offsetof(MmOptimizer, kind), NULL,
   "adam: 2 states per parameter; sgd: 0 (1 with momentum); adagrad: 1; rowwise_adagrad: 1 per row"},
  {"state_dtype", MM_F_ENUM, FALSE, 0, 0, MM_DTYPE_FP32, mm_dtype_names,
   (gssize)offsetof(MmOptimizer, state_dtype), NULL, "dtype of optimizer states"},
  {"master_weights", MM_F_BOOL, FALSE, 0, 0, 1, NULL, (gssize)offsetof(MmOptimizer, master_weights), NULL,
   "keep an fp32 copy of weights stored in a narrower dtype"},
  {"momentum", MM_F_BOOL, FALSE, 0, 0, 0, NULL, (gssize)offsetof(MmOptimizer, momentum), NULL,
   "sgd only: one momentum state per parameter"},
  MM_FIELDS_END,
};

typedef struct {
  int strategy;
  int sharding;
  int grad_sync;
  gboolean sequence_parallel;
  int64_t zero;
  int kv_exchange;
  int experts;
} LevelRaw;

static const char *const expert_tp_names[] = {"spread", "sharded", NULL};

static const MmField level_fields[] = {
  {"strategy", MM_F_ENUM, TRUE, 0, 0, 0, mm_strategy_names, (gssize)offsetof(LevelRaw, strategy), NULL,
   "fsdp (ZeRO-3: shard weights, grads, optimizer; AllGather + ReduceScatter), tp (Megatron tensor "
   "parallel; activation AllReduce), sp (tp with sequence parallelism), ddp (replicate; gradient "
   "AllReduce; ZeRO-1/2 with \"zero\"), mp (embedding tables sharded; All2All), ep (experts sharded "
   "over the group, tokens dispatched by All2All; data parallel for the rest of the block), cp "
   "(context parallel: the sequence split over the group). Pipeline stages: the top-level \"pipeline\""},
  {"degree", MM_F_CUSTOM, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, "devices",
   "a positive integer, \"node\" (GPUs per node), \"nodes\" (number of nodes) or \"all\" (what "
   "the other levels leave: devices / their product)"},
  {"sharding", MM_F_ENUM, FALSE, 0, 0, MM_SHARD_TABLE, mm_shard_names, (gssize)offsetof(LevelRaw, sharding),
   NULL, "mp only: table-wise, row-wise or column-wise embedding sharding"},
  {"grad_sync", MM_F_ENUM, FALSE, 0, 0, MM_GRAD_SYNC_DENSE, mm_grad_sync_names, (gssize)offsetof(LevelRaw, grad_sync),
   NULL, "ddp levels of embedding blocks: dense AllReduce of the table gradient, sparse (index all-gather, "
   "de-duplication, AllReduce of the touched rows), host (the sparse exchange through host memory, Gloo), or auto"},
  {"sequence_parallel", MM_F_BOOL, FALSE, 0, 0, 0, NULL, (gssize)offsetof(LevelRaw, sequence_parallel), NULL,
   "tp levels: Megatron sequence parallelism (AllReduce -> ReduceScatter + AllGather; norms, dropout "
   "and their activations sharded); strategy \"sp\" is tp with this set"},
  {"experts", MM_F_ENUM, FALSE, 0, 0, 0, expert_tp_names, (gssize)offsetof(LevelRaw, experts), NULL,
   "tp levels of MoE blocks without an ep level: spread (MAD-Max: each rank holds experts / degree whole "
   "experts; tokens dispatched and combined by All2All) or sharded (Megatron expert-TP, vLLM, SGLang, "
   "TensorRT-LLM: each rank holds a slice of every expert; an AllReduce after the experts, as a dense FFN)"},
  {"zero", MM_F_INT, FALSE, 0, 2, 0, NULL, (gssize)offsetof(LevelRaw, zero), NULL,
   "ddp levels: ZeRO stage; 1 shards optimizer states (AllReduce, then AllGather of updated weights), "
   "2 also gradients (ReduceScatter instead of AllReduce); stage 3 is strategy fsdp"},
  {"kv_exchange", MM_F_ENUM, FALSE, 0, 0, MM_CP_RING, mm_cp_impl_names, (gssize)offsetof(LevelRaw, kv_exchange),
   NULL, "cp levels: ring (ring attention: K/V chunks passed around the group, overlapped with attention "
   "blocks) or all_gather (K/V gathered before attention, as Llama 3)"},
  MM_FIELDS_END,
};

void mm_parallel_free(MmParallelConfig *c)
{
  if (!c) return;
  g_free(c->pipeline.layers);
  g_free(c->path);
  g_free(c->name);
  for (guint i = 0; i < c->n_frozen; i++) g_free(c->frozen[i]);
  g_free(c->frozen);
  for (guint i = 0; i < c->n_strategies; i++) g_free(c->strategies[i].key);
  g_free(c->strategies);
  g_free(c);
}

static gboolean parse_level(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, MmLevel *out,
                            GError **error)
{
  LevelRaw raw = {0};
  guint64 present = 0;
  if (!mm_json_expect(ctx, obj, jp, cJSON_Object, "a level object {strategy, degree}", error))
    return FALSE;
  if (!mm_json_apply(ctx, obj, jp, level_fields, &raw, &present, error)) return FALSE;
  out->strategy = (MmStrategy)raw.strategy;
  out->sharding = (MmShardKind)raw.sharding;
  out->grad_sync = (MmGradSync)raw.grad_sync;
  if (((present >> mm_json_field_index(level_fields, "grad_sync")) & 1) && out->strategy != MM_STRAT_DDP) {
    g_autofree char *gp = g_strdup_printf("%s.grad_sync", jp);
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, gp, "\"grad_sync\" applies to ddp levels only");
    return FALSE;
  }
  g_autofree char *sp = g_strdup_printf("%s.strategy", jp);
  if (out->strategy == MM_STRAT_PP) {
    mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, ctx, sp,
                  "pipeline stages are not a level: give the top-level \"pipeline\": {\"degree\": N} (stages "
                  "are the outermost device digit) and list the levels of one stage here");
    return FALSE;
  }
  if (out->strategy == MM_STRAT_SP) { /* Megatron's name for tp + sequence parallelism */
    out->strategy = MM_STRAT_TP;
    raw.sequence_parallel = TRUE;
  }
  out->sequence_parallel = raw.sequence_parallel;
  out->experts_sharded = raw.experts == 1;
  out->zero = (int)raw.zero;
  out->cp_impl = (MmCpImpl)raw.kv_exchange;
  static const struct {
    const char *key;
    MmStrategy only;
  } scoped[] = {{"sequence_parallel", MM_STRAT_TP}, {"experts", MM_STRAT_TP}, {"zero", MM_STRAT_DDP},
                {"kv_exchange", MM_STRAT_CP}};
  for (guint k = 0; k < G_N_ELEMENTS(scoped); k++) {
    if (((present >> mm_json_field_index(level_fields, scoped[k].key)) & 1) && out->strategy != scoped[k].only &&
        !(scoped[k].only == MM_STRAT_TP && raw.strategy == MM_STRAT_SP)) {
      g_autofree char *kp = g_strdup_printf("%s.%s", jp, scoped[k].key);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, kp, "\"%s\" applies to %s levels only", scoped[k].key,
                    mm_strategy_names[scoped[k].only]);
      return FALSE;
    }
  }
  if (((present >> mm_json_field_index(level_fields, "sharding")) & 1) && out->strategy != MM_STRAT_MP) {
    g_autofree char *shp = g_strdup_printf("%s.sharding", jp);
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, shp, "\"sharding\" applies to mp levels only");
    return FALSE;
  }
  const cJSON *deg = cJSON_GetObjectItemCaseSensitive(obj, "degree");
  g_autofree char *dp = g_strdup_printf("%s.degree", jp);
  if (cJSON_IsString(deg)) {
    static const char *const names[] = {"node", "nodes", "all", NULL};
    static const MmDegreeSpec specs[] = {MM_DEG_NODE, MM_DEG_NODES, MM_DEG_ALL};
    for (int i = 0; names[i]; i++) {
      if (strcmp(deg->valuestring, names[i]) == 0) {
        out->spec = specs[i];
        out->degree = 0;
        return TRUE;
      }
    }
    g_autofree char *got = mm_json_describe_value(deg);
    mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, ctx, dp,
                  "unknown degree %s; expected a positive integer, \"node\", \"nodes\" or \"all\"", got);
    return FALSE;
  }
  static const MmField deg_field = {"degree", MM_F_INT, TRUE, 1, 1 << 24, 0, NULL,
                                    (gssize)offsetof(MmLevel, degree), NULL, NULL};
  out->spec = MM_DEG_NUMBER;
  return mm_json_apply_field(ctx, &deg_field, deg, dp, out, error);
}

static gboolean parse_parallelism(const MmJsonCtx *ctx, const cJSON *obj, MmParallelConfig *c,
                                  GError **error)
{
  int n = cJSON_GetArraySize(obj);
  if (n == 0) {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, "$.parallelism",
                  "expected at least one entry (e.g. \"default\": [{\"strategy\": \"fsdp\", \"degree\": \"all\"}])");
    return FALSE;
  }
  c->strategies = g_new0(MmStrategyEntry, (gsize)n);
  for (const cJSON *it = obj->child; it; it = it->next) {
    MmStrategyEntry *e = &c->strategies[c->n_strategies++];
    e->key = g_strdup(it->string);
    g_autofree char *jp = g_strdup_printf("$.parallelism.%s", it->string);
    for (guint j = 0; j + 1 < c->n_strategies; j++) {
      if (strcmp(c->strategies[j].key, e->key) == 0) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp, "key appears twice");
        return FALSE;
      }
    }
    if (!mm_json_expect(ctx, it, jp, cJSON_Array, "a list of levels, innermost first", error)) return FALSE;
    int nl = cJSON_GetArraySize(it);
    if (nl == 0 || nl > MM_MAX_LEVELS) {
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, jp, "expected 1 to %d levels, got %d", MM_MAX_LEVELS, nl);
      return FALSE;
    }
    guint all = 0;
    for (const cJSON *lv = it->child; lv; lv = lv->next) {
      g_autofree char *lp = g_strdup_printf("%s[%u]", jp, e->n_levels);
      MmLevel *l = &e->levels[e->n_levels++];
      if (!parse_level(ctx, lv, lp, l, error)) return FALSE;
      if (l->spec == MM_DEG_ALL && ++all > 1) {
        g_autofree char *dp = g_strdup_printf("%s.degree", lp);
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp,
                      "only one level per list may use \"all\" (it takes what the others leave)");
        return FALSE;
      }
    }
  }
  return TRUE;
}

static gboolean parse_pipeline(const MmJsonCtx *ctx, const cJSON *obj, MmParallelConfig *c, GError **error)
{
  MmPipeline *p = &c->pipeline;
  p->degree = 1;
  p->schedule = MM_PIPE_1F1B;
  p->virtual_stages = 1;
  if (!obj) return TRUE;
  PipelineRaw raw = {0};
  guint64 present = 0;
  if (!mm_json_apply(ctx, obj, "$.pipeline", pipeline_fields, &raw, &present, error)) return FALSE;
  p->degree = raw.degree;
  p->schedule = (MmPipeSchedule)raw.schedule;
  p->virtual_stages = raw.virtual_stages;
  p->overlap_p2p = raw.overlap_p2p;
  if (p->virtual_stages > 1 && p->schedule != MM_PIPE_INTERLEAVED) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.virtual_stages",
                  "virtual stages need \"schedule\": \"interleaved_1f1b\" (schedule is \"%s\")",
                  mm_pipe_schedule_names[p->schedule]);
    return FALSE;
  }
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(obj, "layers");
  if (layers) {
    int n = cJSON_GetArraySize(layers);
    if (n != (int)(p->degree * p->virtual_stages)) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.layers",
                    "expected %" G_GINT64_FORMAT " entries (degree x virtual_stages), got %d",
                    p->degree * p->virtual_stages, n);
      return FALSE;
    }
    p->layers = g_new0(int64_t, (gsize)n + 1);
    static const MmField lf = {"layers", MM_F_INT, TRUE, 1, 1 << 20, 0, NULL, 0, NULL, NULL};
    for (const cJSON *it = layers->child; it; it = it->next) {
      g_autofree char *jp = g_strdup_printf("$.pipeline.layers[%u]", p->n_layers);
      if (!mm_json_apply_field(ctx, &lf, it, jp, &p->layers[p->n_layers], error)) return FALSE;
      p->n_layers++;
    }
  }
  return TRUE;
}

static void default_optimizer(MmOptimizer *o, MmOptimizerKind kind)
{
  memset(o, 0, sizeof *o);
  o->kind = kind;
  o->state_dtype = MM_DTYPE_FP32;
  o->master_weights = TRUE;
}

static MmParallelConfig *config_from_json(const char *path, const cJSON *root, GError **error)
{
  MmJsonCtx ctx = {path};
  g_autoptr(MmParallelConfig) c = g_new0(MmParallelConfig, 1);
  c->path = g_strdup(path);
  guint64 present = 0;
  if (!mm_json_apply(&ctx, root, "$", config_fields, c, &present, error)) return NULL;
#define GIVEN(key) ((present >> mm_json_field_index(config_fields, key)) & 1)
  if (GIVEN("global_batch") == GIVEN("global_batch_tokens")) {
    mm_json_error(error, GIVEN("global_batch") ? MM_CONFIG_ERROR_INCONSISTENT : MM_CONFIG_ERROR_MISSING_KEY,
                  &ctx, "$", "give exactly one of \"global_batch\" (samples) and \"global_batch_tokens\"");
    return NULL;
  }
  const cJSON *bucket = cJSON_GetObjectItemCaseSensitive(root, "ddp_bucket_MB");
  c->ddp_bucket_bytes = (bucket ? bucket->valuedouble : 25.0) * 1e6;

  PrecisionRaw prec = {-1, -1};
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "precision");
  if (p && !mm_json_apply(&ctx, p, "$.precision", precision_fields, &prec, NULL, error)) return NULL;
  c->grads_set = prec.grads >= 0;
  c->grad_dtype = c->grads_set ? (MmDtype)prec.grads : MM_DTYPE_FP32;
  c->compute_set = prec.compute >= 0;
  c->compute_dtype = c->compute_set ? (MmDtype)prec.compute : MM_DTYPE_FP32;

  default_optimizer(&c->optimizer, MM_OPT_ADAM);
  default_optimizer(&c->sparse_optimizer, MM_OPT_ROWWISE_ADAGRAD);
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
  if (o && !mm_json_apply(&ctx, o, "$.optimizer", optimizer_fields, &c->optimizer, NULL, error)) return NULL;
  o = cJSON_GetObjectItemCaseSensitive(root, "sparse_optimizer");
  if (o && !mm_json_apply(&ctx, o, "$.sparse_optimizer", optimizer_fields, &c->sparse_optimizer, NULL, error))
    return NULL;
  if (c->optimizer.momentum && c->optimizer.kind != MM_OPT_SGD) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.optimizer.momentum", "momentum applies to sgd only");
    return NULL;
  }

  const cJSON *frozen = cJSON_GetObjectItemCaseSensitive(root, "frozen");
  if (frozen) {
    if (c->task != MM_TASK_FINETUNE) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.frozen",
                    "\"frozen\" applies to task \"finetune\" only (task is \"%s\")", mm_task_names[c->task]);
      return NULL;
    }
    int n = cJSON_GetArraySize(frozen);
    c->frozen = g_new0(char *, (gsize)n + 1);
    int i = 0;
    for (const cJSON *it = frozen->child; it; it = it->next, i++) {
      g_autofree char *jp = g_strdup_printf("$.frozen[%d]", i);
      if (!mm_json_expect(&ctx, it, jp, cJSON_String, "a block name or kind", error)) return NULL;
      c->frozen[c->n_frozen++] = g_strdup(it->valuestring);
    }
  }
  if (c->task == MM_TASK_FINETUNE && c->n_frozen == 0) {
    mm_json_error(error, MM_CONFIG_ERROR_MISSING_KEY, &ctx, "$",
                  "task \"finetune\" needs \"frozen\": the blocks (names or kinds) that are not trained");
    return NULL;
  }
  const cJSON *colls = cJSON_GetObjectItemCaseSensitive(root, "collectives");
  if (colls) {
    MmField cf[MM_COLL_COUNT + 1];
    for (int k = 0; k < MM_COLL_COUNT; k++)
      cf[k] = (MmField){mm_coll_names[k], MM_F_ENUM, FALSE, 0, 0, MM_ALGO_AUTO, mm_algorithm_names,
                        (gssize)(k * (int)sizeof(MmAlgorithm)), NULL, NULL};
    cf[MM_COLL_COUNT] = (MmField)MM_FIELDS_END;
    if (!mm_json_apply(&ctx, colls, "$.collectives", cf, c->algorithm, NULL, error)) return NULL;
  }
  if (!parse_parallelism(&ctx, cJSON_GetObjectItemCaseSensitive(root, "parallelism"), c, error)) return NULL;
  if (!parse_pipeline(&ctx, cJSON_GetObjectItemCaseSensitive(root, "pipeline"), c, error)) return NULL;
  const cJSON *inf = cJSON_GetObjectItemCaseSensitive(root, "inference");
  if (inf) {
    if (c->task != MM_TASK_INFERENCE) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.inference",
                    "\"inference\" applies to task \"inference\" only (task is \"%s\")", mm_task_names[c->task]);
      return NULL;
    }
    if (!mm_json_apply(&ctx, inf, "$.inference", serving_fields, &c->serving, NULL, error)) return NULL;
    c->serving.present = TRUE;
  }
#undef GIVEN
  return g_steal_pointer(&c);
}

MmParallelConfig *mm_parallel_load(const char *path, GError **error)
{
  g_autoptr(cJSON) root = mm_json_load_file(path, error);
  return root ? config_from_json(path, root, error) : NULL;
}

const MmStrategyEntry *mm_parallel_strategy_for(const MmParallelConfig *c, const MmBlock *b)
{
  const MmStrategyEntry *by_kind = NULL, *by_default = NULL;
  for (guint i = 0; i < c->n_strategies; i++) {
    const MmStrategyEntry *e = &c->strategies[i];
    if (strcmp(e->key, b->name) == 0) return e;
    if (strcmp(e->key, mm_block_kind_names[b->kind]) == 0) by_kind = e;
    if (strcmp(e->key, "default") == 0) by_default = e;
  }
  return by_kind ? by_kind : by_default;
}

/* ---- scenario ---------------------------------------------------------- */

void mm_scenario_free(MmScenario *s)
{
  if (!s) return;
  g_free(s->blocks);
  g_free(s);
}

static gboolean names_block(const MmModel *m, const char *key, gboolean *is_kind)
{
  for (int k = 0; k < MM_BLOCK_KIND_COUNT; k++) {
    if (strcmp(key, mm_block_kind_names[k]) == 0) {
      *is_kind = TRUE;
      return TRUE;
    }
  }
  *is_kind = FALSE;
  for (guint i = 0; i < m->n_blocks; i++)
    if (strcmp(key, m->blocks[i].name) == 0) return TRUE;
  return FALSE;
}

static gboolean block_frozen(const MmParallelConfig *c, const MmBlock *b)
{
  if (c->task == MM_TASK_INFERENCE) return TRUE;
  for (guint i = 0; i < c->n_frozen; i++)
    if (strcmp(c->frozen[i], b->name) == 0 || strcmp(c->frozen[i], mm_block_kind_names[b->kind]) == 0)
      return TRUE;
  return FALSE;
}

/* Resolves one block's levels; errors point into $.parallelism.<key>. */
static gboolean resolve_block(const MmJsonCtx *ctx, const MmScenario *s, const MmBlock *b,
                              MmBlockSetup *bs, GError **error)
{
  const MmHardware *hw = s->hw;
  const int64_t n = s->stage_devices, g = hw->gpus_per_node;
  const MmStrategyEntry *e = bs->entry;
  g_autofree char *jp = g_strdup_printf("$.parallelism.%s", e->key);
  int64_t prod = 1;
  int all_at = -1;
  bs->n_levels = e->n_levels;
  for (guint i = 0; i < e->n_levels; i++) {
    MmLevel l = e->levels[i];
    switch (l.spec) {
    case MM_DEG_NUMBER: break;
    case MM_DEG_NODE: l.degree = g; break;
    case MM_DEG_NODES: l.degree = hw->nodes; break;
    case MM_DEG_ALL: all_at = (int)i; l.degree = 1; break;
    }
    bs->levels[i] = l;
    prod *= l.degree;
    if (prod > n) break;
  }
  if (all_at >= 0) {
    if (prod > n || n % prod != 0) {
      g_autofree char *dp = g_strdup_printf("%s[%d].degree", jp, all_at);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp,
                    "\"all\" must fill %" G_GINT64_FORMAT " devices of %s%s, but the other levels multiply "
                    "to %" G_GINT64_FORMAT ", which does not divide it",
                    n, hw->path, s->pp > 1 ? " (one pipeline stage)" : "", prod);
      return FALSE;
    }
    bs->levels[all_at].degree = n / prod;
    prod = n;
  }
  if (prod != n) {
    if (s->pp > 1)
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "degrees multiply to %s%" G_GINT64_FORMAT " but one of the %" G_GINT64_FORMAT
                    " pipeline stages of %s has %" G_GINT64_FORMAT " devices; the product must equal it",
                    prod > n ? "more than " : "", prod > n ? n : prod, s->pp, hw->path, n);
    else
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "degrees multiply to %s%" G_GINT64_FORMAT " but %s has %" G_GINT64_FORMAT
                    " devices (%" G_GINT64_FORMAT " nodes x %" G_GINT64_FORMAT "); the product must equal it",
                    prod > n ? "more than " : "", prod > n ? n : prod, hw->path, n, hw->nodes, g);
    return FALSE;
  }
  int64_t stride = 1;
  for (guint i = 0; i < bs->n_levels; i++) {
    const MmLevel *l = &bs->levels[i];
    bs->stride[i] = stride;
    int64_t span = stride * l->degree;
    gboolean inside = g % span == 0;             /* group within one node */
    gboolean across = stride % g == 0;           /* one GPU per node per group */
    gboolean whole = g % stride == 0 && span % g == 0; /* whole nodes */
    if (l->degree > 1 && !inside && !across && !whole) {
      g_autofree char *dp = g_strdup_printf("%s[%u].degree", jp, i);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp,
                    "a %s group of %" G_GINT64_FORMAT " devices with stride %" G_GINT64_FORMAT
                    " straddles node boundaries of %" G_GINT64_FORMAT "-GPU nodes unevenly; degrees must "
                    "divide the node or be multiples of it",
                    mm_strategy_names[l->strategy], l->degree, stride, g);
      return FALSE;
    }
    bs->degree[l->strategy] *= l->degree;
    stride = span;
  }
  bs->dp = bs->degree[MM_STRAT_FSDP] * bs->degree[MM_STRAT_DDP] * bs->degree[MM_STRAT_EP];
  bs->shard = bs->degree[MM_STRAT_FSDP] * bs->degree[MM_STRAT_TP] * bs->degree[MM_STRAT_MP];
  bs->zero = -1;
  for (guint i = 0; i < bs->n_levels; i++) {
    const MmLevel *l = &bs->levels[i];
    if (l->strategy == MM_STRAT_TP && l->degree > 1) bs->sp |= l->sequence_parallel;
    if (l->strategy == MM_STRAT_TP && l->degree > 1) bs->experts_sharded |= l->experts_sharded;
    if (l->strategy == MM_STRAT_CP) bs->cp_impl = l->cp_impl;
    if (l->strategy != MM_STRAT_DDP) continue;
    if (bs->zero >= 0 && bs->zero != l->zero) {
      g_autofree char *zp = g_strdup_printf("%s[%u].zero", jp, i);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, zp,
                    "every ddp level of a list must use the same ZeRO stage (%d here, %d before)", l->zero, bs->zero);
      return FALSE;
    }
    bs->zero = l->zero;
  }
  if (bs->zero < 0 || bs->degree[MM_STRAT_DDP] * bs->degree[MM_STRAT_EP] * bs->degree[MM_STRAT_CP] <= 1) bs->zero = 0;

  /* Strategy / block-kind compatibility. */
  for (guint i = 0; i < bs->n_levels; i++) {
    const MmLevel *l = &bs->levels[i];
    g_autofree char *lp = g_strdup_printf("%s[%u].strategy", jp, i);
    if (l->strategy == MM_STRAT_MP && b->kind != MM_BLOCK_EMBEDDING_BAG) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, lp,
                    "mp shards embedding tables; block \"%s\" is a %s (use tp or fsdp)", b->name,
                    mm_block_kind_names[b->kind]);
      return FALSE;
    }
    if (l->grad_sync != MM_GRAD_SYNC_DENSE && b->kind != MM_BLOCK_EMBEDDING_BAG && b->kind != MM_BLOCK_TOKEN_EMBEDDING) {
      g_autofree char *gp = g_strdup_printf("%s[%u].grad_sync", jp, i);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, gp,
                    "sparse gradient synchronization applies to embedding blocks; \"%s\" is a %s", b->name,
                    mm_block_kind_names[b->kind]);
      return FALSE;
    }
    if (l->strategy == MM_STRAT_MP && s->pp > 1) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, lp,
                    "mp (sharded embedding tables) is not modelled with pipeline stages");
      return FALSE;
    }
    if (l->strategy == MM_STRAT_EP && b->experts == 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, lp,
                    "ep shards experts; block \"%s\" has none (experts = 0 in %s)", b->name, s->model->path);
      return FALSE;
    }
    if (l->strategy == MM_STRAT_EP && l->degree > 1 && b->experts % l->degree != 0) {
      g_autofree char *dp = g_strdup_printf("%s[%u].degree", jp, i);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp,
                    "ep degree %" G_GINT64_FORMAT " does not divide the %" G_GINT64_FORMAT " experts of block \"%s\"",
                    l->degree, b->experts, b->name);
      return FALSE;
    }
    if (l->strategy == MM_STRAT_CP && b->kind != MM_BLOCK_TRANSFORMER && b->kind != MM_BLOCK_TOKEN_EMBEDDING &&
        b->kind != MM_BLOCK_LM_HEAD) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, lp,
                    "cp splits sequences; block \"%s\" is a %s (cp applies to transformer, token_embedding and "
                    "lm_head blocks)", b->name, mm_block_kind_names[b->kind]);
      return FALSE;
    }
    if (l->strategy == MM_STRAT_CP && l->degree > 1 && (s->cfg->serving.present || b->seq_len % l->degree != 0)) {
      g_autofree char *dp = g_strdup_printf("%s[%u].degree", jp, i);
      if (s->cfg->serving.present)
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp, "cp is not modelled for prefill/decode serving");
      else
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp,
                      "cp degree %" G_GINT64_FORMAT " does not divide seq_len %" G_GINT64_FORMAT " of block \"%s\"",
                      l->degree, b->seq_len, b->name);
      return FALSE;
    }
    if (l->strategy == MM_STRAT_TP && b->kind == MM_BLOCK_EMBEDDING_BAG) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, lp,
                    "tp does not apply to embedding tables (block \"%s\"); use mp with sharding \"column\"",
                    b->name);
      return FALSE;
    }
  }
  const int64_t tp = bs->degree[MM_STRAT_TP], mp = bs->degree[MM_STRAT_MP];
  if (b->kind == MM_BLOCK_TRANSFORMER && tp > 1) {
    const char *bad = NULL;
    int64_t v = 0;
    if (b->heads % tp != 0) bad = "heads", v = b->heads;
    else if (b->kv_heads >= tp ? b->kv_heads % tp != 0 : tp % b->kv_heads != 0) bad = "kv_heads", v = b->kv_heads;
    else if (b->ffn % tp != 0) bad = "ffn", v = b->ffn;
    if (bad) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "tp degree %" G_GINT64_FORMAT " does not divide %s %" G_GINT64_FORMAT
                    " of block \"%s\" (%s)",
                    tp, bad, v, b->name, s->model->path);
      return FALSE;
    }
  }
  bs->mp_fraction = 1.0;
  if (b->kind == MM_BLOCK_EMBEDDING_BAG && mp > 1) {
    MmShardKind sk = MM_SHARD_TABLE;
    for (guint i = 0; i < bs->n_levels; i++)
      if (bs->levels[i].strategy == MM_STRAT_MP) sk = bs->levels[i].sharding;
    int64_t have = sk == MM_SHARD_TABLE ? b->tables : sk == MM_SHARD_ROW ? b->rows : b->dim;
    if (have < mp) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "%s-wise sharding over %" G_GINT64_FORMAT " devices needs at least that many %s; "
                    "block \"%s\" has %" G_GINT64_FORMAT,
                    mm_shard_names[sk], mp, sk == MM_SHARD_TABLE ? "tables" : sk == MM_SHARD_ROW ? "rows" : "columns",
                    b->name, have);
      return FALSE;
    }
    /* the busiest device holds ceil(n / mp) of the n pieces */
    bs->mp_fraction = (double)((have + mp - 1) / mp) / (double)have;
  }
  return TRUE;
}

gboolean mm_level_intra_node(const MmScenario *s, const MmBlockSetup *b, guint level)
{
  g_return_val_if_fail(level < b->n_levels, FALSE);
  return s->hw->gpus_per_node % (b->stride[level] * b->levels[level].degree) == 0;
}

/* Pipeline stages: the outermost digit; checks the model can be cut into chunks. */
static gboolean resolve_pipeline(const MmJsonCtx *ctx, MmScenario *s, GError **error)
{
  const MmPipeline *p = &s->cfg->pipeline;
  const MmModel *m = s->model;
  const int64_t g = s->hw->gpus_per_node;
  s->pp = p->degree;
  s->vstages = p->virtual_stages;
  s->stage_devices = s->devices / s->pp;
  for (guint i = 0; i < m->n_blocks; i++)
    if (mm_block_is_layers(&m->blocks[i])) s->layer_units += m->blocks[i].count;
  if (s->pp == 1) return TRUE;
  if (s->devices % s->pp != 0) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.degree",
                  "%" G_GINT64_FORMAT " stages do not divide the %" G_GINT64_FORMAT " devices of %s", s->pp,
                  s->devices, s->hw->path);
    return FALSE;
  }
  const int64_t st = s->stage_devices;
  if (!(g % (st * s->pp) == 0 || st % g == 0 || (g % st == 0 && (st * s->pp) % g == 0))) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.degree",
                  "stages of %" G_GINT64_FORMAT " devices straddle the %" G_GINT64_FORMAT
                  "-GPU nodes of %s unevenly; a stage must fill whole nodes or divide one",
                  st, g, s->hw->path);
    return FALSE;
  }
  const int64_t chunks = s->pp * s->vstages;
  if (s->layer_units < chunks) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline",
                  "%" G_GINT64_FORMAT " chunks (degree x virtual_stages) but model %s has only %" G_GINT64_FORMAT
                  " transformer/mlp layers to split",
                  chunks, m->path, s->layer_units);
    return FALSE;
  }
  if (p->layers) {
    int64_t sum = 0;
    for (guint i = 0; i < p->n_layers; i++) sum += p->layers[i];
    if (sum != s->layer_units) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline.layers",
                    "the chunks hold %" G_GINT64_FORMAT " layers but model %s has %" G_GINT64_FORMAT, sum, m->path,
                    s->layer_units);
      return FALSE;
    }
  }
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlock *b = &m->blocks[i];
    gboolean chain = i == 0 ? b->n_inputs == 0 : b->n_inputs == 1 && b->inputs[0] == i - 1;
    if (!chain) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, "$.pipeline",
                    "pipeline stages need a chain of blocks; block \"%s\" of %s reads other blocks than the one "
                    "before it",
                    b->name, m->path);
      return FALSE;
    }
  }
  return TRUE;
}

/* The block micro_batch refers to: the first transformer, else the first mlp, else block 0. */
static guint main_block(const MmModel *m)
{
  static const MmBlockKind order[] = {MM_BLOCK_TRANSFORMER, MM_BLOCK_MLP};
  for (guint k = 0; k < G_N_ELEMENTS(order); k++)
    for (guint i = 0; i < m->n_blocks; i++)
      if (m->blocks[i].kind == order[k]) return i;
  return 0;
}

MmScenario *mm_scenario_new(const MmModel *m, const MmHardware *hw, const MmParallelConfig *c,
                            GError **error)
{
  g_return_val_if_fail(m && hw && c, NULL);
  MmJsonCtx ctx = {c->path};
  g_autoptr(MmScenario) s = g_new0(MmScenario, 1);
  s->model = m;
  s->hw = hw;
  s->cfg = c;
  s->devices = mm_hardware_devices(hw);
  s->blocks = g_new0(MmBlockSetup, m->n_blocks);
  if (!resolve_pipeline(&ctx, s, error)) return NULL;

  for (guint i = 0; i < c->n_strategies; i++) {
    gboolean is_kind;
    if (strcmp(c->strategies[i].key, "default") != 0 && !names_block(m, c->strategies[i].key, &is_kind)) {
      g_autofree char *jp = g_strdup_printf("$.parallelism.%s", c->strategies[i].key);
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_KEY, &ctx, jp,
                    "\"%s\" is neither a block kind, a block name of %s, nor \"default\"",
                    c->strategies[i].key, m->path);
      return NULL;
    }
  }
  for (guint i = 0; i < c->n_frozen; i++) {
    gboolean is_kind;
    if (!names_block(m, c->frozen[i], &is_kind)) {
      g_autofree char *jp = g_strdup_printf("$.frozen[%u]", i);
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, &ctx, jp,
                    "\"%s\" is neither a block kind nor a block name of %s", c->frozen[i], m->path);
      return NULL;
    }
  }

  gboolean any_trained = FALSE;
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlock *b = &m->blocks[i];
    MmBlockSetup *bs = &s->blocks[i];
    for (int k = 0; k < MM_STRAT_COUNT; k++) bs->degree[k] = 1;
    bs->entry = mm_parallel_strategy_for(c, b);
    if (!bs->entry) {
      mm_json_error(error, MM_CONFIG_ERROR_MISSING_KEY, &ctx, "$.parallelism",
                    "no strategy for block \"%s\" (kind %s); add an entry keyed \"%s\", \"%s\" or \"default\"",
                    b->name, mm_block_kind_names[b->kind], b->name, mm_block_kind_names[b->kind]);
      return NULL;
    }
    if (!resolve_block(&ctx, s, b, bs, error)) return NULL;
    bs->frozen = block_frozen(c, b);
    any_trained |= !bs->frozen;
    bs->compute_dtype = c->compute_set ? c->compute_dtype : b->compute_dtype;
    bs->grad_dtype = c->grads_set ? c->grad_dtype : b->dtype;
    bs->optimizer = b->kind == MM_BLOCK_EMBEDDING_BAG ? &c->sparse_optimizer : &c->optimizer;
    if (hw->device.peak_flops[bs->compute_dtype] <= 0) {
      g_autofree char *jp = g_strdup_printf("$.blocks[%u]", i);
      MmJsonCtx mctx = {m->path};
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, c->compute_set ? &ctx : &mctx,
                    c->compute_set ? "$.precision.compute" : jp,
                    "compute dtype %s of block \"%s\" has no peak in device file %s",
                    mm_dtype_name(bs->compute_dtype), b->name, hw->device.path);
      return NULL;
    }
  }
  if (c->task == MM_TASK_FINETUNE && !any_trained) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.frozen",
                  "every block is frozen; finetune needs at least one trained block");
    return NULL;
  }

  /* Batch split: micro_batch counts samples per data-parallel rank of main_block(). */
  if (c->global_batch_tokens > 0) {
    if (m->seq_len == 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.global_batch_tokens",
                    "model %s has no seq_len; give \"global_batch\" in samples", m->path);
      return NULL;
    }
    if (c->global_batch_tokens % m->seq_len != 0) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.global_batch_tokens",
                    "%" G_GINT64_FORMAT " tokens is not a whole number of %" G_GINT64_FORMAT "-token sequences",
                    c->global_batch_tokens, m->seq_len);
      return NULL;
    }
    s->global_batch = c->global_batch_tokens / m->seq_len;
  } else {
    s->global_batch = c->global_batch;
  }
  s->ref_block = main_block(m);
  s->dp_ref = s->blocks[s->ref_block].dp;
  const char *bkey = c->global_batch_tokens > 0 ? "$.global_batch_tokens" : "$.global_batch";
  if (s->global_batch % s->dp_ref != 0) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, bkey,
                  "%" G_GINT64_FORMAT " samples do not split evenly over the %" G_GINT64_FORMAT
                  " data-parallel ranks of block \"%s\"",
                  s->global_batch, s->dp_ref, m->blocks[s->ref_block].name);
    return NULL;
  }
  int64_t local = s->global_batch / s->dp_ref;
  s->micro_batch = c->micro_batch > 0 ? c->micro_batch : local;
  if (local % s->micro_batch != 0) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.micro_batch",
                  "micro_batch %" G_GINT64_FORMAT " does not divide the %" G_GINT64_FORMAT
                  " samples each data-parallel rank of block \"%s\" gets",
                  s->micro_batch, local, m->blocks[s->ref_block].name);
    return NULL;
  }
  s->micro_steps = local / s->micro_batch;
  double global_micro = (double)s->micro_batch * (double)s->dp_ref;
  for (guint i = 0; i < m->n_blocks; i++)
    s->blocks[i].samples_per_micro = global_micro / (double)s->blocks[i].dp;
  if (s->pp > 1 && c->pipeline.schedule == MM_PIPE_INTERLEAVED && s->vstages > 1 && s->micro_steps % s->pp != 0) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.micro_batch",
                  "the interleaved schedule needs the micro-batches per iteration (%" G_GINT64_FORMAT
                  ") to be a multiple of the %" G_GINT64_FORMAT " pipeline stages",
                  s->micro_steps, s->pp);
    return NULL;
  }
  /* expert parallelism: the group of the first block that has one */
  s->ep_degree = 1;
  s->ep_stride = 1;
  for (guint i = 0; i < m->n_blocks && s->ep_degree == 1; i++) {
    const MmBlockSetup *bs = &s->blocks[i];
    for (guint k = 0; k < bs->n_levels; k++) {
      if (bs->levels[k].strategy == MM_STRAT_EP && bs->levels[k].degree > 1) {
        s->ep_degree = bs->levels[k].degree;
        s->ep_stride = bs->stride[k];
        break;
      }
    }
  }
  if (c->expert_skew > 0 && (s->ep_degree == 1 || c->expert_skew > (double)(s->ep_degree - 1))) {
    if (s->ep_degree == 1)
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.expert_skew",
                    "routing skew needs an ep level (experts sharded over a group) on a MoE block");
    else
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, "$.expert_skew",
                    "%g is more than the %" G_GINT64_FORMAT " other ranks of the ep group can give up; expected at "
                    "most ep degree - 1 = %" G_GINT64_FORMAT,
                    c->expert_skew, s->ep_degree - 1, s->ep_degree - 1);
    return NULL;
  }
  return g_steal_pointer(&s);
}

void mm_parallel_write_schema(FILE *out)
{
  mm_json_write_schema(out, "Parallelism + task file (`configs/*.json`)",
                       "What to run and how to split it. The same file serves every system size "
                       "when degrees are written as \"node\", \"nodes\" or \"all\".",
                       config_fields);
  mm_json_write_schema(out, "`precision`", "", precision_fields);
  mm_json_write_schema(out, "`optimizer` / `sparse_optimizer`",
                       "Bytes per trained parameter: adam 2 x state, sgd 0 (+1 state with "
                       "momentum), adagrad 1 x state, rowwise_adagrad 1 state per row; plus 4 "
                       "(fp32 master copy) when master_weights and the weights are narrower than fp32.",
                       optimizer_fields);
  mm_json_write_schema(out, "`pipeline`",
                       "Pipeline stages are the outermost digit of the device index; the "
                       "parallelism levels' degrees multiply to the devices of one stage.",
                       pipeline_fields);
  mm_json_write_schema(out, "`inference` (serving)",
                       "A prefill of the prompt, then decode steps at the mean context (prompt + "
                       "output / 2). By default the decode step runs as vLLM, SGLang and TensorRT-LLM "
                       "run it (cuda_graphs, custom_all_reduce); with both false, as an eager "
                       "framework on NCCL (FasterTransformer 2022) would.",
                       serving_fields);
  mm_json_write_schema(out, "`parallelism.<key>[i]` (one level)",
                       "Keys of `parallelism`: a block kind, a block name, or `default`; a block "
                       "uses its name's entry, else its kind's, else `default`. Levels are listed "
                       "innermost first: [tp node, fsdp all] is MAD-Max's ((TP),(FSDP)). The "
                       "degrees must multiply to the number of devices.",
                       level_fields);
}

/* check_parallel: expert, sequence and context parallelism, ZeRO stages, selective recompute, serving. */
#include <math.h>
#include <string.h>

#include "plan/internal.h"
#include "report/report.h"
#include "testutil.h"

typedef MmSimulation Sim;

/* Serialized time and count of the collectives of @kind and @reason in the critical program. */
static guint count_ops(const Sim *x, MmCollKind kind, MmReason reason, int phase)
{
  const MmPlanProgram *p = mm_plan_class_program(x->plan, x->metrics.critical_class);
  guint n = 0;
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmOpInfo *in = &p->info[i];
    if (in->what == MM_OP_COLLECTIVE && in->coll == kind && in->reason == reason && (phase < 0 || in->phase == phase))
      n++;
  }
  return n;
}

static double coll_bytes(const Sim *x, MmCollKind kind, MmReason reason, int phase)
{
  const MmPlanProgram *p = mm_plan_class_program(x->plan, x->metrics.critical_class);
  double b = 0;
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmOpInfo *in = &p->info[i];
    if (in->what == MM_OP_COLLECTIVE && in->coll == kind && in->reason == reason && (phase < 0 || in->phase == phase))
      b += in->bytes;
  }
  return b;
}

static char *config(const char *task, int global, const char *extra, const char *levels)
{
  return g_strdup_printf("{\"name\":\"c\",\"task\":\"%s\",\"global_batch\":%d,%s\"parallelism\":{\"default\":%s}}", task,
                         global, extra, levels);
}

/* ---- serving --------------------------------------------------------------- */

START_TEST(test_decode_reads_weights_and_cache)
{
  /* LLaMA-2-70B, TP 8 on one node, one sequence: a decode step reads the device's weight
   * shard and the KV cache; its kernels take those bytes over the achievable HBM bandwidth */
  g_autofree char *c = config("inference", 1,
                              "\"inference\":{\"prompt_tokens\":1024,\"output_tokens\":128,"
                              "\"cuda_graphs\":false,\"custom_all_reduce\":false},",
                              "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/llama2-70b.json", "hardware/dgx-a100-2048.json", c, 1);
  ck_assert_ptr_nonnull(x->decode_plan);
  const MmServingMetrics *sv = &x->serving;
  const MmDevice *dev = &x->hardware->device;
  /* weights per device: embedding rows and the head split 8 ways, layers split except norms */
  const double weights = (double)x->graph->total_params * 2.0 / 8.0;
  /* the K and V of 8 kv heads x 128 over 80 layers, one kv head per device, at the mean context */
  const double ctx = 1024 + 128 / 2;
  const double kv_read = ctx * 80 * 2 * 128 * 2.0;
  ck_assert_double_eq(sv->decode_context, ctx);
  ck_assert_double_eq_tol(sv->decode_hbm_bytes, weights + kv_read, 0.03 * (weights + kv_read));
  const double floor = (weights + kv_read) / (dev->hbm_bw_Bps * dev->util_hbm.value);
  const MmRunMetrics *d = &x->decode_metrics;
  ck_assert_double_eq_tol(d->compute_s, floor, 0.2 * floor);
  ck_assert_double_gt(d->compute_s, 0.5 * d->iteration_time_s); /* memory-bound kernels dominate */
  ck_assert_double_eq_tol(sv->tpot_s, d->iteration_time_s, 1e-12);
  /* the prefill is a 1024-token forward pass: compute-bound, longer than a token */
  ck_assert_double_gt(sv->ttft_s, 4 * sv->tpot_s);
  ck_assert_double_eq_tol(sv->latency_s, sv->ttft_s + 127 * sv->tpot_s, 1e-9);
  /* KV cache: 1152 tokens x 80 layers x (K + V of one kv head of 128) x 2 bytes */
  ck_assert_double_eq_tol(x->memory->total.kv_cache, 1152.0 * 80 * 2 * 128 * 2, 1);
  ck_assert(x->memory->fits);
  /* launched eagerly with NCCL (FasterTransformer 2022), 161 small all-reduces at NCCL's
   * latency take a third of the step */
  ck_assert_uint_eq(sv->decode_collectives, 161); /* 2 per layer + the vocabulary-parallel embedding */
  ck_assert_double_gt(sv->decode_comm_s, 0.3 * sv->tpot_s);
  ck_assert_double_eq_tol(sv->decode_launch_s, sv->decode_kernels * dev->launch_overhead_s, 1e-12);

  /* by default, as serving engines run it (CUDA graphs, one-shot custom all-reduce), the
   * whole step is the weights + KV bytes over the achievable HBM bandwidth, within 20% */
  g_autofree char *cg = config("inference", 1, "\"inference\":{\"prompt_tokens\":1024,\"output_tokens\":128},",
                               "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autoptr(MmSimulation) y = mm_test_sim_ok("models/llama2-70b.json", "hardware/dgx-a100-2048.json", cg, 1);
  const MmServingMetrics *sg = &y->serving;
  ck_assert(sg->cuda_graphs && sg->custom_all_reduce);
  ck_assert_double_eq_tol(sg->tpot_s, floor, 0.2 * floor);
  ck_assert_double_gt(sg->tpot_s, floor);
  ck_assert_double_eq_tol(sg->decode_hbm_achievable_s, floor, 0.03 * floor);
  /* the same kernels and bytes; only the launches and the all-reduces got cheaper */
  ck_assert_uint_eq(sg->decode_kernels, sv->decode_kernels);
  ck_assert_double_eq_tol(sg->decode_hbm_bytes, sv->decode_hbm_bytes, 1);
  ck_assert_double_eq_tol(sg->decode_launch_s, sg->decode_kernels * dev->graph_launch_overhead_s, 1e-12);
  ck_assert_double_eq_tol(sg->decode_kernel_s - sg->decode_launch_s, sv->decode_kernel_s - sv->decode_launch_s, 1e-9);
  ck_assert_double_lt(sg->decode_comm_s, sv->decode_comm_s / 4);
  /* the prefill's 16 MiB all-reduces stay with NCCL: bandwidth-bound, the one-shot kernel loses */
  ck_assert_double_eq_tol(y->serving.ttft_s, sv->ttft_s, 1e-12);
}
END_TEST

START_TEST(test_serving_cache_fills_memory)
{
  /* 512 sequences of 8K tokens on one node: the KV cache (2.6 MB a token over 8 GPUs) does not fit */
  g_autofree char *c = config("inference", 512, "\"inference\":{\"prompt_tokens\":4096,\"output_tokens\":4096},",
                              "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/llama2-70b.json", "hardware/dgx-a100-2048.json", c, 1);
  ck_assert(!x->memory->fits);
  ck_assert_double_gt(x->memory->total.kv_cache, x->memory->total.weights);
  /* larger batches raise throughput until the KV traffic dominates */
  g_autofree char *c1 = config("inference", 1, "\"inference\":{\"prompt_tokens\":4096,\"output_tokens\":4096},",
                               "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autoptr(MmSimulation) y = mm_test_sim_ok("models/llama2-70b.json", "hardware/dgx-a100-2048.json", c1, 1);
  ck_assert_double_gt(x->serving.decode_tokens_per_s, 10 * y->serving.decode_tokens_per_s);
  ck_assert_double_gt(x->serving.tpot_s, y->serving.tpot_s);
}
END_TEST

START_TEST(test_moe_decode_reads_routed_experts)
{
  /* Mixtral-8x7B on one H200 per replica: a decode step at batch 1 reads the attention and
   * the 2 experts its token goes to (the active parameters), not all 8; at batch 64 every
   * expert is someone's */
  static const char *const serve = "\"inference\":{\"prompt_tokens\":1024,\"output_tokens\":128},";
  g_autofree char *c1 = config("inference", 8, serve, "[{\"strategy\":\"ddp\",\"degree\":\"all\"}]");
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h200-8.json", c1, 1);
  const double kv = x->serving.decode_context * 32 * 2 * 8 * 128 * 2.0; /* 8 kv heads of 128 */
  const double active = x->decode_graph->active_params * 2.0, all = (double)x->decode_graph->total_params * 2.0;
  ck_assert_double_lt(active, 0.35 * all);
  ck_assert_double_eq_tol(x->serving.decode_hbm_bytes, active + kv, 0.06 * active);
  ck_assert_double_ge(x->serving.decode_hbm_bytes, active + kv);
  g_autofree char *c64 = config("inference", 512, serve, "[{\"strategy\":\"ddp\",\"degree\":\"all\"}]");
  g_autoptr(MmSimulation) y = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h200-8.json", c64, 1);
  ck_assert_double_ge(y->serving.decode_hbm_bytes, 0.999 * all);
  /* spread over 8 GPUs (one expert each, MAD-Max's TP model), the busiest GPU reads its whole
   * expert whatever the batch: no saving on the critical path */
  g_autofree char *c8 = config("inference", 1, serve, "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autoptr(MmSimulation) z = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h200-8.json", c8, 1);
  ck_assert_double_eq_tol(z->serving.decode_hbm_bytes, all / 8, 0.03 * all / 8);
  /* training routes millions of tokens: every expert is read */
  g_autofree char *ct = config("pretrain", 8, "\"micro_batch\":1,", "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  g_autoptr(MmSimulation) t = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h200-8.json", ct, 1);
  const MmPlanProgram *pr = mm_plan_class_program(t->plan, t->metrics.critical_class);
  double fwd_bytes = 0;
  for (uint32_t i = 0; i < pr->n_ops; i++)
    if (pr->info[i].what != MM_OP_COLLECTIVE && pr->info[i].phase == MM_PHASE_FWD) fwd_bytes += pr->info[i].bytes;
  ck_assert_double_gt(fwd_bytes, all); /* FSDP gathers every weight: all experts read, plus activations */
}
END_TEST

START_TEST(test_experts_sharded_over_tp)
{
  /* Mixtral on one node under TP 8 without ep: spread (one expert per GPU, All2All dispatch and
   * combine around the experts) or sharded (a slice of every expert per GPU, an AllReduce after
   * them as after a dense FFN) */
  g_autofree char *spread = config("pretrain", 1, "", "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autofree char *sharded = config("pretrain", 1, "", "[{\"strategy\":\"tp\",\"degree\":8,\"experts\":\"sharded\"}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h200-8.json", spread, 1);
  g_autoptr(MmSimulation) b = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h200-8.json", sharded, 1);
  const guint layers = 32;
  ck_assert_uint_eq(count_ops(a, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, MM_PHASE_FWD), 2 * layers);
  ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, -1), 0);
  ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD),
                    count_ops(a, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD) + layers);
  /* the same weights per GPU either way */
  ck_assert_double_eq_tol(b->memory->total.weights, a->memory->total.weights, 1);

  /* decoding one sequence, every GPU reads its slice of the 2 routed experts: the active
   * parameters over 8, where spread the busiest GPU reads its whole expert */
  static const char *const serve = "\"inference\":{\"prompt_tokens\":1024,\"output_tokens\":128},";
  g_autofree char *ds = config("inference", 1, serve, "[{\"strategy\":\"tp\",\"degree\":8,\"experts\":\"sharded\"}]");
  g_autoptr(MmSimulation) d = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h200-8.json", ds, 1);
  const double active = d->decode_graph->active_params * 2.0 / 8;
  ck_assert_double_eq_tol(d->serving.decode_hbm_bytes, active, 0.08 * active);

  /* "experts" belongs on tp levels */
  g_autofree char *bad = config("pretrain", 1, "", "[{\"strategy\":\"fsdp\",\"degree\":8,\"experts\":\"sharded\"}]");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) x = mm_test_sim("models/mixtral-8x7b.json", "hardware/dgx-h200-8.json", bad, NULL, &error);
  ck_assert_ptr_null(x);
  ck_assert_ptr_nonnull(strstr(error->message, "$.parallelism.default[0].experts"));
  ck_assert_ptr_nonnull(strstr(error->message, "tp levels only"));
}
END_TEST

/* ---- expert parallelism ------------------------------------------------------ */

static const char *const EP_LEVELS = "[{\"strategy\":\"ep\",\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\"}]";

static char *ep_config(double skew)
{
  g_autofree char *extra = g_strdup_printf("\"micro_batch\":1,\"expert_skew\":%g,", skew);
  g_autofree char *levels = g_strdup_printf("{\"transformer\":%s,\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}",
                                            EP_LEVELS);
  return g_strdup_printf("{\"name\":\"ep\",\"task\":\"pretrain\",\"global_batch\":16,%s\"parallelism\":%s}", extra,
                         levels);
}

START_TEST(test_expert_parallel_all_to_all)
{
  g_autofree char *c = ep_config(0);
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", c, 2);
  /* 32 layers: dispatch + combine forward and backward, 4 per layer */
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, MM_PHASE_FWD), 64);
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, MM_PHASE_BWD), 64);
  /* one expert per device: the expert weights of a layer are 1/8 of the layer's */
  const MmMemoryParts *dec = &x->memory->blocks[1];
  double experts = 32.0 * 8 * 3 * 4096.0 * 14336.0, dense = 32.0 * (4096.0 * 6144 + 4096.0 * 4096 + 4096.0 * 8 + 2 * 4096);
  ck_assert_double_eq_tol(dec->weights, (experts / 8 + dense) * 2, 0.01 * dec->weights);
  /* each token goes to 2 experts: a dispatch moves micro-batch x 4096 x 4096 x 2 bytes x top_k */
  ck_assert_double_eq_tol(coll_bytes(x, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, MM_PHASE_FWD) / 64,
                          1.0 * 4096 * 4096 * 2 * 2, 1);
  /* expert gradients sync over the 2 replicas only; the rest over all 16 devices */
  ck_assert_uint_gt(count_ops(x, MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1), 0);
}
END_TEST

START_TEST(test_fp8_dispatch)
{
  /* DeepSeek-V3's FP8 dispatch: the tokens going to the experts and the gradients going back to
   * them move 1 + 4/128 bytes per element instead of bf16's 2; the combine and the dispatch's
   * gradient stay bf16. Per phase the All2All bytes become (1 + 1.03125 / 2) / 2 of bf16's */
  g_autofree char *plain = ep_config(0);
  g_autofree char *fp8 = g_strdup_printf("{\"moe_dispatch_fp8\":true,%s", plain + 1);
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", plain, 2);
  g_autoptr(MmSimulation) b = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", fp8, 2);
  const double ratio = (1.0 + 1.03125 / 2.0) / 2.0;
  for (int ph = MM_PHASE_FWD; ph <= MM_PHASE_BWD; ph++) {
    ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, ph),
                      count_ops(a, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, ph));
    ck_assert_double_eq_tol(coll_bytes(b, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, ph),
                            ratio * coll_bytes(a, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, ph), 1);
  }
  ck_assert_double_lt(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
}
END_TEST

START_TEST(test_expert_skew_slowest_sets_pace)
{
  g_autofree char *even = ep_config(0);
  g_autofree char *skew = ep_config(1.0);
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", even, 2);
  g_autoptr(MmSimulation) b = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", skew, 2);
  ck_assert_uint_eq(a->plan->n_programs, 1);
  ck_assert_uint_eq(b->plan->n_programs, 2);
  ck_assert_double_gt(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
  /* the hot rank computes twice the mean expert load; the other ranks less, and wait for it */
  cJSON *cls = mm_report_classes_json(b->plan, b->engine, b->memory);
  double hot = 0, cold = 0, hot_end = 0, cold_end = 0;
  for (int i = 0; i < cJSON_GetArraySize(cls); i++) {
    const cJSON *o = cJSON_GetArrayItem(cls, i);
    gboolean h = cJSON_IsTrue(cJSON_GetObjectItem(o, "busiest_expert_rank"));
    double busy = cJSON_GetObjectItem(o, "compute_busy_s")->valuedouble;
    double end = cJSON_GetObjectItem(o, "end_s")->valuedouble;
    if (h) hot = busy, hot_end = end;
    else cold = busy, cold_end = end;
  }
  cJSON_Delete(cls);
  ck_assert_double_gt(hot, cold);
  ck_assert_double_eq_tol(hot_end, cold_end, 0.02 * hot_end); /* the all-to-alls hold the others back */
  ck_assert_double_gt(b->metrics.iteration_time_s - a->metrics.iteration_time_s, 0.5 * (hot - cold));
  /* symmetric and per-device simulations agree, skewed or not */
  MmSimOptions opt = {.nodes = 2, .per_device = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) ad = mm_test_sim("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", even, &opt, &error);
  g_autoptr(MmSimulation) bd = mm_test_sim("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", skew, &opt, &error);
  ck_assert_msg(ad && bd, "%s", error ? error->message : "");
  ck_assert_uint_eq(bd->plan->n_classes, 16);
  ck_assert_double_eq(ad->metrics.iteration_time_s, a->metrics.iteration_time_s);
  ck_assert_double_eq(bd->metrics.iteration_time_s, b->metrics.iteration_time_s);
}
END_TEST

/* Per-node dispatch and node-limited routing over 4 nodes of 8 (32 experts, top_k 4): the
 * All2Alls' payload is the same, their network share drops, and so does the iteration. */
static double a2a_time(const Sim *x)
{
  const MmPlanProgram *p = mm_plan_class_program(x->plan, x->metrics.critical_class);
  double t = 0;
  for (uint32_t i = 0; i < p->n_ops; i++)
    if (p->info[i].what == MM_OP_COLLECTIVE && p->info[i].coll == MM_COLL_ALL_TO_ALL) t += p->info[i].time_s;
  return t;
}

START_TEST(test_per_node_dispatch_in_a_run)
{
#define MOE_MODEL(routing)                                                                                   \
  "{\"name\":\"moe\",\"seq_len\":1024,\"dtype\":\"bf16\",\"blocks\":[{\"kind\":\"transformer\",\"count\":2,\"hidden\":1024," \
  "\"heads\":8,\"ffn\":2048,\"experts\":32,\"top_k\":4" routing "}]}"
  const char *free_routing = MOE_MODEL("");
  const char *one_node = MOE_MODEL(",\"router_groups\":4,\"router_group_topk\":1");
#undef MOE_MODEL
  const char *levels =
    "{\"transformer\":[{\"strategy\":\"ep\",\"degree\":32}],\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}";
  g_autofree char *expert = g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":32,"
                                            "\"micro_batch\":1,\"parallelism\":%s}", levels);
  g_autofree char *node = g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":32,\"micro_batch\":1,"
                                          "\"moe_dispatch\":\"per_node\",\"parallelism\":%s}", levels);
  const char *hw = "hardware/dgx-h100-2048.json";
  g_autoptr(MmSimulation) a = mm_test_sim_ok(free_routing, hw, expert, 4);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(free_routing, hw, node, 4);
  g_autoptr(MmSimulation) c = mm_test_sim_ok(one_node, hw, node, 4);
  g_autoptr(MmSimulation) d = mm_test_sim_ok(one_node, hw, expert, 4);
  /* the same payload and count of All2Alls */
  ck_assert_uint_eq(count_ops(a, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, -1),
                    count_ops(b, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, -1));
  ck_assert_double_eq(coll_bytes(a, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, -1),
                      coll_bytes(c, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, -1));
  /* group-limited routing alone does not change a copy-per-expert exchange */
  ck_assert_double_eq(a->metrics.iteration_time_s, d->metrics.iteration_time_s);
  /* per node: 4 (1 - (3/4)^4) = 2.73 of 4 copies cross the network; limited to one node, 1 */
  ck_assert_double_lt(a2a_time(b), a2a_time(a));
  ck_assert_double_lt(a2a_time(c), a2a_time(b));
  ck_assert_double_lt(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
  ck_assert_double_lt(c->metrics.iteration_time_s, b->metrics.iteration_time_s);
  /* symmetric and per-device simulations agree */
  MmSimOptions opt = {.nodes = 4, .per_device = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) cd = mm_test_sim(one_node, hw, node, &opt, &error);
  ck_assert_msg(cd != NULL, "%s", error ? error->message : "");
  ck_assert_double_eq(cd->metrics.iteration_time_s, c->metrics.iteration_time_s);
}
END_TEST

/* ---- sequence parallelism ---------------------------------------------------- */

START_TEST(test_sequence_parallel)
{
  g_autofree char *tp = config("pretrain", 8, "", "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autofree char *sp = config("pretrain", 8, "", "[{\"strategy\":\"sp\",\"degree\":8}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/megatron-gpt-7.5b.json", "hardware/dgx-a100-2048.json", tp, 1);
  g_autoptr(MmSimulation) b = mm_test_sim_ok("models/megatron-gpt-7.5b.json", "hardware/dgx-a100-2048.json", sp, 1);
  /* forward: each all-reduce becomes a reduce-scatter and an all-gather of the same buffer */
  ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD), 0);
  ck_assert_uint_eq(count_ops(b, MM_COLL_REDUCE_SCATTER, MM_REASON_TP, MM_PHASE_FWD),
                    count_ops(a, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD));
  ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_GATHER, MM_REASON_TP, MM_PHASE_FWD),
                    count_ops(a, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD));
  ck_assert_double_eq_tol(coll_bytes(b, MM_COLL_REDUCE_SCATTER, MM_REASON_TP, MM_PHASE_FWD),
                          coll_bytes(a, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD), 1);
  /* backward also re-gathers the inputs of column-parallel layers for their weight gradients */
  ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_GATHER, MM_REASON_TP, MM_PHASE_BWD),
                    2 * count_ops(a, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_BWD));
  /* norms and dropout run on 1/8 of the tokens; their activations shrink. Korthikanti et al.
   * (2022): s b h (34/t + 5 a s / (h t)) with SP against s b h (10 + 24/t + 5 a s / (h t)) without:
   * 14.25 / 23 = 0.62 for this model at t = 8 */
  double ratio = b->memory->total.activations / a->memory->total.activations;
  ck_assert_double_eq_tol(ratio, 14.25 / 23.0, 0.05);
  ck_assert_double_lt(b->metrics.compute_s, a->metrics.compute_s);
}
END_TEST

/* ---- context parallelism ----------------------------------------------------- */

START_TEST(test_context_parallel)
{
  static const char *const LONG =
    "{\"name\":\"long\",\"seq_len\":32768,\"blocks\":[{\"kind\":\"transformer\",\"count\":4,\"hidden\":4096,"
    "\"heads\":32,\"kv_heads\":8,\"ffn\":14336,\"ffn_kind\":\"swiglu\",\"norm\":\"rmsnorm\"}]}";
  g_autofree char *ring = g_strdup_printf(
    "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":1,\"parallelism\":{\"default\":"
    "[{\"strategy\":\"tp\",\"degree\":4},{\"strategy\":\"cp\",\"degree\":2}]}}");
  g_autofree char *ag = g_strdup_printf(
    "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":1,\"parallelism\":{\"default\":"
    "[{\"strategy\":\"tp\",\"degree\":4},{\"strategy\":\"cp\",\"degree\":2,\"kv_exchange\":\"all_gather\"}]}}");
  g_autofree char *tp4 = config("pretrain", 1, "", "[{\"strategy\":\"tp\",\"degree\":4},{\"strategy\":\"tp\",\"degree\":2}]");
  g_autoptr(MmSimulation) r = mm_test_sim_ok(LONG, "hardware/dgx-a100-2048.json", ring, 1);
  g_autoptr(MmSimulation) g = mm_test_sim_ok(LONG, "hardware/dgx-a100-2048.json", ag, 1);
  /* ring: cp - 1 exchanges forward, and as many backward, per layer */
  ck_assert_uint_eq(count_ops(r, MM_COLL_PERMUTE, MM_REASON_CP, MM_PHASE_FWD), 4);
  ck_assert_uint_eq(count_ops(r, MM_COLL_PERMUTE, MM_REASON_CP, MM_PHASE_BWD), 4);
  /* a K/V chunk: 16384 tokens x (8 kv heads x 256) / 4 TP ranks x 2 bytes */
  double chunk = 16384.0 * 8 * 256 / 4 * 2;
  ck_assert_double_eq_tol(coll_bytes(r, MM_COLL_PERMUTE, MM_REASON_CP, MM_PHASE_FWD), 4 * chunk, 1);
  ck_assert_double_eq_tol(coll_bytes(r, MM_COLL_PERMUTE, MM_REASON_CP, MM_PHASE_BWD), 4 * 2 * chunk, 1);
  ck_assert_uint_eq(count_ops(g, MM_COLL_ALL_GATHER, MM_REASON_CP, MM_PHASE_FWD), 4);
  ck_assert_uint_eq(count_ops(g, MM_COLL_REDUCE_SCATTER, MM_REASON_CP, MM_PHASE_BWD), 4);
  /* weights are replicated over the cp ranks: their gradients are all-reduced over them */
  ck_assert_uint_gt(count_ops(r, MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1), 0);
  /* the sequence split shares activations and attention work like TP 8 does: per device, 1/8 of
   * each layer's attention core */
  g_autoptr(MmSimulation) t = mm_test_sim_ok(LONG, "hardware/dgx-a100-2048.json", tp4, 1);
  ck_assert_double_lt(r->memory->total.activations, 0.75 * t->memory->total.activations);
  double attn_r = 0;
  const MmPlanProgram *pr = &r->plan->programs[0];
  for (uint32_t i = 0; i < pr->n_ops; i++)
    if (pr->info[i].what == MM_OP_COMPUTE && pr->info[i].phase == MM_PHASE_FWD &&
        r->graph->layers[pr->info[i].first_layer].role == MM_ROLE_ATTN_CORE)
      attn_r += pr->info[i].flops;
  const MmLayer *core = NULL;
  for (uint32_t l = 0; l < r->graph->n_layers && !core; l++)
    if (r->graph->layers[l].role == MM_ROLE_ATTN_CORE) core = &r->graph->layers[l];
  ck_assert_double_eq_tol(attn_r, 4 * core->cost.fwd_exec_flops / 8, 1e-6 * attn_r);
}
END_TEST

/* FSDP sharded over the cp ranks too (torchtitan's dp_shard_cp mesh, the cp level's "fsdp": true): FSDP 4 x
 * CP 2 holds what FSDP 8 holds of weights, gradients and optimizer states, gathers and reduce-scatters
 * over all 8 ranks and all-reduces nothing over cp; with the cp ranks as replicas it holds twice as much
 * and all-reduces its gradient shards over cp; CP 8 without an fsdp level shards over the cp ranks
 * alone. The sequence split (activations, attention work) is the same either way. */
START_TEST(test_cp_shards_with_fsdp)
{
  static const char *const LONG =
    "{\"name\":\"long\",\"seq_len\":32768,\"blocks\":[{\"kind\":\"transformer\",\"count\":4,\"hidden\":4096,"
    "\"heads\":32,\"kv_heads\":8,\"ffn\":14336,\"ffn_kind\":\"swiglu\",\"norm\":\"rmsnorm\"}]}";
  static const char *const levels[] = {
    "[{\"strategy\":\"fsdp\",\"degree\":4},{\"strategy\":\"cp\",\"degree\":2,\"fsdp\":true}]",
    "[{\"strategy\":\"fsdp\",\"degree\":8}]",
    "[{\"strategy\":\"fsdp\",\"degree\":4},{\"strategy\":\"cp\",\"degree\":2}]",
    "[{\"strategy\":\"cp\",\"degree\":8,\"fsdp\":true}]",
  };
  MmSimulation *x[G_N_ELEMENTS(levels)];
  for (guint i = 0; i < G_N_ELEMENTS(levels); i++) {
    g_autofree char *c = config("pretrain", 8, "", levels[i]);
    x[i] = mm_test_sim_ok(LONG, "hardware/dgx-a100-2048.json", c, 1);
  }
  const MmMemoryParts *a = &x[0]->memory->total, *f8 = &x[1]->memory->total, *rep = &x[2]->memory->total,
                      *c8 = &x[3]->memory->total;
  const double held_a = a->weights + a->gradients + a->optimizer;
  ck_assert_double_eq_tol(held_a, f8->weights + f8->gradients + f8->optimizer, 1e-9 * held_a);
  ck_assert_double_eq_tol(c8->weights + c8->gradients + c8->optimizer, held_a, 1e-9 * held_a);
  ck_assert_double_eq_tol(rep->weights + rep->gradients + rep->optimizer, 2.0 * held_a, 1e-9 * held_a);
  ck_assert_double_eq_tol(a->activations, rep->activations, 1e-9 * a->activations);
  /* the group: 8 ranks, the gathered bytes of FSDP 8's; no gradient all-reduce over cp */
  ck_assert_int_eq(x[0]->scenario->blocks[0].fsdp_shards, 8);
  ck_assert_int_eq(x[2]->scenario->blocks[0].fsdp_shards, 4);
  ck_assert_int_eq(x[3]->scenario->blocks[0].fsdp_shards, 8);
  const double ag = coll_bytes(x[1], MM_COLL_ALL_GATHER, MM_REASON_FSDP, -1);
  ck_assert_double_gt(ag, 0);
  ck_assert_double_eq_tol(coll_bytes(x[0], MM_COLL_ALL_GATHER, MM_REASON_FSDP, -1), ag, 1e-9 * ag);
  ck_assert_double_eq_tol(coll_bytes(x[3], MM_COLL_ALL_GATHER, MM_REASON_FSDP, -1), ag, 1e-9 * ag);
  ck_assert_uint_gt(count_ops(x[3], MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, MM_PHASE_BWD), 0);
  ck_assert_uint_eq(count_ops(x[0], MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1), 0);
  ck_assert_uint_eq(count_ops(x[3], MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1), 0);
  ck_assert_uint_gt(count_ops(x[2], MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1), 0);
  ck_assert_uint_eq(mm_plan_grad_replicas(x[0]->scenario, 0, FALSE) & MM_STRAT_MASK(MM_STRAT_CP), 0);
  ck_assert_uint_ne(mm_plan_grad_replicas(x[2]->scenario, 0, FALSE) & MM_STRAT_MASK(MM_STRAT_CP), 0);
  /* describe shows the group */
  g_autoptr(cJSON) doc = mm_report_describe_json(x[0]->graph, NULL, x[0]->scenario, x[0]->memory);
  g_autofree char *text = cJSON_PrintUnformatted(doc);
  ck_assert_msg(strstr(text, "\"fsdp_group\":{\"strategies\":[\"fsdp\",\"cp\"],\"shards\":8,\"collectives\":\"flat\",\"regather_recompute\":false}") != NULL, "%s", text);
  for (guint i = 0; i < G_N_ELEMENTS(levels); i++) mm_simulation_free(x[i]);

  /* cp levels disagreeing on fsdp: rejected at the second one */
  g_autofree char *mixed = config("pretrain", 8, "", "[{\"strategy\":\"cp\",\"degree\":2,\"fsdp\":true},"
                                                     "{\"strategy\":\"cp\",\"degree\":2},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) bad = mm_test_sim(LONG, "hardware/dgx-a100-2048.json", mixed, NULL, &error);
  ck_assert(bad == NULL && error != NULL);
  ck_assert_msg(strstr(error->message, "$.parallelism.default[1].fsdp") != NULL, "%s", error->message);

  /* HSDP with ZeRO-1 over ddp (FSDP 2 x CP 2 sharded, ddp 2): the updated weights gathered over ddp
   * are this rank's FSDP shard, as many bytes as the gradient shard all-reduced over ddp (bf16 both) */
  g_autofree char *hz = config("pretrain", 8, "\"precision\":{\"grads\":\"bf16\"},",
                               "[{\"strategy\":\"fsdp\",\"degree\":2},{\"strategy\":\"cp\",\"degree\":2,\"fsdp\":true},"
                               "{\"strategy\":\"ddp\",\"degree\":2,\"zero\":1}]");
  g_autoptr(MmSimulation) h = mm_test_sim_ok(LONG, "hardware/dgx-a100-2048.json", hz, 1);
  const double ar = coll_bytes(h, MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1);
  ck_assert_double_gt(ar, 0);
  ck_assert_double_eq_tol(coll_bytes(h, MM_COLL_ALL_GATHER, MM_REASON_ZERO, -1), ar, 1e-9 * ar);
}
END_TEST

/* DeepSpeed-Ulysses, added as one strategy row: an All2All before and after each attention
 * core (q, k, v of the local tokens; the output), the sequence split everywhere else, the
 * weights replicated (gradients averaged over the group); the same FLOPs per device as 8-way
 * DDP of the same batch. */
START_TEST(test_ulysses_sequence_parallel)
{
  static const char *const M =
    "{\"name\":\"u\",\"seq_len\":8192,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,\"hidden\":4096,"
    "\"heads\":32,\"kv_heads\":8,\"ffn\":14336,\"ffn_kind\":\"swiglu\",\"norm\":\"rmsnorm\"}]}";
  g_autofree char *hw = mm_test_node8();
  g_autofree char *u8 = config("pretrain", 8, "", "[{\"strategy\":\"ulysses\",\"degree\":8}]");
  g_autofree char *d8 = config("pretrain", 8, "", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autoptr(MmSimulation) u = mm_test_sim_ok(M, hw, u8, 0);
  g_autoptr(MmSimulation) d = mm_test_sim_ok(M, hw, d8, 0);
  ck_assert_uint_eq(count_ops(u, MM_COLL_ALL_TO_ALL, MM_REASON_ULYSSES, MM_PHASE_FWD), 4);
  ck_assert_uint_eq(count_ops(u, MM_COLL_ALL_TO_ALL, MM_REASON_ULYSSES, MM_PHASE_BWD), 4);
  /* per layer: 8 sequences x 1024 local tokens x (32 q + 8 k + 8 v heads) x 128 x 2 bytes in, 32 heads out */
  const double tokens = 8.0 * 8192 / 8;
  ck_assert_double_eq_tol(coll_bytes(u, MM_COLL_ALL_TO_ALL, MM_REASON_ULYSSES, MM_PHASE_FWD),
                          2 * tokens * (48.0 + 32.0) * 128 * 2, 1);
  ck_assert_uint_eq(count_ops(u, MM_COLL_ALL_REDUCE, MM_REASON_TP, -1), 0);
  ck_assert_uint_gt(count_ops(u, MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1), 0); /* replicated weights */
  ck_assert_double_eq_tol(u->metrics.compute_s, d->metrics.compute_s, 1e-9 * d->metrics.compute_s);
  ck_assert_double_eq_tol(u->memory->total.weights, d->memory->total.weights, 1);
  ck_assert_double_eq_tol(u->memory->total.activations, d->memory->total.activations,
                          1e-9 * d->memory->total.activations);
  /* where it does not apply: heads not divisible by the degree, a DLRM (no sequence blocks) */
  g_autoptr(GError) error = NULL;
  static const char *const FEW = "{\"name\":\"f\",\"seq_len\":8192,\"blocks\":[{\"kind\":\"transformer\",\"count\":2,"
                                 "\"hidden\":768,\"heads\":12,\"ffn\":3072}]}";
  g_autoptr(MmSimulation) x = mm_test_sim(FEW, hw, u8, NULL, &error);
  ck_assert_ptr_null(x);
  ck_assert_int_eq(error->code, MM_CONFIG_ERROR_INCONSISTENT);
  g_clear_error(&error);
  g_autoptr(MmSimulation) y = mm_test_sim("models/dlrm-a.json", hw, u8, NULL, &error);
  ck_assert_ptr_null(y);
  ck_assert_int_eq(error->code, MM_CONFIG_ERROR_INCONSISTENT);
  ck_assert_ptr_nonnull(strstr(error->message, "parallelism.default[0].strategy"));
}
END_TEST

/* Memory and lowering read one placement: for every strategy, a block's weights in memory
 * are the sum over its layers of params x the placement's share, and every FSDP all-gather
 * moves the same layers' share times the FSDP degree. */
START_TEST(test_placement_sums_match_memory)
{
  static const char *const cases[][4] = {
    {"models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-tp-fsdp.json", "0"},
    {"models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-tp-ddp.json", "0"},
    {"models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", "configs/mixtral-pretrain-ep.json", "8"},
    {"models/dlrm-a.json", "hardware/zionex-a100-128.json", "configs/dlrm-pretrain-fsdp-mp.json", "0"},
    {"models/dlrm-a-moe.json", "hardware/zionex-a100-128.json", "configs/dlrm-pretrain-tp-ddp-mp.json", "0"},
    {"models/llama3-405b.json", "hardware/dgx-h100-2048.json", "configs/llama3-405b-long-context.json", "2048"},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autoptr(MmSimulation) x = mm_test_sim_ok(cases[c][0], cases[c][1], cases[c][2], g_ascii_strtoll(cases[c][3], NULL, 10));
    const MmScenario *s = x->scenario;
    const MmGraph *g = x->graph;
    if (s->pp > 1) continue; /* memory reports the busiest stage */
    for (guint b = 0; b < s->model->n_blocks; b++) {
      double w = 0;
      for (guint u = g->block_first_unit[b]; u < g->block_first_unit[b] + g->block_units[b]; u++)
        for (uint32_t li = g->units[u].first_layer; li < g->units[u].first_layer + g->units[u].n_layers; li++) {
          MmPlacement p;
          mm_plan_place(s, g, li, &p);
          w += (double)g->layers[li].cost.params * p.param_frac * mm_dtype_bytes(s->model->blocks[b].dtype);
        }
      ck_assert_msg(fabs(w - x->memory->blocks[b].weights) <= 1e-9 * w + 1, "%s block %u: placement %.6g, memory %.6g",
                    cases[c][2], b, w, x->memory->blocks[b].weights);
    }
    /* the FSDP gathers: the unit's placement share x fsdp, in the weights' dtype */
    const MmPlanProgram *pr = &x->plan->programs[0];
    for (uint32_t i = 0; i < pr->n_ops; i++) {
      const MmOpInfo *in = &pr->info[i];
      if (in->what != MM_OP_COLLECTIVE || in->reason != MM_REASON_FSDP || in->coll != MM_COLL_ALL_GATHER) continue;
      const MmUnit *un = &g->units[in->unit];
      const MmBlockSetup *bs = &s->blocks[un->block];
      if (mm_plan_mask_degree(bs, MM_STRAT_MASK(MM_STRAT_FSDP)) != bs->degree[MM_STRAT_FSDP]) continue;
      double want = 0;
      for (uint32_t li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
        MmPlacement p;
        mm_plan_place(s, g, li, &p);
        want += (double)g->layers[li].cost.params * p.param_frac * (double)bs->degree[MM_STRAT_FSDP];
      }
      want *= mm_dtype_bytes(s->model->blocks[un->block].dtype);
      ck_assert_msg(fabs(in->bytes - want) <= 1e-9 * want, "%s: gather %.6g, placement %.6g", cases[c][2], in->bytes, want);
    }
  }
}
END_TEST

/* fsdp_collectives per_tensor_list (DeepSpeed ZeRO-3 of 2021): a GPT layer with biases and LayerNorms
 * is 12 parameter tensors, each gathered (and its gradient reduce-scattered) by its own call on a list
 * of per-rank views; tensors under fsdp_persistence_threshold elements (the norms and biases at the
 * default 1e5) are held whole: never all-gathered, in every device's weights. Each FSDP collective
 * takes each call's own collective latency (from its tensor's size) plus one copy kernel per rank and
 * call and the buffer's copy at HBM bandwidth; flat calls pay one latency. */
/* Cast bytes of the weight operand (per element of the device's weight) of layer @li's part @part
 * in @x (@recompute: the forward as its recompute runs it), and the layer's GEMM in @k. */
static double weight_cast(const Sim *x, uint32_t li, MmKernelPart part, gboolean recompute, MmKernel *k)
{
  MmPlacement p;
  mm_plan_place(x->scenario, x->graph, li, &p);
  MmPartWork w, f;
  if (recompute) mm_plan_recompute_work(x->scenario, x->graph, li, &p, 1.0, &w, NULL);
  else mm_plan_part_work(x->scenario, x->graph, li, part, &p, 1.0, &w, NULL);
  mm_plan_part_work(x->scenario, x->graph, li, MM_PART_FWD, &p, 1.0, &f, NULL);
  const MmKernel *a = &w.kernel;
  const double act = a->m * a->k * a->batch, wt = f.kernel.k * f.kernel.n * f.kernel.batch;
  /* the activation operand's casts (x forward, dY backward): tensorwise 6, delayed 4 */
  const double per_act = x->config->fp8_recipe == MM_FP8_TENSORWISE ? 6 : 4;
  if (k) *k = f.kernel;
  return (w.cast_bytes - per_act * act) / wt;
}

/* precision.fp8_param_gather: FSDP gathers carry the FP8 GEMMs' weights at 1 byte (biases and norms
 * in bf16), the weight casts shrink to the shard's cast and the gathered weight's transpose (per
 * docs/MODEL.md, "FP8 recipes": resharding or not, tensorwise or delayed, a recompute with and
 * without a second gather); ZeRO's gather after the optimizer step likewise; nothing changes
 * where no block computes in FP8. */
START_TEST(test_fp8_param_gather)
{
  static const char *const GPT =
    "{\"name\":\"gpt\",\"seq_len\":2048,\"dtype\":\"bf16\",\"blocks\":[{\"kind\":\"transformer\",\"count\":4,"
    "\"hidden\":2048,\"heads\":16,\"ffn\":8192,\"ffn_kind\":\"gelu\",\"norm\":\"layernorm\",\"bias\":true}]}";
  const double h = 2048, weights = 12 * h * h, rest = 13 * h; /* a layer's GEMM weights; biases and norms */
  const double n = 16;                                         /* 2 nodes */
  static const char *const LEVELS[] = {"[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]",
                                       "[{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":1}]"};
  static const struct {
    const char *recipe, *extra;
    guint level;
    gboolean reshard, regather;
  } cases[] = {
    {"tensorwise", "", 0, TRUE, FALSE},
    {"tensorwise", "", 1, TRUE, FALSE},
    {"tensorwise", "\"fsdp_reshard_after_forward\":false,", 0, FALSE, FALSE},
    {"delayed", "", 0, TRUE, FALSE},
    {"delayed", "", 1, TRUE, FALSE},
    {"tensorwise", "\"recompute\":\"full\",\"fsdp_regather_recompute\":true,", 0, TRUE, TRUE},
  };
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    g_autofree char *pa = g_strdup_printf("%s\"micro_batch\":1,\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"%s\"},",
                                          cases[c].extra, cases[c].recipe);
    g_autofree char *pb = g_strdup_printf("%s\"micro_batch\":1,\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"%s\","
                                          "\"fp8_param_gather\":true},", cases[c].extra, cases[c].recipe);
    const gboolean fsdp = cases[c].level == 0;
    g_autofree char *ca = config("pretrain", 32, pa, LEVELS[cases[c].level]);
    g_autofree char *cb = config("pretrain", 32, pb, LEVELS[cases[c].level]);
    g_autoptr(MmSimulation) a = mm_test_sim_ok(GPT, "hardware/dgx-h100-2048.json", ca, 2);
    g_autoptr(MmSimulation) b = mm_test_sim_ok(GPT, "hardware/dgx-h100-2048.json", cb, 2);
    ck_assert(b->config->fp8_param_gather && !a->config->fp8_param_gather);
    ck_assert(b->config->fsdp_reshard == cases[c].reshard);
    const MmReason reason = fsdp ? MM_REASON_FSDP : MM_REASON_ZERO;
    const double ag_a = coll_bytes(a, MM_COLL_ALL_GATHER, reason, -1), ag_b = coll_bytes(b, MM_COLL_ALL_GATHER, reason, -1);
    ck_assert_double_gt(ag_a, 0);
    ck_assert_double_eq_tol(ag_b / ag_a, (weights + 2 * rest) / (2 * (weights + rest)), 1e-12);
    ck_assert_double_eq(coll_bytes(b, MM_COLL_REDUCE_SCATTER, reason, -1), coll_bytes(a, MM_COLL_REDUCE_SCATTER, reason, -1));
    /* FSDP's gathered buffers: (1 + prefetch) layers, or all 4 kept gathered, each now weights + 2 rest bytes */
    const double layers = cases[c].reshard ? (double)(1 + b->config->fsdp_prefetch) : 4.0;
    const double held = fsdp ? layers * (2 * (weights + rest) - (weights + 2 * rest)) : 0;
    ck_assert_msg(fabs((a->memory->total.comm_buffers - b->memory->total.comm_buffers) - held) < 1e-9 * weights,
                  "case %u: gathered buffers %.6g -> %.6g, want %.6g less", c, a->memory->total.comm_buffers,
                  b->memory->total.comm_buffers, held);
    /* the casts of each FP8 GEMM's weight operand, per element of the device's weight */
    const double ms = (double)b->scenario->micro_steps, amax = *cases[c].recipe == 't' ? 2 : 0;
    ck_assert_double_eq(ms, 2);
    const double fwd_w = fsdp ? (cases[c].reshard ? 3 / n : 3 / (n * ms)) + amax / (n * ms) : (3 + amax) / (n * ms);
    const double bwd_w = fsdp ? 2 + (cases[c].reshard ? 3 / n : 0) : 2 / ms;
    const double rec_w = cases[c].regather ? 3 / n : 0;
    guint gemms = 0;
    for (uint32_t li = 0; li < b->graph->n_layers; li++) {
      MmKernel k;
      weight_cast(b, li, MM_PART_FWD, FALSE, &k);
      if (k.kind != MM_KERNEL_GEMM) {
        MmPlacement p;
        mm_plan_place(b->scenario, b->graph, li, &p);
        MmPartWork fa, fb;
        mm_plan_part_work(a->scenario, a->graph, li, MM_PART_FWD, &p, 1.0, &fa, NULL);
        mm_plan_part_work(b->scenario, b->graph, li, MM_PART_FWD, &p, 1.0, &fb, NULL);
        ck_assert_double_eq(fb.cast_bytes, fa.cast_bytes);
        continue;
      }
      gemms++;
      /* without: the recipe's table (tensorwise 6 and 0, delayed 4 once per iteration and 0) */
      ck_assert_double_eq_tol(weight_cast(a, li, MM_PART_FWD, FALSE, NULL), amax > 0 ? 6.0 : 4.0 / ms, 1e-9);
      ck_assert_double_eq_tol(weight_cast(a, li, MM_PART_BWD_INPUT, FALSE, NULL), 0, 1e-9);
      ck_assert_double_eq_tol(weight_cast(b, li, MM_PART_FWD, FALSE, NULL), fwd_w, 1e-9);
      ck_assert_double_eq_tol(weight_cast(b, li, MM_PART_BWD_INPUT, FALSE, NULL), bwd_w, 1e-9);
      ck_assert_double_eq_tol(weight_cast(b, li, MM_PART_FWD, TRUE, NULL), rec_w, 1e-9);
    }
    ck_assert_uint_eq(gemms, 16); /* 4 layers x qkv, out, up, down */
    ck_assert_double_lt(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
  }
  /* the plan replays the recompute's own costs: with fsdp_regather_recompute every recomputed GEMM casts its
   * shard again, 3 / N bytes per weight element more in the recompute phase than without */
  double rec[2], want = 0;
  for (int r = 0; r < 2; r++) {
    g_autofree char *cr = config("pretrain", 32,
                                 r ? "\"micro_batch\":1,\"recompute\":\"full\",\"fsdp_regather_recompute\":true,"
                                     "\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"tensorwise\",\"fp8_param_gather\":true},"
                                   : "\"micro_batch\":1,\"recompute\":\"full\","
                                     "\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"tensorwise\",\"fp8_param_gather\":true},",
                                 LEVELS[0]);
    g_autoptr(MmSimulation) x = mm_test_sim_ok(GPT, "hardware/dgx-h100-2048.json", cr, 2);
    const MmPlanProgram *pr = mm_plan_class_program(x->plan, 0);
    rec[r] = 0;
    for (uint32_t i = 0; i < pr->n_ops; i++)
      if (pr->info[i].phase == MM_PHASE_RECOMPUTE && pr->info[i].what == MM_OP_COMPUTE) rec[r] += pr->info[i].bytes;
    if (r == 0) {
      for (uint32_t li = 0; li < x->graph->n_layers; li++) {
        MmKernel k;
        weight_cast(x, li, MM_PART_FWD, FALSE, &k);
        if (k.kind == MM_KERNEL_GEMM) want += 3 / n * k.k * k.n * k.batch * (double)x->scenario->micro_steps;
      }
    }
  }
  ck_assert_double_gt(want, 0);
  ck_assert_double_eq_tol(rec[1] - rec[0], want, 1e-9 * rec[1]);

  /* bf16 compute: no FP8 GEMM, nothing changes */
  g_autofree char *c0 = config("pretrain", 32, "", LEVELS[0]);
  g_autofree char *c1 = config("pretrain", 32, "\"precision\":{\"fp8_param_gather\":true},", LEVELS[0]);
  g_autoptr(MmSimulation) x0 = mm_test_sim_ok(GPT, "hardware/dgx-h100-2048.json", c0, 2);
  g_autoptr(MmSimulation) x1 = mm_test_sim_ok(GPT, "hardware/dgx-h100-2048.json", c1, 2);
  ck_assert_double_eq(x0->metrics.iteration_time_s, x1->metrics.iteration_time_s);
  ck_assert_double_eq(x0->memory->total.comm_buffers, x1->memory->total.comm_buffers);
}
END_TEST

/* Where fp8_param_gather gathers nothing in FP8 the recipe's casts stay: a frozen block under ZeRO
 * (only trained blocks are gathered), a tied head (its weight is the embedding table, gathered in
 * the dtype); a block both FSDP- and ZeRO-sharded rebuilds its FSDP shard in the dtype. */
START_TEST(test_fp8_param_gather_exceptions)
{
  static const char *const TW = "\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"tensorwise\"%s},";
  g_autofree char *pa = g_strdup_printf(TW, ""), *pb = g_strdup_printf(TW, ",\"fp8_param_gather\":true");
  /* frozen decoder, ZeRO-1: the decoder's casts unchanged, the trained head's not */
  g_autofree char *fa = g_strdup_printf("{\"name\":\"c\",\"task\":\"finetune\",\"global_batch\":16,\"micro_batch\":1,"
                                        "\"frozen\":[\"decoder\"],%s\"parallelism\":{\"default\":[{\"strategy\":\"ddp\","
                                        "\"degree\":\"all\",\"zero\":1}]}}", pa);
  g_autofree char *fb = g_strdup_printf("{\"name\":\"c\",\"task\":\"finetune\",\"global_batch\":16,\"micro_batch\":1,"
                                        "\"frozen\":[\"decoder\"],%s\"parallelism\":{\"default\":[{\"strategy\":\"ddp\","
                                        "\"degree\":\"all\",\"zero\":1}]}}", pb);
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/llama3-8b.json", "hardware/dgx-h100-2048.json", fa, 1);
  g_autoptr(MmSimulation) b = mm_test_sim_ok("models/llama3-8b.json", "hardware/dgx-h100-2048.json", fb, 1);
  guint decoder = 0, head = 0;
  for (uint32_t li = 0; li < b->graph->n_layers; li++) {
    MmKernel k;
    const double wb = weight_cast(b, li, MM_PART_FWD, FALSE, &k), wa = weight_cast(a, li, MM_PART_FWD, FALSE, NULL);
    if (k.kind != MM_KERNEL_GEMM) continue;
    const char *block = b->model->blocks[b->graph->layers[li].block].name;
    if (strcmp(block, "decoder") == 0) {
      decoder++;
      ck_assert_double_eq(wb, wa);
    } else {
      head++;
      ck_assert_double_lt(wb, wa);
    }
  }
  ck_assert(decoder > 0 && head == 1);
  /* a tied head (GPT 1.7B, FSDP): the logits GEMM's casts unchanged */
  g_autofree char *ta = config("pretrain", 16, pa, "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  g_autofree char *tb = config("pretrain", 16, pb, "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/megatron-gpt-1.7b.json", "hardware/dgx-h100-2048.json", ta, 1);
  g_autoptr(MmSimulation) y = mm_test_sim_ok("models/megatron-gpt-1.7b.json", "hardware/dgx-h100-2048.json", tb, 1);
  guint logits = 0;
  for (uint32_t li = 0; li < y->graph->n_layers; li++) {
    if (y->graph->layers[li].role != MM_ROLE_LOGITS) continue;
    logits++;
    for (int part = MM_PART_FWD; part <= MM_PART_BWD_INPUT; part++)
      ck_assert_double_eq(weight_cast(y, li, (MmKernelPart)part, FALSE, NULL), weight_cast(x, li, (MmKernelPart)part, FALSE, NULL));
  }
  ck_assert_uint_eq(logits, 1);
  /* FSDP 8 inside a node, ZeRO-1 across: the ZeRO gather rebuilds bf16 shards, FSDP's gathers are FP8 */
  static const char *const HY = "[{\"strategy\":\"fsdp\",\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":1}]";
  g_autofree char *ha = config("pretrain", 16, pa, HY), *hb = config("pretrain", 16, pb, HY);
  g_autoptr(MmSimulation) u = mm_test_sim_ok("models/llama3-8b.json", "hardware/dgx-h100-2048.json", ha, 2);
  g_autoptr(MmSimulation) v = mm_test_sim_ok("models/llama3-8b.json", "hardware/dgx-h100-2048.json", hb, 2);
  ck_assert_double_gt(coll_bytes(u, MM_COLL_ALL_GATHER, MM_REASON_ZERO, -1), 0);
  ck_assert_double_eq(coll_bytes(v, MM_COLL_ALL_GATHER, MM_REASON_ZERO, -1), coll_bytes(u, MM_COLL_ALL_GATHER, MM_REASON_ZERO, -1));
  ck_assert_double_lt(coll_bytes(v, MM_COLL_ALL_GATHER, MM_REASON_FSDP, -1), 0.6 * coll_bytes(u, MM_COLL_ALL_GATHER, MM_REASON_FSDP, -1));
  /* per_tensor_list shapes FSDP's gathers only: without FSDP, ZeRO-1's parameter all-gathers still go FP8 */
  static const char *const Z1 = "[{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":1}]";
  g_autofree char *la = g_strdup_printf("\"fsdp_collectives\":\"per_tensor_list\",%s", pa);
  g_autofree char *lb = g_strdup_printf("\"fsdp_collectives\":\"per_tensor_list\",%s", pb);
  g_autofree char *za = config("pretrain", 16, la, Z1), *zb = config("pretrain", 16, lb, Z1);
  g_autoptr(MmSimulation) za_sim = mm_test_sim_ok("models/llama3-8b.json", "hardware/dgx-h100-2048.json", za, 2);
  g_autoptr(MmSimulation) zb_sim = mm_test_sim_ok("models/llama3-8b.json", "hardware/dgx-h100-2048.json", zb, 2);
  ck_assert_double_gt(coll_bytes(za_sim, MM_COLL_ALL_GATHER, MM_REASON_ZERO, -1), 0);
  ck_assert_double_lt(coll_bytes(zb_sim, MM_COLL_ALL_GATHER, MM_REASON_ZERO, -1),
                      0.6 * coll_bytes(za_sim, MM_COLL_ALL_GATHER, MM_REASON_ZERO, -1));
}
END_TEST

/* ViT-25B's 257 tokens: TP 8 runs (it splits heads and the FFN), TP 8 with sequence parallelism does
 * not (check_config: "sp does not divide seq_len") */
START_TEST(test_tp_without_sp_odd_sequence)
{
  g_autofree char *cfg = config("pretrain", 64, "", "[{\"strategy\":\"tp\",\"degree\":8},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/vit-25b.json", "hardware/aws-p4de-a100-80gb.json", cfg, 2);
  ck_assert_double_gt(x->metrics.iteration_time_s, 0);
}
END_TEST

START_TEST(test_fsdp_per_tensor_list)
{
  static const char *const GPT =
    "{\"name\":\"gpt\",\"seq_len\":2048,\"dtype\":\"fp16\",\"blocks\":[{\"kind\":\"transformer\",\"count\":4,"
    "\"hidden\":2048,\"heads\":16,\"ffn\":8192,\"ffn_kind\":\"gelu\",\"norm\":\"layernorm\",\"bias\":true}]}";
  const double h = 2048;
  const double tensors[] = {h, h, 3 * h * h, 3 * h, h * h, h, h, h, 4 * h * h, 4 * h, 4 * h * h, h}; /* elements */
  const int64_t nodes[] = {2, 8, 8};
  const char *const persist[] = {"", "", "\"fsdp_persistence_threshold\":0,"};
  for (guint k = 0; k < G_N_ELEMENTS(nodes); k++) {
    const int64_t n = nodes[k] * 8;
    const double threshold = *persist[k] ? 0 : 1e5;
    g_autofree char *flat = config("pretrain", (int)n, "", "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
    g_autofree char *extra = g_strdup_printf("\"fsdp_collectives\":\"per_tensor_list\",%s", persist[k]);
    g_autofree char *list = config("pretrain", (int)n, extra, "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
    g_autoptr(MmSimulation) a = mm_test_sim_ok(GPT, "hardware/dgx-a100-2048.json", flat, nodes[k]);
    g_autoptr(MmSimulation) b = mm_test_sim_ok(GPT, "hardware/dgx-a100-2048.json", list, nodes[k]);
    double all = 0, kept = 0; /* elements of a layer; those held whole */
    for (guint t = 0; t < G_N_ELEMENTS(tensors); t++) {
      all += tensors[t];
      if (tensors[t] < threshold) kept += tensors[t];
    }
    for (int kind = MM_COLL_ALL_GATHER; kind <= MM_COLL_REDUCE_SCATTER; kind++) {
      ck_assert_uint_gt(count_ops(a, (MmCollKind)kind, MM_REASON_FSDP, -1), 0);
      ck_assert_uint_eq(count_ops(b, (MmCollKind)kind, MM_REASON_FSDP, -1), count_ops(a, (MmCollKind)kind, MM_REASON_FSDP, -1));
      const double bytes = coll_bytes(a, (MmCollKind)kind, MM_REASON_FSDP, -1) * (kind == MM_COLL_ALL_GATHER ? 1 - kept / all : 1);
      ck_assert_double_eq_tol(coll_bytes(b, (MmCollKind)kind, MM_REASON_FSDP, -1), bytes, 1e-9 * bytes);
    }
    /* the persistent tensors held whole by every device */
    const double held = b->memory->total.weights - a->memory->total.weights;
    ck_assert_double_eq_tol(held, 4 * kept * 2 * (1 - 1.0 / (double)n), 1e-6 * all);
    /* every layer's gather: the tensors' own calls, from the list above */
    const MmHardware *hw = b->scenario->hw;
    MmLinks links;
    mm_comm_links(hw, &links);
    const MmPlanProgram *pa = mm_plan_class_program(a->plan, 0), *pb = mm_plan_class_program(b->plan, 0);
    guint checked = 0;
    for (uint32_t i = 0, j = 0; i < pb->n_ops; i++) {
      const MmOpInfo *in = &pb->info[i];
      if (in->what != MM_OP_COLLECTIVE || in->reason != MM_REASON_FSDP) continue;
      while (j < pa->n_ops && (pa->info[j].what != MM_OP_COLLECTIVE || pa->info[j].reason != MM_REASON_FSDP)) j++;
      ck_assert_uint_lt(j, pa->n_ops);
      const MmOpInfo *fl = &pa->info[j++];
      ck_assert_int_eq(fl->coll, in->coll);
      const gboolean ag = in->coll == MM_COLL_ALL_GATHER;
      ck_assert_double_eq_tol(in->bytes, 2 * (ag ? all - kept : all), 1e-9 * in->bytes);
      double lat = 0, calls = 0;
      for (guint t = 0; t < G_N_ELEMENTS(tensors); t++) {
        if (ag && tensors[t] < threshold) continue;
        MmCollective c = {.kind = in->coll, .bytes = 2 * tensors[t], .degree = n, .stride = 1, .skew = 1.0};
        MmCommCost o;
        ck_assert(mm_comm_cost(hw, &links, &c, &o));
        lat += o.latency_s;
        calls++;
      }
      ck_assert_double_eq(calls, ag && threshold > 0 ? 4 : 12);
      const double copies = calls * (double)n * hw->device.launch_overhead_s +
                            2.0 * in->bytes / (hw->device.hbm_bw_Bps * hw->device.util_hbm.value);
      ck_assert_double_eq_tol(in->fixed_s, lat + copies, 1e-9 * in->fixed_s);
      MmCollective w = {.kind = in->coll, .bytes = in->bytes, .degree = n, .stride = 1, .skew = 1.0};
      MmCommCost o;
      ck_assert(mm_comm_cost(hw, &links, &w, &o));
      ck_assert_double_eq_tol(in->time_s - in->fixed_s, o.time_s - o.latency_s, 1e-9 * o.time_s);
      checked++;
    }
    ck_assert_uint_ge(checked, 3 * 4); /* every layer: a forward and a backward gather, a reduce-scatter */
    ck_assert_double_gt(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
    /* describe says how FSDP's collectives are called */
    g_autoptr(cJSON) doc = mm_report_describe_json(b->graph, NULL, b->scenario, b->memory);
    g_autofree char *text = cJSON_PrintUnformatted(doc);
    ck_assert_msg(strstr(text, *persist[k] ? "\"collectives\":\"per_tensor_list\",\"persistence_threshold_elements\":0,"
                                           : "\"collectives\":\"per_tensor_list\",\"persistence_threshold_elements\":100000,"),
                  "%s", text);
  }
  /* a threshold above every tensor: nothing gathered, the weights held whole, gradients still
   * reduce-scattered */
  g_autofree char *flat = config("pretrain", 16, "", "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  g_autofree char *all = config("pretrain", 16, "\"fsdp_collectives\":\"per_tensor_list\",\"fsdp_persistence_threshold\":1e12,",
                                "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok(GPT, "hardware/dgx-a100-2048.json", flat, 2);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(GPT, "hardware/dgx-a100-2048.json", all, 2);
  ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_GATHER, MM_REASON_FSDP, -1), 0);
  ck_assert_uint_eq(count_ops(b, MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, -1),
                    count_ops(a, MM_COLL_REDUCE_SCATTER, MM_REASON_FSDP, -1));
  ck_assert_double_eq_tol(b->memory->total.weights, 16 * a->memory->total.weights, 1e-9 * b->memory->total.weights);
}
END_TEST

/* Experts under expert parallelism: a device holds experts / ep whole experts, each its own tensor:
 * Mixtral's 8 experts over EP 8 are one tensor per expert layer (as a dense FFN's), not 8 of 1/8. */
START_TEST(test_fsdp_per_tensor_list_experts)
{
  const char *const levels = "{\"transformer\":[{\"strategy\":\"ep\",\"degree\":8},{\"strategy\":\"fsdp\",\"degree\":\"all\"}],"
                             "\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}";
  g_autofree char *c = g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,"
                                       "\"fsdp_collectives\":\"per_tensor_list\",\"parallelism\":%s}", levels);
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", c, 2);
  guint experts = 0;
  for (uint32_t li = 0; li < x->graph->n_layers; li++) {
    const MmLayer *l = &x->graph->layers[li];
    if (!l->expert || l->cost.params == 0) continue;
    MmPlacement p;
    mm_plan_place(x->scenario, x->graph, li, &p);
    double elems[MM__LAYER_TENSOR_KINDS];
    uint32_t count[MM__LAYER_TENSOR_KINDS];
    const guint n = mm__layer_tensors(x->scenario, x->graph, li, p.param_frac, elems, count);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(count[0], 1); /* 8 experts / EP 8 */
    ck_assert_double_eq_tol(elems[0], (double)l->cost.params / 8, 1e-9 * elems[0]);
    experts++;
  }
  ck_assert_uint_gt(experts, 0);
}
END_TEST

/* fsdp_regather_recompute (DeepSpeed ZeRO-3's hooks under full recompute): each layer's backward
 * gathers twice, once for its recompute, which frees the parameters after it, and once for the
 * backward itself: 3 gathers per layer and micro-batch instead of 2, the second after the
 * recompute's compute and before the backward's. Without full recompute it changes nothing. */
START_TEST(test_fsdp_regather_recompute)
{
  static const char *const GPT =
    "{\"name\":\"gpt\",\"seq_len\":2048,\"dtype\":\"fp16\",\"blocks\":[{\"kind\":\"transformer\",\"count\":4,"
    "\"hidden\":2048,\"heads\":16,\"ffn\":8192,\"ffn_kind\":\"gelu\",\"norm\":\"layernorm\",\"bias\":true}]}";
  const char *const fsdp = "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]";
  for (int full = 0; full < 2; full++) {
    const char *rec = full ? "\"recompute\":\"full\",\"fsdp_prefetch\":0," : "\"recompute\":\"selective\",\"fsdp_prefetch\":0,";
    g_autofree char *once = config("pretrain", 32, rec, fsdp);
    g_autofree char *extra = g_strdup_printf("%s\"fsdp_regather_recompute\":true,", rec);
    g_autofree char *twice = config("pretrain", 32, extra, fsdp);
    g_autoptr(MmSimulation) a = mm_test_sim_ok(GPT, "hardware/dgx-a100-2048.json", once, 2);
    g_autoptr(MmSimulation) b = mm_test_sim_ok(GPT, "hardware/dgx-a100-2048.json", twice, 2);
    const guint fa = count_ops(a, MM_COLL_ALL_GATHER, MM_REASON_FSDP, MM_PHASE_FWD);
    const guint ba = count_ops(a, MM_COLL_ALL_GATHER, MM_REASON_FSDP, MM_PHASE_BWD);
    ck_assert_uint_eq(fa, 4 * (guint)a->scenario->micro_steps);
    ck_assert_uint_eq(ba, fa);
    ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_GATHER, MM_REASON_FSDP, MM_PHASE_FWD), fa);
    ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_GATHER, MM_REASON_FSDP, MM_PHASE_BWD), full ? 2 * ba : ba);
    if (!full) {
      ck_assert_double_eq(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
      continue;
    }
    ck_assert_double_gt(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
    g_autoptr(cJSON) doc = mm_report_describe_json(b->graph, NULL, b->scenario, b->memory);
    g_autofree char *text = cJSON_PrintUnformatted(doc);
    ck_assert_msg(strstr(text, "\"regather_recompute\":true}") != NULL, "%s", text);
    /* in program order, per unit of the last micro-batch's backward: gather, recompute, gather, backward */
    const MmPlanProgram *p = mm_plan_class_program(b->plan, 0);
    const uint32_t last = (uint32_t)b->scenario->micro_steps - 1;
    for (uint32_t u = 0; u < b->graph->n_units; u++) {
      if (b->graph->units[u].cost.params == 0) continue;
      int seq[4] = {-1, -1, -1, -1}, n = 0; /* 0: gather, 1: recompute, 2: backward */
      for (uint32_t i = 0; i < p->n_ops && n < 4; i++) {
        const MmOpInfo *in = &p->info[i];
        if (in->micro != last || in->unit != u) continue;
        int what = -1;
        if (in->what == MM_OP_COLLECTIVE && in->reason == MM_REASON_FSDP && in->coll == MM_COLL_ALL_GATHER &&
            in->phase == MM_PHASE_BWD)
          what = 0;
        else if (in->what == MM_OP_COMPUTE && in->phase == MM_PHASE_RECOMPUTE)
          what = 1;
        else if (in->what == MM_OP_COMPUTE && in->phase == MM_PHASE_BWD)
          what = 2;
        if (what >= 0 && (n == 0 || seq[n - 1] != what)) seq[n++] = what;
      }
      ck_assert_msg(n == 4 && seq[0] == 0 && seq[1] == 1 && seq[2] == 0 && seq[3] == 2, "unit %u: %d %d %d %d", u,
                    seq[0], seq[1], seq[2], seq[3]);
    }
  }
}
END_TEST

/* ---- ZeRO stages and selective recompute ------------------------------------- */

START_TEST(test_zero_stages)
{
  g_autofree char *z0 = config("pretrain", 64, "", "[{\"strategy\":\"ddp\",\"degree\":\"all\"}]");
  g_autofree char *z1 = config("pretrain", 64, "", "[{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":1}]");
  g_autofree char *z2 = config("pretrain", 64, "", "[{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":2}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/megatron-gpt-1.7b.json", "hardware/dgx-a100-2048.json", z0, 2);
  g_autoptr(MmSimulation) b = mm_test_sim_ok("models/megatron-gpt-1.7b.json", "hardware/dgx-a100-2048.json", z1, 2);
  g_autoptr(MmSimulation) c = mm_test_sim_ok("models/megatron-gpt-1.7b.json", "hardware/dgx-a100-2048.json", z2, 2);
  /* optimizer states over 16 ranks (stage 1), gradients too (stage 2) */
  ck_assert_double_eq_tol(b->memory->total.optimizer, a->memory->total.optimizer / 16, 1);
  ck_assert_double_eq_tol(b->memory->total.gradients, a->memory->total.gradients, 1);
  ck_assert_double_eq_tol(c->memory->total.gradients, a->memory->total.gradients / 16, 1);
  ck_assert_double_eq(c->memory->total.weights, a->memory->total.weights);
  /* stage 1 all-reduces gradients, stage 2 reduce-scatters them; both gather the updated weights */
  ck_assert_uint_eq(count_ops(a, MM_COLL_ALL_GATHER, MM_REASON_ZERO, -1), 0);
  ck_assert_uint_gt(count_ops(b, MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1), 0);
  ck_assert_uint_gt(count_ops(b, MM_COLL_ALL_GATHER, MM_REASON_ZERO, -1), 0);
  ck_assert_uint_eq(count_ops(c, MM_COLL_ALL_REDUCE, MM_REASON_DDP, -1), 0);
  ck_assert_uint_gt(count_ops(c, MM_COLL_REDUCE_SCATTER, MM_REASON_DDP, -1), 0);
  /* the optimizer step updates 1/16 of the parameters */
  ck_assert_double_lt(b->metrics.compute_by_phase_s[MM_PHASE_OPTIMIZER],
                      a->metrics.compute_by_phase_s[MM_PHASE_OPTIMIZER] / 8);
}
END_TEST

/* Bytes and count of the gradient-accumulation passes in the critical program. */
static double accum_bytes(const Sim *x, guint *n)
{
  const MmPlanProgram *p = mm_plan_class_program(x->plan, x->metrics.critical_class);
  double b = 0;
  *n = 0;
  for (uint32_t i = 0; i < p->n_ops; i++)
    if (p->info[i].what == MM_OP_GRAD_ACCUM) {
      b += p->info[i].bytes;
      (*n)++;
    }
  return b;
}

START_TEST(test_grad_accumulation_separate)
{
  /* TP 2 x DDP 8 over 16 A100s, 64 samples of micro-batch 1: 8 micro-steps */
  static const char *const M = "models/megatron-gpt-1.7b.json", *const H = "hardware/dgx-a100-2048.json";
  static const char *const TP_DDP = "[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"ddp\",\"degree\":\"all\"}]";
  g_autofree char *fused = config("pretrain", 64, "\"micro_batch\":1,", TP_DDP);
  g_autofree char *sep = config("pretrain", 64, "\"micro_batch\":1,\"grad_accumulation\":\"separate\",", TP_DDP);
  g_autofree char *sep32 = config("pretrain", 64,
                                  "\"micro_batch\":1,\"grad_accumulation\":\"separate\",\"precision\":{\"grads\":\"fp32\"},",
                                  TP_DDP);
  g_autofree char *fsdp = config("pretrain", 64, "\"micro_batch\":1,\"grad_accumulation\":\"separate\",",
                                 "[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok(M, H, fused, 2);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(M, H, sep, 2);
  g_autoptr(MmSimulation) c = mm_test_sim_ok(M, H, sep32, 2);
  g_autoptr(MmSimulation) f = mm_test_sim_ok(M, H, fsdp, 2);
  ck_assert_int_eq(b->scenario->micro_steps, 8);
  guint na, nb, nc, nf;
  ck_assert_double_eq(accum_bytes(a, &na), 0);
  ck_assert_uint_eq(na, 0);
  /* every micro-batch reads its fp16 gradients and reads and writes the fp16 buffer: 3 x the
   * weights' bytes (the device's fp16 parameters: TP-sharded, replicated over DDP), per micro-step */
  const double w = b->memory->total.weights;
  ck_assert_double_eq_tol(accum_bytes(b, &nb), 8 * 3 * w, 1e-9 * w);
  ck_assert_uint_eq(nb % 8, 0);
  ck_assert_uint_gt(nb, 8 * 24); /* one per unit with parameters: at least the 24 layers */
  /* an fp32 buffer: 2 + 2 x 4 bytes per 2-byte parameter */
  ck_assert_double_eq_tol(accum_bytes(c, &nc), 8 * 5 * w, 1e-9 * w);
  ck_assert_uint_eq(nc, nb);
  /* FSDP reduce-scatters every micro-step: nothing accumulated locally */
  ck_assert_double_eq(accum_bytes(f, &nf), 0);
  /* the passes are backward compute on the critical path: the iteration grows by at least the fp16
   * passes' time and no more than the backward compute did */
  const double d_bwd = b->metrics.compute_by_phase_s[MM_PHASE_BWD] - a->metrics.compute_by_phase_s[MM_PHASE_BWD];
  ck_assert_double_gt(d_bwd, 0);
  ck_assert_double_eq_tol(b->metrics.compute_s - a->metrics.compute_s, d_bwd, 1e-9);
  ck_assert_double_gt(b->metrics.iteration_time_s, a->metrics.iteration_time_s + 0.5 * d_bwd);
  ck_assert_double_le(b->metrics.iteration_time_s, a->metrics.iteration_time_s + d_bwd + 1e-9);
  ck_assert_double_gt(c->metrics.iteration_time_s, b->metrics.iteration_time_s);
}
END_TEST

/* Interference in the lowering: compute kernels are the slowed ops, collectives (not pipeline or
 * ring point-to-point transfers) on the communication streams the interfering ones; the run's
 * interference is what the slowed kernels took beyond their own time, and the rest of the
 * compute is exactly their own time. */
START_TEST(test_interference_in_lowering)
{
  static const char *const M = "models/megatron-gpt-1.7b.json", *const H = "hardware/dgx-a100-2048.json";
  g_autofree char *fsdp = config("pretrain", 64, "\"micro_batch\":2,", "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  g_autofree char *ddp = config("pretrain", 64, "\"micro_batch\":2,\"ddp_overlap\":false,", "[{\"strategy\":\"ddp\",\"degree\":\"all\"}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok(M, H, fsdp, 2);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(M, H, ddp, 2);
  const MmPlanProgram *p = mm_plan_class_program(a->plan, a->metrics.critical_class);
  g_autofree MmTime *t0 = g_new(MmTime, 2 * (gsize)p->n_ops);
  MmTime *t1 = t0 + p->n_ops;
  mm_engine_class_times(a->engine, a->metrics.critical_class, t0, t1);
  double extra = 0, own = 0;
  guint slowed = 0, interfering = 0;
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmEngineOp *o = &p->ops[i];
    const MmOpInfo *in = &p->info[i];
    if (o->cil == MM_CIL_SLOWED) {
      slowed++;
      ck_assert_uint_eq(o->stream, MM_STREAM_COMPUTE);
      ck_assert_uint_ge(t1[i] - t0[i], p->dur[i]);
      if (in->what != MM_OP_LOOKUP) {
        extra += mm_time_to_s(t1[i] - t0[i] - p->dur[i]);
        own += mm_time_to_s(p->dur[i]);
      }
    } else if (o->cil == MM_CIL_INTERFERES) {
      interfering++;
      ck_assert(o->stream == MM_STREAM_COMM_INTRA || o->stream == MM_STREAM_COMM_INTER);
      ck_assert(in->what == MM_OP_COLLECTIVE && in->coll != MM_COLL_P2P && in->coll != MM_COLL_PERMUTE);
    } else {
      ck_assert(o->stream != MM_STREAM_COMPUTE || in->what == MM_OP_LOOKUP || in->fused || in->overlap);
      ck_assert_uint_eq(t1[i] - t0[i] >= p->dur[i], TRUE);
    }
  }
  ck_assert_uint_gt(slowed, 0);
  ck_assert_uint_gt(interfering, 0);
  /* FSDP's gathers run beside the layers before them: their kernels slowed by up to 18.9% */
  ck_assert_double_gt(a->metrics.interference_compute_s, 0);
  ck_assert_double_eq_tol(a->metrics.interference_compute_s, extra, 1e-9 * a->metrics.iteration_time_s);
  ck_assert_double_eq_tol(a->metrics.compute_s - a->metrics.interference_compute_s, own, 1e-9 * a->metrics.compute_s);
  ck_assert_double_le(extra, 0.189 * own * (1 + 1e-9));
  /* DDP reducing after the backward: no kernel beside a collective */
  ck_assert_double_eq(b->metrics.interference_compute_s, 0);
}
END_TEST

/* TP over an MLP block's row-parallel layers: an AllReduce of each layer's output in forward and,
 * in backward, an AllGather of each input gradient the block needs (all but the bottom MLP's
 * first layer, whose input is the dense features), as large as the layer's input. */
START_TEST(test_tp_mlp_backward_gathers)
{
  g_autofree char *c = g_strdup("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":65536,\"parallelism\":{"
                                "\"mlp\":[{\"strategy\":\"tp\",\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\"}],"
                                "\"embedding_bag\":[{\"strategy\":\"mp\",\"degree\":\"all\",\"sharding\":\"table\"}]}}");
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/dlrm-a.json", "hardware/zionex-a100-128.json", c, 0);
  ck_assert_int_eq(x->scenario->micro_steps, 1);
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD), 20);
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_GATHER, MM_REASON_TP, MM_PHASE_BWD), 19);
  ck_assert_uint_eq(count_ops(x, MM_COLL_ALL_GATHER, MM_REASON_TP, MM_PHASE_FWD), 0);
  /* each gathers the input of its layer: 512 samples per device x the layer's input width */
  const MmGraph *g = x->graph;
  double want = 0;
  for (guint u = 0; u < g->n_units; u++) {
    const MmUnit *un = &g->units[u];
    const MmBlock *b = &x->scenario->model->blocks[un->block];
    if (b->kind != MM_BLOCK_MLP || (un->index == 0 && b->n_inputs == 0)) continue;
    const MmLayer *l = mm_test_layer(g, u, MM_ROLE_MLP_FC);
    want += x->scenario->blocks[un->block].samples_per_micro * (double)l->cost.act_bytes;
  }
  ck_assert_double_eq_tol(coll_bytes(x, MM_COLL_ALL_GATHER, MM_REASON_TP, MM_PHASE_BWD), want, 1e-9 * want);
}
END_TEST

START_TEST(test_selective_recompute)
{
  /* eager attention keeps s x s scores: selective recompute drops them and recomputes the cores */
  g_autofree char *none = config("pretrain", 8, "\"recompute\":\"none\",", "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autofree char *sel = config("pretrain", 8, "\"recompute\":\"selective\",", "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autofree char *full = config("pretrain", 8, "\"recompute\":\"full\",", "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/megatron-gpt-7.5b.json", "hardware/dgx-a100-2048.json", none, 1);
  g_autoptr(MmSimulation) b = mm_test_sim_ok("models/megatron-gpt-7.5b.json", "hardware/dgx-a100-2048.json", sel, 1);
  g_autoptr(MmSimulation) c = mm_test_sim_ok("models/megatron-gpt-7.5b.json", "hardware/dgx-a100-2048.json", full, 1);
  ck_assert_double_lt(b->memory->total.activations, a->memory->total.activations);
  ck_assert_double_lt(c->memory->total.activations, b->memory->total.activations);
  ck_assert_double_eq(a->metrics.compute_by_phase_s[MM_PHASE_RECOMPUTE], 0);
  ck_assert_double_gt(b->metrics.compute_by_phase_s[MM_PHASE_RECOMPUTE], 0);
  ck_assert_double_lt(b->metrics.compute_by_phase_s[MM_PHASE_RECOMPUTE],
                      0.5 * c->metrics.compute_by_phase_s[MM_PHASE_RECOMPUTE]);
  /* only attention cores are recomputed, and without collectives */
  const MmPlanProgram *p = &b->plan->programs[0];
  for (uint32_t i = 0; i < p->n_ops; i++) {
    if (p->info[i].phase != MM_PHASE_RECOMPUTE) continue;
    ck_assert_int_eq(p->info[i].what, MM_OP_COMPUTE);
    ck_assert_int_eq(b->graph->layers[p->info[i].first_layer].role, MM_ROLE_ATTN_CORE);
  }
  ck_assert_double_lt(a->metrics.iteration_time_s, b->metrics.iteration_time_s);
  ck_assert_double_lt(b->metrics.iteration_time_s, c->metrics.iteration_time_s);
}
END_TEST

/* ---- parallel folding ("experts": the expert layers' own layout) ---------------- */

/* The program folding tests look at: pipeline stage 1's (its layers are MoE layers), else the
 * critical one. */
static const MmPlanProgram *fold_program(const Sim *x)
{
  for (uint32_t i = 0; i < x->plan->n_programs; i++)
    if (x->plan->scenario->pp > 1 && x->plan->programs[i].stage == 1) return &x->plan->programs[i];
  return mm_plan_class_program(x->plan, x->metrics.critical_class);
}

/* Bytes of the collectives of @kind and @reason over groups of @degree and @stride in
 * fold_program() (phase < 0: any); *@n gets their count. */
static double group_bytes(const Sim *x, MmCollKind kind, MmReason reason, int phase, uint32_t degree, uint32_t stride,
                          guint *n)
{
  const MmPlanProgram *p = fold_program(x);
  double b = 0;
  *n = 0;
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmOpInfo *in = &p->info[i];
    if (in->what != MM_OP_COLLECTIVE || in->coll != kind || in->reason != reason || (phase >= 0 && in->phase != phase))
      continue;
    if (p->ops[i].degree != degree || p->ops[i].stride != stride) continue;
    b += in->bytes;
    (*n)++;
  }
  return b;
}

/* Collectives of @kind and @reason whose group is not (@degree, @stride). */
static guint other_groups(const Sim *x, MmCollKind kind, MmReason reason, uint32_t degree, uint32_t stride)
{
  const MmPlanProgram *p = fold_program(x);
  guint n = 0;
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmOpInfo *in = &p->info[i];
    if (in->what == MM_OP_COLLECTIVE && in->coll == kind && in->reason == reason &&
        (p->ops[i].degree != degree || p->ops[i].stride != stride))
      n++;
  }
  return n;
}

START_TEST(test_folding_deepseek_v3_literal)
{
  /* DeepSeek-V3 as its report states it (Sec. 3.2): 16 pipeline stages, attention data parallel
   * with ZeRO-1 over the 128 GPUs of a stage (no TP), experts over 64 of them. The folded form
   * must load, run, and answer as the factored form [ep 64, ddp all] of
   * configs/deepseek-v3-pretrain.json, which lays the same groups out */
  static const char *const literal =
    "{\"name\":\"ds\",\"task\":\"pretrain\",\"global_batch\":15360,\"micro_batch\":1,\"recompute\":\"full\","
    "\"moe_dispatch\":\"per_node\",\"moe_dispatch_fp8\":true,"
    "\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"blockwise\",\"grads\":\"fp32\"},"
    "\"pipeline\":{\"degree\":16,\"schedule\":\"1f1b\",\"overlap_p2p\":true},\"experts\":{\"ep\":64},"
    "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":1}]}}";
  g_autoptr(MmSimulation) f = mm_test_sim_ok("models/deepseek-v3.json", "hardware/h800-2048.json", literal, 0);
  g_autoptr(MmSimulation) o =
    mm_test_sim_ok("models/deepseek-v3.json", "hardware/h800-2048.json", "configs/deepseek-v3-pretrain.json", 0);
  ck_assert_double_eq(f->metrics.iteration_time_s, o->metrics.iteration_time_s);
  ck_assert_double_eq(f->memory->per_device_bytes, o->memory->per_device_bytes);
  /* 128 GPUs per stage: the expert group is 64 consecutive GPUs (8 nodes), EDP = 128 / 64 = 2 at
   * stride 64; attention gradients over all 128 */
  guint n = 0;
  group_bytes(f, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, MM_PHASE_FWD, 64, 1, &n);
  ck_assert_uint_gt(n, 0);
  ck_assert_uint_eq(other_groups(f, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, 64, 1), 0);
  group_bytes(f, MM_COLL_ALL_REDUCE, MM_REASON_DDP, MM_PHASE_BWD, 2, 64, &n);
  ck_assert_uint_gt(n, 0);
  group_bytes(f, MM_COLL_ALL_REDUCE, MM_REASON_DDP, MM_PHASE_BWD, 128, 1, &n);
  ck_assert_uint_gt(n, 0);
  /* a dispatch sends each of the 4096 tokens of a sample to 8 experts in FP8, 4096 x 7168 x (1 + 4/128) B
   * x 8, the combine brings them back in bf16 (2 B): forward All2Alls average the two */
  group_bytes(f, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, MM_PHASE_FWD, 64, 1, &n);
  ck_assert_double_eq_tol(group_bytes(f, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, MM_PHASE_FWD, 64, 1, &n) / n,
                          4096.0 * 7168 * 8 * (2 + 1.03125) / 2, 1);
}
END_TEST

/* Mixtral-8x7B on 2 nodes of 8 H100: attention data parallel over all 16 GPUs; experts
 * {ep 4, etp 2}, so EDP = 16 / 8 = 2. */
static char *folded_config(const char *experts, int zero)
{
  return g_strdup_printf("{\"name\":\"fold\",\"task\":\"pretrain\",\"global_batch\":16,\"micro_batch\":1,"
                         "\"experts\":%s,\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\","
                         "\"zero\":%d}]}}",
                         experts, zero);
}

START_TEST(test_folding_expert_groups)
{
  g_autofree char *c = folded_config("{\"ep\":4,\"etp\":2}", 1);
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", c, 2);
  /* Megatron-Core's expert ranks: ETP innermost (GPUs {0,1}: stride 1), then EP (GPUs {0,2,4,6}:
   * degree 4, stride 2), then EDP (GPUs {0,8}: degree 2, stride 8, across the two nodes) */
  const guint layers = 32;
  guint n = 0;
  const double token = 4096.0 * 4096 * 2; /* one sample's tokens, bf16 */
  /* dispatch + combine per layer over EP, each sending every token to top_k 2 experts */
  double a2a = group_bytes(x, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, MM_PHASE_FWD, 4, 2, &n);
  ck_assert_uint_eq(n, 2 * layers);
  ck_assert_double_eq_tol(a2a / n, token * 2, 1);
  ck_assert_uint_eq(other_groups(x, MM_COLL_ALL_TO_ALL, MM_REASON_MOE, 4, 2), 0);
  /* ETP: the EP rank's received tokens all-gathered over its ETP pair before the up-projection
   * (the full buffer: 2 x the dispatch) and reduce-scattered after the down-projection */
  double ag = group_bytes(x, MM_COLL_ALL_GATHER, MM_REASON_TP, MM_PHASE_FWD, 2, 1, &n);
  ck_assert_uint_eq(n, layers);
  ck_assert_double_eq_tol(ag / n, 2 * token * 2, 1);
  double rs = group_bytes(x, MM_COLL_REDUCE_SCATTER, MM_REASON_TP, MM_PHASE_FWD, 2, 1, &n);
  ck_assert_uint_eq(n, layers);
  ck_assert_double_eq_tol(rs / n, 2 * token * 2, 1);
  ck_assert_uint_eq(other_groups(x, MM_COLL_ALL_GATHER, MM_REASON_TP, 2, 1), 0);
  ck_assert_uint_eq(other_groups(x, MM_COLL_REDUCE_SCATTER, MM_REASON_TP, 2, 1), 0);

  /* memory: a GPU holds 8 / 4 = 2 experts, half of each (ETP 2): 1/8 of the expert weights; the
   * attention and the rest whole. ZeRO-1 shards the dense optimizer states over 16 and the
   * expert ones over EDP 2 (adam: 8 B of fp32 states + a 4 B fp32 master copy per parameter) */
  const MmMemoryParts *dec = &x->memory->blocks[1];
  const double experts = 32.0 * 8 * 3 * 4096.0 * 14336.0;
  const double dense = 32.0 * (4096.0 * 6144 + 4096.0 * 4096 + 4096.0 * 8 + 2 * 4096);
  ck_assert_double_eq_tol(dec->weights, (experts / 8 + dense) * 2, 1e-6 * dec->weights);
  ck_assert_double_eq_tol(dec->optimizer, dense * 12 / 16 + experts / 8 * 12 / 2, 1e-6 * dec->optimizer);
}
END_TEST

START_TEST(test_folding_expert_data_parallel_gradients)
{
  /* the expert gradients of a GPU (1/8 of the expert parameters, bf16) are averaged over its EDP
   * pair (degree 2, stride 8): all-reduced, or reduce-scattered under ZeRO-2; the dense ones over
   * all 16 GPUs */
  const double experts = 32.0 * 8 * 3 * 4096.0 * 14336.0;
  g_autofree char *z1 = folded_config("{\"ep\":4,\"etp\":2}", 1);
  g_autofree char *z2 = folded_config("{\"ep\":4,\"etp\":2}", 2);
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", z1, 2);
  g_autoptr(MmSimulation) b = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", z2, 2);
  guint n = 0;
  ck_assert_double_eq_tol(group_bytes(a, MM_COLL_ALL_REDUCE, MM_REASON_DDP, MM_PHASE_BWD, 2, 8, &n), experts / 8 * 2,
                          1e-9 * experts);
  ck_assert_uint_gt(n, 0);
  ck_assert_double_eq_tol(group_bytes(b, MM_COLL_REDUCE_SCATTER, MM_REASON_DDP, MM_PHASE_BWD, 2, 8, &n),
                          experts / 8 * 2, 1e-9 * experts);
  ck_assert_uint_gt(n, 0);
  group_bytes(a, MM_COLL_ALL_REDUCE, MM_REASON_DDP, MM_PHASE_BWD, 16, 1, &n);
  ck_assert_uint_gt(n, 0);
  /* ZeRO-2: the expert gradients held are 1/2 (EDP) of the GPU's expert share */
  const MmMemoryParts *ga = &a->memory->blocks[1], *gb = &b->memory->blocks[1];
  const double dense_grads = ga->gradients - experts / 8 * 2;
  ck_assert_double_eq_tol(gb->gradients, dense_grads / 16 + experts / 8 * 2 / 2, 1e-6 * gb->gradients);
  /* EDP 1 (ep 8, etp 2 on 16 GPUs): no expert gradient collective */
  g_autofree char *c1 = folded_config("{\"ep\":8,\"etp\":2}", 1);
  g_autoptr(MmSimulation) d = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", c1, 2);
  ck_assert_uint_eq(other_groups(d, MM_COLL_ALL_REDUCE, MM_REASON_DDP, 16, 1), 0);
}
END_TEST

START_TEST(test_folding_skew_per_device_agrees)
{
  /* with routing skew the hot rank is the first of each folded EP group (EP stride 2 under ETP
   * 2): two behaviours, and a simulation of every device agrees with the symmetric one */
  static const char *const c =
    "{\"name\":\"fold\",\"task\":\"pretrain\",\"global_batch\":16,\"micro_batch\":1,\"expert_skew\":1.0,"
    "\"experts\":{\"ep\":4,\"etp\":2},\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}";
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", c, 2);
  ck_assert_uint_eq(a->plan->n_programs, 2);
  ck_assert_int_eq(a->scenario->ep_degree, 4);
  ck_assert_int_eq(a->scenario->ep_stride, 2);
  MmSimOptions opt = {.nodes = 2, .per_device = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) d = mm_test_sim("models/mixtral-8x7b.json", "hardware/dgx-h100-2048.json", c, &opt, &error);
  ck_assert_msg(d != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(d->plan->n_classes, 16);
  ck_assert_double_eq(d->metrics.iteration_time_s, a->metrics.iteration_time_s);
}
END_TEST

/* Invalid expert layouts: each row an "experts" object (with the default levels, or a whole
 * "parallelism" object when it starts with '{') that must be rejected with an error naming the
 * JSON path. */
static const struct {
  const char *model, *experts, *levels, *path;
  int code;
} bad_folding[] = {
  {"models/mixtral-8x7b.json", "{\"ep\":3}", NULL, "$.experts", MM_CONFIG_ERROR_INCONSISTENT},   /* 3 does not divide 16 */
  {"models/mixtral-8x7b.json", "{\"ep\":4,\"etp\":3}", NULL, "$.experts", MM_CONFIG_ERROR_INCONSISTENT},
  {"models/mixtral-8x7b.json", "{\"ep\":16}", NULL, "$.experts.ep", MM_CONFIG_ERROR_INCONSISTENT}, /* 8 experts */
  {"models/mixtral-8x7b.json", "{\"ep\":32}", NULL, "$.experts", MM_CONFIG_ERROR_INCONSISTENT},  /* > 16 devices */
  {"models/mixtral-8x7b.json", "{\"etp\":2}", NULL, "$.experts", MM_CONFIG_ERROR_MISSING_KEY},
  {"models/mixtral-8x7b.json", "{\"ep\":2,\"tp\":2}", NULL, "$.experts", MM_CONFIG_ERROR_UNKNOWN_KEY},
  {"models/mixtral-8x7b.json", "{\"ep\":0}", NULL, "$.experts.ep", MM_CONFIG_ERROR_RANGE},
  {"models/mixtral-8x7b.json", "{\"ep\":4}",
   "{\"decoder\":[{\"strategy\":\"ep\",\"degree\":4},{\"strategy\":\"ddp\",\"degree\":\"all\"}],"
   "\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}",
   "$.parallelism.decoder[0].strategy", MM_CONFIG_ERROR_INCONSISTENT},
  {"models/mixtral-8x7b.json", "{\"ep\":4}", "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]",
   "$.parallelism.default[0].strategy", MM_CONFIG_ERROR_INCONSISTENT},
  {"models/mixtral-8x7b.json", "{\"ep\":4}", "[{\"strategy\":\"tp\",\"degree\":2,\"experts\":\"sharded\"},{\"strategy\":\"ddp\",\"degree\":\"all\"}]",
   "$.parallelism.default[0].experts", MM_CONFIG_ERROR_INCONSISTENT},
  {"models/megatron-gpt-1.7b.json", "{\"ep\":4}", NULL, "$.experts", MM_CONFIG_ERROR_INCONSISTENT}, /* no experts */
  /* etp defaults to the block's tp degree: 8 x 4 = 32 GPUs, more than 16 */
  {"models/mixtral-8x7b.json", "{\"ep\":8}", "[{\"strategy\":\"tp\",\"degree\":4},{\"strategy\":\"ddp\",\"degree\":\"all\"}]",
   "$.experts", MM_CONFIG_ERROR_INCONSISTENT},
  /* etp 16 does not split an expert's 24 columns */
  {"{\"name\":\"tiny-moe\",\"seq_len\":128,\"dtype\":\"bf16\",\"blocks\":[{\"kind\":\"transformer\",\"name\":\"moe\","
   "\"count\":2,\"hidden\":64,\"heads\":4,\"ffn\":24,\"experts\":4,\"top_k\":1}]}",
   "{\"ep\":1,\"etp\":16}", NULL, "$.experts.etp", MM_CONFIG_ERROR_INCONSISTENT},
};

START_TEST(test_folding_rejects_bad_layouts)
{
  const char *levels = bad_folding[_i].levels ? bad_folding[_i].levels : "[{\"strategy\":\"ddp\",\"degree\":\"all\"}]";
  g_autofree char *par = levels[0] == '{' ? g_strdup(levels) : g_strdup_printf("{\"default\":%s}", levels);
  g_autofree char *c = g_strdup_printf("{\"name\":\"bad\",\"task\":\"pretrain\",\"global_batch\":16,\"experts\":%s,"
                                       "\"parallelism\":%s}",
                                       bad_folding[_i].experts, par);
  MmSimOptions opt = {.nodes = 2};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) x = mm_test_sim(bad_folding[_i].model, "hardware/dgx-h100-2048.json", c, &opt, &error);
  ck_assert_ptr_null(x);
  ck_assert_ptr_nonnull(error);
  ck_assert_int_eq(error->code, bad_folding[_i].code);
  g_autofree char *want = g_strdup_printf(": %s: ", bad_folding[_i].path);
  ck_assert_msg(strstr(error->message, want), "row %d: %s", _i, error->message);
}
END_TEST

START_TEST(test_folding_cli)
{
  /* bad input exits 1 with the file and the JSON path on stderr */
  g_autofree char *cfg = mm_test_write("fold-bad.json", "{\"name\":\"bad\",\"task\":\"pretrain\",\"global_batch\":16,"
                                                        "\"experts\":{\"ep\":3},\"parallelism\":{\"default\":"
                                                        "[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}");
  const char *args[] = {"run", "-m", "models/mixtral-8x7b.json", "-H", "hardware/dgx-h100-2048.json", "-c", cfg,
                        "--nodes", "2", NULL};
  g_autofree char *out = NULL, *err = NULL;
  ck_assert_int_eq(mm_test_cli(args, &out, &err), 1);
  g_autofree char *want = g_strdup_printf("%s: $.experts: ", cfg);
  ck_assert_msg(strstr(err, want), "%s", err);

  /* describe --json lists the expert layout: etp 2 at stride 1, ep 4 at stride 2 (one node), edp 2
   * at stride 8 (across the nodes); the expert gradients' group is edp */
  g_autofree char *good = folded_config("{\"ep\":4,\"etp\":2}", 1);
  g_autofree char *gpath = mm_test_write("fold-good.json", good);
  const char *dargs[] = {"describe", "-m", "models/mixtral-8x7b.json", "-H", "hardware/dgx-h100-2048.json", "-c", gpath,
                         "--nodes", "2", "--json", "-", NULL};
  g_autofree char *dout = NULL, *derr = NULL;
  ck_assert_int_eq(mm_test_cli(dargs, &dout, &derr), 0);
  cJSON *root = cJSON_Parse(dout);
  ck_assert_ptr_nonnull(root);
  const cJSON *dec = NULL, *st = cJSON_GetObjectItem(root, "strategies");
  for (int i = 0; i < cJSON_GetArraySize(st); i++)
    if (strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(st, i), "block")->valuestring, "decoder") == 0)
      dec = cJSON_GetArrayItem(st, i);
  ck_assert_ptr_nonnull(dec);
  const cJSON *el = cJSON_GetObjectItem(dec, "expert_levels");
  static const struct {
    const char *name;
    double degree, stride;
    const char *scope;
  } want_levels[] = {{"etp", 2, 1, "intra_node"}, {"ep", 4, 2, "intra_node"}, {"edp", 2, 8, "inter_node"}};
  ck_assert_int_eq(cJSON_GetArraySize(el), 3);
  for (int i = 0; i < 3; i++) {
    const cJSON *lv = cJSON_GetArrayItem(el, i);
    ck_assert_str_eq(cJSON_GetObjectItem(lv, "strategy")->valuestring, want_levels[i].name);
    ck_assert_double_eq(cJSON_GetObjectItem(lv, "degree")->valuedouble, want_levels[i].degree);
    ck_assert_double_eq(cJSON_GetObjectItem(lv, "stride")->valuedouble, want_levels[i].stride);
    ck_assert_str_eq(cJSON_GetObjectItem(lv, "scope")->valuestring, want_levels[i].scope);
  }
  const cJSON *ex = cJSON_GetObjectItem(cJSON_GetObjectItem(dec, "gradient_replicas"), "expert");
  ck_assert_int_eq(cJSON_GetArraySize(ex), 1);
  ck_assert_str_eq(cJSON_GetArrayItem(ex, 0)->valuestring, "edp");
  cJSON_Delete(root);
}
END_TEST


/* ---- parallel attention + MLP blocks ------------------------------------------------- */

static char *pblock_model(const char *kind)
{
  return g_strdup_printf("{\"name\":\"pj\",\"seq_len\":2048,\"blocks\":[{\"kind\":\"token_embedding\",\"vocab\":50400,"
                         "\"hidden\":4096},{\"kind\":\"transformer\",\"count\":4,\"hidden\":4096,\"heads\":16,"
                         "\"ffn\":16384,\"parallel_block\":\"%s\"},{\"kind\":\"lm_head\",\"vocab\":50400,\"hidden\":4096}]}",
                         kind);
}

/* The TP collectives of @kind in @phase in one program: sequential, shared-norm and two-norm blocks. */
START_TEST(test_parallel_block_tp)
{
  g_autofree char *ms = pblock_model("none"), *msh = pblock_model("shared_norm"), *m2 = pblock_model("two_norms");
  g_autofree char *tp = config("pretrain", 8, "\"micro_batch\":1,", "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok(ms, "hardware/dgx-a100-2048.json", tp, 1);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(msh, "hardware/dgx-a100-2048.json", tp, 1);
  g_autoptr(MmSimulation) c = mm_test_sim_ok(m2, "hardware/dgx-a100-2048.json", tp, 1);
  const guint L = 4, micro = 8;
  /* forward: attention's partial output joins the MLP's, one all-reduce per layer instead of two
   * (both kinds); backward: with one shared norm qkv's and ffn_up's input gradients are summed
   * before one all-reduce; with two norms each column-parallel input keeps its own */
  const guint fa = count_ops(a, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD);
  const guint ba = count_ops(a, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_BWD);
  ck_assert_uint_eq(fa, micro * (2 * L + 1)); /* + the vocab-parallel embedding's */
  ck_assert_uint_eq(ba, micro * (2 * L + 1)); /* + the logits' input gradient */
  ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD), fa - micro * L);
  ck_assert_uint_eq(count_ops(b, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_BWD), ba - micro * L);
  ck_assert_uint_eq(count_ops(c, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_FWD), fa - micro * L);
  ck_assert_uint_eq(count_ops(c, MM_COLL_ALL_REDUCE, MM_REASON_TP, MM_PHASE_BWD), ba);
  /* each one removed moved the layer's s x h bf16 activations of one sample */
  const double act = 2048.0 * 4096 * 2;
  ck_assert_double_eq_tol(coll_bytes(a, MM_COLL_ALL_REDUCE, MM_REASON_TP, -1) -
                            coll_bytes(b, MM_COLL_ALL_REDUCE, MM_REASON_TP, -1), 2.0 * micro * L * act, 1);
  /* the same model FLOPs as the sequential block (two norms: the same graph) */
  ck_assert_double_eq(c->metrics.model_flops, a->metrics.model_flops);
  /* under TP the halved collectives make it faster */
  ck_assert_double_lt(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
  ck_assert_double_lt(c->metrics.iteration_time_s, a->metrics.iteration_time_s);
  /* activations: one shared norm keeps 2 s h per layer fewer (the second norm's input and
   * ffn_up's, which is qkv's), replicated over the TP ranks without sequence parallelism */
  ck_assert_double_eq_tol(a->memory->total.activations - b->memory->total.activations, L * 2 * act, 1);
  ck_assert_double_eq(c->memory->total.activations, a->memory->total.activations);

  /* without TP there is no collective to save: the two-norm block is the sequential block but
   * for one residual add of both branches instead of two (a few memory passes); the shared norm
   * also saves one norm's kernels per layer; both a small fraction of what TP saved */
  g_autofree char *dp = config("pretrain", 8, "\"micro_batch\":1,", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autoptr(MmSimulation) da = mm_test_sim_ok(ms, "hardware/dgx-a100-2048.json", dp, 1);
  g_autoptr(MmSimulation) db = mm_test_sim_ok(msh, "hardware/dgx-a100-2048.json", dp, 1);
  g_autoptr(MmSimulation) dc = mm_test_sim_ok(m2, "hardware/dgx-a100-2048.json", dp, 1);
  const double saved_dp = da->metrics.iteration_time_s - db->metrics.iteration_time_s;
  const double saved_dp2 = da->metrics.iteration_time_s - dc->metrics.iteration_time_s;
  ck_assert_double_gt(saved_dp2, 0);
  ck_assert_double_gt(saved_dp, saved_dp2);
  ck_assert_double_lt(saved_dp, 0.1 * (a->metrics.iteration_time_s - b->metrics.iteration_time_s));
}
END_TEST

START_TEST(test_parallel_block_sp)
{
  g_autofree char *ms = pblock_model("none"), *msh = pblock_model("shared_norm"), *m2 = pblock_model("two_norms");
  g_autofree char *sp = config("pretrain", 8, "\"micro_batch\":1,", "[{\"strategy\":\"sp\",\"degree\":8}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok(ms, "hardware/dgx-a100-2048.json", sp, 1);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(msh, "hardware/dgx-a100-2048.json", sp, 1);
  g_autoptr(MmSimulation) c = mm_test_sim_ok(m2, "hardware/dgx-a100-2048.json", sp, 1);
  const guint n = 8 * 4; /* micro-batches x layers */
  const MmCollKind AG = MM_COLL_ALL_GATHER, RS = MM_COLL_REDUCE_SCATTER;
  /* forward: one reduce-scatter per layer (both kinds); one all-gather of the shared norm's
   * output, where two norms still gather each */
  ck_assert_uint_eq(count_ops(b, RS, MM_REASON_TP, MM_PHASE_FWD), count_ops(a, RS, MM_REASON_TP, MM_PHASE_FWD) - n);
  ck_assert_uint_eq(count_ops(c, RS, MM_REASON_TP, MM_PHASE_FWD), count_ops(a, RS, MM_REASON_TP, MM_PHASE_FWD) - n);
  ck_assert_uint_eq(count_ops(b, AG, MM_REASON_TP, MM_PHASE_FWD), count_ops(a, AG, MM_REASON_TP, MM_PHASE_FWD) - n);
  ck_assert_uint_eq(count_ops(c, AG, MM_REASON_TP, MM_PHASE_FWD), count_ops(a, AG, MM_REASON_TP, MM_PHASE_FWD));
  /* backward: the output gradient gathered once for both branches; one shared input re-gathered
   * and one reduce-scatter of the summed input gradient */
  ck_assert_uint_eq(count_ops(b, AG, MM_REASON_TP, MM_PHASE_BWD), count_ops(a, AG, MM_REASON_TP, MM_PHASE_BWD) - 2 * n);
  ck_assert_uint_eq(count_ops(b, RS, MM_REASON_TP, MM_PHASE_BWD), count_ops(a, RS, MM_REASON_TP, MM_PHASE_BWD) - n);
  ck_assert_uint_eq(count_ops(c, AG, MM_REASON_TP, MM_PHASE_BWD), count_ops(a, AG, MM_REASON_TP, MM_PHASE_BWD) - n);
  ck_assert_uint_eq(count_ops(c, RS, MM_REASON_TP, MM_PHASE_BWD), count_ops(a, RS, MM_REASON_TP, MM_PHASE_BWD));
  ck_assert_double_lt(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
  ck_assert_double_lt(c->metrics.iteration_time_s, a->metrics.iteration_time_s);
  /* ffn_up's input gradient and weight gradient are compute ops of that layer alone; the weight
   * gradient waits for the re-gathered input, the input gradient does not */
  const MmPlanProgram *p = mm_plan_class_program(b->plan, b->metrics.critical_class);
  guint wgrads = 0, alone = 0;
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmOpInfo *in = &p->info[i];
    if (in->what != MM_OP_COMPUTE || in->phase != MM_PHASE_BWD || in->first_layer != in->last_layer ||
        b->graph->layers[in->first_layer].role != MM_ROLE_FFN_UP)
      continue;
    gboolean waits = FALSE;
    for (uint32_t d = 0; d < p->ops[i].n_deps; d++) {
      const MmOpInfo *di = &p->info[p->deps[p->ops[i].dep_first + d]];
      waits |= di->what == MM_OP_COLLECTIVE && di->coll == AG && di->phase == MM_PHASE_BWD;
    }
    wgrads += waits;
    alone++;
  }
  ck_assert_uint_eq(alone, 2 * n);
  ck_assert_uint_eq(wgrads, n);
  /* symmetric and per-device simulations agree */
  MmSimOptions opt = {.nodes = 1, .per_device = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) bd = mm_test_sim(msh, "hardware/dgx-a100-2048.json", sp, &opt, &error);
  ck_assert_msg(bd != NULL, "%s", error ? error->message : "");
  ck_assert_double_eq(bd->metrics.iteration_time_s, b->metrics.iteration_time_s);
}
END_TEST

/* ---- multi-token prediction ----------------------------------------------------------- */

static char *mtp_model(int depth)
{
  return g_strdup_printf(
    "{\"name\":\"ds\",\"seq_len\":1024,\"blocks\":[{\"kind\":\"token_embedding\",\"vocab\":32000,\"hidden\":1024},"
    "{\"kind\":\"transformer\",\"name\":\"moe\",\"count\":4,\"hidden\":1024,\"heads\":8,\"ffn\":512,"
    "\"ffn_kind\":\"swiglu\",\"norm\":\"rmsnorm\",\"experts\":16,\"top_k\":2,\"mtp_depth\":%d},"
    "{\"kind\":\"lm_head\",\"vocab\":32000,\"hidden\":1024,\"norm\":\"rmsnorm\"}]}", depth);
}

START_TEST(test_mtp_last_stage)
{
  g_autofree char *m0 = mtp_model(0), *m1 = mtp_model(1);
  /* two stages of 4 GPUs; the MoE layers (and their MTP module, unnamed in the config) over ep 4 */
  g_autofree char *c = g_strdup(
    "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8,\"micro_batch\":1,\"pipeline\":{\"degree\":2},"
    "\"parallelism\":{\"moe\":[{\"strategy\":\"ep\",\"degree\":4}],\"default\":[{\"strategy\":\"ddp\",\"degree\":4}]}}");
  g_autoptr(MmSimulation) a = mm_test_sim_ok(m0, "hardware/dgx-a100-2048.json", c, 1);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(m1, "hardware/dgx-a100-2048.json", c, 1);
  /* the main layers split as before; the module joins the last chunk, after the head */
  g_autofree uint32_t *ca = mm_pipe_unit_chunks(a->scenario, a->graph);
  g_autofree uint32_t *cb = mm_pipe_unit_chunks(b->scenario, b->graph);
  ck_assert_uint_eq(b->graph->n_units, a->graph->n_units + 1);
  for (guint u = 0; u < a->graph->n_units; u++) ck_assert_uint_eq(cb[u], ca[u]);
  ck_assert_uint_eq(cb[b->graph->n_units - 1], 1);
  /* it takes the MoE block's strategy: its experts' dispatch and combine, fwd and bwd, in each of
   * the 8 / ep 4 = 2 micro-batches (ep ranks see different samples) */
  const guint a2a = 4 * 2;
  guint a2a_a = 0, a2a_b = 0, tied_b = 0, tied_a = 0;
  for (uint32_t k = 0; k < b->plan->n_classes; k++) {
    const MmPlanProgram *pa = mm_plan_class_program(a->plan, k), *pb = mm_plan_class_program(b->plan, k);
    for (uint32_t i = 0; i < pa->n_ops; i++) {
      const MmOpInfo *in = &pa->info[i];
      a2a_a += in->what == MM_OP_COLLECTIVE && in->reason == MM_REASON_MOE;
      tied_a += in->what == MM_OP_COLLECTIVE && in->reason == MM_REASON_PP && in->coll == MM_COLL_ALL_REDUCE;
    }
    for (uint32_t i = 0; i < pb->n_ops; i++) {
      const MmOpInfo *in = &pb->info[i];
      a2a_b += in->what == MM_OP_COLLECTIVE && in->reason == MM_REASON_MOE;
      tied_b += in->what == MM_OP_COLLECTIVE && in->reason == MM_REASON_PP && in->coll == MM_COLL_ALL_REDUCE;
    }
  }
  ck_assert_uint_eq(a2a_b, a2a_a + a2a);
  /* the shared embedding's gradient is reduced between the first and the last stage */
  ck_assert_uint_eq(tied_a, 0);
  ck_assert_uint_eq(tied_b, 2);
  /* one more layer and a head on the last stage: the iteration is longer, and model FLOPs grow by
   * the module's (graph totals, global batch) */
  ck_assert_double_gt(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
  const double extra = 8 * (mm_graph_train_flops_per_sample(b->graph) - mm_graph_train_flops_per_sample(a->graph));
  ck_assert_double_eq_tol(b->metrics.model_flops - a->metrics.model_flops, extra, 1e-9 * extra);

  /* inference runs without the modules (DeepSeek-V3 discards them): the same answer */
  static const char *const serve =
    "{\"name\":\"s\",\"task\":\"inference\",\"global_batch\":4,\"inference\":{\"prompt_tokens\":512,"
    "\"output_tokens\":64},\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8}]}}";
  g_autoptr(MmSimulation) sa = mm_test_sim_ok(m0, "hardware/dgx-a100-2048.json", serve, 1);
  g_autoptr(MmSimulation) sb = mm_test_sim_ok(m1, "hardware/dgx-a100-2048.json", serve, 1);
  ck_assert_double_eq(sb->metrics.iteration_time_s, sa->metrics.iteration_time_s);
  ck_assert_double_eq(sb->serving.tpot_s, sa->serving.tpot_s);
}
END_TEST

static Suite *parallel_suite(void)
{
  Suite *s = suite_create("parallel");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_decode_reads_weights_and_cache);
  tcase_add_test(tc, test_serving_cache_fills_memory);
  tcase_add_test(tc, test_moe_decode_reads_routed_experts);
  tcase_add_test(tc, test_experts_sharded_over_tp);
  tcase_add_test(tc, test_expert_parallel_all_to_all);
  tcase_add_test(tc, test_expert_skew_slowest_sets_pace);
  tcase_add_test(tc, test_per_node_dispatch_in_a_run);
  tcase_add_test(tc, test_fp8_dispatch);
  tcase_add_test(tc, test_sequence_parallel);
  tcase_add_test(tc, test_context_parallel);
  tcase_add_test(tc, test_cp_shards_with_fsdp);
  tcase_add_test(tc, test_ulysses_sequence_parallel);
  tcase_add_test(tc, test_placement_sums_match_memory);
  tcase_add_test(tc, test_zero_stages);
  tcase_add_test(tc, test_selective_recompute);
  tcase_add_test(tc, test_folding_deepseek_v3_literal);
  tcase_add_test(tc, test_folding_expert_groups);
  tcase_add_test(tc, test_folding_expert_data_parallel_gradients);
  tcase_add_test(tc, test_folding_skew_per_device_agrees);
  tcase_add_loop_test(tc, test_folding_rejects_bad_layouts, 0, G_N_ELEMENTS(bad_folding));
  tcase_add_test(tc, test_folding_cli);
  tcase_add_test(tc, test_parallel_block_tp);
  tcase_add_test(tc, test_parallel_block_sp);
  tcase_add_test(tc, test_mtp_last_stage);
  tcase_add_test(tc, test_grad_accumulation_separate);
  tcase_add_test(tc, test_interference_in_lowering);
  tcase_add_test(tc, test_tp_mlp_backward_gathers);
  tcase_add_test(tc, test_fp8_param_gather);
  tcase_add_test(tc, test_fp8_param_gather_exceptions);
  tcase_add_test(tc, test_fsdp_per_tensor_list);
  tcase_add_test(tc, test_tp_without_sp_odd_sequence);
  tcase_add_test(tc, test_fsdp_per_tensor_list_experts);
  tcase_add_test(tc, test_fsdp_regather_recompute);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(parallel_suite());
}

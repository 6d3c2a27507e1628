/* check_memory: per-device memory under FSDP / DDP / TP / MP, recompute, tasks; fit verdicts. */
#include <math.h>
#include <string.h>

#include "testutil.h"

/* Two bf16 dense layers of 1024 x 1024, no activation: P = 2 x 1024^2. */
#define MLP_MODEL "{\"name\":\"mlp\",\"blocks\":[{\"kind\":\"mlp\",\"count\":2,\"width\":1024,\"activation\":false}]}"
#define P2 (2.0 * 1024 * 1024)

static char *cfg_with(const char *task, const char *levels)
{
  return g_strdup_printf("{\"name\":\"c\",\"task\":\"%s\",\"global_batch\":64,%s\"parallelism\":{\"default\":%s}}",
                         task, strcmp(task, "finetune") == 0 ? "\"frozen\":[\"mlp\"]," : "", levels);
}

START_TEST(test_ddp_closed_form)
{
  g_autofree char *hw = mm_test_node8();
  g_autofree char *cfg = cfg_with("pretrain", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autoptr(MmSimulation) x = mm_test_sim_ok(MLP_MODEL, hw, cfg, 0);
  /* replicated: bf16 weights 2 B, bf16 grads 2 B, adam 2 x fp32 + fp32 master = 12 B per parameter */
  ck_assert_double_eq_tol(x->memory->total.weights, P2 * 2, 0.5);
  ck_assert_double_eq_tol(x->memory->total.gradients, P2 * 2, 0.5);
  ck_assert_double_eq_tol(x->memory->total.optimizer, P2 * 12, 0.5);
  /* activations: 8 samples per device, each layer keeps its 1024-wide bf16 input */
  ck_assert_double_eq_tol(x->memory->total.activations, 8.0 * 2 * 1024 * 2, 0.5);
  /* DDP buckets: twice the 25 MB bucket, capped by the gradients (4 MiB here) */
  ck_assert_double_eq_tol(x->memory->total.comm_buffers, P2 * 2, 0.5);
}
END_TEST

START_TEST(test_fsdp_shards_everything)
{
  g_autofree char *hw = mm_test_node8();
  g_autofree char *cfg = cfg_with("pretrain", "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  g_autoptr(MmSimulation) x = mm_test_sim_ok(MLP_MODEL, hw, cfg, 0);
  ck_assert_double_eq_tol(x->memory->total.weights, P2 * 2 / 8, 0.5);
  ck_assert_double_eq_tol(x->memory->total.gradients, P2 * 2 / 8, 0.5);
  ck_assert_double_eq_tol(x->memory->total.optimizer, P2 * 12 / 8, 0.5);
  /* gathered: (1 + prefetch 1) whole layers of weights + one layer's unsharded gradient */
  ck_assert_double_eq_tol(x->memory->total.comm_buffers, 2 * (P2 / 2) * 2 + (P2 / 2) * 2, 0.5);
}
END_TEST

START_TEST(test_tp_shards_weights_not_norms)
{
  g_autofree char *hw = mm_test_node8();
  g_autofree char *cfg = cfg_with("pretrain", "[{\"strategy\":\"tp\",\"degree\":8}]");
  const char *model = "{\"name\":\"t\",\"seq_len\":64,\"blocks\":[{\"kind\":\"transformer\",\"count\":1,"
                      "\"hidden\":512,\"heads\":8,\"ffn\":2048,\"norm\":\"rmsnorm\"}]}";
  g_autoptr(MmSimulation) x = mm_test_sim_ok(model, hw, cfg, 0);
  double h = 512, f = 2048;
  double sharded = 4 * h * h + 2 * h * f, norms = 2 * h;
  ck_assert_double_eq_tol(x->memory->total.weights, (sharded / 8 + norms) * 2, 0.5);
}
END_TEST

START_TEST(test_inference_and_finetune)
{
  g_autofree char *hw = mm_test_node8();
  g_autofree char *inf = cfg_with("inference", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autoptr(MmSimulation) x = mm_test_sim_ok(MLP_MODEL, hw, inf, 0);
  ck_assert_double_eq(x->memory->total.gradients, 0);
  ck_assert_double_eq(x->memory->total.optimizer, 0);
  ck_assert_double_eq_tol(x->memory->total.weights, P2 * 2, 0.5);
  /* working set of the largest layer: input + output of 8 samples */
  ck_assert_double_eq_tol(x->memory->total.activations, 8.0 * (1024 + 1024) * 2, 0.5);

  const char *two = "{\"name\":\"two\",\"blocks\":[{\"kind\":\"mlp\",\"name\":\"a\",\"count\":1,\"width\":1024,"
                    "\"activation\":false},{\"kind\":\"mlp\",\"name\":\"b\",\"count\":1,\"width\":1024,\"activation\":false}]}";
  const char *ft = "{\"name\":\"c\",\"task\":\"finetune\",\"global_batch\":64,\"frozen\":[\"a\"],"
                   "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":8}]}}";
  g_autoptr(MmSimulation) y = mm_test_sim_ok(two, hw, ft, 0);
  ck_assert_double_eq(y->memory->blocks[0].gradients, 0);
  ck_assert_double_eq(y->memory->blocks[0].optimizer, 0);
  ck_assert_double_eq(y->memory->blocks[0].activations, 0); /* nothing before it is trained: no backward */
  ck_assert_double_eq_tol(y->memory->blocks[1].gradients, P2, 0.5);
  ck_assert_double_eq_tol(y->memory->blocks[1].optimizer, P2 / 2 * 12, 0.5);
}
END_TEST

START_TEST(test_recompute_full_saves_activations)
{
  const char *none = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":2048,\"micro_batch\":1,"
                     "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}";
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/llama2-70b.json", "hardware/dgx-a100-2048.json", none, 0);
  g_autoptr(MmSimulation) b = mm_test_sim_ok("models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-fsdp.json", 0);
  ck_assert_int_eq(b->config->recompute, MM_RECOMPUTE_FULL);
  /* full recompute keeps one hidden-state per layer: 80 x s x h x 2 bytes (+ head and one layer) */
  double kept = 80.0 * 4096 * 8192 * 2;
  ck_assert_double_ge(b->memory->total.activations, kept);
  ck_assert_double_lt(b->memory->total.activations, 0.2 * a->memory->total.activations);
  ck_assert(!a->memory->fits); /* 80 layers of 1 GiB activations do not fit in 80 GiB */
  ck_assert(b->memory->fits);
}
END_TEST

START_TEST(test_gpt3_ddp_zionex_does_not_fit)
{
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/gpt3-175b.json", "hardware/zionex-a100-128.json", "configs/llm-pretrain-ddp.json", 0);
  ck_assert(!x->memory->fits);
  /* a full replica of the weights alone is 349 GB, far beyond 40 GiB */
  ck_assert_double_gt(x->memory->total.weights, 300e9);
  ck_assert_double_eq_tol(x->memory->capacity_bytes, 40.0 * 1024 * 1024 * 1024, 1);
}
END_TEST

START_TEST(test_gpt3_fsdp_2048_fits)
{
  g_autoptr(MmSimulation) x = mm_test_sim_ok("models/gpt3-175b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-fsdp.json", 0);
  ck_assert(x->memory->fits);
  /* 16 bytes per parameter (bf16 weight + bf16 grad + 12 B adam) sharded 2048 ways */
  double states = x->memory->total.weights + x->memory->total.gradients + x->memory->total.optimizer;
  ck_assert_double_eq_tol(states / (16.0 * 174.6e9 / 2048), 1.0, 0.01);
}
END_TEST

START_TEST(test_mp_table_wise_uneven)
{
  g_autofree char *hw = mm_test_node8();
  const char *model = "{\"name\":\"d\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":10,\"rows\":1000,"
                      "\"dim\":16,\"pooling\":2,\"dtype\":\"fp16\"},{\"kind\":\"mlp\",\"count\":1,\"width\":16}]}";
  const char *cfg = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,\"parallelism\":{"
                    "\"embedding_bag\":[{\"strategy\":\"mp\",\"degree\":8}],"
                    "\"default\":[{\"strategy\":\"ddp\",\"degree\":8}]}}";
  g_autoptr(MmSimulation) x = mm_test_sim_ok(model, hw, cfg, 0);
  /* 10 tables on 8 devices: the busiest holds 2 */
  ck_assert_double_eq_tol(x->memory->blocks[0].weights, 2.0 * 1000 * 16 * 2, 0.5);
  /* rowwise adagrad: one fp32 state per row, plus an fp32 master copy of fp16 rows */
  ck_assert_double_eq_tol(x->memory->blocks[0].optimizer, 2.0 * 1000 * 16 * (4.0 / 16 + 4), 0.5);
  ck_assert_double_gt(x->memory->total.comm_buffers, 0);
}
END_TEST

/* The loss keeps its softmax in fp32 for backward (Megatron's vocab-parallel cross-entropy on
 * logits.float(); torchtitan, HF): Korthikanti et al. 2022's 4sbv/t, not the logits' dtype. */
START_TEST(test_loss_keeps_fp32_softmax)
{
  g_autofree char *hw = mm_test_node8();
  g_autofree char *cfg = cfg_with("pretrain", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  const char *model = "{\"name\":\"t\",\"seq_len\":64,\"dtype\":\"bf16\",\"blocks\":["
                      "{\"kind\":\"token_embedding\",\"vocab\":1000,\"hidden\":64},"
                      "{\"kind\":\"transformer\",\"count\":1,\"hidden\":64,\"heads\":4,\"ffn\":256},"
                      "{\"kind\":\"lm_head\",\"vocab\":1000,\"hidden\":64}]}";
  g_autoptr(MmSimulation) x = mm_test_sim_ok(model, hw, cfg, 0);
  /* 8 samples per device; the head keeps the final norm's and the projection's bf16 inputs (2 x s h x
   * 2 B) and the loss's fp32 softmax (s V x 4 B) */
  const double s = 64, h = 64, v = 1000;
  ck_assert_double_eq_tol(x->memory->blocks[2].activations, 8.0 * (2 * s * h * 2 + s * v * 4), 0.5);
  /* inference keeps nothing for a backward: the largest working set stays the projection's input and
   * bf16 logits, not an fp32 softmax */
  g_autofree char *inf = cfg_with("inference", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autoptr(MmSimulation) y = mm_test_sim_ok(model, hw, inf, 0);
  ck_assert_double_eq_tol(y->memory->total.activations, 8.0 * (s * h * 2 + s * v * 2), 0.5);
  /* cross_entropy inplace (Transformer Engine's parallel_cross_entropy): the logits' gradient in bf16 */
  g_autofree char *te = g_strdup_printf("{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,"
                                        "\"cross_entropy\":\"inplace\",\"parallelism\":{\"default\":%s}}",
                                        "[{\"strategy\":\"ddp\",\"degree\":8}]");
  g_autoptr(MmSimulation) z = mm_test_sim_ok(model, hw, te, 0);
  ck_assert_double_eq_tol(z->memory->blocks[2].activations, 8.0 * (2 * s * h * 2 + s * v * 2), 0.5);
  ck_assert_double_eq(z->metrics.iteration_time_s, x->metrics.iteration_time_s); /* memory only */
}
END_TEST

/* Korthikanti et al. 2022 (Sec. 4.1, Table 2): a GPT layer (layernorm, gelu FFN of 4h, eager attention
 * with dropout, 16-bit) keeps sbh(34 + 5as/h) bytes without parallelism, sbh(10 + 24/t + 5as/(ht)) with
 * TP and sbh(34/t + 5as/(ht)) with TP + sequence parallelism; madmax adds the flash-style fp32 log-sum-exp (4as per sample, /t). */
#define KORTHIKANTI_MODEL                                                                                        \
  "{\"name\":\"k\",\"seq_len\":64,\"dtype\":\"fp16\",\"blocks\":[{\"kind\":\"transformer\",\"count\":1,"            \
  "\"hidden\":64,\"heads\":8,\"ffn\":256,\"ffn_kind\":\"gelu\",\"norm\":\"layernorm\",\"bias\":true,"             \
  "\"attention\":\"eager\",\"dropout\":true}]}"

static const struct {
  const char *levels;
  double samples, repl, sharded, tp; /* kept bytes: samples x (repl sbh + sharded sbh / tp + (5 a s^2 + 4 a s) / tp) */
} korthikanti_rows[] = {
  {"[{\"strategy\":\"ddp\",\"degree\":8}]", 8, 34, 0, 1},
  {"[{\"strategy\":\"sp\",\"degree\":8}]", 64, 0, 34, 8},
  /* TP alone: the norms' inputs, the column-parallel GEMMs' inputs and both dropout masks whole */
  {"[{\"strategy\":\"tp\",\"degree\":8}]", 64, 10, 24, 8},
};

START_TEST(test_korthikanti_activations)
{
  g_autofree char *hw = mm_test_node8();
  g_autofree char *cfg = cfg_with("pretrain", korthikanti_rows[_i].levels);
  g_autoptr(MmSimulation) x = mm_test_sim_ok(KORTHIKANTI_MODEL, hw, cfg, 0);
  const double s = 64, h = 64, a = 8, t = korthikanti_rows[_i].tp;
  const double want = korthikanti_rows[_i].samples *
                      (s * h * (korthikanti_rows[_i].repl + korthikanti_rows[_i].sharded / t) + (5 * a * s * s + 4 * a * s) / t);
  ck_assert_double_eq_tol(x->memory->total.activations, want, 0.5);
}
END_TEST

/* Skewed routing (expert_skew): the busiest ep rank, which the lowering runs as the hot class with
 * (1 + skew) x the mean routed tokens, keeps that many tokens' expert activations. */
START_TEST(test_expert_skew_hot_rank_activations)
{
  g_autofree char *hw = mm_test_node8();
  const char *model = "{\"name\":\"m\",\"seq_len\":32,\"blocks\":[{\"kind\":\"transformer\",\"count\":1,"
                      "\"hidden\":64,\"heads\":4,\"ffn\":128,\"experts\":8,\"top_k\":2,\"capacity_factor\":1}]}";
#define SKEW_CFG(skew)                                                                                   \
  "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,\"expert_skew\":" skew ","                            \
  "\"parallelism\":{\"default\":[{\"strategy\":\"ep\",\"degree\":8}]}}"
  const char *even = SKEW_CFG("0"), *skewed = SKEW_CFG("1.5");
#undef SKEW_CFG
  g_autoptr(MmSimulation) x = mm_test_sim_ok(model, hw, even, 0);
  g_autoptr(MmSimulation) y = mm_test_sim_ok(model, hw, skewed, 0);
  /* 8 samples per device; per sample the experts keep top_k x s tokens' up-projection input (h),
   * gelu input (f) and down-projection input (f), 2 bytes each: 1.5 x that more on the hot rank */
  const double s = 32, h = 64, f = 128, experts_kept = 8.0 * 2 * s * (h + 2 * f) * 2;
  ck_assert_double_eq_tol(y->memory->total.activations - x->memory->total.activations, 1.5 * experts_kept, 0.5);
}
END_TEST

static Suite *memory_suite(void)
{
  Suite *s = suite_create("memory");
  TCase *tc = tcase_create("memory");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_ddp_closed_form);
  tcase_add_test(tc, test_fsdp_shards_everything);
  tcase_add_test(tc, test_tp_shards_weights_not_norms);
  tcase_add_test(tc, test_inference_and_finetune);
  tcase_add_test(tc, test_recompute_full_saves_activations);
  tcase_add_test(tc, test_gpt3_ddp_zionex_does_not_fit);
  tcase_add_test(tc, test_gpt3_fsdp_2048_fits);
  tcase_add_test(tc, test_mp_table_wise_uneven);
  tcase_add_test(tc, test_loss_keeps_fp32_softmax);
  tcase_add_loop_test(tc, test_korthikanti_activations, 0, G_N_ELEMENTS(korthikanti_rows));
  tcase_add_test(tc, test_expert_skew_hot_rank_activations);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(memory_suite());
}

/* check_memory: per-device memory under FSDP / DDP / TP / MP, recompute, tasks; fit verdicts. */
#include <math.h>
#include <string.h>

#include "plan/plan.h"
#include "testutil.h"

typedef struct {
  MmModel *m;
  MmHardware *h;
  MmParallelConfig *c;
  MmScenario *s;
  MmGraph *g;
  MmMemory *mem;
} Setup;

static void setup_free(Setup *x)
{
  mm_memory_free(x->mem);
  mm_graph_free(x->g);
  mm_scenario_free(x->s);
  mm_parallel_free(x->c);
  mm_hardware_free(x->h);
  mm_model_free(x->m);
}

/* Each argument is a path under the source tree, or inline JSON when it starts with '{'. */
static char *file_arg(const char *arg, const char *name)
{
  return arg[0] == '{' ? mm_test_write(name, arg) : mm_test_src(arg);
}

static Setup build(const char *model, const char *hw, const char *cfg)
{
  Setup x = {0};
  g_autoptr(GError) error = NULL;
  g_autofree char *mp = file_arg(model, "m.json");
  g_autofree char *hp = file_arg(hw, "h.json");
  g_autofree char *cp = file_arg(cfg, "c.json");
  x.m = mm_model_load(mp, &error);
  ck_assert_msg(x.m, "%s", error ? error->message : "");
  x.h = mm_hardware_load(hp, &error);
  ck_assert_msg(x.h, "%s", error ? error->message : "");
  x.c = mm_parallel_load(cp, &error);
  ck_assert_msg(x.c, "%s", error ? error->message : "");
  x.s = mm_scenario_new(x.m, x.h, x.c, &error);
  ck_assert_msg(x.s, "%s", error ? error->message : "");
  x.g = mm_graph_new(x.m);
  x.mem = mm_memory_new(x.s, x.g);
  return x;
}

/* 8 A100-80GB in one node. */
static char *node8(void)
{
  g_autofree char *dev = mm_test_src("hardware/devices/a100-80gb.json");
  return g_strdup_printf("{\"name\":\"n8\",\"device\":\"%s\",\"gpus_per_node\":8,\"nodes\":1,"
                         "\"intra_node\":{\"topology\":\"switch\",\"links_per_gpu\":12,\"link_bw_GBps\":25}}",
                         dev);
}

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
  g_autofree char *hw = node8();
  g_autofree char *cfg = cfg_with("pretrain", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  Setup x = build(MLP_MODEL, hw, cfg);
  /* replicated: bf16 weights 2 B, bf16 grads 2 B, adam 2 x fp32 + fp32 master = 12 B per parameter */
  ck_assert_double_eq_tol(x.mem->total.weights, P2 * 2, 0.5);
  ck_assert_double_eq_tol(x.mem->total.gradients, P2 * 2, 0.5);
  ck_assert_double_eq_tol(x.mem->total.optimizer, P2 * 12, 0.5);
  /* activations: 8 samples per device, each layer keeps its 1024-wide bf16 input */
  ck_assert_double_eq_tol(x.mem->total.activations, 8.0 * 2 * 1024 * 2, 0.5);
  /* DDP buckets: twice the 25 MB bucket, capped by the gradients (4 MiB here) */
  ck_assert_double_eq_tol(x.mem->total.comm_buffers, P2 * 2, 0.5);
  setup_free(&x);
}
END_TEST

START_TEST(test_fsdp_shards_everything)
{
  g_autofree char *hw = node8();
  g_autofree char *cfg = cfg_with("pretrain", "[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]");
  Setup x = build(MLP_MODEL, hw, cfg);
  ck_assert_double_eq_tol(x.mem->total.weights, P2 * 2 / 8, 0.5);
  ck_assert_double_eq_tol(x.mem->total.gradients, P2 * 2 / 8, 0.5);
  ck_assert_double_eq_tol(x.mem->total.optimizer, P2 * 12 / 8, 0.5);
  /* gathered: (1 + prefetch 1) whole layers of weights + one layer's unsharded gradient */
  ck_assert_double_eq_tol(x.mem->total.comm_buffers, 2 * (P2 / 2) * 2 + (P2 / 2) * 2, 0.5);
  setup_free(&x);
}
END_TEST

START_TEST(test_tp_shards_weights_not_norms)
{
  g_autofree char *hw = node8();
  g_autofree char *cfg = cfg_with("pretrain", "[{\"strategy\":\"tp\",\"degree\":8}]");
  const char *model = "{\"name\":\"t\",\"seq_len\":64,\"blocks\":[{\"kind\":\"transformer\",\"count\":1,"
                      "\"hidden\":512,\"heads\":8,\"ffn\":2048,\"norm\":\"rmsnorm\"}]}";
  Setup x = build(model, hw, cfg);
  double h = 512, f = 2048;
  double sharded = 4 * h * h + 2 * h * f, norms = 2 * h;
  ck_assert_double_eq_tol(x.mem->total.weights, (sharded / 8 + norms) * 2, 0.5);
  setup_free(&x);
}
END_TEST

START_TEST(test_inference_and_finetune)
{
  g_autofree char *hw = node8();
  g_autofree char *inf = cfg_with("inference", "[{\"strategy\":\"ddp\",\"degree\":8}]");
  Setup x = build(MLP_MODEL, hw, inf);
  ck_assert_double_eq(x.mem->total.gradients, 0);
  ck_assert_double_eq(x.mem->total.optimizer, 0);
  ck_assert_double_eq_tol(x.mem->total.weights, P2 * 2, 0.5);
  /* working set of the largest layer: input + output of 8 samples */
  ck_assert_double_eq_tol(x.mem->total.activations, 8.0 * (1024 + 1024) * 2, 0.5);
  setup_free(&x);

  const char *two = "{\"name\":\"two\",\"blocks\":[{\"kind\":\"mlp\",\"name\":\"a\",\"count\":1,\"width\":1024,"
                    "\"activation\":false},{\"kind\":\"mlp\",\"name\":\"b\",\"count\":1,\"width\":1024,\"activation\":false}]}";
  const char *ft = "{\"name\":\"c\",\"task\":\"finetune\",\"global_batch\":64,\"frozen\":[\"a\"],"
                   "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":8}]}}";
  Setup y = build(two, hw, ft);
  ck_assert_double_eq(y.mem->blocks[0].gradients, 0);
  ck_assert_double_eq(y.mem->blocks[0].optimizer, 0);
  ck_assert_double_eq(y.mem->blocks[0].activations, 0); /* nothing before it is trained: no backward */
  ck_assert_double_eq_tol(y.mem->blocks[1].gradients, P2, 0.5);
  ck_assert_double_eq_tol(y.mem->blocks[1].optimizer, P2 / 2 * 12, 0.5);
  setup_free(&y);
}
END_TEST

START_TEST(test_recompute_full_saves_activations)
{
  const char *none = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":2048,\"micro_batch\":1,"
                     "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}}";
  Setup a = build("models/llama2-70b.json", "hardware/dgx-a100-2048.json", none);
  Setup b = build("models/llama2-70b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-fsdp.json");
  ck_assert_int_eq(b.c->recompute, MM_RECOMPUTE_FULL);
  /* full recompute keeps one hidden-state per layer: 80 x s x h x 2 bytes (+ head and one layer) */
  double kept = 80.0 * 4096 * 8192 * 2;
  ck_assert_double_ge(b.mem->total.activations, kept);
  ck_assert_double_lt(b.mem->total.activations, 0.2 * a.mem->total.activations);
  ck_assert(!a.mem->fits); /* 80 layers of 1 GiB activations do not fit in 80 GiB */
  ck_assert(b.mem->fits);
  setup_free(&a);
  setup_free(&b);
}
END_TEST

START_TEST(test_gpt3_ddp_zionex_does_not_fit)
{
  Setup x = build("models/gpt3-175b.json", "hardware/zionex-a100-128.json", "configs/llm-pretrain-ddp.json");
  ck_assert(!x.mem->fits);
  /* a full replica of the weights alone is 349 GB, far beyond 40 GiB */
  ck_assert_double_gt(x.mem->total.weights, 300e9);
  ck_assert_double_eq_tol(x.mem->capacity_bytes, 40.0 * 1024 * 1024 * 1024, 1);
  setup_free(&x);
}
END_TEST

START_TEST(test_gpt3_fsdp_2048_fits)
{
  Setup x = build("models/gpt3-175b.json", "hardware/dgx-a100-2048.json", "configs/llm-pretrain-fsdp.json");
  ck_assert(x.mem->fits);
  /* 16 bytes per parameter (bf16 weight + bf16 grad + 12 B adam) sharded 2048 ways */
  double states = x.mem->total.weights + x.mem->total.gradients + x.mem->total.optimizer;
  ck_assert_double_eq_tol(states / (16.0 * 174.6e9 / 2048), 1.0, 0.01);
  setup_free(&x);
}
END_TEST

START_TEST(test_mp_table_wise_uneven)
{
  g_autofree char *hw = node8();
  const char *model = "{\"name\":\"d\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":10,\"rows\":1000,"
                      "\"dim\":16,\"pooling\":2,\"dtype\":\"fp16\"},{\"kind\":\"mlp\",\"count\":1,\"width\":16}]}";
  const char *cfg = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,\"parallelism\":{"
                    "\"embedding_bag\":[{\"strategy\":\"mp\",\"degree\":8}],"
                    "\"default\":[{\"strategy\":\"ddp\",\"degree\":8}]}}";
  Setup x = build(model, hw, cfg);
  /* 10 tables on 8 devices: the busiest holds 2 */
  ck_assert_double_eq_tol(x.mem->blocks[0].weights, 2.0 * 1000 * 16 * 2, 0.5);
  /* rowwise adagrad: one fp32 state per row, plus an fp32 master copy of fp16 rows */
  ck_assert_double_eq_tol(x.mem->blocks[0].optimizer, 2.0 * 1000 * 16 * (4.0 / 16 + 4), 0.5);
  ck_assert_double_gt(x.mem->total.comm_buffers, 0);
  setup_free(&x);
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
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(memory_suite());
}

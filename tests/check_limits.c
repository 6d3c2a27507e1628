/* check_limits: numeric limits: sizes whose products overflow, iterations past the engine's clock,
 * micro-step counts past the op limit; and the inputs fuzzing found (each a regression test). */
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "report/report.h"
#include "testutil.h"

/* ---- inputs past a limit: exit 1 with the file and the JSON path ------------------------ */

typedef enum { L_MODEL, L_CONFIG } LimitKind;

typedef struct {
  const char *what;
  LimitKind kind;      /* which file the text replaces */
  const char *text;
  const char *model;   /* L_CONFIG: the shipped model; L_MODEL: unused */
  const char *hw;      /* shipped system, or a system's JSON ("@DEV@": an A100-80GB), or NULL for one A100-80GB */
  const char *where;   /* the JSON path the message names */
  const char *says;    /* a fragment of the message */
} LimitCase;

#define DDP_ALL "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}"
#define FSDP_ALL "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}"
/* two one-GPU nodes joined by one 1 Mb/s NIC each (the schema's slowest) */
#define SLOW_SYSTEM                                                                                          \
  "{\"name\":\"slow\",\"device\":\"@DEV@\",\"gpus_per_node\":1,\"nodes\":2,\"inter_node\":{\"topology\":" \
  "\"fat_tree\",\"nics_per_node\":1,\"nic_bw_Gbps\":0.001}}"
/* a DLRM of 2^50 embedding parameters and a small MLP */
#define SLOW_DLRM                                                                                              \
  "{\"name\":\"d\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":1,\"rows\":1099511627776,\"dim\":1024," \
  "\"pooling\":1},{\"kind\":\"mlp\",\"count\":1,\"width\":16}]}"

static const LimitCase limit_cases[] = {
  /* defect 5: products of sizes overflowed int64_t (a DLRM of 2^53 rows reported 2.11 GiB) */
  {"rows 2^53", L_MODEL,
   "{\"name\":\"t\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":1,\"rows\":9007199254740992,\"dim\":94,"
   "\"pooling\":1}]}", NULL, NULL, "$.blocks[0]", "tables x rows x dim"},
  {"tables x rows x dim past 2^63", L_MODEL,
   "{\"name\":\"t\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":4294967296,\"rows\":4294967296,"
   "\"dim\":1048576,\"pooling\":1}]}", NULL, NULL, "$.blocks[0]", "2^53"},
  {"a transformer of 2^24 x 2^24 matrices", L_MODEL,
   "{\"name\":\"t\",\"seq_len\":8,\"blocks\":[{\"kind\":\"transformer\",\"count\":4096,\"hidden\":16777216,"
   "\"heads\":1,\"ffn\":16777216}]}", NULL, NULL, "$.blocks[0]", "parameters"},
  {"experts multiply an MLP", L_MODEL,
   "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":1024,\"width\":16777216,\"experts\":1048576}]}", NULL,
   NULL, "$.blocks[0]", "experts"},
  {"blocks that are each fine but too many together", L_MODEL,
   "{\"name\":\"t\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":1,\"rows\":4503599627370496,\"dim\":1,"
   "\"pooling\":1},{\"kind\":\"embedding_bag\",\"tables\":1,\"rows\":4503599627370496,\"dim\":2,\"pooling\":1}]}",
   NULL, NULL, "$.blocks[1]", "with the blocks before it"},
  {"more repeated layers than a graph holds", L_MODEL,
   "{\"name\":\"t\",\"blocks\":[{\"kind\":\"mlp\",\"count\":40000,\"width\":4},{\"kind\":\"mlp\",\"count\":40000,"
   "\"width\":4}]}", NULL, NULL, "$.blocks[1].count", "65536"},
  /* defect 3: iterations past 2^64 ps aborted in the engine (heap_push: t >= e->now) */
  {"global batch 2^25 on one GPU", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":33554432,\"micro_batch\":33554432," DDP_ALL "}",
   "models/llama3-8b.json", NULL, "$.global_batch", "simulated time"},
  {"config seq_len at the schema maximum", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,\"seq_len\":16777216," FSDP_ALL "}",
   "models/gpt3-175b.json", "hardware/dgx-h200-8.json", "$.seq_len", "simulated time"},
  {"global batch 2^40 on 2048 GPUs", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":1099511627776," FSDP_ALL "}", "models/llama2-70b.json",
   "hardware/dgx-a100-2048.json", "$.global_batch", "simulated time"},
  {"a prompt of 2^24 tokens", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"inference\",\"global_batch\":1024,\"inference\":{\"prompt_tokens\":16777216,"
   "\"output_tokens\":1}," DDP_ALL "}", "models/llama3-70b.json", NULL, "$.inference", "the prefill"},
  /* defect 4: op arrays grew ~360 KB per micro-step until memory ran out; 2^32 wrapped to 0 */
  {"65536 micro-steps", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":65536,\"micro_batch\":1," DDP_ALL "}",
   "models/llama3-8b.json", NULL, "$.micro_batch", "ops"},
  {"2^32 micro-steps", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":4294967296,\"micro_batch\":1," DDP_ALL "}",
   "models/llama3-8b.json", NULL, "$.micro_batch", "4294967296 micro-steps"},
  /* ... and iterations whose communication, not compute, passes it */
  {"gradients of 2^50 parameters over a 1 Mb/s network", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":8," DDP_ALL "}", "@SLOWDLRM@", SLOW_SYSTEM,
   "$.parallelism", "gradient synchronization"},
  {"tensor parallelism over a 1 Mb/s network", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,\"parallelism\":{\"default\":[{\"strategy\":"
   "\"tp\",\"degree\":2}]}}", "models/llama3-8b.json", SLOW_SYSTEM, "$.global_batch", "communication"},
  /* ring attention over 512 context-parallel ranks: a piece and a K/V pass per rank and attention core,
   * 3.6 GB of ops in one program per thread before the limit counted them (a sweep ran out of memory) */
  {"ring attention over 512 ranks, 2048 micro-steps", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":2048,\"micro_batch\":1,\"pipeline\":{\"degree\":2},"
   "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"cp\",\"degree\":\"all\"}]}}",
   "models/llama2-70b.json", "hardware/dgx-a100-2048.json", "$.micro_batch", "ring attention"},
  /* each stage's program under the limit, all 16 together over it (every stage is held at once: a
   * 4096-layer model over 256 stages grew past 6 GB before it was stopped) */
  {"16 pipeline stages of 65536 micro-steps", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":1048576,\"micro_batch\":1,\"pipeline\":{\"degree\":16},"
   "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}",
   "models/llama2-70b.json", "hardware/dgx-a100-2048.json", "$.micro_batch", "in all, which madmax holds at once"},
  {"2^40 micro-steps from the whole-batch default", L_CONFIG,
   "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch_tokens\":1099511627776,\"micro_batch\":1," DDP_ALL "}",
   "models/mpt-7b.json", NULL, "$.micro_batch", "ops"},
};

/* The system of a case: a shipped one, one written from JSON ("@DEV@": an A100-80GB), or one
 * A100-80GB. (transfer full) */
static char *system_file(const char *hw, int i)
{
  if (hw && hw[0] != '{') return mm_test_src(hw);
  g_autofree char *dev = mm_test_src("hardware/devices/a100-80gb.json");
  g_autoptr(GString) text = g_string_new(hw ? hw : "{\"name\":\"one\",\"device\":\"@DEV@\",\"gpus_per_node\":1,\"nodes\":1}");
  g_string_replace(text, "@DEV@", dev, 0);
  g_autofree char *name = g_strdup_printf("system%02d.json", i);
  return mm_test_write(name, text->str);
}

START_TEST(test_limit_rejected)
{
  const LimitCase *lc = &limit_cases[_i];
  g_autofree char *name = g_strdup_printf("limit%02d.json", _i);
  g_autofree char *file = mm_test_write(name, lc->text);
  g_autofree char *model = lc->kind == L_MODEL                       ? g_strdup(file)
                           : strcmp(lc->model, "@SLOWDLRM@") == 0 ? mm_test_write("slow-dlrm.json", SLOW_DLRM)
                                                                 : mm_test_src(lc->model);
  g_autofree char *hw = system_file(lc->hw, _i);
  g_autofree char *cfg = lc->kind == L_CONFIG ? g_strdup(file) : mm_test_src("configs/llm-pretrain-fsdp.json");

  /* library: a range error naming the file and the path, before anything is lowered */
  g_autoptr(GError) error = NULL;
  g_autoptr(MmModel) m = mm_model_load(model, &error);
  g_autoptr(MmHardware) h = m ? mm_hardware_load(hw, &error) : NULL;
  g_autoptr(MmParallelConfig) c = h ? mm_parallel_load(cfg, &error) : NULL;
  g_autoptr(MmScenario) s = c ? mm_scenario_new(m, h, c, NULL, &error) : NULL;
  ck_assert_msg(s == NULL, "case '%s' was accepted", lc->what);
  ck_assert_msg(error && error->domain == MM_CONFIG_ERROR && error->code == MM_CONFIG_ERROR_RANGE,
                "case '%s': %s", lc->what, error ? error->message : "no error");
  g_autofree char *where = g_strdup_printf("%s: %s: ", file, lc->where);
  ck_assert_msg(g_str_has_prefix(error->message, where), "case '%s': message does not start with '%s': %s", lc->what,
                where, error->message);
  ck_assert_msg(strstr(error->message, lc->says) != NULL, "case '%s': message lacks '%s': %s", lc->what, lc->says,
                error->message);

  /* command line: run exits 1 with that one line, and writes nothing */
  const char *args[] = {"run", "-m", model, "-H", hw, "-c", cfg, NULL};
  g_autofree char *out = NULL, *err = NULL;
  int rc = mm_test_cli(args, &out, &err);
  ck_assert_msg(rc == 1, "case '%s': exit %d, stderr: %s", lc->what, rc, err);
  g_autofree char *line = g_strdup_printf("madmax: %s\n", error->message);
  ck_assert_str_eq(err, line);
  ck_assert_str_eq(out, "");
}
END_TEST

/* Just below the limit every count is exact: 3 tables x 1e15 + 7 rows x 3 columns. */
START_TEST(test_large_sizes_exact)
{
  const char *text = "{\"name\":\"t\",\"blocks\":[{\"kind\":\"embedding_bag\",\"tables\":3,"
                     "\"rows\":1000000000000007,\"dim\":3,\"pooling\":1}]}";
  g_autoptr(GError) error = NULL;
  g_autoptr(MmModel) m = mm_model_parse("big.json", text, strlen(text), &error);
  ck_assert_msg(m != NULL, "%s", error ? error->message : "");
  g_autoptr(MmGraph) g = mm_graph_new(m);
  ck_assert_int_eq(g->total_params, INT64_C(9000000000000063));
}
END_TEST

/* ---- the engine's clock ------------------------------------------------------------------ */

START_TEST(test_time_conversion_saturates)
{
  ck_assert_uint_eq(mm_time_from_s(1.5), 1500000000000u);
  ck_assert_uint_eq(mm_time_from_s(0), 0);
  ck_assert_uint_eq(mm_time_from_s(-3), 0);
  ck_assert_uint_eq(mm_time_from_s(NAN), 0);
  ck_assert_uint_eq(mm_time_from_s(1.8e7), (MmTime)18000000000000000000.0);
  ck_assert(mm_time_from_s(1.9e7) == MM_TIME_MAX);
  ck_assert(mm_time_from_s(INFINITY) == MM_TIME_MAX);
}
END_TEST

/* Ops whose times add up past 2^64 ps fail the run with an error instead of wrapping (the
 * engine used to abort on its time-never-goes-backwards assertion). */
START_TEST(test_engine_clock_overflow)
{
  /* fixed ops in a row */
  MmEngineOp ops[3] = {
    {.stream = 0, .coll = MM_NO_COLL},
    {.stream = 0, .coll = MM_NO_COLL},
    {.stream = 1, .coll = MM_NO_COLL, .dep_first = 0, .n_deps = 1},
  };
  uint32_t deps[1] = {1};
  MmTime dur[3] = {MM_TIME_MAX / 2 + 1, MM_TIME_MAX / 2 + 1, 1};
  MmEngineProgram pr = {ops, 3, deps, 2, NULL, NULL, 0};
  MmEngineClass cl = {0, dur, 0, NULL, 0};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) e = mm_engine_new(&pr, 1, &cl, 1, &error);
  ck_assert_ptr_nonnull(e);
  ck_assert(!mm_engine_run(e, &error));
  ck_assert_msg(g_error_matches(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_OVERFLOW), "%s", error->message);
  /* a run that fits still runs on the same engine value afterwards */
  g_clear_error(&error);
  dur[0] = dur[1] = 10;
  ck_assert(mm_engine_run(e, &error));
  ck_assert_uint_eq(mm_engine_makespan(e), 21);

  /* a flow whose work takes longer than the clock holds */
  MmEngineOp fl[1] = {{.stream = 0, .coll = MM_NO_COLL, .xfer_first = 0, .n_xfer = 1}};
  uint32_t link[1] = {0};
  double bytes[1] = {1e20};
  double bw[1] = {1.0};
  MmTime fdur[1] = {5};
  MmEngineProgram fp = {fl, 1, deps, 1, link, bytes, 1};
  MmEngineClass fc = {0, fdur, 0, bw, 0};
  g_autoptr(MmEngine) f = mm_engine_new(&fp, 1, &fc, 1, &error);
  ck_assert_ptr_nonnull(f);
  ck_assert(!mm_engine_run(f, &error));
  ck_assert(g_error_matches(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_OVERFLOW));
}
END_TEST

/* ---- inputs the fuzzers found ----------------------------------------------------------------- */

typedef struct {
  const char *what;
  const char *harness; /* fuzz/fuzz_HARNESS.c */
  const char *text;
  const char *says;    /* a fragment of the error */
} FuzzCase;

static const FuzzCase fuzz_cases[] = {
  /* plot.c converted a huge pid to int64_t (undefined behaviour; fixed by the plot rewrite) */
  {"trace: pid 3.3e81", "trace",
   "{\"traceEvents\":[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"p\"}},"
   "{\"name\":\"x\",\"ph\":\"X\",\"pid\":3.3e81,\"tid\":0,\"ts\":0,\"dur\":1,\"cat\":\"fwd\"}]}",
   "$.traceEvents[1].pid"},
};

START_TEST(test_fuzz_found)
{
  const FuzzCase *fc = &fuzz_cases[_i];
  g_autofree char *name = g_strdup_printf("fuzz%02d.json", _i);
  g_autofree char *file = mm_test_write(name, fc->text);
  g_autoptr(GError) error = NULL;
  if (strcmp(fc->harness, "trace") == 0) { /* what fuzz_trace runs */
    const char *inputs[] = {file};
    MmPlotOptions o = {0};
    g_autofree char *dat = NULL;
    g_autofree char *script = mm_plot_script(MM_PLOT_TIMELINE, inputs, 1, "x.png", &o, &dat, &error);
    ck_assert_msg(script == NULL && error && error->domain == MM_REPORT_ERROR, "case '%s' was accepted", fc->what);
  } else {
    ck_abort_msg("no harness %s", fc->harness);
  }
  ck_assert_msg(strstr(error->message, fc->says) != NULL, "case '%s': %s", fc->what, error->message);
}
END_TEST

static Suite *limits_suite(void)
{
  Suite *s = suite_create("limits");
  TCase *tc = tcase_create("limits");
  tcase_add_loop_test(tc, test_limit_rejected, 0, (int)G_N_ELEMENTS(limit_cases));
  tcase_add_test(tc, test_large_sizes_exact);
  tcase_add_test(tc, test_time_conversion_saturates);
  tcase_add_test(tc, test_engine_clock_overflow);
  tcase_add_loop_test(tc, test_fuzz_found, 0, (int)G_N_ELEMENTS(fuzz_cases));
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(limits_suite());
}

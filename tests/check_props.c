/* check_props: properties over thousands of generated valid inputs (seeded, so every run sees the
 * same ones): the iteration lies between each program's critical path and the serialized sum of
 * all programs, no op runs faster than alone, memory parts add up, symmetric and per-device
 * simulations agree, faster hardware is never slower, and no document holds NaN or infinity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Accepted inputs to check: MM_PROPS_CONFIGS, else 3000 (sanitizer builds set fewer). */
static guint configs_wanted(void)
{
  const char *env = g_getenv("MM_PROPS_CONFIGS");
  return env && atoi(env) > 0 ? (guint)atoi(env) : 3000;
}

/* ---- generated inputs ---------------------------------------------------------------------- */

static int64_t pick(GRand *r, const int64_t *v, guint n)
{
  return v[g_rand_int_range(r, 0, (gint32)n)];
}
#define PICK(r, ...) pick(r, (const int64_t[]){__VA_ARGS__}, G_N_ELEMENTS(((const int64_t[]){__VA_ARGS__})))
#define CHANCE(r, p) (g_rand_double(r) < (p))

typedef enum { FAM_LLM, FAM_MOE, FAM_DLRM } Family;

/* The generators draw every random number in a statement of its own: the order in which a
 * call's arguments are evaluated is unspecified (gcc and clang differ), and the inputs must be
 * the same whatever compiled the test. */

/* A small model of @fam: a few layers of modest width, so that one simulation takes well
 * under a millisecond. (transfer full) */
static char *gen_model(GRand *r, Family fam)
{
  GString *s = g_string_new("{\"name\":\"gen\",");
  const gboolean bf16 = CHANCE(r, 0.8), fp16 = CHANCE(r, 0.5);
  const char *dtype = bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
  if (fam == FAM_DLRM) {
    const int64_t dim = PICK(r, 16, 32, 64, 128), tables = PICK(r, 4, 8, 16, 64);
    const int64_t rows = PICK(r, 1000, 100000, 4000000);
    const int pooling = g_rand_int_range(r, 1, 40), bottom = g_rand_int_range(r, 1, 4);
    const int64_t bwidth = PICK(r, 128, 512, 1024);
    const int in = g_rand_int_range(r, 8, 512);
    const gboolean dot = CHANCE(r, 0.7);
    const int top = g_rand_int_range(r, 1, 4);
    const int64_t twidth = PICK(r, 256, 512, 1024);
    const gboolean moe = CHANCE(r, 0.3);
    g_string_append_printf(s,
                           "\"dtype\":\"%s\",\"blocks\":["
                           "{\"kind\":\"embedding_bag\",\"name\":\"tables\",\"tables\":%" G_GINT64_FORMAT
                           ",\"rows\":%" G_GINT64_FORMAT ",\"dim\":%" G_GINT64_FORMAT ",\"pooling\":%d},"
                           "{\"kind\":\"mlp\",\"name\":\"bottom\",\"inputs\":[],\"count\":%d,\"width\":%" G_GINT64_FORMAT
                           ",\"input_dim\":%d,\"output_dim\":%" G_GINT64_FORMAT "},"
                           "{\"kind\":\"interaction\",\"name\":\"inter\",\"op\":\"%s\",\"inputs\":[\"tables\",\"bottom\"]},"
                           "{\"kind\":\"mlp\",\"name\":\"top\",\"count\":%d,\"width\":%" G_GINT64_FORMAT "%s}]}",
                           dtype, tables, rows, dim, pooling, bottom, bwidth, in, dim, dot ? "dot" : "concat", top, twidth,
                           moe ? ",\"experts\":4,\"top_k\":1" : "");
    return g_string_free(s, FALSE);
  }
  const int64_t heads = PICK(r, 4, 8, 16), hidden = heads * PICK(r, 32, 64, 128);
  const gboolean mha = CHANCE(r, 0.5);
  const int64_t kv = mha ? heads : PICK(r, 1, 2, 4);
  const int64_t layers = PICK(r, 2, 3, 4, 6, 8), seq = PICK(r, 128, 256, 512, 1024);
  g_string_append_printf(s, "\"seq_len\":%" G_GINT64_FORMAT ",\"dtype\":\"%s\",\"blocks\":[", seq, dtype);
  const gboolean head = CHANCE(r, 0.8), tied_draw = CHANCE(r, 0.3), tied = head && tied_draw;
  const int64_t vocab = PICK(r, 1000, 32000);
  const gboolean positions = CHANCE(r, 0.2);
  if (head)
    g_string_append_printf(s, "{\"kind\":\"token_embedding\",\"vocab\":%" G_GINT64_FORMAT ",\"hidden\":%" G_GINT64_FORMAT
                           "%s},", vocab, hidden, positions ? ",\"positions\":1024" : "");
  const int64_t ffn = hidden * PICK(r, 2, 4);
  const gboolean swiglu = CHANCE(r, 0.5), rms = CHANCE(r, 0.5), flash = CHANCE(r, 0.8), bias = CHANCE(r, 0.3);
  const gboolean dropout = CHANCE(r, 0.2);
  g_string_append_printf(s,
                         "{\"kind\":\"transformer\",\"name\":\"decoder\",\"count\":%" G_GINT64_FORMAT ",\"hidden\":%" G_GINT64_FORMAT
                         ",\"heads\":%" G_GINT64_FORMAT ",\"kv_heads\":%" G_GINT64_FORMAT ",\"ffn\":%" G_GINT64_FORMAT
                         ",\"ffn_kind\":\"%s\",\"norm\":\"%s\",\"attention\":\"%s\",\"bias\":%s,\"dropout\":%s",
                         layers, hidden, heads, kv, ffn, swiglu ? "swiglu" : "gelu", rms ? "rmsnorm" : "layernorm",
                         flash ? "flash" : "eager", bias ? "true" : "false", dropout ? "true" : "false");
  if (fam == FAM_MOE) {
    const int64_t experts = PICK(r, 4, 8, 16), top_k = PICK(r, 1, 2);
    const gboolean shared = CHANCE(r, 0.3);
    g_string_append_printf(s, ",\"experts\":%" G_GINT64_FORMAT ",\"top_k\":%" G_GINT64_FORMAT "%s", experts, top_k,
                           shared ? ",\"shared_experts\":1" : "");
  }
  if (CHANCE(r, 0.1)) g_string_append(s, ",\"kv_lora_rank\":64,\"q_lora_rank\":96,\"rope_head_dim\":16");
  g_string_append(s, "}");
  if (head)
    g_string_append_printf(s, ",{\"kind\":\"lm_head\",\"vocab\":%" G_GINT64_FORMAT ",\"hidden\":%" G_GINT64_FORMAT
                           ",\"tied\":%s}", vocab, hidden, tied ? "true" : "false");
  g_string_append(s, "]}");
  return g_string_free(s, FALSE);
}

/* Systems to resize (the point's nodes). */
static const char *const systems[] = {
  "hardware/dgx-h200-8.json", "hardware/mi300x-8.json", "hardware/mi210-4.json", "hardware/zionex-a100-128.json",
  "hardware/dgx-a100-2048.json", "hardware/mi300x-1024.json", "hardware/gaudi2-128.json", "hardware/aws-p4de-a100-80gb.json",
};

static void level(GString *s, const char *strategy, const char *degree, const char *extra)
{
  g_string_append_printf(s, "%s{\"strategy\":\"%s\",\"degree\":%s%s}", s->str[s->len - 1] == '[' ? "" : ",", strategy,
                         degree, extra ? extra : "");
}

/* A config for @fam on @devices devices: pipeline, levels, task, batch, options. Not every
 * one resolves (a degree may not divide heads, a micro-batch the local batch); the caller
 * keeps those that do. (transfer full) */
static char *gen_config(GRand *r, Family fam, int64_t devices, int64_t gpus_per_node)
{
  GString *s = g_string_new("{\"name\":\"gen\",");
  const double t = g_rand_double(r);
  const gboolean inference = t < 0.25, finetune = !inference && t < 0.35;
  const gboolean piped = fam != FAM_DLRM && !inference && CHANCE(r, 0.3);
  const int64_t stages = PICK(r, 2, 4), pp = piped ? MIN(stages, devices) : 1;
  g_string_append_printf(s, "\"task\":\"%s\",", inference ? "inference" : finetune ? "finetune" : "pretrain");
  const int64_t micro = PICK(r, 1, 2, 4), per_stage = PICK(r, 1, 2, 4, 8), plain = PICK(r, 1, 1, 2, 4);
  const int64_t steps = pp > 1 ? per_stage * pp : plain;
  g_string_append_printf(s, "\"global_batch\":%" G_GINT64_FORMAT ",", devices * micro * steps);
  if (CHANCE(r, 0.7)) g_string_append_printf(s, "\"micro_batch\":%" G_GINT64_FORMAT ",", micro);
  if (finetune) g_string_append(s, fam == FAM_DLRM ? "\"frozen\":[\"bottom\"]," : "\"frozen\":[\"token_embedding\",\"lm_head\"],");
  const gboolean serving = inference && fam != FAM_DLRM && CHANCE(r, 0.7);
  if (serving) {
    const int64_t prompt = PICK(r, 64, 128, 512), output = PICK(r, 8, 64, 256);
    const gboolean graphs = CHANCE(r, 0.5), custom = CHANCE(r, 0.5);
    g_string_append_printf(s, "\"inference\":{\"prompt_tokens\":%" G_GINT64_FORMAT ",\"output_tokens\":%" G_GINT64_FORMAT
                           ",\"cuda_graphs\":%s,\"custom_all_reduce\":%s},",
                           prompt, output, graphs ? "true" : "false", custom ? "true" : "false");
  }
  if (!inference) {
    const gboolean none = CHANCE(r, 0.5), full = CHANCE(r, 0.5);
    const int prefetch = g_rand_int_range(r, 0, 3);
    const gboolean overlap = CHANCE(r, 0.7), big = CHANCE(r, 0.5);
    g_string_append_printf(s, "\"recompute\":\"%s\",\"fsdp_prefetch\":%d,\"ddp_overlap\":%s,\"ddp_bucket_MB\":%d,",
                           none ? "none" : full ? "full" : "selective", prefetch, overlap ? "true" : "false", big ? 25 : 2);
    if (CHANCE(r, 0.2)) g_string_append(s, "\"precision\":{\"grads\":\"fp32\"},");
  }
  if (CHANCE(r, 0.15)) {
    const gboolean ring = CHANCE(r, 0.5);
    g_string_append_printf(s, "\"collectives\":{\"all_reduce\":\"%s\"},", ring ? "ring" : "tree");
  }
  if (pp > 1) {
    const gboolean inter = CHANCE(r, 0.3), f1b = CHANCE(r, 0.5), overlap = CHANCE(r, 0.5);
    const gboolean dual = !inter && CHANCE(r, 0.3); /* resolves with recompute none and m >= 2p */
    g_string_append_printf(s, "\"pipeline\":{\"degree\":%" G_GINT64_FORMAT ",\"schedule\":\"%s\"%s,\"overlap_p2p\":%s},",
                           pp, inter ? "interleaved_1f1b" : dual ? "dualpipev" : f1b ? "1f1b" : "gpipe",
                           inter ? ",\"virtual_stages\":2" : "", overlap ? "true" : "false");
  }
  const int64_t stage = devices / pp, node = MIN(stage, gpus_per_node), want = PICK(r, 2, 4, 8);
  g_autofree char *small = g_strdup_printf("%" G_GINT64_FORMAT, MIN(node, want));
  const gboolean fsdp = CHANCE(r, 0.5);
  const int zero_stage = g_rand_int_range(r, 0, 3);
  g_autofree char *zero = g_strdup_printf(",\"zero\":%d", zero_stage);
  GString *lv = g_string_new("\"default\":[");
  const int shape = g_rand_int_range(r, 0, 5);
  const gboolean sp = CHANCE(r, 0.3);
  switch (shape) {
  case 0: break;
  case 1: level(lv, "tp", small, sp ? ",\"sequence_parallel\":true" : NULL); break;
  case 2: level(lv, fam == FAM_DLRM ? "tp" : "cp", small, NULL); break;
  case 3: level(lv, fam == FAM_DLRM ? "tp" : "ulysses", small, NULL); break;
  default: level(lv, "tp", "\"node\"", NULL); break;
  }
  const gboolean zero_given = CHANCE(r, 0.3);
  level(lv, fsdp ? "fsdp" : "ddp", "\"all\"", !fsdp && zero_given ? zero : NULL);
  g_string_append(lv, "]");
  const gboolean ep = fam == FAM_MOE && CHANCE(r, 0.6), skew = CHANCE(r, 0.3);
  if (ep && skew) g_string_append(s, "\"expert_skew\":0.5,");
  g_string_append(s, "\"parallelism\":{");
  if (ep) {
    g_string_append(s, "\"transformer\":[");
    level(s, "ep", small, NULL);
    level(s, "ddp", "\"all\"", NULL);
    g_string_append(s, "],");
  }
  if (fam == FAM_DLRM && CHANCE(r, 0.7)) {
    const gboolean mp = CHANCE(r, 0.6), a = CHANCE(r, 0.5), b = CHANCE(r, 0.5);
    g_string_append(s, "\"embedding_bag\":[");
    if (mp) level(s, "mp", "\"all\"", a ? ",\"sharding\":\"table\"" : b ? ",\"sharding\":\"row\"" : ",\"sharding\":\"column\"");
    else level(s, "ddp", "\"all\"", a ? ",\"grad_sync\":\"sparse\"" : ",\"grad_sync\":\"dense\"");
    g_string_append(s, "],");
  }
  g_string_append(s, lv->str);
  g_string_free(lv, TRUE);
  g_string_append(s, "}}");
  return g_string_free(s, FALSE);
}

/* ---- properties ---------------------------------------------------------------------------- */

typedef struct {
  guint tried, accepted, per_device, monotone_runs;
  guint steady; /* inputs whose steady-state run stood for the whole iteration */
  guint anomalies;     /* faster hardware, (slightly) longer iteration: see MONOTONE_TOL */
  double worst_anomaly;
} Tally;

/* Faster hardware never lengthens an iteration by more than this fraction. Not 0: flows share
 * links max-min fairly, and speeding one thing up can make transfers meet that did not: a
 * faster NIC makes an All2All draw its intra-node bytes sooner, under a tensor-parallel
 * AllReduce on the critical path (+1.3e-4); faster compute on 4 nodes of ZionEX brings a
 * pipeline receive into the FSDP traffic of a 2-stage cp + ep MoE (+5.6e-3). Such effects
 * exist in real networks too; the property is that they stay small. (MM_PROPS_VERBOSE=1
 * prints each.) */
#define MONOTONE_TOL 1e-2

/* Every number of @doc is finite. */
static void check_finite(const cJSON *j, GString *path, const char *ctx)
{
  if (cJSON_IsNumber(j)) ck_assert_msg(isfinite(j->valuedouble), "%s: %s is %g", ctx, path->str, j->valuedouble);
  guint i = 0;
  for (const cJSON *c = j->child; c; c = c->next, i++) {
    const gsize len = path->len;
    if (c->string) g_string_append_printf(path, ".%s", c->string);
    else g_string_append_printf(path, "[%u]", i);
    check_finite(c, path, ctx);
    g_string_truncate(path, len);
  }
}

static double num(const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  ck_assert_msg(cJSON_IsNumber(v), "no number \"%s\"", key);
  return v->valuedouble;
}

static void check_close(double a, double b, double rel, const char *what, const char *ctx)
{
  ck_assert_msg(fabs(a - b) <= rel * MAX(fabs(a), fabs(b)) + 1e-300, "%s: %s: %.17g != %.17g", ctx, what, a, b);
}

/* Each program's critical path (dependencies and stream order, every op at its time alone)
 * <= the iteration <= the serialized sum of all programs; every op of every class lasts at
 * least its time alone. Times are rounded to the picosecond per op. */
static void check_bounds(const MmPlan *p, const MmEngine *e, double iteration_s, const char *ctx)
{
  const double ps = 1e-12;
  double serial_all = 0, crit_max = 0;
  guint64 ops_all = 0;
  for (uint32_t k = 0; k < p->n_programs; k++) {
    const MmPlanProgram *pr = &p->programs[k];
    g_autofree double *finish = g_new0(double, pr->n_ops + 1);
    double last_on[MM_STREAM_COUNT] = {0}, crit = 0, serial = 0;
    for (uint32_t i = 0; i < pr->n_ops; i++) {
      const MmEngineOp *op = &pr->ops[i];
      double start = last_on[op->stream];
      for (uint32_t d = 0; d < op->n_deps; d++) start = MAX(start, finish[pr->deps[op->dep_first + d]]);
      finish[i] = start + pr->info[i].time_s;
      last_on[op->stream] = finish[i];
      crit = MAX(crit, finish[i]);
      serial += pr->info[i].time_s;
    }
    crit_max = MAX(crit_max, crit);
    serial_all += serial;
    ops_all += pr->n_ops;
    ck_assert_msg(iteration_s >= crit * (1 - 1e-9) - (double)pr->n_ops * ps,
                  "%s: iteration %.9g s below program %u's critical path %.9g s", ctx, iteration_s, k, crit);
  }
  ck_assert_msg(iteration_s <= serial_all * (1 + 1e-9) + (double)ops_all * ps,
                "%s: iteration %.9g s above the serialized sum %.9g s", ctx, iteration_s, serial_all);
  for (uint32_t c = 0; c < p->n_classes; c++) {
    const MmPlanProgram *pr = mm_plan_class_program(p, c);
    g_autofree MmTime *start = g_new(MmTime, pr->n_ops + 1), *end = g_new(MmTime, pr->n_ops + 1);
    mm_engine_class_times(e, c, start, end);
    for (uint32_t i = 0; i < pr->n_ops; i++)
      ck_assert_msg(mm_time_to_s(end[i] - start[i]) >= pr->info[i].time_s * (1 - 1e-9) - 2 * ps,
                    "%s: class %u op %u lasted %.9g s, less than alone (%.9g s)", ctx, c, i,
                    mm_time_to_s(end[i] - start[i]), pr->info[i].time_s);
  }
}

/* The run document's memory: the breakdown sums to per_device_bytes, the blocks plus the
 * transient activations and the buffers to the breakdown, and the busiest stage is the total. */
static void check_memory(const cJSON *mem, const MmMemory *m, const char *ctx)
{
  static const char *const parts[] = {"weights", "gradients", "optimizer", "activations", "kv_cache", "comm_buffers"};
  const cJSON *bd = cJSON_GetObjectItemCaseSensitive(mem, "breakdown");
  const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(mem, "by_block");
  double sum = 0;
  for (guint i = 0; i < G_N_ELEMENTS(parts); i++) {
    const double part = num(bd, parts[i]);
    ck_assert_msg(part >= 0, "%s: memory %s is negative", ctx, parts[i]);
    sum += part;
    double by_block = 0;
    for (const cJSON *b = blocks ? blocks->child : NULL; b; b = b->next) by_block += num(b, parts[i]);
    if (strcmp(parts[i], "activations") == 0) by_block += num(mem, "transient_activation_bytes");
    if (strcmp(parts[i], "comm_buffers") == 0) by_block = part; /* global: 0 per block */
    if (blocks) check_close(by_block, part, 1e-9, parts[i], ctx);
  }
  check_close(sum, num(mem, "per_device_bytes"), 1e-12, "memory parts", ctx);
  double busiest = 0;
  for (uint32_t st = 0; st < m->n_stages; st++) busiest = MAX(busiest, m->stage_bytes[st]);
  check_close(busiest, m->per_device_bytes, 1e-12, "busiest stage", ctx);
}

static MmSimulation *simulate_as(const MmInputs *in, const MmPoint *pt, gboolean per_device, gboolean timeline,
                                 const char *ctx)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) sim = mm_simulation_prepare(in, pt, &error);
  if (sim) sim->timeline = timeline;
  ck_assert_msg(sim && mm_simulation_run(sim, per_device, &error), "%s: a resolved scenario failed to simulate: %s",
                ctx, error ? error->message : "?");
  return g_steal_pointer(&sim);
}

static MmSimulation *simulate(const MmInputs *in, const MmPoint *pt, gboolean per_device, const char *ctx)
{
  return simulate_as(in, pt, per_device, FALSE, ctx);
}

/* The steady-state reduction (when it applies) gives the whole iteration's answer. */
static void check_steady(const MmInputs *in, const MmPoint *pt, const MmSimulation *full, Tally *tally,
                         const char *ctx)
{
  g_autoptr(MmSimulation) red = simulate(in, pt, FALSE, ctx);
  if (red->steady_micro_steps == 0) return;
  tally->steady++;
  const MmRunMetrics *a = &full->metrics, *b = &red->metrics;
  ck_assert_msg(a->iteration_time_s == b->iteration_time_s, "%s: steady-state run (%u micro-steps) %.17g s, whole %.17g s",
                ctx, red->steady_micro_steps, b->iteration_time_s, a->iteration_time_s);
  check_close(a->compute_s, b->compute_s, 1e-9, "steady compute_s", ctx);
  check_close(a->comm_s, b->comm_s, 1e-9, "steady comm_s", ctx);
  check_close(a->exposed_comm_s, b->exposed_comm_s, 1e-9, "steady exposed_comm_s", ctx);
  ck_assert_uint_eq(a->events, b->events);
}

/* Iteration time, and for serving the decode step's. */
static void times(const MmSimulation *sim, double *t)
{
  t[0] = sim->metrics.iteration_time_s;
  t[1] = sim->decode_plan ? sim->decode_metrics.iteration_time_s : 0;
}

static void check_one(const MmInputs *in, const MmPoint *base, int64_t devices, Tally *tally, const char *ctx)
{
  g_autoptr(MmSimulation) sim = simulate_as(in, base, FALSE, TRUE, ctx);
  check_steady(in, base, sim, tally, ctx);
  g_autoptr(cJSON) doc = mm_report_run_json(sim->plan, sim->engine, &sim->metrics, sim->memory);
  if (sim->decode_plan) {
    cJSON_AddItemToObject(doc, "serving", mm_report_serving_json(&sim->serving));
    cJSON_AddItemToObject(doc, "decode_step", mm_report_run_json(sim->decode_plan, sim->decode_engine,
                                                                 &sim->decode_metrics, NULL));
  }
  g_autoptr(cJSON) desc = mm_report_describe_json(sim->graph, sim->decode_graph, sim->scenario, sim->memory);
  g_autoptr(GString) path = g_string_new("$");
  check_finite(doc, path, ctx);
  check_finite(desc, path, ctx);
  check_bounds(sim->plan, sim->engine, sim->metrics.iteration_time_s, ctx);
  if (sim->decode_plan) check_bounds(sim->decode_plan, sim->decode_engine, sim->decode_metrics.iteration_time_s, ctx);
  check_memory(cJSON_GetObjectItemCaseSensitive(doc, "memory"), sim->memory, ctx);
  double t[2];
  times(sim, t);

  if (devices <= 32) { /* every device simulated: the same answer */
    g_autoptr(MmSimulation) pd = simulate(in, base, TRUE, ctx);
    double u[2];
    times(pd, u);
    check_close(u[0], t[0], 1e-9, "per-device iteration", ctx);
    check_close(u[1], t[1], 1e-9, "per-device decode step", ctx);
    tally->per_device++;
  }
  /* each hardware speed doubled (latencies halved): never slower; more HBM capacity: the same time */
  for (int k = 0; k < MM_SCALE_COUNT; k++) {
    MmPoint pt = *base;
    pt.scale[k] = k == MM_SCALE_LATENCY ? 0.5 : 2.0; /* a latency factor below 1 is faster */
    g_autoptr(MmSimulation) fast = simulate(in, &pt, FALSE, ctx);
    double u[2];
    times(fast, u);
    g_autofree char *what = g_strdup_printf("%s x%g", mm_scale_names[k], pt.scale[k]);
    for (int j = 0; j < 2; j++) {
      if (k == MM_SCALE_HBM_BYTES) check_close(u[j], t[j], 1e-12, what, ctx);
      else {
        ck_assert_msg(u[j] <= t[j] * (1 + MONOTONE_TOL), "%s: %s: %.9g s, slower than %.9g s", ctx, what, u[j], t[j]);
        if (u[j] > t[j] * (1 + 1e-9)) tally->anomalies++, tally->worst_anomaly = MAX(tally->worst_anomaly, u[j] / t[j] - 1);
        if (u[j] > t[j] * (1 + 1e-9) && g_getenv("MM_PROPS_VERBOSE")) printf("anomaly %.3g %s\n", u[j] / t[j] - 1, what);
      }
    }
    tally->monotone_runs++;
  }
}

START_TEST(test_properties)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(0x6d61646d); /* fixed: every run checks the same inputs */
  g_autoptr(GPtrArray) hws = g_ptr_array_new_with_free_func((GDestroyNotify)mm_hardware_free);
  for (guint i = 0; i < G_N_ELEMENTS(systems); i++) {
    g_autofree char *p = mm_test_src(systems[i]);
    g_autoptr(GError) error = NULL;
    MmHardware *h = mm_hardware_load(p, &error);
    ck_assert_msg(h != NULL, "%s", error ? error->message : "");
    g_ptr_array_add(hws, h);
  }
  const guint wanted = configs_wanted();
  Tally tally = {0};
  guint by_family[3] = {0};
  while (tally.accepted < wanted) {
    ck_assert_msg(tally.tried < 20 * wanted + 100, "only %u of %u generated inputs resolved", tally.accepted, tally.tried);
    tally.tried++;
    const Family fam = (Family)g_rand_int_range(r, 0, 3);
    const MmHardware *hw = g_ptr_array_index(hws, g_rand_int_range(r, 0, (gint32)hws->len));
    const int64_t many = PICK(r, 1, 1, 2, 4), nodes = hw->inter.present ? many : 1;
    if (hw->inter.n_dims > 0) continue; /* a torus keeps its size */
    g_autofree char *mtext = gen_model(r, fam);
    g_autofree char *ctext = gen_config(r, fam, nodes * hw->gpus_per_node, hw->gpus_per_node);
    g_autofree char *ctx = g_strdup_printf("input %u (%s, %" G_GINT64_FORMAT " nodes)\nmodel %s\nconfig %s", tally.tried,
                                           hw->path, nodes, mtext, ctext);
    g_autoptr(GError) error = NULL;
    g_autoptr(MmModel) m = mm_model_parse("gen-model.json", mtext, strlen(mtext), &error);
    ck_assert_msg(m != NULL, "%s: %s", ctx, error->message);
    g_autoptr(MmParallelConfig) c = mm_parallel_parse("gen-config.json", ctext, strlen(ctext), &error);
    ck_assert_msg(c != NULL, "%s: %s", ctx, error->message);
    MmPoint pt = {.nodes = nodes};
    g_autoptr(MmScenario) s = mm_scenario_new(m, hw, c, &pt, &error);
    if (!s) {
      ck_assert_msg(error->domain == MM_CONFIG_ERROR, "%s: %s", ctx, error->message);
      continue;
    }
    MmInputs in = {m, (MmHardware *)hw, c};
    check_one(&in, &pt, nodes * hw->gpus_per_node, &tally, ctx);
    tally.accepted++;
    by_family[fam]++;
  }
  /* the generator must keep reaching every family and the per-device comparison */
  for (int f = 0; f < 3; f++) ck_assert_uint_ge(by_family[f], wanted / 6);
  ck_assert_uint_ge(tally.per_device, wanted / 4);
  printf("props: %u inputs checked of %u generated (llm %u, moe %u, dlrm %u); %u per-device comparisons, %u "
         "steady-state reductions, %u scaled runs, %u of them slower by up to %.2g (link sharing)\n", tally.accepted,
         tally.tried, by_family[0], by_family[1], by_family[2], tally.per_device, tally.steady, tally.monotone_runs,
         tally.anomalies, tally.worst_anomaly);
}
END_TEST

int main(void)
{
  Suite *s = suite_create("props");
  TCase *tc = tcase_create("props");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_properties);
  suite_add_tcase(s, tc);
  return mm_test_main(s);
}

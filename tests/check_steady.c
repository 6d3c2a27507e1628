/* check_steady: the steady-state reduction of pipeline and gradient-accumulation schedules gives
 * the whole simulation's answer (mm_report_run_metrics_steady), and declines where it cannot. */
#include <math.h>
#include <string.h>

#include "testutil.h"

#define LLAMA70 "models/llama3-70b.json"
#define LLAMA8 "models/llama3-8b.json"
#define H100 "hardware/dgx-h100-2048.json"

typedef struct {
  const char *model, *hw;
  int64_t nodes;
  const char *config; /* inline JSON */
  gboolean reduces;   /* the reduction must apply */
} Case;

#define CFG(batch, rest) "{\"name\":\"t\",\"task\":\"pretrain\",\"global_batch_tokens\":" batch ",\"micro_batch\":1" rest "}"
#define TOKENS_16M "16777216"
#define TP8_FSDP "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}"
#define FSDP_ALL "\"parallelism\":{\"default\":[{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}"
#define TP2_DDP "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"ddp\",\"degree\":\"all\"}]}"
#define SP8_DDP(zero) "\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\"" zero "}]}"

/* micro-steps = sequences (2048 of 8192 tokens in 16M) / data-parallel ranks */
static const Case cases[] = {
  /* gradient accumulation (no pipeline): TP 8 + DDP over 4 nodes -> 512 micro-steps */
  {LLAMA70, H100, 4, CFG(TOKENS_16M, "," SP8_DDP("")), TRUE},
  {LLAMA70, H100, 4, CFG(TOKENS_16M, ",\"recompute\":\"full\"," SP8_DDP(",\"zero\":1")), TRUE},
  {LLAMA8, H100, 2, CFG(TOKENS_16M, "," FSDP_ALL), TRUE},
  /* 8 micro-steps (128 sequences over 16 ranks): the first attempt, 5 of them, is under 3/4 */
  {LLAMA8, H100, 2, CFG("1048576", "," FSDP_ALL), TRUE},
  {LLAMA8, H100, 2, CFG("1048576", ",\"ddp_overlap\":true," TP2_DDP), TRUE},
  {LLAMA8, H100, 2,
   CFG(TOKENS_16M, ",\"ddp_overlap\":false,\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":4},"
                   "{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}"),
   TRUE},
  /* 1F1B */
  {LLAMA70, H100, 16, CFG(TOKENS_16M, ",\"pipeline\":{\"degree\":4}," SP8_DDP("")), TRUE},
  {LLAMA70, H100, 16, CFG(TOKENS_16M, ",\"recompute\":\"selective\",\"pipeline\":{\"degree\":8}," SP8_DDP(",\"zero\":2")), TRUE},
  /* Megatron-LM 2021's separate gradient-accumulation pass after every backward */
  {LLAMA70, H100, 16, CFG(TOKENS_16M, ",\"grad_accumulation\":\"separate\",\"pipeline\":{\"degree\":4}," SP8_DDP("")), TRUE},
  /* torchtitan's per-op checkpointing; activation offload (its copies on their own streams) */
  {LLAMA70, H100, 16, CFG(TOKENS_16M, ",\"recompute\":\"op_selective\",\"pipeline\":{\"degree\":4}," SP8_DDP("")), TRUE},
  {LLAMA70, H100, 16, CFG(TOKENS_16M, ",\"offload_num_layers\":6,\"pipeline\":{\"degree\":4}," SP8_DDP("")), TRUE},
  {LLAMA70, H100, 8,
   CFG(TOKENS_16M, ",\"pipeline\":{\"degree\":4,\"overlap_p2p\":true}," TP8_FSDP),
   TRUE},
  {LLAMA8, H100, 4,
   CFG(TOKENS_16M, ",\"pipeline\":{\"degree\":2}," TP2_DDP),
   TRUE},
  {LLAMA70, H100, 256, CFG(TOKENS_16M, ",\"pipeline\":{\"degree\":8}," SP8_DDP("")), TRUE},
  {LLAMA70, H100, 256, CFG(TOKENS_16M, ",\"pipeline\":{\"degree\":16}," SP8_DDP("")), TRUE},
  /* 32 micro-steps of 16 stages: reduced to 21 */
  {LLAMA70, H100, 256, CFG("4194304", ",\"pipeline\":{\"degree\":16}," SP8_DDP("")), TRUE},
  /* context parallelism and a pipeline */
  {LLAMA70, H100, 32,
   CFG(TOKENS_16M, ",\"pipeline\":{\"degree\":4},\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":8},"
                   "{\"strategy\":\"cp\",\"degree\":2},{\"strategy\":\"ddp\",\"degree\":\"all\"}]}"),
   TRUE},
  /* experts, with an imbalanced rank (two behaviours per stage) */
  {"models/mixtral-8x7b.json", H100, 16,
   "{\"name\":\"t\",\"task\":\"pretrain\",\"global_batch\":4096,\"micro_batch\":1,\"expert_skew\":0.5,"
   "\"pipeline\":{\"degree\":2},\"parallelism\":{\"transformer\":[{\"strategy\":\"ep\",\"degree\":8},"
   "{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":1}],\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}",
   TRUE},
  /* tied embedding over the first and last stage (GPT-3), interleaved */
  {"models/gpt3-175b.json", "hardware/dgx-a100-2048.json", 64,
   "{\"name\":\"t\",\"task\":\"pretrain\",\"global_batch\":1536,\"micro_batch\":1,"
   "\"pipeline\":{\"degree\":8,\"schedule\":\"interleaved_1f1b\",\"virtual_stages\":3},"
   "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}",
   TRUE},
  /* interleaved 1F1B */
  {LLAMA70, H100, 16,
   CFG(TOKENS_16M, ",\"pipeline\":{\"degree\":4,\"schedule\":\"interleaved_1f1b\",\"virtual_stages\":2}," SP8_DDP(",\"zero\":1")),
   TRUE},
  {LLAMA70, H100, 16,
   CFG(TOKENS_16M, ",\"recompute\":\"full\",\"pipeline\":{\"degree\":2,\"schedule\":\"interleaved_1f1b\",\"virtual_stages\":4},"
       SP8_DDP("")),
   TRUE},
  /* interference: FSDP + pipelines, DDP overlap, separate gradient accumulation (found by review) */
  {LLAMA70, H100, 16, CFG(TOKENS_16M, ",\"ddp_overlap\":true,\"pipeline\":{\"degree\":4}," SP8_DDP("")), TRUE},
  {LLAMA70, H100, 16, CFG(TOKENS_16M, ",\"ddp_overlap\":true,\"grad_accumulation\":\"separate\",\"pipeline\":{\"degree\":4}," SP8_DDP(",\"zero\":1")), TRUE},
  {LLAMA70, H100, 8,
   CFG(TOKENS_16M, ",\"pipeline\":{\"degree\":4}," TP8_FSDP),
   TRUE},
  /* (settles slowly with interference: reduced at 24 periods) */
  {LLAMA70, H100, 8,
   CFG(TOKENS_16M, ",\"fsdp_reshard_after_forward\":true,\"pipeline\":{\"degree\":2}," TP8_FSDP),
   TRUE},
  {LLAMA8, H100, 2,
   CFG(TOKENS_16M, ",\"ddp_overlap\":true,\"grad_accumulation\":\"separate\"," TP2_DDP),
   TRUE},
  /* a long transient: the first stage (the embedding's FSDP gathers) 1.5% slower than the next, which
   * drains its warm-up lead for tens of periods (reduced at 96 periods of 256) */
  {LLAMA70, H100, 64,
   CFG(TOKENS_16M, ",\"recompute\":\"selective\",\"pipeline\":{\"degree\":8},\"parallelism\":{\"default\":[{\"strategy\":"
                   "\"sp\",\"degree\":8},{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}"),
   TRUE},
  /* DeepSpeed ZeRO-3's calls: per-tensor collectives, a layer gathered again after its recompute */
  {LLAMA8, H100, 4,
   CFG(TOKENS_16M, ",\"recompute\":\"full\",\"fsdp_prefetch\":0,\"fsdp_collectives\":\"per_tensor_list\","
                   "\"fsdp_regather_recompute\":true,\"pipeline\":{\"degree\":2}," FSDP_ALL),
   TRUE},
  {LLAMA8, H100, 4,
   CFG(TOKENS_16M, ",\"grad_accumulation\":\"separate\",\"pipeline\":{\"degree\":2,\"schedule\":\"interleaved_1f1b\",\"virtual_stages\":2},\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":2},"
                   "{\"strategy\":\"fsdp\",\"degree\":\"all\"}]}"),
   TRUE},
  {LLAMA70, H100, 16, CFG(TOKENS_16M, ",\"grad_accumulation\":\"separate\",\"pipeline\":{\"degree\":4,\"schedule\":\"zb_h1\"}," SP8_DDP("")), FALSE},
  /* declined: TP overlap's fused groups; GPipe has no steady part; too few micro-steps to gain */
  {LLAMA70, H100, 16,
   CFG(TOKENS_16M, ",\"pipeline\":{\"degree\":4},\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":8,"
                   "\"overlap\":\"async_tp\"},{\"strategy\":\"ddp\",\"degree\":\"all\"}]}"),
   FALSE},
  {LLAMA70, H100, 16, CFG(TOKENS_16M, ",\"pipeline\":{\"degree\":4,\"schedule\":\"gpipe\"}," SP8_DDP("")), FALSE},
  /* 24 micro-steps of 16 stages: the first attempt's 21 are over 3/4 of them (32: reduced, above) */
  {LLAMA70, H100, 256, CFG("3145728", ",\"pipeline\":{\"degree\":16}," SP8_DDP("")), FALSE},
  /* 6 micro-steps: 5 would be over 3/4 of them */
  {LLAMA8, H100, 2, CFG("786432", "," FSDP_ALL), FALSE},
  /* Llama 3 405B as published: 16 interleaved stages of 4 chunks, 128 micro-steps */
  {"models/llama3-405b.json", H100, 0, "configs/llama3-405b-pretrain.json", FALSE},
};

static MmSimulation *sim_of(const Case *c, gboolean timeline)
{
  g_autoptr(GError) error = NULL;
  MmSimOptions opt = {.nodes = c->nodes, .timeline = timeline};
  MmSimulation *x = mm_test_sim(c->model, c->hw, c->config, &opt, &error);
  ck_assert_msg(x, "%s: %s", c->config, error ? error->message : "?");
  return x;
}

/* Relative agreement of two sums of the same terms added in another order. */
#define SAME(a, b, what)                                                                                           \
  ck_assert_msg(fabs((a) - (b)) <= 1e-9 * fmax(fabs(a), fabs(b)) + 1e-15, "case %d %s: full %.17g steady %.17g", \
                _i, what, (double)(a), (double)(b))

static void same_metrics(const MmRunMetrics *a, const MmRunMetrics *b, int _i);

START_TEST(test_steady_equals_full)
{
  const Case *c = &cases[_i];
  g_autoptr(MmSimulation) full = sim_of(c, TRUE);
  g_autoptr(MmSimulation) red = sim_of(c, FALSE);
  ck_assert_uint_eq(full->steady_micro_steps, 0);
  ck_assert_uint_eq(full->plan->n_runs, 0);
  if (red->plan->n_runs > 0) {
    /* the layer reduction (mm_plan_cut) ran instead: few micro-steps, no pipeline */
    ck_assert_int_eq(red->scenario->pp, 1);
    ck_assert_uint_eq(red->steady_micro_steps, 0);
    ck_assert_uint_lt(red->plan->programs[0].n_ops, full->plan->programs[0].n_ops);
  } else if (c->reduces) {
    ck_assert_msg(red->steady_micro_steps > 0 && red->steady_micro_steps < full->scenario->micro_steps,
                  "case %d: not reduced (%u of %" G_GINT64_FORMAT " micro-steps)", _i, red->steady_micro_steps,
                  full->scenario->micro_steps);
    ck_assert_uint_eq(red->plan->micro_steps, red->steady_micro_steps);
  } else {
    ck_assert_uint_eq(red->steady_micro_steps, 0);
  }
  same_metrics(&full->metrics, &red->metrics, _i);
}
END_TEST

/* The layer reduction: symmetric points without a pipeline, as a sweep of LLaMA-2-70B on 2,048 A100s
 * meets them (each shortened, then agreeing with the whole simulation). */
static const Case cut_cases[] = {
#define L2 "models/llama2-70b.json", "hardware/dgx-a100-2048.json", 0
#define STRAT(x) ",\"parallelism\":{\"default\":[" x "]}}"
#define B2048 "{\"name\":\"t\",\"task\":\"pretrain\",\"global_batch\":2048,\"fsdp_prefetch\":1"
  {L2, B2048 ",\"recompute\":\"full\"" STRAT("{\"strategy\":\"fsdp\",\"degree\":\"all\"}"), TRUE},
  {L2, B2048 ",\"micro_batch\":1" STRAT("{\"strategy\":\"tp\",\"degree\":8},{\"strategy\":\"fsdp\",\"degree\":\"all\"}"), TRUE},
  /* settles slowly: the gathers lose their lead on the compute a little every layer (16 kept) */
  {L2, B2048 ",\"micro_batch\":1,\"recompute\":\"full\"" STRAT("{\"strategy\":\"tp\",\"degree\":4},{\"strategy\":\"fsdp\",\"degree\":\"all\"}"), TRUE},
  /* declined: the micro-batch reduction runs */
  {L2, B2048 ",\"micro_batch\":1,\"recompute\":\"selective\"" STRAT("{\"strategy\":\"sp\",\"degree\":8},{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":1}"), FALSE},
  {L2, B2048 ",\"micro_batch\":2" STRAT("{\"strategy\":\"sp\",\"degree\":4},{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":2}"), TRUE},
  {L2, B2048 ",\"micro_batch\":1,\"recompute\":\"full\"" STRAT("{\"strategy\":\"ulysses\",\"degree\":8},{\"strategy\":\"fsdp\",\"degree\":\"all\"}"), TRUE},
  {L2, B2048 ",\"micro_batch\":1" STRAT("{\"strategy\":\"cp\",\"degree\":8},{\"strategy\":\"fsdp\",\"degree\":\"all\"}"), TRUE},
  {L2, B2048 ",\"micro_batch\":2,\"ddp_overlap\":true" STRAT("{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"ddp\",\"degree\":\"all\"}"), TRUE},
  {"models/gpt3-175b.json", "hardware/dgx-a100-2048.json", 0, "configs/llm-pretrain-tp-fsdp.json", TRUE},
  {LLAMA8, H100, 2, CFG("1048576", "," FSDP_ALL), TRUE},
  /* declined (per-op checkpointing, activation offload): the whole program runs */
  {LLAMA8, H100, 2, CFG("1048576", ",\"recompute\":\"op_selective\"," TP2_DDP), FALSE},
  {LLAMA8, H100, 2, CFG("1048576", ",\"offload_num_layers\":6," TP2_DDP), FALSE},
};

START_TEST(test_cut_equals_full)
{
  const Case *c = &cut_cases[_i];
  g_autoptr(MmSimulation) full = sim_of(c, TRUE);
  g_autoptr(MmSimulation) red = sim_of(c, FALSE);
  ck_assert_uint_eq(full->plan->n_runs, 0);
  ck_assert_msg((red->plan->n_runs > 0) == c->reduces, "cut case %d: %u runs cut", _i, red->plan->n_runs);
  uint64_t left_out = 0;
  for (uint32_t r = 0; r < red->plan->n_runs; r++) left_out += (uint64_t)red->plan->runs[r].cut * red->plan->runs[r].len;
  if (c->reduces) {
    ck_assert_uint_eq(red->steady_micro_steps, 0);
    ck_assert_uint_eq(red->plan->programs[0].n_ops + left_out, full->plan->programs[0].n_ops);
  }
  same_metrics(&full->metrics, &red->metrics, _i);
}
END_TEST

/* mm_plan_runs on the whole program: each run is periodic op by op (the same fields, each
 * dependency the same distance back), and its need is what every op of the program asks of it,
 * counted the slow way: an op inside it reaching back into it, i - d; an op outside it depending on
 * one of it, that one's distance from the run's nearer end (mm_plan_runs reads a few periods only). */
START_TEST(test_runs_need_brute_force)
{
  const Case *c = &cut_cases[_i];
  g_autoptr(MmSimulation) full = sim_of(c, TRUE);
  const MmPlanProgram *pr = &full->plan->programs[0];
  g_autoptr(GArray) runs = mm_plan_runs(full->plan);
  if (!runs) {
    ck_assert(!c->reduces);
    return;
  }
  for (guint r = 0; r < runs->len; r++) {
    const MmPlanRun *f = &g_array_index(runs, MmPlanRun, r);
    const uint32_t end = f->first + f->periods * f->len;
    ck_assert_uint_ge(f->periods, 2 * MM_PLAN_CUT_KEEP);
    ck_assert_uint_le(end, pr->n_ops);
    if (r > 0) ck_assert_uint_ge(f->first, g_array_index(runs, MmPlanRun, r - 1).first);
    for (uint32_t i = f->first + f->len; i < end; i++) {
      const uint32_t j = i - f->len;
      const MmEngineOp *a = &pr->ops[j], *b = &pr->ops[i];
      ck_assert_msg(a->stream == b->stream && a->n_deps == b->n_deps && a->n_xfer == b->n_xfer &&
                        pr->dur[i] == pr->dur[j] && pr->info[i].what == pr->info[j].what,
                    "cut case %d run %u: op %u is not op %u a period on", _i, r, i, j);
      for (uint32_t k = 0; k < a->n_deps; k++)
        ck_assert_uint_eq(i - pr->deps[b->dep_first + k], j - pr->deps[a->dep_first + k]);
    }
    uint32_t need = 0;
    for (uint32_t i = 0; i < pr->n_ops; i++)
      for (uint32_t k = 0; k < pr->ops[i].n_deps; k++) {
        const uint32_t d = pr->deps[pr->ops[i].dep_first + k];
        if (d < f->first || d >= end) continue;
        need = MAX(need, i >= f->first && i < end ? i - d : MIN(d - f->first + 1, end - d));
      }
    ck_assert_msg(f->need == need, "cut case %d run %u: need %u, counted %u", _i, r, f->need, need);
  }
}
END_TEST

static void same_metrics(const MmRunMetrics *a, const MmRunMetrics *b, int _i)
{
  /* integer picoseconds: the same time exactly */
  ck_assert_msg(a->iteration_time_s == b->iteration_time_s, "case %d: %.17g vs %.17g", _i, a->iteration_time_s,
                b->iteration_time_s);
  ck_assert_uint_eq(a->critical_class, b->critical_class);
  ck_assert_uint_eq(a->ops, b->ops);
  ck_assert_uint_eq(a->events, b->events);
  SAME(a->compute_s, b->compute_s, "compute_s");
  SAME(a->embedding_s, b->embedding_s, "embedding_s");
  SAME(a->interference_compute_s, b->interference_compute_s, "interference_compute_s");
  SAME(a->interference_embedding_s, b->interference_embedding_s, "interference_embedding_s");
  SAME(a->comm_s, b->comm_s, "comm_s");
  SAME(a->comm_active_s, b->comm_active_s, "comm_active_s");
  SAME(a->compute_active_s, b->compute_active_s, "compute_active_s");
  SAME(a->exposed_comm_s, b->exposed_comm_s, "exposed_comm_s");
  SAME(a->hidden_comm_s, b->hidden_comm_s, "hidden_comm_s");
  /* idle: the iteration less two busy times (cancellation): relative to the iteration */
  ck_assert_msg(fabs(a->idle_s - b->idle_s) <= 1e-9 * a->iteration_time_s, "case %d idle_s: %.17g vs %.17g", _i,
                a->idle_s, b->idle_s);
  SAME(a->mfu, b->mfu, "mfu");
  for (int i = 0; i < MM_COLL_COUNT; i++) SAME(a->comm_by_kind_s[i], b->comm_by_kind_s[i], "comm_by_kind_s");
  for (int i = 0; i < MM_REASON_COUNT; i++) SAME(a->comm_by_reason_s[i], b->comm_by_reason_s[i], "comm_by_reason_s");
  for (int i = 0; i < MM_PHASE_COUNT; i++)
    SAME(a->compute_by_phase_s[i], b->compute_by_phase_s[i], "compute_by_phase_s");
  for (int i = 0; i < MM_STREAM_COUNT; i++) {
    SAME(a->stream_busy_s[i], b->stream_busy_s[i], "stream_busy_s");
    ck_assert_uint_eq(a->stream_ops[i], b->stream_ops[i]);
  }
}

/* The lowering's replays (collectives expanded once per lowering, templates replayed from a record
 * of their first replay) build the same programs as lowering every item: op by op, the engine's
 * fields, dependencies, transfers, durations and the report's op records (for the plan each case
 * runs: its steady-state one where the reduction applies). */
START_TEST(test_replays_equal_items)
{
  const Case *c = &cases[_i];
  g_autoptr(MmSimulation) x = sim_of(c, FALSE); /* the plan it ran: reduced where the reduction applies */
  g_autoptr(MmGraph) decode = NULL;
  g_autoptr(MmGraph) g = mm_simulation_graphs(x->scenario, &decode);
  const MmPlanOptions opt = {.micro_steps = x->plan->micro_steps, .no_replay = TRUE};
  g_autoptr(MmPlan) y = mm_plan_new(x->scenario, g, &opt);
  if (x->plan->n_runs > 0) { /* the layer reduction's copy, cut as the run's was */
    MmPlanRuns *runs = mm_plan_runs(y);
    ck_assert_ptr_nonnull(runs);
    MmPlan *cut = mm_plan_cut(y, runs, x->plan->runs[0].periods);
    g_array_free(runs, TRUE);
    ck_assert_ptr_nonnull(cut);
    mm_plan_free(y);
    y = cut;
  }
  ck_assert_uint_eq(x->plan->n_programs, y->n_programs);
  for (uint32_t p = 0; p < y->n_programs; p++) {
    const MmPlanProgram *a = &x->plan->programs[p], *b = &y->programs[p];
    ck_assert_msg(a->n_ops == b->n_ops, "case %d program %u: %u ops, %u without replays", _i, p, a->n_ops, b->n_ops);
    for (uint32_t i = 0; i < a->n_ops; i++) {
      const MmEngineOp *oa = &a->ops[i], *ob = &b->ops[i];
      const MmOpInfo *ia = &a->info[i], *ib = &b->info[i];
      gboolean same = oa->stream == ob->stream && oa->n_deps == ob->n_deps && oa->coll == ob->coll &&
                      oa->degree == ob->degree && oa->stride == ob->stride && oa->peer == ob->peer &&
                      oa->n_xfer == ob->n_xfer && oa->sequential == ob->sequential && oa->cil == ob->cil && a->dur[i] == b->dur[i];
      for (uint32_t k = 0; same && k < oa->n_deps; k++) same = a->deps[oa->dep_first + k] == b->deps[ob->dep_first + k];
      for (uint32_t k = 0; same && k < oa->n_xfer; k++)
        same = a->xfer_link[oa->xfer_first + k] == b->xfer_link[ob->xfer_first + k] &&
               a->xfer_bytes[oa->xfer_first + k] == b->xfer_bytes[ob->xfer_first + k];
      same = same && ia->what == ib->what && ia->phase == ib->phase && ia->coll == ib->coll &&
             ia->reason == ib->reason && ia->chunk == ib->chunk && ia->unit == ib->unit && ia->micro == ib->micro &&
             ia->first_layer == ib->first_layer && ia->last_layer == ib->last_layer && ia->kernels == ib->kernels &&
             ia->flops == ib->flops && ia->model_flops == ib->model_flops && ia->bytes == ib->bytes &&
             ia->time_s == ib->time_s && ia->fixed_s == ib->fixed_s && ia->algorithm == ib->algorithm &&
             ia->overlap == ib->overlap && ia->fused == ib->fused;
      ck_assert_msg(same, "case %d program %u op %u differs without replays", _i, p, i);
    }
  }
}
END_TEST

static Suite *steady_suite(void)
{
  Suite *s = suite_create("steady");
  TCase *tc = tcase_create("core");
  tcase_add_loop_test(tc, test_steady_equals_full, 0, G_N_ELEMENTS(cases));
  /* all but the last, Llama 3 405B's 390,000-op programs (interleaving is in the others): the
   * sanitizer build's time */
  tcase_add_loop_test(tc, test_replays_equal_items, 0, G_N_ELEMENTS(cases) - 1);
  tcase_add_loop_test(tc, test_cut_equals_full, 0, G_N_ELEMENTS(cut_cases));
  tcase_add_loop_test(tc, test_runs_need_brute_force, 0, G_N_ELEMENTS(cut_cases));
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return mm_test_main(steady_suite()); }

/* check_tp_overlap: TP/SP communication overlap (collective matmul, async TP, userbuffers), the fused embedding +
 * All2All of sharded tables, and the report's fused category. */
#include <math.h>
#include <string.h>

#include "report/report.h"
#include "testutil.h"

#define Sim MmSimulation

#define LLAMA70 "models/llama3-70b.json"
#define H100 "hardware/dgx-h100-2048.json"

static const char *const modes[] = {"collective_matmul", "async_tp", "userbuffers"};

/* Llama-3-70B, one sequence on one node, TP 8 with sequence parallelism and @overlap (NULL: no key). */
static char *tp_config(const char *overlap, const char *extra)
{
  g_autofree char *ov = overlap ? g_strdup_printf(",\"overlap\":\"%s\"", overlap) : g_strdup("");
  return g_strdup_printf("{\"name\":\"t\",\"task\":\"pretrain\",\"global_batch\":1,\"micro_batch\":1,"
                         "\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":8%s%s}]}}",
                         ov, extra ? extra : "");
}

static Sim *tp_sim(const char *overlap, const char *extra)
{
  g_autofree char *c = tp_config(overlap, extra);
  return mm_test_sim_ok(LLAMA70, H100, c, 1);
}

static char *run_json(const Sim *x)
{
  g_autoptr(cJSON) j = mm_report_run_json(x->plan, x->engine, &x->metrics, x->memory);
  return cJSON_Print(j);
}

/* Fused pieces of the critical program: compute pieces, transfers, and backward ones. */
static void count_fused(const Sim *x, guint *compute, guint *comm, guint *bwd)
{
  const MmPlanProgram *p = mm_plan_class_program(x->plan, x->metrics.critical_class);
  *compute = *comm = *bwd = 0;
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmOpInfo *in = &p->info[i];
    if (!in->fused) continue;
    if (in->what == MM_OP_COLLECTIVE) (*comm)++;
    else (*compute)++;
    if (in->phase == MM_PHASE_BWD) (*bwd)++;
  }
}

START_TEST(test_overlap_hides_communication)
{
  g_autoptr(Sim) bulk = tp_sim(NULL, NULL);
  g_autoptr(Sim) x = tp_sim(modes[_i], NULL);
  const MmRunMetrics *b = &bulk->metrics, *r = &x->metrics;
  ck_assert_uint_eq(b->fused_groups, 0);
  ck_assert_uint_gt(r->fused_groups, 0);
  /* communication the pieces hide is hidden: less of it is exposed than in bulk */
  ck_assert_double_lt(r->exposed_comm_s, b->exposed_comm_s);
  ck_assert_double_gt(r->hidden_comm_s, b->hidden_comm_s);
  ck_assert_double_gt(r->fused_both_s, 0);
  /* never faster than the decomposed pieces allow: the compute stream and each comm stream are
   * busy for their serialized time within the iteration */
  const double eps = 1e-9 * r->iteration_time_s;
  for (int s = 0; s < MM_STREAM_COUNT; s++) ck_assert_double_ge(r->iteration_time_s + eps, r->stream_busy_s[s]);
  ck_assert_double_ge(r->iteration_time_s + eps, r->compute_s + r->embedding_s);
  /* the same GEMM FLOPs, split into pieces */
  ck_assert_double_eq_tol(x->plan->model_flops_per_iteration, bulk->plan->model_flops_per_iteration,
                          1e-9 * bulk->plan->model_flops_per_iteration);
  /* the groups' accounting fits in their spans (the rest: the compute stream running other work) */
  ck_assert_double_le(r->fused_compute_s + r->fused_comm_s + r->fused_both_s + r->fused_stalled_s,
                      r->fused_span_s * (1 + 1e-9));
  /* forward and backward both decomposed (the backward's mirrored pairs) */
  guint comp, comm, bwd;
  count_fused(x, &comp, &comm, &bwd);
  ck_assert_uint_gt(comp, 0);
  ck_assert_uint_gt(comm, 0);
  ck_assert_uint_gt(bwd, 0);
}
END_TEST

/* Splitting a GEMM never makes its work cheaper: with every kernel at the device's one GEMM
 * utilization, the pieces' compute is the whole GEMMs' plus launches and weight re-reads, in
 * bf16 and under FP8 recipes whose casts run beside each GEMM (tensorwise, delayed: the casts
 * stay memory-bound kernels, not bytes a piece's compute hides). */
START_TEST(test_pieces_cost_no_less)
{
  static const char *const precisions[] = {NULL, ",\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"tensorwise\"}",
                                           ",\"precision\":{\"compute\":\"fp8\",\"fp8_recipe\":\"delayed\"}"};
  for (guint i = 0; i < G_N_ELEMENTS(precisions); i++) {
    const char *pr = precisions[i] ? precisions[i] : "";
    g_autofree char *cb = g_strdup_printf("{\"name\":\"t\",\"task\":\"pretrain\",\"global_batch\":1,\"micro_batch\":1%s,"
                                          "\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":8}]}}",
                                          pr);
    g_autofree char *ca = g_strdup_printf("{\"name\":\"t\",\"task\":\"pretrain\",\"global_batch\":1,\"micro_batch\":1%s,"
                                          "\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":8,"
                                          "\"overlap\":\"%s\"}]}}",
                                          pr, modes[_i]);
    g_autoptr(Sim) bulk = mm_test_sim_ok(LLAMA70, H100, cb, 1);
    g_autoptr(Sim) x = mm_test_sim_ok(LLAMA70, H100, ca, 1);
    /* the kernels' own time: without what collectives beside them added (the pieces price theirs inside) */
    const double xs = x->metrics.compute_s - x->metrics.interference_compute_s;
    const double bs = bulk->metrics.compute_s - bulk->metrics.interference_compute_s;
    ck_assert_msg(xs >= bs, "%s, precision %u: pieces %.6f s < whole %.6f s", modes[_i], i, xs, bs);
  }
}
END_TEST

/* The pieces' dependencies: collective matmul over 8 ranks runs 8 partial GEMMs per AllGather +
 * GEMM, 4 bidirectional permutes; piece i waits for the permute that brings its shard. */
START_TEST(test_collective_matmul_structure)
{
  g_autoptr(Sim) x = tp_sim("collective_matmul", NULL);
  const MmPlanProgram *p = mm_plan_class_program(x->plan, x->metrics.critical_class);
  uint32_t g = 0, first = 0;
  for (uint32_t i = 0; i < p->n_ops && !g; i++)
    if (p->info[i].fused) g = p->info[i].fused, first = i;
  ck_assert_uint_gt(g, 0);
  guint pieces = 0, perms = 0;
  for (uint32_t i = first; i < p->n_ops && p->info[i].fused == g; i++) {
    const MmOpInfo *in = &p->info[i];
    if (in->what == MM_OP_COLLECTIVE) {
      ck_assert_uint_eq(in->coll, MM_COLL_PERMUTE);
      ck_assert_uint_eq(in->reason, MM_REASON_TP);
      perms++;
      continue;
    }
    pieces++;
    /* every piece but the local one (the first) depends on a permute of its group */
    gboolean waits = FALSE;
    for (uint32_t d = 0; d < p->ops[i].n_deps; d++) {
      const uint32_t dep = p->deps[p->ops[i].dep_first + d];
      waits |= p->info[dep].fused == g && p->info[dep].what == MM_OP_COLLECTIVE;
    }
    ck_assert(pieces == 1 || waits);
  }
  ck_assert_uint_eq(pieces, 8);
  ck_assert_uint_eq(perms, 4);
}
END_TEST

START_TEST(test_bulk_unchanged)
{
  g_autoptr(Sim) a = tp_sim(NULL, NULL);
  g_autoptr(Sim) b = tp_sim("bulk", NULL);
  g_autofree char *ja = run_json(a);
  g_autofree char *jb = run_json(b);
  /* the config path differs (both are config.json in the temporary directory): same bytes */
  ck_assert_str_eq(ja, jb);
  ck_assert_ptr_null(strstr(ja, "\"fused\""));
}
END_TEST

START_TEST(test_threshold_keeps_small_bulk)
{
  g_autoptr(Sim) bulk = tp_sim(NULL, NULL);
  /* every SP buffer of one 8192-token sequence is under 1 GiB: all stay bulk */
  g_autoptr(Sim) big = tp_sim("collective_matmul", ",\"overlap_min_MiB\":1024");
  ck_assert_uint_eq(big->metrics.fused_groups, 0);
  ck_assert_double_eq(big->metrics.iteration_time_s, bulk->metrics.iteration_time_s);
  /* 64 MiB: the FFN's (8192 x 8192 x 2 bytes = 128 MiB) decompose, none smaller */
  g_autoptr(Sim) mid = tp_sim("collective_matmul", ",\"overlap_min_MiB\":64");
  g_autoptr(Sim) all = tp_sim("collective_matmul", NULL);
  ck_assert_uint_gt(mid->metrics.fused_groups, 0);
  ck_assert_uint_le(mid->metrics.fused_groups, all->metrics.fused_groups);
  const MmPlanProgram *p = mm_plan_class_program(mid->plan, mid->metrics.critical_class);
  for (uint32_t i = 0; i < p->n_ops; i++) {
    const MmOpInfo *in = &p->info[i];
    if (in->what == MM_OP_COLLECTIVE && in->reason == MM_REASON_TP && !in->fused &&
        (in->coll == MM_COLL_ALL_GATHER || in->coll == MM_COLL_REDUCE_SCATTER) && in->phase != MM_PHASE_BWD &&
        mid->model->blocks[mid->graph->units[in->unit].block].kind == MM_BLOCK_TRANSFORMER)
      ck_assert_double_lt(in->bytes, 64.0 * 1048576.0); /* the token embedding's lookup is no GEMM: bulk */
  }
}
END_TEST

/* Invalid settings: each names the level's JSON path and the key. */
static const struct {
  const char *levels;
  int code;
  const char *path;
} bad[] = {
  {"[{\"strategy\":\"sp\",\"degree\":8,\"overlap\":\"sometimes\"}]", MM_CONFIG_ERROR_UNKNOWN_VALUE,
   "$.parallelism.default[0].overlap"},
  {"[{\"strategy\":\"ddp\",\"degree\":8,\"overlap\":\"collective_matmul\"}]", MM_CONFIG_ERROR_INCONSISTENT,
   "$.parallelism.default[0].overlap"},
  {"[{\"strategy\":\"sp\",\"degree\":8,\"overlap\":\"pipelined\"}]", MM_CONFIG_ERROR_INCONSISTENT,
   "$.parallelism.default[0].overlap"},
  {"[{\"strategy\":\"tp\",\"degree\":8,\"overlap\":\"async_tp\"}]", MM_CONFIG_ERROR_INCONSISTENT,
   "$.parallelism.default[0].overlap"},
  {"[{\"strategy\":\"sp\",\"degree\":8,\"overlap_min_MiB\":4}]", MM_CONFIG_ERROR_INCONSISTENT,
   "$.parallelism.default[0].overlap_min_MiB"},
  {"[{\"strategy\":\"sp\",\"degree\":8,\"overlap\":\"userbuffers\",\"overlap_chunks\":4}]",
   MM_CONFIG_ERROR_INCONSISTENT, "$.parallelism.default[0].overlap_chunks"},
  {"[{\"strategy\":\"sp\",\"degree\":8,\"overlap\":\"userbuffers\",\"overlap_min_MiB\":-1}]", MM_CONFIG_ERROR_RANGE,
   "$.parallelism.default[0].overlap_min_MiB"},
  {"[{\"strategy\":\"sp\",\"degree\":4,\"overlap\":\"userbuffers\"},{\"strategy\":\"sp\",\"degree\":2,"
   "\"overlap\":\"async_tp\"}]",
   MM_CONFIG_ERROR_INCONSISTENT, "$.parallelism.default[1].overlap"},
  {"[{\"strategy\":\"sp\",\"degree\":8,\"overlap\":[1]}]", MM_CONFIG_ERROR_TYPE, "$.parallelism.default[0].overlap"},
};

START_TEST(test_config_errors)
{
  g_autofree char *c = g_strdup_printf("{\"name\":\"t\",\"task\":\"pretrain\",\"global_batch\":1,"
                                       "\"parallelism\":{\"default\":%s}}", bad[_i].levels);
  g_autoptr(GError) error = NULL;
  g_autoptr(Sim) x = mm_test_sim(LLAMA70, H100, c, &(MmSimOptions){.nodes = 1}, &error);
  ck_assert_ptr_null(x);
  ck_assert_ptr_nonnull(error);
  ck_assert_msg(error->domain == MM_CONFIG_ERROR && error->code == bad[_i].code, "%s (code %d)", error->message,
                error->code);
  ck_assert_msg(strstr(error->message, bad[_i].path) != NULL, "%s lacks %s", error->message, bad[_i].path);
  ck_assert_msg(strstr(error->message, "config.json") != NULL, "%s lacks the file", error->message);
}
END_TEST

START_TEST(test_mp_and_ep_errors)
{
  g_autoptr(GError) error = NULL;
  const char *row = "{\"name\":\"d\",\"task\":\"pretrain\",\"global_batch\":65536,\"parallelism\":{\"embedding_bag\":"
                    "[{\"strategy\":\"mp\",\"degree\":\"all\",\"sharding\":\"row\",\"overlap\":\"fused\"}],"
                    "\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}";
  g_autoptr(Sim) x = mm_test_sim("models/dlrm-b.json", "hardware/zionex-a100-128.json", row, NULL, &error);
  ck_assert_ptr_null(x);
  ck_assert_int_eq(error->code, MM_CONFIG_ERROR_INCONSISTENT);
  ck_assert_ptr_nonnull(strstr(error->message, "$.parallelism.embedding_bag[0].overlap"));
}
END_TEST

START_TEST(test_cli_error_exit)
{
  g_autofree char *c = g_strdup_printf("{\"name\":\"t\",\"task\":\"pretrain\",\"global_batch\":1,"
                                       "\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":8,"
                                       "\"overlap\":\"magic\"}]}}");
  g_autofree char *path = mm_test_write("bad-overlap.json", c);
  const char *args[] = {"run", "-m", LLAMA70, "-H", H100, "-c", path, "--nodes", "1", NULL};
  g_autofree char *err = NULL;
  ck_assert_int_eq(mm_test_cli(args, NULL, &err), 1);
  ck_assert_ptr_nonnull(strstr(err, "bad-overlap.json"));
  ck_assert_ptr_nonnull(strstr(err, "$.parallelism.default[0].overlap"));
}
END_TEST

START_TEST(test_symmetric_equals_per_device)
{
  g_autofree char *c = tp_config(modes[_i], NULL);
  g_autoptr(Sim) a = mm_test_sim_ok(LLAMA70, H100, c, 1);
  g_autoptr(GError) error = NULL;
  g_autoptr(Sim) b = mm_test_sim(LLAMA70, H100, c, &(MmSimOptions){.nodes = 1, .per_device = TRUE}, &error);
  ck_assert_msg(b != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(b->plan->n_classes, 8);
  ck_assert_double_eq(a->metrics.iteration_time_s, b->metrics.iteration_time_s);
  ck_assert_double_eq(a->metrics.exposed_comm_s, b->metrics.exposed_comm_s);
  ck_assert_double_eq(a->metrics.fused_both_s, b->metrics.fused_both_s);
}
END_TEST

START_TEST(test_deterministic)
{
  g_autoptr(Sim) a = tp_sim("userbuffers", NULL);
  g_autoptr(Sim) b = tp_sim("userbuffers", NULL);
  g_autofree char *ja = run_json(a);
  g_autofree char *jb = run_json(b);
  ck_assert_str_eq(ja, jb);
  gsize la = 0, lb = 0;
  g_autofree char *ta = mm_report_trace(a->plan, a->engine, NULL, NULL, &la);
  g_autofree char *tb = mm_report_trace(b->plan, b->engine, NULL, NULL, &lb);
  ck_assert_uint_eq(la, lb);
  ck_assert_int_eq(memcmp(ta, tb, la), 0);
  ck_assert_ptr_nonnull(strstr(ta, "\"fused_group\":"));
  ck_assert_ptr_nonnull(strstr(ja, "\"compute_and_comm_s\""));
}
END_TEST

/* Serving: the prefill's SP collectives decompose; the decode step's are tiny and stay bulk
 * under a threshold. */
START_TEST(test_serving)
{
#define SERVE(extra)                                                                                                 \
  "{\"name\":\"s\",\"task\":\"inference\",\"global_batch\":8,\"inference\":{\"prompt_tokens\":4096,\"output_tokens\":128}," \
  "\"parallelism\":{\"default\":[{\"strategy\":\"sp\",\"degree\":8" extra "}]}}"
  const char *bc = SERVE("");
  const char *oc = SERVE(",\"overlap\":\"collective_matmul\",\"overlap_min_MiB\":1");
#undef SERVE
  g_autoptr(Sim) b = mm_test_sim_ok(LLAMA70, H100, bc, 1);
  g_autoptr(Sim) o = mm_test_sim_ok(LLAMA70, H100, oc, 1);
  ck_assert_uint_gt(o->metrics.fused_groups, 0);
  ck_assert_double_lt(o->metrics.exposed_comm_s, b->metrics.exposed_comm_s);
  ck_assert_uint_eq(o->decode_metrics.fused_groups, 0);
  ck_assert_double_eq(o->decode_metrics.iteration_time_s, b->decode_metrics.iteration_time_s);
}
END_TEST

/* The fused embedding + All2All: with the All2All exposed (the paper's 2D torus with each
 * link's bandwidth shared by the average 6 hops of an all-to-all on 16 x 8), fusing shortens
 * the iteration and exposes less communication. */
START_TEST(test_dlrm_fused_faster)
{
  g_autofree char *dev = mm_test_src("hardware/devices/mi210.json");
  g_autofree char *hw = g_strdup_printf("{\"name\":\"t\",\"device\":\"%s\",\"gpus_per_node\":1,\"nodes\":128,"
                                        "\"inter_node\":{\"topology\":\"torus2d\",\"dims\":[16,8],\"nics_per_gpu\":4,"
                                        "\"nic_bw_Gbps\":33.3}}",
                                        dev);
  g_autoptr(Sim) b = mm_test_sim_ok("models/dlrm-fused-paper.json", hw, "configs/dlrm-fused-paper-bulk.json", 0);
  g_autoptr(Sim) f = mm_test_sim_ok("models/dlrm-fused-paper.json", hw, "configs/dlrm-fused-paper.json", 0);
  ck_assert_uint_eq(b->metrics.fused_groups, 0);
  ck_assert_uint_eq(f->metrics.fused_groups, 2); /* forward and backward */
  ck_assert_double_lt(f->metrics.iteration_time_s, b->metrics.iteration_time_s);
  ck_assert_double_lt(f->metrics.exposed_comm_s, b->metrics.exposed_comm_s);
  /* the fused kernel's lookups cost more than the plain ones (occupancy, puts, flags) */
  ck_assert_double_gt(f->metrics.embedding_s - f->metrics.interference_embedding_s,
                      b->metrics.embedding_s - b->metrics.interference_embedding_s);
  ck_assert_double_eq_tol(f->metrics.comm_by_kind_s[MM_COLL_ALL_REDUCE], b->metrics.comm_by_kind_s[MM_COLL_ALL_REDUCE],
                          1e-12);
  /* one class per device gives the same answer */
  g_autoptr(GError) error = NULL;
  g_autoptr(Sim) q = mm_test_sim("models/dlrm-fused-paper.json", hw, "configs/dlrm-fused-paper.json",
                                 &(MmSimOptions){.per_device = TRUE}, &error);
  ck_assert_msg(q != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(q->plan->n_classes, 128);
  ck_assert_double_eq(q->metrics.iteration_time_s, f->metrics.iteration_time_s);
}
END_TEST

/* ep pipelined: Mixtral's dispatch and combine in chunks around the experts, forward and backward;
 * less exposed All2All, the same per-device answer. */
START_TEST(test_ep_pipelined)
{
  const char *bulk = "configs/mixtral-pretrain-ep.json";
  const char *pipe = "{\"name\":\"m\",\"task\":\"pretrain\",\"global_batch\":512,\"micro_batch\":2,\"recompute\":\"full\","
                     "\"parallelism\":{\"transformer\":[{\"strategy\":\"ep\",\"degree\":8,\"overlap\":\"pipelined\"},"
                     "{\"strategy\":\"ddp\",\"degree\":\"all\",\"zero\":1}],\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\","
                     "\"zero\":1}]}}";
  g_autoptr(Sim) b = mm_test_sim_ok("models/mixtral-8x7b.json", H100, bulk, 8);
  g_autoptr(Sim) p = mm_test_sim_ok("models/mixtral-8x7b.json", H100, pipe, 8);
  ck_assert_uint_gt(p->metrics.fused_groups, 0);
  ck_assert_double_lt(p->metrics.exposed_comm_s, b->metrics.exposed_comm_s);
  ck_assert_double_lt(p->metrics.iteration_time_s, b->metrics.iteration_time_s);
  guint comp, comm, bwd;
  count_fused(p, &comp, &comm, &bwd);
  ck_assert_uint_eq(comm, 2 * comp); /* a dispatch and a combine chunk per expert chunk */
  ck_assert_uint_gt(bwd, 0);
  g_autoptr(GError) error = NULL;
  g_autoptr(Sim) q = mm_test_sim("models/mixtral-8x7b.json", H100, pipe, &(MmSimOptions){.nodes = 8, .per_device = TRUE},
                                 &error);
  ck_assert_msg(q != NULL, "%s", error ? error->message : "");
  ck_assert_double_eq(q->metrics.iteration_time_s, p->metrics.iteration_time_s);
}
END_TEST

static Suite *suite(void)
{
  Suite *s = suite_create("tp_overlap");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_overlap_hides_communication, 0, G_N_ELEMENTS(modes));
  tcase_add_loop_test(tc, test_pieces_cost_no_less, 0, G_N_ELEMENTS(modes));
  tcase_add_test(tc, test_collective_matmul_structure);
  tcase_add_test(tc, test_bulk_unchanged);
  tcase_add_test(tc, test_threshold_keeps_small_bulk);
  tcase_add_loop_test(tc, test_config_errors, 0, G_N_ELEMENTS(bad));
  tcase_add_test(tc, test_mp_and_ep_errors);
  tcase_add_test(tc, test_cli_error_exit);
  tcase_add_loop_test(tc, test_symmetric_equals_per_device, 0, G_N_ELEMENTS(modes));
  tcase_add_test(tc, test_deterministic);
  tcase_add_test(tc, test_serving);
  tcase_add_test(tc, test_dlrm_fused_faster);
  tcase_add_test(tc, test_ep_pipelined);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(suite());
}

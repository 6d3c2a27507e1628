/* check_fused_kernel: fused compute-collective kernels (slice puts) and the device coefficients
 * they read. */
#include <math.h>
#include <string.h>

#include "fused/fused.h"
#include "testutil.h"

#define DEV_HEAD "{\"name\": \"d\", \"peak_tflops\": {\"bf16\": 100}, \"hbm_GiB\": 16, \"hbm_bw_GBps\": 1000, " \
                 "\"utilization\": {\"gemm\": {\"value\": 0.5, \"provenance\": \"estimate\"}, " \
                 "\"hbm\": {\"value\": 0.8, \"provenance\": \"estimate\"}}"

static gboolean parse_dev(const char *text, MmDevice *d, GError **error)
{
  return mm_device_parse("dev.json", text, strlen(text), d, error);
}

/* Absent coefficients take their defaults, with the default's source; given ones are read with
 * theirs; unknown keys and out-of-range values name the file and JSON path. */
START_TEST(test_fused_coefficients)
{
  g_auto(MmDevice) d = {0};
  g_autoptr(GError) error = NULL;
  ck_assert_msg(parse_dev(DEV_HEAD "}", &d, &error), "%s", error ? error->message : "");
  ck_assert_double_eq(d.fused.compute_units.value, 104);
  ck_assert_ptr_nonnull(d.fused.compute_units.source);
  mm_device_clear(&d);

  ck_assert(parse_dev(DEV_HEAD ", \"fused\": {\"compute_units\": {\"value\": 304, \"provenance\": \"datasheet\", "
                      "\"source\": \"MI300X\"}}}", &d, &error));
  ck_assert_double_eq(d.fused.compute_units.value, 304);
  ck_assert_str_eq(d.fused.compute_units.source, "MI300X");
  mm_device_clear(&d);

  ck_assert(!parse_dev(DEV_HEAD ", \"fused\": {\"cus\": 3}}", &d, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "dev.json: $.fused.cus"));
  g_clear_error(&error);
  ck_assert(!parse_dev(DEV_HEAD ", \"fused\": {\"compute_units\": {\"value\": -1, \"provenance\": \"paper\", "
                       "\"source\": \"x\"}}}", &d, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "$.fused.compute_units.value"));
  g_clear_error(&error);
  ck_assert(!parse_dev(DEV_HEAD ", \"fused\": 3}", &d, &error));
  ck_assert_ptr_nonnull(strstr(error->message, "$.fused"));
}
END_TEST

/* The resources: links as src/comm gives them, then SMs (one unit per ps) and HBM at the
 * achievable bandwidth. */
START_TEST(test_resources)
{
  g_autofree char *path = mm_test_src("hardware/mi210-4.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) hw = mm_hardware_load(path, &error);
  ck_assert_msg(hw, "%s", error ? error->message : "");
  MmFusedRes r;
  mm_fused_res_init(hw, &r);
  ck_assert_uint_eq(r.links.n_intra, 3);
  ck_assert_uint_eq(r.sm, r.links.n);
  ck_assert_uint_eq(r.n, r.links.n + 2);
  ck_assert_double_eq(r.cap[r.sm], 1.0);
  ck_assert_double_eq_tol(r.cap[r.hbm], hw->device.hbm_bw_Bps * hw->device.util_hbm.value / 1e12, 1e-12);
}
END_TEST

static MmHardware *load_hw(const char *rel)
{
  g_autofree char *path = mm_test_src(rel);
  g_autoptr(GError) error = NULL;
  MmHardware *hw = mm_hardware_load(path, &error);
  ck_assert_msg(hw, "%s", error ? error->message : "");
  return hw;
}

static MmFusedResult *run_ok(const MmHardware *hw, const MmFusedSpec *s)
{
  g_autoptr(GError) error = NULL;
  MmFusedResult *r = mm_fused_kernel_run(hw, s, &error);
  ck_assert_msg(r, "%s", error ? error->message : "");
  return r;
}

static double saved(const MmFusedResult *r) { return 1.0 - r->fused_s / r->baseline_s; }

/* The paper's Fig. 9 trend on 4 MI210: fused GEMV + AllReduce beats the bulk pair by 5-25% for
 * M from 8K to 64K, and the benefit shrinks at the largest M. */
START_TEST(test_gemv_allreduce_trend)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi210-4.json");
  const int64_t ms[] = {8192, 16384, 32768, 65536};
  double g[4];
  for (int i = 0; i < 4; i++) {
    MmFusedSpec s = {.op = MM_FUSED_GEMV_AR, .m = ms[i], .schedule = MM_FUSED_AWARE};
    g_autoptr(MmFusedResult) r = run_ok(hw, &s);
    g[i] = saved(r);
    ck_assert_msg(g[i] >= 0.05 && g[i] <= 0.25, "M=%" G_GINT64_FORMAT ": saved %.3f", ms[i], g[i]);
  }
  ck_assert_double_lt(g[3], g[2]);
  ck_assert_double_lt(g[3], g[0]);
}
END_TEST

/* Every op, both schedules, both systems: the fused op is never faster than its own compute or
 * its busiest link alone; the breakdown covers the fused time; every rank ends by the slowest. */
START_TEST(test_conservation)
{
  const char *files[] = {"hardware/mi210-4.json", "hardware/mi210-2x4.json"};
  for (int f = 0; f < 2; f++) {
    g_autoptr(MmHardware) hw = load_hw(files[f]);
    for (int op = 0; op < MM_FUSED_OP_COUNT; op++)
      for (int sc = 0; sc < MM_FUSED_SCHED_COUNT; sc++) {
        MmFusedSpec s = {.op = (MmFusedOp)op, .schedule = (MmFusedSchedule)sc, .batch = 512, .tables = 32,
                         .m = 8192, .n = 2048, .k = 2048};
        if (f == 1) s.ranks = 8;
        g_autoptr(MmFusedResult) r = run_ok(hw, &s);
        ck_assert_double_ge(r->fused_s, r->lower_bound_s * (1 - 1e-9));
        ck_assert_double_gt(r->compute_alone_s, 0);
        ck_assert_double_gt(r->comm_alone_s, 0);
        ck_assert_double_eq_tol(r->compute_s + r->comm_s + r->both_s + r->stalled_s, r->fused_s - r->launch_s,
                                1e-9 + 1e-6 * r->fused_s);
        for (int64_t d = 0; d < s.ranks; d++) ck_assert_double_le(r->rank_s[d], r->fused_s);
        ck_assert_double_eq_tol(r->baseline_s, 2 * r->launch_s + r->kernel_s + r->coll_s, 1e-15);
        ck_assert_double_ge(r->skew, 0);
      }
  }
}
END_TEST

/* Two nodes of one GPU each (the paper's Sec. IV-C): communication-aware scheduling puts the
 * remote slices first, so the node that waits for them is not late: skew ~7% -> ~1% in the paper. */
START_TEST(test_schedule_skew)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi210-2x4.json");
  const int64_t batches[] = {256, 1024, 2048};
  for (int i = 0; i < 3; i++) {
    MmFusedSpec s = {.op = MM_FUSED_EMB_A2A, .ranks = 2, .stride = 4, .batch = batches[i], .tables = 256};
    s.schedule = MM_FUSED_AWARE;
    g_autoptr(MmFusedResult) aware = run_ok(hw, &s);
    s.schedule = MM_FUSED_OBLIVIOUS;
    g_autoptr(MmFusedResult) obl = run_ok(hw, &s);
    ck_assert_double_le(aware->skew, obl->skew);
    ck_assert_double_lt(aware->skew, 0.02);
    ck_assert_double_gt(obl->skew, 0.03);
    ck_assert_double_le(aware->fused_s, obl->fused_s);
    /* the late node under the oblivious schedule is the one waiting for node 0's remote slices */
    ck_assert_double_gt(obl->rank_s[1], obl->rank_s[0]);
    /* inter-node, the fused op wins either way (the paper: 31% on average) */
    ck_assert_double_gt(saved(aware), 0.1);
    ck_assert_double_gt(saved(obl), 0.0);
  }
}
END_TEST

/* Embedding + All2All gains over the whole grid of the paper's labels inside a node. */
START_TEST(test_embedding_gains)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi210-4.json");
  const int64_t batches[] = {512, 1024, 2048}, tables[] = {64, 256};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) {
      MmFusedSpec s = {.op = MM_FUSED_EMB_A2A, .batch = batches[i], .tables = tables[j]};
      g_autoptr(MmFusedResult) r = run_ok(hw, &s);
      ck_assert_double_gt(saved(r), 0.02);
      ck_assert_double_lt(saved(r), 0.5);
      ck_assert_int_eq(r->logical_wgs, batches[i] * tables[j]);
      ck_assert_int_eq(r->n_slices, r->logical_wgs / 32);
    }
}
END_TEST

/* The size trend inside a node (the paper's Fig. 8: lower gains at batch 512, above full overlap
 * at large batches) comes from the baseline's launches: the public DLRM code runs one PyTorch
 * EmbeddingBag kernel per table (a fixed grid of 1024 blocks), so batch 512 fills 512 of the 832
 * block slots (an occupancy below the contention knee: the baseline runs fast), while 1024 and
 * more fill every slot and leave a tail. With one launch over all tables (bulk_grid -1) the gain
 * is flat. Between nodes, batch 256 under-fills the baseline below the knee (Fig. 12: "poor compute
 * utilization for the baseline") and gains more than full overlap. */
START_TEST(test_embedding_size_trend)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi210-4.json");
  MmFusedSpec s = {.op = MM_FUSED_EMB_A2A, .batch = 512, .tables = 64};
  g_autoptr(MmFusedResult) small = run_ok(hw, &s);
  s.batch = 2048;
  s.tables = 256;
  g_autoptr(MmFusedResult) large = run_ok(hw, &s);
  ck_assert_double_gt(saved(large), saved(small) + 0.05);
  /* large batches gain more than hiding the whole All2All would: the fused op beats the kernel */
  ck_assert_double_lt(large->fused_s, large->launch_s + large->kernel_s);
  ck_assert_double_gt(small->fused_s, small->launch_s + small->kernel_s);
  /* the mechanism, not something else: one launch over every table gives a flat gain */
  s.bulk_grid = -1;
  g_autoptr(MmFusedResult) large1 = run_ok(hw, &s);
  s.batch = 512;
  s.tables = 64;
  g_autoptr(MmFusedResult) small1 = run_ok(hw, &s);
  ck_assert_double_eq_tol(saved(large1), saved(small1), 0.01);
  ck_assert_double_eq(large1->fused_s, large->fused_s);
  /* between nodes, one GPU each: batch 256 gains more than 512, and more than full overlap */
  g_autoptr(MmHardware) hw2 = load_hw("hardware/mi210-2x4.json");
  MmFusedSpec n = {.op = MM_FUSED_EMB_A2A, .ranks = 2, .stride = 4, .batch = 256, .tables = 64};
  g_autoptr(MmFusedResult) n256 = run_ok(hw2, &n);
  n.batch = 512;
  g_autoptr(MmFusedResult) n512 = run_ok(hw2, &n);
  ck_assert_double_gt(saved(n256), saved(n512));
  ck_assert_double_lt(n256->fused_s, n256->launch_s + n256->kernel_s);
}
END_TEST

/* The occupancy trade-off is a mechanism (Little's law vs HBM contention); it reproduces the
 * paper's Fig. 13 direction: 25% -> 75% faster, 75% -> 87.5% slower. */
START_TEST(test_occupancy_tradeoff)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi210-4.json");
  const double occ[] = {0.25, 0.75, 0.875};
  double t[3];
  for (int i = 0; i < 3; i++) {
    MmFusedSpec s = {.op = MM_FUSED_EMB_A2A, .batch = 1024, .tables = 256, .occupancy = occ[i]};
    g_autoptr(MmFusedResult) r = run_ok(hw, &s);
    t[i] = r->fused_s;
  }
  ck_assert_double_lt(t[1], t[0] * 0.8);
  ck_assert_double_gt(t[2], t[1]);
  /* the rate: below the knee linear in occupancy, above it capped at the HBM's rate */
  double inflate = 0;
  const double B = 1e12;
  const double lo = mm_fused_mem_rate(&hw->device, 0.1, 8, B, &inflate);
  ck_assert_double_eq(inflate, 1.0);
  ck_assert_double_eq_tol(mm_fused_mem_rate(&hw->device, 0.2, 8, B, NULL), 2 * lo, 1e-6 * lo);
  ck_assert_double_eq(mm_fused_mem_rate(&hw->device, 1.0, 64, B, &inflate), B);
  ck_assert_double_gt(inflate, 1.0);
  ck_assert_double_le(inflate, 1.0 / (1.0 - hw->device.fused.contention.value));
}
END_TEST

/* GEMM + All2All: GEMM-dominated, so the gain is bounded by the All2All's share; aware beats
 * oblivious (the oblivious rank 0 sends its last block after its compute). */
START_TEST(test_gemm_alltoall)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi210-4.json");
  MmFusedSpec s = {.op = MM_FUSED_GEMM_A2A};
  g_autoptr(MmFusedResult) a = run_ok(hw, &s);
  s.schedule = MM_FUSED_OBLIVIOUS;
  g_autoptr(MmFusedResult) o = run_ok(hw, &s);
  ck_assert_double_gt(saved(a), 0.0);
  ck_assert_double_le(saved(a), (a->coll_s + a->launch_s) / a->baseline_s + 0.05);
  ck_assert_double_le(a->fused_s, o->fused_s);
}
END_TEST

/* The aware schedule inside a node or one rank per node runs one class for every rank; one class
 * per rank (flags as cross-rank engine collectives) gives the same times. */
START_TEST(test_symmetric_classes_agree)
{
  const struct {
    const char *file;
    MmFusedSpec spec;
  } cases[] = {
    {"hardware/mi210-4.json", {.op = MM_FUSED_GEMV_AR, .m = 32768}},
    {"hardware/mi210-4.json", {.op = MM_FUSED_GEMM_A2A, .m = 4096}},
    {"hardware/mi210-4.json", {.op = MM_FUSED_EMB_A2A, .batch = 512, .tables = 16}},
    {"hardware/mi210-2x4.json", {.op = MM_FUSED_EMB_A2A, .ranks = 2, .stride = 4, .batch = 512, .tables = 16}},
    {"hardware/mi300x-8.json", {.op = MM_FUSED_GEMM_A2A, .m = 4096, .schedule = MM_FUSED_INTERLEAVED}},
    {"hardware/mi210-4.json", {.op = MM_FUSED_GEMV_AR, .m = 16384, .schedule = MM_FUSED_INTERLEAVED}},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(MmHardware) hw = load_hw(cases[i].file);
    MmFusedSpec s = cases[i].spec;
    g_autoptr(MmFusedResult) one = run_ok(hw, &s);
    s.per_rank = TRUE;
    g_autoptr(MmFusedResult) all = run_ok(hw, &s);
    ck_assert_double_eq_tol(one->fused_s, all->fused_s, 1e-12 + 1e-9 * all->fused_s);
    ck_assert_double_eq_tol(one->compute_s, all->compute_s, 1e-12 + 1e-9 * all->fused_s);
    ck_assert_double_eq_tol(one->both_s, all->both_s, 1e-12 + 1e-9 * all->fused_s);
    ck_assert_uint_lt(one->events, all->events);
  }
}
END_TEST

/* The paper's schedules hand the lanes one destination block at a time, so a rank's puts use one
 * link; on a 7-link mesh with fast compute (MI300X) that makes the fused GEMM + All2All link-bound,
 * and the interleaved what-if (every remote destination each round) wins it back. */
START_TEST(test_interleaved_uses_links)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi300x-8.json");
  MmFusedSpec s = {.op = MM_FUSED_GEMM_A2A, .schedule = MM_FUSED_AWARE};
  g_autoptr(MmFusedResult) a = run_ok(hw, &s);
  s.schedule = MM_FUSED_INTERLEAVED;
  g_autoptr(MmFusedResult) il = run_ok(hw, &s);
  ck_assert_double_lt(il->fused_s, a->fused_s * 0.8);
  ck_assert_double_gt(a->fused_s, a->baseline_s); /* link-bound: slower than the bulk pair */
  ck_assert_double_lt(il->fused_s, il->baseline_s);
  /* with 3 links and a memory-bound kernel the order hardly matters */
  g_autoptr(MmHardware) mi210 = load_hw("hardware/mi210-4.json");
  MmFusedSpec e = {.op = MM_FUSED_EMB_A2A, .batch = 512, .tables = 64};
  g_autoptr(MmFusedResult) ea = run_ok(mi210, &e);
  e.schedule = MM_FUSED_INTERLEAVED;
  g_autoptr(MmFusedResult) ei = run_ok(mi210, &e);
  ck_assert_double_eq_tol(ei->fused_s, ea->fused_s, 0.01 * ea->fused_s);
}
END_TEST

/* 100K logical WGs, oblivious order (a class per rank): the slice-level simulation completes (its speed
 * is measured by scripts/bench-fused.sh, not here). */
START_TEST(test_speed)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/mi210-4.json");
  MmFusedSpec s = {.op = MM_FUSED_EMB_A2A, .batch = 1600, .tables = 64, .schedule = MM_FUSED_OBLIVIOUS};
  g_autoptr(MmFusedResult) r = run_ok(hw, &s);
  ck_assert_int_ge(r->logical_wgs, 100000);
  ck_assert_double_gt(r->fused_s, 0);
}
END_TEST

/* A device wide enough (10^6 CUs of 1024 waves of 1024 lanes) that a rank runs 2^35 slices: the
 * timeline's slice indices pass 2^32 (they were truncated to 32 bits and wrapped). */
START_TEST(test_slice_indices_past_2_32)
{
  g_autofree char *dev = g_strdup_printf(DEV_HEAD ", \"fused\": {"
    "\"compute_units\": {\"value\": 1e6, \"provenance\": \"estimate\", \"source\": \"t\"}, "
    "\"waves_per_cu\": {\"value\": 1024, \"provenance\": \"estimate\", \"source\": \"t\"}, "
    "\"wave_lanes\": {\"value\": 1024, \"provenance\": \"estimate\", \"source\": \"t\"}}}");
  g_autofree char *dev_path = mm_test_write("fk-wide-dev.json", dev);
  g_autofree char *sys = g_strdup_printf("{\"name\": \"wide\", \"device\": \"%s\", \"gpus_per_node\": 4, "
                                         "\"nodes\": 1, \"intra_node\": {\"topology\": \"full_mesh\", "
                                         "\"links_per_gpu\": 3, \"link_bw_GBps\": 50}}", dev_path);
  g_autofree char *sys_path = mm_test_write("fk-wide.json", sys);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) hw = mm_hardware_load(sys_path, &error);
  ck_assert_msg(hw != NULL, "%s", error ? error->message : "");
  MmFusedSpec s = {.op = MM_FUSED_EMB_A2A, .dtype = MM_DTYPE_FP16, .dtype_given = TRUE, .batch = (int64_t)1 << 30,
                   .tables = 1024, .schedule = MM_FUSED_AWARE, .timeline = TRUE};
  g_autoptr(MmFusedResult) r = run_ok(hw, &s);
  ck_assert_int_gt(r->n_slices, (int64_t)G_MAXUINT32);
  uint64_t end = 0, total = 0;
  for (guint i = 0; i < r->slices->len; i++) {
    const MmFusedSlice *sl = &g_array_index(r->slices, MmFusedSlice, i);
    if (sl->device != 0 || sl->phase != 0) continue;
    end = MAX(end, sl->first + sl->count);
    total += sl->count;
  }
  ck_assert_uint_eq(end, (uint64_t)r->n_slices);
  ck_assert_uint_eq(total, (uint64_t)r->n_slices);
}
END_TEST

/* Bad specs: MM_FUSED_ERROR_INVALID naming the field. */
static const struct {
  MmFusedSpec spec;
  const char *file;
  const char *needle;
} bad_specs[] = {
  {{.op = MM_FUSED_EMB_A2A, .ranks = 1}, "hardware/mi210-4.json", "ranks"},
  {{.op = MM_FUSED_EMB_A2A, .ranks = 8}, "hardware/mi210-4.json", "ranks"},
  {{.op = MM_FUSED_EMB_A2A, .batch = 1001}, "hardware/mi210-4.json", "batch"},
  {{.op = MM_FUSED_GEMV_AR, .m = 1001}, "hardware/mi210-4.json", "m:"},
  {{.op = MM_FUSED_GEMV_AR, .k = -3}, "hardware/mi210-4.json", "k:"},
  {{.op = MM_FUSED_EMB_A2A, .occupancy = 0.95}, "hardware/mi210-4.json", "occupancy"},
  {{.op = MM_FUSED_EMB_A2A, .ranks = 3, .stride = 3}, "hardware/mi210-2x4.json", "unevenly"},
  {{.op = MM_FUSED_EMB_A2A, .ranks = 64, .stride = INT64_MAX}, "hardware/mi210-2x4.json", "must fit"}, /* (ranks - 1) x stride overflowed */
  {{.op = MM_FUSED_GEMM_A2A, .thread_bytes = 1e9}, "hardware/mi210-4.json", "thread-bytes"},
  {{.op = MM_FUSED_EMB_A2A, .bulk_grid = -2}, "hardware/mi210-4.json", "bulk-grid"},
  {{.op = MM_FUSED_EMB_A2A, .schedule = (MmFusedSchedule)7}, "hardware/mi210-4.json", "schedule"},
  /* in every bound, but its time runs past the engine's clock: an input error, not an engine failure */
  {{.op = MM_FUSED_GEMM_A2A, .m = (int64_t)1 << 30, .n = (int64_t)1 << 20, .k = (int64_t)1 << 30,
    .slice_wgs = (int64_t)1 << 20}, "hardware/mi210-4.json", "too large to simulate"},
};

START_TEST(test_bad_spec)
{
  g_autoptr(MmHardware) hw = load_hw(bad_specs[_i].file);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmFusedResult) r = mm_fused_kernel_run(hw, &bad_specs[_i].spec, &error);
  ck_assert_ptr_null(r);
  ck_assert(g_error_matches(error, MM_FUSED_ERROR, MM_FUSED_ERROR_INVALID));
  ck_assert_msg(strstr(error->message, bad_specs[_i].needle), "%s", error->message);
}
END_TEST

static cJSON *parse_json(const char *text)
{
  cJSON *j = cJSON_Parse(text);
  ck_assert_ptr_nonnull(j);
  return j;
}

/* The command end to end: a table of points as JSON, byte-identical twice; trace and plot files;
 * bad options exit 1 naming the option. */
START_TEST(test_cli)
{
  const char *args[] = {"op", "gemv-ar", "--hardware", "hardware/mi210-4.json", "--m", "8192,65536", "--json", "-", NULL};
  g_autofree char *out = NULL, *out2 = NULL;
  ck_assert_int_eq(mm_test_cli(args, &out, NULL), 0);
  ck_assert_int_eq(mm_test_cli(args, &out2, NULL), 0);
  ck_assert_str_eq(out, out2);
  cJSON *root = parse_json(out);
  const cJSON *points = cJSON_GetObjectItemCaseSensitive(root, "points");
  ck_assert_int_eq(cJSON_GetArraySize(points), 2);
  const cJSON *fused = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(points, 0), "fused");
  ck_assert_int_eq(cJSON_GetArraySize(fused), 2);
  const cJSON *sp = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(fused, 0), "speedup");
  ck_assert(cJSON_IsNumber(sp) && sp->valuedouble > 1.0);
  cJSON_Delete(root);

  g_autofree char *trace = g_build_filename(mm_test_tmpdir(), "fk-trace.json", NULL);
  g_autofree char *plot = g_build_filename(mm_test_tmpdir(), "fk-plot", NULL);
  const char *targs[] = {"op", "emb-a2a", "-H", "hardware/mi210-2x4.json", "--ranks", "2", "--stride", "4", "--batch",
                         "512", "--tables", "16", "--trace", trace, "--plot", plot, NULL};
  g_autofree char *tout = NULL;
  ck_assert_int_eq(mm_test_cli(targs, &tout, NULL), 0);
  ck_assert_ptr_nonnull(strstr(tout, "oblivious"));
  g_autofree char *ttext = NULL;
  ck_assert(g_file_get_contents(trace, &ttext, NULL, NULL));
  cJSON *tj = parse_json(ttext);
  ck_assert_int_gt(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(tj, "traceEvents")), 10);
  cJSON_Delete(tj);
  g_autofree char *dat = g_build_filename(plot, "fused-slices.dat", NULL);
  g_autofree char *gp = g_build_filename(plot, "fused-slices.gp", NULL);
  ck_assert(g_file_test(dat, G_FILE_TEST_IS_REGULAR));
  ck_assert(g_file_test(gp, G_FILE_TEST_IS_REGULAR));

  static const struct {
    const char *a, *b, *needle;
  } bad[] = {
    {"--batch", "0", "--batch"},       {"--tables", "x", "--tables"}, {"--schedule", "fast", "--schedule"},
    {"--occupancy", "2", "--occupancy"}, {"--batch", "1001", "--batch"}, {"--ranks", "1", "--ranks"},
    /* "" splits into no parts: no schedule was a NULL dereference, an empty list a silent exit 1 */
    {"--schedule", "", "--schedule"},  {"--batch", "", "--batch"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    const char *bargs[] = {"op", "emb-a2a", "--hardware", "hardware/mi210-4.json", bad[i].a, bad[i].b, "--json", trace,
                           NULL};
    g_autofree char *err = NULL;
    ck_assert_int_eq(mm_test_cli(bargs, NULL, &err), 1);
    ck_assert_msg(strstr(err, bad[i].needle), "%s", err);
  }
  /* a failed command leaves the earlier trace as it was (nothing half-written) */
  g_autofree char *after = NULL;
  ck_assert(g_file_get_contents(trace, &after, NULL, NULL));
  ck_assert_str_eq(after, ttext);
  /* a failed output leaves no --plot directory behind (it was created empty) */
  g_autofree char *plot2 = g_build_filename(mm_test_tmpdir(), "fk-plot-failed", NULL);
  g_autofree char *nojson = g_build_filename(mm_test_tmpdir(), "no-such-dir", "x.json", NULL);
  const char *fargs[] = {"op", "gemv-ar", "-H", "hardware/mi210-4.json", "--plot", plot2, "--json", nojson, NULL};
  ck_assert_int_eq(mm_test_cli(fargs, NULL, NULL), 1);
  ck_assert(!g_file_test(plot2, G_FILE_TEST_EXISTS));
  const char *nohw[] = {"op", "gemm-a2a", NULL};
  ck_assert_int_eq(mm_test_cli(nohw, NULL, NULL), 1);
  const char *help[] = {"op", "emb-a2a", "--help", NULL};
  g_autofree char *hout = NULL;
  ck_assert_int_eq(mm_test_cli(help, &hout, NULL), 0);
  ck_assert_ptr_nonnull(strstr(hout, "hardware/mi210-4.json"));
}
END_TEST

static Suite *suite(void)
{
  Suite *s = suite_create("fused_kernel");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_fused_coefficients);
  tcase_add_test(tc, test_resources);
  tcase_add_test(tc, test_gemv_allreduce_trend);
  tcase_add_test(tc, test_conservation);
  tcase_add_test(tc, test_schedule_skew);
  tcase_add_test(tc, test_embedding_gains);
  tcase_add_test(tc, test_embedding_size_trend);
  tcase_add_test(tc, test_occupancy_tradeoff);
  tcase_add_test(tc, test_gemm_alltoall);
  tcase_add_test(tc, test_symmetric_classes_agree);
  tcase_add_test(tc, test_interleaved_uses_links);
  tcase_add_test(tc, test_speed);
  tcase_add_test(tc, test_slice_indices_past_2_32);
  tcase_add_test(tc, test_cli);
  suite_add_tcase(s, tc);
  TCase *bad = tcase_create("bad_input");
  tcase_add_loop_test(bad, test_bad_spec, 0, (int)G_N_ELEMENTS(bad_specs));
  suite_add_tcase(s, bad);
  return s;
}

int main(void) { return mm_test_main(suite()); }

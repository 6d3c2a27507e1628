/* check_pipeline: pipeline schedules in the engine (exact bubbles), in plans (stages, transfers, memory). */
#include <math.h>

#include "engine/engine.h"
#include "plan/plan.h"
#include "testutil.h"

/* ---- the schedule generator and the engine, on stage programs built from it ---- */

/* One stage's program: per step a receive (pipeline input), the chunk's compute, a send;
 * chunk forward takes tf, backward tb; transfers take no time. */
typedef struct {
  GArray *ops;  /* MmEngineOp */
  GArray *deps; /* uint32_t */
  GArray *dur;  /* MmTime */
  MmTime busy;  /* compute time */
} StageProg;

enum { S_COMPUTE, S_SEND_F, S_SEND_B, S_RECV_F, S_RECV_B, S_COUNT };

static uint32_t add_op(StageProg *sp, uint32_t stream, MmTime dur, uint32_t dep, uint32_t coll, int32_t peer)
{
  MmEngineOp o = {.stream = stream, .dep_first = sp->deps->len, .n_deps = dep == UINT32_MAX ? 0 : 1, .coll = coll,
                  .degree = 2, .stride = 1, .peer = peer};
  if (dep != UINT32_MAX) g_array_append_val(sp->deps, dep);
  g_array_append_val(sp->ops, o);
  g_array_append_val(sp->dur, dur);
  if (stream == S_COMPUTE) sp->busy += dur;
  return sp->ops->len - 1;
}

/* Transfer ids shared by sender and receiver: boundary k -> k + 1, micro-batch, direction. */
static uint32_t xfer_id(guint k, guint micro, guint m, gboolean bwd)
{
  return 0x80000000u + (k * m + micro) * 2 + (bwd ? 1 : 0);
}

static void build_stage(StageProg *sp, MmPipeSchedule kind, guint p, guint v, guint m, guint s, MmTime tf, MmTime tb,
                        MmTime tw)
{
  sp->ops = g_array_new(FALSE, FALSE, sizeof(MmEngineOp));
  sp->deps = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  sp->dur = g_array_new(FALSE, FALSE, sizeof(MmTime));
  sp->busy = 0;
  const guint K = p * v;
  g_autofree MmPipeStep *steps = g_new(MmPipeStep, 3 * m * v);
  guint n = mm_pipe_schedule(kind, p, v, m, s, TRUE, steps);
  ck_assert_uint_eq(n, (kind == MM_PIPE_ZB_H1 ? 3 : 2) * m * v);
  if (kind != MM_PIPE_ZB_H1) tb += tw; /* the weight gradient inside the backward */
  for (guint i = 0; i < n; i++) {
    const guint k = steps[i].chunk * p + s, mi = steps[i].micro;
    const int32_t up = (int32_t)((k + 1) % p) - (int32_t)s, down = (int32_t)((k + K - 1) % p) - (int32_t)s;
    if (steps[i].bwd == MM_PIPE_W) {
      add_op(sp, S_COMPUTE, tw, UINT32_MAX, MM_NO_COLL, 0); /* after its B: the compute stream is FIFO */
    } else if (!steps[i].bwd) {
      uint32_t in = k > 0 ? add_op(sp, S_RECV_F, 0, UINT32_MAX, xfer_id(k - 1, mi, m, FALSE), down) : UINT32_MAX;
      uint32_t c = add_op(sp, S_COMPUTE, tf, in, MM_NO_COLL, 0);
      if (k + 1 < K) add_op(sp, S_SEND_F, 0, c, xfer_id(k, mi, m, FALSE), up);
    } else {
      uint32_t in = k + 1 < K ? add_op(sp, S_RECV_B, 0, UINT32_MAX, xfer_id(k, mi, m, TRUE), up) : UINT32_MAX;
      uint32_t c = add_op(sp, S_COMPUTE, tb, in, MM_NO_COLL, 0);
      if (k > 0) add_op(sp, S_SEND_B, 0, c, xfer_id(k - 1, mi, m, TRUE), down);
    }
  }
}

/* Simulates the schedule over @p stages (one device each); returns the makespan and
 * checks that every stage computed m v (tf + tb). The last stage's backward of a chunk
 * waits for its own forward through the FIFO compute stream. */
static MmTime run_pipeline_w(MmPipeSchedule kind, guint p, guint v, guint m, MmTime tf, MmTime tb, MmTime tw)
{
  g_autofree StageProg *sp = g_new0(StageProg, p);
  g_autofree MmEngineProgram *progs = g_new(MmEngineProgram, p);
  g_autofree MmEngineClass *classes = g_new(MmEngineClass, p);
  for (guint s = 0; s < p; s++) {
    build_stage(&sp[s], kind, p, v, m, s, tf, tb, tw);
    progs[s] = (MmEngineProgram){(MmEngineOp *)(void *)sp[s].ops->data, sp[s].ops->len,
                                 (uint32_t *)(void *)sp[s].deps->data, S_COUNT, NULL, NULL, 0};
    classes[s] = (MmEngineClass){s, (MmTime *)(void *)sp[s].dur->data, s, NULL, 0};
    ck_assert_uint_eq(sp[s].busy, (MmTime)m * v * (tf + tb + tw));
  }
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) e = mm_engine_new(progs, p, classes, p, &error);
  ck_assert_msg(e != NULL, "%s", error ? error->message : "");
  ck_assert_msg(mm_engine_run(e, &error), "%s", error ? error->message : "");
  MmTime t = mm_engine_makespan(e);
  for (guint s = 0; s < p; s++) {
    g_array_free(sp[s].ops, TRUE);
    g_array_free(sp[s].deps, TRUE);
    g_array_free(sp[s].dur, TRUE);
  }
  return t;
}

static MmTime run_pipeline(MmPipeSchedule kind, guint p, guint v, guint m, MmTime tf, MmTime tb)
{
  return run_pipeline_w(kind, p, v, m, tf, tb, 0);
}

START_TEST(test_1f1b_bubble_exact)
{
  /* bubble fraction (p - 1) / (m + p - 1): the makespan is (m + p - 1) (tf + tb) */
  static const guint ps[] = {2, 3, 4, 8};
  for (guint i = 0; i < G_N_ELEMENTS(ps); i++) {
    const guint p = ps[i];
    const guint ms[] = {1, p, 2 * p + 1, 4 * p};
    for (guint j = 0; j < G_N_ELEMENTS(ms); j++) {
      const guint m = ms[j];
      const MmTime tf = 1000, tb = 2000;
      MmTime t = run_pipeline(MM_PIPE_1F1B, p, 1, m, tf, tb);
      ck_assert_msg(t == (MmTime)(m + p - 1) * (tf + tb), "p %u m %u: %" G_GUINT64_FORMAT, p, m, t);
      double bubble = 1.0 - (double)(m * (tf + tb)) / (double)t;
      ck_assert_double_eq_tol(bubble, (double)(p - 1) / (double)(m + p - 1), 1e-12);
      /* GPipe idles as long */
      ck_assert_uint_eq(run_pipeline(MM_PIPE_GPIPE, p, 1, m, tf, tb), t);
    }
  }
}
END_TEST

START_TEST(test_interleaved_divides_bubble)
{
  /* v chunks per stage, each 1/v of the stage's layers: the bubble (p - 1)(tf + tb) / v */
  static const guint ps[] = {2, 4};
  static const guint vs[] = {2, 3, 4};
  for (guint i = 0; i < G_N_ELEMENTS(ps); i++) {
    for (guint j = 0; j < G_N_ELEMENTS(vs); j++) {
      const guint p = ps[i], v = vs[j];
      for (guint mult = 1; mult <= 3; mult++) {
        const guint m = mult * p;
        const MmTime tf = 1200 * 12, tb = 2 * tf; /* whole-stage times, divisible by v */
        MmTime t = run_pipeline(MM_PIPE_INTERLEAVED, p, v, m, tf / v, tb / v);
        MmTime ideal = (MmTime)m * (tf + tb), bubble = t - ideal;
        ck_assert_msg(bubble == (MmTime)(p - 1) * (tf + tb) / v, "p %u v %u m %u: bubble %" G_GUINT64_FORMAT, p, v, m,
                      bubble);
        MmTime plain = run_pipeline(MM_PIPE_1F1B, p, 1, m, tf, tb) - ideal;
        ck_assert_uint_eq(bubble * v, plain);
      }
    }
  }
}
END_TEST

START_TEST(test_schedules_are_complete)
{
  /* every (chunk, micro-batch) runs forward once and backward once, backward after forward;
   * 1F1B keeps at most p - s micro-batches in flight, GPipe all m */
  static const MmPipeSchedule kinds[] = {MM_PIPE_GPIPE, MM_PIPE_1F1B, MM_PIPE_INTERLEAVED};
  const guint p = 4, m = 8;
  for (guint k = 0; k < G_N_ELEMENTS(kinds); k++) {
    const guint v = kinds[k] == MM_PIPE_INTERLEAVED ? 2 : 1;
    for (guint s = 0; s < p; s++) {
      MmPipeStep steps[2 * 8 * 2];
      guint n = mm_pipe_schedule(kinds[k], p, v, m, s, TRUE, steps);
      ck_assert_uint_eq(n, 2 * m * v);
      int state[2][8] = {{0}};
      int live = 0, peak = 0;
      for (guint i = 0; i < n; i++) {
        int *st = &state[steps[i].chunk][steps[i].micro];
        ck_assert_int_eq(*st, steps[i].bwd ? 1 : 0);
        *st += 1;
        live += steps[i].bwd ? -1 : 1;
        peak = MAX(peak, live);
      }
      for (guint c = 0; c < v; c++)
        for (guint i = 0; i < m; i++) ck_assert_int_eq(state[c][i], 2);
      if (kinds[k] == MM_PIPE_1F1B) ck_assert_int_eq(peak, (int)(p - s));
      if (kinds[k] == MM_PIPE_GPIPE) ck_assert_int_eq(peak, (int)m);
    }
    /* forward only: m v forwards in order */
    MmPipeStep f[16];
    ck_assert_uint_eq(mm_pipe_schedule(kinds[k], p, v, m, 0, FALSE, f), m * v);
  }
}
END_TEST

/* ZB-H1's order, written out by hand from its reference schedule (sail-sg
 * zero-bubble-pipeline-parallelism, ZeroBubbleH1Pipeline) for 4 stages and 8 micro-batches:
 * warm-up forwards, s (F, B) pairs whose W waits, (F, B, W) while forwards remain, (B, W), the
 * s deferred W passes. */
START_TEST(test_zb_h1_order)
{
  static const char *const want[4] = {
    "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7",
    "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7",
    "F0 F1 B0 F2 B1 F3 B2 W0 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 B7 W5 W6 W7",
    "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7",
  };
  for (guint s = 0; s < 4; s++) {
    MmPipeStep steps[3 * 8];
    guint n = mm_pipe_schedule(MM_PIPE_ZB_H1, 4, 1, 8, s, TRUE, steps);
    g_autoptr(GString) got = g_string_new(NULL);
    for (guint i = 0; i < n; i++)
      g_string_append_printf(got, "%s%c%u", i ? " " : "", "FBW"[steps[i].bwd], steps[i].micro);
    ck_assert_str_eq(got->str, want[s]);
  }
  /* any stage count and micro-batch count, fewer than the stages too: every pass once, W after its B
   * and in B's order; 1F1B's in-flight bound p - s (forwards whose B has not run) and at most s + 1
   * weight gradients pending (the lowering's ring holds p + 1) */
  for (guint p = 1; p <= 8; p++)
    for (guint m = 1; m <= 3 * p; m++)
      for (guint s = 0; s < p; s++) {
        MmPipeStep steps[3 * 24];
        guint n = mm_pipe_schedule(MM_PIPE_ZB_H1, p, 1, m, s, TRUE, steps);
        ck_assert_uint_eq(n, 3 * m);
        guint f = 0, b = 0, w = 0;
        for (guint i = 0; i < n; i++) {
          if (steps[i].bwd == 0) ck_assert_uint_eq(steps[i].micro, f++);
          if (steps[i].bwd == 1) ck_assert_uint_eq(steps[i].micro, b++);
          if (steps[i].bwd == MM_PIPE_W) ck_assert_uint_eq(steps[i].micro, w++);
          ck_assert_uint_le(b, f);
          ck_assert_uint_le(w, b);
          ck_assert_uint_le(f - b, p - s);
          ck_assert_uint_le(b - w, s + 1);
        }
      }
}
END_TEST

START_TEST(test_zb_h1_bubble)
{
  /* With equal forward, input-gradient and weight-gradient times T and free transfers, 1F1B takes
   * (m + p - 1) 3T and ZB-H1 3mT + (p - 1)(T_F + T_B - T_W) = (3m + p - 1) T (Qi et al., Sec. 3.1:
   * a third of the bubble) */
  static const guint ps[] = {2, 4, 8};
  for (guint i = 0; i < G_N_ELEMENTS(ps); i++) {
    const guint p = ps[i];
    for (guint m = p; m <= 3 * p; m += p) {
      const MmTime T = 1000;
      const MmTime zb = run_pipeline_w(MM_PIPE_ZB_H1, p, 1, m, T, T, T);
      const MmTime f1b1 = run_pipeline_w(MM_PIPE_1F1B, p, 1, m, T, T, T);
      ck_assert_msg(f1b1 == (MmTime)(m + p - 1) * 3 * T, "1f1b p %u m %u: %" G_GUINT64_FORMAT, p, m, f1b1);
      ck_assert_msg(zb == (MmTime)(3 * m + p - 1) * T, "zb p %u m %u: %" G_GUINT64_FORMAT, p, m, zb);
    }
  }
  /* a longer weight gradient (T_W = T_F + T_B) fills the whole cool-down: what is left is the
   * warm-up, (p - 1) T_F before the last stage's first forward, which no schedule avoids; 1F1B
   * idles (p - 1)(T_F + T_B + T_W) */
  ck_assert_uint_eq(run_pipeline_w(MM_PIPE_ZB_H1, 4, 1, 8, 1000, 1000, 2000), (MmTime)8 * 4000 + 3 * 1000);
  ck_assert_uint_eq(run_pipeline_w(MM_PIPE_1F1B, 4, 1, 8, 1000, 1000, 2000), (MmTime)(8 + 3) * 4000);
}
END_TEST

/* DualPipeV's order, worked out by hand from the reference's eight phases (deepseek-ai/DualPipe,
 * dualpipev.py, DualPipeV.step) for 2 stages and 4 micro-batches: "F1.2" is the forward of local
 * chunk 1 for micro-batch 2, "B" an input gradient whose weight gradient "W" comes later, "BW" a
 * backward doing both. */
static GString *steps_text(const MmPipeStep *steps, guint n)
{
  static const char *const kind[] = {"F", "B", "W", "BW"};
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf(s, "%s%s%u.%u", i ? " " : "", kind[steps[i].bwd], steps[i].chunk, steps[i].micro);
  return s;
}

START_TEST(test_dualpipev_order)
{
  static const char *const want[2] = {
    "F0.0 F0.1 F0.2 F1.0 B1.0 W1.0 F1.1 F0.3 BW1.1 F1.2 BW0.0 BW1.2 F1.3 BW0.1 BW1.3 B0.2 W0.2 B0.3 W0.3",
    "F0.0 F1.0 F0.1 F1.1 F0.2 BW1.0 F1.2 BW0.0 F0.3 BW1.1 F1.3 BW0.1 BW1.2 BW0.2 B1.3 B0.3 W1.3 W0.3",
  };
  for (guint s = 0; s < 2; s++) {
    MmPipeStep steps[6 * 4];
    guint n = mm_pipe_schedule(MM_PIPE_DUALPIPEV, 2, 2, 4, s, TRUE, steps);
    g_autoptr(GString) got = steps_text(steps, n);
    ck_assert_str_eq(got->str, want[s]);
  }
  /* any stage count, 2p to 3p + 2 micro-batches: every forward and backward once, in micro-batch
   * order per chunk, a backward after its forward; a W for each split backward, after it and in
   * the order of the backwards; 4m + 2p - s - 1 steps; on the last stage (the V's turn) chunk 1's
   * forward after chunk 0's and chunk 0's backward after chunk 1's, for every micro-batch */
  for (guint p = 1; p <= 8; p++)
    for (guint m = 2 * p; m <= 3 * p + 2; m++)
      for (guint s = 0; s < p; s++) {
        MmPipeStep steps[6 * 26];
        guint n = mm_pipe_schedule(MM_PIPE_DUALPIPEV, p, 2, m, s, TRUE, steps);
        ck_assert_uint_eq(n, 4 * m + 2 * p - s - 1);
        guint f[2] = {0, 0}, b[2] = {0, 0}, pending = 0;
        MmPipeStep wq[32];
        guint wq_head = 0;
        int fwd_at[2][26], bwd_at[2][26];
        for (guint i = 0; i < n; i++) {
          const MmPipeStep *x = &steps[i];
          ck_assert_uint_lt(x->chunk, 2);
          if (x->bwd == 0) {
            ck_assert_uint_eq(x->micro, f[x->chunk]++);
            fwd_at[x->chunk][x->micro] = (int)i;
          } else if (x->bwd == MM_PIPE_W) {
            ck_assert_uint_gt(pending, 0);
            ck_assert_uint_eq(x->chunk, wq[wq_head].chunk);
            ck_assert_uint_eq(x->micro, wq[wq_head].micro);
            wq_head++;
            pending--;
          } else {
            ck_assert_uint_eq(x->micro, b[x->chunk]++);
            ck_assert_uint_lt(x->micro, f[x->chunk]); /* after its forward */
            bwd_at[x->chunk][x->micro] = (int)i;
            if (x->bwd == 1) wq[wq_head + pending++] = *x;
          }
        }
        ck_assert_uint_eq(pending, 0);
        ck_assert_uint_eq(wq_head, 2 * p - s - 1);
        /* forward only: the same forwards in the same order, 2m of them */
        MmPipeStep fw[2 * 26];
        ck_assert_uint_eq(mm_pipe_schedule(MM_PIPE_DUALPIPEV, p, 2, m, s, FALSE, fw), 2 * m);
        for (guint i = 0, j = 0; i < n; i++)
          if (steps[i].bwd == 0) {
            ck_assert_uint_eq(fw[j].chunk, steps[i].chunk);
            ck_assert_uint_eq(fw[j++].micro, steps[i].micro);
          }
        ck_assert(f[0] == m && f[1] == m && b[0] == m && b[1] == m);
        if (s == p - 1)
          for (guint i = 0; i < m; i++) {
            ck_assert_int_lt(fwd_at[0][i], fwd_at[1][i]);
            ck_assert_int_lt(bwd_at[1][i], bwd_at[0][i]);
          }
      }
}
END_TEST

/* ---- plans ---------------------------------------------------------------- */

/* A transformer stack alone (no embedding or head), so every stage costs the same. */
static const char *const UNIFORM =
  "{\"name\":\"uniform\",\"seq_len\":1024,\"blocks\":[{\"kind\":\"transformer\",\"count\":16,\"hidden\":4096,"
  "\"heads\":32,\"ffn\":16384}]}";

/* Two 8-GPU nodes whose links are so fast and short that transfers vanish. (transfer full) */
static char *fast2(void)
{
  g_autofree char *dev = mm_test_src("hardware/devices/a100-80gb.json");
  return g_strdup_printf("{\"name\":\"fast\",\"device\":\"%s\",\"gpus_per_node\":8,\"nodes\":2,"
                         "\"intra_node\":{\"topology\":\"switch\",\"links_per_gpu\":1,\"link_bw_GBps\":1e7,"
                         "\"latency_us\":0,\"base_latency_us\":0},"
                         "\"inter_node\":{\"topology\":\"fat_tree\",\"nics_per_node\":8,\"nic_bw_Gbps\":1e7,"
                         "\"latency_us\":0,\"base_latency_us\":0}}",
                         dev);
}

static char *pp_config(int pp, const char *schedule, int v, int global, const char *levels)
{
  return g_strdup_printf("{\"name\":\"pp\",\"task\":\"pretrain\",\"global_batch\":%d,\"micro_batch\":1,"
                         "\"pipeline\":{\"degree\":%d,\"schedule\":\"%s\",\"virtual_stages\":%d},"
                         "\"parallelism\":{\"default\":%s}}",
                         global, pp, schedule, v, levels);
}

START_TEST(test_plan_bubble_matches_schedule)
{
  g_autofree char *fast = fast2();
  /* 4 stages x 4 tp; 8 micro-batches: the stages idle (p - 1) / (m + p - 1) of the time */
  g_autofree char *cfg = pp_config(4, "1f1b", 1, 8, "[{\"strategy\":\"tp\",\"degree\":4}]");
  g_autoptr(MmSimulation) x = mm_test_sim_ok(UNIFORM, fast, cfg, 0);
  ck_assert_uint_eq(x->plan->n_programs, 4);
  ck_assert_uint_eq(x->scenario->micro_steps, 8);
  /* the bubble over the forward and backward work (the optimizer step follows the flush) */
  const MmRunMetrics *r = &x->metrics;
  double work = r->compute_by_phase_s[MM_PHASE_FWD] + r->compute_by_phase_s[MM_PHASE_BWD];
  double bubble = r->iteration_time_s - r->compute_active_s;
  ck_assert_double_eq_tol(bubble / (bubble + work), 3.0 / 11.0, 0.01 * 3.0 / 11.0);
  /* interleaving two chunks per stage halves the bubble time */
  g_autofree char *cfg2 = pp_config(4, "interleaved_1f1b", 2, 8, "[{\"strategy\":\"tp\",\"degree\":4}]");
  g_autoptr(MmSimulation) y = mm_test_sim_ok(UNIFORM, fast, cfg2, 0);
  double ideal = r->compute_active_s;
  ck_assert_double_eq_tol(y->metrics.iteration_time_s - ideal, (x->metrics.iteration_time_s - ideal) / 2.0,
                          0.02 * (x->metrics.iteration_time_s - ideal));
  /* every stage computes the same, but the first skips its input's gradient */
  cJSON *arr = mm_report_classes_json(x->plan, x->engine, x->memory);
  ck_assert_int_eq(cJSON_GetArraySize(arr), 4);
  double busy1 = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 1), "compute_busy_s")->valuedouble;
  ck_assert_double_lt(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "compute_busy_s")->valuedouble, busy1);
  for (int i = 2; i < 4; i++)
    ck_assert_double_eq_tol(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, i), "compute_busy_s")->valuedouble, busy1,
                            1e-9);
  cJSON_Delete(arr);
}
END_TEST

/* Sum over a plan's programs of @what ops' time, and the count of @coll collectives of @reason. */
static double plan_time(const MmPlan *p, MmOpWhat what)
{
  double t = 0;
  for (uint32_t c = 0; c < p->n_programs; c++)
    for (uint32_t i = 0; i < p->programs[c].n_ops; i++)
      if (p->programs[c].info[i].what == what) t += p->programs[c].info[i].time_s;
  return t;
}

static guint plan_colls(const MmPlan *p, MmCollKind coll, MmReason reason)
{
  guint n = 0;
  for (uint32_t c = 0; c < p->n_programs; c++)
    for (uint32_t i = 0; i < p->programs[c].n_ops; i++)
      n += p->programs[c].info[i].what == MM_OP_COLLECTIVE && p->programs[c].info[i].coll == coll &&
           p->programs[c].info[i].reason == reason;
  return n;
}

START_TEST(test_zb_h1_plan)
{
  /* 4 stages x tp 2 x dp 2 with near-free transfers, 8 micro-batches: ZB-H1 does the same work
   * (compute time, gradient all-reduces) in less time, with the memory 1F1B needs */
  g_autofree char *fast = fast2();
  const char *levels = "[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"ddp\",\"degree\":2}]";
  g_autofree char *a = pp_config(4, "1f1b", 1, 16, levels);
  g_autofree char *b = pp_config(4, "zb_h1", 1, 16, levels);
  g_autoptr(MmSimulation) x = mm_test_sim_ok(UNIFORM, fast, a, 0);
  g_autoptr(MmSimulation) y = mm_test_sim_ok(UNIFORM, fast, b, 0);
  ck_assert_double_eq_tol(plan_time(y->plan, MM_OP_COMPUTE), plan_time(x->plan, MM_OP_COMPUTE),
                          1e-9 * plan_time(x->plan, MM_OP_COMPUTE));
  ck_assert_uint_gt(plan_colls(x->plan, MM_COLL_ALL_REDUCE, MM_REASON_DDP), 0);
  ck_assert_uint_eq(plan_colls(y->plan, MM_COLL_ALL_REDUCE, MM_REASON_DDP),
                    plan_colls(x->plan, MM_COLL_ALL_REDUCE, MM_REASON_DDP));
  ck_assert_double_lt(y->metrics.iteration_time_s, x->metrics.iteration_time_s);
  /* no schedule beats the busiest stage's work */
  double busiest = 0;
  cJSON *cls = mm_report_classes_json(y->plan, y->engine, y->memory);
  for (int i = 0; i < cJSON_GetArraySize(cls); i++)
    busiest = MAX(busiest, cJSON_GetObjectItem(cJSON_GetArrayItem(cls, i), "compute_busy_s")->valuedouble);
  cJSON_Delete(cls);
  ck_assert_double_gt(y->metrics.iteration_time_s, busiest);
  ck_assert_double_eq(y->memory->per_device_bytes, x->memory->per_device_bytes);
  /* every device simulated: the same answer */
  MmSimOptions opt = {.per_device = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) z = mm_test_sim(UNIFORM, fast, b, &opt, &error);
  ck_assert_msg(z != NULL, "%s", error ? error->message : "");
  ck_assert_double_eq(z->metrics.iteration_time_s, y->metrics.iteration_time_s);
}
END_TEST

START_TEST(test_dualpipev_plan)
{
  /* 4 stages x tp 2 x dp 2, near-free transfers, 16 micro-batches: DualPipeV does 1F1B's work (the
   * same compute, the same gradient all-reduces) with a smaller bubble than 1F1B and ZB-H1; its V
   * puts the embedding and the head on stage 0, which then needs no tied-gradient exchange; every
   * device simulated gives the same answer */
  g_autofree char *fast = fast2();
  const char *levels = "[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"ddp\",\"degree\":2}]";
  g_autofree char *a = pp_config(4, "1f1b", 1, 32, levels);
  g_autofree char *b = pp_config(4, "dualpipev", 2, 32, levels);
  g_autofree char *c = pp_config(4, "zb_h1", 1, 32, levels);
  g_autoptr(MmSimulation) x = mm_test_sim_ok(UNIFORM, fast, a, 0);
  g_autoptr(MmSimulation) y = mm_test_sim_ok(UNIFORM, fast, b, 0);
  g_autoptr(MmSimulation) z = mm_test_sim_ok(UNIFORM, fast, c, 0);
  ck_assert_uint_eq(y->scenario->vstages, 2);
  ck_assert_double_eq_tol(plan_time(y->plan, MM_OP_COMPUTE), plan_time(x->plan, MM_OP_COMPUTE),
                          1e-9 * plan_time(x->plan, MM_OP_COMPUTE));
  ck_assert_uint_eq(plan_colls(y->plan, MM_COLL_ALL_REDUCE, MM_REASON_DDP),
                    plan_colls(x->plan, MM_COLL_ALL_REDUCE, MM_REASON_DDP));
  ck_assert_double_lt(y->metrics.idle_s, x->metrics.idle_s);
  ck_assert_double_lt(y->metrics.idle_s, z->metrics.idle_s);
  ck_assert_double_lt(y->metrics.iteration_time_s, x->metrics.iteration_time_s);
  /* the V: chunk k and chunk 2p - 1 - k on one stage */
  for (uint32_t k = 0; k < 8; k++) {
    ck_assert_uint_eq(mm_pipe_chunk_stage(y->scenario, k), k < 4 ? k : 7 - k);
    ck_assert_uint_eq(mm_pipe_stage_chunk(y->scenario, mm_pipe_chunk_stage(y->scenario, k), k < 4 ? 0 : 1), k);
  }
  MmSimOptions opt = {.per_device = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) w = mm_test_sim(UNIFORM, fast, b, &opt, &error);
  ck_assert_msg(w != NULL, "%s", error ? error->message : "");
  ck_assert_double_eq(w->metrics.iteration_time_s, y->metrics.iteration_time_s);
  ck_assert_double_eq(w->metrics.exposed_comm_s, y->metrics.exposed_comm_s);

  g_autofree char *gpt = pp_config(4, "dualpipev", 2, 16, "[{\"strategy\":\"tp\",\"degree\":4}]");
  g_autoptr(MmSimulation) t = mm_test_sim_ok("models/megatron-gpt-7.5b.json", fast, gpt, 0);
  const MmGraph *g = t->graph;
  ck_assert_uint_eq(t->plan->unit_chunk[0], 0);
  ck_assert_uint_eq(t->plan->unit_chunk[g->n_units - 1], 7);
  ck_assert_uint_eq(mm_pipe_chunk_stage(t->scenario, t->plan->unit_chunk[g->n_units - 1]), 0);
  for (uint32_t pr = 0; pr < t->plan->n_programs; pr++) {
    const MmPlanProgram *q = &t->plan->programs[pr];
    for (uint32_t i = 0; i < q->n_ops; i++)
      ck_assert(!(q->info[i].reason == MM_REASON_PP && q->info[i].coll == MM_COLL_ALL_REDUCE));
  }
  /* chunk 0 of stage s holds 2p - s micro-batches at the peak: 2(p - s - 1) warm-up forwards, s + 1
   * of the paired ones and the first of the main phase before its first backward (1F1B: p - s) */
  for (int s = 0; s < 4; s++) ck_assert_double_eq(t->memory->stage_inflight[s], 8 - s);

  /* one stage: no V; the iteration is 1F1B's (gradient accumulation), weight gradients included */
  const char *one = "[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"ddp\",\"degree\":\"all\"}]";
  g_autofree char *one_a = pp_config(1, "1f1b", 1, 64, one);
  g_autofree char *one_b = pp_config(1, "dualpipev", 1, 64, one);
  g_autoptr(MmSimulation) oa = mm_test_sim_ok(UNIFORM, fast, one_a, 0);
  g_autoptr(MmSimulation) ob = mm_test_sim_ok(UNIFORM, fast, one_b, 0);
  ck_assert_uint_eq(ob->scenario->vstages, 1);
  ck_assert_double_eq(ob->metrics.iteration_time_s, oa->metrics.iteration_time_s);
  ck_assert_double_eq(plan_time(ob->plan, MM_OP_COMPUTE), plan_time(oa->plan, MM_OP_COMPUTE));
}
END_TEST

/* The P2P ops of a program with their link kinds. */
static void p2p_links(const MmPlan *p, uint32_t prog, gboolean *nic, gboolean *intra, int *sends, int *recvs)
{
  const MmPlanProgram *pr = &p->programs[prog];
  *nic = *intra = FALSE;
  *sends = *recvs = 0;
  for (uint32_t i = 0; i < pr->n_ops; i++) {
    if (pr->info[i].reason != MM_REASON_PP || pr->info[i].coll != MM_COLL_P2P) continue;
    const MmEngineOp *o = &pr->ops[i];
    if (o->n_xfer == 0) {
      (*recvs)++;
      continue;
    }
    (*sends)++;
    for (uint32_t k = 0; k < o->n_xfer; k++) {
      MmLinkKind kind = p->links.kind[pr->xfer_link[o->xfer_first + k]];
      *nic |= kind == MM_LINK_NIC;
      *intra |= kind == MM_LINK_INTRA;
    }
  }
}

/* The activations one stage sends the next per micro-batch (forward P2P sends of program 0). */
static double fwd_send_bytes(const MmPlan *p)
{
  const MmPlanProgram *pr = &p->programs[0];
  for (uint32_t i = 0; i < pr->n_ops; i++)
    if (pr->info[i].reason == MM_REASON_PP && pr->info[i].coll == MM_COLL_P2P && pr->info[i].phase == MM_PHASE_FWD &&
        pr->ops[i].n_xfer > 0)
      return pr->info[i].bytes;
  ck_abort_msg("no forward send");
  return 0;
}

/* A stage boundary after an MoE layer carries the combined hidden state, one row per token as
 * after a dense layer, not the experts' top_k copies of it. */
START_TEST(test_moe_boundary_bytes)
{
  g_autofree char *fast = fast2();
  g_autofree char *cfg = pp_config(2, "1f1b", 1, 16, "[{\"strategy\":\"ddp\",\"degree\":\"all\"}]");
  const char *dense = "{\"name\":\"d\",\"seq_len\":1024,\"dtype\":\"bf16\",\"blocks\":[{\"kind\":\"transformer\","
                      "\"count\":4,\"hidden\":1024,\"heads\":8,\"ffn\":2048}]}";
  const char *moe = "{\"name\":\"m\",\"seq_len\":1024,\"dtype\":\"bf16\",\"blocks\":[{\"kind\":\"transformer\","
                    "\"count\":4,\"hidden\":1024,\"heads\":8,\"ffn\":2048,\"experts\":8,\"top_k\":2}]}";
  g_autoptr(MmSimulation) d = mm_test_sim_ok(dense, fast, cfg, 0);
  g_autoptr(MmSimulation) m = mm_test_sim_ok(moe, fast, cfg, 0);
  ck_assert_double_eq(fwd_send_bytes(d->plan), 1024.0 * 1024 * 2);
  ck_assert_double_eq(fwd_send_bytes(m->plan), fwd_send_bytes(d->plan));
  /* an MoE MLP stack (each expert the whole stack) combines after its last layer only: a boundary
   * inside it carries the top_k routed copies */
#define MLP_STACK(extra)                                                                                    \
  "{\"name\":\"s\",\"dtype\":\"bf16\",\"blocks\":[{\"kind\":\"mlp\",\"count\":4,\"width\":4096,\"activation\":false" extra "}]}"
  const char *dense_mlp = MLP_STACK(""), *moe_mlp = MLP_STACK(",\"experts\":8,\"top_k\":2");
#undef MLP_STACK
  const char *split = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":32,\"micro_batch\":1,"
                      "\"pipeline\":{\"degree\":2,\"layers\":[2,2]},"
                      "\"parallelism\":{\"default\":[{\"strategy\":\"ddp\",\"degree\":\"all\"}]}}";
  g_autoptr(MmSimulation) dm = mm_test_sim_ok(dense_mlp, fast, split, 0);
  g_autoptr(MmSimulation) mm = mm_test_sim_ok(moe_mlp, fast, split, 0);
  ck_assert_double_eq(fwd_send_bytes(dm->plan), 4096.0 * 2);
  ck_assert_double_eq(fwd_send_bytes(mm->plan), 2 * fwd_send_bytes(dm->plan));
}
END_TEST

START_TEST(test_transfers_take_the_right_links)
{
  /* 2 stages of 8 GPUs: stage boundaries cross nodes (NIC); 2 stages of 4 GPUs in a node: NVLink */
  g_autofree char *node8 = mm_test_node8();
  g_autofree char *across = pp_config(2, "1f1b", 1, 16, "[{\"strategy\":\"tp\",\"degree\":8}]");
  g_autoptr(MmSimulation) x = mm_test_sim_ok(UNIFORM, "hardware/dgx-a100-2048.json", across, 2);
  gboolean nic, intra;
  int sends, recvs;
  p2p_links(x->plan, 0, &nic, &intra, &sends, &recvs);
  ck_assert(nic && !intra);
  ck_assert_int_eq(sends, 16); /* stage 0 sends activations of 16 micro-batches, receives their gradients */
  ck_assert_int_eq(recvs, 16);
  p2p_links(x->plan, 1, &nic, &intra, &sends, &recvs);
  ck_assert_int_eq(sends, 16);
  ck_assert_int_eq(recvs, 16);
  g_autofree char *inside = pp_config(2, "1f1b", 1, 16, "[{\"strategy\":\"tp\",\"degree\":4}]");
  g_autoptr(MmSimulation) y = mm_test_sim_ok(UNIFORM, node8, inside, 0);
  p2p_links(y->plan, 0, &nic, &intra, &sends, &recvs);
  ck_assert(intra && !nic);
  /* per-device simulation agrees */
  MmSimOptions opt = {.per_device = TRUE};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) z = mm_test_sim(UNIFORM, node8, inside, &opt, &error);
  ck_assert_msg(z != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq(z->plan->n_classes, 8);
  ck_assert_double_eq(z->metrics.iteration_time_s, y->metrics.iteration_time_s);
}
END_TEST

START_TEST(test_stage_memory_and_placement)
{
  g_autofree char *fast = fast2();
  /* GPT-style model, 4 stages: the embedding sits on stage 0, the head on stage 3; 1F1B keeps
   * p micro-batches in flight on stage 0, GPipe all of them */
  g_autofree char *f1 = pp_config(4, "1f1b", 1, 16, "[{\"strategy\":\"tp\",\"degree\":4}]");
  g_autofree char *gp = pp_config(4, "gpipe", 1, 16, "[{\"strategy\":\"tp\",\"degree\":4}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/megatron-gpt-7.5b.json", fast, f1, 0);
  g_autoptr(MmSimulation) b = mm_test_sim_ok("models/megatron-gpt-7.5b.json", fast, gp, 0);
  ck_assert_double_eq(a->memory->stage_inflight[0], 4);
  ck_assert_double_eq(a->memory->stage_inflight[3], 1);
  ck_assert_double_eq(b->memory->stage_inflight[0], 16);
  ck_assert_double_gt(b->memory->per_device_bytes, a->memory->per_device_bytes);
  const MmGraph *g = a->graph;
  const uint32_t *chunk = a->plan->unit_chunk;
  ck_assert_uint_eq(chunk[0], 0);               /* token embedding */
  ck_assert_uint_eq(chunk[g->n_units - 1], 3);  /* head */
  /* 36 layers over 4 stages: 9 each */
  int per[4] = {0};
  for (uint32_t u = 0; u < g->n_units; u++)
    if (a->model->blocks[g->units[u].block].kind == MM_BLOCK_TRANSFORMER) per[chunk[u]]++;
  for (int i = 0; i < 4; i++) ck_assert_int_eq(per[i], 9);
}
END_TEST

/* A synchronous exchange (overlap_p2p false, Megatron-LM 2021's batch_isend_irecv + synchronize): no
 * compute of a stage's next step starts before its last send has ended, also where the step
 * receives nothing (the first stage's embedding, the loss backward of the last chunk, a zero-bubble
 * weight-gradient pass), in every schedule; with overlap_p2p the next step's compute runs beside
 * the send. (Found by a block-level study: the first stage's embedding lookup started before the
 * previous send had ended; a review added the W passes and the loss backward, which dualpipev
 * exercises.) */
START_TEST(test_sync_exchange_gates_every_step)
{
  static const char *const SCHED[] = {"\"interleaved_1f1b\",\"virtual_stages\":2", "\"dualpipev\"", "\"zb_h1\"",
                                      "\"1f1b\"", "\"gpipe\""};
  for (guint sc = 0; sc < G_N_ELEMENTS(SCHED); sc++)
    for (int overlap = 0; overlap < 2; overlap++) {
      g_autofree char *cfg = g_strdup_printf(
        "{\"name\":\"pp\",\"task\":\"pretrain\",\"global_batch\":16,\"micro_batch\":1,\"recompute\":\"none\","
        "\"pipeline\":{\"degree\":4,\"schedule\":%s,\"overlap_p2p\":%s},"
        "\"parallelism\":{\"default\":[{\"strategy\":\"tp\",\"degree\":4}]}}", SCHED[sc], overlap ? "true" : "false");
      g_autoptr(MmSimulation) x = mm_test_sim_ok("models/megatron-gpt-7.5b.json", "hardware/dgx-h100-2048.json", cfg, 2);
      guint sends = 0, early = 0;
      for (uint32_t c = 0; c < x->plan->n_classes; c++) {
        const MmPlanProgram *pr = mm_plan_class_program(x->plan, c);
        g_autofree MmTime *t0 = g_new(MmTime, pr->n_ops), *t1 = g_new(MmTime, pr->n_ops);
        mm_engine_class_times(x->engine, c, t0, t1);
        for (uint32_t i = 0; i < pr->n_ops; i++) {
          const uint32_t st = pr->ops[i].stream;
          if (pr->info[i].coll != MM_COLL_P2P || (st != MM_STREAM_PP_SEND_FWD && st != MM_STREAM_PP_SEND_BWD)) continue;
          sends++;
          uint32_t j = i + 1; /* the next compute in program order: the next step's */
          while (j < pr->n_ops && pr->ops[j].stream != MM_STREAM_COMPUTE) j++;
          if (j < pr->n_ops && t0[j] < t1[i]) early++;
        }
      }
      ck_assert_uint_gt(sends, 0);
      if (!overlap)
        ck_assert_msg(early == 0, "%s: %u of %u sends overlapped by the next step's compute", SCHED[sc], early, sends);
      else if (sc < 3)
        ck_assert_msg(early > 0, "%s with overlap_p2p: no send overlapped", SCHED[sc]);
    }
}
END_TEST

START_TEST(test_tied_embedding_gradient)
{
  g_autofree char *fast = fast2();
  /* a tied head: the first and last stage all-reduce the word-embedding gradient */
  g_autofree char *cfg = pp_config(4, "1f1b", 1, 16, "[{\"strategy\":\"tp\",\"degree\":4}]");
  g_autoptr(MmSimulation) a = mm_test_sim_ok("models/megatron-gpt-7.5b.json", fast, cfg, 0);
  ck_assert(a->model->blocks[a->model->n_blocks - 1].tied);
  int found[4] = {0};
  for (uint32_t pr = 0; pr < 4; pr++) {
    const MmPlanProgram *p = &a->plan->programs[pr];
    for (uint32_t i = 0; i < p->n_ops; i++)
      if (p->info[i].reason == MM_REASON_PP && p->info[i].coll == MM_COLL_ALL_REDUCE) found[p->stage]++;
  }
  ck_assert_int_eq(found[0], 1);
  ck_assert_int_eq(found[1], 0);
  ck_assert_int_eq(found[2], 0);
  ck_assert_int_eq(found[3], 1);
  /* its bytes: the stage's copy of the gradient, the TP slice (vocab x hidden x fp16 / tp), and under
   * FSDP its shard, the reduce-scatter having run (found by review: it moved the whole slice) */
  g_autofree char *fs = pp_config(4, "1f1b", 1, 16, "[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"fsdp\",\"degree\":2}]");
  g_autoptr(MmSimulation) f = mm_test_sim_ok("models/megatron-gpt-7.5b.json", fast, fs, 0);
  const MmBlock *head = &a->model->blocks[a->model->n_blocks - 1];
  const double slice = (double)head->vocab * (double)head->hidden * 2.0;
  for (int k = 0; k < 2; k++) {
    const MmSimulation *x = k ? f : a;
    double bytes = 0;
    for (uint32_t i = 0; i < x->plan->programs[0].n_ops; i++)
      if (x->plan->programs[0].info[i].reason == MM_REASON_PP && x->plan->programs[0].info[i].coll == MM_COLL_ALL_REDUCE)
        bytes += x->plan->programs[0].info[i].bytes;
    ck_assert_double_eq_tol(bytes, slice / (k ? 2.0 * 2.0 : 4.0), 1e-6 * slice);
  }
}
END_TEST

static Suite *pipeline_suite(void)
{
  Suite *s = suite_create("pipeline");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_1f1b_bubble_exact);
  tcase_add_test(tc, test_interleaved_divides_bubble);
  tcase_add_test(tc, test_schedules_are_complete);
  tcase_add_test(tc, test_zb_h1_order);
  tcase_add_test(tc, test_zb_h1_bubble);
  tcase_add_test(tc, test_zb_h1_plan);
  tcase_add_test(tc, test_dualpipev_order);
  tcase_add_test(tc, test_dualpipev_plan);
  tcase_add_test(tc, test_plan_bubble_matches_schedule);
  tcase_add_test(tc, test_transfers_take_the_right_links);
  tcase_add_test(tc, test_moe_boundary_bytes);
  tcase_add_test(tc, test_stage_memory_and_placement);
  tcase_add_test(tc, test_sync_exchange_gates_every_step);
  tcase_add_test(tc, test_tied_embedding_gradient);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(pipeline_suite());
}

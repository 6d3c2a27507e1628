/* check_engine: the event engine on hand-computed timelines. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/internal.h" /* the event queue, tested directly */
#include "testutil.h"

/* A tiny program builder: ops with stream, duration, deps; collectives with a group. */
typedef struct {
  MmEngineOp ops[32];
  uint32_t deps[64];
  MmTime dur[32];
  uint32_t xl[32];
  double xb[32];
  uint32_t n, nd, nx;
} Prog;

static uint32_t op(Prog *p, uint32_t stream, MmTime dur, int n_deps, ...)
{
  va_list ap;
  va_start(ap, n_deps);
  MmEngineOp *o = &p->ops[p->n];
  *o = (MmEngineOp){.stream = stream, .dep_first = p->nd, .n_deps = (uint32_t)n_deps, .coll = MM_NO_COLL};
  for (int i = 0; i < n_deps; i++) p->deps[p->nd++] = va_arg(ap, uint32_t);
  va_end(ap);
  p->dur[p->n] = dur;
  return p->n++;
}

static uint32_t coll(Prog *p, uint32_t stream, MmTime dur, uint32_t degree, uint32_t stride, int n_deps, ...)
{
  va_list ap;
  va_start(ap, n_deps);
  MmEngineOp *o = &p->ops[p->n];
  *o = (MmEngineOp){.stream = stream, .dep_first = p->nd, .n_deps = (uint32_t)n_deps, .coll = p->n,
                    .degree = degree, .stride = stride};
  for (int i = 0; i < n_deps; i++) p->deps[p->nd++] = va_arg(ap, uint32_t);
  va_end(ap);
  p->dur[p->n] = dur;
  return p->n++;
}

/* A transfer op: @latency, then @n (link, bytes) pairs moved at the links' shared pace. */
static uint32_t flow(Prog *p, uint32_t stream, MmTime latency, gboolean sequential, int n_deps, uint32_t dep, int n,
                     ...)
{
  va_list ap;
  va_start(ap, n);
  MmEngineOp *o = &p->ops[p->n];
  *o = (MmEngineOp){.stream = stream, .dep_first = p->nd, .n_deps = (uint32_t)n_deps, .coll = MM_NO_COLL,
                    .xfer_first = p->nx, .n_xfer = (uint16_t)n, .sequential = (uint8_t)sequential};
  if (n_deps) p->deps[p->nd++] = dep;
  for (int i = 0; i < n; i++) {
    p->xl[p->nx] = va_arg(ap, uint32_t);
    p->xb[p->nx++] = va_arg(ap, double);
  }
  va_end(ap);
  p->dur[p->n] = latency;
  return p->n++;
}

static const double unit_bw[4] = {1.0, 1.0, 1.0, 1.0}; /* bytes per picosecond */

static MmEngineProgram prog(Prog *p, uint32_t streams)
{
  return (MmEngineProgram){p->ops, p->n, p->deps, streams, p->xl, p->xb, 4};
}

/* One class at @pace for its slowed ops (0: none). */
static MmEngine *run_paced(Prog *p, uint32_t streams, double pace)
{
  static MmEngineProgram pr;
  static MmEngineClass cl;
  pr = prog(p, streams);
  cl = (MmEngineClass){0, p->dur, 0, unit_bw, pace};
  g_autoptr(GError) error = NULL;
  MmEngine *e = mm_engine_new(&pr, 1, &cl, 1, &error);
  ck_assert_msg(e != NULL, "%s", error ? error->message : "");
  ck_assert_msg(mm_engine_run(e, &error), "%s", error ? error->message : "");
  return e;
}

static MmEngine *run1(Prog *p, uint32_t streams) { return run_paced(p, streams, 0); }

#define START(e, i) mm_engine_op_start(e, 0, i)
#define END(e, i) mm_engine_op_end(e, 0, i)

/* Interference: a slowed op runs at the class's pace while an interfering op runs, at full pace
 * otherwise; the work done at one pace carries over to the other (times by hand). */
START_TEST(test_interference_paces)
{
  /* the interferer 0..50 over a 100 ps kernel at half pace: 25 done by 50, 75 more -> 125 */
  Prog p = {0};
  const uint32_t a = op(&p, 0, 100, 0), b = op(&p, 1, 50, 0);
  p.ops[a].cil = MM_CIL_SLOWED;
  p.ops[b].cil = MM_CIL_INTERFERES;
  g_autoptr(MmEngine) e = run_paced(&p, 2, 0.5);
  ck_assert_uint_eq(END(e, b), 50);
  ck_assert_uint_eq(END(e, a), 125);
  /* pace 0: no interference */
  g_autoptr(MmEngine) f = run_paced(&p, 2, 0);
  ck_assert_uint_eq(END(f, a), 100);

  /* from 20 to 60 (after a 20 ps op on its stream): 20 done, 20 more at half pace, 60 left -> 120 */
  Prog q = {0};
  const uint32_t qa = op(&q, 0, 100, 0), qc = op(&q, 1, 20, 0), qb = op(&q, 1, 40, 1, qc);
  q.ops[qa].cil = MM_CIL_SLOWED;
  q.ops[qb].cil = MM_CIL_INTERFERES;
  g_autoptr(MmEngine) g = run_paced(&q, 2, 0.5);
  ck_assert_uint_eq(START(g, qb), 20);
  ck_assert_uint_eq(END(g, qa), 120);

  /* two interferers, 0..50 and 30..80: slowed until the last ends (40 done by 80) -> 140; a
   * second kernel after it runs at full pace */
  Prog r = {0};
  const uint32_t ra = op(&r, 0, 100, 0), rb = op(&r, 1, 50, 0), rw = op(&r, 2, 30, 0), rc = op(&r, 2, 50, 1, rw);
  const uint32_t rd = op(&r, 0, 10, 1, ra);
  r.ops[ra].cil = r.ops[rd].cil = MM_CIL_SLOWED;
  r.ops[rb].cil = r.ops[rc].cil = MM_CIL_INTERFERES;
  g_autoptr(MmEngine) h = run_paced(&r, 3, 0.5);
  ck_assert_uint_eq(END(h, rc), 80);
  ck_assert_uint_eq(END(h, ra), 140);
  ck_assert_uint_eq(END(h, rd), 150);

  /* a kernel that starts while the interferer runs: from 10 to 50 at half pace (20 done), 80 more -> 130;
   * an op with no role beside it is not slowed */
  Prog s = {0};
  const uint32_t sw = op(&s, 0, 10, 0), sa = op(&s, 0, 100, 1, sw), sb = op(&s, 1, 50, 0), sn = op(&s, 2, 70, 0);
  s.ops[sa].cil = MM_CIL_SLOWED;
  s.ops[sb].cil = MM_CIL_INTERFERES;
  g_autoptr(MmEngine) k = run_paced(&s, 3, 0.5);
  ck_assert_uint_eq(END(k, sa), 130);
  ck_assert_uint_eq(END(k, sn), 70);

  /* two slowed kernels at once, on two streams: both at half pace until 50 (25 done each) */
  Prog t = {0};
  const uint32_t ta = op(&t, 0, 100, 0), tb = op(&t, 1, 50, 0), tc = op(&t, 2, 60, 0);
  t.ops[ta].cil = t.ops[tc].cil = MM_CIL_SLOWED;
  t.ops[tb].cil = MM_CIL_INTERFERES;
  g_autoptr(MmEngine) m = run_paced(&t, 3, 0.5);
  ck_assert_uint_eq(END(m, tc), 85);
  ck_assert_uint_eq(END(m, ta), 125);
}
END_TEST

/* Interference slows fixed ops only: a flow or a collective marked slowed is refused (their
 * pace is their shares' or their group's), as is a role out of range. */
START_TEST(test_interference_roles_checked)
{
  for (int k = 0; k < 3; k++) {
    Prog p = {0};
    const uint32_t a = op(&p, 0, 100, 0);
    const uint32_t x = k == 0 ? flow(&p, 1, 0, FALSE, 0, 0, 1, 0u, 10.0) : coll(&p, 1, 10, 1, 1, 0);
    p.ops[a].cil = MM_CIL_SLOWED;
    p.ops[x].cil = k == 2 ? 3 : MM_CIL_SLOWED;
    MmEngineProgram pr = prog(&p, 2);
    MmEngineClass cl = {0, p.dur, 0, unit_bw, 0.5};
    g_autoptr(GError) error = NULL;
    g_autoptr(MmEngine) e = mm_engine_new(&pr, 1, &cl, 1, &error);
    ck_assert_ptr_null(e);
    ck_assert(g_error_matches(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID));
    ck_assert_ptr_nonnull(strstr(error->message, "interference role"));
  }
}
END_TEST

/* A kernel whose end falls on the picosecond the last interferer ends keeps that end: a longer
 * interferer never ends it sooner (a fraction of a picosecond of work left after several paces
 * once pushed it one picosecond later; found by review) */
START_TEST(test_interference_tie)
{
  const double pace = 1.0 / 1.189;
  MmTime ends[2];
  for (int k = 0; k < 2; k++) {
    Prog p = {0};
    const uint32_t a = op(&p, 0, 132873000, 0);
    const uint32_t i1 = op(&p, 1, 5500718, 0);
    const uint32_t i2 = op(&p, 1, 152485279 + (MmTime)k, 1, i1);
    p.ops[a].cil = MM_CIL_SLOWED;
    p.ops[i1].cil = p.ops[i2].cil = MM_CIL_INTERFERES;
    g_autoptr(MmEngine) e = run_paced(&p, 2, pace);
    ends[k] = END(e, a);
  }
  ck_assert_msg(ends[0] <= ends[1], "shorter interferer: %llu, longer: %llu", (unsigned long long)ends[0],
                (unsigned long long)ends[1]);
}
END_TEST

START_TEST(test_two_streams_overlap)
{
  Prog p = {0};
  uint32_t a = op(&p, 0, 10, 0);
  uint32_t b = op(&p, 1, 5, 0);
  g_autoptr(MmEngine) e = run1(&p, 2);
  ck_assert_uint_eq(START(e, a), 0);
  ck_assert_uint_eq(START(e, b), 0);
  ck_assert_uint_eq(END(e, b), 5);
  ck_assert_uint_eq(mm_engine_makespan(e), 10);
}
END_TEST

START_TEST(test_dependency_chain)
{
  Prog p = {0};
  uint32_t a = op(&p, 0, 3, 0);
  uint32_t b = op(&p, 1, 4, 1, a);
  uint32_t c = op(&p, 0, 2, 1, b);
  uint32_t d = op(&p, 1, 1, 0); /* FIFO: behind b on stream 1 although it has no deps */
  g_autoptr(MmEngine) e = run1(&p, 2);
  ck_assert_uint_eq(START(e, b), 3);
  ck_assert_uint_eq(END(e, b), 7);
  ck_assert_uint_eq(START(e, c), 7);
  ck_assert_uint_eq(END(e, c), 9);
  ck_assert_uint_eq(START(e, d), 7);
  ck_assert_uint_eq(mm_engine_makespan(e), 9);
}
END_TEST

START_TEST(test_fifo_head_blocks_stream)
{
  /* stream 0: x waits for a slow y on stream 1; z (ready at 0) queues behind x */
  Prog p = {0};
  uint32_t y = op(&p, 1, 20, 0);
  uint32_t x = op(&p, 0, 5, 1, y);
  uint32_t z = op(&p, 0, 1, 0);
  g_autoptr(MmEngine) e = run1(&p, 2);
  ck_assert_uint_eq(START(e, x), 20);
  ck_assert_uint_eq(START(e, z), 25);
  ck_assert_uint_eq(mm_engine_makespan(e), 26);
}
END_TEST

/* Backward of three layers on stream 0; each layer's gradient AllReduce (non-blocking)
 * on stream 1; the optimizer waits for the last one. Hand timeline:
 *   b3 0-5, ar3 5-9, b2 5-10, ar2 10-14, b1 10-15, ar1 15-19, opt 19-20. */
START_TEST(test_nonblocking_allreduce_overlaps_backward)
{
  Prog p = {0};
  uint32_t b3 = op(&p, 0, 5, 0);
  uint32_t ar3 = coll(&p, 1, 4, 8, 1, 1, b3);
  uint32_t b2 = op(&p, 0, 5, 0);
  uint32_t ar2 = coll(&p, 1, 4, 8, 1, 1, b2);
  uint32_t b1 = op(&p, 0, 5, 0);
  uint32_t ar1 = coll(&p, 1, 4, 8, 1, 1, b1);
  uint32_t opt = op(&p, 0, 1, 1, ar1);
  g_autoptr(MmEngine) e = run1(&p, 2);
  ck_assert_uint_eq(START(e, ar3), 5);
  ck_assert_uint_eq(END(e, ar3), 9);
  ck_assert_uint_eq(START(e, ar2), 10);
  ck_assert_uint_eq(START(e, b1), 10);
  ck_assert_uint_eq(START(e, ar1), 15);
  ck_assert_uint_eq(START(e, opt), 19);
  ck_assert_uint_eq(mm_engine_makespan(e), 20);
  ck_assert_uint_eq(mm_engine_events(e), 7);
}
END_TEST

/* Two device classes (devices 0 and 1) meet in a collective of group (degree 2,
 * stride 1): class 0 computes for 10, class 1 for 4; the collective starts at 10 on
 * both and lasts the slower member's 3. */
START_TEST(test_collective_across_two_classes)
{
  Prog p = {0};
  uint32_t c0 = op(&p, 0, 0, 0); /* durations per class below */
  uint32_t ar = coll(&p, 1, 0, 2, 1, 1, c0);
  uint32_t after = op(&p, 0, 1, 1, ar);
  MmTime d0[3] = {10, 2, 1}, d1[3] = {4, 3, 1};
  MmEngineProgram pr = prog(&p, 2);
  MmEngineClass cls[2] = {{0, d0, 0, unit_bw, 0}, {0, d1, 1, unit_bw, 0}};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) e = mm_engine_new(&pr, 1, cls, 2, &error);
  ck_assert_ptr_nonnull(e);
  ck_assert(mm_engine_run(e, &error));
  ck_assert_uint_eq(mm_engine_op_start(e, 1, ar), 10);
  ck_assert_uint_eq(mm_engine_op_end(e, 0, ar), 13);
  ck_assert_uint_eq(mm_engine_op_end(e, 1, ar), 13);
  ck_assert_uint_eq(mm_engine_op_start(e, 1, after), 13);
  ck_assert_uint_eq(mm_engine_class_end(e, 1), 14);
  ck_assert_uint_eq(mm_engine_makespan(e), 14);
}
END_TEST

/* Four devices, TP pairs (degree 2 stride 1) then a DP pair (degree 2 stride 2):
 * one class standing for all must equal four classes, one per device. */
START_TEST(test_symmetric_equals_per_device)
{
  Prog p = {0};
  uint32_t a = op(&p, 0, 7, 0);
  uint32_t t = coll(&p, 1, 3, 2, 1, 1, a);
  uint32_t b = op(&p, 0, 5, 1, t);
  uint32_t d = coll(&p, 2, 11, 2, 2, 1, b);
  op(&p, 0, 2, 1, d);
  MmEngineProgram pr = prog(&p, 3);
  MmEngineClass one = {0, p.dur, 0, unit_bw, 0};
  MmEngineClass four[4];
  for (uint32_t i = 0; i < 4; i++) four[i] = (MmEngineClass){0, p.dur, i, unit_bw, 0};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) e1 = mm_engine_new(&pr, 1, &one, 1, &error);
  g_autoptr(MmEngine) e4 = mm_engine_new(&pr, 1, four, 4, &error);
  ck_assert(mm_engine_run(e1, &error) && mm_engine_run(e4, &error));
  ck_assert_uint_eq(mm_engine_makespan(e1), 7 + 3 + 5 + 11 + 2);
  ck_assert_uint_eq(mm_engine_makespan(e4), mm_engine_makespan(e1));
  for (uint32_t c = 0; c < 4; c++)
    for (uint32_t i = 0; i < p.n; i++) ck_assert_uint_eq(mm_engine_op_end(e4, c, i), mm_engine_op_end(e1, 0, i));
}
END_TEST

/* Two devices post two collectives in opposite orders on one FIFO stream: each waits
 * for the other forever. The engine must stop and say so, not hang. */
START_TEST(test_deadlock_is_reported)
{
  Prog r = {0}, s = {0};
  uint32_t r1 = coll(&r, 1, 1, 2, 1, 0);
  uint32_t r2 = coll(&r, 1, 1, 2, 1, 0);
  uint32_t s1 = coll(&s, 1, 1, 2, 1, 0);
  uint32_t s2 = coll(&s, 1, 1, 2, 1, 0);
  r.ops[r1].coll = 100;
  r.ops[r2].coll = 200;
  s.ops[s1].coll = 200;
  s.ops[s2].coll = 100;
  MmEngineProgram prs[2] = {prog(&r, 2), prog(&s, 2)};
  MmEngineClass cls[2] = {{0, r.dur, 0, unit_bw, 0}, {1, s.dur, 1, unit_bw, 0}};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) e = mm_engine_new(prs, 2, cls, 2, &error);
  ck_assert_ptr_nonnull(e);
  ck_assert(!mm_engine_run(e, &error));
  ck_assert(g_error_matches(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_DEADLOCK));
}
END_TEST

START_TEST(test_invalid_program)
{
  Prog p = {0};
  op(&p, 0, 1, 0);
  op(&p, 0, 1, 1, 1); /* depends on itself */
  MmEngineProgram pr = prog(&p, 1);
  MmEngineClass cl = {0, p.dur, 0, unit_bw, 0};
  g_autoptr(GError) error = NULL;
  MmEngine *e = mm_engine_new(&pr, 1, &cl, 1, &error);
  ck_assert_ptr_null(e);
  ck_assert(g_error_matches(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID));
  g_clear_error(&error);
  Prog q = {0};
  op(&q, 5, 1, 0); /* stream out of range */
  MmEngineProgram pq = prog(&q, 2);
  MmEngineClass cq = {0, q.dur, 0, unit_bw, 0};
  ck_assert_ptr_null(mm_engine_new(&pq, 1, &cq, 1, &error));
}
END_TEST

START_TEST(test_rerun_and_equal_times)
{
  /* many ops ending at the same instant: the run is repeatable */
  Prog p = {0};
  for (int i = 0; i < 10; i++) op(&p, (uint32_t)(i % 3), 4, 0);
  g_autoptr(MmEngine) e = run1(&p, 3);
  MmTime first[10];
  for (uint32_t i = 0; i < 10; i++) first[i] = END(e, i);
  g_autoptr(GError) error = NULL;
  ck_assert(mm_engine_run(e, &error));
  for (uint32_t i = 0; i < 10; i++) ck_assert_uint_eq(END(e, i), first[i]);
  ck_assert_uint_eq(mm_engine_makespan(e), 16); /* stream 0 holds ops 0,3,6,9 */
}
END_TEST

/* Two flows of 100 bytes on one link of 1 byte/ps: each gets half, both end at 200. */
START_TEST(test_contention_one_link)
{
  Prog p = {0};
  uint32_t a = flow(&p, 1, 0, FALSE, 0, 0, 1, 0u, 100.0);
  uint32_t b = flow(&p, 2, 0, FALSE, 0, 0, 1, 0u, 100.0);
  g_autoptr(MmEngine) e = run1(&p, 3);
  ck_assert_uint_eq(END(e, a), 200);
  ck_assert_uint_eq(END(e, b), 200);
}
END_TEST

/* The same flows on different links do not interfere: both end at 100. */
START_TEST(test_contention_two_links)
{
  Prog p = {0};
  uint32_t a = flow(&p, 1, 0, FALSE, 0, 0, 1, 0u, 100.0);
  uint32_t b = flow(&p, 2, 0, FALSE, 0, 0, 1, 1u, 100.0);
  g_autoptr(MmEngine) e = run1(&p, 3);
  ck_assert_uint_eq(END(e, a), 100);
  ck_assert_uint_eq(END(e, b), 100);
}
END_TEST

/* A starts alone at 0; B joins at 50 (after a compute op): A has 50 bytes left, shared
 * at 0.5/ps it ends at 150; B moved 50 by then and ends alone at 200. */
START_TEST(test_contention_staggered)
{
  Prog p = {0};
  uint32_t a = flow(&p, 1, 0, FALSE, 0, 0, 1, 0u, 100.0);
  uint32_t c = op(&p, 0, 50, 0);
  uint32_t b = flow(&p, 2, 0, FALSE, 1, c, 1, 0u, 100.0);
  g_autoptr(MmEngine) e = run1(&p, 3);
  ck_assert_uint_eq(START(e, b), 50);
  ck_assert_uint_eq(END(e, a), 150);
  ck_assert_uint_eq(END(e, b), 200);
}
END_TEST

/* Data, then latency; several links move at once (pipelined) or one after another. */
START_TEST(test_flow_latency_and_phases)
{
  Prog p = {0};
  uint32_t a = flow(&p, 1, 10, FALSE, 0, 0, 2, 0u, 100.0, 1u, 50.0);
  uint32_t b = flow(&p, 2, 10, TRUE, 0, 0, 2, 2u, 100.0, 3u, 50.0);
  g_autoptr(MmEngine) e = run1(&p, 3);
  ck_assert_uint_eq(END(e, a), 110);
  ck_assert_uint_eq(END(e, b), 160);
}
END_TEST

/* ---- resources: max-min sharing, tails, SM/HBM work ------------------------ */

/* Runs @p (one class, device 0) on @n resources of capacities @cap (units per ps). */
static MmEngine *run_caps(Prog *p, uint32_t streams, const double *cap, uint32_t n)
{
  static MmEngineProgram pr;
  static MmEngineClass cl;
  pr = (MmEngineProgram){p->ops, p->n, p->deps, streams, p->xl, p->xb, n};
  cl = (MmEngineClass){0, p->dur, 0, cap, 0};
  g_autoptr(GError) error = NULL;
  MmEngine *e = mm_engine_new(&pr, 1, &cl, 1, &error);
  ck_assert_msg(e != NULL, "%s", error ? error->message : "");
  ck_assert_msg(mm_engine_run(e, &error), "%s", error ? error->message : "");
  return e;
}

/* NVLink (10 B/ps) and NIC (1 B/ps). A moves 300 B over NVLink and 100 B over the
 * NIC at once, B 350 B over NVLink. Equal shares (5 B/ps each on NVLink) would leave
 * A NIC-bound (100 ps) and give B 350 / 5 = 70 ps. Max-min: the NIC bounds A, so A
 * takes 300 / 100 = 3 B/ps of NVLink and B the other 7: 350 / 7 = 50 ps. */
START_TEST(test_maxmin_nic_bound_flow_leaves_nvlink)
{
  static const double cap[2] = {10.0, 1.0};
  Prog p = {0};
  uint32_t a = flow(&p, 1, 0, FALSE, 0, 0, 2, 0u, 300.0, 1u, 100.0);
  uint32_t b = flow(&p, 2, 0, FALSE, 0, 0, 1, 0u, 350.0);
  g_autoptr(MmEngine) e = run_caps(&p, 3, cap, 2);
  ck_assert_uint_eq(END(e, b), 50);
  ck_assert_uint_eq(END(e, a), 100); /* the NIC, alone at 1 B/ps throughout */
}
END_TEST

/* One link of 1 B/ps. A: 100 B then a 100 ps tail; B: 300 B then a 10 ps tail.
 * Both at 0.5 B/ps until A's data is done at 200 (B moved 100); A's tail holds no
 * bandwidth, so B moves its last 200 B alone: data done at 400, end 410; A ends at
 * 300. (Were A's share held through its tail, B would end at 150 + 300 + 10 = 460.) */
START_TEST(test_tail_releases_share)
{
  Prog p = {0};
  uint32_t a = flow(&p, 1, 100, FALSE, 0, 0, 1, 0u, 100.0);
  uint32_t b = flow(&p, 2, 10, FALSE, 0, 0, 1, 0u, 300.0);
  g_autoptr(MmEngine) e = run1(&p, 3);
  ck_assert_double_eq_tol((double)END(e, a), 300.0, 0.5);
  ck_assert_double_eq_tol((double)END(e, b), 410.0, 0.5);
}
END_TEST

/* Resources: link 0, SMs (100 FLOP/ps), HBM (2 B/ps). Kernel K: 10000 FLOP and
 * @hbm_bytes of HBM traffic, then a 5 ps launch tail; copy D (a DMA: HBM only, no
 * SMs): 300 B. Row 0: K reads 80 B: alone or not it is SM-bound (100 ps, 0.8 B/ps of
 * HBM), D takes the remaining 1.2 B/ps: 120 B by 100, the last 180 B at 2 B/ps: 190.
 * Row 1: K reads 150 B: at an equal HBM share (1 B/ps) K is HBM-bound: both get 1 B/ps;
 * K's work is done at 150 (50 ps later than alone: contention from sharing, not a
 * factor), end 155; D has 150 B left at 2 B/ps: 225. */
static const struct {
  double hbm_bytes;
  double k_end, d_end;
} kernel_copy_rows[] = {{80.0, 105.0, 190.0}, {150.0, 155.0, 225.0}};

START_TEST(test_kernel_shares_hbm_with_copy)
{
  static const double cap[3] = {1.0, 100.0, 2.0};
  Prog p = {0};
  uint32_t k = flow(&p, 0, 5, FALSE, 0, 0, 2, 1u, 10000.0, 2u, kernel_copy_rows[_i].hbm_bytes);
  uint32_t d = flow(&p, 1, 0, FALSE, 0, 0, 1, 2u, 300.0);
  uint32_t after = op(&p, 0, 7, 0); /* a fixed op (no work) keeps its duration */
  g_autoptr(MmEngine) e = run_caps(&p, 2, cap, 3);
  ck_assert_double_eq_tol((double)END(e, k), kernel_copy_rows[_i].k_end, 0.5);
  ck_assert_double_eq_tol((double)END(e, d), kernel_copy_rows[_i].d_end, 0.5);
  ck_assert_uint_eq(END(e, after) - START(e, after), 7);
}
END_TEST

/* A sequential flow holds a share of each of its links. S: 100 B on link 0 then 100 B
 * on link 1; P: 100 B on link 1 and 400 B on link 2 at once (links 1 B/ps). Link 2
 * bounds P (400 ps: 0.25 B/ps of link 1), so S's phase on link 1 gets 0.75 B/ps:
 * S takes 100 + 133.3 = 233.3 ps (equal shares: 100 + 200). */
START_TEST(test_maxmin_sequential_phases)
{
  Prog p = {0};
  uint32_t s = flow(&p, 1, 0, TRUE, 0, 0, 2, 0u, 100.0, 1u, 100.0);
  uint32_t q = flow(&p, 2, 0, FALSE, 0, 0, 2, 1u, 100.0, 2u, 400.0);
  g_autoptr(MmEngine) e = run1(&p, 3);
  ck_assert_double_eq_tol((double)END(e, s), 700.0 / 3.0, 1.0);
  ck_assert_uint_eq(END(e, q), 400);
}
END_TEST

/* Crossing flows: A 100 B on link 0 and 1000 B on link 1, B the reverse (1 B/ps each).
 * Neither link bounds both flows at equal shares; max-min gives both the rate r with
 * 100 r + 1000 r = 1 on each link: both end at 1100. */
START_TEST(test_maxmin_crossing_flows)
{
  Prog p = {0};
  uint32_t a = flow(&p, 1, 0, FALSE, 0, 0, 2, 0u, 100.0, 1u, 1000.0);
  uint32_t b = flow(&p, 2, 0, FALSE, 0, 0, 2, 0u, 1000.0, 1u, 100.0);
  g_autoptr(MmEngine) e = run1(&p, 3);
  ck_assert_double_eq_tol((double)END(e, a), 1100.0, 1.0);
  ck_assert_double_eq_tol((double)END(e, b), 1100.0, 1.0);
}
END_TEST

/* Work of zero bytes is no work: the op is fixed and lasts its duration. */
START_TEST(test_zero_work_is_fixed)
{
  Prog p = {0};
  uint32_t a = flow(&p, 1, 7, FALSE, 0, 0, 1, 0u, 0.0);
  g_autoptr(MmEngine) e = run1(&p, 2);
  ck_assert_uint_eq(END(e, a), 7);
}
END_TEST

/* A contended program: the same times from a second run and from a fresh engine, to the bit. */
START_TEST(test_sharing_is_deterministic)
{
  static const double cap[3] = {10.0, 1.0, 2.0};
  Prog p = {0};
  uint32_t c = op(&p, 0, 13, 0);
  flow(&p, 1, 3, FALSE, 0, 0, 2, 0u, 300.0, 1u, 100.0);
  flow(&p, 2, 0, TRUE, 1, c, 2, 0u, 250.0, 2u, 77.0);
  flow(&p, 3, 11, FALSE, 0, 0, 2, 1u, 1000.0, 2u, 100.0);
  flow(&p, 1, 2, FALSE, 0, 0, 3, 0u, 123.0, 1u, 45.0, 2u, 678.0);
  flow(&p, 2, 0, FALSE, 1, c, 1, 1u, 99.0);
  MmTime s1[8], e1[8], s2[8], e2[8], s3[8], e3[8];
  g_autoptr(MmEngine) e = run_caps(&p, 4, cap, 3);
  mm_engine_class_times(e, 0, s1, e1);
  g_autoptr(GError) error = NULL;
  ck_assert(mm_engine_run(e, &error));
  mm_engine_class_times(e, 0, s2, e2);
  g_autoptr(MmEngine) f = run_caps(&p, 4, cap, 3);
  mm_engine_class_times(f, 0, s3, e3);
  ck_assert_int_eq(memcmp(s1, s2, sizeof(MmTime) * p.n), 0);
  ck_assert_int_eq(memcmp(e1, e2, sizeof(MmTime) * p.n), 0);
  ck_assert_int_eq(memcmp(s1, s3, sizeof(MmTime) * p.n), 0);
  ck_assert_int_eq(memcmp(e1, e3, sizeof(MmTime) * p.n), 0);
  ck_assert_uint_gt(mm_engine_makespan(e), 0);
}
END_TEST

/* Work the engine cannot place: each row must be refused with MM_ENGINE_ERROR_INVALID. */
static const double cap_zero[2] = {1.0, 0.0}, cap_nan[2] = {1.0, NAN}, cap_inf[2] = {1.0, INFINITY};
static const struct {
  const char *what;
  uint32_t resource;
  const double *cap; /* NULL: the class gives no capacities */
} bad_work_rows[] = {
  {"resource out of range", 2, cap_zero},
  {"no capacities", 0, NULL},
  {"zero capacity", 1, cap_zero},
  {"NaN capacity", 1, cap_nan},
  {"infinite capacity", 1, cap_inf},
};

START_TEST(test_bad_work_is_refused)
{
  Prog p = {0};
  flow(&p, 0, 0, FALSE, 0, 0, 1, bad_work_rows[_i].resource, 10.0);
  MmEngineProgram pr = {p.ops, p.n, p.deps, 1, p.xl, p.xb, 2};
  MmEngineClass cl = {0, p.dur, 0, bad_work_rows[_i].cap, 0};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) e = mm_engine_new(&pr, 1, &cl, 1, &error);
  ck_assert_msg(e == NULL, "%s accepted", bad_work_rows[_i].what);
  ck_assert(g_error_matches(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID));
}
END_TEST

/* Devices 0-3 run stage 0's program, 4-7 stage 1's, with level groups (4 x 1, 2 x 2), a
 * collective flow sharing a link with a plain flow, and point-to-point sends whose ops sit
 * at different indices in the two programs; devices 1 and 3 post longer collectives. The
 * classes in device order find their groups by arithmetic, the same classes in reverse
 * order by listing: every op must start and end at the same time on the same device. With
 * @broken, device 3's copy of the 2 x 2 group carries another collective id: the groups are
 * then inconsistent, arithmetic declines, and both orders still agree. */
/* Two pipeline stages of four devices (programs p0 and p1; p0b is p0 with its last group's id
 * changed when @broken): TP groups of four, a DP pair, a send from each device of the first
 * stage to its peer in the second (its id from 2^31, as the lowering numbers transfers). The
 * ids below 2^31 are multiplied by @id_scale. */
static void two_stage_programs(Prog *p0, Prog *p1, Prog *p0b, gboolean broken, uint32_t id_scale, uint32_t *snd,
                               uint32_t *rcv)
{
  *p0 = (Prog){0}, *p1 = (Prog){0};
  uint32_t a = op(p0, 0, 5, 0);
  uint32_t r = coll(p0, 1, 3, 4, 1, 1, a);
  p0->ops[r].n_xfer = 1, p0->ops[r].xfer_first = p0->nx, p0->xl[p0->nx] = 0, p0->xb[p0->nx++] = 40;
  uint32_t f = flow(p0, 3, 1, FALSE, 1, a, 1, 0u, 60.0);
  *snd = coll(p0, 2, 4, 0, 0, 1, r);
  p0->ops[*snd].coll = 0x80000000u | 100, p0->ops[*snd].peer = 4; /* the lowering numbers transfers from 2^31 */
  uint32_t g = coll(p0, 1, 2, 2, 2, 2, *snd, f);
  op(p0, 0, 1, 1, g);
  op(p1, 0, 9, 0);
  *rcv = coll(p1, 2, 6, 0, 0, 0);
  p1->ops[*rcv].coll = 0x80000000u | 100, p1->ops[*rcv].peer = -4;
  uint32_t b = op(p1, 0, 7, 1, *rcv);
  uint32_t t = coll(p1, 1, 2, 4, 1, 1, b);
  p1->ops[t].coll = 200;
  *p0b = *p0;
  if (broken) p0b->ops[g].coll = 999;
  Prog *all[3] = {p0, p1, p0b};
  for (int k = 0; k < 3; k++)
    for (uint32_t i = 0; i < all[k]->n; i++)
      if (all[k]->ops[i].coll < 0x80000000u) all[k]->ops[i].coll *= id_scale;
}

/* The eight devices as classes, in device order (@fwd) and reversed (@rev). */
static void two_stage_classes(Prog *p0, Prog *p1, Prog *p0b, MmTime *slow0, MmTime *slow0b, MmEngineClass *fwd,
                              MmEngineClass *rev)
{
  for (uint32_t i = 0; i < 32; i++) slow0[i] = p0->dur[i] * 3, slow0b[i] = p0b->dur[i] * 3;
  for (uint32_t d = 0; d < 8; d++) {
    const uint32_t program = d >= 4 ? 1 : d == 3 ? 2 : 0;
    const MmTime *dur = d >= 4 ? p1->dur : d == 1 ? slow0 : d == 3 ? slow0b : p0->dur;
    fwd[d] = (MmEngineClass){program, dur, d, unit_bw, 0};
    rev[7 - d] = fwd[d];
  }
}

static void two_stage_group_paths(gboolean broken)
{
  Prog p0, p1, p0b;
  uint32_t snd, rcv;
  two_stage_programs(&p0, &p1, &p0b, broken, 1, &snd, &rcv);
  MmTime slow0[32], slow0b[32];
  const MmEngineProgram pr[3] = {prog(&p0, 4), prog(&p1, 4), prog(&p0b, 4)};
  MmEngineClass fwd[8], rev[8];
  two_stage_classes(&p0, &p1, &p0b, slow0, slow0b, fwd, rev);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) ea = mm_engine_new(pr, 3, fwd, 8, &error);
  g_autoptr(MmEngine) el = mm_engine_new(pr, 3, rev, 8, &error);
  ck_assert_msg(ea && el, "%s", error ? error->message : "");
  ck_assert(mm_engine_groups_arithmetic(ea) == !broken);
  ck_assert(!mm_engine_groups_arithmetic(el));
  ck_assert_msg(mm_engine_run(ea, &error) && mm_engine_run(el, &error), "%s", error ? error->message : "");
  ck_assert_uint_eq(mm_engine_events(ea), mm_engine_events(el));
  for (uint32_t d = 0; d < 8; d++)
    for (uint32_t i = 0; i < pr[fwd[d].program].n_ops; i++) {
      ck_assert_uint_eq(mm_engine_op_start(ea, d, i), mm_engine_op_start(el, 7 - d, i));
      ck_assert_uint_eq(mm_engine_op_end(ea, d, i), mm_engine_op_end(el, 7 - d, i));
    }
  /* the send waits for its receiver and both take the longer fixed time: device 1 (slow) sends to 5 */
  ck_assert_uint_eq(mm_engine_op_end(ea, 1, snd) - mm_engine_op_start(ea, 1, snd), 12);
  ck_assert_uint_eq(mm_engine_op_start(ea, 5, rcv), mm_engine_op_start(ea, 1, snd));
}

/* Listed groups sort their members by collective id and group: by counting where the ids are
 * dense (two ranges, from 0 and from 2^31), by radix where they are sparse (ids a million apart);
 * the two runs are the same. */
START_TEST(test_listed_groups_sparse_ids)
{
  Prog d0, d1, d0b, s0, s1, s0b;
  uint32_t snd, rcv;
  two_stage_programs(&d0, &d1, &d0b, TRUE, 1, &snd, &rcv);
  two_stage_programs(&s0, &s1, &s0b, TRUE, 1000000, &snd, &rcv);
  MmTime dslow[32], dslowb[32], sslow[32], sslowb[32];
  const MmEngineProgram dp[3] = {prog(&d0, 4), prog(&d1, 4), prog(&d0b, 4)};
  const MmEngineProgram sp[3] = {prog(&s0, 4), prog(&s1, 4), prog(&s0b, 4)};
  MmEngineClass dfwd[8], drev[8], sfwd[8], srev[8];
  two_stage_classes(&d0, &d1, &d0b, dslow, dslowb, dfwd, drev);
  two_stage_classes(&s0, &s1, &s0b, sslow, sslowb, sfwd, srev);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) ed = mm_engine_new(dp, 3, drev, 8, &error);
  g_autoptr(MmEngine) es = mm_engine_new(sp, 3, srev, 8, &error);
  ck_assert_msg(ed && es, "%s", error ? error->message : "");
  ck_assert(!mm_engine_groups_arithmetic(ed) && !mm_engine_groups_arithmetic(es));
  ck_assert_msg(mm_engine_run(ed, &error) && mm_engine_run(es, &error), "%s", error ? error->message : "");
  ck_assert_uint_eq(mm_engine_events(ed), mm_engine_events(es));
  for (uint32_t c = 0; c < 8; c++)
    for (uint32_t i = 0; i < dp[drev[c].program].n_ops; i++) {
      ck_assert_uint_eq(mm_engine_op_start(ed, c, i), mm_engine_op_start(es, c, i));
      ck_assert_uint_eq(mm_engine_op_end(ed, c, i), mm_engine_op_end(es, c, i));
    }
  ck_assert_uint_eq(mm_engine_op_start(es, 2, rcv), mm_engine_op_start(es, 6, snd)); /* reversed: device 1 is class 6 */
}
END_TEST

START_TEST(test_arithmetic_groups_equal_listed) { two_stage_group_paths(FALSE); }
END_TEST

START_TEST(test_inconsistent_groups_are_listed) { two_stage_group_paths(TRUE); }
END_TEST

/* 3,000 streams, each two ops of scattered durations: 3,000 pending times at once, so the event
 * queue's buckets, time heap and slots grow, and times share slots; every end is the sum of
 * its stream's durations, and a zero-duration op ends at its start. */
START_TEST(test_queue_many_pending_times)
{
  const gboolean bucketed = _i; /* both kinds of queue */
  enum { N = 3000 };
  g_autofree MmEngineOp *ops = g_new0(MmEngineOp, 2 * N);
  g_autofree MmTime *dur = g_new0(MmTime, 2 * N);
  for (uint32_t k = 0; k < N; k++) {
    ops[2 * k] = (MmEngineOp){.stream = k, .coll = MM_NO_COLL};
    ops[2 * k + 1] = (MmEngineOp){.stream = k, .coll = MM_NO_COLL};
    dur[2 * k] = (k * 37) % N + 1;
    dur[2 * k + 1] = (k * 91) % N; /* 0 for k = 0 */
  }
  const MmEngineProgram pr = {ops, 2 * N, NULL, N, NULL, NULL, 0};
  const MmEngineClass cl = {0, dur, 0, NULL, 0};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) e = mm_engine_new(&pr, 1, &cl, 1, &error);
  ck_assert(e != NULL);
  e->bucketed = bucketed;
  ck_assert_msg(mm_engine_run(e, &error), "%s", error ? error->message : "");
  MmTime last = 0;
  for (uint32_t k = 0; k < N; k++) {
    ck_assert_uint_eq(mm_engine_op_end(e, 0, 2 * k), dur[2 * k]);
    ck_assert_uint_eq(mm_engine_op_start(e, 0, 2 * k + 1), dur[2 * k]);
    ck_assert_uint_eq(mm_engine_op_end(e, 0, 2 * k + 1), dur[2 * k] + dur[2 * k + 1]);
    last = MAX(last, dur[2 * k] + dur[2 * k + 1]);
  }
  ck_assert_uint_eq(mm_engine_makespan(e), last);
  ck_assert_uint_eq(mm_engine_events(e), 2 * N);
  ck_assert(mm_engine_run(e, &error)); /* a rerun starts from an empty queue */
  ck_assert_uint_eq(mm_engine_makespan(e), last);
}
END_TEST

/* The event queue against a reference: 10,000 pushes of times drawn from a small range (many
 * equal) interleaved with pops; it must pop in (t, seq) order. Pending times share the queue's
 * slots, so a time sometimes gets a second bucket: that happens here (checked, so the path is
 * tested), and there are never fewer buckets than pending times nor more than pending events.
 * With times from a range of 4 (_i >= 2) a bucket holds more events than one chunk, and pops
 * and pushes meet inside its chunks (checked). */
START_TEST(test_queue_order_and_buckets)
{
  const gboolean bucketed = _i & 1; /* both kinds of queue */
  const int32_t range = _i >= 2 ? 4 : 2000;
  uint32_t most = 0; /* the most pending events of one time */
  enum { STREAMS = 64, PUSHES = 10000 };
  g_autofree MmEngineOp *ops = g_new0(MmEngineOp, STREAMS);
  g_autofree MmTime *dur = g_new0(MmTime, STREAMS);
  for (uint32_t k = 0; k < STREAMS; k++) ops[k] = (MmEngineOp){.stream = k, .coll = MM_NO_COLL};
  const MmEngineProgram pr = {ops, STREAMS, NULL, STREAMS, NULL, NULL, 0};
  const MmEngineClass cl = {0, dur, 0, NULL, 0};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) e = mm_engine_new(&pr, 1, &cl, 1, &error);
  ck_assert(e != NULL);
  e->bucketed = bucketed;
  mm__queue_reset(e);
  e->now = 0;
  g_autoptr(GRand) rng = g_rand_new_with_seed(7);
  g_autoptr(GArray) ref = g_array_new(FALSE, FALSE, sizeof(Event)); /* pending, unsorted */
  g_autoptr(GHashTable) times = g_hash_table_new(g_int64_hash, g_int64_equal);
  gboolean shared = FALSE;
  for (uint32_t i = 0; i < PUSHES || ref->len > 0;) {
    if (i < PUSHES && (ref->len == 0 || g_rand_int_range(rng, 0, 2) > 0)) {
      const MmTime t = e->now + (MmTime)g_rand_int_range(rng, 0, range);
      const uint32_t si = g_rand_int_range(rng, 0, STREAMS);
      mm__queue_push(e, t, si);
      const Event want = {t, e->streams[si].live};
      g_array_append_val(ref, want);
      i++;
    } else {
      guint best = 0;
      for (guint k = 1; k < ref->len; k++) {
        const Event *a = &g_array_index(ref, Event, k), *b = &g_array_index(ref, Event, best);
        if (a->t < b->t || (a->t == b->t && a->key < b->key)) best = k;
      }
      const Event want = g_array_index(ref, Event, best), got = mm__queue_pop(e);
      ck_assert_uint_eq(got.t, want.t);
      ck_assert_uint_eq(got.key, want.key);
      g_array_remove_index_fast(ref, best);
      e->now = got.t;
    }
    g_hash_table_remove_all(times);
    for (guint k = 0; k < ref->len; k++) g_hash_table_add(times, &g_array_index(ref, Event, k).t);
    for (guint k = 0, n = 0; range == 4 && k < ref->len; k++, most = MAX(most, n)) {
      n = 0;
      for (guint j = 0; j < ref->len; j++) n += g_array_index(ref, Event, j).t == g_array_index(ref, Event, k).t;
    }
    if (bucketed) {
      ck_assert_uint_ge(e->n_bk, g_hash_table_size(times));
      ck_assert_uint_le(e->n_bk, ref->len);
      shared |= e->n_bk > g_hash_table_size(times);
    }
    ck_assert_uint_eq(e->queued, ref->len);
  }
  ck_assert_msg(shared || !bucketed || range == 4, "no time ever had two buckets: the shared-slot path went untested");
  ck_assert_msg(range != 4 || most > 2 * MM__CHUNK_KEYS, "no time held more than two chunks of events (%u)", most);
}
END_TEST

/* Two sequential flows, each over 32,768 resources, in a program of 131,072 streams: the bound
 * on sharing entities (streams x the most resources of one op, 2^32) must not wrap in 32 bits
 * (it did: the entity arrays were sized 0 and sharing wrote past them). */
START_TEST(test_entity_bound_does_not_wrap)
{
  enum { R = 32768, S = 131072 };
  g_autofree uint32_t *xl = g_new(uint32_t, 2 * R);
  g_autofree double *xb = g_new(double, 2 * R), *bw = g_new(double, R);
  for (uint32_t i = 0; i < 2 * R; i++) xl[i] = i % R, xb[i] = 1;
  for (uint32_t i = 0; i < R; i++) bw[i] = 1;
  const MmEngineOp ops[2] = {
    {.stream = 0, .coll = MM_NO_COLL, .xfer_first = 0, .n_xfer = R, .sequential = 1},
    {.stream = 1, .coll = MM_NO_COLL, .xfer_first = R, .n_xfer = R, .sequential = 1},
  };
  const MmTime dur[2] = {0, 0};
  const MmEngineProgram p = {ops, 2, NULL, S, xl, xb, R};
  const MmEngineClass c = {0, dur, 0, bw, 0};
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngine) e = mm_engine_new(&p, 1, &c, 1, &error);
  ck_assert_msg(e != NULL, "%s", error ? error->message : "");
  ck_assert_uint_ge(e->max_ent, 2 * R); /* both flows' resources can be sharing entities at once */
  ck_assert_msg(mm_engine_run(e, &error), "%s", error ? error->message : "");
  ck_assert_uint_eq(mm_engine_op_end(e, 0, 0), mm_engine_op_end(e, 0, 1)); /* symmetric flows end together */
}
END_TEST

/* ---- runs kept for reuse ------------------------------------------------- */

/* Two devices (classes) with a flow, a collective and compute on three streams: every kind of
 * input the digest must cover. */
typedef struct {
  Prog p;
  MmTime d1[32]; /* the second class's durations */
  MmEngineProgram pr;
  MmEngineClass cls[2];
} MemoCase;

static void memo_programs(MemoCase *m)
{
  Prog *p = &m->p;
  *p = (Prog){0};
  uint32_t a = op(p, 0, 7, 0);
  uint32_t f = flow(p, 2, 2, FALSE, 1, a, 1, 0u, 40.0);
  uint32_t t = coll(p, 1, 3, 2, 1, 1, a);
  op(p, 0, 5, 2, t, f);
  memcpy(m->d1, p->dur, sizeof(MmTime) * p->n);
  m->d1[0] = 9; /* the second device computes longer */
  m->pr = prog(p, 3);
  m->cls[0] = (MmEngineClass){0, p->dur, 0, unit_bw, 0.5};
  m->cls[1] = (MmEngineClass){0, m->d1, 1, unit_bw, 0.5};
}

static gboolean digest_eq(const MmEngineDigest *a, const MmEngineDigest *b)
{
  return a->h[0] == b->h[0] && a->h[1] == b->h[1];
}

/* Equal inputs give equal digests (copies, not the same pointers); any one field the engine
 * reads that differs gives another. */
START_TEST(test_digest_names_every_input)
{
  MemoCase x, y;
  memo_programs(&x);
  memo_programs(&y);
  MmEngineDigest a, b;
  mm_engine_digest(&x.pr, 1, x.cls, 2, &a);
  mm_engine_digest(&y.pr, 1, y.cls, 2, &b);
  ck_assert(digest_eq(&a, &b));
  const double bw2[4] = {1.0, 2.0, 1.0, 1.0};
  for (int change = 0; change < 9; change++) {
    memo_programs(&y);
    Prog *q = &y.p;
    switch (change) {
    case 0: q->dur[3] += 1; break;            /* one picosecond of one op */
    case 1: y.d1[0] += 1; break;              /* the other class's */
    case 2: q->deps[0] = 0, q->ops[1].n_deps = 0; break; /* a dependency */
    case 3: q->xb[0] = 41.0; break;           /* a transfer's bytes */
    case 4: q->xl[0] = 1; break;              /* its link */
    case 5: y.cls[1].link_bw = bw2; break;    /* a capacity */
    case 6: y.cls[0].slow_pace = 0.25; break; /* interference */
    case 7: y.cls[1].rep_device = 2; break;   /* where a class's groups are */
    case 8: q->ops[2].stride = 2; break;      /* a group's shape */
    }
    y.pr = prog(q, 3);
    mm_engine_digest(&y.pr, 1, y.cls, 2, &b);
    ck_assert_msg(!digest_eq(&a, &b), "change %d kept the digest", change);
  }
  mm_engine_digest(&x.pr, 1, x.cls, 1, &b); /* a class fewer */
  ck_assert(!digest_eq(&a, &b));
}
END_TEST

/* Differences in two words of one lane do not cancel: bit 63 of one duration and bit 30 of the
 * duration four words on (a multiply before the rotation left the first a one-bit difference
 * that the second cancelled for every input), nor in the low bits; and an op without
 * dependencies or transfers is not read past the arrays for its first indices. */
START_TEST(test_digest_lane_differences)
{
  Prog p = {0};
  for (int i = 0; i < 8; i++) op(&p, 0, (MmTime)(100 + i), 0);
  MmEngineProgram pr = prog(&p, 1);
  MmTime d2[8];
  const MmEngineClass cl = {0, p.dur, 0, unit_bw, 0};
  MmEngineDigest a, b;
  mm_engine_digest(&pr, 1, &cl, 1, &a);
  const struct {
    int w0, w1;
    MmTime x0, x1;
  } flips[] = {{0, 4, (MmTime)1 << 63, (MmTime)1 << 30}, {1, 5, (MmTime)1 << 63, (MmTime)1 << 30},
               {0, 4, 1, 1}, {2, 6, (MmTime)1 << 62, (MmTime)1 << 29}, {3, 7, 3, 3}};
  for (guint f = 0; f < G_N_ELEMENTS(flips); f++) {
    memcpy(d2, p.dur, sizeof d2);
    d2[flips[f].w0] ^= flips[f].x0;
    d2[flips[f].w1] ^= flips[f].x1;
    const MmEngineClass c2 = {0, d2, 0, unit_bw, 0};
    mm_engine_digest(&pr, 1, &c2, 1, &b);
    ck_assert_msg(!digest_eq(&a, &b), "flip %u collided", f);
  }
  /* first indices far past the arrays, on ops that have none to read */
  p.ops[3].dep_first = 1000000;
  p.ops[3].xfer_first = 1000000;
  pr = prog(&p, 1);
  mm_engine_digest(&pr, 1, &cl, 1, &b); /* under ASan: no read past deps / xl / xb */
  ck_assert(!digest_eq(&a, &b));        /* the fields themselves are part of the op */
}
END_TEST

/* A replayed engine answers every accessor as the engine that ran, and cannot run itself. */
/* memo_programs, run once. */
static MmEngine *memo_run(MemoCase *m)
{
  memo_programs(m);
  g_autoptr(GError) error = NULL;
  MmEngine *e = mm_engine_new(&m->pr, 1, m->cls, 2, &error);
  ck_assert_msg(e && mm_engine_run(e, &error), "%s", error ? error->message : "");
  return e;
}

/* @x answers every result accessor as @e (two classes of @n ops). */
static void same_run(const MmEngine *x, const MmEngine *e, uint32_t n)
{
  ck_assert_uint_eq(mm_engine_makespan(x), mm_engine_makespan(e));
  ck_assert_uint_eq(mm_engine_events(x), mm_engine_events(e));
  ck_assert_int_eq(mm_engine_groups_arithmetic(x), mm_engine_groups_arithmetic(e));
  for (uint32_t c = 0; c < 2; c++) {
    ck_assert_uint_eq(mm_engine_class_end(x, c), mm_engine_class_end(e, c));
    for (uint32_t i = 0; i < n; i++) {
      ck_assert_uint_eq(mm_engine_op_start(x, c, i), mm_engine_op_start(e, c, i));
      ck_assert_uint_eq(mm_engine_op_end(x, c, i), mm_engine_op_end(e, c, i));
    }
  }
}

START_TEST(test_replayed_engine_equals_run)
{
  MemoCase mc;
  g_autoptr(MmEngine) e = memo_run(&mc);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngineResult) r = mm_engine_result_new(e);
  ck_assert_uint_ge(mm_engine_result_size(r), sizeof(MmTime) * 2 * 2 * mc.p.n);
  g_autoptr(MmEngine) x = mm_engine_new_replayed(&mc.pr, 1, mc.cls, 2, r, &error);
  ck_assert_ptr_nonnull(x);
  same_run(x, e, mc.p.n);
  ck_assert_uint_gt(mm_engine_op_start(e, 1, 2), mm_engine_op_start(e, 0, 0)); /* the times are not all 0 */
  ck_assert(!mm_engine_run(x, &error));
  ck_assert(g_error_matches(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID));
  g_clear_error(&error);
  /* a result of another shape is refused */
  ck_assert_ptr_null(mm_engine_new_replayed(&mc.pr, 1, mc.cls, 1, r, &error));
  ck_assert(g_error_matches(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID));
}
END_TEST

/* The memo replays a run of the same inputs (the same times), simulates other inputs, and keeps
 * no more than its budget, the oldest going first. */
START_TEST(test_memo_replays_and_bounds)
{
  MemoCase mc;
  g_autoptr(MmEngine) ref = memo_run(&mc);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmEngineResult) one = mm_engine_result_new(ref);
  /* room for about one result */
  g_autoptr(MmEngineMemo) m = mm_engine_memo_new(mm_engine_result_size(one) + 64);
  gboolean hit = TRUE;
  g_autoptr(MmEngine) e1 = mm_engine_memo_run(m, &mc.pr, 1, mc.cls, 2, &hit, &error);
  ck_assert(e1 && !hit);
  g_autoptr(MmEngine) e2 = mm_engine_memo_run(m, &mc.pr, 1, mc.cls, 2, &hit, &error);
  ck_assert(e2 && hit);
  same_run(e2, ref, mc.p.n);
  /* other durations: simulated, and their times differ */
  MmTime d0b[32];
  memcpy(d0b, mc.p.dur, sizeof(MmTime) * mc.p.n);
  d0b[0] = 20;
  MmEngineClass other[2] = {mc.cls[0], mc.cls[1]};
  other[0].dur = d0b;
  g_autoptr(MmEngine) e3 = mm_engine_memo_run(m, &mc.pr, 1, other, 2, &hit, &error);
  ck_assert(e3 && !hit);
  ck_assert_uint_ne(mm_engine_makespan(e3), mm_engine_makespan(ref));
  /* keeping it pushed the first out: the first is simulated again */
  g_autoptr(MmEngine) e4 = mm_engine_memo_run(m, &mc.pr, 1, mc.cls, 2, &hit, &error);
  ck_assert(e4 && !hit);
  uint64_t hits, kept;
  mm_engine_memo_counts(m, &hits, &kept);
  ck_assert_uint_eq(hits, 1);
  ck_assert_uint_eq(kept, 3);
  /* a budget below one result keeps nothing */
  g_autoptr(MmEngineMemo) tiny = mm_engine_memo_new(16);
  g_autoptr(MmEngine) t1 = mm_engine_memo_run(tiny, &mc.pr, 1, mc.cls, 2, &hit, &error);
  g_autoptr(MmEngine) t2 = mm_engine_memo_run(tiny, &mc.pr, 1, mc.cls, 2, &hit, &error);
  ck_assert(t1 && t2 && !hit);
  /* a failing run is an error, and nothing is kept */
  g_autoptr(MmEngineMemo) fm = mm_engine_memo_new(1 << 20);
  MmEngineClass bad[2] = {mc.cls[0], mc.cls[1]};
  bad[1].program = 3;
  ck_assert_ptr_null(mm_engine_memo_run(fm, &mc.pr, 1, bad, 2, &hit, &error));
  ck_assert(g_error_matches(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID));
  mm_engine_memo_counts(fm, &hits, &kept);
  ck_assert_uint_eq(kept, 0);
}
END_TEST

static Suite *engine_suite(void)
{
  Suite *s = suite_create("engine");
  TCase *tc = tcase_create("timelines");
  tcase_add_test(tc, test_two_streams_overlap);
  tcase_add_test(tc, test_dependency_chain);
  tcase_add_test(tc, test_fifo_head_blocks_stream);
  tcase_add_test(tc, test_nonblocking_allreduce_overlaps_backward);
  tcase_add_test(tc, test_collective_across_two_classes);
  tcase_add_test(tc, test_symmetric_equals_per_device);
  tcase_add_test(tc, test_arithmetic_groups_equal_listed);
  tcase_add_test(tc, test_inconsistent_groups_are_listed);
  tcase_add_test(tc, test_listed_groups_sparse_ids);
  tcase_add_loop_test(tc, test_queue_many_pending_times, 0, 2);
  tcase_add_loop_test(tc, test_queue_order_and_buckets, 0, 4);
  tcase_add_test(tc, test_entity_bound_does_not_wrap);
  tcase_add_test(tc, test_deadlock_is_reported);
  tcase_add_test(tc, test_invalid_program);
  tcase_add_test(tc, test_rerun_and_equal_times);
  tcase_add_test(tc, test_contention_one_link);
  tcase_add_test(tc, test_contention_two_links);
  tcase_add_test(tc, test_contention_staggered);
  tcase_add_test(tc, test_flow_latency_and_phases);
  suite_add_tcase(s, tc);
  TCase *tr = tcase_create("resources");
  tcase_add_test(tr, test_maxmin_nic_bound_flow_leaves_nvlink);
  tcase_add_test(tr, test_tail_releases_share);
  tcase_add_loop_test(tr, test_kernel_shares_hbm_with_copy, 0, G_N_ELEMENTS(kernel_copy_rows));
  tcase_add_test(tr, test_maxmin_sequential_phases);
  tcase_add_test(tr, test_maxmin_crossing_flows);
  tcase_add_test(tr, test_zero_work_is_fixed);
  tcase_add_test(tr, test_interference_paces);
  tcase_add_test(tr, test_interference_roles_checked);
  tcase_add_test(tr, test_interference_tie);
  tcase_add_test(tr, test_sharing_is_deterministic);
  tcase_add_loop_test(tr, test_bad_work_is_refused, 0, G_N_ELEMENTS(bad_work_rows));
  suite_add_tcase(s, tr);
  TCase *tm = tcase_create("memo");
  tcase_add_test(tm, test_digest_names_every_input);
  tcase_add_test(tm, test_digest_lane_differences);
  tcase_add_test(tm, test_replayed_engine_equals_run);
  tcase_add_test(tm, test_memo_replays_and_bounds);
  suite_add_tcase(s, tm);
  return s;
}

int main(void)
{
  return mm_test_main(engine_suite());
}

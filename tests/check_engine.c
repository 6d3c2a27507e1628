/* check_engine: the event engine on hand-computed timelines. */
#include <stdarg.h>

#include "engine/engine.h"
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
                    .xfer_first = p->nx, .n_xfer = (uint16_t)n, .sequential = (uint16_t)sequential};
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

static MmEngine *run1(Prog *p, uint32_t streams)
{
  static MmEngineProgram pr;
  static MmEngineClass cl;
  pr = prog(p, streams);
  cl = (MmEngineClass){0, p->dur, 0, unit_bw};
  g_autoptr(GError) error = NULL;
  MmEngine *e = mm_engine_new(&pr, 1, &cl, 1, &error);
  ck_assert_msg(e != NULL, "%s", error ? error->message : "");
  ck_assert_msg(mm_engine_run(e, &error), "%s", error ? error->message : "");
  return e;
}

#define START(e, i) mm_engine_op_start(e, 0, i)
#define END(e, i) mm_engine_op_end(e, 0, i)

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
  MmEngineClass cls[2] = {{0, d0, 0, unit_bw}, {0, d1, 1, unit_bw}};
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
  MmEngineClass one = {0, p.dur, 0, unit_bw};
  MmEngineClass four[4];
  for (uint32_t i = 0; i < 4; i++) four[i] = (MmEngineClass){0, p.dur, i, unit_bw};
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
  MmEngineClass cls[2] = {{0, r.dur, 0, unit_bw}, {1, s.dur, 1, unit_bw}};
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
  MmEngineClass cl = {0, p.dur, 0, unit_bw};
  g_autoptr(GError) error = NULL;
  MmEngine *e = mm_engine_new(&pr, 1, &cl, 1, &error);
  ck_assert_ptr_null(e);
  ck_assert(g_error_matches(error, MM_ENGINE_ERROR, MM_ENGINE_ERROR_INVALID));
  g_clear_error(&error);
  Prog q = {0};
  op(&q, 5, 1, 0); /* stream out of range */
  MmEngineProgram pq = prog(&q, 2);
  MmEngineClass cq = {0, q.dur, 0, unit_bw};
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

/* Latency comes first; several links move at once (pipelined) or one after another. */
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
  tcase_add_test(tc, test_deadlock_is_reported);
  tcase_add_test(tc, test_invalid_program);
  tcase_add_test(tc, test_rerun_and_equal_times);
  tcase_add_test(tc, test_contention_one_link);
  tcase_add_test(tc, test_contention_two_links);
  tcase_add_test(tc, test_contention_staggered);
  tcase_add_test(tc, test_flow_latency_and_phases);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(engine_suite());
}

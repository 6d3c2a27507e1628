/* steady: the metrics of a whole iteration from a run of fewer micro-batches whose steady 1F1B
 * periods repeat exactly (an exact reduction of pipeline and gradient-accumulation schedules). */
#include <string.h>

#include "run_internal.h"

/* Whether op @i and op @j of @pr are the same op of two periods: same stream, time, work and kind. */
static gboolean same_op(const MmPlanProgram *pr, uint32_t i, uint32_t j)
{
  const MmEngineOp *a = &pr->ops[i], *b = &pr->ops[j];
  const MmOpInfo *x = &pr->info[i], *y = &pr->info[j];
  return a->stream == b->stream && a->n_deps == b->n_deps && a->n_xfer == b->n_xfer && pr->dur[i] == pr->dur[j] &&
         x->what == y->what && x->phase == y->phase && x->coll == y->coll && x->reason == y->reason &&
         x->fused == 0 && y->fused == 0;
}

/* The periods of one class: groups of G steady pairs (pair_first, the micro-batch reduction), or
 * runs of @len ops from @base (a cut program's run); @n whole ones. */
typedef struct {
  const uint32_t *first;
  uint32_t G, base, len, n;
} Periods;

/* Period of op @i (0-based), or -1 outside them. */
static int64_t period_of(const Periods *P, uint32_t i)
{
  if (!P->first) return i < P->base || i >= P->base + P->n * P->len ? -1 : (int64_t)((i - P->base) / P->len);
  const uint32_t n_pairs = P->n * P->G;
  if (i < P->first[0] || i >= P->first[n_pairs]) return -1;
  uint32_t lo = 0, hi = n_pairs; /* the last pair starting at or before i */
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (P->first[mid] <= i) lo = mid;
    else hi = mid;
  }
  return (int64_t)(lo / P->G);
}

/* Ops of period @q: [*first, *first + len). */
static uint32_t period_ops(const Periods *P, uint32_t q, uint32_t *first)
{
  if (!P->first) {
    *first = P->base + q * P->len;
    return P->len;
  }
  *first = P->first[q * P->G];
  return P->first[(q + 1) * P->G] - *first;
}

/* Whether period @q of class @c is period q - 1 shifted by @lambda: the same ops, started and
 * ended @lambda later. */
static gboolean shifted(const MmPlanProgram *pr, const Periods *P, uint32_t q, const MmTime *t0, const MmTime *t1,
                        MmTime lambda)
{
  uint32_t a, b;
  const uint32_t n = period_ops(P, q - 1, &a);
  if (period_ops(P, q, &b) != n || n == 0) return FALSE;
  for (uint32_t j = 0; j < n; j++)
    if (!same_op(pr, b + j, a + j) || t0[b + j] != t0[a + j] + lambda || t1[b + j] != t1[a + j] + lambda) return FALSE;
  return TRUE;
}

/* Earliest start and latest end of period @q's ops. */
static void period_span(const Periods *P, uint32_t q, const MmTime *t0, const MmTime *t1, MmTime *lo, MmTime *hi)
{
  uint32_t a;
  const uint32_t n = period_ops(P, q, &a);
  *lo = MM_TIME_MAX;
  *hi = 0;
  for (uint32_t j = a; j < a + n; j++) *lo = MIN(*lo, t0[j]), *hi = MAX(*hi, t1[j]);
}

/* Whether at @tau each of the @nc classes is inside its repeating periods [r[c], e[c]]: every op
 * running between tau and tau + lambda belongs to them, those running at tau to one followed by
 * another of them, those running at tau + lambda to one preceded by another. */
static gboolean inside(const MmPlan *p, uint32_t nc, const Periods *P, MmTime *const *t0, MmTime *const *t1,
                       const uint32_t *r, const uint32_t *e, MmTime tau, MmTime lambda)
{
  const MmTime a = tau, b = tau + lambda;
  for (uint32_t c = 0; c < nc; c++) {
    const MmPlanProgram *pr = mm_plan_class_program(p, c);
    for (uint32_t i = 0; i < pr->n_ops; i++) {
      if (t0[c][i] > b || t1[c][i] <= a) continue; /* running in [a, b]: started by b, not ended by a */
      const int64_t q = period_of(&P[c], i);
      if (q < (int64_t)r[c] || q > (int64_t)e[c]) return FALSE;
      if (t0[c][i] <= a && t1[c][i] > a && q >= (int64_t)e[c]) return FALSE;
      if (t1[c][i] > b && q <= (int64_t)r[c]) return FALSE;
    }
  }
  return TRUE;
}

/* The steady state of a run: on each of the @nc classes, the last periods before the cool-down
 * repeat (each the previous one shifted by one period time lambda, the same on every class), and
 * at some time tau every class is inside them (inside()). The engine is time-invariant, so the
 * state at tau + lambda is the state at tau one period on, and an iteration with more periods is
 * this run with them inserted at tau. Returns lambda (0: no steady state), tau, and in @range (may
 * be NULL) the ops of the repeating periods of class 0. */
static MmTime steady_period(const MmPlan *p, uint32_t nc, const Periods *P, MmTime *const *t0, MmTime *const *t1,
                            MmTime *tau, uint32_t *range)
{
  g_autofree uint32_t *r = g_new(uint32_t, 2 * (gsize)nc);
  uint32_t *e = r + nc;
  MmTime lambda = 0, lo = 0, hi = MM_TIME_MAX;
  for (uint32_t c = 0; c < nc; c++) {
    const MmPlanProgram *pr = mm_plan_class_program(p, c);
    if (P[c].n < 4) return 0;
    /* the last whole period may run into the cool-down: the run ends at n - 2 */
    e[c] = P[c].n - 2;
    uint32_t a, b;
    period_ops(&P[c], e[c] - 1, &a);
    period_ops(&P[c], e[c], &b);
    if (t0[c][b] <= t0[c][a]) return 0;
    const MmTime lam = t0[c][b] - t0[c][a];
    if (c > 0 && lam != lambda) return 0;
    lambda = lam;
    r[c] = e[c];
    while (r[c] > 0 && shifted(pr, &P[c], r[c], t0[c], t1[c], lambda)) r[c]--;
    if (e[c] - r[c] < 2) return 0;
    MmTime l, h;
    period_span(&P[c], r[c] + 1, t0[c], t1[c], &l, &h);
    lo = MAX(lo, l);
    period_span(&P[c], e[c] - 1, t0[c], t1[c], &l, &h);
    hi = MIN(hi, h);
  }
  if (hi < lambda || lo > hi - lambda) return 0;
  const MmTime cand[2] = {lo, lo + (hi - lambda - lo) / 2};
  for (int i = 0; i < 2; i++)
    if (inside(p, nc, P, t0, t1, r, e, cand[i], lambda)) {
      *tau = cand[i];
      if (!range) return lambda;
      uint32_t a, b;
      period_ops(&P[0], r[0], &a);
      const uint32_t len = period_ops(&P[0], e[0], &b);
      range[0] = a;
      range[1] = b + len;
      return lambda;
    }
  return 0;
}

static void add_scaled(MmRunMetrics *r, const MmRunMetrics *w, double k)
{
  r->compute_s += k * w->compute_s;
  r->interference_compute_s += k * w->interference_compute_s;
  r->interference_embedding_s += k * w->interference_embedding_s;
  r->embedding_s += k * w->embedding_s;
  r->comm_s += k * w->comm_s;
  for (int i = 0; i < MM_COLL_COUNT; i++) r->comm_by_kind_s[i] += k * w->comm_by_kind_s[i];
  for (int i = 0; i < MM_REASON_COUNT; i++) r->comm_by_reason_s[i] += k * w->comm_by_reason_s[i];
  for (int i = 0; i < MM_PHASE_COUNT; i++) r->compute_by_phase_s[i] += k * w->compute_by_phase_s[i];
  r->comm_active_s += k * w->comm_active_s;
  r->compute_active_s += k * w->compute_active_s;
  r->exposed_comm_s += k * w->exposed_comm_s;
  r->hidden_comm_s += k * w->hidden_comm_s;
  r->host_copy_s += k * w->host_copy_s;
  r->host_step_s += k * w->host_step_s;
  r->host_exposed_s += k * w->host_exposed_s;
  for (int i = 0; i < MM_STREAM_COUNT; i++) {
    r->stream_busy_s[i] += k * w->stream_busy_s[i];
    r->stream_ops[i] += (uint32_t)k * w->stream_ops[i];
  }
}

gboolean mm_report_run_metrics_steady(const MmPlan *p, const MmEngine *e, uint32_t micro_steps, MmRunMetrics *out)
{
  const uint32_t G = p->period_pairs, g = p->period_micro, mr = p->micro_steps;
  if (G == 0 || p->per_device || micro_steps <= mr || (micro_steps - mr) % g != 0) return FALSE;
  const uint64_t k = (micro_steps - mr) / g;
  const uint32_t nc = p->n_classes;
  g_autofree MmTime **t0 = g_new0(MmTime *, 2 * (gsize)nc);
  MmTime **t1 = t0 + nc;
  g_autofree Periods *P = g_new(Periods, nc);
  for (uint32_t c = 0; c < nc; c++) {
    const MmPlanProgram *pr = mm_plan_class_program(p, c);
    t0[c] = g_new(MmTime, 2 * (gsize)pr->n_ops + 1);
    t1[c] = t0[c] + pr->n_ops;
    mm_engine_class_times(e, c, t0[c], t1[c]);
    P[c] = (Periods){.first = pr->pair_first, .G = G, .n = pr->n_pairs / G};
  }
  MmTime tau = 0;
  const MmTime lambda = steady_period(p, nc, P, t0, t1, &tau, NULL);
  for (uint32_t c = 0; c < nc; c++) g_free(t0[c]);
  const MmTime end = mm_engine_makespan(e);
  if (lambda == 0 || k > (MM_TIME_MAX - end) / lambda) return FALSE;

  mm_report_run_metrics(p, e, out);
  MmRunMetrics w;
  memset(&w, 0, sizeof w);
  const MmTime win[2] = {tau, tau + lambda};
  mm__class_spans(p, e, out->critical_class, win, &w);
  add_scaled(out, &w, (double)k);
  uint64_t per_period = 0;
  for (uint32_t c = 0; c < nc; c++) {
    const MmPlanProgram *pr = mm_plan_class_program(p, c);
    const uint32_t len = pr->pair_first[2 * G] - pr->pair_first[G];
    per_period += len;
    if (c == out->critical_class) out->ops += (uint32_t)(k * len);
  }
  out->events += k * per_period;
  out->iteration_time_s = mm_time_to_s(end + (MmTime)k * lambda);
  mm__run_derived(p, out);
  return TRUE;
}

gboolean mm_report_run_metrics_cut(const MmPlan *p, const MmEngine *e, MmRunMetrics *out)
{
  if (p->n_runs == 0 || p->n_classes != 1 || p->per_device) return FALSE;
  const MmPlanProgram *pr = mm_plan_class_program(p, 0);
  g_autofree MmTime *t0 = g_new(MmTime, 2 * (gsize)pr->n_ops + 1);
  MmTime *t1 = t0 + pr->n_ops;
  mm_engine_class_times(e, 0, t0, t1);
  g_autofree MmTime *lam = g_new(MmTime, 2 * (gsize)p->n_runs);
  MmTime *tau = lam + p->n_runs;
  g_autofree uint32_t *range = g_new(uint32_t, 2 * (gsize)p->n_runs);
  MmTime add = 0;
  const MmTime end = mm_engine_makespan(e);
  for (uint32_t r = 0; r < p->n_runs; r++) {
    const MmPlanRun *run = &p->runs[r];
    const Periods P = {.base = run->first, .len = run->len, .n = run->periods};
    lam[r] = steady_period(p, 1, &P, &t0, &t1, &tau[r], &range[2 * r]);
    if (lam[r] == 0 || run->cut > (MM_TIME_MAX - end - add) / lam[r]) return FALSE;
    add += (MmTime)run->cut * lam[r];
  }
  mm_report_run_metrics(p, e, out);
  for (uint32_t r = 0; r < p->n_runs; r++) {
    MmRunMetrics w;
    memset(&w, 0, sizeof w);
    const MmTime win[2] = {tau[r], tau[r] + lam[r]};
    mm__class_spans_of(p, 0, t0, t1, range[2 * r], range[2 * r + 1], win, &w);
    add_scaled(out, &w, (double)p->runs[r].cut);
    out->ops += p->runs[r].cut * p->runs[r].len;
    out->events += (uint64_t)p->runs[r].cut * p->runs[r].len;
  }
  out->iteration_time_s = mm_time_to_s(end + add);
  mm__run_derived(p, out);
  return TRUE;
}

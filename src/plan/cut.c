/* cut: a program whose layers repeat, with most of each run of identical layer periods left out
 * (mm_plan_cut; the metrics of the whole follow from the shorter run: mm_report_run_metrics_cut). */
#include <string.h>

#include "internal.h"

/* How far ahead the next period of an op is sought: a transformer layer lowers to at most a few
 * tens of ops per micro-step and phase (the LLaMA-2-70B bench sweep's 146 cut points find theirs
 * within 128 as within 512, and the search is 4% of the sweep's instructions less). */
#define CUT_MAX_PERIOD 128

/* Whether ops @a and @b of @pr are the same op of two periods @b - @a apart, as the engine and
 * the metrics see them: stream, time, transfers, group, interference role, kind, and each
 * dependency the same distance back; their dependencies and transfers @dd and @dx further on in
 * those arrays (a period's are contiguous). Pieces of fused groups never are (their groups are
 * matched by id across the whole program). */
static inline gboolean same_period_op(const MmPlanProgram *pr, uint32_t a, uint32_t b, uint32_t dd, uint32_t dx)
{
  const MmEngineOp *x = &pr->ops[a], *y = &pr->ops[b];
  const MmOpInfo *u = &pr->info[a], *v = &pr->info[b];
  if (pr->dur[a] != pr->dur[b] || y->dep_first != x->dep_first + dd || y->xfer_first != x->xfer_first + dx ||
      x->stream != y->stream || x->n_deps != y->n_deps || x->n_xfer != y->n_xfer || x->degree != y->degree ||
      x->stride != y->stride || x->peer != y->peer || x->sequential != y->sequential || x->cil != y->cil ||
      (x->coll == a ? y->coll != b : x->coll != y->coll) || u->what != v->what || u->phase != v->phase ||
      u->coll != v->coll || u->reason != v->reason || u->fused || v->fused)
    return FALSE;
  const uint32_t *da = pr->deps + x->dep_first, *db = da + dd;
  for (uint32_t k = 0; k < x->n_deps; k++)
    if (db[k] - da[k] != b - a) return FALSE;
  for (uint32_t k = 0; k < x->n_xfer; k++)
    if (pr->xfer_link[x->xfer_first + k] != pr->xfer_link[x->xfer_first + dx + k] ||
        pr->xfer_bytes[x->xfer_first + k] != pr->xfer_bytes[x->xfer_first + dx + k])
      return FALSE;
  return TRUE;
}

/* The periodic run starting at op @i: ops [i, i + *n x *len) where each op is the same op as the
 * one *len before it, the period the distance to one of the next few ops like op @i (up to
 * CUT_MAX_PERIOD ahead) that repeats at least @min times. FALSE when none does. */
static gboolean find_run(const MmPlanProgram *pr, uint32_t i, uint32_t min, uint32_t *len, uint32_t *n)
{
  const uint32_t end = MIN(pr->n_ops, i + CUT_MAX_PERIOD + 1);
  const MmEngineOp *o = pr->ops;
  guint tries = 0;
  for (uint32_t j = i + 1; j < end && tries < 4; j++) {
    const uint32_t dd = o[j].dep_first - o[i].dep_first, dx = o[j].xfer_first - o[i].xfer_first;
    if (!same_period_op(pr, i, j, dd, dx)) continue;
    tries++;
    const uint32_t P = j - i;
    uint32_t e = i;
    while (e + P < pr->n_ops && same_period_op(pr, e, e + P, dd, dx)) e++;
    const uint32_t periods = (e - i) / P + 1; /* ops [i, e + P) repeat: whole periods from i */
    if (periods >= min) {
      *len = P;
      *n = periods;
      return TRUE;
    }
  }
  return FALSE;
}

/* A run found, and what is cut of it: ops [lo, hi) of the whole program. */
typedef struct {
  uint32_t first, len, periods, lo, hi;
} Found;

MmPlanRuns *mm_plan_runs(const MmPlan *p)
{
  g_return_val_if_fail(p, NULL);
  if (p->n_programs != 1 || p->n_classes != 1 || p->per_device) return NULL;
  const MmPlanProgram *pr = &p->programs[0];
  GArray *runs = g_array_new(FALSE, FALSE, sizeof(MmPlanRun));
  for (uint32_t i = 0; i < pr->n_ops;) {
    MmPlanRun f = {.first = i};
    if (pr->info[i].what != MM_OP_COMPUTE || !find_run(pr, i, 2 * MM_PLAN_CUT_KEEP, &f.len, &f.periods)) {
      i++;
      continue;
    }
    g_array_append_val(runs, f);
    i = f.first + f.periods * f.len;
  }
  if (runs->len == 0) {
    g_array_free(runs, TRUE);
    return NULL;
  }
  return runs;
}

MmPlan *mm_plan_cut(const MmPlan *p, const MmPlanRuns *found, uint32_t keep)
{
  g_return_val_if_fail(p && found && keep >= MM_PLAN_CUT_KEEP, NULL);
  const MmPlanProgram *pr = &p->programs[0];
  const uint32_t n = pr->n_ops;
  g_autoptr(GArray) runs = g_array_new(FALSE, FALSE, sizeof(Found));
  for (guint r = 0; r < found->len; r++) {
    const MmPlanRun *x = &g_array_index(found, MmPlanRun, r);
    if (x->periods < 2 * keep) continue;
    Found f = {.first = x->first, .len = x->len, .periods = x->periods};
    f.lo = f.first + keep / 2 * f.len;
    f.hi = f.lo + (f.periods - keep) * f.len;
    g_array_append_val(runs, f);
  }
  if (runs->len == 0) return NULL;
  /* a run is cut where its own ops reach back at most its kept head (a kept op after the cut then
   * depends on the kept op as far back as the whole program's did) and no op after it depends on
   * one it leaves out */
  Found *fs = (Found *)(void *)runs->data;
  g_autofree gboolean *bad = g_new0(gboolean, runs->len + 1);
  g_autofree uint32_t *run_of = g_new0(uint32_t, n + 1); /* 1 + the run holding each op, 0: none */
  for (guint r = 0; r < runs->len; r++)
    for (uint32_t i = fs[r].first; i < fs[r].first + fs[r].periods * fs[r].len; i++) run_of[i] = r + 1;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < pr->ops[i].n_deps; k++) {
      const uint32_t d = pr->deps[pr->ops[i].dep_first + k], rd = run_of[d];
      if (rd == 0) continue;
      const Found *f = &fs[rd - 1];
      if (run_of[i] == rd ? i - d > f->lo - f->first : d >= f->lo && d < f->hi) bad[rd - 1] = TRUE;
    }
  guint kept = 0;
  for (guint r = 0; r < runs->len; r++)
    if (!bad[r]) fs[kept++] = fs[r];
  if (kept == 0) return NULL;

  /* the new index of each op kept (NONE: left out) */
  g_autofree uint32_t *to = g_new(uint32_t, n + 1);
  uint32_t m = 0;
  for (uint32_t i = 0, r = 0; i < n; i++) {
    while (r < kept && i >= fs[r].hi) r++;
    to[i] = r < kept && i >= fs[r].lo ? NONE : m++;
  }
  uint32_t nd = 0, nx = 0;
  for (uint32_t i = 0; i < n; i++)
    if (to[i] != NONE) nd += pr->ops[i].n_deps, nx += pr->ops[i].n_xfer;
  MmPlan *c = g_new(MmPlan, 1);
  *c = *p;
  MmPlanProgram *q = c->programs = g_new(MmPlanProgram, 1);
  *q = *pr;
  q->ops = g_new(MmEngineOp, m + 1);
  q->info = g_new(MmOpInfo, m + 1);
  q->dur = g_new(MmTime, m + 1);
  q->deps = g_new(uint32_t, nd + 1);
  q->xfer_link = g_new(uint32_t, nx + 1);
  q->xfer_bytes = g_new(double, nx + 1);
  q->pair_first = NULL; /* the micro-batch reduction does not apply to a cut program */
  q->n_pairs = 0;
  q->n_ops = m;
  nd = nx = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (to[i] == NONE) continue;
    const uint32_t j = to[i];
    const MmEngineOp *o = &pr->ops[i];
    q->ops[j] = *o;
    q->ops[j].dep_first = nd;
    q->ops[j].xfer_first = nx;
    if (o->coll == i) q->ops[j].coll = j; /* a collective of this program: its own index */
    for (uint32_t k = 0; k < o->n_deps; k++) {
      const uint32_t d = pr->deps[o->dep_first + k];
      /* a kept op after a cut reaching back into it: the op as far back in the periods kept
       * (the run's own ops only, and within its kept head: checked above) */
      q->deps[nd++] = to[d] != NONE ? to[d] : j - (i - d);
    }
    for (uint32_t k = 0; k < o->n_xfer; k++) {
      q->xfer_link[nx] = pr->xfer_link[o->xfer_first + k];
      q->xfer_bytes[nx++] = pr->xfer_bytes[o->xfer_first + k];
    }
    q->info[j] = pr->info[i];
    q->dur[j] = pr->dur[i];
  }
  q->program = (MmEngineProgram){q->ops, m, q->deps, pr->program.n_streams, q->xfer_link, q->xfer_bytes,
                                 pr->program.n_links};
  c->engine_programs = g_new(MmEngineProgram, 1);
  c->engine_programs[0] = q->program;
  c->classes = g_memdup2(p->classes, sizeof *p->classes);
  c->classes[0].dur = q->dur;
  c->class_count = g_memdup2(p->class_count, sizeof *p->class_count);
  c->link_bw = g_memdup2(p->link_bw, sizeof *p->link_bw * (p->links.n + 1));
  c->classes[0].link_bw = c->link_bw;
  c->unit_chunk = g_memdup2(p->unit_chunk, sizeof *p->unit_chunk * (p->graph->n_units + 1));
  c->period_pairs = c->period_micro = 0;
  c->runs = g_new(MmPlanRun, kept);
  c->n_runs = kept;
  for (guint r = 0; r < kept; r++)
    c->runs[r] = (MmPlanRun){.first = to[fs[r].first], .len = fs[r].len, .periods = keep, .cut = fs[r].periods - keep};
  return c;
}

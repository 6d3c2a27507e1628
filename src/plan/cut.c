/* cut: a program whose layers repeat, with most of each run of identical layer periods left out
 * (mm_plan_cut; the metrics of the whole follow from the shorter run: mm_report_run_metrics_cut). */
#include <stddef.h>
#include <string.h>

#include "internal.h"

/* How far ahead the next period of an op is sought: a transformer layer lowers to at most a few
 * tens of ops per micro-step and phase (the LLaMA-2-70B bench sweep's 146 cut points find theirs
 * within 128 as within 512, and the search is 4% of the sweep's instructions less). */
#define CUT_MAX_PERIOD 128

static inline uint64_t word_at(const void *p, size_t offset)
{
  uint64_t w;
  memcpy(&w, (const char *)p + offset, sizeof w);
  return w;
}

/* MmEngineOp as same_period_op reads it: four words and a tail, the indices that move with the
 * period (dep_first, coll, xfer_first) in the high halves */
G_STATIC_ASSERT(offsetof(MmEngineOp, stream) == 0 && offsetof(MmEngineOp, dep_first) == 4);
G_STATIC_ASSERT(offsetof(MmEngineOp, n_deps) == 8 && offsetof(MmEngineOp, coll) == 12);
G_STATIC_ASSERT(offsetof(MmEngineOp, degree) == 16 && offsetof(MmEngineOp, stride) == 20);
G_STATIC_ASSERT(offsetof(MmEngineOp, peer) == 24 && offsetof(MmEngineOp, xfer_first) == 28);
G_STATIC_ASSERT(offsetof(MmEngineOp, n_xfer) == 32 && offsetof(MmEngineOp, sequential) == 34 &&
                offsetof(MmEngineOp, cil) == 35 && sizeof(MmEngineOp) == 36);
G_STATIC_ASSERT(offsetof(MmOpInfo, what) == 0 && offsetof(MmOpInfo, phase) == 1 && offsetof(MmOpInfo, coll) == 2 &&
                offsetof(MmOpInfo, reason) == 3);

/* Whether ops @a and @b of @pr are the same op of two periods @b - @a apart, as the engine and
 * the metrics see them: stream, time, transfers, group, interference role, kind, and each
 * dependency the same distance back; their dependencies and transfers @dd and @dx further on in
 * those arrays (a period's are contiguous). Pieces of fused groups never are (their groups are
 * matched by id across the whole program). */
static inline gboolean same_period_op(const MmPlanProgram *pr, uint32_t a, uint32_t b, uint32_t dd, uint32_t dx)
{
  if (pr->dur[a] != pr->dur[b]) return FALSE; /* most candidates of the search differ here */
  const MmEngineOp *x = &pr->ops[a], *y = &pr->ops[b];
  const uint64_t coll_step = x->coll == a ? (uint64_t)(b - a) << 32 : 0; /* its own index moves with it */
  uint32_t tx, ty, ix, iy;
  memcpy(&tx, &x->n_xfer, 4);
  memcpy(&ty, &y->n_xfer, 4);
  memcpy(&ix, &pr->info[a], 4);
  memcpy(&iy, &pr->info[b], 4);
  if (word_at(y, 0) != word_at(x, 0) + ((uint64_t)dd << 32) ||
      word_at(y, 8) != word_at(x, 8) + coll_step || word_at(y, 16) != word_at(x, 16) ||
      word_at(y, 24) != word_at(x, 24) + ((uint64_t)dx << 32) || tx != ty || ix != iy || pr->info[a].fused ||
      pr->info[b].fused)
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

/* The first of @pr's replays that starts at op @i or after. */
static guint replay_from(const MmPlanProgram *pr, uint32_t i)
{
  guint lo = 0, hi = pr->n_replays;
  while (lo < hi) {
    const guint mid = (lo + hi) / 2;
    if (pr->replays[mid].start < i) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Whether replays @a and @b of @pr are the same ops @b->start - @a->start apart (same_period_op of
 * each pair; their dependencies and transfers @dd and @dx further on): one record and phase, and
 * inputs that far apart (MmPlanReplay). */
static inline gboolean same_replay(const MmPlanProgram *pr, const MmPlanReplay *a, const MmPlanReplay *b, uint32_t dd,
                                   uint32_t dx)
{
  const uint32_t P = b->start - a->start;
  if (a->rec != b->rec || a->phase != b->phase || a->in_n != b->in_n ||
      pr->ops[b->start].dep_first - pr->ops[a->start].dep_first != dd ||
      pr->ops[b->start].xfer_first - pr->ops[a->start].xfer_first != dx)
    return FALSE;
  for (uint32_t k = 0; k < a->in_n; k++)
    if (pr->replay_in[b->in_first + k] - pr->replay_in[a->in_first + k] != P) return FALSE;
  return TRUE;
}

/* The first op from @i on that is not the same op as the one @P after it (or has none): ops
 * [@i, returned + @P) repeat with period @P. Replays that are the same replay @P on are passed
 * whole: most of a run's ops are. */
static uint32_t period_end(const MmPlanProgram *pr, uint32_t i, uint32_t P, uint32_t dd, uint32_t dx)
{
  const MmPlanReplay *rp = pr->replays;
  const guint nr = pr->n_replays;
  guint ra = replay_from(pr, i), rb = ra;
  uint32_t e = i;
  while (e + P < pr->n_ops) {
    while (ra < nr && rp[ra].start < e) ra++;
    if (ra < nr && rp[ra].start == e) {
      while (rb < nr && rp[rb].start < e + P) rb++;
      if (rb < nr && rp[rb].start == e + P && same_replay(pr, &rp[ra], &rp[rb], dd, dx)) {
        e += rp[ra].n_ops;
        continue;
      }
    }
    if (!same_period_op(pr, e, e + P, dd, dx)) break;
    e++;
  }
  return e;
}

/* The periodic run starting at op @i: ops [i, i + *n x *len) where each op is the same op as the
 * one *len before it, the period the distance to one of the next few ops like op @i (up to
 * CUT_MAX_PERIOD ahead) that repeats at least @min times. FALSE when none does. */
static gboolean find_run(const MmPlanProgram *pr, uint32_t i, uint32_t min, uint32_t *len, uint32_t *n)
{
  const uint32_t end = MIN(pr->n_ops, i + CUT_MAX_PERIOD + 1);
  const MmEngineOp *o = pr->ops;
  guint tries = 0;
  const MmTime t = pr->dur[i];
  for (uint32_t j = i + 1; j < end && tries < 4; j++) {
    if (pr->dur[j] != t) continue; /* most candidates: not the same op */
    const uint32_t dd = o[j].dep_first - o[i].dep_first, dx = o[j].xfer_first - o[i].xfer_first;
    if (!same_period_op(pr, i, j, dd, dx)) continue;
    tries++;
    const uint32_t P = j - i;
    const uint32_t e = period_end(pr, i, P, dd, dx);
    const uint32_t periods = (e - i) / P + 1; /* ops [i, e + P) repeat: whole periods from i */
    if (periods >= min) {
      *len = P;
      *n = periods;
      return TRUE;
    }
  }
  return FALSE;
}

static inline uint32_t run_end(const MmPlanRun *f)
{
  return f->first + f->periods * f->len;
}

/* Adds to the runs' needs what ops [@a, @b) depend on: @own (G_MAXUINT: none) the run holding them,
 * the first @n_before of @runs (sorted, disjoint) the runs before them. */
static void note_deps(const MmPlanProgram *pr, MmPlanRun *runs, guint own, guint n_before, uint32_t a, uint32_t b)
{
  const uint32_t own_first = own == G_MAXUINT ? UINT32_MAX : runs[own].first;
  const uint32_t before_end = n_before ? run_end(&runs[n_before - 1]) : 0;
  for (uint32_t i = a; i < b; i++) {
    const uint32_t *dep = pr->deps + pr->ops[i].dep_first;
    for (uint32_t k = 0; k < pr->ops[i].n_deps; k++) {
      const uint32_t d = dep[k];
      if (d >= own_first) {
        runs[own].need = MAX(runs[own].need, i - d);
        continue;
      }
      if (d >= before_end) continue; /* between the runs */
      guint lo = 0, hi = n_before;    /* the first run ending after d */
      while (lo < hi) {
        const guint mid = (lo + hi) / 2;
        if (run_end(&runs[mid]) <= d) lo = mid + 1;
        else hi = mid;
      }
      MmPlanRun *f = &runs[lo];
      if (d >= f->first) f->need = MAX(f->need, MIN(d - f->first + 1, run_end(f) - d));
    }
  }
}

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
    i = run_end(&f);
  }
  if (runs->len == 0) {
    g_array_free(runs, TRUE);
    return NULL;
  }
  /* what each run's cut needs kept at its head and tail: its own ops' reach back, and how far from
   * its nearer end lies an op of it that a later op outside it depends on. Each period of a run
   * depends on what the one before it does, one period later: its own ops' longest reach is the
   * last period's, and only its first periods, up to the last period's earliest dependency less
   * a period each, can reach before it, into an earlier run (those in between are skipped). */
  MmPlanRun *rs = (MmPlanRun *)(void *)runs->data;
  const guint nr = runs->len;
  for (guint r = 0; r < nr; r++) {
    MmPlanRun *f = &rs[r];
    const uint32_t last = f->first + (f->periods - 1) * f->len;
    uint32_t earliest = last;
    for (uint32_t i = last; i < last + f->len; i++)
      for (uint32_t k = 0; k < pr->ops[i].n_deps; k++) earliest = MIN(earliest, pr->deps[pr->ops[i].dep_first + k]);
    /* period k holds a dependency before the run when k x len < last - earliest */
    const uint64_t early = ((uint64_t)(last - earliest) + f->len - 1) / f->len;
    const uint32_t skip = (uint32_t)MIN((uint64_t)last, f->first + early * f->len);
    note_deps(pr, rs, G_MAXUINT, r, r ? run_end(&rs[r - 1]) : f->first, f->first); /* between runs */
    note_deps(pr, rs, r, r, f->first, skip);
    note_deps(pr, rs, r, r, last, run_end(f));
  }
  note_deps(pr, rs, G_MAXUINT, nr, run_end(&rs[nr - 1]), pr->n_ops);
  return runs;
}

MmPlan *mm_plan_cut(const MmPlan *p, const MmPlanRuns *found, uint32_t keep)
{
  g_return_val_if_fail(p && found && keep >= MM_PLAN_CUT_KEEP, NULL);
  const MmPlanProgram *pr = &p->programs[0];
  const uint32_t n = pr->n_ops;
  /* the runs cut: each of at least 2 x keep periods whose kept head and tail hold what it needs
   * (a kept op after the cut then depends on the kept op as far back as the whole program's did,
   * and no op after it depends on one left out); [lo, hi) left out of each, kept segments between */
  g_autofree uint32_t *lo = g_new(uint32_t, found->len + 1), *hi = g_new(uint32_t, found->len + 1);
  g_autofree guint *which = g_new(guint, found->len + 1);
  guint kept = 0;
  for (guint r = 0; r < found->len; r++) {
    const MmPlanRun *x = &g_array_index(found, MmPlanRun, r);
    const uint32_t head = keep / 2 * x->len;
    if (x->periods < 2 * keep || head < x->need) continue;
    lo[kept] = x->first + head;
    hi[kept] = run_end(x) - head;
    which[kept++] = r;
  }
  if (kept == 0) return NULL;
  lo[kept] = hi[kept] = n; /* the last kept segment ends at the program's end */

  /* kept segment s: ops [s ? hi[s - 1] : 0, lo[s]), shifted down by the ops left out before it */
  uint32_t m = 0, nd = 0, nx = 0;
  for (guint s = 0; s <= kept; s++)
    for (uint32_t i = s ? hi[s - 1] : 0; i < lo[s]; i++, m++) nd += pr->ops[i].n_deps, nx += pr->ops[i].n_xfer;
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
  q->replays = NULL; /* nor the search for runs */
  q->n_replays = 0;
  q->replay_in = NULL;
  q->n_ops = m;
  nd = nx = 0;
  uint32_t shift = 0; /* ops left out before the segment */
  for (guint s = 0; s <= kept; shift += hi[s] - lo[s], s++) {
    const uint32_t a = s ? hi[s - 1] : 0, b = lo[s], ja = a - shift;
    memcpy(&q->ops[ja], &pr->ops[a], sizeof *q->ops * (b - a));
    memcpy(&q->info[ja], &pr->info[a], sizeof *q->info * (b - a));
    memcpy(&q->dur[ja], &pr->dur[a], sizeof *q->dur * (b - a));
    for (uint32_t i = a, j = ja; i < b; i++, j++) {
      const MmEngineOp *o = &pr->ops[i];
      MmEngineOp *y = &q->ops[j];
      y->dep_first = nd;
      y->xfer_first = nx;
      if (o->coll == i) y->coll = j; /* a collective of this program: its own index */
      const uint32_t *dep = pr->deps + o->dep_first;
      for (uint32_t k = 0; k < o->n_deps; k++) {
        /* a dependency in an earlier segment: shifted by what was left out before that one; in a cut
         * (the run's own ops only, within its kept head): the op as far back in the periods kept */
        const uint32_t d = dep[k];
        uint32_t t = s, sh = shift;
        while (t > 0 && d < hi[t - 1]) t--, sh -= hi[t] - lo[t];
        q->deps[nd++] = d >= (t ? hi[t - 1] : 0) && d < lo[t] ? d - sh : j - (i - d);
      }
      for (uint32_t k = 0; k < o->n_xfer; k++, nx++) { /* a few each: a loop, not a call */
        q->xfer_link[nx] = pr->xfer_link[o->xfer_first + k];
        q->xfer_bytes[nx] = pr->xfer_bytes[o->xfer_first + k];
      }
    }
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
  shift = 0;
  for (guint r = 0; r < kept; shift += hi[r] - lo[r], r++) {
    const MmPlanRun *x = &g_array_index(found, MmPlanRun, which[r]);
    c->runs[r] = (MmPlanRun){.first = x->first - shift, .len = x->len, .periods = keep, .cut = x->periods - keep};
  }
  return c;
}

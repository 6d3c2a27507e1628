/* runner: a sweep's points on a GLib thread pool, streamed to DIR/points.csv in point order. */
#define _POSIX_C_SOURCE 200809L /* fseeko, ftello, truncate */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <glib/gstdio.h>
#include <unistd.h>

#include "config/json.h"
#include "sweep.h"

#define WINDOW 1024 /* points under way or waiting to be written, at most */
#define WRITE_BATCH 64 /* the writer waits for this many points at once (< WINDOW) */

/* One point's row (NULL: not a valid point). */
typedef struct {
  char *row;
  gboolean done;
  int status; /* 0 ok, 1 oom (pruned), 2 rejected by the scenario, 3 failed (internal) */
  double samples_per_s;
  char *why;
  uint64_t rule; /* rejected: the rule it broke (mm_json_rule) */
} Slot;

/* What evaluating a point needs: the systems, whether out-of-memory points are simulated, and
 * each system's label for the system column. */
typedef struct {
  const MmSweepSystem *systems;
  guint n_systems;
  gboolean include_oom;
  char **labels; /* per system: its system column */
  MmGraphCache *graphs; /* the points' shared graphs */
  MmEngineMemo *memo;   /* engine runs kept for replay (NULL: none) */
  struct Dedup *dedup;  /* outcomes of recent points by key (NULL: every point evaluated) */
} Ctx;

/* Points evaluated before the sweep (the estimate's timed probes): their slots, kept for the run. */
struct MmSweepProbes {
  uint64_t index[MM_SWEEP_PROBES];
  Slot slot[MM_SWEEP_PROBES];
  double seconds[MM_SWEEP_PROBES];
  gboolean taken[MM_SWEEP_PROBES]; /* by the run */
  guint n;
  Ctx ctx;
};

/* A run: its workers take the points of the window in order (next_claim) and the writer writes
 * them in order (next_write); a worker wakes the writer only when it finished the point the writer
 * waits for, and the writer a worker only when the window was full (a thread pool task and a
 * wake-up per point cost about a tenth of a sweep whose points are mostly rejected or pruned). */
typedef struct {
  const MmSweepOptions *o;
  Ctx ctx;
  GMutex lock;
  GCond ready;         /* the slot the writer waits for is done */
  GCond room;          /* the window moved on, or the run is over */
  uint64_t n;          /* the sweep's points */
  uint64_t next_claim; /* the next point of this shard a worker takes */
  uint64_t next_write; /* the next point the writer writes: the window's start */
  uint64_t waiting;    /* the point the writer waits for (UINT64_MAX: none) */
  gboolean over;       /* the writer is done: take no more points */
  Slot slots[WINDOW];
} Run;

/* The header of points.csv: inputs, then results; units in the names. */
static char *csv_header(const MmSweepOptions *o)
{
  const MmSweepSpace *sp = o->systems[0].space; /* every system's has the model's kinds */
  GString *h = g_string_new("point");
  if (o->n_systems > 1) g_string_append(h, ",system");
  g_string_append(h, ",nodes,devices,pipeline_degree,pipeline_schedule,virtual_stages,micro_batch,micro_steps,recompute,"
                     "zero");
  for (guint k = 0; k < sp->n_kinds; k++) g_string_append_printf(h, ",%s_strategy", mm_block_kind_names[sp->kinds[k].kind]);
  g_string_append(h, ",status,fits,iteration_time_s,samples_per_s,tokens_per_s,mfu,compute_s,comm_s,exposed_comm_s,"
                     "memory_per_device_bytes,memory_capacity_bytes,a100_gpu_hours_per_iteration,time_to_first_token_s,"
                     "time_per_output_token_s\n");
  return g_string_free(h, FALSE);
}

/* A number as the CSV writes it (the same bytes on every machine and run). */
static void num(GString *g, double v)
{
  g_string_append_printf(g, ",%.9g", v);
}

/* Peak dense bf16 FLOP/s of an A100: the unit of normalized GPU-hours (NVIDIA A100 datasheet). */
#define A100_PEAK_FLOPS 312e12

/* What a point's row says apart from its index and its zero column (the only parts that tell
 * apart points of one key, mm_point_key): the columns before the zero column (@mid, from
 * nodes on) and after it (@tail, with the line's end); or, rejected, why. */
typedef struct {
  int status; /* Slot.status */
  double samples_per_s;
  char *mid, *tail, *why;
  uint64_t rule; /* Slot.rule */
} Outcome;

static void outcome_clear(Outcome *x)
{
  g_free(x->mid);
  g_free(x->tail);
  g_free(x->why);
}

/* Evaluates point @sp of system @k_sys (point @i of the sweep, for messages). */
static void evaluate(const Ctx *o, uint64_t i, guint k_sys, const MmSweepPoint *sp, Outcome *x)
{
  const MmSweepSystem *sy = &o->systems[k_sys];
  g_autoptr(GError) error = NULL;
  *x = (Outcome){.status = 2};
  /* a rejected point says why only when asked (invalid_reason): most of a space is rejected, and
   * the messages cost more than the checks; it notes which rule it broke */
  mm_json_rule_clear();
  g_autoptr(MmSimulation) sim = mm_simulation_prepare_cached(sy->inputs, &sp->point, o->graphs, NULL);
  if (!sim) {
    x->rule = mm_json_rule();
    return;
  }
  sim->memo = o->memo;
  const MmScenario *s = sim->scenario;
  const gboolean fits = sim->memory->fits;
  const gboolean simulate = fits || o->include_oom;
  if (simulate && !mm_simulation_run(sim, FALSE, &error)) {
    x->why = g_strdup_printf("point %" G_GUINT64_FORMAT ": %s", i, error->message);
    x->status = 3; /* an internal failure, not a rejected input */
    return;
  }
  x->status = simulate ? 0 : 1;
  x->mid = g_strdup_printf(",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%s,%" G_GINT64_FORMAT
                           ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%s",
                           s->hw->nodes, s->devices, s->pp, mm_pipe_schedule_names[s->cfg->pipeline.schedule],
                           s->vstages, s->micro_batch, s->micro_steps, mm_recompute_names[s->cfg->recompute]);
  GString *g = g_string_new("");
  for (guint k = 0; k < sy->space->n_kinds; k++) {
    g_autofree char *txt = mm_sweep_entry_text(&sp->entries[k]);
    g_string_append_printf(g, ",%s", txt);
  }
  g_string_append_printf(g, ",%s,%d", simulate ? (fits ? "ok" : "oom_simulated") : "oom", fits);
  if (simulate) {
    const MmRunMetrics *r = &sim->metrics;
    const gboolean serving = sim->decode_plan != NULL;
    const double t = serving ? sim->serving.latency_s : r->iteration_time_s;
    const double sps = serving ? sim->serving.tokens_per_s / MAX(1.0, (double)s->cfg->serving.output_tokens)
                               : r->samples_per_s;
    num(g, t);
    num(g, sps);
    num(g, serving ? sim->serving.tokens_per_s : r->tokens_per_s);
    num(g, r->mfu);
    num(g, r->compute_s);
    num(g, r->comm_s);
    num(g, r->exposed_comm_s);
    x->samples_per_s = fits ? sps : 0;
    num(g, sim->memory->per_device_bytes);
    num(g, sim->memory->capacity_bytes);
    num(g, (double)s->devices * t / 3600.0 * s->hw->device.peak_flops[MM_DTYPE_BF16] / A100_PEAK_FLOPS);
    if (serving) {
      num(g, sim->serving.ttft_s);
      num(g, sim->serving.tpot_s);
    } else {
      g_string_append(g, ",,");
    }
  } else {
    g_string_append(g, ",,,,,,,");
    num(g, sim->memory->per_device_bytes);
    num(g, sim->memory->capacity_bytes);
    g_string_append(g, ",,,");
  }
  g_string_append_c(g, '\n');
  x->tail = g_string_free(g, FALSE);
}

/* Outcomes of recent points by their key (mm_sweep_point_key): a sweep meets one point under several
 * indices (a space's ZeRO stages, where a strategy has no ddp level: LLaMA-2-70B's bench sweep
 * simulated 166 of its 318 points twice or three times over), whose rows differ in their index and
 * zero column only. Bounded: the oldest of DEDUP_MAX keys go first (the repeats of a point lie a
 * few strategy hierarchies apart). Shared by the workers. */
#define DEDUP_MAX 2048

typedef struct Dedup {
  GMutex lock;
  GHashTable *seen; /* GBytes key -> Outcome */
  GQueue order;     /* keys, oldest first */
  uint64_t hits;    /* points answered */
} Dedup;

static void outcome_free(gpointer p)
{
  outcome_clear(p);
  g_free(p);
}

/* A key's hash, eight bytes at a time (g_bytes_hash takes them one by one: a third of the dedup's cost). */
static guint key_hash(gconstpointer k)
{
  gsize n = 0;
  const guint8 *p = g_bytes_get_data((GBytes *)k, &n);
  uint64_t h = (uint64_t)n * UINT64_C(0x9E3779B97F4A7C15), w;
  for (; n >= 8; p += 8, n -= 8) {
    memcpy(&w, p, 8);
    h = (h ^ w) * UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 32;
  }
  w = 0;
  memcpy(&w, p, n);
  h = (h ^ w) * UINT64_C(0xc4ceb9fe1a85ec53);
  return (guint)(h ^ h >> 29);
}

static Dedup *dedup_new(void)
{
  Dedup *d = g_new0(Dedup, 1);
  g_mutex_init(&d->lock);
  d->seen = g_hash_table_new_full(key_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref, outcome_free);
  g_queue_init(&d->order);
  return d;
}

static void dedup_free(Dedup *d)
{
  if (!d) return;
  g_hash_table_destroy(d->seen); /* the queue's keys are the table's */
  g_queue_clear(&d->order);
  g_mutex_clear(&d->lock);
  g_free(d);
}

/* A copy of what @d knows of @key into @x (FALSE: nothing). */
static gboolean dedup_find(Dedup *d, GBytes *key, Outcome *x)
{
  g_mutex_lock(&d->lock);
  const Outcome *k = g_hash_table_lookup(d->seen, key);
  if (k) *x = (Outcome){k->status, k->samples_per_s, g_strdup(k->mid), g_strdup(k->tail), g_strdup(k->why), k->rule};
  d->hits += k != NULL;
  g_mutex_unlock(&d->lock);
  return k != NULL;
}

/* Keeps a copy of @x under @key (internal failures are not kept: their message names the point). */
static void dedup_keep(Dedup *d, GBytes *key, const Outcome *x)
{
  if (x->status == 3) return;
  Outcome *k = g_new(Outcome, 1);
  *k = (Outcome){x->status, x->samples_per_s, g_strdup(x->mid), g_strdup(x->tail), g_strdup(x->why), x->rule};
  g_mutex_lock(&d->lock);
  if (g_hash_table_contains(d->seen, key)) { /* a worker beside this one evaluated it too: the same outcome */
    outcome_free(k);
  } else {
    GBytes *owned = g_bytes_ref(key);
    g_hash_table_insert(d->seen, owned, k);
    g_queue_push_tail(&d->order, owned);
    if (d->order.length > DEDUP_MAX) g_hash_table_remove(d->seen, g_queue_pop_head(&d->order));
  }
  g_mutex_unlock(&d->lock);
}

/* Point @i of the sweep into @sp; returns its system. */
static guint point_at(const Ctx *o, uint64_t i, MmSweepPoint *sp)
{
  uint64_t local = 0;
  const guint k_sys = mm_sweep_locate(o->systems, o->n_systems, i, &local);
  mm_sweep_space_point(o->systems[k_sys].space, o->systems[k_sys].inputs->model, local, sp);
  return k_sys;
}

/* Why point @i was rejected (MmSweepRejection.why). */
static char *invalid_reason(const Ctx *o, uint64_t i)
{
  MmSweepPoint sp;
  const MmSweepSystem *sy = &o->systems[point_at(o, i, &sp)];
  g_autoptr(GError) error = NULL;
  g_autoptr(MmSimulation) sim = mm_simulation_prepare_cached(sy->inputs, &sp.point, o->graphs, &error);
  return sim ? NULL : g_strdup_printf("point %" G_GUINT64_FORMAT ": %s", i, error->message);
}

/* Evaluates point @i into @out (done): its row (NULL: not a valid point), status and rate, why it
 * failed, which rule it broke. */
static void eval_slot(const Ctx *o, uint64_t i, Slot *out)
{
  MmSweepPoint sp;
  const guint k_sys = point_at(o, i, &sp);
  g_autoptr(GBytes) key = NULL;
  Outcome x;
  gboolean known = FALSE;
  if (o->dedup) {
    key = mm_sweep_point_key(&sp, k_sys);
    known = dedup_find(o->dedup, key, &x);
  }
  if (!known) {
    evaluate(o, i, k_sys, &sp, &x);
    if (o->dedup) dedup_keep(o->dedup, key, &x);
  }
  *out = (Slot){.done = TRUE, .status = x.status, .samples_per_s = x.samples_per_s, .why = g_steal_pointer(&x.why),
                .rule = x.rule};
  if (x.status <= 1)
    out->row = g_strdup_printf("%" G_GUINT64_FORMAT "%s%s%s,%d%s", i, o->n_systems > 1 ? "," : "",
                               o->n_systems > 1 ? o->labels[k_sys] : "", x.mid, sp.zero, x.tail);
  outcome_clear(&x);
}

/* The slot a probe computed for point @i, moved out (FALSE: none, or taken already). */
static gboolean take_probe(MmSweepProbes *pr, uint64_t i, Slot *out)
{
  for (guint k = 0; pr && k < pr->n; k++)
    if (pr->index[k] == i && !pr->taken[k]) {
      *out = pr->slot[k];
      pr->slot[k].row = pr->slot[k].why = NULL; /* the run owns them now */
      pr->taken[k] = TRUE;
      return TRUE;
    }
  return FALSE;
}

/* A worker: takes the next point while the window has room (a probe's row when the estimate
 * evaluated it), evaluates it unlocked, files its slot. Stops at the sweep's end, on SIGINT (the
 * points under way are finished and written) and when the writer is done. */
static void work(gpointer data, gpointer user)
{
  (void)data;
  Run *r = user;
  const MmSweepOptions *o = r->o;
  g_mutex_lock(&r->lock);
  for (;;) {
    while (!r->over && !*o->stop && r->next_claim < r->n && (r->next_claim - r->next_write) / o->shards >= WINDOW)
      g_cond_wait(&r->room, &r->lock);
    if (r->over || *o->stop || r->next_claim >= r->n) break;
    const uint64_t i = r->next_claim;
    r->next_claim += o->shards;
    Slot got;
    if (!take_probe(o->probes, i, &got)) { /* evaluated by the estimate: no need to again */
      g_mutex_unlock(&r->lock);
      eval_slot(&r->ctx, i, &got);
      g_mutex_lock(&r->lock);
    }
    r->slots[(i / o->shards) % WINDOW] = got;
    /* stopped, the writer may wait for a point ahead that nobody takes now: it looks again */
    if (r->waiting == i || *o->stop) g_cond_signal(&r->ready);
  }
  if (*o->stop) g_cond_signal(&r->ready); /* likewise (the flag may be set on another thread than the writer's) */
  g_mutex_unlock(&r->lock);
}

/* The context for evaluating points of @sys: their labels, a graph cache of its own, with
 * @memo_bytes > 0 a memo of engine runs of that budget, and with @dedup the outcomes of recent
 * points by key. */
static Ctx ctx_new(const MmSweepSystem *sys, guint n, gboolean include_oom, gsize memo_bytes, gboolean dedup)
{
  char **labels = g_new0(char *, n + 1);
  for (guint k = 0; k < n; k++) labels[k] = mm_sweep_system_label(sys[k].inputs->hardware);
  return (Ctx){sys, n, include_oom, labels, mm_graph_cache_new(), memo_bytes ? mm_engine_memo_new(memo_bytes) : NULL,
               dedup ? dedup_new() : NULL};
}

static void ctx_clear(Ctx *c)
{
  g_strfreev(c->labels);
  mm_graph_cache_free(c->graphs);
  mm_engine_memo_free(c->memo);
  dedup_free(c->dedup);
  *c = (Ctx){0};
}

static void probe_work(gpointer data, gpointer user)
{
  MmSweepProbes *pr = user;
  const guint k = GPOINTER_TO_UINT(data) - 1;
  const gint64 t0 = g_get_monotonic_time();
  eval_slot(&pr->ctx, pr->index[k], &pr->slot[k]);
  pr->seconds[k] = (double)(g_get_monotonic_time() - t0) / 1e6;
}

/* mm_sweep_sample's work: the points [from, to) of its list. */
typedef struct {
  const MmSweepSystem *sys;
  guint n_systems;
  gboolean include_oom;
  const uint64_t *points;
  double *seconds;
  gboolean *fits, *repeat;
  MmGraphCache *graphs;
} Sample;

static void sample_work(gpointer data, gpointer user)
{
  const Sample *sa = user;
  const guint from = GPOINTER_TO_UINT(data) >> 16, to = GPOINTER_TO_UINT(data) & 0xffff;
  for (guint k = from; k < to; k++) {
    uint64_t local = 0;
    const MmSweepSystem *sy = &sa->sys[mm_sweep_locate(sa->sys, sa->n_systems, sa->points[k], &local)];
    sa->seconds[k] = 0;
    sa->fits[k] = FALSE;
    if ((sa->repeat[k] = mm_sweep_space_repeat(sy->space, sy->inputs->model, local))) continue;
    MmSweepPoint p;
    mm_sweep_space_point(sy->space, sy->inputs->model, local, &p);
    const gint64 t0 = g_get_monotonic_time();
    g_autoptr(MmSimulation) s = mm_simulation_prepare_cached(sy->inputs, &p.point, sa->graphs, NULL);
    sa->seconds[k] = (double)(g_get_monotonic_time() - t0) / 1e6;
    sa->fits[k] = s && (s->memory->fits || sa->include_oom);
  }
}

void mm_sweep_sample(const MmSweepSystem *sys, guint n_systems, gboolean include_oom, const uint64_t *points, guint n,
                     guint jobs, double *seconds, gboolean *fits, gboolean *repeat)
{
  g_return_if_fail(n <= 0xffff);
  if (n == 0) return;
  g_autoptr(MmGraphCache) graphs = mm_graph_cache_new();
  const Sample sa = {sys, n_systems, include_oom, points, seconds, fits, repeat, graphs};
  jobs = MAX(1u, MIN(jobs, n));
  GThreadPool *pool = g_thread_pool_new(sample_work, (gpointer)&sa, (gint)jobs, TRUE, NULL);
  for (guint j = 0; j < jobs; j++) /* a contiguous share each */
    g_thread_pool_push(pool, GUINT_TO_POINTER((n * j / jobs) << 16 | n * (j + 1) / jobs), NULL);
  g_thread_pool_free(pool, FALSE, TRUE);
}

MmSweepProbes *mm_sweep_probe(const MmSweepSystem *sys, guint n_systems, gboolean include_oom, const uint64_t *points,
                              guint n, guint jobs)
{
  MmSweepProbes *pr = g_new0(MmSweepProbes, 1);
  pr->ctx = ctx_new(sys, n_systems, include_oom, 0, FALSE); /* timed: each simulated */
  pr->n = MIN(n, (guint)MM_SWEEP_PROBES);
  memcpy(pr->index, points, sizeof(uint64_t) * pr->n);
  GThreadPool *pool = g_thread_pool_new(probe_work, pr, (gint)MAX(1u, MIN(jobs, pr->n)), TRUE, NULL);
  for (guint k = 0; k < pr->n; k++) g_thread_pool_push(pool, GUINT_TO_POINTER(k + 1), NULL);
  g_thread_pool_free(pool, FALSE, TRUE);
  return pr;
}

double mm_sweep_probe_seconds(const MmSweepProbes *pr, guint *simulated)
{
  double t = 0;
  guint n = 0;
  for (guint k = 0; pr && k < pr->n; k++)
    if (pr->slot[k].status == 0) t += pr->seconds[k], n++;
  *simulated = n;
  return t;
}

guint mm_sweep_probes_left(const MmSweepProbes *pr)
{
  guint n = 0;
  for (guint k = 0; pr && k < pr->n; k++) n += !pr->taken[k];
  return n;
}

void mm_sweep_probes_free(MmSweepProbes *pr)
{
  if (!pr) return;
  for (guint k = 0; k < pr->n; k++) {
    g_free(pr->slot[k].row);
    g_free(pr->slot[k].why);
  }
  ctx_clear(&pr->ctx);
  g_free(pr);
}

/* The first index of this shard at or after @i. */
static uint64_t shard_index(const MmSweepOptions *o, uint64_t i)
{
  uint64_t r = i % o->shards;
  return r <= o->shard ? i - r + o->shard : i - r + o->shards + o->shard;
}

/* The offset just after the last '\n' in [@lo, @hi) of @f (@lo when none): read backwards in
 * chunks, so that a resume reads the end of points.csv, never all of it. */
static gboolean last_newline(FILE *f, off_t lo, off_t hi, off_t *out)
{
  char buf[65536];
  while (hi > lo) {
    const off_t from = MAX(lo, hi - (off_t)sizeof buf);
    if (fseeko(f, from, SEEK_SET) != 0 || fread(buf, 1, (size_t)(hi - from), f) != (size_t)(hi - from)) return FALSE;
    for (off_t i = hi - from; i-- > 0;)
      if (buf[i] == '\n') {
        *out = from + i + 1;
        return TRUE;
      }
    hi = from;
  }
  *out = lo;
  return TRUE;
}

/* Whether @row (without its end) is one of this shard's rows: a point index below @n on the shard,
 * then as many fields as @header has. */
static gboolean shard_row(const MmSweepOptions *o, uint64_t n, const char *header, const char *row, uint64_t *index)
{
  guint commas = 0, want = 0;
  for (const char *p = row; *p; p++) commas += *p == ',';
  for (const char *p = header; *p; p++) want += *p == ',';
  char *end = NULL;
  *index = g_ascii_isdigit(*row) ? g_ascii_strtoull(row, &end, 10) : G_MAXUINT64;
  return end && *end == ',' && *index < n && *index % o->shards == o->shard && commas == want;
}

/* Resume: keeps the complete rows of an existing points.csv (whose header must match) and
 * returns the index after its last row, which must be one of this sweep's (of @n points, on
 * this shard): never rows appended after another file's. Reads the header and the last rows
 * only. */
static gboolean resume_from(const MmSweepOptions *o, uint64_t n, const char *csv, const char *header, uint64_t *next,
                            gboolean *found, GError **error)
{
  *found = FALSE;
  if (!g_file_test(csv, G_FILE_TEST_EXISTS)) return TRUE;
  FILE *f = fopen(csv, "rb");
  if (!f) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", csv, g_strerror(errno));
    return FALSE;
  }
  const size_t hl = strlen(header);
  g_autofree char *head = g_malloc(hl + 1);
  off_t len = 0, end = 0, start = 0;
  gboolean ok = fseeko(f, 0, SEEK_END) == 0 && (len = ftello(f)) >= 0;
  const size_t got = ok && fseeko(f, 0, SEEK_SET) == 0 ? fread(head, 1, (size_t)MIN(len, (off_t)hl), f) : 0;
  if (ok && len < (off_t)hl && got == (size_t)len && memcmp(head, header, got) == 0) {
    fclose(f); /* killed before its header was whole (nothing flushed yet): not started, written anew */
    return TRUE;
  }
  const gboolean same = ok && len >= (off_t)hl && got == hl && memcmp(head, header, hl) == 0;
  if (ok && !same) {
    fclose(f);
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                "%s: its header is not this sweep's; --resume continues the same sweep only", csv);
    return FALSE;
  }
  /* drop a row cut off by a kill; the last complete row's index */
  ok = ok && last_newline(f, (off_t)hl, len, &end) && (end == (off_t)hl || last_newline(f, (off_t)hl, end - 1, &start));
  /* the last row (a row of a megabyte is none of a sweep's: its system names are short) */
  const size_t row_max = 1 << 20, last_len = end > (off_t)hl ? MIN(row_max, (size_t)(end - start)) : 0;
  g_autofree char *last = g_malloc0(last_len + 1);
  if (ok && last_len) ok = fseeko(f, start, SEEK_SET) == 0 && fread(last, 1, last_len, f) == last_len;
  fclose(f);
  if (!ok) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_IO, "%s: reading failed", csv);
    return FALSE;
  }
  uint64_t index = 0;
  if (last_len) {
    if (last[last_len - 1] == '\n') last[last_len - 1] = '\0';
    if (last_len == row_max || !shard_row(o, n, header, last, &index)) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                  "%s: its last row is not a point of this sweep (a point index below %" G_GUINT64_FORMAT
                  "%s, then the header's columns); --resume continues the same sweep only",
                  csv, n, o->shards > 1 ? " on this shard" : "");
      return FALSE;
    }
  }
  if (end < len && truncate(csv, end) != 0) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", csv, g_strerror(errno));
    return FALSE;
  }
  *found = TRUE;
  if (last_len) *next = index + 1;
  return TRUE;
}

/* A shard's DIR/shard.json: how many points the sweep has, whether this shard evaluated all of its
 * own, and how many of those this run left out with an internal error (MM_SWEEP_SHARD_FILE). */
static gboolean write_shard_state(const MmSweepOptions *o, uint64_t n, gboolean complete, uint64_t failed,
                                  GError **error)
{
  g_autofree char *path = g_build_filename(o->dir, MM_SWEEP_SHARD_FILE, NULL);
  g_autofree char *text = g_strdup_printf("{\"shard\": %u, \"shards\": %u, \"points\": %" G_GUINT64_FORMAT
                                          ", \"complete\": %s, \"failed\": %" G_GUINT64_FORMAT "}\n", o->shard,
                                          o->shards, n, complete ? "true" : "false", failed);
  return g_file_set_contents(path, text, -1, error);
}

/* Counts rejected point @i under @rule (0, and rules beyond MM_SWEEP_REASONS: the others). */
static void tally(MmSweepStats *st, uint64_t rule, uint64_t i)
{
  guint k = 0, rules = 0;
  for (; k < st->n_rejected && st->rejected[k].rule != rule; k++) rules += st->rejected[k].rule != 0;
  if (k == st->n_rejected && rule != 0 && rules == MM_SWEEP_REASONS) {
    rule = 0;
    for (k = 0; k < st->n_rejected && st->rejected[k].rule != 0; k++) {}
  }
  if (k == st->n_rejected) st->rejected[st->n_rejected++] = (MmSweepRejection){.rule = rule, .example = i};
  st->rejected[k].points++;
}

/* Most points first, then the earlier example; the others last. */
static int by_points(const void *pa, const void *pb)
{
  const MmSweepRejection *a = pa, *b = pb;
  if ((a->rule == 0) != (b->rule == 0)) return a->rule == 0 ? 1 : -1;
  if (a->points != b->points) return a->points > b->points ? -1 : 1;
  return a->example < b->example ? -1 : a->example > b->example;
}

void mm_sweep_stats_clear(MmSweepStats *st)
{
  for (guint k = 0; k < st->n_rejected; k++) g_free(st->rejected[k].why);
  g_free(st->first_failure);
  *st = (MmSweepStats){0};
}

gboolean mm_sweep_run(const MmSweepOptions *o, MmSweepStats *st, GError **error)
{
  memset(st, 0, sizeof *st);
  g_autofree char *header = csv_header(o);
  g_autofree char *csv = g_build_filename(o->dir, "points.csv", NULL);
  g_autofree char *sig = g_build_filename(o->dir, "sweep.json", NULL);
  const uint64_t n = o->systems[o->n_systems - 1].first + o->systems[o->n_systems - 1].space->n_points;
  if (g_mkdir_with_parents(o->dir, 0755) != 0) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "--out %s: %s", o->dir, g_strerror(errno));
    return FALSE;
  }
  uint64_t first = 0;
  gboolean existed = FALSE;
  if (o->resume) {
    g_autofree char *old = NULL;
    if (g_file_get_contents(sig, &old, NULL, NULL) && g_strcmp0(old, o->signature) != 0) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                  "%s: a sweep of other inputs, space or options; --resume continues the same sweep only", sig);
      return FALSE;
    }
    if (!resume_from(o, n, csv, header, &first, &existed, error)) return FALSE;
  } else if (g_file_test(csv, G_FILE_TEST_EXISTS)) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                "--out %s already holds a sweep (points.csv): give --resume to continue it, or another folder", o->dir);
    return FALSE;
  }
  if (!g_file_set_contents(sig, o->signature, -1, error)) return FALSE;
  const gboolean shard_file = o->shards > 1 || o->sharded;
  if (shard_file && !write_shard_state(o, n, FALSE, 0, error)) return FALSE;
  FILE *out = fopen(csv, existed ? "a" : "w");
  if (!out) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", csv, g_strerror(errno));
    return FALSE;
  }
  if (!existed) fputs(header, out);

  Run *r = g_new0(Run, 1);
  r->o = o;
  r->ctx = ctx_new(o->systems, o->n_systems, o->include_oom, o->memo_bytes, !o->no_dedup);
  g_mutex_init(&r->lock);
  g_cond_init(&r->ready);
  g_cond_init(&r->room);
  r->n = n;
  r->next_claim = r->next_write = shard_index(o, first);
  r->waiting = UINT64_MAX;
  const guint jobs = o->jobs ? o->jobs : MAX(1u, g_get_num_processors());
  GThreadPool *pool = g_thread_pool_new(work, r, (gint)jobs, TRUE, NULL);
  for (guint k = 0; k < jobs; k++) g_thread_pool_push(pool, GUINT_TO_POINTER(k + 1), NULL);
  const gint64 t0 = g_get_monotonic_time();
  gint64 shown = 0;
  double best = 0;
  gboolean ok = TRUE;
  st->points = n;
  const uint64_t start = r->next_write;
  st->resumed = start != shard_index(o, 0);
  uint64_t next_write = start;
  while (next_write < n) {
    g_mutex_lock(&r->lock);
    Slot *s = &r->slots[(next_write / o->shards) % WINDOW];
    /* wait for it unless SIGINT came before any worker took it (a timed wait: the signal handler only sets the
     * flag); woken once the point WRITE_BATCH - 1 on is done too (unless it is already, or SIGINT came), not
     * after every point */
    while (!s->done && !(*o->stop && r->next_claim <= next_write)) {
      uint64_t want = next_write;
      const uint64_t span = (uint64_t)(WRITE_BATCH - 1) * o->shards;
      if (!*o->stop)
        want = n - next_write > span ? next_write + span : next_write + (n - 1 - next_write) / o->shards * o->shards;
      if (r->slots[(want / o->shards) % WINDOW].done) want = next_write;
      r->waiting = want;
      g_cond_wait_until(&r->ready, &r->lock, g_get_monotonic_time() + 200 * G_TIME_SPAN_MILLISECOND);
    }
    r->waiting = UINT64_MAX;
    Slot got = *s;
    *s = (Slot){0};
    if (got.done) {
      r->next_write = next_write + o->shards;
      g_cond_signal(&r->room);
    }
    g_mutex_unlock(&r->lock);
    if (!got.done) break; /* stopped (SIGINT): the rows so far are written; --resume goes on from here */
    if (got.status == 3) {
      st->failed++;
      if (!st->first_failure) st->first_failure = g_steal_pointer(&got.why);
    } else if (got.status == 2) {
      st->invalid++;
      tally(st, got.rule, next_write);
    } else {
      st->valid++;
      st->oom += got.status == 1;
      st->simulated += got.status == 0;
      best = MAX(best, got.samples_per_s);
      if (fputs(got.row, out) == EOF) ok = FALSE;
      st->written++;
    }
    g_free(got.row);
    g_free(got.why);
    next_write += o->shards;
    if (o->progress && g_get_monotonic_time() - shown > 250 * G_TIME_SPAN_MILLISECOND) {
      shown = g_get_monotonic_time();
      const double done = (double)((next_write - start) / o->shards), secs = (double)(shown - t0) / 1e6;
      const double total = (double)((n - start + o->shards - 1) / o->shards), rate = done / MAX(secs, 1e-9);
      fprintf(stderr, "\r%.0f/%.0f points  %.0f/s  ETA %.0f s  best %.4g samples/s   ", done, total, rate,
              (total - done) / MAX(rate, 1e-9), best);
    }
  }
  g_mutex_lock(&r->lock);
  r->over = TRUE;
  g_cond_broadcast(&r->room);
  g_mutex_unlock(&r->lock);
  st->interrupted = next_write < n;
  g_thread_pool_free(pool, FALSE, TRUE); /* waits for the points under way */
  for (guint k = 0; k < st->n_rejected; k++) st->rejected[k].why = invalid_reason(&r->ctx, st->rejected[k].example);
  qsort(st->rejected, st->n_rejected, sizeof *st->rejected, by_points);
  for (guint k = 0; k < WINDOW; k++) {
    g_free(r->slots[k].row);
    g_free(r->slots[k].why);
  }
  g_mutex_clear(&r->lock);
  g_cond_clear(&r->ready);
  g_cond_clear(&r->room);
  if (r->ctx.memo) mm_engine_memo_counts(r->ctx.memo, &st->replayed, NULL);
  if (r->ctx.dedup) st->reused = r->ctx.dedup->hits;
  ctx_clear(&r->ctx);
  g_free(r);
  if (o->progress) fprintf(stderr, "\n");
  if (fclose(out) != 0 || !ok) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_IO, "%s: writing failed", csv);
    return FALSE;
  }
  return !shard_file || st->interrupted || write_shard_state(o, n, TRUE, st->failed, error);
}

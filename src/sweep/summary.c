/* summary: a sweep's points.csv -> best points per objective, speedups over FSDP, best strategy per
 * layer kind, the memory-throughput Pareto set; and merging shards' points.csv in point order.
 * Both read points.csv a line at a time: the summary keeps only the rows it will show (the
 * running bests, the baseline, the Pareto fronts so far), the merge one row per shard, so their
 * memory does not grow with the sweep. */
#define _POSIX_C_SOURCE 200809L /* getline */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "sweep.h"

/* points.csv, read a row at a time. */
typedef struct {
  const char *path;
  FILE *f;
  char *buf;      /* the current line (getline's) */
  size_t cap;
  char **names;   /* the header's columns */
  guint n_cols;
  char **row;     /* the current row's fields, into buf (n_cols, then NULL) */
  guint line;     /* the current row's line number */
} Csv;

static void csv_close(Csv *c)
{
  if (c->f) fclose(c->f);
  free(c->buf);
  g_strfreev(c->names);
  g_free(c->row);
  memset(c, 0, sizeof *c);
}

/* The next line without its end; FALSE at the end of the file. */
static gboolean next_line(Csv *c)
{
  const ssize_t n = getline(&c->buf, &c->cap, c->f);
  if (n < 0) return FALSE;
  if (n > 0 && c->buf[n - 1] == '\n') c->buf[n - 1] = '\0';
  c->line++;
  return TRUE;
}

static gboolean csv_open(const char *path, Csv *c, GError **error)
{
  memset(c, 0, sizeof *c);
  c->path = path;
  if (!(c->f = fopen(path, "r"))) {
    int err = errno;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err), "Failed to open file \u201c%s\u201d: %s", path,
                g_strerror(err));
    return FALSE;
  }
  if (!next_line(c) || !*c->buf) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: empty; expected a header line", path);
    return FALSE;
  }
  c->names = g_strsplit(c->buf, ",", -1);
  c->n_cols = g_strv_length(c->names);
  c->row = g_new0(char *, c->n_cols + 1);
  return TRUE;
}

/* Reads the next row into c->row (empty lines skipped): 1, or 0 at the end, -1 on a bad row. */
static int csv_next(Csv *c, GError **error)
{
  do {
    if (!next_line(c)) {
      if (ferror(c->f)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_IO, "%s: reading failed", c->path);
        return -1;
      }
      return 0;
    }
  } while (!*c->buf);
  guint k = 0;
  c->row[k++] = c->buf;
  for (char *p = c->buf; *p; p++) {
    if (*p != ',') continue;
    *p = '\0';
    if (k == c->n_cols) {
      k++;
      break;
    }
    c->row[k++] = p + 1;
  }
  if (k != c->n_cols) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: line %u has not %u fields", c->path, c->line, c->n_cols);
    return -1;
  }
  return 1;
}

static int col(const Csv *c, const char *name)
{
  for (guint i = 0; i < c->n_cols; i++)
    if (strcmp(c->names[i], name) == 0) return (int)i;
  return -1;
}

/* A row's field (its text; "" for a column the file lacks) and number (NAN when empty). */
static const char *str(char *const *row, int column)
{
  return column >= 0 ? row[column] : "";
}

static double val(char *const *row, int column)
{
  const char *s = str(row, column);
  return *s ? g_ascii_strtod(s, NULL) : NAN;
}

/* A kept row: a copy of its fields. (transfer full) */
static char **keep(char *const *row)
{
  return g_strdupv((char **)row);
}

/* @slot becomes a copy of @row (the old one freed). */
static void keep_in(char ***slot, char *const *row)
{
  g_strfreev(*slot);
  *slot = keep(row);
}

/* A point as the summary shows it: index, strategies, the figures. */
static cJSON *point_json(const Csv *c, char *const *row, const MmSweepSpace *sp, double base)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "point", val(row, col(c, "point")));
  cJSON *st = cJSON_AddObjectToObject(o, "strategies");
  for (guint k = 0; k < sp->n_kinds; k++) {
    g_autofree char *name = g_strdup_printf("%s_strategy", mm_block_kind_names[sp->kinds[k].kind]);
    cJSON_AddStringToObject(st, mm_block_kind_names[sp->kinds[k].kind], str(row, col(c, name)));
  }
  static const char *const ints[] = {"nodes", "pipeline_degree", "virtual_stages", "micro_batch", "zero"};
  for (guint i = 0; i < G_N_ELEMENTS(ints); i++) cJSON_AddNumberToObject(o, ints[i], val(row, col(c, ints[i])));
  cJSON_AddStringToObject(o, "recompute", str(row, col(c, "recompute")));
  cJSON_AddStringToObject(o, "pipeline_schedule", str(row, col(c, "pipeline_schedule")));
  cJSON_AddBoolToObject(o, "fits", val(row, col(c, "fits")) > 0);
  static const char *const nums[] = {"iteration_time_s", "samples_per_s", "tokens_per_s", "mfu", "exposed_comm_s",
                                     "memory_per_device_bytes", "a100_gpu_hours_per_iteration"};
  for (guint i = 0; i < G_N_ELEMENTS(nums); i++) {
    double v = val(row, col(c, nums[i]));
    if (isfinite(v)) cJSON_AddNumberToObject(o, nums[i], v);
  }
  double t = val(row, col(c, "samples_per_s"));
  if (base > 0 && isfinite(t)) cJSON_AddNumberToObject(o, "speedup_over_fsdp", t / base);
  return o;
}

/* The baseline strategy of a varied kind: FSDP over all devices, but embedding tables
 * model-parallel table-wise (MAD-Max's FSDP baseline shards only the dense layers). */
static const char *baseline_of(MmBlockKind kind)
{
  return kind == MM_BLOCK_EMBEDDING_BAG ? "mp(table)*" : "fsdp*";
}

/* Whether @row uses the baseline for every varied kind but @except (-1: none) and the other
 * dimensions of @like. */
static gboolean fsdp_elsewhere(const Csv *c, const MmSweepSpace *sp, char *const *row, int except, char *const *like)
{
  static const char *const dims[] = {"system", "nodes", "pipeline_degree", "pipeline_schedule", "virtual_stages",
                                     "micro_batch", "recompute", "zero"};
  for (guint k = 0; k < sp->n_kinds; k++) {
    if ((int)k == except) continue;
    g_autofree char *name = g_strdup_printf("%s_strategy", mm_block_kind_names[sp->kinds[k].kind]);
    if (strcmp(str(row, col(c, name)), baseline_of(sp->kinds[k].kind)) != 0) return FALSE;
  }
  /* the config's micro-batch (not varied) resolves per strategy: only explicit sizes compare */
  const gboolean micro_given = !(sp->n_micro == 1 && sp->micro[0] == 0);
  for (guint i = 0; i < G_N_ELEMENTS(dims); i++) {
    if (!micro_given && strcmp(dims[i], "micro_batch") == 0) continue;
    if (strcmp(str(row, col(c, dims[i])), str(like, col(c, dims[i]))) != 0) return FALSE;
  }
  return TRUE;
}

/* ---- the Pareto front, kept as the rows stream by ----------------------------------- */

/* A point of a two-objective Pareto front: less @cost and more @gain are better. */
typedef struct {
  double cost, gain;
  guint64 row; /* its row index: of equal points the first is on the front */
  char **fields;
} FrontPoint;

static void front_point_free(gpointer p)
{
  FrontPoint *f = p;
  g_strfreev(f->fields);
  g_free(f);
}

static gint by_cost(gconstpointer a, gconstpointer b, gpointer user)
{
  (void)user;
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The non-dominated points of those offered so far, keyed by cost: along it the gain rises
 * strictly with the cost, so a point is dominated exactly when the point of the largest cost
 * not above its own has at least its gain, and it dominates the run of points from its cost
 * on whose gain is not above its own. O(log n) per point, amortized; memory: the front.
 * Points with a NaN objective neither dominate nor are dominated (kept apart, in @odd). */
typedef struct {
  GTree *tree; /* double *cost -> FrontPoint */
  GPtrArray *odd;
} Front;

static void front_init(Front *f)
{
  f->tree = g_tree_new_full(by_cost, NULL, NULL, front_point_free);
  f->odd = g_ptr_array_new_with_free_func(front_point_free);
}

static void front_clear(Front *f)
{
  if (f->tree) g_tree_destroy(f->tree);
  if (f->odd) g_ptr_array_free(f->odd, TRUE);
  memset(f, 0, sizeof *f);
}

static void front_offer(Front *f, double cost, double gain, guint64 row, char *const *fields)
{
  if (isnan(cost) || isnan(gain)) {
    FrontPoint *p = g_new(FrontPoint, 1);
    *p = (FrontPoint){cost, gain, row, keep(fields)};
    g_ptr_array_add(f->odd, p);
    return;
  }
  GTreeNode *above = g_tree_upper_bound(f->tree, &cost); /* the first of a larger cost */
  GTreeNode *le = above ? g_tree_node_previous(above) : g_tree_node_last(f->tree);
  if (le && ((const FrontPoint *)g_tree_node_value(le))->gain >= gain) return; /* dominated */
  for (GTreeNode *n = g_tree_lower_bound(f->tree, &cost); n;) {
    const FrontPoint *q = g_tree_node_value(n);
    if (q->gain > gain) break;
    GTreeNode *next = g_tree_node_next(n);
    g_tree_remove(f->tree, &q->cost);
    n = next;
  }
  FrontPoint *p = g_new(FrontPoint, 1);
  *p = (FrontPoint){cost, gain, row, keep(fields)};
  g_tree_insert(f->tree, &p->cost, p);
}

static gboolean collect(gpointer key, gpointer value, gpointer data)
{
  (void)key;
  g_ptr_array_add(data, value);
  return FALSE;
}

static gint by_row(gconstpointer a, gconstpointer b)
{
  const FrontPoint *x = *(const FrontPoint *const *)a, *y = *(const FrontPoint *const *)b;
  return x->row < y->row ? -1 : x->row > y->row;
}

/* The front's points in row order. (transfer container) */
static GPtrArray *front_points(const Front *f)
{
  GPtrArray *a = g_ptr_array_new();
  g_tree_foreach(f->tree, collect, a);
  for (guint i = 0; i < f->odd->len; i++) g_ptr_array_add(a, f->odd->pdata[i]);
  g_ptr_array_sort(a, by_row);
  return a;
}

/* ---- the summary ------------------------------------------------------------------ */

/* Per varied kind: its strategies with the others at the baseline. */
typedef struct {
  guint tried;
  char **best, **worst;
} KindStudy;

/* Per system of a sweep of several: its counts, its best points, its time-vs-GPU-hours front. */
typedef struct {
  char *label;  /* its system column */
  guint64 valid, fit;
  char **best, **gpuh;
  double best_t, gpuh_v;
  Front front;  /* A100-normalized GPU-hours per sample against samples/s */
} SystemStudy;

/* A point of a sweep of several systems: its system's name and its GPU-hours per sample too. */
static cJSON *system_point_json(const Csv *c, char *const *row, const MmSweepSpace *sp, double base,
                                const MmSweepSystem *sys, guint k)
{
  cJSON *o = point_json(c, row, sp, base);
  cJSON_AddStringToObject(o, "system", sys[k].inputs->hardware->name);
  const int cg = col(c, "a100_gpu_hours_per_iteration"), ct = col(c, "samples_per_s"), ci = col(c, "iteration_time_s");
  cJSON_AddNumberToObject(o, "a100_gpu_hours_per_sample", val(row, cg) / (val(row, ct) * val(row, ci)));
  return o;
}

static cJSON *front_json(const Csv *c, const Front *f, const MmSweepSpace *sp, double base, const MmSweepSystem *sys,
                         const SystemStudy *ss, guint n_systems)
{
  cJSON *a = cJSON_CreateArray();
  g_autoptr(GPtrArray) pts = front_points(f);
  const int csys = col(c, "system");
  for (guint i = 0; i < pts->len; i++) {
    char *const *row = ((const FrontPoint *)pts->pdata[i])->fields;
    guint k = 0;
    while (k + 1 < n_systems && strcmp(ss[k].label, str(row, csys)) != 0) k++;
    cJSON_AddItemToArray(a, system_point_json(c, row, sp, base, sys, k));
  }
  return a;
}

/* What the summary keeps of points.csv, read a row at a time: the columns it reads, counts, the
 * rows it shows (the first: its dimensions are the baseline's; the baseline, ran or out of
 * memory; the best per objective with its figure), per-kind and per-system studies, fronts. */
typedef struct {
  int cs, cf, ct, cm, cg, ci, cc, ctpot, cttft, cdev, ctok, csys;
  guint64 n;
  guint oom, meeting, simulated;
  char **first, **base, **base_oom, **best, **gpuh, **head, **tpot, **served;
  double best_t, gpuh_v, head_v, tpot_v, served_v;
  gboolean like; /* some row has the baseline's strategies and the first row's dimensions */
  KindStudy *ks;
  SystemStudy *ss;
  Front pareto, time_gpuh;
} Scan;

static void scan_init(Scan *x, const Csv *c, const MmSweepSystem *sys, guint n_systems)
{
  memset(x, 0, sizeof *x);
  x->cs = col(c, "status"), x->cf = col(c, "fits"), x->ct = col(c, "samples_per_s");
  x->cm = col(c, "memory_per_device_bytes"), x->cg = col(c, "a100_gpu_hours_per_iteration");
  x->ci = col(c, "iteration_time_s"), x->cc = col(c, "memory_capacity_bytes");
  x->ctpot = col(c, "time_per_output_token_s"), x->cttft = col(c, "time_to_first_token_s");
  x->cdev = col(c, "devices"), x->ctok = col(c, "tokens_per_s"), x->csys = col(c, "system");
  x->ks = g_new0(KindStudy, MAX(1u, sys[0].space->n_kinds));
  front_init(&x->pareto);
  front_init(&x->time_gpuh);
  x->ss = g_new0(SystemStudy, n_systems);
  for (guint k = 0; k < n_systems; k++) {
    x->ss[k].label = mm_sweep_system_label(sys[k].inputs->hardware);
    front_init(&x->ss[k].front);
  }
}

static void scan_clear(Scan *x, const MmSweepSpace *sp, guint n_systems)
{
  front_clear(&x->pareto);
  front_clear(&x->time_gpuh);
  for (guint k = 0; k < n_systems; k++) {
    g_free(x->ss[k].label);
    g_strfreev(x->ss[k].best);
    g_strfreev(x->ss[k].gpuh);
    front_clear(&x->ss[k].front);
  }
  g_free(x->ss);
  for (guint k = 0; k < sp->n_kinds; k++) {
    g_strfreev(x->ks[k].best);
    g_strfreev(x->ks[k].worst);
  }
  g_free(x->ks);
  char **const rows[] = {x->first, x->base, x->base_oom, x->best, x->gpuh, x->head, x->tpot, x->served};
  for (guint i = 0; i < G_N_ELEMENTS(rows); i++) g_strfreev(rows[i]);
}

/* One row of points.csv into the running state. */
static void scan_row(Scan *x, const Csv *c, char *const *r, const MmSweepSpace *sp, guint n_systems,
                     const MmSweepBudget *budget)
{
  const gboolean bounded = budget && (budget->ttft_max_s > 0 || budget->tpot_max_s > 0);
  const guint64 idx = x->n++;
  if (!x->first) x->first = keep(r);
  const gboolean fits = val(r, x->cf) > 0, ran = strcmp(str(r, x->cs), "oom") != 0;
  const gboolean baseline = fsdp_elsewhere(c, sp, r, -1, x->first);
  x->oom += !fits;
  x->like |= baseline;
  if (!x->base && ran && baseline) x->base = keep(r);
  if (!x->base_oom && !ran && baseline) x->base_oom = keep(r);
  if (ran) front_offer(&x->pareto, val(r, x->cm), val(r, x->ct), idx, r);
  /* per layer kind: the others at the baseline, the dimensions of the first row */
  for (guint k = 0; k < sp->n_kinds && fits && strcmp(str(r, x->cs), "ok") == 0; k++) {
    if (!fsdp_elsewhere(c, sp, r, (int)k, x->first)) continue;
    x->ks[k].tried++;
    if (!x->ks[k].best || val(r, x->ct) > val(x->ks[k].best, x->ct)) keep_in(&x->ks[k].best, r);
    if (!x->ks[k].worst || val(r, x->ct) < val(x->ks[k].worst, x->ct)) keep_in(&x->ks[k].worst, r);
  }
  guint k_sys = 0;
  while (k_sys + 1 < n_systems && strcmp(x->ss[k_sys].label, str(r, x->csys)) != 0) k_sys++;
  SystemStudy *sy = &x->ss[k_sys];
  sy->valid++;
  if (!fits || !ran) return;
  const double t = val(r, x->ct);
  if (!x->best || t > x->best_t) keep_in(&x->best, r), x->best_t = t;
  const double gh = val(r, x->cg) / (t * val(r, x->ci));
  if (!x->gpuh || gh < x->gpuh_v) keep_in(&x->gpuh, r), x->gpuh_v = gh;
  if (n_systems > 1) { /* per system, and the time-vs-GPU-hours front across them */
    sy->fit++;
    if (!sy->best || t > sy->best_t) keep_in(&sy->best, r), sy->best_t = t;
    if (!sy->gpuh || gh < sy->gpuh_v) keep_in(&sy->gpuh, r), sy->gpuh_v = gh;
    front_offer(&sy->front, gh, t, idx, r);
    front_offer(&x->time_gpuh, gh, t, idx, r);
  }
  const double room = val(r, x->cc) - val(r, x->cm);
  if (!x->head || room > x->head_v) keep_in(&x->head, r), x->head_v = room;
  if (isfinite(val(r, x->ctpot)) && (!x->tpot || val(r, x->ctpot) < x->tpot_v))
    keep_in(&x->tpot, r), x->tpot_v = val(r, x->ctpot);
  x->simulated++;
  /* the latency bound: both figures known and within it; then the most output tokens/s per device */
  const double ttft = val(r, x->cttft), tp = val(r, x->ctpot);
  if (!bounded || !isfinite(ttft) || !isfinite(tp) || (budget->ttft_max_s > 0 && ttft > budget->ttft_max_s) ||
      (budget->tpot_max_s > 0 && tp > budget->tpot_max_s))
    return;
  x->meeting++;
  const double per_device = val(r, x->ctok) / val(r, x->cdev);
  if (!x->served || per_device > x->served_v) keep_in(&x->served, r), x->served_v = per_device;
}

/* The summary document of a whole scan. */
static cJSON *scan_json(const Scan *x, const Csv *c, const MmSweepSystem *sys, guint n_systems,
                        const MmSweepBudget *budget)
{
  const MmSweepSpace *sp = sys[0].space; /* every system's has the model's kinds and the same dimensions */
  const gboolean bounded = budget && (budget->ttft_max_s > 0 || budget->tpot_max_s > 0);
  uint64_t in_space = 0;
  for (guint k = 0; k < n_systems; k++) in_space += sys[k].space->n_points;

  /* no baseline row that ran: simulate the one pruned for reference */
  double base_t = x->base && val(x->base, x->cf) > 0 ? val(x->base, x->ct) : 0;
  cJSON *base_ref = NULL;
  if (!x->base && x->base_oom) {
    MmSweepPoint p;
    uint64_t local = 0;
    const MmSweepSystem *bs = &sys[mm_sweep_locate(sys, n_systems, (uint64_t)val(x->base_oom, col(c, "point")), &local)];
    mm_sweep_space_point(bs->space, bs->inputs->model, local, &p);
    g_autoptr(MmSimulation) sim = mm_simulation_new_point(bs->inputs, &p.point, FALSE, NULL);
    if (sim) {
      base_t = sim->metrics.samples_per_s;
      base_ref = point_json(c, x->base_oom, sp, 0);
      cJSON_AddNumberToObject(base_ref, "samples_per_s", base_t);
      cJSON_AddNumberToObject(base_ref, "iteration_time_s", sim->metrics.iteration_time_s);
      cJSON_AddStringToObject(base_ref, "note", "does not fit in memory: simulated without the memory limit, for reference");
    }
  }
  cJSON *root = cJSON_CreateObject();
  cJSON *in_o = cJSON_AddObjectToObject(root, "inputs");
  mm_sweep_inputs_json(sys[0].inputs, in_o);
  cJSON_AddStringToObject(in_o, "space", sp->path ? sp->path : "default");
  if (n_systems > 1) {
    cJSON *names = cJSON_AddArrayToObject(in_o, "systems");
    for (guint k = 0; k < n_systems; k++) cJSON_AddItemToArray(names, cJSON_CreateString(sys[k].inputs->hardware->name));
  }
  cJSON *cnt = cJSON_AddObjectToObject(root, "points");
  cJSON_AddNumberToObject(cnt, "in_space", (double)in_space);
  cJSON_AddNumberToObject(cnt, "valid", (double)x->n);
  cJSON_AddNumberToObject(cnt, "rejected_by_scenario", (double)in_space - (double)x->n);
  cJSON_AddNumberToObject(cnt, "out_of_memory", x->oom);
  if (x->base) cJSON_AddItemToObject(root, "baseline_fsdp", point_json(c, x->base, sp, base_t));
  else if (base_ref) cJSON_AddItemToObject(root, "baseline_fsdp", base_ref);
  else cJSON_AddNullToObject(root, "baseline_fsdp");
  cJSON *obj = cJSON_AddObjectToObject(root, "best");
  if (x->best) cJSON_AddItemToObject(obj, "throughput", point_json(c, x->best, sp, base_t));
  if (x->gpuh) cJSON_AddItemToObject(obj, "a100_gpu_hours_per_sample", point_json(c, x->gpuh, sp, base_t));
  if (x->head) cJSON_AddItemToObject(obj, "memory_headroom", point_json(c, x->head, sp, base_t));
  if (x->tpot) cJSON_AddItemToObject(obj, "time_per_output_token", point_json(c, x->tpot, sp, base_t));
  if (x->served) {
    cJSON *o = point_json(c, x->served, sp, base_t);
    cJSON_AddNumberToObject(o, "time_to_first_token_s", val(x->served, x->cttft));
    cJSON_AddNumberToObject(o, "time_per_output_token_s", val(x->served, x->ctpot));
    cJSON_AddNumberToObject(o, "output_tokens_per_s_per_device", x->served_v);
    cJSON_AddItemToObject(obj, "serving_under_latency_bound", o);
  }
  if (x->best && budget && (budget->tokens > 0 || budget->samples > 0)) {
    /* the fastest point processes the budget first: time = budget / its rate */
    const double rate = budget->tokens > 0 ? val(x->best, x->ctok) : val(x->best, x->ct);
    const double amount = budget->tokens > 0 ? budget->tokens : budget->samples;
    cJSON *o = point_json(c, x->best, sp, base_t);
    cJSON_AddNumberToObject(o, budget->tokens > 0 ? "budget_tokens" : "budget_samples", amount);
    cJSON_AddNumberToObject(o, "time_to_train_s", amount / rate);
    cJSON_AddNumberToObject(o, "time_to_train_days", amount / rate / 86400.0);
    cJSON_AddItemToObject(obj, "time_to_train", o);
  }
  if (bounded) {
    cJSON *lb = cJSON_AddObjectToObject(root, "latency_bound");
    if (budget->ttft_max_s > 0) cJSON_AddNumberToObject(lb, "time_to_first_token_max_s", budget->ttft_max_s);
    if (budget->tpot_max_s > 0) cJSON_AddNumberToObject(lb, "time_per_output_token_max_s", budget->tpot_max_s);
    cJSON_AddNumberToObject(lb, "points_simulated", x->simulated);
    cJSON_AddNumberToObject(lb, "points_meeting", x->meeting);
  }

  /* per layer kind: its strategies with the other kinds at FSDP (MAD-Max's per-kind study) */
  cJSON *kinds = cJSON_AddArrayToObject(root, "per_layer_kind");
  for (guint k = 0; k < sp->n_kinds && x->like; k++) {
    g_autofree char *name = g_strdup_printf("%s_strategy", mm_block_kind_names[sp->kinds[k].kind]);
    const KindStudy *ks = &x->ks[k];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", mm_block_kind_names[sp->kinds[k].kind]);
    cJSON_AddNumberToObject(o, "strategies_that_fit", ks->tried);
    if (ks->best) {
      cJSON_AddStringToObject(o, "best", str(ks->best, col(c, name)));
      if (base_t > 0) cJSON_AddNumberToObject(o, "best_speedup_over_fsdp", val(ks->best, x->ct) / base_t);
      cJSON_AddStringToObject(o, "worst", str(ks->worst, col(c, name)));
      if (base_t > 0) cJSON_AddNumberToObject(o, "worst_speedup_over_fsdp", val(ks->worst, x->ct) / base_t);
    }
    if (x->best) cJSON_AddStringToObject(o, "in_best_point", str(x->best, col(c, name)));
    cJSON_AddItemToArray(kinds, o);
  }

  /* the Pareto set of simulated points: less memory per device or more samples/s */
  cJSON *pareto_o = cJSON_AddArrayToObject(root, "pareto_memory_throughput");
  g_autoptr(GPtrArray) front = front_points(&x->pareto);
  for (guint i = 0; i < front->len; i++)
    cJSON_AddItemToArray(pareto_o, point_json(c, ((const FrontPoint *)front->pdata[i])->fields, sp, base_t));

  /* several systems: each one's best points and front, and the front across them (fewer
   * A100-normalized GPU-hours per sample or more samples/s: less time) */
  if (n_systems > 1) {
    cJSON *sa = cJSON_AddArrayToObject(root, "systems");
    for (guint k = 0; k < n_systems; k++) {
      const SystemStudy *ss = &x->ss[k];
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "name", sys[k].inputs->hardware->name);
      cJSON_AddStringToObject(o, "hardware_path", sys[k].inputs->hardware->path);
      cJSON_AddNumberToObject(o, "points_in_space", (double)sys[k].space->n_points);
      cJSON_AddNumberToObject(o, "points_valid", (double)ss->valid);
      cJSON_AddNumberToObject(o, "points_that_fit", (double)ss->fit);
      cJSON *b = cJSON_AddObjectToObject(o, "best");
      if (ss->best) cJSON_AddItemToObject(b, "throughput", system_point_json(c, ss->best, sp, base_t, sys, k));
      if (ss->gpuh)
        cJSON_AddItemToObject(b, "a100_gpu_hours_per_sample", system_point_json(c, ss->gpuh, sp, base_t, sys, k));
      cJSON_AddItemToObject(o, "pareto_time_gpu_hours", front_json(c, &ss->front, sp, base_t, sys, x->ss, n_systems));
      cJSON_AddItemToArray(sa, o);
    }
    cJSON_AddItemToObject(root, "pareto_time_gpu_hours", front_json(c, &x->time_gpuh, sp, base_t, sys, x->ss, n_systems));
  }
  return root;
}

cJSON *mm_sweep_summary(const char *dir, const MmSweepSystem *sys, guint n_systems, const MmSweepBudget *budget,
                        GError **error)
{
  g_return_val_if_fail(n_systems > 0, NULL);
  g_autofree char *path = g_build_filename(dir, "points.csv", NULL);
  Csv c;
  if (!csv_open(path, &c, error)) {
    csv_close(&c);
    return NULL;
  }
  Scan x;
  scan_init(&x, &c, sys, n_systems);
  int got;
  while ((got = csv_next(&c, error)) > 0) scan_row(&x, &c, c.row, sys[0].space, n_systems, budget);
  cJSON *root = got >= 0 ? scan_json(&x, &c, sys, n_systems, budget) : NULL;
  scan_clear(&x, sys[0].space, n_systems);
  csv_close(&c);
  return root;
}

/* ---- merging shards ---------------------------------------------------------- */

/* A shard's points.csv read a line at a time. */
typedef struct {
  FILE *f;
  char *buf;
  size_t cap;
  gboolean has; /* buf holds a row not yet written */
  guint64 idx;  /* its point index */
  guint shard, shards; /* K/N of its sweep.json */
  guint line;
} Shard;

/* The shard's next line into buf (without its end): FALSE at the end or at an empty line, and
 * with @error set at a row that is not the shard's next (an index on the shard, after the last). */
static gboolean shard_next(Shard *s, const char *path, GError **error)
{
  const ssize_t n = getline(&s->buf, &s->cap, s->f);
  if (n > 0 && s->buf[n - 1] == '\n') s->buf[n - 1] = '\0';
  const gboolean had = s->has && s->line > 1;
  const guint64 prev = s->idx;
  s->line++;
  s->has = n > 0 && *s->buf;
  if (!s->has || s->line == 1) return s->has; /* the end, or the header */
  char *end = NULL;
  s->idx = g_ascii_isdigit(*s->buf) ? g_ascii_strtoull(s->buf, &end, 10) : 0;
  if (!end || *end != ',' || s->idx % s->shards != s->shard || (had && s->idx <= prev)) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                "%s: line %u: expected a row of shard %u/%u: a point index i with i mod %u = %u, above the "
                "previous row's", path, s->line, s->shard, s->shards, s->shards, s->shard);
    s->has = FALSE;
  }
  return s->has;
}

/* A shard's sweep.json (what `madmax sweep --shard K/N` wrote): K, N and the rest, which is the
 * same for every shard of one sweep. (transfer full) */
static char *shard_signature(const char *shard_dir, guint *k, guint *n, GError **error)
{
  g_autofree char *path = g_build_filename(shard_dir, "sweep.json", NULL), *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, error)) return NULL;
  char *tail = g_strrstr(text, ", \"shard\": ");
  int used = 0;
  if (!tail || sscanf(tail, MM_SWEEP_SIG_SHARD "%n", k, n, &used) != 2 || tail[used] || *n < 1 ||
      *k >= *n) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                "%s: expected the sweep.json of `madmax sweep --shard K/N`, ending \"shard\": K, \"shards\": N}", path);
    return NULL;
  }
  *tail = '\0';
  return g_steal_pointer(&text);
}

/* Whether shard @k of @nn in @shard_dir evaluated all its points, before any of its rows is read:
 * its shard.json (MM_SWEEP_SHARD_FILE) says so. Its rows cannot: a point the scenario rejects
 * has none, so a run cut short after its last valid point looks like a complete one. A folder of
 * one shard (--shard 0/1 from an older madmax, an unsharded or merged sweep) without shard.json
 * counts as complete when it holds the summary.json that only a finished run writes. */
static gboolean shard_complete(guint k, guint nn, const char *shard_dir, uint64_t *failed, GError **error)
{
  g_autofree char *path = g_build_filename(shard_dir, MM_SWEEP_SHARD_FILE, NULL), *text = NULL;
  g_autofree char *summary = g_build_filename(shard_dir, "summary.json", NULL);
  gsize len = 0;
  const gboolean have = g_file_get_contents(path, &text, &len, NULL);
  if (!have && nn == 1 && g_file_test(summary, G_FILE_TEST_IS_REGULAR)) return TRUE;
  g_autoptr(cJSON) root = have ? cJSON_ParseWithLengthOpts(text, len + 1, NULL, TRUE) : NULL;
  const cJSON *ck = cJSON_GetObjectItemCaseSensitive(root, "shard"), *cn = cJSON_GetObjectItemCaseSensitive(root, "shards");
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "points"), *c = cJSON_GetObjectItemCaseSensitive(root, "complete");
  if (!cJSON_IsNumber(ck) || !cJSON_IsNumber(cn) || !cJSON_IsNumber(p) || !cJSON_IsBool(c) || ck->valuedouble != k ||
      cn->valuedouble != nn || !(p->valuedouble >= 0)) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                "%s: shard %u/%u cannot be told complete: no %s of its run (madmax sweep --shard writes it; an "
                "older madmax did not). Run its `madmax sweep ... --shard %u/%u --out %s` again with --resume (it "
                "evaluates only what is missing), then merge", shard_dir, k, nn, path, k, nn, shard_dir);
    return FALSE;
  }
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "failed");
  if (cJSON_IsTrue(c)) {
    if (cJSON_IsNumber(f) && f->valuedouble > 0) *failed += (uint64_t)MIN(f->valuedouble, 1e18);
    return TRUE;
  }
  const guint64 points = (guint64)p->valuedouble;
  const guint64 own = points > k ? (points - k - 1) / nn + 1 : 0;
  g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
              "%s: shard %u/%u is incomplete: its run stopped before the end (Ctrl-C, a kill, a time limit) of the "
              "shard's %" G_GUINT64_FORMAT " points (of the sweep's %" G_GUINT64_FORMAT "). Run its `madmax sweep "
              "... --shard %u/%u --out %s` again with --resume, then merge", shard_dir, k, nn, own, points, k, nn,
              shard_dir);
  return FALSE;
}

gboolean mm_sweep_merge(const char *dir, char **shard_dirs, guint n, uint64_t *failed, GError **error)
{
  uint64_t left_out = 0;
  g_autofree char *out_path = g_build_filename(dir, "points.csv", NULL), *tmp_path = NULL;
  Shard *sh = g_new0(Shard, n);
  gboolean ok = TRUE;
  char *header = NULL;
  g_autofree char *sweep = NULL;      /* the shards' sweep.json without K/N */
  g_autofree char **seen = NULL;      /* per K: the folder that has it */
  for (guint i = 0; i < n && ok; i++) {
    g_autofree char *sig = shard_signature(shard_dirs[i], &sh[i].shard, &sh[i].shards, error);
    if (!sig) {
      ok = FALSE;
      break;
    }
    if (!sweep && sh[i].shards > n) { /* (a corrupt count would also size the table below) */
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                  "%s: shard %u/%u: expected the %u folders of `madmax sweep --shard K/%u`, got %u", shard_dirs[i],
                  sh[i].shard, sh[i].shards, sh[i].shards, sh[i].shards, n);
      ok = FALSE;
      break;
    }
    if (!sweep) {
      sweep = g_steal_pointer(&sig);
      seen = g_new0(char *, sh[i].shards);
    } else if (strcmp(sweep, sig) != 0 || sh[i].shards != sh[0].shards) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                  "%s: a shard of another sweep than %s's (its sweep.json: other inputs, options or shard count)",
                  shard_dirs[i], shard_dirs[0]);
      ok = FALSE;
      break;
    }
    if (seen[sh[i].shard]) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: shard %u/%u, as %s: each shard once", shard_dirs[i],
                  sh[i].shard, sh[i].shards, seen[sh[i].shard]);
      ok = FALSE;
      break;
    }
    seen[sh[i].shard] = shard_dirs[i];
    if (!shard_complete(sh[i].shard, sh[i].shards, shard_dirs[i], &left_out, error)) {
      ok = FALSE;
      break;
    }
    g_autofree char *p = g_build_filename(shard_dirs[i], "points.csv", NULL);
    if (!(sh[i].f = fopen(p, "r"))) {
      int err = errno;
      g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err), "Failed to open file \u201c%s\u201d: %s", p,
                  g_strerror(err));
      ok = FALSE;
      break;
    }
    shard_next(&sh[i], p, NULL); /* the header */
    const char *h = sh[i].has ? sh[i].buf : "";
    if (!header) header = g_strdup(h);
    else if (strcmp(header, h) != 0) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: its header differs from %s's: not shards of one sweep",
                  p, shard_dirs[0]);
      ok = FALSE;
    }
    GError *row_error = NULL;
    if (ok && !shard_next(&sh[i], p, &row_error) && row_error) {
      g_propagate_error(error, row_error);
      ok = FALSE;
    }
  }
  for (guint k = 0; ok && k < sh[0].shards; k++)
    if (!seen[k]) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "shard %u/%u is missing: expected the %u folders of "
                  "`madmax sweep --shard K/%u`, K = 0 .. %u", k, sh[0].shards, sh[0].shards, sh[0].shards,
                  sh[0].shards - 1);
      ok = FALSE;
    }
  FILE *out = NULL;
  const gboolean made = ok && !g_file_test(dir, G_FILE_TEST_EXISTS);
  if (ok && g_mkdir_with_parents(dir, 0755) != 0) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "--out %s: %s", dir, g_strerror(errno));
    ok = FALSE;
  }
  /* a temporary beside points.csv, renamed over it once complete: a failure leaves no half file,
   * and --out may be one of the shards' folders (its points.csv is read to the end first) */
  int fd = -1;
  if (ok) {
    tmp_path = g_build_filename(dir, ".points.csv.XXXXXX", NULL);
    if ((fd = g_mkstemp_full(tmp_path, O_WRONLY | O_CLOEXEC, 0666)) < 0 || !(out = fdopen(fd, "w"))) {
      g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", out_path, g_strerror(errno));
      if (fd >= 0) close(fd), g_unlink(tmp_path);
      g_clear_pointer(&tmp_path, g_free);
      ok = FALSE;
    }
  }
  if (ok) {
    fprintf(out, "%s\n", header);
    for (;;) { /* k-way merge on the point index (each shard is in point order) */
      int pick = -1;
      guint64 lowest = G_MAXUINT64;
      for (guint i = 0; i < n; i++)
        if (sh[i].has && sh[i].idx < lowest) lowest = sh[i].idx, pick = (int)i;
      if (pick < 0) break;
      fprintf(out, "%s\n", sh[pick].buf);
      g_autofree char *p = g_build_filename(shard_dirs[pick], "points.csv", NULL);
      GError *row_error = NULL;
      if (!shard_next(&sh[pick], p, &row_error) && row_error) {
        g_propagate_error(error, row_error);
        ok = FALSE;
        break;
      }
    }
    if (fclose(out) != 0 && ok) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_IO, "%s: writing failed", out_path);
      ok = FALSE;
    }
    if (ok && g_rename(tmp_path, out_path) != 0) {
      g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", out_path, g_strerror(errno));
      ok = FALSE;
    }
    if (!ok) g_unlink(tmp_path);
    if (!ok && made) g_rmdir(dir); /* the folder this merge made, empty again */
    /* the merged folder is the sweep of one process: its sweep.json (shard 0 of 1), so that a
     * --resume there (the summary of scripts/sweep-slurm.sh) checks its inputs as any other */
    g_autofree char *sig_path = g_build_filename(dir, "sweep.json", NULL);
    g_autofree char *sig = ok ? g_strdup_printf("%s" MM_SWEEP_SIG_SHARD, sweep, 0u, 1u) : NULL;
    if (ok && !g_file_set_contents(sig_path, sig, -1, error)) ok = FALSE;
    g_autofree char *state = g_build_filename(dir, MM_SWEEP_SHARD_FILE, NULL);
    if (ok) g_unlink(state); /* --out a shard's folder: it holds the whole sweep now */
    g_autofree char *summary = g_build_filename(dir, "summary.json", NULL);
    if (ok) g_unlink(summary); /* it described the rows before (another sweep's, a shard's) */
  }
  if (ok && failed) *failed = left_out;
  for (guint i = 0; i < n; i++) {
    if (sh[i].f) fclose(sh[i].f);
    free(sh[i].buf);
  }
  g_free(sh);
  g_free(header);
  return ok;
}

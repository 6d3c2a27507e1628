/* summary: a sweep's points.csv -> best points per objective, speedups over FSDP, best strategy per
 * layer kind, the memory-throughput Pareto set; and merging shards' points.csv in point order. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sweep.h"

typedef struct {
  char **names;
  guint n_cols;
  GPtrArray *rows; /* char ** (g_strsplit of a line) */
} Csv;

static void csv_clear(Csv *c)
{
  g_strfreev(c->names);
  if (c->rows) g_ptr_array_free(c->rows, TRUE);
}

static gboolean csv_read(const char *path, Csv *c, GError **error)
{
  g_autofree char *text = NULL;
  memset(c, 0, sizeof *c);
  if (!g_file_get_contents(path, &text, NULL, error)) return FALSE;
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  if (!lines[0] || !*lines[0]) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: empty; expected a header line", path);
    return FALSE;
  }
  c->names = g_strsplit(lines[0], ",", -1);
  c->n_cols = g_strv_length(c->names);
  c->rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
  for (guint i = 1; lines[i]; i++) {
    if (!*lines[i]) continue;
    char **f = g_strsplit(lines[i], ",", -1);
    if (g_strv_length(f) != c->n_cols) {
      g_strfreev(f);
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: line %u has not %u fields", path, i + 1, c->n_cols);
      return FALSE;
    }
    g_ptr_array_add(c->rows, f);
  }
  return TRUE;
}

static int col(const Csv *c, const char *name)
{
  for (guint i = 0; i < c->n_cols; i++)
    if (strcmp(c->names[i], name) == 0) return (int)i;
  return -1;
}

static double val(const Csv *c, guint row, int column)
{
  const char *s = column >= 0 ? ((char **)c->rows->pdata[row])[column] : "";
  return *s ? g_ascii_strtod(s, NULL) : NAN;
}

static const char *str(const Csv *c, guint row, int column)
{
  return column >= 0 ? ((char **)c->rows->pdata[row])[column] : "";
}

/* A point as the summary shows it: index, strategies, the figures. */
static cJSON *point_json(const Csv *c, guint row, const MmSweepSpace *sp, double base)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "point", val(c, row, col(c, "point")));
  cJSON *st = cJSON_AddObjectToObject(o, "strategies");
  for (guint k = 0; k < sp->n_kinds; k++) {
    g_autofree char *name = g_strdup_printf("%s_strategy", mm_block_kind_names[sp->kinds[k].kind]);
    cJSON_AddStringToObject(st, mm_block_kind_names[sp->kinds[k].kind], str(c, row, col(c, name)));
  }
  static const char *const ints[] = {"nodes", "pipeline_degree", "virtual_stages", "micro_batch", "zero"};
  for (guint i = 0; i < G_N_ELEMENTS(ints); i++) cJSON_AddNumberToObject(o, ints[i], val(c, row, col(c, ints[i])));
  cJSON_AddStringToObject(o, "recompute", str(c, row, col(c, "recompute")));
  cJSON_AddBoolToObject(o, "fits", val(c, row, col(c, "fits")) > 0);
  static const char *const nums[] = {"iteration_time_s", "samples_per_s", "tokens_per_s", "mfu", "exposed_comm_s",
                                     "memory_per_device_bytes", "a100_gpu_hours_per_iteration"};
  for (guint i = 0; i < G_N_ELEMENTS(nums); i++) {
    double v = val(c, row, col(c, nums[i]));
    if (isfinite(v)) cJSON_AddNumberToObject(o, nums[i], v);
  }
  double t = val(c, row, col(c, "samples_per_s"));
  if (base > 0 && isfinite(t)) cJSON_AddNumberToObject(o, "speedup_over_fsdp", t / base);
  return o;
}

/* The baseline strategy of a varied kind: FSDP over all devices, but embedding tables
 * model-parallel table-wise (MAD-Max's FSDP baseline shards only the dense layers). */
static const char *baseline_of(MmBlockKind kind)
{
  return kind == MM_BLOCK_EMBEDDING_BAG ? "mp(table)*" : "fsdp*";
}

/* Whether row @r uses the baseline for every varied kind but @except (-1: none) and the other
 * dimensions of row @like. */
static gboolean fsdp_elsewhere(const Csv *c, const MmSweepSpace *sp, guint r, int except, guint like)
{
  static const char *const dims[] = {"nodes", "pipeline_degree", "virtual_stages", "micro_batch", "recompute", "zero"};
  for (guint k = 0; k < sp->n_kinds; k++) {
    if ((int)k == except) continue;
    g_autofree char *name = g_strdup_printf("%s_strategy", mm_block_kind_names[sp->kinds[k].kind]);
    if (strcmp(str(c, r, col(c, name)), baseline_of(sp->kinds[k].kind)) != 0) return FALSE;
  }
  /* the config's micro-batch (not varied) resolves per strategy: only explicit sizes compare */
  const gboolean micro_given = !(sp->n_micro == 1 && sp->micro[0] == 0);
  for (guint i = 0; i < G_N_ELEMENTS(dims); i++) {
    if (!micro_given && strcmp(dims[i], "micro_batch") == 0) continue;
    if (strcmp(str(c, r, col(c, dims[i])), str(c, like, col(c, dims[i]))) != 0) return FALSE;
  }
  return TRUE;
}

cJSON *mm_sweep_summary(const char *dir, const MmSweepSpace *sp, const MmInputs *in, const MmSweepBudget *budget,
                        GError **error)
{
  g_autofree char *path = g_build_filename(dir, "points.csv", NULL);
  Csv c;
  if (!csv_read(path, &c, error)) {
    csv_clear(&c);
    return NULL;
  }
  const int cs = col(&c, "status"), cf = col(&c, "fits"), ct = col(&c, "samples_per_s"), cm = col(&c, "memory_per_device_bytes");
  const int cg = col(&c, "a100_gpu_hours_per_iteration"), ci = col(&c, "iteration_time_s"), cc = col(&c, "memory_capacity_bytes");
  const int ctpot = col(&c, "time_per_output_token_s"), cttft = col(&c, "time_to_first_token_s");
  const int cdev = col(&c, "devices"), ctok = col(&c, "tokens_per_s");
  const guint n = c.rows->len;
  const gboolean bounded = budget && (budget->ttft_max_s > 0 || budget->tpot_max_s > 0);
  guint oom = 0, meeting = 0, simulated = 0;
  int base = -1, best = -1, gpuh = -1, head = -1, tpot = -1, served = -1;
  for (guint r = 0; r < n; r++) {
    const gboolean fits = val(&c, r, cf) > 0, ran = strcmp(str(&c, r, cs), "oom") != 0;
    oom += !fits;
    if (base < 0 && ran && fsdp_elsewhere(&c, sp, r, -1, 0)) base = (int)r;
    if (!fits || !ran) continue;
    const double t = val(&c, r, ct);
    if (best < 0 || t > val(&c, (guint)best, ct)) best = (int)r;
    const double gh = val(&c, r, cg) / (t * val(&c, r, ci));
    if (gpuh < 0 || gh < val(&c, (guint)gpuh, cg) / (val(&c, (guint)gpuh, ct) * val(&c, (guint)gpuh, ci))) gpuh = (int)r;
    if (head < 0 || val(&c, r, cc) - val(&c, r, cm) > val(&c, (guint)head, cc) - val(&c, (guint)head, cm)) head = (int)r;
    if (isfinite(val(&c, r, ctpot)) && (tpot < 0 || val(&c, r, ctpot) < val(&c, (guint)tpot, ctpot))) tpot = (int)r;
    simulated++;
    /* the latency bound: both figures known and within it; then the most output tokens/s per device */
    const double ttft = val(&c, r, cttft), tp = val(&c, r, ctpot);
    if (!bounded || !isfinite(ttft) || !isfinite(tp) || (budget->ttft_max_s > 0 && ttft > budget->ttft_max_s) ||
        (budget->tpot_max_s > 0 && tp > budget->tpot_max_s))
      continue;
    meeting++;
    if (served < 0 || val(&c, r, ctok) / val(&c, r, cdev) > val(&c, (guint)served, ctok) / val(&c, (guint)served, cdev))
      served = (int)r;
  }
  /* no baseline row that ran: find it among the pruned ones and simulate it for reference */
  double base_t = base >= 0 && val(&c, (guint)base, cf) > 0 ? val(&c, (guint)base, ct) : 0;
  gboolean base_fits = base >= 0;
  cJSON *base_ref = NULL;
  for (guint r = 0; r < n && base < 0; r++) {
    if (strcmp(str(&c, r, cs), "oom") != 0 || !fsdp_elsewhere(&c, sp, r, -1, 0)) continue;
    MmSweepPoint p;
    mm_sweep_space_point(sp, in->model, (uint64_t)val(&c, r, col(&c, "point")), &p);
    g_autoptr(MmSimulation) sim = mm_simulation_new_point(in, &p.point, FALSE, NULL);
    if (!sim) break;
    base_t = sim->metrics.samples_per_s;
    base_fits = FALSE;
    base_ref = point_json(&c, r, sp, 0);
    cJSON_AddNumberToObject(base_ref, "samples_per_s", base_t);
    cJSON_AddNumberToObject(base_ref, "iteration_time_s", sim->metrics.iteration_time_s);
    cJSON_AddStringToObject(base_ref, "note", "does not fit in memory: simulated without the memory limit, for reference");
  }
  cJSON *root = cJSON_CreateObject();
  cJSON *in_o = cJSON_AddObjectToObject(root, "inputs");
  mm_sweep_inputs_json(in, in_o);
  cJSON_AddStringToObject(in_o, "space", sp->path ? sp->path : "default");
  cJSON *cnt = cJSON_AddObjectToObject(root, "points");
  cJSON_AddNumberToObject(cnt, "in_space", (double)sp->n_points);
  cJSON_AddNumberToObject(cnt, "valid", n);
  cJSON_AddNumberToObject(cnt, "rejected_by_scenario", (double)sp->n_points - n);
  cJSON_AddNumberToObject(cnt, "out_of_memory", oom);
  if (base >= 0) cJSON_AddItemToObject(root, "baseline_fsdp", point_json(&c, (guint)base, sp, base_t));
  else if (base_ref) cJSON_AddItemToObject(root, "baseline_fsdp", base_ref);
  else cJSON_AddNullToObject(root, "baseline_fsdp");
  (void)base_fits;
  cJSON *obj = cJSON_AddObjectToObject(root, "best");
  if (best >= 0) cJSON_AddItemToObject(obj, "throughput", point_json(&c, (guint)best, sp, base_t));
  if (gpuh >= 0) cJSON_AddItemToObject(obj, "a100_gpu_hours_per_sample", point_json(&c, (guint)gpuh, sp, base_t));
  if (head >= 0) cJSON_AddItemToObject(obj, "memory_headroom", point_json(&c, (guint)head, sp, base_t));
  if (tpot >= 0) cJSON_AddItemToObject(obj, "time_per_output_token", point_json(&c, (guint)tpot, sp, base_t));
  if (served >= 0) {
    cJSON *o = point_json(&c, (guint)served, sp, base_t);
    cJSON_AddNumberToObject(o, "time_to_first_token_s", val(&c, (guint)served, cttft));
    cJSON_AddNumberToObject(o, "time_per_output_token_s", val(&c, (guint)served, ctpot));
    cJSON_AddNumberToObject(o, "output_tokens_per_s_per_device",
                            val(&c, (guint)served, ctok) / val(&c, (guint)served, cdev));
    cJSON_AddItemToObject(obj, "serving_under_latency_bound", o);
  }
  if (best >= 0 && budget && (budget->tokens > 0 || budget->samples > 0)) {
    /* the fastest point processes the budget first: time = budget / its rate */
    const double rate = budget->tokens > 0 ? val(&c, (guint)best, ctok) : val(&c, (guint)best, ct);
    cJSON *o = point_json(&c, (guint)best, sp, base_t);
    cJSON_AddNumberToObject(o, budget->tokens > 0 ? "budget_tokens" : "budget_samples",
                            budget->tokens > 0 ? budget->tokens : budget->samples);
    cJSON_AddNumberToObject(o, "time_to_train_s", (budget->tokens > 0 ? budget->tokens : budget->samples) / rate);
    cJSON_AddNumberToObject(o, "time_to_train_days", (budget->tokens > 0 ? budget->tokens : budget->samples) / rate / 86400.0);
    cJSON_AddItemToObject(obj, "time_to_train", o);
  }

  if (bounded) {
    cJSON *lb = cJSON_AddObjectToObject(root, "latency_bound");
    if (budget->ttft_max_s > 0) cJSON_AddNumberToObject(lb, "time_to_first_token_max_s", budget->ttft_max_s);
    if (budget->tpot_max_s > 0) cJSON_AddNumberToObject(lb, "time_per_output_token_max_s", budget->tpot_max_s);
    cJSON_AddNumberToObject(lb, "points_simulated", simulated);
    cJSON_AddNumberToObject(lb, "points_meeting", meeting);
  }

  /* per layer kind: its strategies with the other kinds at FSDP (MAD-Max's per-kind study) */
  cJSON *kinds = cJSON_AddArrayToObject(root, "per_layer_kind");
  int like = base;
  for (guint r = 0; r < n && like < 0; r++)
    if (fsdp_elsewhere(&c, sp, r, -1, 0)) like = (int)r;
  for (guint k = 0; k < sp->n_kinds && like >= 0; k++) {
    g_autofree char *name = g_strdup_printf("%s_strategy", mm_block_kind_names[sp->kinds[k].kind]);
    int kb = -1, kw = -1;
    guint tried = 0;
    for (guint r = 0; r < n; r++) {
      if (val(&c, r, cf) <= 0 || strcmp(str(&c, r, cs), "ok") != 0 || !fsdp_elsewhere(&c, sp, r, (int)k, (guint)like)) continue;
      tried++;
      if (kb < 0 || val(&c, r, ct) > val(&c, (guint)kb, ct)) kb = (int)r;
      if (kw < 0 || val(&c, r, ct) < val(&c, (guint)kw, ct)) kw = (int)r;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", mm_block_kind_names[sp->kinds[k].kind]);
    cJSON_AddNumberToObject(o, "strategies_that_fit", tried);
    if (kb >= 0) {
      cJSON_AddStringToObject(o, "best", str(&c, (guint)kb, col(&c, name)));
      if (base_t > 0) cJSON_AddNumberToObject(o, "best_speedup_over_fsdp", val(&c, (guint)kb, ct) / base_t);
      cJSON_AddStringToObject(o, "worst", str(&c, (guint)kw, col(&c, name)));
      if (base_t > 0) cJSON_AddNumberToObject(o, "worst_speedup_over_fsdp", val(&c, (guint)kw, ct) / base_t);
    }
    if (best >= 0) cJSON_AddStringToObject(o, "in_best_point", str(&c, (guint)best, col(&c, name)));
    cJSON_AddItemToArray(kinds, o);
  }

  /* the Pareto set of simulated points: less memory per device or more samples/s */
  cJSON *pareto = cJSON_AddArrayToObject(root, "pareto_memory_throughput");
  for (guint r = 0; r < n; r++) {
    if (strcmp(str(&c, r, cs), "oom") == 0) continue;
    const double m = val(&c, r, cm), t = val(&c, r, ct);
    gboolean dominated = FALSE;
    for (guint q = 0; q < n && !dominated; q++) {
      if (q == r || strcmp(str(&c, q, cs), "oom") == 0) continue;
      const double mq = val(&c, q, cm), tq = val(&c, q, ct);
      dominated = mq <= m && tq >= t && (mq < m || tq > t || q < r);
    }
    if (!dominated) cJSON_AddItemToArray(pareto, point_json(&c, r, sp, base_t));
  }
  csv_clear(&c);
  (void)error;
  return root;
}

/* ---- merging shards ---------------------------------------------------------- */

gboolean mm_sweep_merge(const char *dir, char **shard_dirs, guint n, GError **error)
{
  g_autofree char *out_path = g_build_filename(dir, "points.csv", NULL);
  char ***lines = g_new0(char **, n);
  guint *pos = g_new0(guint, n);
  gboolean ok = TRUE;
  char *header = NULL;
  for (guint i = 0; i < n && ok; i++) {
    g_autofree char *p = g_build_filename(shard_dirs[i], "points.csv", NULL);
    g_autofree char *text = NULL;
    if (!(ok = g_file_get_contents(p, &text, NULL, error))) break;
    lines[i] = g_strsplit(text, "\n", -1);
    if (!header) header = g_strdup(lines[i][0]);
    else if (g_strcmp0(header, lines[i][0]) != 0) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: its header differs from %s's: not shards of one sweep",
                  p, shard_dirs[0]);
      ok = FALSE;
    }
    pos[i] = 1;
  }
  FILE *out = NULL;
  if (ok && g_mkdir_with_parents(dir, 0755) != 0) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "--out %s: %s", dir, g_strerror(errno));
    ok = FALSE;
  }
  if (ok && !(out = fopen(out_path, "w"))) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", out_path, g_strerror(errno));
    ok = FALSE;
  }
  if (ok) {
    fprintf(out, "%s\n", header);
    for (;;) { /* k-way merge on the point index (each shard is in point order) */
      int pick = -1;
      guint64 lowest = G_MAXUINT64;
      for (guint i = 0; i < n; i++) {
        const char *l = lines[i][pos[i]];
        if (!l || !*l) continue;
        guint64 idx = g_ascii_strtoull(l, NULL, 10);
        if (idx < lowest) lowest = idx, pick = (int)i;
      }
      if (pick < 0) break;
      fprintf(out, "%s\n", lines[pick][pos[pick]++]);
    }
    if (fclose(out) != 0) {
      g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_IO, "%s: writing failed", out_path);
      ok = FALSE;
    }
  }
  for (guint i = 0; i < n; i++) g_strfreev(lines[i]);
  g_free(lines);
  g_free(pos);
  g_free(header);
  return ok;
}

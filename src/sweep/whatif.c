/* whatif: hardware components scaled singly and jointly, the strategy re-optimized over a sweep
 * space for each scaled system, and the speedups with the time terms that shrank. */
#include <math.h>
#include <string.h>

#include "sweep.h"

void mm_whatif_free(MmWhatif *w)
{
  if (!w) return;
  for (guint i = 0; i < w->n_rows; i++) {
    g_free(w->rows[i].name);
    g_free(w->rows[i].strategies);
  }
  g_free(w->rows);
  cJSON_Delete(w->inputs);
  g_free(w);
}

/* The best fitting point of the space under @scale: the most samples/s, the lowest index on a
 * tie (deterministic for any thread count). */
typedef struct {
  const MmInputs *in;
  const MmSweepSpace *sp;
  const double *scale;
  MmGraphCache *graphs; /* the points' shared graphs */
  GMutex lock;
  double best_rate;
  uint64_t best_point;
  gboolean found;
} Search;

#define CHUNK 32

static void search_chunk(gpointer data, gpointer user)
{
  Search *x = user;
  const uint64_t first = (GPOINTER_TO_SIZE(data) - 1) * CHUNK;
  double rate = 0;
  uint64_t point = 0;
  gboolean found = FALSE;
  for (uint64_t i = first; i < MIN(first + CHUNK, x->sp->n_points); i++) {
    MmSweepPoint p;
    mm_sweep_space_point(x->sp, x->in->model, i, &p);
    memcpy(p.point.scale, x->scale, sizeof p.point.scale);
    g_autoptr(MmSimulation) s = mm_simulation_prepare_cached(x->in, &p.point, x->graphs, NULL);
    if (!s || !s->memory->fits || !mm_simulation_run(s, FALSE, NULL)) continue;
    if (!found || s->metrics.samples_per_s > rate) rate = s->metrics.samples_per_s, point = i, found = TRUE;
  }
  g_mutex_lock(&x->lock);
  if (found && (!x->found || rate > x->best_rate || (rate == x->best_rate && point < x->best_point)))
    x->best_rate = rate, x->best_point = point, x->found = TRUE;
  g_mutex_unlock(&x->lock);
}

static void best_point(const MmInputs *in, const MmSweepSpace *sp, guint jobs, MmWhatifRow *row)
{
  g_autoptr(MmGraphCache) graphs = mm_graph_cache_new();
  Search x = {.in = in, .sp = sp, .scale = row->scale, .graphs = graphs};
  g_mutex_init(&x.lock);
  GThreadPool *pool = g_thread_pool_new(search_chunk, &x, (gint)jobs, TRUE, NULL);
  for (uint64_t c = 0; c * CHUNK < sp->n_points; c++) g_thread_pool_push(pool, GSIZE_TO_POINTER(c + 1), NULL);
  g_thread_pool_free(pool, FALSE, TRUE);
  g_mutex_clear(&x.lock);
  row->found = x.found;
  if (!x.found) return;
  MmSweepPoint p;
  mm_sweep_space_point(sp, in->model, x.best_point, &p);
  memcpy(p.point.scale, row->scale, sizeof p.point.scale);
  g_autoptr(MmSimulation) s = mm_simulation_new_point(in, &p.point, FALSE, NULL);
  g_assert(s); /* it ran during the search */
  GString *st = g_string_new("");
  for (guint k = 0; k < sp->n_kinds; k++) {
    g_autofree char *txt = mm_sweep_entry_text(&p.entries[k]);
    g_string_append_printf(st, "%s%s %s", k ? ", " : "", mm_block_kind_names[sp->kinds[k].kind], txt);
  }
  if (s->scenario->pp > 1) g_string_append_printf(st, ", pp %" G_GINT64_FORMAT, s->scenario->pp);
  row->point = x.best_point;
  row->strategies = g_string_free(st, FALSE);
  row->samples_per_s = s->metrics.samples_per_s;
  row->iteration_time_s = s->metrics.iteration_time_s;
  row->compute_s = s->metrics.compute_s;
  row->comm_s = s->metrics.comm_s;
  row->exposed_comm_s = s->metrics.exposed_comm_s;
  row->memory_per_device_bytes = s->memory->per_device_bytes;
  memcpy(row->comm_by_kind_s, s->metrics.comm_by_kind_s, sizeof row->comm_by_kind_s);
}

MmWhatif *mm_whatif_run(const MmInputs *in, const MmSweepSpace *sp, const double factor[MM_SCALE_COUNT], guint jobs)
{
  MmWhatif *w = g_new0(MmWhatif, 1);
  w->inputs = cJSON_CreateObject();
  mm_sweep_inputs_json(in, w->inputs);
  guint asked = 0;
  for (int k = 0; k < MM_SCALE_COUNT; k++) asked += factor[k] > 0 && factor[k] != 1.0;
  w->n_rows = 1 + asked + (asked > 1 ? 1 : 0);
  w->rows = g_new0(MmWhatifRow, w->n_rows);
  guint r = 0;
  w->rows[r++].name = g_strdup("baseline");
  for (int k = 0; k < MM_SCALE_COUNT; k++) {
    if (!(factor[k] > 0 && factor[k] != 1.0)) continue;
    w->rows[r].name = g_strdup_printf("%s x%g", mm_scale_names[k], factor[k]);
    w->rows[r++].scale[k] = factor[k];
  }
  if (asked > 1) {
    w->rows[r].name = g_strdup("all together");
    for (int k = 0; k < MM_SCALE_COUNT; k++) w->rows[r].scale[k] = factor[k] > 0 ? factor[k] : 0;
  }
  if (!jobs) jobs = MAX(1u, g_get_num_processors());
  for (guint i = 0; i < w->n_rows; i++) {
    best_point(in, sp, jobs, &w->rows[i]);
    const MmWhatifRow *b = &w->rows[0];
    w->rows[i].speedup = b->found && w->rows[i].found ? w->rows[i].samples_per_s / b->samples_per_s : 0;
  }
  /* joint improvement vs the product of the single ones: > 1 is super-linear */
  if (asked > 1 && w->rows[w->n_rows - 1].found) {
    double product = 1;
    for (guint i = 1; i + 1 < w->n_rows; i++) product *= w->rows[i].speedup > 0 ? w->rows[i].speedup : 1;
    w->joint_over_product = w->rows[w->n_rows - 1].speedup / product;
    double best_single = 0;
    for (guint i = 1; i + 1 < w->n_rows; i++) best_single = MAX(best_single, w->rows[i].speedup);
    w->joint_over_best_single = w->rows[w->n_rows - 1].speedup / best_single;
  }
  return w;
}

/* The terms of @row's best point that shrank most against the baseline's: "compute 4.1x,
 * all_gather 2.0x" (ratios of serialized time). (transfer full) */
static char *shrank(const MmWhatifRow *row, const MmWhatifRow *base)
{
  typedef struct {
    const char *name;
    double ratio;
  } Term;
  Term t[MM_COLL_COUNT + 1];
  guint n = 0;
  if (row->compute_s > 0) t[n++] = (Term){"compute", base->compute_s / row->compute_s};
  for (int k = 0; k < MM_COLL_COUNT; k++)
    if (row->comm_by_kind_s[k] > 0 && base->comm_by_kind_s[k] > 0)
      t[n++] = (Term){mm_coll_names[k], base->comm_by_kind_s[k] / row->comm_by_kind_s[k]};
  for (guint i = 1; i < n; i++) /* insertion sort, largest ratio first */
    for (guint j = i; j > 0 && t[j].ratio > t[j - 1].ratio; j--) {
      Term x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  GString *s = g_string_new("");
  for (guint i = 0; i < MIN(n, 2u); i++)
    if (t[i].ratio > 1.005) g_string_append_printf(s, "%s%s %.2fx", s->len ? ", " : "", t[i].name, t[i].ratio);
  if (!s->len) g_string_append(s, "-");
  return g_string_free(s, FALSE);
}

cJSON *mm_whatif_json(const MmWhatif *w)
{
  cJSON *root = cJSON_CreateObject();
  cJSON_AddItemToObject(root, "inputs", cJSON_Duplicate(w->inputs, TRUE));
  cJSON *rows = cJSON_AddArrayToObject(root, "systems");
  for (guint i = 0; i < w->n_rows; i++) {
    const MmWhatifRow *r = &w->rows[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->name);
    cJSON *sc = cJSON_AddObjectToObject(o, "scale");
    for (int k = 0; k < MM_SCALE_COUNT; k++) cJSON_AddNumberToObject(sc, mm_scale_names[k], r->scale[k] > 0 ? r->scale[k] : 1);
    cJSON_AddBoolToObject(o, "fits", r->found);
    if (r->found) {
      cJSON_AddNumberToObject(o, "point", (double)r->point);
      cJSON_AddStringToObject(o, "best_strategy", r->strategies);
      cJSON_AddNumberToObject(o, "samples_per_s", r->samples_per_s);
      cJSON_AddNumberToObject(o, "iteration_time_s", r->iteration_time_s);
      cJSON_AddNumberToObject(o, "speedup", r->speedup);
      cJSON_AddNumberToObject(o, "compute_s", r->compute_s);
      cJSON_AddNumberToObject(o, "comm_s", r->comm_s);
      cJSON_AddNumberToObject(o, "exposed_comm_s", r->exposed_comm_s);
      cJSON_AddNumberToObject(o, "memory_per_device_bytes", r->memory_per_device_bytes);
      cJSON *ck = cJSON_AddObjectToObject(o, "comm_by_kind_s");
      for (int k = 0; k < MM_COLL_COUNT; k++) cJSON_AddNumberToObject(ck, mm_coll_names[k], r->comm_by_kind_s[k]);
      g_autofree char *sh = shrank(r, &w->rows[0]);
      cJSON_AddStringToObject(o, "shrank", sh);
    }
    cJSON_AddItemToArray(rows, o);
  }
  if (w->joint_over_product > 0) {
    cJSON_AddNumberToObject(root, "joint_over_product_of_singles", w->joint_over_product);
    cJSON_AddNumberToObject(root, "joint_over_best_single", w->joint_over_best_single);
  }
  return root;
}

void mm_whatif_text(FILE *out, const MmWhatif *w)
{
  fprintf(out, "%-20s %-44s %12s %8s  %s\n", "system", "best strategy", "samples/s", "speedup", "what shrank (vs baseline)");
  for (guint i = 0; i < w->n_rows; i++) {
    const MmWhatifRow *r = &w->rows[i];
    if (!r->found) {
      fprintf(out, "%-20s %-44s\n", r->name, "(nothing fits)");
      continue;
    }
    g_autofree char *sh = shrank(r, &w->rows[0]);
    /* nothing fits on the baseline: no speedup over it (the JSON's 0), not a 0.00x slowdown */
    g_autofree char *sp = w->rows[0].found ? g_strdup_printf("%7.2fx", r->speedup) : g_strdup("-");
    fprintf(out, "%-20s %-44s %12.4g %8s  %s\n", r->name, r->strategies, r->samples_per_s, sp, sh);
  }
  if (w->joint_over_product > 0)
    fprintf(out, "joint improvement: %.2fx the best single one, %.2fx the product of the single ones (%s)\n",
            w->joint_over_best_single, w->joint_over_product,
            w->joint_over_product > 1.005 ? "super-linear" : w->joint_over_product < 0.995 ? "sub-linear" : "linear");
}

/* validate: run the cases of a validation file and compare predictions with published measurements. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "fused/fused.h"
#include "config/json.h" /* the schema-table parser the config loaders use */
#include "sweep/sweep.h"
#include "validate.h"

G_DEFINE_QUARK(mm-validate-error-quark, mm_validate_error)

/* How a predicted value is derived from a simulation, per metric name (predict()). */
typedef enum {
  M_ITERATION, M_TOKENS_PER_GPU, M_SAMPLES, M_MEGATRON_TFLOPS, M_MODEL_TFLOPS, M_SERIALIZED, M_EXPOSED, M_MFU,
  M_PREFILL, M_DECODE, M_REQUEST, /* serving metrics: the config needs an "inference" object */
} Metric;

static const char *const metric_names[] = {
  "iteration_time_s",        /* seconds per iteration */
  "tokens_per_s_per_gpu",    /* training throughput per device */
  "samples_per_s",           /* e.g. DLRM queries per second */
  "megatron_tflops_per_gpu", /* Megatron's count: 96 B s l h^2 (1 + s/6h + V/16lh), recompute included */
  "model_tflops_per_gpu",    /* madmax model FLOPs per second per device */
  "serialized_time_s",       /* compute + embedding + communication, no overlap */
  "exposed_comm_fraction",   /* exposed / communication time */
  "mfu",
  "prefill_latency_s",       /* serving: time to first token */
  "decode_latency_s_per_token", /* serving: time per output token */
  "request_latency_s",       /* serving: prefill + (output - 1) decode steps */
  NULL,
};

typedef struct {
  char *id, *group, *source, *model, *hardware, *config, *note;
  int metric;
  double measured;
  int64_t nodes, global_batch, micro_batch, pipeline_stages;
} CaseRaw;
#define CASE(f) ((gssize)offsetof(CaseRaw, f))

static const MmField case_fields[] = {
  {"id", MM_F_STR, TRUE, 0, 0, 0, NULL, CASE(id), NULL, "identifier (the public.json id where there is one)"},
  {"group", MM_F_STR, FALSE, 0, 0, 0, NULL, CASE(group), NULL, "family of measurements (per-group medians)"},
  {"source", MM_F_STR, TRUE, 0, 0, 0, NULL, CASE(source), NULL, "publication, table, URL"},
  {"model", MM_F_STR, TRUE, 0, 0, 0, NULL, CASE(model), NULL, "model file"},
  {"hardware", MM_F_STR, TRUE, 0, 0, 0, NULL, CASE(hardware), NULL, "system file"},
  {"nodes", MM_F_INT, FALSE, 0, 1 << 20, 0, NULL, CASE(nodes), "nodes", "nodes of the system used (0: all)"},
  {"config", MM_F_STR, TRUE, 0, 0, 0, NULL, CASE(config), NULL, "task + parallelism file"},
  {"global_batch", MM_F_INT, FALSE, 0, MM_INT_MAX, 0, NULL, CASE(global_batch), "samples",
   "the measured run's global batch (overrides the config's)"},
  {"micro_batch", MM_F_INT, FALSE, 0, MM_INT_MAX, 0, NULL, CASE(micro_batch), "samples",
   "the measured run's micro-batch (overrides the config's)"},
  {"pipeline_stages", MM_F_INT, FALSE, 0, 1 << 20, 0, NULL, CASE(pipeline_stages), "stages",
   "the measured run's pipeline stages (overrides the config's pipeline degree)"},
  {"metric", MM_F_ENUM, TRUE, 0, 0, 0, metric_names, CASE(metric), NULL, "what was measured"},
  {"measured", MM_F_NUM, TRUE, 1e-12, 1e18, 0, NULL, CASE(measured), NULL, "the published value"},
  {"note", MM_F_STR, FALSE, 0, 0, 0, NULL, CASE(note), NULL, "how the case maps onto madmax"},
  MM_FIELDS_END,
};

typedef struct {
  char *name, *root;
} FileRaw;

static const MmField file_fields[] = {
  {"name", MM_F_STR, TRUE, 0, 0, 0, NULL, (gssize)offsetof(FileRaw, name), NULL, "title of the table"},
  {"root", MM_F_STR, FALSE, 0, 0, 0, NULL, (gssize)offsetof(FileRaw, root), NULL,
   "directory the case paths are relative to: relative to this file, or absolute"},
  {"cases", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL, "end-to-end cases"},
  {"skipped", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL, "{id, reason} of measurements not expressible yet"},
  {"collective_cases", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "measured collective curves: bus bandwidth per size (or per group size)"},
  {"overlap_cases", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "measured GEMM + collective kernels: serial and overlapped times (src/fused decomposed overlap)"},
  MM_FIELDS_END,
};

/* An overlap-kernel case: one GEMM beside its collective (mm_overlap_run), the times measured. */
typedef struct {
  char *id, *group, *source, *hardware, *note;
  int op, dtype, schedule, comm;
  int64_t m, n, k, ranks;
  double gemm_ms, coll_ms, total_ms, overlap_ms;
} OverlapRaw;
#define OVL(f) ((gssize)offsetof(OverlapRaw, f))

static const MmField overlap_fields[] = {
  {"id", MM_F_STR, TRUE, 0, 0, 0, NULL, OVL(id), NULL, "identifier (the public.json id)"},
  {"group", MM_F_STR, FALSE, 0, 0, 0, NULL, OVL(group), NULL, "family of measurements"},
  {"source", MM_F_STR, TRUE, 0, 0, 0, NULL, OVL(source), NULL, "publication, table"},
  {"hardware", MM_F_STR, TRUE, 0, 0, 0, NULL, OVL(hardware), NULL, "system file"},
  {"op", MM_F_ENUM, TRUE, 0, 0, 0, mm_overlap_op_names, OVL(op), NULL, "ag-gemm, a2a-gemm or gemm-rs"},
  {"m", MM_F_INT, TRUE, 1, 1099511627776.0, 0, NULL, OVL(m), NULL, "rows of the layer's GEMM"},
  {"n", MM_F_INT, TRUE, 1, 1099511627776.0, 0, NULL, OVL(n), NULL, "columns of the layer's GEMM (ag-gemm: split over ranks)"},
  {"k", MM_F_INT, TRUE, 1, 1099511627776.0, 0, NULL, OVL(k), NULL, "inner dimension (gemm-rs: split over ranks)"},
  {"ranks", MM_F_INT, TRUE, 2, 1 << 20, 0, NULL, OVL(ranks), NULL, "GPUs"},
  {"dtype", MM_F_ENUM, FALSE, 0, 0, MM_DTYPE_BF16, mm_dtype_names, OVL(dtype), NULL, "element type"},
  {"schedule", MM_F_ENUM, FALSE, 0, 0, MM_OVERLAP_FLUX, mm_overlap_schedule_names, OVL(schedule), NULL,
   "the overlapped implementation measured"},
  {"comm", MM_F_ENUM, FALSE, 0, 0, MM_OVERLAP_COMM_DMA, mm_overlap_comm_names, OVL(comm), NULL,
   "who drives the decomposed transfers (dma, cu)"},
  {"baseline_gemm_ms", MM_F_NUM, FALSE, 0, 1e9, 0, NULL, OVL(gemm_ms), "ms", "the GEMM alone (0: not measured)"},
  {"baseline_collective_ms", MM_F_NUM, FALSE, 0, 1e9, 0, NULL, OVL(coll_ms), "ms", "the collective alone"},
  {"baseline_total_ms", MM_F_NUM, FALSE, 0, 1e9, 0, NULL, OVL(total_ms), "ms", "collective and GEMM one after the other"},
  {"overlap_total_ms", MM_F_NUM, FALSE, 0, 1e9, 0, NULL, OVL(overlap_ms), "ms", "the overlapped implementation"},
  {"note", MM_F_STR, FALSE, 0, 0, 0, NULL, OVL(note), NULL, "how the case maps onto madmax"},
  MM_FIELDS_END,
};

typedef struct {
  char *id, *group, *source, *hardware, *note;
  int kind, algorithm;
  int64_t ranks, stride;
} CurveRaw;
#define CURVE(f) ((gssize)offsetof(CurveRaw, f))

static const MmField curve_fields[] = {
  {"id", MM_F_STR, TRUE, 0, 0, 0, NULL, CURVE(id), NULL, "identifier"},
  {"group", MM_F_STR, FALSE, 0, 0, 0, NULL, CURVE(group), NULL, "platform family"},
  {"source", MM_F_STR, TRUE, 0, 0, 0, NULL, CURVE(source), NULL, "publication"},
  {"hardware", MM_F_STR, TRUE, 0, 0, 0, NULL, CURVE(hardware), NULL, "system file"},
  {"kind", MM_F_ENUM, TRUE, 0, 0, 0, mm_coll_names, CURVE(kind), NULL, "collective"},
  {"ranks", MM_F_INT, TRUE, 0, 1 << 24, 0, NULL, CURVE(ranks), NULL, "group size (0: given per point)"},
  {"stride", MM_F_INT, FALSE, 1, 1 << 24, 1, NULL, CURVE(stride), NULL, "member distance"},
  {"algorithm", MM_F_ENUM, FALSE, 0, 0, MM_ALGO_AUTO, mm_algorithm_names, CURVE(algorithm), NULL,
   "what the measurement forced (auto: the library's choice)"},
  {"points", MM_F_ARRAY, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL, "[bytes, bus GB/s] or [bytes, bus GB/s, ranks]"},
  {"note", MM_F_STR, FALSE, 0, 0, 0, NULL, CURVE(note), NULL, "how the case maps onto madmax"},
  MM_FIELDS_END,
};

/* The schema-table parser is src/config's and raises MM_CONFIG_ERROR; a fault of the cases
 * file itself is this module's: the same message under MM_VALIDATE_ERROR. Takes @cfg;
 * returns NULL, for `return cases_error(...)`. */
static gpointer cases_error(GError **error, GError *cfg)
{
  g_assert(cfg->domain == MM_CONFIG_ERROR);
  MmValidateError code = cfg->code == MM_CONFIG_ERROR_IO      ? MM_VALIDATE_ERROR_IO
                         : cfg->code == MM_CONFIG_ERROR_PARSE ? MM_VALIDATE_ERROR_PARSE
                                                              : MM_VALIDATE_ERROR_INVALID;
  g_set_error_literal(error, MM_VALIDATE_ERROR, code, cfg->message);
  g_error_free(cfg);
  return NULL;
}

/* @path under @base, unless @path is absolute. (transfer full) */
static char *resolve(const char *base, const char *path)
{
  return g_path_is_absolute(path) ? g_strdup(path) : g_build_filename(base, path, NULL);
}

/* The metrics a config without an "inference" object produces, for messages. (transfer full) */
static char *training_metrics(void)
{
  GString *s = g_string_new(NULL);
  for (int m = 0; m < M_PREFILL; m++) g_string_append_printf(s, "%s%s", m ? ", " : "", metric_names[m]);
  return g_string_free(s, FALSE);
}

static void row_free(gpointer p)
{
  MmValidationRow *r = p;
  g_free(r->id);
  g_free(r->group);
  g_free(r->source);
  g_free(r->metric);
  g_free(r->unit);
  g_free(r->note);
  g_free(r->curve);
  g_free(r);
}

void mm_validation_free(MmValidation *v)
{
  if (!v) return;
  g_free(v->path);
  g_free(v->name);
  g_free(v->worst_id);
  if (v->rows) g_ptr_array_unref(v->rows);
  if (v->skipped) g_ptr_array_unref(v->skipped);
  g_free(v);
}

/* Megatron-LM's FLOPs per iteration (Narayanan et al. SC'21, eq. 3): with activation
 * recomputation, 96 B s l h^2 (1 + s / 6h + V / 16 l h). */
static double megatron_flops(const MmSimulation *sim)
{
  const MmModel *m = sim->model;
  double l = 0, h = 0, s = 0, V = 0;
  for (guint i = 0; i < m->n_blocks; i++) {
    const MmBlock *b = &m->blocks[i];
    if (b->kind == MM_BLOCK_TRANSFORMER && l == 0) l = (double)b->count, h = (double)b->hidden, s = (double)b->seq_len;
    if (b->kind == MM_BLOCK_LM_HEAD) V = (double)b->vocab;
  }
  double B = (double)sim->scenario->global_batch;
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

static double predict(const MmSimulation *sim, int metric)
{
  const MmRunMetrics *r = &sim->metrics;
  double n = (double)sim->scenario->devices, t = r->iteration_time_s;
  switch ((Metric)metric) {
  case M_ITERATION: return t;
  case M_TOKENS_PER_GPU: return r->tokens_per_s / n;
  case M_SAMPLES: return r->samples_per_s;
  case M_MEGATRON_TFLOPS: return megatron_flops(sim) / (t * n) / 1e12;
  case M_MODEL_TFLOPS: return r->model_flops / (t * n) / 1e12;
  case M_SERIALIZED: return r->compute_s + r->embedding_s + r->comm_s;
  case M_EXPOSED: return r->exposed_comm_fraction;
  case M_MFU: return r->mfu;
  case M_PREFILL: return sim->serving.ttft_s;
  case M_DECODE: return sim->serving.tpot_s;
  case M_REQUEST: return sim->serving.latency_s;
  default: g_assert_not_reached();
  }
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of |error| over the rows of @group (all rows when NULL); *n receives the count. */
static double median_abs(const MmValidation *v, const char *group, guint *n)
{
  g_autofree double *e = g_new(double, v->rows->len + 1);
  guint k = 0;
  for (guint i = 0; i < v->rows->len; i++) {
    const MmValidationRow *r = g_ptr_array_index(v->rows, i);
    if (!group || strcmp(r->group, group) == 0) e[k++] = fabs(r->error_frac);
  }
  *n = k;
  if (k == 0) return 0;
  qsort(e, k, sizeof(double), cmp_double);
  return k % 2 ? e[k / 2] : 0.5 * (e[k / 2 - 1] + e[k / 2]);
}

/* Prints one line per group, in first-appearance order (Markdown rows or text). */
static void group_medians(FILE *out, const MmValidation *v, gboolean md)
{
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < v->rows->len; i++) {
    const MmValidationRow *r = g_ptr_array_index(v->rows, i);
    if (!r->group[0] || !g_hash_table_add(seen, r->group)) continue;
    guint n;
    double med = median_abs(v, r->group, &n);
    if (md)
      fprintf(out, "| %s | %u | %.1f%% |\n", r->group, n, 100.0 * med);
    else
      fprintf(out, "    %-45s %2u cases  %6.1f%%\n", r->group, n, 100.0 * med);
  }
}

/* The system file @hardware (under @base) of curve or overlap case @id, its calibrated device
 * where asked; errors name the cases file and the case. (transfer full) */
static MmHardware *case_hardware(const char *cases_path, const char *base, const char *hardware, gboolean calibrated,
                                 const char *what, const char *id, GError **error)
{
  g_autofree char *hp = resolve(base, hardware);
  g_autoptr(GError) herr = NULL;
  g_autoptr(MmHardware) hw = mm_hardware_load(hp, &herr);
  gboolean used = FALSE;
  if (hw && calibrated && !mm_hardware_use_calibrated(hw, &used, &herr)) g_clear_pointer(&hw, mm_hardware_free);
  if (!hw) {
    g_set_error(error, herr->domain, herr->code, "%s: %s %s: %s", cases_path, what, id, herr->message);
    return NULL;
  }
  return g_steal_pointer(&hw);
}

/* A row comparing @predicted with @measured (its error, fits TRUE); takes @id. */
static MmValidationRow *row_new(char *id, const char *group, const char *source, const char *metric, double measured,
                                double predicted, const char *note)
{
  MmValidationRow *r = g_new0(MmValidationRow, 1);
  r->id = id;
  r->group = g_strdup(group ? group : "");
  r->source = g_strdup(source);
  r->metric = g_strdup(metric);
  r->measured = measured;
  r->predicted = predicted;
  r->error_frac = predicted / measured - 1.0;
  r->fits = TRUE;
  r->note = g_strdup(note);
  return r;
}

/* Appends @path with @label unless @seen has it. */
static void add_input(GPtrArray *labels, GPtrArray *paths, GHashTable *seen, const char *label, const char *path)
{
  if (g_hash_table_contains(seen, path)) return;
  g_hash_table_add(seen, g_strdup(path));
  g_ptr_array_add(labels, g_strdup(label));
  g_ptr_array_add(paths, g_strdup(path));
}

void mm_validation_inputs(const char *cases_path, gboolean calibrated, GPtrArray *labels, GPtrArray *paths)
{
  static const char *const lists[] = {"cases", "collective_cases", "overlap_cases"};
  static const char *const keys[] = {"model", "hardware", "config"};
  static const char *const key_labels[] = {"CASES.json's model", "CASES.json's hardware", "CASES.json's config"};
  g_autoptr(cJSON) root = mm_json_load_file(cases_path, NULL);
  const cJSON *rel = cJSON_GetObjectItemCaseSensitive(root, "root");
  g_autofree char *dir = g_path_get_dirname(cases_path);
  g_autofree char *base = resolve(dir, cJSON_IsString(rel) ? rel->valuestring : ".");
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint l = 0; l < G_N_ELEMENTS(lists); l++) {
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, lists[l]);
    for (const cJSON *it = cJSON_IsArray(list) ? list->child : NULL; it; it = it->next)
      for (guint k = 0; k < G_N_ELEMENTS(keys); k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, keys[k]);
        if (!cJSON_IsString(v)) continue;
        g_autofree char *p = resolve(base, v->valuestring);
        const gboolean is_new = !g_hash_table_contains(seen, p);
        add_input(labels, paths, seen, key_labels[k], p);
        if (k == 1 && is_new) mm_hardware_list_files(p, key_labels[k], calibrated, labels, paths);
      }
  }
}

MmValidation *mm_validation_run(const char *cases_path, GError **error)
{
  return mm_validation_run_calibrated(cases_path, FALSE, error);
}

MmValidation *mm_validation_run_calibrated(const char *cases_path, gboolean calibrated, GError **error)
{
  GError *jerr = NULL;
  g_autoptr(cJSON) root = mm_json_load_file(cases_path, &jerr);
  if (!root) return cases_error(error, jerr);
  MmJsonCtx ctx = {cases_path};
  FileRaw fr = {0};
  gboolean ok = mm_json_apply(&ctx, root, "$", file_fields, &fr, NULL, &jerr);
  g_autofree char *name = fr.name, *rel_root = fr.root;
  if (!ok) return cases_error(error, jerr);
  g_autofree char *dir = g_path_get_dirname(cases_path);
  g_autofree char *base = resolve(dir, rel_root ? rel_root : ".");

  g_autoptr(MmValidation) v = g_new0(MmValidation, 1);
  v->path = g_strdup(cases_path);
  v->name = g_steal_pointer(&name);
  v->rows = g_ptr_array_new_with_free_func(row_free);
  v->skipped = g_ptr_array_new_with_free_func(g_free);

  const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
  int i = 0;
  for (const cJSON *it = cases ? cases->child : NULL; it; it = it->next, i++) {
    g_autofree char *jp = g_strdup_printf("$.cases[%d]", i);
    if (!mm_json_expect(&ctx, it, jp, cJSON_Object, "a case object", &jerr)) return cases_error(error, jerr);
    CaseRaw c = {0};
    ok = mm_json_apply(&ctx, it, jp, case_fields, &c, NULL, &jerr);
    g_autofree char *id = c.id, *group = c.group, *source = c.source, *model = c.model, *hardware = c.hardware, *config = c.config,
                    *note = c.note;
    if (!ok) return cases_error(error, jerr);
    g_autofree char *mp = resolve(base, model);
    g_autofree char *hp = resolve(base, hardware);
    g_autofree char *cp = resolve(base, config);
    g_autoptr(GError) serr = NULL;
    MmSimOptions opt = {.nodes = c.nodes, .global_batch = c.global_batch, .micro_batch = c.micro_batch,
                        .pipeline_degree = c.pipeline_stages, .calibrated = calibrated};
    g_autoptr(MmSimulation) sim = mm_simulation_new(mp, hp, cp, &opt, &serr);
    if (sim && c.metric >= M_PREFILL && !sim->decode_plan) {
      g_autofree char *allowed = training_metrics();
      g_set_error(error, MM_VALIDATE_ERROR, MM_VALIDATE_ERROR_METRIC,
                  "%s: %s.metric: \"%s\" is a serving metric, but case %s's config %s has no \"inference\" object; "
                  "expected one of %s (or a serving config)",
                  cases_path, jp, metric_names[c.metric], id, config, allowed);
      return NULL;
    }
    if (!sim) {
      g_set_error(error, serr->domain, serr->code, "%s: case %s: %s", cases_path, id, serr->message);
      return NULL;
    }
    MmValidationRow *r = row_new(g_steal_pointer(&id), group, source, metric_names[c.metric], c.measured,
                                 predict(sim, c.metric), note);
    r->fits = sim->memory->fits;
    g_ptr_array_add(v->rows, r);
  }
  const cJSON *curves = cJSON_GetObjectItemCaseSensitive(root, "collective_cases");
  i = 0;
  for (const cJSON *it = curves ? curves->child : NULL; it; it = it->next, i++) {
    g_autofree char *jp = g_strdup_printf("$.collective_cases[%d]", i);
    if (!mm_json_expect(&ctx, it, jp, cJSON_Object, "a curve object", &jerr)) return cases_error(error, jerr);
    CurveRaw c = {0};
    ok = mm_json_apply(&ctx, it, jp, curve_fields, &c, NULL, &jerr);
    g_autofree char *id = c.id, *group = c.group, *source = c.source, *hardware = c.hardware, *note = c.note;
    if (!ok) return cases_error(error, jerr);
    g_autoptr(MmHardware) hw = case_hardware(cases_path, base, hardware, calibrated, "curve", id, error);
    if (!hw) return NULL;
    MmLinks links;
    mm_comm_links(hw, &links);
    int k = 0;
    for (const cJSON *pt = cJSON_GetObjectItemCaseSensitive(it, "points")->child; pt; pt = pt->next, k++) {
      g_autofree char *pp = g_strdup_printf("%s.points[%d]", jp, k);
      int np = cJSON_GetArraySize(pt);
      const cJSON *pb = cJSON_GetArrayItem(pt, 0), *pv = cJSON_GetArrayItem(pt, 1), *rk = cJSON_GetArrayItem(pt, 2);
      /* bounds as the curve's own "ranks" field; a size past 2^50 bytes (or one that overflowed to
       * infinity, e.g. 1e999) is no measurement */
      if (!cJSON_IsArray(pt) || np < 2 || np > 3 || !cJSON_IsNumber(pb) || !cJSON_IsNumber(pv) ||
          !(pb->valuedouble > 0 && pb->valuedouble <= 0x1p50) || !(pv->valuedouble > 0 && isfinite(pv->valuedouble)) ||
          (np == 3 && (!cJSON_IsNumber(rk) || !(rk->valuedouble >= 2 && rk->valuedouble <= 1 << 24))) ||
          (np == 2 && c.ranks < 1)) {
        g_set_error(error, MM_VALIDATE_ERROR, MM_VALIDATE_ERROR_INVALID,
                    "%s: %s: expected [bytes in (0, 2^50], bus GB/s > 0] (or [bytes, GB/s, ranks in 2..2^24] when "
                    "\"ranks\" is 0)",
                    cases_path, pp);
        return NULL;
      }
      int64_t ranks = np == 3 ? (int64_t)rk->valuedouble : c.ranks;
      MmCollective coll = {.kind = (MmCollKind)c.kind, .bytes = pb->valuedouble, .degree = ranks, .stride = c.stride,
                           .algorithm = (MmAlgorithm)c.algorithm, .skew = 1.0};
      MmCommCost cost;
      mm_comm_cost(hw, &links, &coll, &cost);
      g_autofree char *size = np == 3 ? g_strdup_printf("%" G_GINT64_FORMAT " GPUs", ranks) : mm_fmt_bytes(pb->valuedouble);
      MmValidationRow *r = row_new(g_strdup_printf("%s @ %s", id, size), group, source, "bus_bw_GBps",
                                   pv->valuedouble, cost.bus_bw_Bps / 1e9, note);
      r->curve = g_strdup(id);
      g_ptr_array_add(v->rows, r);
    }
  }
  const cJSON *ovl = cJSON_GetObjectItemCaseSensitive(root, "overlap_cases");
  i = 0;
  for (const cJSON *it = ovl ? ovl->child : NULL; it; it = it->next, i++) {
    g_autofree char *jp = g_strdup_printf("$.overlap_cases[%d]", i);
    if (!mm_json_expect(&ctx, it, jp, cJSON_Object, "an overlap case object", &jerr)) return cases_error(error, jerr);
    OverlapRaw c = {0};
    ok = mm_json_apply(&ctx, it, jp, overlap_fields, &c, NULL, &jerr);
    g_autofree char *id = c.id, *group = c.group, *source = c.source, *hardware = c.hardware, *note = c.note;
    if (!ok) return cases_error(error, jerr);
    g_autoptr(MmHardware) hw = case_hardware(cases_path, base, hardware, calibrated, "overlap case", id, error);
    if (!hw) return NULL;
    const MmOverlapSpec spec = {(MmOverlapOp)c.op, c.m, c.n, c.k, c.ranks, (MmDtype)c.dtype, (MmOverlapComm)c.comm};
    if (!mm_overlap_applies(spec.op, (MmOverlapSchedule)c.schedule)) {
      g_set_error(error, MM_VALIDATE_ERROR, MM_VALIDATE_ERROR_INVALID, "%s: %s.schedule: %s does not apply to %s",
                  cases_path, jp, mm_overlap_schedule_names[c.schedule], mm_overlap_op_names[c.op]);
      return NULL;
    }
    g_autoptr(GError) oerr = NULL;
    g_autoptr(MmOverlapResult) res = mm_overlap_run(hw, &spec, &oerr);
    if (!res) {
      g_set_error(error, MM_VALIDATE_ERROR, MM_VALIDATE_ERROR_INVALID, "%s: %s: %s", cases_path, jp, oerr->message);
      return NULL;
    }
    const struct {
      const char *metric;
      double measured_ms, predicted_s;
    } mets[] = {
      {"baseline_gemm_ms", c.gemm_ms, res->gemm_s},
      {"baseline_collective_ms", c.coll_ms, res->comm_s},
      {"baseline_total_ms", c.total_ms, res->runs[MM_OVERLAP_SERIAL].time_s},
      {"overlap_total_ms", c.overlap_ms, res->runs[c.schedule].time_s},
    };
    for (guint q = 0; q < G_N_ELEMENTS(mets); q++) {
      if (!(mets[q].measured_ms > 0)) continue;
      char *rid = g_strdup_printf("%s:%s", id, q == 3 ? mm_overlap_schedule_names[c.schedule] : mets[q].metric + 9);
      MmValidationRow *r = row_new(rid, group, source, mets[q].metric, mets[q].measured_ms,
                                   mets[q].predicted_s * 1e3, note);
      r->unit = g_strdup("ms");
      g_ptr_array_add(v->rows, r);
    }
  }
  const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(root, "skipped");
  i = 0;
  for (const cJSON *it = skipped ? skipped->child : NULL; it; it = it->next, i++) {
    const cJSON *sid = cJSON_GetObjectItemCaseSensitive(it, "id");
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(it, "reason");
    if (!cJSON_IsString(sid) || !cJSON_IsString(why)) {
      g_autofree char *jp = g_strdup_printf("$.skipped[%d]", i);
      g_set_error(error, MM_VALIDATE_ERROR, MM_VALIDATE_ERROR_INVALID, "%s: %s: expected {\"id\": string, \"reason\": string}",
                  cases_path, jp);
      return NULL;
    }
    g_ptr_array_add(v->skipped, g_strdup_printf("%s: %s", sid->valuestring, why->valuestring));
  }

  guint n = v->rows->len;
  if (n > 0) {
    g_autofree double *abs_err = g_new(double, n);
    for (guint k = 0; k < n; k++) {
      const MmValidationRow *r = g_ptr_array_index(v->rows, k);
      abs_err[k] = fabs(r->error_frac);
      if (abs_err[k] >= v->worst_abs_error) {
        v->worst_abs_error = abs_err[k];
        g_free(v->worst_id);
        v->worst_id = g_strdup(r->id);
      }
    }
    qsort(abs_err, n, sizeof(double), cmp_double);
    v->median_abs_error = n % 2 ? abs_err[n / 2] : 0.5 * (abs_err[n / 2 - 1] + abs_err[n / 2]);
    v->p90_abs_error = abs_err[MIN(n - 1, (guint)ceil(0.9 * n) - 1)];
  }
  return g_steal_pointer(&v);
}

cJSON *mm_validation_json(const MmValidation *v)
{
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "name", v->name);
  cJSON_AddStringToObject(root, "path", v->path);
  cJSON *rows = cJSON_AddArrayToObject(root, "cases");
  for (guint k = 0; k < v->rows->len; k++) {
    const MmValidationRow *r = g_ptr_array_index(v->rows, k);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", r->id);
    cJSON_AddStringToObject(o, "metric", r->metric);
    cJSON_AddNumberToObject(o, "measured", r->measured);
    cJSON_AddNumberToObject(o, "predicted", r->predicted);
    cJSON_AddNumberToObject(o, "error_frac", r->error_frac);
    cJSON_AddBoolToObject(o, "fits", r->fits);
    cJSON_AddStringToObject(o, "source", r->source);
    cJSON_AddItemToArray(rows, o);
  }
  cJSON *sum = cJSON_AddObjectToObject(root, "summary");
  cJSON_AddNumberToObject(sum, "cases", v->rows->len);
  cJSON_AddNumberToObject(sum, "median_abs_error_frac", v->median_abs_error);
  cJSON_AddNumberToObject(sum, "p90_abs_error_frac", v->p90_abs_error);
  cJSON_AddNumberToObject(sum, "worst_abs_error_frac", v->worst_abs_error);
  cJSON_AddStringToObject(sum, "worst_case", v->worst_id ? v->worst_id : "");
  cJSON *sk = cJSON_AddArrayToObject(root, "skipped");
  for (guint k = 0; k < v->skipped->len; k++) cJSON_AddItemToArray(sk, cJSON_CreateString(g_ptr_array_index(v->skipped, k)));
  return root;
}

static guint t_rows(const MmValidation *v)
{
  guint n = 0;
  for (guint k = 0; k < v->rows->len; k++) n += ((const MmValidationRow *)g_ptr_array_index(v->rows, k))->curve == NULL;
  return n;
}

/* One line per collective curve: its points' median and worst error. */
static void print_curves(FILE *out, const MmValidation *v, gboolean md)
{
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean header = FALSE;
  for (guint k = 0; k < v->rows->len; k++) {
    const MmValidationRow *r = g_ptr_array_index(v->rows, k);
    if (!r->curve || !g_hash_table_add(seen, r->curve)) continue;
    g_autofree double *e = g_new(double, v->rows->len);
    guint n = 0;
    double worst = 0, lo = 0, hi = 0;
    for (guint j = k; j < v->rows->len; j++) {
      const MmValidationRow *q = g_ptr_array_index(v->rows, j);
      if (!q->curve || strcmp(q->curve, r->curve) != 0) continue;
      e[n++] = fabs(q->error_frac);
      if (fabs(q->error_frac) >= fabs(worst)) worst = q->error_frac;
      if (n == 1 || q->measured < lo) lo = q->measured;
      if (n == 1 || q->measured > hi) hi = q->measured;
    }
    qsort(e, n, sizeof(double), cmp_double);
    double med = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
    if (!header) {
      fprintf(out, md ? "\n| curve | points | measured bus GB/s | median abs. error | worst |\n|---|---:|---|---:|---:|\n"
                      : "\n  collective curves (bus bandwidth; every point in --json):\n");
      header = TRUE;
    }
    if (md)
      fprintf(out, "| %s | %u | %.4g-%.4g | %.1f%% | %+.1f%% |\n", r->curve, n, lo, hi, 100 * med, 100 * worst);
    else
      fprintf(out, "    %-70s %3u pts  median %5.1f%%  worst %+6.1f%%\n", r->curve, n, 100 * med, 100 * worst);
  }
}

void mm_validation_text(FILE *out, const MmValidation *v, gboolean md)
{
  if (md) {
    if (t_rows(v)) fprintf(out, "| case | metric | measured | predicted | error |\n|---|---|---:|---:|---:|\n");
    for (guint k = 0; k < v->rows->len; k++) {
      const MmValidationRow *r = g_ptr_array_index(v->rows, k);
      if (r->curve) continue;
      fprintf(out, "| %s | %s | %.4g | %.4g | %+.1f%%%s |\n", r->id, r->metric, r->measured, r->predicted,
              100.0 * r->error_frac, r->fits ? "" : " (OOM)");
    }
    print_curves(out, v, TRUE);
    fprintf(out, "\n%u cases: median |error| %.1f%%, 90th percentile %.1f%%, worst %.1f%% (%s).\n\n", v->rows->len,
            100.0 * v->median_abs_error, 100.0 * v->p90_abs_error, 100.0 * v->worst_abs_error,
            v->worst_id ? v->worst_id : "-");
    fprintf(out, "| group | cases | median abs. error |\n|---|---:|---:|\n");
    group_medians(out, v, TRUE);
    return;
  }
  fprintf(out, "%s (%s)\n\n", v->name, v->path);
  static const char *const h[] = {"<case", "<metric", "measured", "predicted", "error", "<fits"};
  g_autoptr(MmTable) t = mm_table_new(6, h);
  for (guint k = 0; k < v->rows->len; k++) {
    const MmValidationRow *r = g_ptr_array_index(v->rows, k);
    if (r->curve) continue; /* curves: one line each below */
    char *cells[6] = {g_strdup(r->id), g_strdup(r->metric), g_strdup_printf("%.4g", r->measured),
                      g_strdup_printf("%.4g", r->predicted), g_strdup_printf("%+.1f%%", 100.0 * r->error_frac),
                      g_strdup(r->fits ? "yes" : "OOM")};
    mm_table_addv(t, cells);
  }
  if (t_rows(v)) mm_table_print(t, out, "  ");
  print_curves(out, v, FALSE);
  fprintf(out, "\n  %u cases: median |error| %.1f%%, 90th percentile %.1f%%, worst %.1f%% (%s)\n", v->rows->len,
          100.0 * v->median_abs_error, 100.0 * v->p90_abs_error, 100.0 * v->worst_abs_error,
          v->worst_id ? v->worst_id : "-");
  fprintf(out, "\n  median |error| by group:\n");
  group_medians(out, v, FALSE);
  if (v->skipped->len) {
    fprintf(out, "\n  skipped (not expressible yet):\n");
    for (guint k = 0; k < v->skipped->len; k++) fprintf(out, "    %s\n", (const char *)g_ptr_array_index(v->skipped, k));
  }
}

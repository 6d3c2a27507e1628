/* plot_sweep: a sweep's folder as the ranking and pareto figures read it: every row of
 * points.csv checked (its fields, numbers and status), and summary.json's FSDP baseline, best
 * point and Pareto set, each checked to be a point of the CSV that can be one. */
#define _XOPEN_SOURCE 700 /* O_CLOEXEC */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "plot_internal.h"

#define MAX_SPS 1e18   /* samples per second */
#define MAX_BYTES 1e18 /* a device's memory: an exabyte */
#define MAX_COLS 256u
#define SHOW_CHARS 40 /* of a bad field, in a message */

const struct MmPlotDim mm__plot_dims[MM_PLOT_N_DIMS] = {
  [MM_PLOT_DIM_NODES] = {"nodes", "nodes", TRUE},
  [MM_PLOT_DIM_PP] = {"pipeline_degree", "pp", TRUE},
  [MM_PLOT_DIM_SCHEDULE] = {"pipeline_schedule", "schedule", FALSE},
  [MM_PLOT_DIM_VSTAGES] = {"virtual_stages", "chunks", TRUE},
  [MM_PLOT_DIM_MB] = {"micro_batch", "mb", TRUE},
  [MM_PLOT_DIM_RECOMPUTE] = {"recompute", "recompute", FALSE},
  [MM_PLOT_DIM_ZERO] = {"zero", "zero", TRUE},
  [MM_PLOT_DIM_SYSTEM] = {"system", "system", FALSE}, /* a sweep of several systems */
};

/* points.csv's status column, by MmPlotPointStatus */
static const char *const status_names[] = {"ok", "oom_simulated", "oom"};

/* The columns every row needs (the strategies' and the dimensions' aside). */
enum { C_POINT, C_STATUS, C_FITS, C_SPS, C_MEM, C_CAP, C_N };
static const char *const needed[C_N] = {"point", "status", "fits", "samples_per_s", "memory_per_device_bytes",
                                        "memory_capacity_bytes"};

static void point_clear(gpointer p)
{
  MmPlotPoint *pt = p;
  g_strfreev(pt->strategy);
  for (int k = 0; k < MM_PLOT_N_DIMS; k++) g_free(pt->dim[k]);
}

void mm__plot_sweep_clear(MmPlotSweep *sw)
{
  g_free(sw->csv);
  g_free(sw->summary);
  g_free(sw->title);
  if (sw->kinds) g_ptr_array_free(sw->kinds, TRUE);
  if (sw->pts) g_array_free(sw->pts, TRUE);
  if (sw->front) g_array_free(sw->front, TRUE);
  memset(sw, 0, sizeof *sw);
}

/* A fault of points.csv at @line (and @column, when not NULL): MM_REPORT_ERROR_INPUT. */
static G_GNUC_PRINTF(5, 6) void csv_error(GError **error, const char *path, guint line, const char *column,
                                          const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  if (column)
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "%s: line %u: %s: %s", path, line, column, msg);
  else
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "%s: line %u: %s", path, line, msg);
}

/* A bad field as a message shows it: quoted, at most SHOW_CHARS characters. (transfer full) */
static char *shown(const char *field)
{
  g_autofree char *clean = mm__plot_clean(field);
  if (g_utf8_strlen(clean, -1) <= SHOW_CHARS) return g_strdup_printf("'%s'", clean);
  const char *end = g_utf8_offset_to_pointer(clean, SHOW_CHARS);
  return g_strdup_printf("'%.*s\u2026'", (int)(end - clean), clean);
}

/* The text of @path: a regular file of at most MM_JSON_MAX_FILE_BYTES, as the JSON inputs.
 * (transfer full) */
static char *read_text(const char *path, gsize *len, GError **error)
{
  int fd = g_open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_READ, "%s: cannot read: %s", path, g_strerror(err));
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_READ,
                "%s: cannot read: not a regular file; expected a CSV file", path);
    return NULL;
  }
  GString *buf = g_string_sized_new((gsize)MIN(st.st_size, (off_t)MM_JSON_MAX_FILE_BYTES) + 1);
  int err = 0;
  while (buf->len <= MM_JSON_MAX_FILE_BYTES) { /* a byte past the limit: the file may grow */
    char chunk[65536];
    ssize_t n = read(fd, chunk, MIN(sizeof chunk, MM_JSON_MAX_FILE_BYTES + 1 - buf->len));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    g_string_append_len(buf, chunk, n);
  }
  close(fd);
  if (err || buf->len > MM_JSON_MAX_FILE_BYTES) {
    g_string_free(buf, TRUE);
    if (err) g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_READ, "%s: cannot read: %s", path, g_strerror(err));
    else
      g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_READ,
                  "%s: cannot read: larger than %u MiB, the most an input file may hold", path,
                  (guint)(MM_JSON_MAX_FILE_BYTES >> 20));
    return NULL;
  }
  *len = buf->len;
  return g_string_free(buf, FALSE);
}

/* Whether @text is UTF-8 without NUL or control characters but line ends; else the error, at
 * its line. */
static gboolean check_text(const char *path, const char *text, gsize len, GError **error)
{
  const char *bad = NULL;
  const gboolean utf8 = g_utf8_validate(text, (gssize)len, &bad);
  guint line = 1;
  for (const char *c = text; c < text + len; c++) {
    if (!utf8 && c == bad) {
      csv_error(error, path, line, NULL, "not UTF-8 text (or a NUL byte); expected the CSV madmax sweep writes");
      return FALSE;
    }
    if (*c == '\n') line++;
    else if (((unsigned char)*c < 0x20 && !(*c == '\r' && c[1] == '\n')) || *c == 0x7f) {
      csv_error(error, path, line, NULL, "a control character (0x%02x); expected the CSV madmax sweep writes",
                (unsigned char)*c);
      return FALSE;
    }
  }
  return TRUE;
}

/* @s as a number within [@lo, @hi]: plain decimal digits (no "nan", "inf", hex or blanks). */
static gboolean parse_num(const char *s, double lo, double hi, double *out)
{
  if (!*s || strspn(s, "0123456789+-.eE") != strlen(s)) return FALSE;
  char *end = NULL;
  const double v = g_ascii_strtod(s, &end);
  if (*end || !isfinite(v) || v < lo || v > hi) return FALSE;
  *out = v;
  return TRUE;
}

static gboolean num_field(const char *path, guint line, const char *column, const char *s, double lo, double hi,
                          gboolean integer, double *out, GError **error)
{
  if (parse_num(s, lo, hi, out) && (!integer || *out == floor(*out))) return TRUE;
  g_autofree char *got = shown(s);
  csv_error(error, path, line, column, "%s is not %s from %g to %g", got, integer ? "an integer" : "a number", lo, hi);
  return FALSE;
}

/* The header: the needed columns, the strategies' (KIND_strategy) and the dimensions' found. */
typedef struct {
  guint n;
  int need[C_N];
  int dim[MM_PLOT_N_DIMS];
  GArray *strat; /* int column of each kind */
} Header;

static gboolean read_header(const char *path, char *line, Header *h, GPtrArray *kinds, GError **error)
{
  g_strchomp(line);
  g_auto(GStrv) names = g_strsplit(line, ",", -1);
  h->n = g_strv_length(names);
  if (h->n > MAX_COLS) {
    csv_error(error, path, 1, NULL, "%u columns; a sweep's points.csv has at most %u", h->n, MAX_COLS);
    return FALSE;
  }
  for (int c = 0; c < C_N; c++) h->need[c] = -1;
  for (int k = 0; k < MM_PLOT_N_DIMS; k++) h->dim[k] = -1;
  for (guint i = 0; i < h->n; i++) {
    for (guint j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0) {
        g_autofree char *got = shown(names[i]);
        csv_error(error, path, 1, NULL, "column %s twice (columns %u and %u)", got, j + 1, i + 1);
        return FALSE;
      }
    for (int c = 0; c < C_N; c++)
      if (strcmp(names[i], needed[c]) == 0) h->need[c] = (int)i;
    for (int k = 0; k < MM_PLOT_N_DIMS; k++)
      if (strcmp(names[i], mm__plot_dims[k].column) == 0) h->dim[k] = (int)i;
    const gsize len = strlen(names[i]);
    if (len > 9 && g_str_has_suffix(names[i], "_strategy")) {
      g_ptr_array_add(kinds, g_strndup(names[i], len - 9));
      const int col = (int)i;
      g_array_append_val(h->strat, col);
    }
  }
  for (int c = 0; c < C_N; c++)
    if (h->need[c] < 0) {
      csv_error(error, path, 1, NULL, "no column '%s'; expected the header of madmax sweep's points.csv", needed[c]);
      return FALSE;
    }
  if (kinds->len == 0) {
    csv_error(error, path, 1, NULL, "no KIND_strategy column; expected the header of madmax sweep's points.csv");
    return FALSE;
  }
  return TRUE;
}

static gboolean read_row(const char *path, guint line, char *text, const Header *h, MmPlotPoint *p, GError **error)
{
  g_strchomp(text);
  if (!*text) {
    csv_error(error, path, line, NULL, "empty; expected a point's %u fields", h->n);
    return FALSE;
  }
  g_auto(GStrv) f = g_strsplit(text, ",", -1);
  const guint n = g_strv_length(f);
  if (n != h->n) {
    csv_error(error, path, line, NULL, "%u fields; the header has %u", n, h->n);
    return FALSE;
  }
  double v = 0;
  if (!num_field(path, line, "point", f[h->need[C_POINT]], 0, MM_INT_MAX, TRUE, &v, error)) return FALSE;
  p->id = (gint64)v;
  const char *st = f[h->need[C_STATUS]];
  guint s = 0;
  while (s < G_N_ELEMENTS(status_names) && strcmp(st, status_names[s]) != 0) s++;
  if (s == G_N_ELEMENTS(status_names)) {
    g_autofree char *got = shown(st);
    csv_error(error, path, line, "status", "%s is not ok, oom_simulated or oom", got);
    return FALSE;
  }
  p->status = (MmPlotPointStatus)s;
  const char *fits = f[h->need[C_FITS]];
  const char *want = p->status == MM_PLOT_POINT_OK ? "1" : "0";
  if (strcmp(fits, want) != 0) {
    g_autofree char *got = shown(fits);
    csv_error(error, path, line, "fits", "%s; expected %s for status %s", got, want, status_names[s]);
    return FALSE;
  }
  p->sps = NAN;
  if (p->status != MM_PLOT_POINT_OOM &&
      !num_field(path, line, "samples_per_s", f[h->need[C_SPS]], 0, MAX_SPS, FALSE, &p->sps, error))
    return FALSE;
  if (!num_field(path, line, "memory_per_device_bytes", f[h->need[C_MEM]], 0, MAX_BYTES, FALSE, &p->mem_bytes,
                 error) ||
      !num_field(path, line, "memory_capacity_bytes", f[h->need[C_CAP]], 1, MAX_BYTES, FALSE, &p->cap_bytes, error))
    return FALSE;
  p->strategy = g_new0(char *, h->strat->len + 1);
  for (guint k = 0; k < h->strat->len; k++) {
    const char *txt = f[g_array_index(h->strat, int, k)];
    if (!*txt) {
      csv_error(error, path, line, NULL, "column %u: empty; expected a strategy", g_array_index(h->strat, int, k) + 1);
      return FALSE;
    }
    p->strategy[k] = g_strdup(txt);
  }
  for (int k = 0; k < MM_PLOT_N_DIMS; k++) {
    if (h->dim[k] < 0) continue;
    const char *txt = f[h->dim[k]];
    if (mm__plot_dims[k].integer &&
        !num_field(path, line, mm__plot_dims[k].column, txt, 0, MM_INT_MAX, TRUE, &v, error))
      return FALSE;
    if (!*txt) {
      csv_error(error, path, line, mm__plot_dims[k].column, "empty; expected a name");
      return FALSE;
    }
    p->dim[k] = g_strdup(txt);
  }
  return TRUE;
}

static gboolean read_csv(MmPlotSweep *sw, GHashTable *by_id, GError **error)
{
  gsize len = 0;
  g_autofree char *text = read_text(sw->csv, &len, error);
  if (!text || !check_text(sw->csv, text, len, error)) return FALSE;
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  if (!lines[0] || !*lines[0]) {
    csv_error(error, sw->csv, 1, NULL, "empty; expected the header of madmax sweep's points.csv");
    return FALSE;
  }
  Header h = {.strat = g_array_new(FALSE, FALSE, sizeof(int))};
  gboolean ok = read_header(sw->csv, lines[0], &h, sw->kinds, error);
  for (guint i = 1; ok && lines[i]; i++) {
    if (!lines[i][0] && !lines[i + 1]) break; /* the last line's end */
    MmPlotPoint p = {0};
    g_array_append_val(sw->pts, p); /* cleared with the array, whatever it holds */
    MmPlotPoint *at = &g_array_index(sw->pts, MmPlotPoint, sw->pts->len - 1);
    ok = read_row(sw->csv, i + 1, lines[i], &h, at, error);
    if (!ok) break;
    const guint *seen = g_hash_table_lookup(by_id, &at->id);
    if (seen) {
      csv_error(error, sw->csv, i + 1, "point", "%" G_GINT64_FORMAT " again (line %u has it)", at->id,
                g_array_index(sw->pts, MmPlotPoint, *seen).line);
      ok = FALSE;
      break;
    }
    at->line = i + 1;
    const guint idx = sw->pts->len - 1;
    g_hash_table_insert(by_id, g_memdup2(&at->id, sizeof at->id), g_memdup2(&idx, sizeof idx));
    sw->n[at->status]++;
  }
  g_array_free(h.strat, TRUE);
  if (ok && sw->pts->len == 0) {
    csv_error(error, sw->csv, 2, NULL, "no points; the sweep found none valid");
    ok = FALSE;
  }
  return ok;
}

/* The point @obj.point names: an index into sw->pts of a row whose status is in @allowed
 * (a bit per MmPlotPointStatus). */
static gboolean summary_point(const MmPlotSweep *sw, const MmJsonCtx *ctx, GHashTable *by_id, const cJSON *obj,
                              const char *jp, guint allowed, const char *what, guint *out, GError **error)
{
  gint64 id = 0;
  if (!mm__plot_index(ctx, obj, "point", jp, MM_INT_MAX, &id, error)) return FALSE;
  g_autofree char *path = g_strdup_printf("%s.point", jp);
  const guint *idx = g_hash_table_lookup(by_id, &id);
  if (!idx) {
    mm__plot_input_error(error, ctx, path, "%" G_GINT64_FORMAT " is not a point of %s", id, sw->csv);
    return FALSE;
  }
  const MmPlotPoint *p = &g_array_index(sw->pts, MmPlotPoint, *idx);
  if (!(allowed & (1u << p->status))) {
    mm__plot_input_error(error, ctx, path, "point %" G_GINT64_FORMAT " is %s in %s (line %u); %s", id,
                         status_names[p->status], sw->csv, p->line, what);
    return FALSE;
  }
  *out = *idx;
  return TRUE;
}

/* The value at @obj.@key when it is an object; NULL (no error) when absent; an error otherwise
 * or, with @required, when absent. */
static gboolean object_of(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp,
                          gboolean required, const cJSON **out, GError **error)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (!v && !required) return TRUE;
  g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
  if (!cJSON_IsObject(v)) {
    g_autofree char *got = v ? mm_json_describe_value(v) : NULL;
    if (!v) mm__plot_input_error(error, ctx, path, "missing; expected an object");
    else mm__plot_input_error(error, ctx, path, "expected an object, got %s", got);
    return FALSE;
  }
  *out = v;
  return TRUE;
}

static gboolean read_summary(MmPlotSweep *sw, GHashTable *by_id, GError **error)
{
  g_autoptr(cJSON) root = mm__plot_load(sw->summary, error);
  if (!root) return FALSE;
  MmJsonCtx ctx = {sw->summary};
  /* the title: the inputs' names */
  if (!mm__plot_study_title(&ctx, root, "", &sw->title, error)) return FALSE;

  /* the baseline: null when the space has none */
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "baseline_fsdp");
  sw->base = sw->best = -1;
  if (!b || !(cJSON_IsNull(b) || cJSON_IsObject(b))) {
    g_autofree char *got = b ? mm_json_describe_value(b) : NULL;
    if (!b) mm__plot_input_error(error, &ctx, "$.baseline_fsdp", "missing; expected an object or null");
    else mm__plot_input_error(error, &ctx, "$.baseline_fsdp", "expected an object or null, got %s", got);
    return FALSE;
  }
  if (cJSON_IsObject(b)) {
    guint idx = 0;
    const cJSON *fits = cJSON_GetObjectItemCaseSensitive(b, "fits");
    if (!cJSON_IsBool(fits)) {
      g_autofree char *got = fits ? mm_json_describe_value(fits) : g_strdup("nothing");
      mm__plot_input_error(error, &ctx, "$.baseline_fsdp.fits", "expected true or false, got %s", got);
      return FALSE;
    }
    sw->base_fits = cJSON_IsTrue(fits);
    /* a baseline that fits is a point that ran; one that does not was simulated for reference */
    const guint allowed = sw->base_fits ? 1u << MM_PLOT_POINT_OK
                                        : 1u << MM_PLOT_POINT_OOM_SIMULATED | 1u << MM_PLOT_POINT_OOM;
    if (!summary_point(sw, &ctx, by_id, b, "$.baseline_fsdp", allowed,
                       sw->base_fits ? "the baseline fits, says $.baseline_fsdp.fits"
                                     : "the baseline does not fit, says $.baseline_fsdp.fits",
                       &idx, error))
      return FALSE;
    sw->base = (int)idx;
    const MmPlotPoint *p = &g_array_index(sw->pts, MmPlotPoint, idx);
    sw->base_sps = p->sps;
    if (!sw->base_fits &&
        !mm__plot_number(&ctx, b, "samples_per_s", "$.baseline_fsdp", 0, MAX_SPS, &sw->base_sps, error))
      return FALSE;
  }
  const cJSON *best = NULL, *tp = NULL;
  if (!object_of(&ctx, root, "best", "$", FALSE, &best, error) ||
      (best && !object_of(&ctx, best, "throughput", "$.best", FALSE, &tp, error)))
    return FALSE;
  if (tp) {
    guint idx = 0;
    if (!summary_point(sw, &ctx, by_id, tp, "$.best.throughput", 1u << MM_PLOT_POINT_OK,
                       "expected one that fits", &idx, error))
      return FALSE;
    sw->best = (int)idx;
  }
  const cJSON *front = cJSON_GetObjectItemCaseSensitive(root, "pareto_memory_throughput");
  if (front && !cJSON_IsArray(front)) {
    g_autofree char *got = mm_json_describe_value(front);
    mm__plot_input_error(error, &ctx, "$.pareto_memory_throughput", "expected an array, got %s", got);
    return FALSE;
  }
  int i = 0;
  for (const cJSON *e = front ? front->child : NULL; e; e = e->next, i++) {
    g_autofree char *jp = g_strdup_printf("$.pareto_memory_throughput[%d]", i);
    if (!cJSON_IsObject(e)) {
      g_autofree char *got = mm_json_describe_value(e);
      mm__plot_input_error(error, &ctx, jp, "expected an object, got %s", got);
      return FALSE;
    }
    guint idx = 0;
    if (!summary_point(sw, &ctx, by_id, e, jp, 1u << MM_PLOT_POINT_OK | 1u << MM_PLOT_POINT_OOM_SIMULATED,
                       "expected a simulated one", &idx, error))
      return FALSE;
    g_array_append_val(sw->front, idx);
  }
  return TRUE;
}

gboolean mm__plot_sweep_read(const char *input, MmPlotSweep *sw, GError **error)
{
  memset(sw, 0, sizeof *sw);
  sw->kinds = g_ptr_array_new_with_free_func(g_free);
  sw->pts = g_array_new(FALSE, TRUE, sizeof(MmPlotPoint));
  g_array_set_clear_func(sw->pts, point_clear);
  sw->front = g_array_new(FALSE, FALSE, sizeof(guint));
  sw->base = sw->best = -1;
  /* the folder, or the folder of its points.csv or summary.json */
  g_autofree char *dir = NULL;
  if (g_file_test(input, G_FILE_TEST_IS_DIR)) {
    dir = g_strdup(input);
  } else {
    g_autofree char *base = g_path_get_basename(input);
    if (strcmp(base, "points.csv") == 0 || strcmp(base, "summary.json") == 0) {
      dir = g_path_get_dirname(input);
    } else if (!g_file_test(input, G_FILE_TEST_EXISTS)) {
      g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_READ, "%s: cannot read: %s", input, g_strerror(ENOENT));
      return FALSE;
    } else {
      g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT,
                  "%s: expected a sweep's folder (madmax sweep --out DIR), its points.csv or its summary.json", input);
      return FALSE;
    }
  }
  sw->csv = g_build_filename(dir, "points.csv", NULL);
  sw->summary = g_build_filename(dir, "summary.json", NULL);
  g_autoptr(GHashTable) by_id = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
  if (!read_csv(sw, by_id, error) || !read_summary(sw, by_id, error)) return FALSE;
  sw->cap_bytes = g_array_index(sw->pts, MmPlotPoint, 0).cap_bytes;
  for (guint i = 1; i < sw->pts->len; i++)
    if (g_array_index(sw->pts, MmPlotPoint, i).cap_bytes != sw->cap_bytes) sw->cap_bytes = NAN;
  return TRUE;
}

char *mm__plot_sweep_strategies(const MmPlotSweep *sw, guint i, gboolean kinds)
{
  const MmPlotPoint *p = &g_array_index(sw->pts, MmPlotPoint, i);
  GString *g = g_string_new(NULL);
  for (guint k = 0; k < sw->kinds->len; k++) {
    if (k) g_string_append(g, " \u00b7 ");
    if (kinds) g_string_append_printf(g, "%s ", (const char *)sw->kinds->pdata[k]);
    g_string_append(g, p->strategy[k]);
  }
  return g_string_free(g, FALSE);
}

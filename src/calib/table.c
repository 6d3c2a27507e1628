/* table: measurement rows and header lines; the calibration CSV read and written (docs/CALIBRATION.md). */
#include "calib.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(mm-calib-error-quark, mm_calib_error)

static void row_free(gpointer p)
{
  MmCalibRow *r = p;
  g_free(r->bench), g_free(r->kind), g_free(r->dtype), g_free(r->variant), g_free(r->source);
  g_free(r);
}

MmCalibTable *mm_calib_table_new(void)
{
  MmCalibTable *t = g_new0(MmCalibTable, 1);
  t->rows = g_ptr_array_new_with_free_func(row_free);
  t->keys = g_ptr_array_new_with_free_func(g_free);
  t->values = g_ptr_array_new_with_free_func(g_free);
  return t;
}

void mm_calib_table_free(MmCalibTable *t)
{
  if (!t) return;
  g_ptr_array_unref(t->rows), g_ptr_array_unref(t->keys), g_ptr_array_unref(t->values);
  g_free(t);
}

void mm_calib_table_add(MmCalibTable *t, const MmCalibRow *r)
{
  g_return_if_fail(t != NULL && r != NULL);
  MmCalibRow *c = g_new(MmCalibRow, 1);
  *c = *r;
  c->bench = g_strdup(r->bench ? r->bench : "");
  c->kind = g_strdup(r->kind ? r->kind : "");
  c->dtype = g_strdup(r->dtype ? r->dtype : "");
  c->variant = g_strdup(r->variant ? r->variant : "");
  c->source = g_strdup(r->source ? r->source : "");
  g_ptr_array_add(t->rows, c);
}

void mm_calib_table_set_meta(MmCalibTable *t, const char *key, const char *value)
{
  g_return_if_fail(t != NULL && key != NULL && value != NULL);
  for (guint i = 0; i < t->keys->len; i++)
    if (!strcmp(t->keys->pdata[i], key)) {
      g_free(t->values->pdata[i]);
      t->values->pdata[i] = g_strdup(value);
      return;
    }
  g_ptr_array_add(t->keys, g_strdup(key));
  g_ptr_array_add(t->values, g_strdup(value));
}

const char *mm_calib_table_meta(const MmCalibTable *t, const char *key)
{
  for (guint i = 0; i < t->keys->len; i++)
    if (!strcmp(t->keys->pdata[i], key)) return t->values->pdata[i];
  return NULL;
}

/* ---- CSV ------------------------------------------------------------------- */

static const char *const columns[] = {"bench", "kind", "dtype", "m", "n", "k", "batch", "bytes", "flops",
                                      "variant", "reps", "median_s", "min_s", "max_s", "source"};
#define N_COLUMNS G_N_ELEMENTS(columns)

/* A field is text without commas, quotes or line breaks (the writer keeps it so). */
static gboolean parse_num(const char *s, double *out)
{
  char *end = NULL;
  errno = 0;
  double v = g_ascii_strtod(s, &end);
  if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v) || v < 0) return FALSE;
  *out = v;
  return TRUE;
}

gboolean mm_calib_csv_read(const char *path, MmCalibTable *t, GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  if (!g_file_get_contents(path, &text, &len, error)) return FALSE;
  if (strlen(text) != len) {
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT, "%s: a NUL byte: not a calibration CSV", path);
    return FALSE;
  }
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  gboolean have_header = FALSE;
  guint n_rows = 0;
  for (guint li = 0; lines[li]; li++) {
    char *line = g_strchomp(lines[li]); /* also drops a \r */
    if (*line == '\0') continue;
    if (*line == '#') {
      const char *colon = strchr(line, ':');
      g_autofree char *key = colon ? g_strstrip(g_strndup(line + 1, colon - line - 1)) : NULL;
      if (key && *key && !strchr(key, ' ')) {
        g_autofree char *value = g_strstrip(g_strdup(colon + 1));
        /* a key given twice (several checks) keeps both values */
        const char *had = mm_calib_table_meta(t, key);
        g_autofree char *both = had ? g_strconcat(had, " | ", value, NULL) : NULL;
        mm_calib_table_set_meta(t, key, both ? both : value);
      }
      continue;
    }
    g_auto(GStrv) f = g_strsplit(line, ",", -1);
    guint nf = g_strv_length(f);
    if (!have_header) {
      for (guint c = 0; c < N_COLUMNS; c++)
        if (nf != N_COLUMNS || strcmp(g_strstrip(f[c]), columns[c])) {
          g_autofree char *want = g_strjoinv(",", (char **)columns);
          g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT,
                      "%s:%u: expected the column line \"%s\" (docs/CALIBRATION.md)", path, li + 1, want);
          return FALSE;
        }
      have_header = TRUE;
      continue;
    }
    if (nf != N_COLUMNS) {
      g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT, "%s:%u: %u fields, expected %u", path, li + 1, nf,
                  (guint)N_COLUMNS);
      return FALSE;
    }
    MmCalibRow r = {.bench = f[0], .kind = f[1], .dtype = f[2], .variant = f[9], .source = f[14]};
    double *num[] = {&r.m, &r.n, &r.k, &r.batch, &r.bytes, &r.flops};
    for (guint c = 0; c < G_N_ELEMENTS(num); c++)
      if (!parse_num(f[3 + c], num[c])) {
        g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT,
                    "%s:%u: column %s: expected a number >= 0, got \"%s\"", path, li + 1, columns[3 + c], f[3 + c]);
        return FALSE;
      }
    double reps = 0;
    if (!parse_num(f[10], &reps) || reps != floor(reps) || reps > 1e9) {
      g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT,
                  "%s:%u: column reps: expected a whole number >= 0, got \"%s\"", path, li + 1, f[10]);
      return FALSE;
    }
    r.reps = (int)reps;
    double *times[] = {&r.median_s, &r.min_s, &r.max_s};
    for (guint c = 0; c < 3; c++)
      if (!parse_num(f[11 + c], times[c]) || *times[c] <= 0) {
        g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT,
                    "%s:%u: column %s: expected seconds > 0, got \"%s\"", path, li + 1, columns[11 + c], f[11 + c]);
        return FALSE;
      }
    if (!(r.min_s <= r.median_s && r.median_s <= r.max_s)) {
      g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT,
                  "%s:%u: expected min_s <= median_s <= max_s (%g, %g, %g)", path, li + 1, r.min_s, r.median_s,
                  r.max_s);
      return FALSE;
    }
    if (*r.bench == '\0') {
      g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT, "%s:%u: column bench is empty", path, li + 1);
      return FALSE;
    }
    mm_calib_table_add(t, &r);
    n_rows++;
  }
  if (!have_header || n_rows == 0) {
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT, "%s: %s", path,
                have_header ? "no measurement rows" : "no column line: not a calibration CSV (docs/CALIBRATION.md)");
    return FALSE;
  }
  return TRUE;
}

/* Text fields lose what would break the format (commas, line breaks). */
static void put_text(GString *out, const char *s)
{
  for (; *s; s++) g_string_append_c(out, *s == ',' ? ';' : *s == '\n' || *s == '\r' ? ' ' : *s);
}

char *mm_calib_csv_text(const MmCalibTable *t)
{
  GString *out = g_string_new("# madmax calibration v1\n");
  for (guint i = 0; i < t->keys->len; i++) {
    g_string_append_printf(out, "# %s: ", (const char *)t->keys->pdata[i]);
    put_text(out, t->values->pdata[i]);
    g_string_append_c(out, '\n');
  }
  for (guint c = 0; c < N_COLUMNS; c++) g_string_append_printf(out, "%s%s", columns[c], c + 1 < N_COLUMNS ? "," : "\n");
  for (guint i = 0; i < t->rows->len; i++) {
    const MmCalibRow *r = t->rows->pdata[i];
    char num[G_ASCII_DTOSTR_BUF_SIZE];
    const double v[] = {r->m, r->n, r->k, r->batch, r->bytes, r->flops};
    put_text(out, r->bench), g_string_append_c(out, ','), put_text(out, r->kind), g_string_append_c(out, ',');
    put_text(out, r->dtype);
    for (guint c = 0; c < 6; c++) g_string_append_printf(out, ",%s", g_ascii_formatd(num, sizeof num, "%.17g", v[c]));
    g_string_append_c(out, ','), put_text(out, r->variant);
    g_string_append_printf(out, ",%d", r->reps);
    const double ts[] = {r->median_s, r->min_s, r->max_s};
    for (guint c = 0; c < 3; c++) g_string_append_printf(out, ",%s", g_ascii_formatd(num, sizeof num, "%.6e", ts[c]));
    g_string_append_c(out, ','), put_text(out, r->source), g_string_append_c(out, '\n');
  }
  return g_string_free(out, FALSE);
}

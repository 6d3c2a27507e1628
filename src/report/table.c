/* table: aligned text tables and number formatting. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "report.h"

G_DEFINE_QUARK(mm-report-error-quark, mm_report_error)

struct MmTable {
  guint ncols;
  GPtrArray *cells; /* row-major, char * owned */
  char **headers;
};

MmTable *mm_table_new(guint ncols, const char *const *headers)
{
  MmTable *t = g_new0(MmTable, 1);
  t->ncols = ncols;
  t->cells = g_ptr_array_new_with_free_func(g_free);
  t->headers = g_new0(char *, ncols + 1);
  for (guint i = 0; i < ncols; i++) t->headers[i] = g_strdup(headers[i]);
  return t;
}

void mm_table_free(MmTable *t)
{
  if (!t) return;
  g_ptr_array_unref(t->cells);
  g_strfreev(t->headers);
  g_free(t);
}

void mm_table_add(MmTable *t, ...)
{
  va_list ap;
  va_start(ap, t);
  for (guint i = 0; i < t->ncols; i++) g_ptr_array_add(t->cells, g_strdup(va_arg(ap, const char *)));
  va_end(ap);
}

void mm_table_addv(MmTable *t, char **cells)
{
  for (guint i = 0; i < t->ncols; i++) g_ptr_array_add(t->cells, cells[i]);
}

void mm_table_print(const MmTable *t, FILE *out, const char *indent)
{
  g_autofree gsize *w = g_new0(gsize, t->ncols);
  guint nrows = t->cells->len / t->ncols;
  for (guint c = 0; c < t->ncols; c++) {
    const char *h = t->headers[c][0] == '<' ? t->headers[c] + 1 : t->headers[c];
    w[c] = g_utf8_strlen(h, -1);
    for (guint r = 0; r < nrows; r++)
      w[c] = MAX(w[c], (gsize)g_utf8_strlen(g_ptr_array_index(t->cells, r * t->ncols + c), -1));
  }
  for (guint r = 0; r <= nrows; r++) {
    fputs(indent, out);
    for (guint c = 0; c < t->ncols; c++) {
      gboolean left = t->headers[c][0] == '<';
      const char *s = r == 0 ? (left ? t->headers[c] + 1 : t->headers[c])
                             : g_ptr_array_index(t->cells, (r - 1) * t->ncols + c);
      gsize pad = w[c] - (gsize)g_utf8_strlen(s, -1);
      if (c) fputs("  ", out);
      if (!left) for (gsize i = 0; i < pad; i++) fputc(' ', out);
      fputs(s, out);
      if (left && c + 1 < t->ncols) for (gsize i = 0; i < pad; i++) fputc(' ', out);
    }
    fputc('\n', out);
  }
}

char *mm_fmt_count(double v)
{
  static const char *const suffix[] = {"", " K", " M", " B", " T", " P"};
  int i = 0;
  double a = fabs(v);
  while (a >= 1000.0 && i < 5) {
    a /= 1000.0;
    v /= 1000.0;
    i++;
  }
  if (i == 0) return g_strdup_printf("%.0f", v);
  return g_strdup_printf("%.2f%s", v, suffix[i]);
}

char *mm_fmt_bytes(double v)
{
  static const char *const suffix[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int i = 0;
  while (fabs(v) >= 1024.0 && i < 5) {
    v /= 1024.0;
    i++;
  }
  return i == 0 ? g_strdup_printf("%.0f B", v) : g_strdup_printf("%.2f %s", v, suffix[i]);
}

char *mm_fmt_flops(double v)
{
  static const char *const suffix[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  while (fabs(v) >= 1000.0 && i < 6) {
    v /= 1000.0;
    i++;
  }
  return g_strdup_printf("%.2f %sFLOP", v, suffix[i]);
}

char *mm_fmt_seconds(double v)
{
  if (v >= 1.0) return g_strdup_printf("%.3f s", v);
  if (v >= 1e-3) return g_strdup_printf("%.3f ms", v * 1e3);
  return g_strdup_printf("%.3f us", v * 1e6);
}

gboolean mm_report_write_json(const cJSON *root, const char *path, GError **error)
{
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  mm_outputs_add_json(outs, NULL, path, root);
  return mm_outputs_commit(outs, error);
}

/* plot_input: what the figure kinds share to read their JSON inputs (traces, results, sweep
 * summaries, what-if studies): errors in the config loaders' "FILE: PATH: message" layout,
 * numbers, indexes and strings checked where they are read, and the names of the run that
 * wrote a trace or result. */
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "plot_internal.h"

void mm__plot_input_error(GError **error, const MmJsonCtx *ctx, const char *jpath, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, MM_REPORT_ERROR, MM_REPORT_ERROR_INPUT, "%s: %s: %s", ctx->file, jpath, msg);
}

cJSON *mm__plot_load(const char *path, GError **error)
{
  /* the reader is src/config's and raises MM_CONFIG_ERROR; here it is MM_REPORT_ERROR */
  GError *cfg = NULL;
  cJSON *root = mm_json_load_file(path, &cfg);
  if (root) return root;
  g_assert(cfg->domain == MM_CONFIG_ERROR);
  const gboolean unreadable = cfg->code == MM_CONFIG_ERROR_IO || cfg->code == MM_CONFIG_ERROR_PARSE;
  g_set_error_literal(error, MM_REPORT_ERROR, unreadable ? MM_REPORT_ERROR_READ : MM_REPORT_ERROR_INPUT, cfg->message);
  g_error_free(cfg);
  return NULL;
}

gboolean mm__plot_number(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp, double min,
                         double max, double *out, GError **error)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
  if (!v) {
    mm__plot_input_error(error, ctx, path, "missing; expected a number from %g to %g", min, max);
    return FALSE;
  }
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < min || v->valuedouble > max) {
    g_autofree char *got = mm_json_describe_value(v);
    mm__plot_input_error(error, ctx, path, "%s is not a number from %g to %g", got, min, max);
    return FALSE;
  }
  *out = v->valuedouble;
  return TRUE;
}

gboolean mm__plot_index(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp, double max,
                        gint64 *out, GError **error)
{
  double v = 0;
  if (!mm__plot_number(ctx, obj, key, jp, 0, max, &v, error)) return FALSE;
  if (v != floor(v)) {
    g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
    mm__plot_input_error(error, ctx, path, "%g is not an integer from 0 to %g", v, max);
    return FALSE;
  }
  *out = (gint64)v;
  return TRUE;
}

gboolean mm__plot_opt_string(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp,
                             const char **out, GError **error)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (!v) return TRUE;
  if (!cJSON_IsString(v)) {
    g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
    g_autofree char *got = mm_json_describe_value(v);
    mm__plot_input_error(error, ctx, path, "expected a string, got %s", got);
    return FALSE;
  }
  *out = v->valuestring;
  return TRUE;
}

/* The optional object at @obj.@key: NULL when absent or @obj is NULL. */
static gboolean opt_object(const MmJsonCtx *ctx, const cJSON *obj, const char *key, const char *jp,
                           const cJSON **out, GError **error)
{
  const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
  *out = NULL;
  if (!v) return TRUE;
  if (!cJSON_IsObject(v)) {
    g_autofree char *path = g_strdup_printf("%s.%s", jp, key);
    g_autofree char *got = mm_json_describe_value(v);
    mm__plot_input_error(error, ctx, path, "expected an object, got %s", got);
    return FALSE;
  }
  *out = v;
  return TRUE;
}

gboolean mm__plot_run_names(const MmJsonCtx *ctx, const cJSON *root, const char *jp, MmPlotRun *run, GError **error)
{
  *run = (MmPlotRun){0};
  g_autofree char *mp = g_strdup_printf("%s.model", jp);
  g_autofree char *hp = g_strdup_printf("%s.hardware", jp);
  g_autofree char *cp = g_strdup_printf("%s.config", jp);
  const cJSON *m = NULL, *h = NULL, *c = NULL;
  if (!opt_object(ctx, root, "model", jp, &m, error) || !opt_object(ctx, root, "hardware", jp, &h, error) ||
      !opt_object(ctx, root, "config", jp, &c, error))
    return FALSE;
  if ((m && !mm__plot_opt_string(ctx, m, "name", mp, &run->model, error)) ||
      (h && !mm__plot_opt_string(ctx, h, "device", hp, &run->device, error)) ||
      (c && !mm__plot_opt_string(ctx, c, "name", cp, &run->config, error)))
    return FALSE;
  if (h && cJSON_GetObjectItemCaseSensitive(h, "devices") &&
      !mm__plot_index(ctx, h, "devices", hp, MM_INT_MAX, &run->devices, error))
    return FALSE;
  return TRUE;
}

char *mm__plot_run_system(const MmPlotRun *run, gboolean model, gboolean system)
{
  GString *g = g_string_new(NULL);
  if (model && run->model) g_string_append(g, run->model);
  if (system && run->device) {
    if (g->len) g_string_append(g, " on ");
    if (run->devices > 0) g_string_append_printf(g, "%" G_GINT64_FORMAT " x ", run->devices);
    g_string_append(g, run->device);
  }
  if (g->len == 0) {
    g_string_free(g, TRUE);
    return NULL;
  }
  return g_string_free(g, FALSE);
}

char *mm__plot_short_name(const char *name, guint max_chars)
{
  g_autofree char *s = mm__plot_clean(name);
  char *cut = strstr(s, " (");
  if (cut && cut > s) *cut = '\0';
  if (g_utf8_strlen(s, -1) > max_chars) {
    const gsize n = strcspn(s, ":,");
    if (n > 0) s[n] = '\0';
  }
  return g_strdup(g_strchomp(s));
}

/* The file name of @path without its folder and ".json". (transfer full) */
static char *stem(const char *path)
{
  char *s = g_path_get_basename(path);
  if (g_str_has_suffix(s, ".json") && strlen(s) > 5) s[strlen(s) - 5] = '\0';
  return s;
}

gboolean mm__plot_study_title(const MmJsonCtx *ctx, const cJSON *root, const char *prefix, char **title, GError **error)
{
  const cJSON *in = NULL;
  const char *name[3] = {NULL}, *path = NULL;
  static const char *const keys[3] = {"model", "hardware", "config"};
  *title = NULL;
  if (!opt_object(ctx, root, "inputs", "$", &in, error)) return FALSE;
  for (guint i = 0; in && i < 3; i++)
    if (!mm__plot_opt_string(ctx, in, keys[i], "$.inputs", &name[i], error)) return FALSE;
  if (in && !mm__plot_opt_string(ctx, in, "model_path", "$.inputs", &path, error)) return FALSE;
  /* a summary written before it held names has the files' paths under these keys */
  const gboolean paths = in && !cJSON_GetObjectItemCaseSensitive(in, "model_path") && name[0] && strchr(name[0], '/');
  char *part[3] = {NULL};
  const cJSON *several = in ? cJSON_GetObjectItemCaseSensitive(in, "systems") : NULL;
  for (guint i = 0; i < 3; i++)
    if (i == 1 && cJSON_IsArray(several) && cJSON_GetArraySize(several) > 1)
      part[i] = g_strdup_printf("%d systems", cJSON_GetArraySize(several));
    else if (name[i] && *name[i]) part[i] = paths ? stem(name[i]) : mm__plot_short_name(name[i], i == 2 ? MM_PLOT_SHORT_NAME : G_MAXUINT);
  GString *g = g_string_new(prefix);
  if (part[0]) g_string_append(g, part[0]);
  if (part[1]) g_string_append_printf(g, "%s%s", part[0] ? " on " : "", part[1]);
  if (part[2]) g_string_append_printf(g, "%s%s", part[0] || part[1] ? ": " : "", part[2]);
  const gboolean any = part[0] || part[1] || part[2];
  for (guint i = 0; i < 3; i++) g_free(part[i]);
  *title = any ? g_string_free(g, FALSE) : (g_string_free(g, TRUE), NULL);
  return TRUE;
}

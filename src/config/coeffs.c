/* coeffs: tables of cited device coefficients ({value, provenance, source}, each with a
 * documented default): the "fused" and "overlap" objects of device files. */
#include <stddef.h>
#include <string.h>

#include "internal.h"

static MmUtil *slot(MmDevice *d, const MmCoeffRow *r)
{
  return (MmUtil *)(void *)((char *)d + r->offset);
}

static gboolean coeffs_parse(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, const MmCoeffRow *rows,
                             MmDevice *out, GError **error)
{
  for (const MmCoeffRow *r = rows; r->key; r++) {
    MmUtil *u = slot(out, r);
    g_free(u->source);
    *u = (MmUtil){r->def * r->scale, r->def_provenance, g_strdup(r->def_source)};
  }
  if (!obj) return TRUE;
  if (!mm_json_expect(ctx, obj, jp, cJSON_Object, "an object of {value, provenance, source} coefficients", error))
    return FALSE;
  for (const cJSON *it = obj->child; it; it = it->next) {
    const MmCoeffRow *r = rows;
    while (r->key && strcmp(r->key, it->string) != 0) r++;
    g_autofree char *ip = g_strdup_printf("%s.%s", jp, it->string);
    if (!r->key) {
      GString *keys = g_string_new(NULL);
      for (const MmCoeffRow *k = rows; k->key; k++) g_string_append_printf(keys, "%s%s", k == rows ? "" : ", ", k->key);
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_KEY, ctx, ip, "unknown key; expected one of %s", keys->str);
      g_string_free(keys, TRUE);
      return FALSE;
    }
    const MmField fields[] = {
      {"value", MM_F_NUM, TRUE, r->min, r->max, 0, NULL, (gssize)offsetof(MmUtil, value), r->unit, r->doc},
      {"provenance", MM_F_ENUM, TRUE, 0, 0, 0, mm_provenance_names, (gssize)offsetof(MmUtil, provenance), NULL,
       "kind of evidence behind the value"},
      {"source", MM_F_STR, TRUE, 0, 0, 0, NULL, (gssize)offsetof(MmUtil, source), NULL, "citation or calibration run"},
      MM_FIELDS_END,
    };
    if (!mm_json_expect(ctx, it, ip, cJSON_Object, "an object {value, provenance, source}", error)) return FALSE;
    MmUtil *u = slot(out, r);
    MmUtil parsed = {0};
    const gboolean ok = mm_json_apply(ctx, it, ip, fields, &parsed, NULL, error);
    if (!ok) {
      g_free(parsed.source);
      return FALSE;
    }
    g_free(u->source);
    *u = parsed;
    u->value *= r->scale;
  }
  return TRUE;
}

static void coeffs_clear(const MmCoeffRow *rows, MmDevice *d)
{
  for (const MmCoeffRow *r = rows; r->key; r++) g_clear_pointer(&slot(d, r)->source, g_free);
}

static void coeffs_schema(FILE *out, const MmCoeffTable *t)
{
  const MmCoeffRow *rows = t->rows;
  fprintf(out, "### `%s`\n\n%s\n\n", t->key, t->intro);
  fprintf(out, "| key | default | range | unit | meaning | default's source |\n");
  fprintf(out, "|---|---|---|---|---|---|\n");
  for (const MmCoeffRow *r = rows; r->key; r++) {
    g_autofree char *def = mm_json_fmt_number(r->def);
    g_autofree char *lo = mm_json_fmt_number(r->min);
    g_autofree char *hi = mm_json_fmt_number(r->max);
    fprintf(out, "| `%s` | %s (%s) | [%s, %s] | %s | %s | %s |\n", r->key, def, mm_provenance_names[r->def_provenance],
            lo, hi, r->unit, r->doc, r->def_source);
  }
  fprintf(out, "\n");
}

static const MmCoeffTable *const tables[] = {&mm__fused_coeffs, &mm__overlap_coeffs};

gboolean mm__device_parse_coeffs(const MmJsonCtx *ctx, const cJSON *root, MmDevice *out, GError **error)
{
  for (guint i = 0; i < G_N_ELEMENTS(tables); i++) {
    const MmCoeffTable *t = tables[i];
    g_autofree char *jp = g_strdup_printf("$.%s", t->key);
    if (!coeffs_parse(ctx, cJSON_GetObjectItemCaseSensitive(root, t->key), jp, t->rows, out, error)) return FALSE;
    if (t->check && !t->check(ctx, out, error)) return FALSE;
  }
  return TRUE;
}

void mm__device_coeffs_clear(MmDevice *d)
{
  for (guint i = 0; i < G_N_ELEMENTS(tables); i++) coeffs_clear(tables[i]->rows, d);
}

void mm__device_coeffs_schema(FILE *out)
{
  for (guint i = 0; i < G_N_ELEMENTS(tables); i++) coeffs_schema(out, tables[i]);
}

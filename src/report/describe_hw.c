/* describe_hw: the system's behavioural network numbers, where each came from, and which fell back to defaults. */
#include <string.h>

#include "report.h"

static const char *param_from(const MmParam *p)
{
  if (p->kind == MM_PARAM_DEFAULT) return "default";
  return p->fit ? "fit" : "system";
}

void mm_report_hardware_params_json(const MmHardware *hw, cJSON *root)
{
  g_autoptr(GPtrArray) params = mm_hardware_params(hw);
  cJSON *o = cJSON_AddObjectToObject(root, "hardware_parameters");
  cJSON *list = cJSON_AddArrayToObject(o, "parameters");
  cJSON *defaulted = cJSON_AddArrayToObject(o, "defaulted");
  cJSON *uncited = cJSON_AddArrayToObject(o, "without_provenance");
  for (guint i = 0; i < params->len; i++) {
    const MmParamRef *r = params->pdata[i];
    const MmParam *p = r->param;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "path", r->path);
    cJSON_AddNumberToObject(e, "value", r->value);
    cJSON_AddStringToObject(e, "unit", r->unit);
    cJSON_AddStringToObject(e, "from", param_from(p));
    if (p->fit) cJSON_AddStringToObject(e, "fit", p->fit);
    if (p->kind == MM_PARAM_CITED) {
      cJSON_AddStringToObject(e, "provenance", mm_provenance_names[p->provenance]);
      if (p->source) cJSON_AddStringToObject(e, "source", p->source);
    }
    cJSON_AddItemToArray(list, e);
    if (p->kind == MM_PARAM_DEFAULT) cJSON_AddItemToArray(defaulted, cJSON_CreateString(r->path));
    if (p->kind == MM_PARAM_GIVEN) cJSON_AddItemToArray(uncited, cJSON_CreateString(r->path));
  }
  /* interference (docs/MODEL.md): the device's slowdown of compute beside a collective */
  const MmUtil *cs = &hw->device.overlap.collective_slowdown;
  cJSON *in = cJSON_AddObjectToObject(o, "interference");
  cJSON_AddNumberToObject(in, "collective_slowdown", cs->value);
  cJSON_AddNumberToObject(in, "compute_pace_beside_collective", 1.0 / (1.0 + cs->value));
  cJSON_AddStringToObject(in, "provenance", mm_provenance_names[cs->provenance]);
  if (cs->source) cJSON_AddStringToObject(in, "source", cs->source);
}

/* "$.intra_node.protocols.ll.latency_us 0.5 us" lines, wrapped, for the parameters of @kind. */
static void print_kind(FILE *out, const GPtrArray *params, MmParamKind kind, const char *title)
{
  guint n = 0;
  for (guint i = 0; i < params->len; i++) n += ((const MmParamRef *)params->pdata[i])->param->kind == kind;
  if (n == 0) return;
  fprintf(out, "  %s (%u):", title, n);
  guint col = 80, k = 0;
  for (guint i = 0; i < params->len; i++) {
    const MmParamRef *r = params->pdata[i];
    if (r->param->kind != kind) continue;
    const gboolean us = strcmp(r->unit, "us") == 0;
    g_autofree char *item = g_strdup_printf(" %s = %.4g%s%s", r->path + 2, r->value, us ? " us" : "",
                                            ++k < n ? "," : "");
    if (col + strlen(item) > 100) {
      fprintf(out, "\n   ");
      col = 3;
    }
    fputs(item, out);
    col += (guint)strlen(item);
  }
  fputc('\n', out);
}

void mm_report_hardware_params_text(FILE *out, const MmHardware *hw)
{
  g_autoptr(GPtrArray) params = mm_hardware_params(hw);
  guint fit = 0, sys = 0;
  for (guint i = 0; i < params->len; i++) {
    const MmParam *p = ((const MmParamRef *)params->pdata[i])->param;
    if (p->kind != MM_PARAM_DEFAULT) p->fit ? fit++ : sys++;
  }
  fprintf(out, "network  %u behavioural numbers: %u from fit files", params->len, fit);
  const char *fits[2] = {hw->intra.present ? hw->intra.fit : NULL, hw->inter.present ? hw->inter.fit : NULL};
  for (int i = 0; i < 2; i++)
    if (fits[i] && (i == 0 || !fits[0] || strcmp(fits[0], fits[1]) != 0)) fprintf(out, "%s %s", i && fits[0] ? "," : "", fits[i]);
  fprintf(out, ", %u from the system file, %u at defaults\n", sys, params->len - fit - sys);
  print_kind(out, params, MM_PARAM_DEFAULT, "at defaults");
  print_kind(out, params, MM_PARAM_GIVEN, "given without provenance");
  const MmUtil *cs = &hw->device.overlap.collective_slowdown;
  if (cs->value > 0)
    fprintf(out, "interference  compute kernels take %.4gx their time while a collective kernel runs beside them "
                 "(%s overlap.collective_slowdown %g, %s)\n",
            1.0 + cs->value, hw->device.name, cs->value, mm_provenance_names[cs->provenance]);
  else
    fprintf(out, "interference  none (%s overlap.collective_slowdown 0)\n", hw->device.name);
}

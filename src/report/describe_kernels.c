/* describe_kernels: each layer's kernel shape and the efficiency factors its time uses (describe). */
#include "cost/cost.h"
#include "report.h"

/* The @part call of layer @li on one device of @s (the plan's placement and part work, at
 * the mean expert load) and its cost factors. */
static double device_part(const MmGraph *g, guint li, const MmScenario *s, MmKernelPart part, MmKernel *k,
                          double *flops, double *bytes, MmCostWhy *why)
{
  MmPlacement p;
  MmPartWork w;
  mm_plan_place(s, g, li, &p);
  mm_plan_part_work(s, g, li, part, &p, 1.0, &w, why);
  *k = w.kernel;
  *flops = w.flops;
  *bytes = w.bytes;
  if (w.flops <= 0 && w.bytes <= 0) mm_cost_kernel_s(&s->hw->device, k, 0, 0, why);
  return w.time_s;
}

/* Whether describe also shows layer @li's backward call: an attention layer that runs backward on a
 * device with an attention curve of its dtype, whose points may tell the passes apart (with a
 * scalar or a fit the backward takes the forward's factor, and the output stays as it was). */
static gboolean shows_backward(const MmGraph *g, guint li, const MmScenario *s, const MmKernel *fwd)
{
  return fwd->kind == MM_KERNEL_ATTENTION && s->hw->device.compute_eff[MM_KERNEL_ATTENTION][fwd->dtype] != NULL &&
         g->layers[li].cost.bwd_input_exec_flops > 0 && s->cfg->task != MM_TASK_INFERENCE;
}

static cJSON *kernel_json(const MmKernel *k)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "kind", mm_kernel_kind_names[k->kind]);
  cJSON_AddStringToObject(o, "dtype", mm_dtype_name(k->dtype));
  cJSON_AddNumberToObject(o, "m", k->m);
  cJSON_AddNumberToObject(o, "n", k->n);
  cJSON_AddNumberToObject(o, "k", k->k);
  cJSON_AddNumberToObject(o, "batch", k->batch);
  if (k->kind == MM_KERNEL_ATTENTION && k->flash && k->impl)
    cJSON_AddStringToObject(o, "attention_kernel", mm_attn_kernel_names[k->impl]);
  return o;
}

static cJSON *factor_json(const MmCostFactor *f)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "value", f->util);
  cJSON_AddStringToObject(o, "from", f->name);
  cJSON_AddStringToObject(o, "kind", f->fit ? "fit" : f->curve ? "curve" : "scalar");
  cJSON_AddStringToObject(o, "provenance", f->fit ? "calibration"
                                           : mm_provenance_names[f->curve ? f->curve->provenance : f->scalar->provenance]);
  if (f->fit) {
    cJSON *fo = cJSON_AddObjectToObject(o, "fit");
    cJSON_AddStringToObject(fo, "model", f->fit->memory ? "bandwidth_t0" : "roofline_t0");
    if (!f->fit->memory) cJSON_AddNumberToObject(fo, "compute_fraction", f->fit->compute_fraction);
    cJSON_AddNumberToObject(fo, "memory_fraction", f->fit->memory_fraction);
    cJSON_AddNumberToObject(fo, "t0_us", f->fit->t0_s * 1e6);
    cJSON_AddNumberToObject(fo, "rms_rel_err", f->fit->rms_rel_err);
    cJSON_AddNumberToObject(fo, "held_out_rms_rel_err", f->fit->held_out_rms_rel_err);
  }
  if (f->curve) {
    const MmEffPoint *p = &f->curve->points[f->point];
    cJSON *po = cJSON_AddObjectToObject(o, "point");
    if (p->bytes > 0) {
      cJSON_AddNumberToObject(po, "bytes", p->bytes);
    } else {
      cJSON_AddNumberToObject(po, "m", p->m);
      cJSON_AddNumberToObject(po, "n", p->n);
      cJSON_AddNumberToObject(po, "k", p->k);
      cJSON_AddNumberToObject(po, "batch", p->batch);
      if (p->bwd) cJSON_AddStringToObject(po, "pass", mm_kernel_pass_names[1]);
      if (p->causal) cJSON_AddBoolToObject(po, "causal", TRUE);
      if (p->eager) cJSON_AddBoolToObject(po, "eager", TRUE);
      if (p->kernel) cJSON_AddStringToObject(po, "kernel", mm_attn_kernel_names[p->kernel]);
    }
    cJSON_AddNumberToObject(po, "util", p->util);
    if (f->other_mask) cJSON_AddBoolToObject(o, "other_mask", TRUE);
    if (f->longer) cJSON_AddBoolToObject(o, "longer", TRUE);
  }
  if (f->outside) cJSON_AddStringToObject(o, "outside_curve", f->outside->name);
  return o;
}

/* What bounds a kernel's time: "compute" or "memory" (the roofline's larger side), or "serial" for
 * eager attention, whose GEMMs and memory passes run one after another (src/cost). */
static const char *bound(const MmCostWhy *why)
{
  return why->serial ? "serial" : why->memory_bound ? "memory" : "compute";
}

/* One part of a layer's kernel on a device: its descriptor, FLOPs, bytes and efficiencies. */
static cJSON *part_json(const MmKernel *k, MmKernelPart part, double flops, double bytes, const MmCostWhy *why)
{
  cJSON *o = kernel_json(k);
  cJSON_AddStringToObject(o, "part", mm_kernel_part_names[part]);
  cJSON_AddNumberToObject(o, "flops", flops);
  cJSON_AddNumberToObject(o, "bytes", bytes);
  cJSON_AddItemToObject(o, "compute_efficiency", factor_json(&why->compute));
  cJSON_AddItemToObject(o, "memory_efficiency", factor_json(&why->memory));
  cJSON_AddStringToObject(o, "bound", bound(why));
  if (why->serial) {
    cJSON *so = cJSON_AddObjectToObject(o, "serial");
    cJSON_AddNumberToObject(so, "gemm_s", MAX(why->compute_s, why->gemm_io_s));
    cJSON_AddNumberToObject(so, "passes_s", why->passes_s);
    cJSON_AddStringToObject(so, "rule", "eager attention: the batched GEMMs (FLOPs at the compute efficiency, or "
                                        "their own HBM bytes), then the softmax, mask and dropout passes at HBM "
                                        "bandwidth; time = gemm_s + passes_s");
  }
  return o;
}

void mm_report_kernel_json(cJSON *op, const MmGraph *g, guint li, const MmScenario *s)
{
  g_return_if_fail(op != NULL && li < g->n_layers);
  cJSON_AddItemToObject(op, "kernel", kernel_json(&g->layers[li].kernel));
  if (!s) return;
  MmKernel k;
  MmCostWhy why;
  double flops, bytes;
  device_part(g, li, s, MM_PART_FWD, &k, &flops, &bytes, &why);
  cJSON_AddItemToObject(op, "kernel_per_device", part_json(&k, MM_PART_FWD, flops, bytes, &why));
  if (!shows_backward(g, li, s, &k)) return;
  device_part(g, li, s, MM_PART_BWD_INPUT, &k, &flops, &bytes, &why);
  cJSON_AddItemToObject(op, "kernel_per_device_bwd", part_json(&k, MM_PART_BWD_INPUT, flops, bytes, &why));
}

static void curve_json(cJSON *arr, const MmEffCurve *c)
{
  if (!c) return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", c->name);
  cJSON_AddStringToObject(o, "provenance", mm_provenance_names[c->provenance]);
  cJSON_AddStringToObject(o, "source", c->source ? c->source : "");
  cJSON_AddNumberToObject(o, "points", c->n_points);
  cJSON_AddItemToArray(arr, o);
}

static void util_json(cJSON *root, const char *key, const MmUtil *u)
{
  cJSON *o = cJSON_AddObjectToObject(root, key);
  cJSON_AddNumberToObject(o, "value", u->value);
  cJSON_AddStringToObject(o, "provenance", mm_provenance_names[u->provenance]);
  cJSON_AddStringToObject(o, "source", u->source ? u->source : "");
}

void mm_report_efficiency_json(cJSON *root, const MmScenario *s)
{
  g_return_if_fail(root != NULL);
  if (!s) return;
  const MmDevice *d = &s->hw->device;
  cJSON *o = cJSON_AddObjectToObject(root, "efficiency");
  cJSON_AddStringToObject(o, "device", d->name);
  cJSON_AddStringToObject(o, "rule", "each kernel's time is max(flops / (peak x compute efficiency), bytes / "
                                     "(HBM bandwidth x memory efficiency)), eager attention's its GEMMs' plus its "
                                     "memory passes' (bound serial); a device curve where it covers the "
                                     "kernel, else the utilization scalar (docs/SCHEMA.md, efficiency)");
  util_json(o, "utilization.gemm", &d->util_gemm);
  util_json(o, "utilization.hbm", &d->util_hbm);
  util_json(o, "clock_derate", &d->clock_derate);
  cJSON *curves = cJSON_AddArrayToObject(o, "curves");
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++)
    for (int t = 0; t < MM_DTYPE_COUNT; t++) curve_json(curves, d->compute_eff[k][t]);
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++) curve_json(curves, d->memory_eff[k]);
  if (!d->calibration_source) return;
  cJSON *cal = cJSON_AddObjectToObject(o, "calibration");
  cJSON_AddStringToObject(cal, "source", d->calibration_source);
  cJSON *fits = cJSON_AddArrayToObject(cal, "fits");
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++)
    for (int t = 0; t <= MM_DTYPE_COUNT; t++) {
      const MmEffFit *f = t < MM_DTYPE_COUNT ? d->compute_fit[k][t] : d->memory_fit[k];
      if (!f) continue;
      cJSON *fo = cJSON_CreateObject();
      cJSON_AddStringToObject(fo, "name", f->name);
      cJSON_AddNumberToObject(fo, "points", f->points);
      cJSON_AddNumberToObject(fo, "rms_rel_err", f->rms_rel_err);
      cJSON_AddNumberToObject(fo, "held_out_rms_rel_err", f->held_out_rms_rel_err);
      cJSON_AddItemToArray(fits, fo);
    }
}

static char *dim(double v) { return g_strdup_printf("%.6g", v); }

/* Adds a factor's provenance line to @notes unless one of that name is there. */
static void note(GPtrArray *names, GPtrArray *notes, const MmCostFactor *f, const MmDevice *d)
{
  for (guint i = 0; i < names->len; i++)
    if (g_strcmp0(names->pdata[i], f->name) == 0) return;
  g_ptr_array_add(names, (gpointer)f->name);
  if (f->fit) {
    g_ptr_array_add(notes, mm_cost_fit_text(f->fit, d->calibration_source));
    return;
  }
  const char *src = f->curve ? f->curve->source : f->scalar->source;
  g_ptr_array_add(notes, g_strdup_printf("%s (%s): %s", f->name,
                                         mm_provenance_names[f->curve ? f->curve->provenance : f->scalar->provenance],
                                         src ? src : "no source given"));
}

void mm_report_kernels_text(FILE *out, const MmGraph *g, const MmScenario *s)
{
  static const char *const hs[] = {"<layer", "<op", "<kernel", "<dtype", "m", "n", "k", "batch"};
  static const char *const hd[] = {"<layer", "<op", "<kernel", "m", "n", "k", "batch", "<compute efficiency",
                                   "<memory efficiency", "<bound"};
  const MmModel *m = g->model;
  const guint nc = s ? G_N_ELEMENTS(hd) : G_N_ELEMENTS(hs);
  g_autoptr(MmTable) t = mm_table_new(nc, s ? hd : hs);
  g_autoptr(GPtrArray) names = g_ptr_array_new();
  g_autoptr(GPtrArray) notes = g_ptr_array_new_with_free_func(g_free);
  if (s)
    fprintf(out, "\nkernels: the forward call of one layer of each block on one %s (the config's micro-batch):\n",
            s->hw->device.name);
  else
    fprintf(out, "\nkernels: the forward call of one layer of each block, per sample:\n");
  guint last_block = G_MAXUINT;
  gboolean serial = FALSE;
  for (guint u = 0; u < g->n_units; u++) {
    const MmUnit *un = &g->units[u];
    if (un->block == last_block) continue;
    last_block = un->block;
    const MmBlock *b = &m->blocks[un->block];
    for (guint li = un->first_layer; li < un->first_layer + un->n_layers; li++) {
      const MmLayer *l = &g->layers[li];
      char *name = g_strdup(li == un->first_layer ? b->name : "");
      if (!s) {
        const MmKernel *k = &l->kernel;
        char *cells[8] = {name, g_strdup(mm_role_names[l->role]), g_strdup(mm_kernel_kind_names[k->kind]),
                          g_strdup(mm_dtype_name(k->dtype)), dim(k->m), dim(k->n), dim(k->k), dim(k->batch)};
        mm_table_addv(t, cells);
        continue;
      }
      MmKernel k;
      MmCostWhy why;
      double flops, bytes;
      device_part(g, li, s, MM_PART_FWD, &k, &flops, &bytes, &why);
      note(names, notes, &why.compute, &s->hw->device);
      note(names, notes, &why.memory, &s->hw->device);
      char *cells[10] = {name, g_strdup(mm_role_names[l->role]), g_strdup(mm_kernel_kind_names[k.kind]),
                         dim(k.m), dim(k.n), dim(k.k), dim(k.batch), mm_cost_factor_text(&why.compute),
                         mm_cost_factor_text(&why.memory), g_strdup(bound(&why))};
      mm_table_addv(t, cells);
      serial |= why.serial;
      if (!shows_backward(g, li, s, &k)) continue;
      device_part(g, li, s, MM_PART_BWD_INPUT, &k, &flops, &bytes, &why);
      char *bcells[10] = {g_strdup(""), g_strdup_printf("%s (bwd)", mm_role_names[l->role]),
                          g_strdup(mm_kernel_kind_names[k.kind]), dim(k.m), dim(k.n), dim(k.k), dim(k.batch),
                          mm_cost_factor_text(&why.compute), mm_cost_factor_text(&why.memory),
                          g_strdup(bound(&why))};
      mm_table_addv(t, bcells);
    }
  }
  mm_table_print(t, out, "  ");
  for (guint i = 0; i < notes->len; i++) fprintf(out, "  %s\n", (const char *)notes->pdata[i]);
  if (serial)
    fprintf(out, "  serial: eager attention, its batched GEMMs and then its softmax, mask and dropout passes at "
                 "HBM bandwidth, one after another (the time is their sum)\n");
  const MmUtil *cd = s ? &s->hw->device.clock_derate : NULL;
  if (cd && cd->value != 1.0)
    fprintf(out, "  clock_derate %.4g (%s): compute runs at that fraction of the datasheet peak; %s\n", cd->value,
            mm_provenance_names[cd->provenance], cd->source ? cd->source : "no source given");
}

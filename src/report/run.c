/* run: iteration metrics from a simulated plan (throughput, MFU, serialized and exposed time), JSON, text, trace. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

/* Merges the intervals of the comm streams (each already in start order) into a
 * disjoint union; returns its length. */
typedef struct {
  MmTime a, b;
} Span;

static guint union_spans(Span *in, guint n, Span *out)
{
  guint k = 0;
  for (guint i = 0; i < n; i++) {
    if (in[i].b <= in[i].a) continue;
    if (k > 0 && in[i].a <= out[k - 1].b) {
      out[k - 1].b = MAX(out[k - 1].b, in[i].b);
    } else {
      out[k++] = in[i];
    }
  }
  return k;
}

static int span_cmp(const void *x, const void *y)
{
  const Span *a = x, *b = y;
  if (a->a != b->a) return a->a < b->a ? -1 : 1;
  return a->b < b->b ? -1 : a->b > b->b;
}

/* Sorts the @n spans @s into span_cmp order, as qsort would (equal spans are equal, so the order
 * is unique), by merging the runs of each stream: a stream runs its ops one at a time in program
 * order, so each stream's spans (@stream: each span's) already come in order. A run found out of
 * order falls back to qsort. Linear for the few streams an op list has. @tmp holds @n spans. */
static void sort_streams(Span *s, const uint8_t *stream, guint n, Span *tmp)
{
  guint end[MM_STREAM_COUNT] = {0}, head[MM_STREAM_COUNT];
  for (guint i = 0; i < n; i++) end[stream[i]]++;
  guint at = 0;
  for (int k = 0; k < MM_STREAM_COUNT; k++) {
    head[k] = at;
    at += end[k];
    end[k] = head[k];
  }
  for (guint i = 0; i < n; i++) {
    const guint k = stream[i];
    if (end[k] > head[k] && span_cmp(&tmp[end[k] - 1], &s[i]) > 0) {
      qsort(s, n, sizeof(Span), span_cmp);
      return;
    }
    tmp[end[k]++] = s[i];
  }
  guint live[MM_STREAM_COUNT], nl = 0; /* the streams with spans left */
  for (guint k = 0; k < MM_STREAM_COUNT; k++)
    if (head[k] < end[k]) live[nl++] = k;
  if (nl == 2) { /* the usual case (intra- and inter-node collectives): a two-way merge */
    const Span *x = tmp + head[live[0]], *xe = tmp + end[live[0]], *y = tmp + head[live[1]], *ye = tmp + end[live[1]];
    guint i = 0;
    while (x < xe && y < ye) s[i++] = span_cmp(y, x) < 0 ? *y++ : *x++;
    while (x < xe) s[i++] = *x++;
    while (y < ye) s[i++] = *y++;
    return;
  }
  for (guint i = 0; i < n; i++) {
    guint best = 0;
    for (guint j = 1; j < nl; j++)
      if (span_cmp(&tmp[head[live[j]]], &tmp[head[live[best]]]) < 0) best = j;
    const guint k = live[best];
    s[i] = tmp[head[k]++];
    if (head[k] == end[k]) live[best] = live[--nl];
  }
}

/* Wall time of the sorted disjoint spans @comp (@nc) and @comm (@nm), and of their intersection. */
static void span_totals(const Span *comp, guint nc, const Span *comm, guint nm, double *comp_s, double *comm_s,
                        double *both_s)
{
  double c = 0, m = 0, both = 0;
  for (guint i = 0; i < nc; i++) c += mm_time_to_s(comp[i].b - comp[i].a);
  guint j = 0;
  for (guint i = 0; i < nm; i++) {
    m += mm_time_to_s(comm[i].b - comm[i].a);
    while (j < nc && comp[j].b <= comm[i].a) j++;
    for (guint k = j; k < nc && comp[k].a < comm[i].b; k++) {
      MmTime x = MAX(comp[k].a, comm[i].a), y = MIN(comp[k].b, comm[i].b);
      if (y > x) both += mm_time_to_s(y - x);
    }
  }
  *comp_s = c;
  *comm_s = m;
  *both_s = both;
}

/* One fused group: the ops @idx[0..@m) of @pr (compute pieces on one stream, transfers on
 * others): wall time computing only, communicating only, both, and stalled: inside its span,
 * neither its transfers nor the compute stream (@all, @n_all: every compute span of the class,
 * in order) busy, i.e. waiting for a shard. The compute stream running other work between a
 * group's pieces (a backward exchange emitted early) is not a stall. @buf holds 2 @m + @n_all
 * spans. */
static void fused_group(const MmPlanProgram *pr, const MmTime *t0, const MmTime *t1, const uint32_t *idx, guint m,
                        const Span *all, guint n_all, Span *buf, MmRunMetrics *r)
{
  guint nc = 0, nm = 0;
  Span *comm = buf + m;
  MmTime lo = t0[idx[0]], hi = t1[idx[0]];
  for (guint k = 0; k < m; k++) {
    const uint32_t i = idx[k];
    lo = MIN(lo, t0[i]);
    hi = MAX(hi, t1[i]);
    if (pr->info[i].what == MM_OP_COLLECTIVE) comm[nm++] = (Span){t0[i], t1[i]};
    else buf[nc++] = (Span){t0[i], t1[i]};
  }
  qsort(comm, nm, sizeof(Span), span_cmp);
  qsort(buf, nc, sizeof(Span), span_cmp);
  nm = union_spans(comm, nm, comm);
  nc = union_spans(buf, nc, buf);
  double comp, cm, both;
  span_totals(buf, nc, comm, nm, &comp, &cm, &both);
  const double span = mm_time_to_s(hi - lo);
  /* busy inside the span: the group's transfers with every compute span, clipped */
  Span *busy = comm + nm;
  guint nb = 0;
  for (guint i = 0; i < nm; i++) busy[nb++] = comm[i];
  guint lo_i = 0, hi_i = n_all;
  while (lo_i < hi_i) { /* the first compute span ending after lo */
    const guint mid = (lo_i + hi_i) / 2;
    if (all[mid].b <= lo) lo_i = mid + 1;
    else hi_i = mid;
  }
  for (guint k = lo_i; k < n_all && all[k].a < hi; k++) busy[nb++] = (Span){MAX(all[k].a, lo), MIN(all[k].b, hi)};
  qsort(busy, nb, sizeof(Span), span_cmp);
  nb = union_spans(busy, nb, busy);
  double active = 0;
  for (guint i = 0; i < nb; i++) active += mm_time_to_s(busy[i].b - busy[i].a);
  r->fused_groups++;
  r->fused_ops += m;
  r->fused_compute_s += comp - both;
  r->fused_comm_s += cm - both;
  r->fused_both_s += both;
  r->fused_stalled_s += MAX(0.0, span - active);
  r->fused_span_s += span;
}

typedef struct {
  uint32_t group, op;
} FusedRef;

static int fused_cmp(const void *x, const void *y)
{
  const FusedRef *a = x, *b = y;
  if (a->group != b->group) return a->group < b->group ? -1 : 1;
  return a->op < b->op ? -1 : a->op > b->op;
}

/* Every fused group of @pr (its pieces need not be contiguous: a backward exchange is emitted
 * before the compute it feeds); @nf: its ops that are pieces of one. */
static void fused_groups(const MmPlanProgram *pr, const MmTime *t0, const MmTime *t1, const Span *all, guint n_all,
                         guint nf, MmRunMetrics *r)
{
  const uint32_t n = pr->n_ops;
  if (nf == 0) return;
  g_autofree FusedRef *refs = g_new(FusedRef, nf);
  g_autofree uint32_t *idx = g_new(uint32_t, nf);
  g_autofree Span *buf = g_new(Span, 2 * (gsize)nf + n_all + 1);
  nf = 0;
  for (uint32_t i = 0; i < n; i++)
    if (pr->info[i].fused) refs[nf++] = (FusedRef){pr->info[i].fused, i};
  qsort(refs, nf, sizeof *refs, fused_cmp);
  for (guint a = 0; a < nf;) {
    guint b = a;
    while (b < nf && refs[b].group == refs[a].group) idx[b - a] = refs[b].op, b++;
    fused_group(pr, t0, t1, idx, b - a, all, n_all, buf, r);
    a = b;
  }
}

/* The offload streams appear in results and traces only where the config offloads activations
 * (results without it keep their earlier shape). */
static gboolean stream_unused(const MmScenario *s, int stream)
{
  return (stream == MM_STREAM_OFFLOAD_D2H || stream == MM_STREAM_OFFLOAD_H2D) && s->cfg->offload_num_layers <= 0;
}

void mm__class_spans(const MmPlan *p, const MmEngine *e, uint32_t c, const MmTime *win, MmRunMetrics *r)
{
  const uint32_t n = mm_plan_class_program(p, c)->n_ops;
  g_autofree MmTime *t0 = g_new(MmTime, 2 * (gsize)n + 1);
  mm_engine_class_times(e, c, t0, t0 + n);
  mm__class_spans_of(p, c, t0, t0 + n, 0, n, win, r);
}

void mm__class_spans_of(const MmPlan *p, uint32_t c, const MmTime *t0, const MmTime *t1, uint32_t from, uint32_t to,
                        const MmTime *win, MmRunMetrics *r)
{
  const MmPlanProgram *pr = mm_plan_class_program(p, c);
  const uint32_t n = to - from;
  g_autofree Span *comp = g_new(Span, 4 * (gsize)n + 1);
  Span *comm = comp + n, *host = comp + 2 * (gsize)n, *tmp = comp + 3 * (gsize)n;
  g_autofree uint8_t *comm_stream = g_new(uint8_t, n + 1);
  guint nc = 0, nm = 0, nh = 0;
  gboolean sorted = TRUE;
  guint nf = 0; /* pieces of fused groups */
  /* the sums in locals (from 0, in op order, as the callers' zeroed @r would take them), added
   * to @r once: its fields might alias the span arrays, so the compiler keeps them in memory */
  uint32_t stream_ops[MM_STREAM_COUNT] = {0};
  double stream_busy[MM_STREAM_COUNT] = {0}, by_phase[MM_PHASE_COUNT] = {0}, by_kind[MM_COLL_COUNT] = {0},
         by_reason[MM_REASON_COUNT] = {0};
  double compute_s = 0, embedding_s = 0, comm_s = 0, host_copy_s = 0, host_step_s = 0, slowed[2] = {0, 0};
  for (uint32_t i = from; i < to; i++) {
    const MmOpInfo *in = &pr->info[i];
    const uint32_t st = pr->ops[i].stream;
    nf += in->fused != 0;
    MmTime a = t0[i], b = t1[i];
    if (win) {
      /* its part inside the window; counted where it starts */
      if (t0[i] >= win[0] && t0[i] < win[1]) stream_ops[st]++;
      a = MAX(a, win[0]);
      b = MIN(b, win[1]);
      if (b <= a) continue;
    } else {
      stream_ops[st]++;
    }
    double d = mm_time_to_s(b - a);
    stream_busy[st] += d;
    /* a slowed kernel's share of d beyond its own time (engine.h, interference) */
    if (pr->ops[i].cil == MM_CIL_SLOWED && t1[i] - t0[i] > pr->dur[i])
      slowed[in->what == MM_OP_LOOKUP] += d * (double)(t1[i] - t0[i] - pr->dur[i]) / (double)(t1[i] - t0[i]);
    switch (in->what) {
    case MM_OP_COMPUTE:
    case MM_OP_OPTIMIZER:
    case MM_OP_GRAD_ACCUM:
      compute_s += d;
      by_phase[in->phase] += d;
      comp[nc++] = (Span){a, b};
      break;
    case MM_OP_LOOKUP:
      embedding_s += d;
      by_phase[in->phase] += d;
      comp[nc++] = (Span){a, b};
      break;
    case MM_OP_COPY: /* activation offload: only its stream's busy time; a wait for it is idle */
      break;
    case MM_OP_COLLECTIVE:
      comm_s += d;
      by_kind[in->coll] += d;
      by_reason[in->reason] += d;
      if (nm > 0 && span_cmp(&comm[nm - 1], &(Span){a, b}) > 0) sorted = FALSE;
      comm_stream[nm] = (uint8_t)st;
      comm[nm++] = (Span){a, b};
      break;
    case MM_OP_HOST_COPY:
    case MM_OP_HOST_STEP:
      *(in->what == MM_OP_HOST_COPY ? &host_copy_s : &host_step_s) += d;
      host[nh++] = (Span){a, b}; /* one stream: in order */
      break;
    }
  }
  for (int k = 0; k < MM_STREAM_COUNT; k++) {
    r->stream_ops[k] += stream_ops[k];
    r->stream_busy_s[k] += stream_busy[k];
  }
  for (int k = 0; k < MM_PHASE_COUNT; k++) r->compute_by_phase_s[k] += by_phase[k];
  for (int k = 0; k < MM_COLL_COUNT; k++) r->comm_by_kind_s[k] += by_kind[k];
  for (int k = 0; k < MM_REASON_COUNT; k++) r->comm_by_reason_s[k] += by_reason[k];
  r->interference_compute_s += slowed[0];
  r->interference_embedding_s += slowed[1];
  r->compute_s += compute_s;
  r->embedding_s += embedding_s;
  r->comm_s += comm_s;
  r->host_copy_s += host_copy_s;
  r->host_step_s += host_step_s;
  if (!win) fused_groups(pr, t0, t1, comp, nc, nf, r);
  /* the compute stream is FIFO: its spans are disjoint and ordered; the comm streams interleave */
  if (!sorted) sort_streams(comm, comm_stream, nm, tmp);
  nm = union_spans(comm, nm, comm);
  double active, overlap, comp_active;
  span_totals(comp, nc, comm, nm, &comp_active, &active, &overlap);
  r->comm_active_s = active;
  r->compute_active_s = comp_active;
  r->exposed_comm_s = MAX(0.0, active - overlap);
  r->hidden_comm_s = active - r->exposed_comm_s;
  r->exposed_comm_fraction = active > 0 ? r->exposed_comm_s / active : 0;
  if (nh > 0) {
    /* host work with the device neither computing nor communicating */
    Span *busy = g_new(Span, (gsize)nc + nm + 1);
    memcpy(busy, comp, sizeof(Span) * nc);
    memcpy(busy + nc, comm, sizeof(Span) * nm);
    qsort(busy, nc + nm, sizeof(Span), span_cmp);
    const guint nb = union_spans(busy, nc + nm, busy);
    nh = union_spans(host, nh, host);
    double host_active, busy_s, both;
    span_totals(host, nh, busy, nb, &host_active, &busy_s, &both);
    r->host_exposed_s = MAX(0.0, host_active - both);
    g_free(busy);
  }
}

void mm__run_derived(const MmPlan *p, MmRunMetrics *r)
{
  const MmScenario *s = p->scenario;
  r->exposed_comm_fraction = r->comm_active_s > 0 ? r->exposed_comm_s / r->comm_active_s : 0;
  r->idle_s = MAX(0.0, r->iteration_time_s - r->compute_active_s - r->exposed_comm_s);
  r->bubble_fraction = r->iteration_time_s > 0 ? 1.0 - r->compute_active_s / r->iteration_time_s : 0;
  r->samples_per_s = r->iteration_time_s > 0 ? (double)s->global_batch / r->iteration_time_s : 0;
  r->tokens_per_s = s->model->seq_len > 0 ? r->samples_per_s * p->graph->tokens_per_sample : 0;
  r->model_flops = p->model_flops_per_iteration;
  r->mfu = r->iteration_time_s > 0
             ? p->model_flops_per_iteration / (r->iteration_time_s * (double)s->devices * p->peak_flops_per_device)
             : 0;
}

void mm_report_run_metrics(const MmPlan *p, const MmEngine *e, MmRunMetrics *r)
{
  memset(r, 0, sizeof *r);
  MmTime worst = 0;
  for (uint32_t c = 0; c < p->n_classes; c++) {
    MmTime t = mm_engine_class_end(e, c);
    if (t > worst || c == 0) worst = t, r->critical_class = c;
  }
  r->iteration_time_s = mm_time_to_s(mm_engine_makespan(e));
  r->events = mm_engine_events(e);
  r->ops = mm_plan_class_program(p, r->critical_class)->n_ops;
  mm__class_spans(p, e, r->critical_class, NULL, r);
  mm__run_derived(p, r);
}

cJSON *mm_report_classes_json(const MmPlan *p, const MmEngine *e, const MmMemory *mem)
{
  cJSON *arr = cJSON_CreateArray();
  for (uint32_t g = 0; g < p->n_programs; g++) {
    /* the slowest class running this behaviour */
    uint32_t best = UINT32_MAX;
    for (uint32_t c = 0; c < p->n_classes; c++)
      if (p->classes[c].program == g && (best == UINT32_MAX || mm_engine_class_end(e, c) > mm_engine_class_end(e, best)))
        best = c;
    if (best == UINT32_MAX) continue;
    const MmPlanProgram *pr = &p->programs[g];
    MmRunMetrics m;
    memset(&m, 0, sizeof m);
    mm__class_spans(p, e, best, NULL, &m);
    double end = mm_time_to_s(mm_engine_class_end(e, best));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "stage", pr->stage);
    if (p->scenario->cfg->expert_skew > 0) cJSON_AddBoolToObject(o, "busiest_expert_rank", pr->hot);
    cJSON_AddNumberToObject(o, "devices", (double)pr->devices);
    cJSON_AddNumberToObject(o, "end_s", end);
    cJSON_AddNumberToObject(o, "compute_busy_s", m.compute_active_s);
    cJSON_AddNumberToObject(o, "exposed_comm_s", m.exposed_comm_s);
    cJSON_AddNumberToObject(o, "compute_idle_fraction", end > 0 ? 1.0 - m.compute_active_s / end : 0);
    cJSON_AddNumberToObject(o, "ops", pr->n_ops);
    if (mem && pr->stage < mem->n_stages) cJSON_AddNumberToObject(o, "memory_per_device_bytes", mem->stage_bytes[pr->stage]);
    cJSON_AddItemToArray(arr, o);
  }
  return arr;
}

/* ---- JSON -------------------------------------------------------------- */

cJSON *mm_report_inputs_json(const MmScenario *s, cJSON *root)
{
  cJSON *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(model, "name", s->model->name);
  cJSON_AddStringToObject(model, "path", s->model->path);
  const MmHardware *hw = s->hw;
  cJSON *h = cJSON_AddObjectToObject(root, "hardware");
  cJSON_AddStringToObject(h, "name", hw->name);
  cJSON_AddStringToObject(h, "path", hw->path);
  cJSON_AddStringToObject(h, "device", hw->device.name);
  cJSON_AddNumberToObject(h, "devices", (double)s->devices);
  cJSON_AddNumberToObject(h, "gpus_per_node", (double)hw->gpus_per_node);
  cJSON_AddNumberToObject(h, "nodes", (double)hw->nodes);
  cJSON *c = cJSON_AddObjectToObject(root, "config");
  cJSON_AddStringToObject(c, "name", s->cfg->name);
  cJSON_AddStringToObject(c, "path", s->cfg->path);
  cJSON_AddStringToObject(c, "task", mm_task_names[s->cfg->task]);
  cJSON_AddNumberToObject(c, "global_batch_samples", (double)s->global_batch);
  cJSON_AddNumberToObject(c, "micro_batch_samples", (double)s->micro_batch);
  cJSON_AddNumberToObject(c, "micro_steps", (double)s->micro_steps);
  cJSON_AddStringToObject(c, "recompute", mm_recompute_names[s->cfg->recompute]);
  cJSON_AddNumberToObject(c, "pipeline_stages", (double)s->pp);
  if (s->cfg->expert_skew > 0) cJSON_AddNumberToObject(c, "expert_skew", s->cfg->expert_skew);
  return root;
}

cJSON *mm_report_run_json(const MmPlan *p, const MmEngine *e, const MmRunMetrics *r, const MmMemory *mem)
{
  const MmScenario *s = p->scenario;
  cJSON *root = cJSON_CreateObject();
  mm_report_inputs_json(s, root);
  cJSON_AddStringToObject(root, "mode", p->per_device ? "per_device" : "symmetric");
  cJSON_AddNumberToObject(root, "device_classes", p->n_classes);
  cJSON_AddNumberToObject(root, "iteration_time_s", r->iteration_time_s);
  cJSON *tp = cJSON_AddObjectToObject(root, "throughput");
  cJSON_AddNumberToObject(tp, "samples_per_s", r->samples_per_s);
  if (s->model->seq_len > 0) {
    cJSON_AddNumberToObject(tp, "tokens_per_s", r->tokens_per_s);
    cJSON_AddNumberToObject(tp, "tokens_per_s_per_device", r->tokens_per_s / (double)s->devices);
  }
  cJSON_AddNumberToObject(root, "mfu", r->mfu);
  cJSON *mf = cJSON_AddObjectToObject(root, "mfu_terms");
  cJSON_AddNumberToObject(mf, "model_flops_per_iteration", r->model_flops);
  cJSON_AddNumberToObject(mf, "devices", (double)s->devices);
  cJSON_AddNumberToObject(mf, "peak_flops_per_device", p->peak_flops_per_device);
  cJSON_AddStringToObject(mf, "dtype", mm_dtype_name(p->mfu_dtype));
  cJSON *se = cJSON_AddObjectToObject(root, "serialized");
  cJSON_AddNumberToObject(se, "compute_s", r->compute_s);
  cJSON_AddNumberToObject(se, "embedding_s", r->embedding_s);
  cJSON_AddNumberToObject(se, "comm_s", r->comm_s);
  cJSON_AddNumberToObject(se, "total_s", r->compute_s + r->embedding_s + r->comm_s);
  cJSON *bk = cJSON_AddObjectToObject(se, "comm_by_kind");
  for (int k = 0; k < MM_COLL_COUNT; k++) cJSON_AddNumberToObject(bk, mm_coll_names[k], r->comm_by_kind_s[k]);
  cJSON *br = cJSON_AddObjectToObject(se, "comm_by_strategy");
  for (int k = 0; mm_reason_names[k]; k++) cJSON_AddNumberToObject(br, mm_reason_names[k], r->comm_by_reason_s[k]);
  cJSON *bp = cJSON_AddObjectToObject(se, "compute_by_phase");
  for (int k = 0; k < MM_PHASE_COUNT; k++) cJSON_AddNumberToObject(bp, mm_phase_names[k], r->compute_by_phase_s[k]);
  cJSON_AddNumberToObject(root, "exposed_comm_s", r->exposed_comm_s);
  cJSON_AddNumberToObject(root, "exposed_comm_fraction", r->exposed_comm_fraction);
  cJSON *ov = cJSON_AddObjectToObject(root, "overlap");
  cJSON_AddNumberToObject(ov, "hidden_comm_s", r->hidden_comm_s);
  cJSON_AddNumberToObject(ov, "comm_active_s", r->comm_active_s);
  cJSON_AddNumberToObject(ov, "compute_active_s", r->compute_active_s);
  cJSON_AddNumberToObject(ov, "interference_compute_s", r->interference_compute_s);
  cJSON_AddNumberToObject(ov, "interference_embedding_s", r->interference_embedding_s);
  if (r->fused_groups > 0) {
    cJSON *fu = cJSON_AddObjectToObject(root, "fused");
    cJSON_AddNumberToObject(fu, "groups", r->fused_groups);
    cJSON_AddNumberToObject(fu, "ops", r->fused_ops);
    cJSON_AddNumberToObject(fu, "compute_only_s", r->fused_compute_s);
    cJSON_AddNumberToObject(fu, "comm_only_s", r->fused_comm_s);
    cJSON_AddNumberToObject(fu, "compute_and_comm_s", r->fused_both_s);
    cJSON_AddNumberToObject(fu, "stalled_s", r->fused_stalled_s);
    cJSON_AddNumberToObject(fu, "span_s", r->fused_span_s);
  }
  cJSON *sts = cJSON_AddArrayToObject(root, "streams");
  for (int k = 0; k < MM_STREAM_COUNT; k++) {
    if (stream_unused(s, k)) continue;
    if (k == MM_STREAM_HOST && r->stream_ops[k] == 0) continue; /* listed where the optimizer is offloaded */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", mm_stream_names[k]);
    cJSON_AddNumberToObject(o, "busy_s", r->stream_busy_s[k]);
    cJSON_AddNumberToObject(o, "ops", r->stream_ops[k]);
    cJSON_AddItemToArray(sts, o);
  }
  cJSON_AddNumberToObject(root, "idle_s", r->idle_s);
  cJSON_AddNumberToObject(root, "compute_idle_fraction", r->bubble_fraction);
  if (s->cfg->optimizer.offload != MM_OFFLOAD_NONE && s->cfg->task != MM_TASK_INFERENCE) {
    cJSON *of = cJSON_AddObjectToObject(root, "offload");
    cJSON_AddStringToObject(of, "optimizer", mm_offload_names[s->cfg->optimizer.offload]);
    cJSON_AddNumberToObject(of, "host_copy_s", r->host_copy_s);
    cJSON_AddNumberToObject(of, "cpu_step_s", r->host_step_s);
    cJSON_AddNumberToObject(of, "exposed_s", r->host_exposed_s);
    cJSON_AddNumberToObject(of, "host_link_Bps", s->hw->host_bw_Bps);
    cJSON_AddNumberToObject(of, "host_mem_Bps_per_device", s->hw->host_mem_Bps / (double)s->hw->gpus_per_node);
    if (mem) {
      cJSON_AddNumberToObject(of, "host_bytes_per_device", mem->host_bytes);
      cJSON_AddNumberToObject(of, "host_bytes_per_node", mem->host_bytes * (double)s->hw->gpus_per_node);
    }
  }
  if (s->pp > 1) {
    cJSON *pp = cJSON_AddObjectToObject(root, "pipeline");
    cJSON_AddNumberToObject(pp, "stages", (double)s->pp);
    cJSON_AddStringToObject(pp, "schedule", mm_pipe_schedule_names[s->cfg->pipeline.schedule]);
    cJSON_AddNumberToObject(pp, "virtual_stages", (double)s->vstages);
    cJSON_AddNumberToObject(pp, "micro_batches", (double)s->micro_steps);
    cJSON_AddNumberToObject(pp, "critical_stage", mm_plan_class_program(p, r->critical_class)->stage);
  }
  if (e) cJSON_AddItemToObject(root, "behaviours", mm_report_classes_json(p, e, mem));
  cJSON_AddNumberToObject(root, "ops_per_device", r->ops);
  cJSON_AddNumberToObject(root, "events", (double)r->events);
  if (mem) cJSON_AddItemToObject(root, "memory", mm_report_memory_json(mem, s->model));
  return root;
}

/* ---- text -------------------------------------------------------------- */

void mm_report_run_text(FILE *out, const MmPlan *p, const MmRunMetrics *r, const MmMemory *mem)
{
  const MmScenario *s = p->scenario;
  fprintf(out, "%s on %s: %" G_GINT64_FORMAT " x %s\n", s->model->name, s->hw->name, s->devices, s->hw->device.name);
  fprintf(out, "config   %s: %s, %" G_GINT64_FORMAT " samples, %" G_GINT64_FORMAT " micro-step%s of %" G_GINT64_FORMAT
          "%s\n",
          s->cfg->name, mm_task_names[s->cfg->task], s->global_batch, s->micro_steps, s->micro_steps > 1 ? "s" : "",
          s->micro_batch, p->per_device ? " (per-device simulation)" : "");
  if (s->pp > 1)
    fprintf(out, "pipeline %" G_GINT64_FORMAT " stages, %s, %" G_GINT64_FORMAT " chunk%s per stage, %" G_GINT64_FORMAT
            " micro-batches\n",
            s->pp, mm_pipe_schedule_names[s->cfg->pipeline.schedule], s->vstages, s->vstages > 1 ? "s" : "",
            s->micro_steps);
  g_autofree char *it = mm_fmt_seconds(r->iteration_time_s);
  fprintf(out, "\n  iteration time     %s\n", it);
  if (s->model->seq_len > 0)
    fprintf(out, "  throughput         %.4g samples/s, %.4g tokens/s (%.4g tokens/s per device)\n", r->samples_per_s,
            r->tokens_per_s, r->tokens_per_s / (double)s->devices);
  else
    fprintf(out, "  throughput         %.4g samples/s\n", r->samples_per_s);
  g_autofree char *mf = mm_fmt_flops(r->model_flops);
  g_autofree char *pk = mm_fmt_flops(p->peak_flops_per_device);
  fprintf(out, "  MFU                %.1f%%  (%s model FLOPs / (iteration x %" G_GINT64_FORMAT " x %s/s %s))\n",
          100.0 * r->mfu, mf, s->devices, pk, mm_dtype_name(p->mfu_dtype));
  g_autofree char *cs = mm_fmt_seconds(r->compute_s);
  g_autofree char *es = mm_fmt_seconds(r->embedding_s);
  g_autofree char *ms = mm_fmt_seconds(r->comm_s);
  fprintf(out, "  serialized         compute %s + embedding %s + communication %s\n", cs, es, ms);
  for (int k = 0; k < MM_COLL_COUNT; k++) {
    if (r->comm_by_kind_s[k] <= 0) continue;
    g_autofree char *v = mm_fmt_seconds(r->comm_by_kind_s[k]);
    fprintf(out, "                       %-15s %s\n", mm_coll_names[k], v);
  }
  g_autofree char *ex = mm_fmt_seconds(r->exposed_comm_s);
  g_autofree char *hi = mm_fmt_seconds(r->hidden_comm_s);
  fprintf(out, "  exposed comm       %s (%.1f%% of communication time; %s hidden under compute)\n", ex,
          100.0 * r->exposed_comm_fraction, hi);
  if (r->interference_compute_s + r->interference_embedding_s > 0) {
    g_autofree char *in = mm_fmt_seconds(r->interference_compute_s + r->interference_embedding_s);
    fprintf(out, "  interference       %s of the compute is kernels slowed by collectives beside them (%s's "
                 "overlap.collective_slowdown %g)\n",
            in, s->hw->device.name, s->hw->device.overlap.collective_slowdown.value);
  }
  if (r->fused_groups > 0) {
    g_autofree char *fc = mm_fmt_seconds(r->fused_compute_s);
    g_autofree char *fm = mm_fmt_seconds(r->fused_comm_s);
    g_autofree char *fb = mm_fmt_seconds(r->fused_both_s);
    g_autofree char *fs = mm_fmt_seconds(r->fused_stalled_s);
    fprintf(out, "  fused / overlapped %u ops in %u groups: computing %s, communicating %s, both %s, stalled %s\n",
            r->fused_ops, r->fused_groups, fc, fm, fb, fs);
  }
  if (r->idle_s > 1e-3 * r->iteration_time_s) {
    g_autofree char *id = mm_fmt_seconds(r->idle_s);
    const gboolean host = s->cfg->offload_num_layers > 0 || r->host_copy_s > 0 || r->host_step_s > 0;
    fprintf(out, "  idle               %s (%.1f%% of the iteration: pipeline bubble, waiting for peers%s)\n", id,
            100.0 * r->idle_s / r->iteration_time_s, host ? " or for host copies and the CPU" : "");
  }
  if (r->host_copy_s > 0 || r->host_step_s > 0) {
    g_autofree char *hc = mm_fmt_seconds(r->host_copy_s);
    g_autofree char *hs = mm_fmt_seconds(r->host_step_s);
    g_autofree char *hx = mm_fmt_seconds(r->host_exposed_s);
    fprintf(out, "  optimizer offload  copies %s + CPU step %s; %s with the device otherwise idle\n", hc, hs, hx);
  }
  if (mem) {
    g_autofree char *tot = mm_fmt_bytes(mem->per_device_bytes);
    g_autofree char *cap = mm_fmt_bytes(mem->capacity_bytes);
    fprintf(out, "  memory per device  %s of %s: %s\n", tot, cap,
            mem->fits ? "fits" : "DOES NOT FIT - OUT OF MEMORY (time reported as if it fit)");
    if (mem->n_stages > 1) fprintf(out, "                     (stage %u, the fullest of %u)\n", mem->stage, mem->n_stages);
    if (mem->host_bytes > 0) {
      g_autofree char *hb = mm_fmt_bytes(mem->host_bytes);
      g_autofree char *hn = mm_fmt_bytes(mem->host_bytes * (double)s->hw->gpus_per_node);
      fprintf(out, "  host memory        %s per device (optimizer states, master weights), %s per node\n", hb, hn);
    }
  }
}

/* ---- serving ----------------------------------------------------------- */

void mm_report_serving_metrics(const MmPlan *prefill, const MmRunMetrics *rp, const MmPlan *decode,
                               const MmRunMetrics *rd, const MmMemory *mem,
                               MmServingMetrics *out)
{
  const MmScenario *s = prefill->scenario;
  const MmServing *sv = &s->cfg->serving;
  memset(out, 0, sizeof *out);
  out->sequences = s->global_batch;
  out->prompt_tokens = sv->prompt_tokens;
  out->output_tokens = sv->output_tokens;
  out->decode_context = (double)decode->graph->pass.context;
  out->ttft_s = rp->iteration_time_s;
  out->tpot_s = rd->iteration_time_s;
  out->latency_s = out->ttft_s + (double)(sv->output_tokens - 1) * out->tpot_s;
  double tokens = (double)s->global_batch * (double)sv->output_tokens;
  out->tokens_per_s = out->latency_s > 0 ? tokens / out->latency_s : 0;
  out->tokens_per_s_per_device = out->tokens_per_s / (double)s->devices;
  out->decode_tokens_per_s = out->tpot_s > 0 ? (double)s->global_batch / out->tpot_s : 0;
  out->kv_cache_bytes = mem ? mem->total.kv_cache : 0;
  const MmPlanProgram *pr = mm_plan_class_program(decode, rd->critical_class);
  for (uint32_t i = 0; i < pr->n_ops; i++) {
    if (pr->info[i].what == MM_OP_COLLECTIVE) {
      out->decode_collectives++;
      continue;
    }
    out->decode_hbm_bytes += pr->info[i].bytes;
    out->decode_flops += pr->info[i].flops;
    out->decode_kernels += pr->info[i].kernels;
  }
  out->decode_hbm_time_s = out->decode_hbm_bytes / s->hw->device.hbm_bw_Bps;
  /* the same bytes at the HBM efficiency the cost unit gives streaming kernels */
  const MmKernel stream = {.kind = MM_KERNEL_ELEMENTWISE, .dtype = MM_DTYPE_FP32, .m = 1, .n = 1, .k = 1, .batch = 1};
  out->decode_hbm_achievable_s = mm_cost_kernel_s(&s->hw->device, &stream, 0, out->decode_hbm_bytes, NULL);
  out->decode_kernel_s = rd->compute_s + rd->embedding_s;
  out->decode_launch_s = out->decode_kernels * mm_plan_launch_s(s, decode->graph);
  out->decode_comm_s = rd->comm_s;
  out->cuda_graphs = sv->cuda_graphs;
  out->custom_all_reduce = sv->custom_all_reduce;
}

cJSON *mm_report_serving_json(const MmServingMetrics *sv)
{
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "sequences", (double)sv->sequences);
  cJSON_AddNumberToObject(o, "prompt_tokens", (double)sv->prompt_tokens);
  cJSON_AddNumberToObject(o, "output_tokens", (double)sv->output_tokens);
  cJSON_AddNumberToObject(o, "decode_context_tokens", sv->decode_context);
  cJSON_AddNumberToObject(o, "time_to_first_token_s", sv->ttft_s);
  cJSON_AddNumberToObject(o, "time_per_output_token_s", sv->tpot_s);
  cJSON_AddNumberToObject(o, "latency_s", sv->latency_s);
  cJSON_AddNumberToObject(o, "tokens_per_s", sv->tokens_per_s);
  cJSON_AddNumberToObject(o, "tokens_per_s_per_device", sv->tokens_per_s_per_device);
  cJSON_AddNumberToObject(o, "decode_tokens_per_s", sv->decode_tokens_per_s);
  cJSON_AddNumberToObject(o, "kv_cache_per_device_bytes", sv->kv_cache_bytes);
  cJSON *d = cJSON_AddObjectToObject(o, "decode_step_terms");
  cJSON_AddNumberToObject(d, "hbm_bytes_per_device", sv->decode_hbm_bytes);
  cJSON_AddNumberToObject(d, "flops_per_device", sv->decode_flops);
  cJSON_AddNumberToObject(d, "hbm_bytes_over_peak_bandwidth_s", sv->decode_hbm_time_s);
  cJSON_AddNumberToObject(d, "hbm_bytes_over_achievable_bandwidth_s", sv->decode_hbm_achievable_s);
  cJSON_AddNumberToObject(d, "kernels_s", sv->decode_kernel_s);
  cJSON_AddNumberToObject(d, "kernels", sv->decode_kernels);
  cJSON_AddNumberToObject(d, "kernel_launches_s", sv->decode_launch_s);
  cJSON_AddNumberToObject(d, "collectives_s", sv->decode_comm_s);
  cJSON_AddNumberToObject(d, "collectives", sv->decode_collectives);
  cJSON_AddBoolToObject(d, "cuda_graphs", sv->cuda_graphs);
  cJSON_AddBoolToObject(d, "custom_all_reduce", sv->custom_all_reduce);
  return o;
}

void mm_report_serving_text(FILE *out, const MmServingMetrics *sv)
{
  g_autofree char *tt = mm_fmt_seconds(sv->ttft_s);
  g_autofree char *tp = mm_fmt_seconds(sv->tpot_s);
  g_autofree char *lat = mm_fmt_seconds(sv->latency_s);
  g_autofree char *kv = mm_fmt_bytes(sv->kv_cache_bytes);
  g_autofree char *hb = mm_fmt_bytes(sv->decode_hbm_bytes);
  g_autofree char *floor = mm_fmt_seconds(sv->decode_hbm_time_s);
  fprintf(out, "\n  serving            %" G_GINT64_FORMAT " sequences, %" G_GINT64_FORMAT " prompt + %" G_GINT64_FORMAT
          " generated tokens each\n", sv->sequences, sv->prompt_tokens, sv->output_tokens);
  fprintf(out, "  time to 1st token  %s (prefill)\n", tt);
  fprintf(out, "  time per token     %s (decode step at %.0f tokens of context: %s of HBM traffic, %s at peak bandwidth)\n",
          tp, sv->decode_context, hb, floor);
  g_autofree char *ach = mm_fmt_seconds(sv->decode_hbm_achievable_s);
  g_autofree char *ks = mm_fmt_seconds(sv->decode_kernel_s);
  g_autofree char *ls = mm_fmt_seconds(sv->decode_launch_s);
  g_autofree char *cs = mm_fmt_seconds(sv->decode_comm_s);
  fprintf(out, "  decode step        kernels %s (%u kernels, %s launches %s), collectives %s (%u%s); "
          "HBM traffic at achievable bandwidth %s\n",
          ks, sv->decode_kernels, sv->cuda_graphs ? "graph" : "eager", ls, cs, sv->decode_collectives,
          sv->custom_all_reduce ? ", custom all-reduce allowed" : "", ach);
  fprintf(out, "  request latency    %s; %.4g tokens/s (%.4g per device), %.4g tokens/s while decoding\n", lat,
          sv->tokens_per_s, sv->tokens_per_s_per_device, sv->decode_tokens_per_s);
  fprintf(out, "  KV cache           %s per device\n", kv);
}

/* ---- Chrome trace ------------------------------------------------------ */

static void json_string(GString *g, const char *s)
{
  g_string_append_c(g, '"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') g_string_append_printf(g, "\\%c", ch);
    else if (ch < 0x20) g_string_append_printf(g, "\\u%04x", ch);
    else g_string_append_c(g, (char)ch);
  }
  g_string_append_c(g, '"');
}

static void append_us(GString *g, MmTime t)
{
  /* microseconds with picosecond digits, locale-independent */
  g_string_append_printf(g, "%" G_GUINT64_FORMAT ".%06" G_GUINT64_FORMAT, t / 1000000, t % 1000000);
}

/* Appends the processes and events of one run: pids from @pid0, times shifted by @t0,
 * process names prefixed with @phase (NULL: none). */
static void trace_run(GString *g, gboolean *first, const MmPlan *p, const MmEngine *e, uint32_t pid0, MmTime t0,
                      const char *phase)
{
  /* op names, built once per program (classes of one program share them) */
  g_autofree char ***names = g_new0(char **, p->n_programs + 1);
  for (uint32_t q = 0; q < p->n_programs; q++) {
    names[q] = g_new(char *, p->programs[q].n_ops + 1);
    for (uint32_t i = 0; i < p->programs[q].n_ops; i++) names[q][i] = mm_plan_op_name(p, &p->programs[q], i);
  }
  for (uint32_t c = 0; c < p->n_classes; c++) {
    const MmPlanProgram *pr = mm_plan_class_program(p, c);
    const uint32_t pid = pid0 + c;
    g_autofree char *pname = p->per_device ? g_strdup_printf("device %u (stage %u)", c, pr->stage)
                                        : g_strdup_printf("device class %u: stage %u%s (%" G_GINT64_FORMAT " devices)", c,
                                                          pr->stage, pr->hot ? ", busiest expert rank" : "",
                                                          p->class_count[c]);
    g_autofree char *full = phase ? g_strdup_printf("%s, %s", phase, pname) : g_strdup(pname);
    g_string_append_printf(g, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%u,\"args\":{\"name\":",
                           *first ? "" : ",\n", pid);
    *first = FALSE;
    json_string(g, full);
    g_string_append(g, "}}");
    g_string_append_printf(g, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%u,\"args\":{\"sort_index\":%u}}",
                           pid, pid);
    gboolean host_ops = FALSE;
    for (uint32_t i = 0; i < pr->n_ops && !host_ops; i++) host_ops = pr->ops[i].stream == MM_STREAM_HOST;
    for (int st = 0; st < MM_STREAM_COUNT; st++) {
      if (stream_unused(p->scenario, st)) continue;
      if (st == MM_STREAM_HOST && !host_ops) continue; /* named where the optimizer is offloaded */
      g_string_append_printf(g, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                             pid, st, mm_stream_names[st]);
      g_string_append_printf(g, ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%u,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                             pid, st, st);
    }
    for (uint32_t i = 0; i < pr->n_ops; i++) {
      const MmOpInfo *in = &pr->info[i];
      MmTime a = mm_engine_op_start(e, c, i), b = mm_engine_op_end(e, c, i);
      g_string_append(g, ",\n{\"name\":");
      json_string(g, names[p->classes[c].program][i]);
      g_string_append_printf(g, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":",
                             in->what == MM_OP_COLLECTIVE   ? mm_coll_names[in->coll]
                             : in->what == MM_OP_COPY      ? "offload"
                             : in->what == MM_OP_HOST_COPY ? "host_copy" /* plotted as other */
                                                           : mm_phase_names[in->phase],
                             pid,
                             pr->ops[i].stream);
      append_us(g, t0 + a);
      g_string_append(g, ",\"dur\":");
      append_us(g, b - a);
      char num[G_ASCII_DTOSTR_BUF_SIZE];
      g_string_append_printf(g, ",\"args\":{\"op\":%u,\"micro_step\":%u", i, in->micro);
      if (in->fused)
        g_string_append_printf(g, ",\"fused_group\":%u,\"overlap\":\"%s\"", in->fused, mm_overlap_names[in->overlap]);
      if (p->scenario->pp > 1) g_string_append_printf(g, ",\"chunk\":%u", in->chunk);
      if (in->what == MM_OP_COLLECTIVE) {
        g_string_append_printf(g, ",\"strategy\":\"%s\",\"group_size\":%u,\"bytes\":%s", mm_reason_names[in->reason],
                               pr->ops[i].degree, g_ascii_dtostr(num, sizeof num, in->bytes));
      } else if (in->what == MM_OP_COPY || in->what == MM_OP_HOST_COPY) {
        g_string_append_printf(g, ",\"bytes\":%s", g_ascii_dtostr(num, sizeof num, in->bytes));
      } else {
        g_string_append_printf(g, ",\"flops\":%s", g_ascii_dtostr(num, sizeof num, in->flops));
        g_string_append_printf(g, ",\"hbm_bytes\":%s,\"kernels\":%u", g_ascii_dtostr(num, sizeof num, in->bytes),
                               in->kernels);
      }
      g_string_append(g, "}}");
    }
  }
  for (uint32_t q = 0; q < p->n_programs; q++) {
    for (uint32_t i = 0; i < p->programs[q].n_ops; i++) g_free(names[q][i]);
    g_free(names[q]);
  }
}

static gsize trace_ops(const MmPlan *p)
{
  gsize ops = 0;
  for (uint32_t c = 0; p && c < p->n_classes; c++) ops += mm_plan_class_program(p, c)->n_ops;
  return ops;
}

char *mm_report_trace(const MmPlan *p, const MmEngine *e, const MmPlan *decode, const MmEngine *de, gsize *len)
{
  GString *g = g_string_sized_new(256 * (trace_ops(p) + trace_ops(decode)) + 64);
  /* otherData: the run's inputs as in the result (model, hardware, config), for titles */
  g_autoptr(cJSON) other = mm_report_inputs_json(p->scenario, cJSON_CreateObject());
  g_autofree char *other_s = cJSON_PrintUnformatted(other);
  g_string_append_printf(g, "{\"displayTimeUnit\":\"ms\",\"otherData\":%s,\"traceEvents\":[\n", other_s);
  gboolean first = TRUE;
  trace_run(g, &first, p, e, 0, 0, decode ? "prefill" : NULL);
  /* serving: one decode step after the prefill, as the first generated token follows it */
  if (decode) trace_run(g, &first, decode, de, p->n_classes, mm_engine_makespan(e), "decode step");
  g_string_append(g, "\n]}\n");
  *len = g->len;
  return g_string_free(g, FALSE);
}

gboolean mm_report_write_trace(const MmPlan *p, const MmEngine *e, const MmPlan *decode, const MmEngine *de,
                               const char *path, GError **error)
{
  g_autoptr(MmOutputs) outs = mm_outputs_new();
  gsize len = 0;
  char *text = mm_report_trace(p, e, decode, de, &len);
  mm_outputs_add(outs, NULL, path, text, len);
  return mm_outputs_commit(outs, error);
}

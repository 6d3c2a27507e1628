/* schedule: pipeline schedules (GPipe, 1F1B, interleaved 1F1B, ZB-H1) and the chunk of every unit. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- pipeline schedules and chunks -------------------------------------- */

/* Megatron's mapping of the k-th virtual micro-batch to (chunk, micro-batch). */
static MmPipeStep virtual_step(guint p, guint v, guint k, gboolean bwd)
{
  guint in_group = k % (p * v);
  guint chunk = in_group / p;
  MmPipeStep s = {(uint8_t)bwd, (uint16_t)(bwd ? v - 1 - chunk : chunk), (k / (p * v)) * p + k % p};
  return s;
}

guint mm__pipe_warmup(guint p, guint v, guint m, guint stage)
{
  return v == 1 ? MIN(p - stage - 1, m) : MIN((p - stage - 1) * 2 + (v - 1) * p, m * v);
}

static gboolean has_steady(const MmScenario *s)
{
  return s->cfg->task != MM_TASK_INFERENCE && s->cfg->pipeline.schedule != MM_PIPE_GPIPE &&
         s->cfg->pipeline.schedule != MM_PIPE_ZB_H1 && s->cfg->pipeline.schedule != MM_PIPE_DUALPIPEV;
}

uint32_t mm_pipe_chunk_stage(const MmScenario *s, uint32_t k)
{
  const uint32_t p = (uint32_t)s->pp;
  if (s->cfg->pipeline.schedule == MM_PIPE_DUALPIPEV && s->vstages == 2) return k < p ? k : 2 * p - 1 - k;
  return k % p;
}

uint32_t mm_pipe_stage_chunk(const MmScenario *s, uint32_t stage, uint32_t c)
{
  const uint32_t p = (uint32_t)s->pp;
  if (s->cfg->pipeline.schedule == MM_PIPE_DUALPIPEV && s->vstages == 2) return c == 0 ? stage : 2 * p - 1 - stage;
  return c * p + stage;
}

void mm__pipe_period(const MmScenario *s, uint32_t *pairs, uint32_t *micro)
{
  const uint32_t p = (uint32_t)s->pp, v = (uint32_t)s->vstages;
  *pairs = !has_steady(s) ? 0 : v == 1 ? 1 : p * v;
  *micro = !has_steady(s) ? 0 : v == 1 ? 1 : p;
}

uint32_t mm_plan_steady_micro_steps(const MmScenario *s, uint32_t periods)
{
  uint32_t G, g;
  mm__pipe_period(s, &G, &g);
  if (G == 0 || s->micro_steps > G_MAXUINT32) return 0;
  const uint32_t m = (uint32_t)s->micro_steps, p = (uint32_t)s->pp, v = (uint32_t)s->vstages;
  /* stage 0 warms up longest; its steady pairs are m v - warm-up (a warm-up capped at m v leaves
   * none: need passes m) */
  const uint64_t warm = mm__pipe_warmup(p, v, m, 0);
  const uint64_t need = ((uint64_t)periods * G + warm + v - 1) / v;
  uint64_t mr = m % g;
  if (mr < need) mr += (need - mr + g - 1) / g * g;
  return mr < m ? (uint32_t)mr : 0;
}

/* ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, Sec. 3.1, and its reference
 * schedule, sail-sg/zero-bubble-pipeline-parallelism's ZeroBubbleH1Pipeline): 1F1B's warm-up of
 * p - s - 1 forwards, then s pairs of a forward and an input-gradient pass B whose weight-gradient
 * pass W waits, then forward, B, W while forwards remain, then B, W, and the s deferred W passes
 * last. W passes run in the order of their B. Stage s holds back s of them: the later stages,
 * which 1F1B leaves idle first in the cool-down, fill it with their weight gradients while the
 * earlier stages' input gradients, the critical path, arrive sooner. */
static guint zb_h1(guint p, guint m, guint stage, MmPipeStep *out)
{
  guint n = 0, f = 0, b = 0, w = 0;
#define STEP(kind, mi) (out[n++] = (MmPipeStep){.bwd = (kind), .chunk = 0, .micro = (mi)})
  for (guint i = 0; i < MIN(p - stage - 1, m); i++) STEP(0, f++);
  for (guint i = 0; i < stage && f < m; i++) {
    STEP(0, f++);
    STEP(1, b++);
  }
  while (f < m) {
    STEP(0, f++);
    STEP(1, b++);
    STEP(MM_PIPE_W, w++);
  }
  while (b < m) {
    STEP(1, b++);
    STEP(MM_PIPE_W, w++);
  }
  while (w < m) STEP(MM_PIPE_W, w++);
#undef STEP
  return n;
}

/* DualPipeV (DeepSeek, deepseek-ai/DualPipe, dualpipev.py, DualPipeV.step): stage r holds local chunk
 * 0 (model chunk r, on the way down) and local chunk 1 (model chunk 2p - 1 - r, on the way back up),
 * and runs eight phases over m >= 2p micro-batches: 2(p - r - 1) forwards of chunk 0; r + 1 pairs of
 * forwards of chunks 0 and 1; p - r - 1 times a chunk-1 input gradient (B), its weight gradient (W) and
 * a chunk-1 forward; m - 2p + r + 1 times forward 0 with backward 1, then forward 1 with backward 0
 * (the reference overlaps each such pair; here they follow each other); p - r - 1 times backward 1, then
 * forward 1 with backward 0; r + 1 times backward 1 and backward 0, their second half split into B and
 * a deferred W; p - r - 1 times a W and a split backward 0; r + 1 W. W passes run in the order of their
 * B. Backwards not split are MM_PIPE_BW (input and weight gradients together). */
typedef struct {
  MmPipeStep *out;
  guint n, f[2], b[2]; /* steps written; next forward and backward micro-batch per local chunk */
  MmPipeStep *w;       /* the W passes of split backwards, oldest first */
  guint w_head, w_len, w_cap;
} Dpv;

static void dpv_fwd(Dpv *d, guint c) { d->out[d->n++] = (MmPipeStep){.bwd = 0, .chunk = (uint16_t)c, .micro = d->f[c]++}; }

static void dpv_bwd(Dpv *d, guint c, gboolean split)
{
  const MmPipeStep x = {.bwd = split ? 1 : MM_PIPE_BW, .chunk = (uint16_t)c, .micro = d->b[c]++};
  d->out[d->n++] = x;
  if (split) d->w[(d->w_head + d->w_len++) % d->w_cap] = (MmPipeStep){.bwd = MM_PIPE_W, .chunk = x.chunk, .micro = x.micro};
}

static void dpv_wgrad(Dpv *d)
{
  g_assert(d->w_len > 0);
  d->out[d->n++] = d->w[d->w_head];
  d->w_head = (d->w_head + 1) % d->w_cap;
  d->w_len--;
}

static guint dualpipev(guint p, guint m, guint r, MmPipeStep *out)
{
  g_autofree MmPipeStep *w = g_new(MmPipeStep, 2 * p + 1); /* at most 2p - r - 1 W passes wait */
  Dpv d = {.out = out, .w = w, .w_cap = 2 * p + 1};
  for (guint i = 0; i < 2 * (p - r - 1); i++) dpv_fwd(&d, 0);
  for (guint i = 0; i < r + 1; i++) {
    dpv_fwd(&d, 0);
    dpv_fwd(&d, 1);
  }
  for (guint i = 0; i < p - r - 1; i++) {
    dpv_bwd(&d, 1, TRUE);
    dpv_wgrad(&d);
    dpv_fwd(&d, 1);
  }
  for (guint i = 0; i < m - 2 * p + r + 1; i++) {
    dpv_fwd(&d, 0);
    dpv_bwd(&d, 1, FALSE);
    dpv_fwd(&d, 1);
    dpv_bwd(&d, 0, FALSE);
  }
  for (guint i = 0; i < p - r - 1; i++) {
    dpv_bwd(&d, 1, FALSE);
    dpv_fwd(&d, 1);
    dpv_bwd(&d, 0, FALSE);
  }
  gboolean split = FALSE; /* the second half of these backwards defer their weight gradients */
  for (guint i = 0; i < r + 1; i++) {
    if (i == (r + 1) / 2 && r % 2 == 1) split = TRUE;
    dpv_bwd(&d, 1, split);
    if (i == (r + 1) / 2 && r % 2 == 0) split = TRUE;
    dpv_bwd(&d, 0, split);
  }
  for (guint i = 0; i < p - r - 1; i++) {
    dpv_wgrad(&d);
    dpv_bwd(&d, 0, TRUE);
  }
  for (guint i = 0; i < r + 1; i++) dpv_wgrad(&d);
  g_assert(d.w_len == 0 && d.f[0] == m && d.f[1] == m && d.b[0] == m && d.b[1] == m);
  return d.n;
}

guint mm_pipe_schedule(MmPipeSchedule kind, guint p, guint v, guint m, guint stage, gboolean backward,
                       MmPipeStep *out)
{
  g_return_val_if_fail(p >= 1 && v >= 1 && m >= 1 && stage < p, 0);
  const guint total = m * v;
  guint n = 0, fk = 0, bk = 0;
  if (kind == MM_PIPE_DUALPIPEV && v == 2 && m >= 2 * p) {
    if (backward) return dualpipev(p, m, stage, out);
    g_autofree MmPipeStep *all = g_new(MmPipeStep, 4 * (gsize)m + 2 * p); /* forward only: its forwards */
    const guint k = dualpipev(p, m, stage, all);
    for (guint i = 0; i < k; i++)
      if (all[i].bwd == 0) out[n++] = all[i];
    return n;
  }
  if (!backward || kind == MM_PIPE_GPIPE) {
    for (; fk < total; fk++) out[n++] = virtual_step(p, v, fk, FALSE);
    if (backward)
      for (; bk < total; bk++) out[n++] = virtual_step(p, v, bk, TRUE);
    return n;
  }
  if (kind == MM_PIPE_ZB_H1) return zb_h1(p, m, stage, out);
  guint warm = mm__pipe_warmup(p, v, m, stage);
  for (guint i = 0; i < warm; i++) out[n++] = virtual_step(p, v, fk++, FALSE);
  for (guint i = 0; i < total - warm; i++) {
    out[n++] = virtual_step(p, v, fk++, FALSE);
    out[n++] = virtual_step(p, v, bk++, TRUE);
  }
  while (bk < total) out[n++] = virtual_step(p, v, bk++, TRUE);
  return n;
}

uint8_t *mm__recompute_units(const MmScenario *s, const MmGraph *g, const uint32_t *chunk)
{
  uint8_t *r = g_new0(uint8_t, g->n_units + 1);
  const MmParallelConfig *c = s->cfg;
  if (c->recompute != MM_RECOMPUTE_FULL) return r;
  const int64_t n = c->recompute_num_layers;
  int64_t j = 0; /* layer units of the chunk so far */
  g_autofree int64_t *on_stage = g_new0(int64_t, s->pp + 1); /* layer units of each stage so far */
  for (uint32_t u = 0; u < g->n_units; u++) {
    if (u > 0 && chunk[u] != chunk[u - 1]) j = 0;
    const gboolean layer = mm_block_is_layers(&s->model->blocks[g->units[u].block]);
    if (c->recompute_method == MM_RECOMPUTE_EVERY) {
      /* torchtitan (torchtitan/distributed/activation_checkpoint.py, _apply_layer_sac): a counter over
       * the transformer blocks a process wraps, in model order across its chunks; the block whose
       * 1-based count is a multiple of N is checkpointed whole (N = 0: every block). Only model.layers
       * are wrapped: the embedding and the head keep their activations. */
      if (layer) {
        const int64_t k = ++on_stage[mm_pipe_chunk_stage(s, chunk[u])];
        r[u] = n == 0 || k % n == 0 ? MM__RECOMPUTE_KEEP_INPUT : MM__RECOMPUTE_NONE;
      }
      continue;
    }
    if (!layer) {
      r[u] = MM__RECOMPUTE_KEEP_INPUT;
      continue;
    }
    if (c->recompute_method == MM_RECOMPUTE_BLOCK)
      r[u] = n == 0 || j < n ? MM__RECOMPUTE_KEEP_INPUT : MM__RECOMPUTE_NONE;
    else
      r[u] = j % MAX(n, 1) == 0 ? MM__RECOMPUTE_KEEP_INPUT : MM__RECOMPUTE_IN_GROUP;
    j++;
  }
  return r;
}

uint32_t *mm_pipe_unit_chunks(const MmScenario *s, const MmGraph *g)
{
  uint32_t *chunk = g_new0(uint32_t, g->n_units + 1);
  const int64_t K = s->pp * s->vstages;
  if (K <= 1) return chunk;
  g_autofree int64_t *want = g_new(int64_t, K);
  const MmPipeline *pl = &s->cfg->pipeline;
  for (int64_t k = 0; k < K; k++) want[k] = pl->layers ? pl->layers[k] : s->layer_units / K;
  if (!pl->layers) {
    /* the remainder goes to the middle chunks first: the ends also hold embedding and head */
    int64_t rem = s->layer_units % K;
    for (int64_t i = 0; rem > 0; i++, rem--) want[K <= 2 ? i % K : 1 + i % (K - 2)]++;
  }
  int64_t k = 0, left = want[0];
  for (uint32_t u = 0; u < g->n_units; u++) {
    if (mm_block_is_layers(&s->model->blocks[g->units[u].block])) {
      while (left == 0 && k + 1 < K) left = want[++k];
      left--;
    }
    chunk[u] = (uint32_t)k;
  }
  return chunk;
}


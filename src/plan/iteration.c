/* iteration: one stage's schedule of chunk forwards and backwards, with pipeline transfers. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- the iteration ----------------------------------------------------- */

/* Units of block @b inside chunk @k: [*u0, *u1); FALSE when none. */
static gboolean block_in_chunk(const Lower *L, guint b, uint32_t k, uint32_t *u0, uint32_t *u1)
{
  const uint32_t bf = L->g->block_first_unit[b], be = bf + L->g->block_units[b];
  *u0 = MAX(bf, L->chunk_first[k]);
  *u1 = MIN(be, L->chunk_end[k]);
  return *u0 < *u1;
}

/* Forward of chunk @k for micro-batch @mi; @in: what its first block waits for (the
 * pipeline receive). Returns the op producing the chunk's output. */
static uint32_t chunk_fwd(Lower *L, IterState *st, uint32_t k, uint32_t mi, const Deps *in)
{
  const MmModel *m = L->m;
  uint32_t *fwd = &st->fwd_out[mi * m->n_blocks];
  uint32_t last = NONE;
  for (guint b = 0; b < m->n_blocks; b++) {
    uint32_t u0, u1;
    if (!block_in_chunk(L, b, k, &u0, &u1)) continue;
    const MmBlock *bk = &m->blocks[b];
    Deps bin = {.n = 0};
    if (u0 == L->g->block_first_unit[b] && bk->n_inputs == 0) {
      bin = *in; /* a model input (the step's data): it waits only for what the step waits for (a synchronous
                  * exchange: the stage's last transfer) */
    } else if (u0 == L->g->block_first_unit[b]) {
      for (guint i = 0; i < bk->n_inputs; i++) {
        guint src = bk->inputs[i];
        if (L->unit_chunk[mm__block_last_unit(L, src)] == k) mm__deps_add(L, &bin, fwd[src]);
        else for (uint32_t j = 0; j < in->n; j++) mm__deps_add(L, &bin, in->v[j]);
      }
    } else {
      bin = *in;
    }
    uint32_t out = NONE;
    if (mm__mp_fused(L, b)) {
      fwd[b] = last = mm__emit_fused_lookup_fwd(L, b, u0, u1, mi, &bin);
      continue;
    }
    for (uint32_t u = u0; u < u1; u++) {
      Deps d = out == NONE ? bin : mm__deps_one(out);
      if (mi == 0) mm__param_gather_deps(L, u, u1, &d);
      if (mm__fsdp_gathers(L, u, mi, FALSE)) mm__deps_add(L, &d, mm__gather_for(L, u, mi, FALSE));
      /* activation offload, double-buffered: Transformer Engine's offload handler waits, at the end of
       * a layer's forward, for the copy of the layer before it (synchronize_on_group_commit_forward),
       * so a layer starts once the copy two layers back is done */
      if (L->offload_d2h && u >= u0 + 2) mm__deps_add(L, &d, L->offload_d2h[(gsize)mi * L->g->n_units + u - 2]);
      out = mm__lower_fwd(L, u, mi, MM_PHASE_FWD, &d);
      if (mm__fsdp_gathers(L, u, mi, FALSE)) mm__gather_advance(L, L->last_on[MM_STREAM_COMPUTE]);
      if (L->offload_d2h && L->offload[u]) {
        const Deps od = mm__deps_one(out);
        L->offload_d2h[(gsize)mi * L->g->n_units + u] = mm__emit_offload_copy(L, u, mi, FALSE, &od);
      }
    }
    if (mm__mp_block(L, b)) {
      Deps d = mm__deps_one(out);
      out = mm__emit_mp_exchange(L, mm__block_last_unit(L, b), mi, MM_PHASE_FWD, &d);
    }
    fwd[b] = last = out;
  }
  return last;
}

/* Backward of chunk @k for micro-batch @mi; @gin: the gradient of its output (the
 * pipeline receive; the last chunk starts from the loss). @split (zb_h1, dualpipev): its
 * input gradient only, the weight gradients left to a later chunk_wgrad. Returns the op
 * producing the gradient of its input. */
static uint32_t chunk_bwd(Lower *L, IterState *st, uint32_t k, uint32_t mi, const Deps *gin, gboolean split)
{
  const MmModel *m = L->m;
  const guint nb = m->n_blocks;
  const uint32_t *fwd = &st->fwd_out[mi * nb];
  const gboolean last_micro = mi + 1 == L->nm;
  for (guint b = 0; b < nb; b++) {
    st->bwd_done[b] = FALSE;
    st->mp_bwd[b] = NONE;
    st->bwd_out[b] = NONE;
  }
  uint32_t first_out = NONE;
  /* split: this backward's weight gradients wait in the next slot of the ring */
  uint32_t *zb_deps = NULL;
  uint8_t *zb_has = NULL;
  if (split) {
    g_assert(st->zb_n < st->zb_cap);
    const uint32_t slot = (st->zb_head + st->zb_n++) % st->zb_cap;
    zb_deps = &st->zb_deps[2 * (gsize)slot * st->zb_width];
    zb_has = &st->zb_has[(gsize)slot * st->zb_width];
    memset(zb_has, 0, st->zb_width);
  }
  for (guint b = nb; b-- > L->first_trained;) {
    uint32_t u0, u1;
    if (!block_in_chunk(L, b, k, &u0, &u1)) continue;
    const MmBlock *bk = &m->blocks[b];
    Deps grad = {.n = 0};
    if (u1 == mm__block_last_unit(L, b) + 1) {
      gboolean consumed = FALSE;
      for (guint c = b + 1; c < nb; c++) {
        if (!mm__block_reads(&m->blocks[c], b)) continue;
        consumed = TRUE;
        if (L->unit_chunk[L->g->block_first_unit[c]] == k) mm__deps_add(L, &grad, st->bwd_out[c]);
        else for (uint32_t j = 0; j < gin->n; j++) mm__deps_add(L, &grad, gin->v[j]);
      }
      if (!consumed) { /* the loss: after the step's forward and what the step waits for (a synchronous exchange) */
        mm__deps_add(L, &grad, fwd[b]);
        for (uint32_t j = 0; j < gin->n; j++) mm__deps_add(L, &grad, gin->v[j]);
      }
    } else {
      grad = *gin;
    }
    if (mm__mp_block(L, b)) {
      mm__hoist_mp_backward(L, st, mi);
      mm__deps_set_one(&grad, st->mp_bwd[b]);
    }
    gboolean need_in = FALSE;
    for (guint i = 0; i < bk->n_inputs; i++) need_in |= bk->inputs[i] >= L->first_trained;
    const uint32_t bf = L->g->block_first_unit[b];
    uint32_t out = NONE;
    if (mm__mp_fused(L, b) && st->mp_bwd[b] != NONE) {
      out = mm__emit_fused_lookup_bwd(L, b, u0, u1, mi, &grad, st->mp_bwd_first[b], st->mp_bwd[b]);
      for (uint32_t u = u1; u-- > u0;) mm__sync_grads(L, st, u, mi, out);
      u1 = u0; /* lowered */
    }
    uint32_t reload = NONE; /* activation offload: the copy back of unit u's activations, if issued */
    for (uint32_t u = u1; u-- > u0;) {
      Deps d = out == NONE ? grad : mm__deps_one(out);
      if (mm__fsdp_gathers(L, u, mi, TRUE)) mm__deps_add(L, &d, mm__gather_for(L, u, mi, TRUE));
      if (L->offload_d2h && L->offload[u]) {
        /* Transformer Engine (synchronize_on_group_commit_backward): a layer's backward waits for its
         * activations' copy back, issued when the backward of the layer after it began (the last
         * offloaded layer's when its own begins), and then issues the copy of the layer before it */
        const uint32_t d2h = L->offload_d2h[(gsize)mi * L->g->n_units + u];
        if (reload == NONE) {
          Deps rd = d;
          mm__deps_add(L, &rd, d2h);
          reload = mm__emit_offload_copy(L, u, mi, TRUE, &rd);
        }
        mm__deps_add(L, &d, reload);
        reload = NONE;
        if (u > u0 && L->offload[u - 1]) {
          Deps rd = d;
          mm__deps_add(L, &rd, L->offload_d2h[(gsize)mi * L->g->n_units + u - 1]);
          reload = mm__emit_offload_copy(L, u - 1, mi, TRUE, &rd);
        }
      }
      uint32_t wd = NONE;
      if (split) {
        const uint32_t i = u - L->chunk_first[k];
        out = mm__lower_bwd_input(L, u, mi, &d, u == bf ? need_in : TRUE, &zb_deps[2 * i]);
        zb_has[i] = 1;
      } else {
        out = mm__lower_bwd(L, u, mi, &d, u == bf ? need_in : TRUE, &wd);
      }
      if (mm__fsdp_gathers(L, u, mi, TRUE)) mm__gather_advance(L, L->last_on[MM_STREAM_COMPUTE]);
      if (!split) mm__sync_grads(L, st, u, mi, wd);
    }
    if (last_micro && L->s->cfg->ddp_overlap && !split) {
      mm__flush_bucket(L, st, b, 0, mi);
      mm__flush_bucket(L, st, b, 1, mi);
    }
    st->bwd_out[b] = out;
    st->bwd_done[b] = TRUE;
    first_out = out;
    mm__hoist_mp_backward(L, st, mi);
  }
  return first_out;
}

/* zb_h1, dualpipev: the weight-gradient pass of chunk @k for micro-batch @mi, the oldest pending backward:
 * per block in reverse, its units' weight gradients, then their gradient synchronization (as a
 * backward does it with its weight gradients). */
static void chunk_wgrad(Lower *L, IterState *st, uint32_t k, uint32_t mi, uint32_t gate)
{
  g_assert(st->zb_n > 0);
  const uint32_t slot = st->zb_head;
  const uint32_t *w_deps = &st->zb_deps[2 * (gsize)slot * st->zb_width];
  const uint8_t *has = &st->zb_has[(gsize)slot * st->zb_width];
  st->zb_head = (st->zb_head + 1) % st->zb_cap;
  st->zb_n--;
  for (guint b = L->m->n_blocks; b-- > L->first_trained;) {
    uint32_t u0, u1;
    if (!block_in_chunk(L, b, k, &u0, &u1)) continue;
    for (uint32_t u = u1; u-- > u0;) {
      const uint32_t i = u - L->chunk_first[k];
      if (!has[i]) continue;
      Deps d = {.n = 0};
      mm__deps_add(L, &d, w_deps[2 * i]);
      mm__deps_add(L, &d, w_deps[2 * i + 1]);
      mm__deps_add(L, &d, gate); /* a synchronous exchange: after the stage's last send */
      const uint32_t w = mm__lower_wgrad(L, u, mi, &d);
      mm__sync_grads(L, st, u, mi, w != NONE ? w : w_deps[2 * i]);
    }
    if (mi + 1 == L->nm && L->s->cfg->ddp_overlap) {
      mm__flush_bucket(L, st, b, 0, mi);
      mm__flush_bucket(L, st, b, 1, mi);
    }
  }
}

/* Bytes crossing the boundary after chunk @k: the last unit's output of one micro-batch,
 * split over the TP ranks (Megatron's scatter/gather) and the sequence-splitting ranks. */
static double boundary_bytes(const Lower *L, uint32_t k)
{
  const MmUnit *un = &L->g->units[L->chunk_end[k] - 1];
  const uint32_t li = un->first_layer + un->n_layers - 1; /* the chunk's last layer */
  const MmBlockSetup *bs = &L->s->blocks[un->block];
  const MmBlock *b = &L->s->model->blocks[un->block];
  /* an MoE layer's experts' output counts every token's top_k copies (at capacity); where the
   * layer combines them (a transformer layer's down-projection, an MoE MLP block's last layer)
   * the next stage gets one row per token, elsewhere (inside an MoE MLP block) the copies */
  const double copies = mm_plan_moe_combines(L->s, L->g, li) && b->top_k > 0 ? (double)b->top_k * b->capacity_factor : 1.0;
  return bs->samples_per_micro * L->g->layers[li].cost.out_bytes / copies / (double)bs->degree[MM_STRAT_TP] /
         mm__place(L, li)->seq_split;
}

/* Stage offset from this stage to the one running chunk @k. */
static int64_t stage_delta(const Lower *L, uint32_t k)
{
  return (int64_t)mm_pipe_chunk_stage(L->s, k) - (int64_t)L->stage;
}

/* Megatron's scatter/gather: each TP rank sends 1/t of a boundary tensor; the receiving
 * TP group all-gathers it (not with sequence parallelism: the tensor stays sharded). */
static uint32_t gather_boundary(Lower *L, uint32_t recv, uint32_t unit, uint32_t mi, MmPhase phase, double bytes)
{
  const guint b = L->g->units[unit].block;
  if (L->s->blocks[b].degree[MM_STRAT_TP] <= 1 || mm_plan_seq_parallel(L->s, b)) return recv;
  Deps d = mm__deps_one(recv);
  uint32_t op = mm__emit_coll(L, b, MASK(MM_STRAT_TP), MM_COLL_ALL_GATHER, MM_REASON_PP,
                          bytes * (double)L->s->blocks[b].degree[MM_STRAT_TP], &d, unit, mi, phase);
  return op == NONE ? recv : op;
}

/* The receive of chunk @k's input activations (from the stage of chunk k - 1), or of the
 * gradient of its output (@grad: from the stage of chunk k + 1). */
static uint32_t emit_recv(Lower *L, uint32_t k, uint32_t mi, gboolean grad)
{
  const uint32_t b = grad ? k : k - 1; /* the boundary crossed */
  return mm__emit_p2p(L, FALSE, grad, b, mi, stage_delta(L, grad ? k + 1 : k - 1), boundary_bytes(L, b), NULL,
                      grad ? L->chunk_end[k] - 1 : L->chunk_first[k]);
}

/* DualPipeV: each neighbour sends this stage activations and gradients on one channel, in the
 * order of its own schedule, which is not the order in which this stage consumes them; the
 * receives are posted in the sender's order (as the reference's batched isend/irecv match them),
 * each as soon as the one before it on its channel: a channel is a FIFO stream. */
typedef struct {
  uint8_t grad;   /* a gradient (else activations) */
  uint32_t chunk; /* the receiving chunk */
  uint32_t micro;
} Incoming;

typedef struct {
  Incoming *seq; /* in the sender's order */
  uint32_t n, next;
  uint32_t *op; /* per (grad, micro): the posted receive, or NONE */
} RecvChannel;

/* The incoming transfers from stage @from, in its order. */
static void channel_init(Lower *L, RecvChannel *ch, uint32_t from)
{
  const uint32_t m = L->nm;
  g_autofree MmPipeStep *steps = g_new(MmPipeStep, 3 * (gsize)m * L->v + 1);
  const guint n = mm_pipe_schedule(L->s->cfg->pipeline.schedule, L->p, L->v, m, from, L->training, steps);
  ch->seq = g_new(Incoming, n + 1);
  ch->n = ch->next = 0;
  ch->op = g_new(uint32_t, 2 * (gsize)m + 1);
  for (gsize i = 0; i < 2 * (gsize)m; i++) ch->op[i] = NONE;
  for (guint i = 0; i < n; i++) {
    const uint32_t k = mm_pipe_stage_chunk(L->s, from, steps[i].chunk);
    if (steps[i].bwd == MM_PIPE_W) continue;
    if (!steps[i].bwd && k + 1 < L->K && mm_pipe_chunk_stage(L->s, k + 1) == L->stage)
      ch->seq[ch->n++] = (Incoming){0, k + 1, steps[i].micro};
    else if (steps[i].bwd && k > 0 && L->chunk_trained[k - 1] && mm_pipe_chunk_stage(L->s, k - 1) == L->stage)
      ch->seq[ch->n++] = (Incoming){1, k - 1, steps[i].micro};
  }
}

/* The receive op of micro-batch @mi's activations (or @grad: gradient) on channel @ch, posting
 * the receives before it on the channel first. */
static uint32_t channel_take(Lower *L, RecvChannel *ch, uint32_t mi, gboolean grad)
{
  while (ch->op[2 * (gsize)mi + grad] == NONE) {
    g_assert(ch->next < ch->n);
    const Incoming *x = &ch->seq[ch->next++];
    ch->op[2 * (gsize)x->micro + x->grad] = emit_recv(L, x->chunk, x->micro, x->grad);
  }
  return ch->op[2 * (gsize)mi + grad];
}

/* The input activations of chunk @k (from the stage of chunk k - 1). */
static uint32_t recv_activations(Lower *L, RecvChannel *ch, uint32_t k, uint32_t mi)
{
  const uint32_t r = ch ? channel_take(L, ch, mi, FALSE) : emit_recv(L, k, mi, FALSE);
  return gather_boundary(L, r, L->chunk_first[k], mi, MM_PHASE_FWD, boundary_bytes(L, k - 1));
}

/* The gradient of chunk @k's output (from the stage of chunk k + 1). */
static uint32_t recv_gradients(Lower *L, RecvChannel *ch, uint32_t k, uint32_t mi)
{
  const uint32_t r = ch ? channel_take(L, ch, mi, TRUE) : emit_recv(L, k, mi, TRUE);
  return gather_boundary(L, r, L->chunk_end[k] - 1, mi, MM_PHASE_BWD, boundary_bytes(L, k));
}



/* Lowers this stage's schedule: per step a chunk's forward (after receiving its input,
 * before sending its output) or backward (after receiving its output's gradient, before
 * sending its input's); then gradient buckets, the tied embedding and the optimizer. */
void mm__lower_program(Lower *L)
{
  const guint nb = L->m->n_blocks;
  const uint32_t p = L->p, v = L->v, m = L->nm, K = L->K;
  g_autofree MmPipeStep *steps = g_new(MmPipeStep, 3 * (gsize)m * v + 1);
  guint n_steps = mm_pipe_schedule(L->s->cfg->pipeline.schedule, p, v, m, L->stage, L->training, steps);
  mm__build_gather_queue(L, steps, n_steps);

  IterState st;
  st.fwd_out = g_new(uint32_t, (gsize)m * nb + 1);
  for (gsize i = 0; i < (gsize)m * nb; i++) st.fwd_out[i] = NONE;
  st.bwd_out = g_new(uint32_t, nb);
  st.mp_bwd = g_new(uint32_t, nb);
  st.mp_bwd_first = g_new(uint32_t, nb);
  st.bwd_done = g_new0(gboolean, nb);
  st.bucket_bytes = g_new0(double, 2 * nb);
  st.bucket_dep = g_new(uint32_t, 2 * nb);
  /* dualpipev with its V (one stage runs plain 1F1B) */
  const gboolean dual = L->s->cfg->pipeline.schedule == MM_PIPE_DUALPIPEV && v == 2;
  /* split backwards: zb_h1's and dualpipev's (1F1B's are whole) */
  L->zb = L->training && (L->s->cfg->pipeline.schedule == MM_PIPE_ZB_H1 || dual);
  /* the ring of backwards without their weight gradients: as many as the schedule holds at once,
   * each as wide as the stage's largest chunk */
  st.zb_cap = 1;
  st.zb_width = 1;
  for (uint32_t c = 0; c < v; c++) {
    const uint32_t k = mm_pipe_stage_chunk(L->s, L->stage, c);
    st.zb_width = MAX(st.zb_width, L->chunk_end[k] - L->chunk_first[k]);
  }
  for (guint i = 0, held = 0; L->zb && i < n_steps; i++) {
    if (steps[i].bwd == 1) held++;
    else if (steps[i].bwd == MM_PIPE_W) held--;
    st.zb_cap = MAX(st.zb_cap, held + 1);
  }
  st.zb_head = st.zb_n = 0;
  st.zb_deps = L->zb ? g_new(uint32_t, 2 * (gsize)st.zb_cap * st.zb_width + 1) : NULL;
  st.zb_has = L->zb ? g_new0(uint8_t, (gsize)st.zb_cap * st.zb_width + 1) : NULL;

  for (uint32_t i = 0; i < MIN((uint32_t)L->s->cfg->fsdp_prefetch + 1, L->n_gq); i++) mm__emit_gather(L, NULL);

  /* the steady part: after the warm-up forwards, pairs of a forward and a backward step */
  uint32_t G, g, warm = 0;
  mm__pipe_period(L->s, &G, &g);
  if (G > 0 && L->training) {
    warm = mm__pipe_warmup(p, v, m, L->stage);
    L->n_pairs = m * v - warm;
    for (uint32_t j = 0; j < L->n_pairs; j++) g_assert(!steps[warm + 2 * j].bwd && steps[warm + 2 * j + 1].bwd);
    L->pair_first = g_new(uint32_t, L->n_pairs + 1);
  }

  /* synchronous exchange: the next step waits for this step's transfers */
  const gboolean sync = !L->s->cfg->pipeline.overlap_p2p;
  uint32_t pending = NONE;
  /* dualpipev's turn: chunks p - 1 and p share the last stage, which hands a micro-batch's
   * activations (and their gradient) from one to the other without a transfer (the only chunks
   * whose stage_delta is 0) */
  const gboolean turn = dual && L->stage + 1 == p;
  g_autofree uint32_t *turn_fwd = turn ? g_new(uint32_t, m + 1) : NULL;
  g_autofree uint32_t *turn_bwd = turn ? g_new(uint32_t, m + 1) : NULL;
  for (uint32_t i = 0; turn && i < m; i++) turn_fwd[i] = turn_bwd[i] = NONE;
  RecvChannel chan[2] = {{0}}; /* dualpipev: from the previous and from the next stage */
  if (dual && L->stage > 0) channel_init(L, &chan[0], L->stage - 1);
  if (dual && L->stage + 1 < p) channel_init(L, &chan[1], L->stage + 1);
#define CHANNEL(from) (dual ? &chan[mm_pipe_chunk_stage(L->s, from) > L->stage] : NULL)
  for (guint i = 0; i < n_steps; i++) {
    if (L->pair_first && i >= warm && (i - warm) % 2 == 0 && (i - warm) / 2 <= L->n_pairs)
      L->pair_first[(i - warm) / 2] = L->n_ops;
    const uint32_t k = mm_pipe_stage_chunk(L->s, L->stage, steps[i].chunk), mi = steps[i].micro;
    L->cur_chunk = k;
    if (steps[i].bwd == MM_PIPE_W) {
      if (L->chunk_trained[k]) chunk_wgrad(L, &st, k, mi, sync ? pending : NONE);
      continue;
    }
    if (!steps[i].bwd) {
      Deps in = {.n = 0};
      if (sync) mm__deps_add(L, &in, pending);
      if (k > 0 && stage_delta(L, k - 1) == 0) mm__deps_add(L, &in, turn_fwd[mi]);
      else if (k > 0) mm__deps_add(L, &in, recv_activations(L, CHANNEL(k - 1), k, mi));
      uint32_t out = chunk_fwd(L, &st, k, mi, &in);
      pending = NONE;
      if (k + 1 < K && stage_delta(L, k + 1) == 0) {
        turn_fwd[mi] = out;
      } else if (k + 1 < K) {
        Deps d = mm__deps_one(out);
        pending = mm__emit_p2p(L, TRUE, FALSE, k, mi, stage_delta(L, k + 1), boundary_bytes(L, k), &d, L->chunk_end[k] - 1);
      }
      continue;
    }
    if (!L->chunk_trained[k]) continue;
    Deps gin = {.n = 0};
    if (sync) mm__deps_add(L, &gin, pending);
    if (k + 1 < K && stage_delta(L, k + 1) == 0) mm__deps_add(L, &gin, turn_bwd[mi]);
    else if (k + 1 < K) mm__deps_add(L, &gin, recv_gradients(L, CHANNEL(k + 1), k, mi));
    uint32_t out = chunk_bwd(L, &st, k, mi, &gin, L->zb && steps[i].bwd == 1);
    pending = NONE;
    if (k > 0 && L->chunk_trained[k - 1] && out != NONE && stage_delta(L, k - 1) == 0) {
      turn_bwd[mi] = out;
    } else if (k > 0 && L->chunk_trained[k - 1] && out != NONE) {
      Deps d = mm__deps_one(out);
      pending = mm__emit_p2p(L, TRUE, TRUE, k - 1, mi, stage_delta(L, k - 1), boundary_bytes(L, k - 1), &d, L->chunk_first[k]);
    }
  }
#undef CHANNEL
  for (int c = 0; c < 2; c++) {
    g_assert(!dual || chan[c].next == chan[c].n);
    g_free(chan[c].seq);
    g_free(chan[c].op);
  }
  if (L->pair_first && warm + 2 * L->n_pairs == n_steps) L->pair_first[L->n_pairs] = L->n_ops;
  g_assert(L->gq_pos == L->n_gq);
  L->cur_chunk = L->stage;

  if (L->training && !L->s->cfg->ddp_overlap) {
    /* gradients all-reduced after the whole backward, in bucket-sized pieces */
    for (guint b = nb; b-- > 0;) {
      for (int x = 0; x < 2; x++) {
        const guint i = 2 * b + (guint)x;
        double left = st.bucket_bytes[i], size = L->s->cfg->ddp_bucket_bytes;
        st.bucket_dep[i] = L->last_on[MM_STREAM_COMPUTE];
        while (left > 0) {
          st.bucket_bytes[i] = MIN(left, size);
          left -= st.bucket_bytes[i];
          mm__flush_bucket(L, &st, b, x, m - 1);
        }
      }
    }
  }
  if (L->training) {
    mm__emit_tied(L);
    mm__emit_optimizer(L);
  }
  g_free(st.fwd_out);
  g_free(st.bwd_out);
  g_free(st.mp_bwd);
  g_free(st.mp_bwd_first);
  g_free(st.bwd_done);
  g_free(st.bucket_bytes);
  g_free(st.bucket_dep);
  g_free(st.zb_deps);
  g_free(st.zb_has);
}


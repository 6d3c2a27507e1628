/* flows: ops with work on a device's resources (links, compute, HBM), shared max-min fairly by progressive filling. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- flows ------------------------------------------------------------- */

/* Sharing is max-min fair by progressive filling, as SimGrid's LMM solver, per device:
 * the sharing entities are the flows that carry work all at once and each resource
 * of a sequential flow (its phases hold their shares independently). Each round every
 * touched resource offers its unallocated capacity equally to its unfixed entities; an
 * entity is bounded by the resource where that share gives it the longest time. A
 * resource that bounds all its entities is a bottleneck: they get exactly its share
 * and are fixed (a flow bounded elsewhere takes less and leaves the rest), and the
 * next round shares what is left. Shares only grow from round to round, so what was
 * fixed stays feasible. Where no resource bounds all its entities (flows crossing two
 * resources with opposite weights), every unfixed entity is sped up by one factor of
 * its equal-share pace until a resource saturates, and that resource's entities are
 * fixed. Without overlap a flow gets every capacity whole: the same arithmetic as a
 * flow alone, so its times do not change. Cost: rounds x the active flows' entries. */

/* Gives entity @k the time @t_ps for all its work: takes its use of each of its resources. */
static void fix_entity(MmEngine *e, const ProgIndex *ix, uint32_t k, double t_ps)
{
  e->ent_fixed[k] = 1;
  e->ent_ps[k] = t_ps;
  for (uint32_t j = e->ent_first[k]; j < e->ent_first[k] + e->ent_n[k]; j++) {
    uint32_t r = ix->work_res[j];
    e->r_left[r] -= ix->work_amt[j] / t_ps;
    e->r_users[r]--;
  }
}

/* Shares the resources of class @c among its active flows: flow_ps[i] becomes the
 * time the i-th active flow needs for all its work at its shares (infinite: none). */
static void share_resources(MmEngine *e, uint32_t c)
{
  const MmEngineClass *cl = &e->classes[c];
  const MmEngineProgram *p = &e->programs[cl->program];
  const ProgIndex *ix = &e->index[cl->program];
  const uint32_t *act = &e->active[e->stream_base[c]];
  const uint32_t na = e->n_active[c];
  if (++e->stamp == 0) { /* wrapped: forget every stamp */
    memset(e->r_stamp, 0, sizeof(uint32_t) * e->max_res);
    e->stamp = 1;
  }
  uint32_t ne = 0, nt = 0;
  for (uint32_t i = 0; i < na; i++) {
    const uint32_t op = act[i], first = ix->work_first[op], n = ix->work_first[op + 1] - first;
    const gboolean seq = p->ops[op].sequential;
    for (uint32_t j = first; j < first + n; j++) {
      uint32_t r = ix->work_res[j];
      if (e->r_stamp[r] != e->stamp) {
        e->r_stamp[r] = e->stamp;
        e->r_left[r] = resource_cap(cl, r);
        e->r_users[r] = 0;
        e->touched[nt++] = r;
      }
      e->r_users[r]++;
      if (seq || j == first) {
        e->ent_flow[ne] = i;
        e->ent_first[ne] = j;
        e->ent_n[ne] = seq ? 1 : n;
        e->ent_fixed[ne++] = 0;
      }
    }
  }
  for (uint32_t unfixed = ne; unfixed > 0;) {
    for (uint32_t t = 0; t < nt; t++) {
      uint32_t r = e->touched[t];
      e->r_share[r] = e->r_users[r] && e->r_left[r] > 0 ? e->r_left[r] / (double)e->r_users[r] : 0;
      e->r_bound[r] = 0;
    }
    for (uint32_t k = 0; k < ne; k++) {
      if (e->ent_fixed[k]) continue;
      double t_ps = 0; /* the longest of its per-resource times: the bounding resource's */
      uint32_t bind = ix->work_res[e->ent_first[k]];
      for (uint32_t j = e->ent_first[k]; j < e->ent_first[k] + e->ent_n[k]; j++) {
        uint32_t r = ix->work_res[j];
        double tj = ix->work_amt[j] / e->r_share[r];
        if (tj > t_ps) t_ps = tj, bind = r;
      }
      e->ent_ps[k] = t_ps;
      e->ent_bind[k] = bind;
      e->r_bound[bind]++;
    }
    gboolean any = FALSE;
    for (uint32_t t = 0; t < nt; t++) {
      uint32_t r = e->touched[t];
      if (e->r_users[r] && e->r_bound[r] == e->r_users[r]) e->r_bound[r] = UINT32_MAX, any = TRUE;
    }
    if (any) {
      for (uint32_t k = 0; k < ne; k++) {
        if (e->ent_fixed[k] || e->r_bound[e->ent_bind[k]] != UINT32_MAX) continue;
        fix_entity(e, ix, k, e->ent_ps[k]);
        unfixed--;
      }
      continue;
    }
    /* no bottleneck: scale every pace by the largest factor all resources allow */
    for (uint32_t t = 0; t < nt; t++) e->r_share[e->touched[t]] = 0; /* now: use at the equal-share paces */
    for (uint32_t k = 0; k < ne; k++) {
      if (e->ent_fixed[k]) continue;
      for (uint32_t j = e->ent_first[k]; j < e->ent_first[k] + e->ent_n[k]; j++)
        e->r_share[ix->work_res[j]] += ix->work_amt[j] / e->ent_ps[k];
    }
    double best = INFINITY;
    uint32_t sat = UINT32_MAX;
    for (uint32_t t = 0; t < nt; t++) {
      uint32_t r = e->touched[t];
      if (e->r_users[r] == 0 || !(e->r_share[r] > 0)) continue;
      double f = e->r_left[r] / e->r_share[r];
      if (f < best) best = f, sat = r;
    }
    for (uint32_t k = 0; k < ne; k++) {
      if (e->ent_fixed[k]) continue;
      gboolean on_sat = sat == UINT32_MAX; /* nothing can move: fix them all as they are */
      for (uint32_t j = e->ent_first[k]; j < e->ent_first[k] + e->ent_n[k] && !on_sat; j++)
        on_sat = ix->work_res[j] == sat;
      if (!on_sat) continue;
      fix_entity(e, ix, k, sat == UINT32_MAX ? e->ent_ps[k] : e->ent_ps[k] / best);
      unfixed--;
    }
  }
  /* a flow's time: its entity's, or the sum of its phases' in transfer order */
  for (uint32_t i = 0; i < na; i++) e->flow_ps[i] = 0;
  for (uint32_t k = 0; k < ne; k++) {
    uint32_t i = e->ent_flow[k];
    e->flow_ps[i] = p->ops[act[i]].sequential ? e->flow_ps[i] + e->ent_ps[k] : e->ent_ps[k];
  }
}

/* Moves flow @op's completion to its new pace @rate (work fraction per ps; 0: stalled). */
static void replan_flow(MmEngine *e, uint32_t c, uint32_t op, double rate)
{
  const uint32_t si = mm__stream_of(e, c, op);
  Stream *st = &e->streams[si];
  if (st->rem <= 0 || rate == st->rate) return; /* work done (completion pending), or pace unchanged */
  double moved = (double)(e->now - st->upd) * st->rate;
  if (st->rate > 0 && moved >= st->rem) {
    st->rem = 0; /* the work finished before now; keep the planned completion */
    return;
  }
  st->rem -= moved;
  st->upd = e->now;
  st->rate = rate;
  if (rate > 0) mm__queue_push(e, mm__after_ps(e, st->rem / rate), si);
  else st->live = MM__NO_EVENT; /* stalled: no completion planned */
}

/* Re-shares class @c's resources and re-plans every active flow whose pace changed
 * (the others' planned completions stand). */
static void replan_flows(MmEngine *e, uint32_t c)
{
  share_resources(e, c);
  const uint32_t *act = &e->active[e->stream_base[c]];
  for (uint32_t i = 0; i < e->n_active[c]; i++) replan_flow(e, c, act[i], 1.0 / e->flow_ps[i]);
}

/* A flow starts its work. Alone on its resources it takes them whole (the sharing
 * would give the same) and no other flow's pace changes; otherwise all are re-shared. */
void mm__flow_begin(MmEngine *e, uint32_t c, uint32_t op, uint32_t si)
{
  const MmEngineClass *cl = &e->classes[c];
  const ProgIndex *ix = e->crt[c].ix;
  const gboolean seq = e->crt[c].ops[op].sequential;
  uint32_t *users = &e->res_users[e->res_base[c]];
  Stream *st = &e->streams[si];
  st->work = 1;
  st->rem = 1.0;
  st->upd = e->now;
  st->rate = 0;
  e->active[e->stream_base[c] + e->n_active[c]++] = op;
  gboolean shared = FALSE;
  double t_ps = 0; /* as the sharing computes it with every share whole */
  for (uint32_t j = ix->work_first[op]; j < ix->work_first[op + 1]; j++) {
    uint32_t r = ix->work_res[j];
    shared |= users[r]++ > 0;
    double tj = ix->work_amt[j] / resource_cap(cl, r);
    t_ps = seq ? t_ps + tj : tj > t_ps ? tj : t_ps;
  }
  if (shared) replan_flows(e, c);
  else replan_flow(e, c, op, 1.0 / t_ps);
}

/* The flow's work (on global stream @si) is done: it leaves the sharing (its tail holds nothing); the flows
 * it shared a resource with are re-planned. */
void mm__flow_end(MmEngine *e, uint32_t c, uint32_t op, uint32_t si)
{
  const ProgIndex *ix = e->crt[c].ix;
  uint32_t *users = &e->res_users[e->res_base[c]];
  uint32_t *act = &e->active[e->stream_base[c]];
  for (uint32_t i = 0; i < e->n_active[c]; i++) {
    if (act[i] == op) {
      act[i] = act[--e->n_active[c]];
      break;
    }
  }
  Stream *st = &e->streams[si];
  st->rem = 0;
  st->work = 0;
  st->live = MM__NO_EVENT;
  gboolean shared = FALSE;
  for (uint32_t j = ix->work_first[op]; j < ix->work_first[op + 1]; j++) shared |= --users[ix->work_res[j]] > 0;
  if (shared) replan_flows(e, c);
}


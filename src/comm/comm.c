/* comm: collective algorithms as per-link traffic + latency on switch, mesh, ring, fat-tree, rail and torus networks. */
#include "comm.h"

#include <math.h>
#include <string.h>

const char *const mm_scope_names[] = {"intra_node", "inter_node", "intra_and_inter_node", NULL};
const char *const mm_sparse_method_names[] = {"dense", "sparse", "host", NULL};
const char *const mm_protocol_names[] = {"simple", "ll", NULL};


MmGroupShape mm_comm_group_shape(const MmHardware *hw, int64_t degree, int64_t stride)
{
  const int64_t g = hw->gpus_per_node;
  MmGroupShape s;
  if (degree <= 1 || stride * degree <= g) { /* inside one node (5 of 8 GPUs, too) */
    s.scope = MM_SCOPE_INTRA;
    s.per_node = degree;
    s.nodes = 1;
  } else if (stride % g == 0) {
    s.scope = MM_SCOPE_INTER;
    s.per_node = 1;
    s.nodes = degree;
  } else {
    /* the scenario check guarantees stride divides the node and the group spans whole nodes */
    s.scope = MM_SCOPE_MIXED;
    s.per_node = g / stride;
    s.nodes = degree / s.per_node;
  }
  return s;
}

/* ---- links ------------------------------------------------------------- */

void mm_comm_links(const MmHardware *hw, MmLinks *out)
{
  memset(out, 0, sizeof *out);
  out->nic = out->host = UINT32_MAX;
  const MmNetwork *in = &hw->intra;
  const int64_t g = hw->gpus_per_node;
  out->intra_first = 0;
  if (in->present && g > 1) {
    if (in->topology == MM_TOPO_FULL_MESH) {
      /* one resource per peer offset: the links from this GPU to (self + o) mod g */
      double per_peer = (double)in->links / (double)(g - 1) * in->link_bw_Bps * in->efficiency;
      g_assert(g - 1 + 2 <= MM_LINKS_MAX); /* the loader caps full meshes at MM_FULL_MESH_MAX_GPUS */
      out->n_intra = (uint32_t)(g - 1);
      for (uint32_t i = 0; i < out->n_intra; i++) {
        out->bw_Bps[out->n] = per_peer;
        out->kind[out->n++] = MM_LINK_INTRA;
      }
    } else if (in->topology == MM_TOPO_RING) {
      out->n_intra = 2; /* to the next and to the previous GPU */
      for (int i = 0; i < 2; i++) {
        out->bw_Bps[out->n] = in->bw_per_gpu_Bps * in->efficiency / 2.0;
        out->kind[out->n++] = MM_LINK_INTRA;
      }
    } else {
      out->n_intra = 1; /* the GPU's port into the switch */
      out->bw_Bps[out->n] = in->bw_per_gpu_Bps * in->efficiency;
      out->kind[out->n++] = MM_LINK_INTRA;
      if (in->in_network_reduction) out->in_network_bw_Bps = in->bw_per_gpu_Bps * in->in_network_efficiency;
    }
  }
  if (hw->inter.present) {
    out->nic = out->n;
    out->bw_Bps[out->n] = hw->inter.bw_per_gpu_Bps * hw->inter.efficiency;
    out->kind[out->n++] = MM_LINK_NIC;
  }
  out->host = out->n;
  out->bw_Bps[out->n] = hw->host_bw_Bps > 0 ? hw->host_bw_Bps : 25e9;
  out->kind[out->n++] = MM_LINK_HOST;
}

char *mm_comm_link_name(const MmHardware *hw, const MmLinks *links, uint32_t r)
{
  g_return_val_if_fail(r < links->n, NULL);
  if (r == links->nic) return g_strdup("nic");
  if (r == links->host) return g_strdup("host");
  if (hw->intra.topology == MM_TOPO_FULL_MESH) return g_strdup_printf("link+%u", r - links->intra_first + 1);
  if (hw->intra.topology == MM_TOPO_RING) return g_strdup(r == links->intra_first ? "ring_next" : "ring_prev");
  return g_strdup("nvlink");
}

/* ---- algorithms -------------------------------------------------------- */

typedef struct {
  const MmHardware *hw;
  const MmLinks *links;
  const MmCollective *c;
  MmGroupShape sh;
  double p, k1, k2, S;
  double ai, ae, base; /* per-step latencies, per-collective latency */
  double bw_scale;      /* link bytes per payload byte of the protocol (1 / its efficiency) */
  MmProtocol proto;
} Ctx;

static void put_raw(MmCommCost *o, uint32_t link, double bytes)
{
  if (bytes <= 0 || link == UINT32_MAX) return;
  for (uint32_t i = 0; i < o->n_use; i++) {
    if (o->link[i] == link) {
      o->bytes[i] += bytes;
      return;
    }
  }
  g_assert(o->n_use < MM_LINKS_MAX);
  o->link[o->n_use] = link;
  o->bytes[o->n_use++] = bytes;
}

/* The protocol's bytes: the payload over its efficiency. */
#define put(o, link, bytes) put_raw((o), (link), (bytes) * x->bw_scale)

/* Intra-node bytes spread over the links toward the group's members in the node. */
static void put_intra(const Ctx *x, MmCommCost *o, double bytes)
{
  if (bytes <= 0 || x->links->n_intra == 0) return;
  const MmLinks *L = x->links;
  if (x->hw->intra.topology == MM_TOPO_FULL_MESH) {
    int64_t g = x->hw->gpus_per_node, k = x->sh.per_node, st = x->c->stride % g;
    if (x->sh.scope == MM_SCOPE_MIXED) st = g / k; /* members of one node sit g/k apart */
    for (int64_t m = 1; m < k; m++) {
      int64_t off = (m * st) % g;
      put(o, L->intra_first + (uint32_t)(off - 1), bytes / (double)(k - 1));
    }
  } else if (x->hw->intra.topology == MM_TOPO_RING) {
    put(o, L->intra_first, bytes / 2.0);
    put(o, L->intra_first + 1, bytes / 2.0);
  } else {
    put(o, L->intra_first, bytes);
  }
}

static gboolean is_pow2(double v)
{
  int64_t n = (int64_t)v;
  return n > 0 && (n & (n - 1)) == 0;
}

static double lg2(double v) { return ceil(log2(MAX(v, 1.0))); }

/* The algorithms that are @ph phases of a reduce-scatter / all-gather (an AllReduce is two:
 * ph = 2; an AllGather or ReduceScatter one): ring (dimension rings on a torus),
 * halving-doubling, hierarchical, host. Returns 1 with @o filled, 0 when @a does not apply
 * to the group, -1 when @a is not one of them. */
static int phased(const Ctx *x, MmAlgorithm a, double ph, MmCommCost *o, double *lat)
{
  const MmHardware *hw = x->hw;
  const MmLinks *L = x->links;
  const double p = x->p, k1 = x->k1, k2 = x->k2, S = x->S;
  const gboolean intra = k1 > 1, inter = k2 > 1;
  const double step = inter ? x->ae : x->ai;
  switch (a) {
  case MM_ALGO_RING:
    if (inter && hw->inter.n_dims > 0 && k2 == (double)hw->nodes) {
      /* dimension-ordered bidirectional rings along each dimension (and back for an AllReduce) */
      double chunk = S / k1, links = (double)hw->inter.links, e = 0;
      for (guint d = 0; d < hw->inter.n_dims; d++) {
        double kd = (double)hw->inter.dims[d];
        e += ph * (kd - 1.0) / kd * chunk * links / 2.0; /* two of the node's links carry each phase */
        *lat += ph * (kd - 1.0) * x->ae;
        chunk /= kd;
      }
      if (intra) put_intra(x, o, ph * (k1 - 1.0) / k1 * S);
      put(o, L->nic, e);
      o->sequential = TRUE;
      return 1;
    }
    put_intra(x, o, intra ? ph * (p - 1.0) / p * S : 0);
    put(o, L->nic, inter ? ph * (p - 1.0) / p * S / k1 : 0);
    *lat += ph * (p - 1.0) * step;
    return 1;
  case MM_ALGO_HALVING_DOUBLING:
    if (!is_pow2(p) || !is_pow2(k1)) return 0;
    put_intra(x, o, intra ? ph * S * (1.0 / k2 - 1.0 / p) : 0);
    put(o, L->nic, inter ? ph * S * (1.0 - 1.0 / k2) : 0);
    *lat += ph * (lg2(k1) * x->ai + lg2(k2) * x->ae);
    return 1;
  case MM_ALGO_HIERARCHICAL:
    if (!intra || !inter) return 0;
    put_intra(x, o, ph * (k1 - 1.0) / k1 * S);
    put(o, L->nic, ph * (k2 - 1.0) / k2 * S / k1);
    *lat += ph * ((k1 - 1.0) * x->ai + (k2 - 1.0) * x->ae);
    o->sequential = TRUE;
    return 1;
  case MM_ALGO_HOST:
    put(o, L->host, ph * (p - 1.0) / p * S);
    *lat += ph * (p - 1.0) * step;
    return 1;
  default:
    return -1;
  }
}

/* Fills @o with the traffic of @a; FALSE when @a does not apply. */
static gboolean algorithm(const Ctx *x, MmAlgorithm a, MmCommCost *o)
{
  const MmHardware *hw = x->hw;
  const MmLinks *L = x->links;
  const double p = x->p, k1 = x->k1, k2 = x->k2, S = x->S;
  const gboolean intra = k1 > 1, inter = k2 > 1;
  const double step = inter ? x->ae : x->ai;
  o->n_use = 0; /* the link arrays are filled up to n_use; no need to clear them */
  o->sequential = FALSE;
  o->algorithm = a;
  o->protocol = x->proto;
  o->shape = x->sh;
  double lat = x->base;
  if (inter && L->nic == UINT32_MAX) return FALSE;

  switch (x->c->kind) {
  case MM_COLL_ALL_REDUCE:
  case MM_COLL_ALL_GATHER:
  case MM_COLL_REDUCE_SCATTER: {
    const gboolean ar = x->c->kind == MM_COLL_ALL_REDUCE;
    int r = phased(x, a, ar ? 2.0 : 1.0, o, &lat);
    if (r == 0) return FALSE;
    if (r > 0) break;
    switch (a) {
    case MM_ALGO_TREE:
      if (!ar || !inter) return FALSE;
      if (intra) {
        if (L->in_network_bw_Bps > 0) put(o, L->intra_first, S * L->bw_Bps[L->intra_first] / L->in_network_bw_Bps);
        else put_intra(x, o, 2.0 * (k1 - 1.0) / k1 * S);
      }
      put(o, L->nic, 2.0 * (k2 - 1.0) / k2 * S / k1);
      lat += 2.0 * (k1 - 1.0) * x->ai + 2.0 * lg2(k2) * x->ae;
      break;
    case MM_ALGO_DIRECT:
      /* direct algorithms need a link to every peer: full meshes (the fused-kernel paper's GEMV + AllReduce) */
      if (inter || hw->intra.topology != MM_TOPO_FULL_MESH) return FALSE;
      put_intra(x, o, ar ? (p - 1.0) * S : (p - 1.0) / p * S);
      lat += x->ai;
      break;
    case MM_ALGO_TWO_PHASE:
      if (!ar || inter || hw->intra.topology != MM_TOPO_FULL_MESH) return FALSE;
      put_intra(x, o, 2.0 * (p - 1.0) / p * S);
      lat += 2.0 * x->ai;
      break;
    case MM_ALGO_ONE_SHOT:
      /* the serving engines' custom kernel (vLLM, SGLang, TensorRT-LLM): one launch in which every GPU
       * writes its buffer into each peer's over NVLink / xGMI with flags in the data (LL-style stores,
       * hence the LL bandwidth) and sums the p buffers; a fixed cost of its own instead of NCCL's */
      if (!ar || inter || x->proto != MM_PROTO_LL || hw->intra.topology == MM_TOPO_RING) return FALSE;
      put_intra(x, o, (p - 1.0) * S);
      lat = hw->intra.one_shot_latency_s;
      break;
    case MM_ALGO_IN_NETWORK:
      if (!ar || !intra || L->in_network_bw_Bps <= 0) return FALSE;
      /* each GPU pushes S into the switch and pulls the reduced S back */
      put(o, L->intra_first, S * L->bw_Bps[L->intra_first] / L->in_network_bw_Bps);
      if (inter) {
        put(o, L->nic, (hw->inter.in_network_reduction ? 1.0 : 2.0 * (k2 - 1.0) / k2) * S / k1);
        lat += 2.0 * lg2(k2) * x->ae;
      }
      lat += 2.0 * x->ai;
      break;
    default:
      return FALSE;
    }
    break;
  }
  case MM_COLL_ALL_TO_ALL:
    if (a == MM_ALGO_HOST) {
      put(o, L->host, (p - 1.0) / p * S);
      lat += (p - 1.0) * step;
      break;
    }
    if (a != MM_ALGO_PAIRWISE) return FALSE;
    {
      /* every pair at once; remote shares leave through the NICs, local ones over the intra links;
       * with uneven routing the busiest rank sets the pace */
      double sk = x->c->skew > 1.0 ? x->c->skew : 1.0;
      put_intra(x, o, (k1 - 1.0) / p * S * sk);
      put(o, L->nic, (p - k1) / p * S * sk);
    }
    lat += step;
    break;
  case MM_COLL_BROADCAST:
    if (a != MM_ALGO_RING && a != MM_ALGO_TREE) return FALSE;
    put_intra(x, o, intra ? S : 0);
    put(o, L->nic, inter ? S / k1 : 0);
    lat += (a == MM_ALGO_RING ? p - 1.0 : lg2(p)) * step;
    break;
  case MM_COLL_P2P:
  case MM_COLL_PERMUTE:
    if (a != MM_ALGO_DIRECT) return FALSE;
    if (inter || x->sh.scope != MM_SCOPE_INTRA) {
      put(o, L->nic, S);
    } else if (hw->intra.topology == MM_TOPO_FULL_MESH) {
      int64_t off = x->c->stride % hw->gpus_per_node; /* the link to the next member */
      put(o, L->intra_first + (uint32_t)(off - 1), S);
    } else {
      put_intra(x, o, S);
    }
    lat += step;
    break;
  case MM_COLL_COUNT:
    g_assert_not_reached();
  }

  o->latency_s = lat;
  double data = 0;
  for (uint32_t i = 0; i < o->n_use; i++) {
    double t = o->bytes[i] / L->bw_Bps[o->link[i]];
    data = o->sequential ? data + t : MAX(data, t);
  }
  o->time_s = lat + data;
  o->alg_bw_Bps = o->time_s > 0 ? S / o->time_s : 0;
  double f = 1.0;
  if (x->c->kind == MM_COLL_ALL_REDUCE) f = 2.0 * (p - 1.0) / p;
  else if (x->c->kind == MM_COLL_ALL_GATHER || x->c->kind == MM_COLL_REDUCE_SCATTER || x->c->kind == MM_COLL_ALL_TO_ALL)
    f = (p - 1.0) / p;
  o->bus_bw_Bps = o->alg_bw_Bps * f;
  return TRUE;
}

static void set_protocol(Ctx *x, MmProtocol proto)
{
  const MmHardware *hw = x->hw;
  const gboolean inter = x->sh.nodes > 1;
  x->proto = proto;
  if (proto == MM_PROTO_LL) {
    x->ai = hw->intra.ll_latency_s;
    x->ae = hw->inter.ll_latency_s;
    x->base = inter ? hw->inter.ll_base_latency_s : hw->intra.ll_base_latency_s;
    x->bw_scale = 1.0 / (inter ? MIN(hw->inter.ll_efficiency, hw->intra.present ? hw->intra.ll_efficiency : 1.0)
                               : hw->intra.ll_efficiency);
  } else {
    x->ai = hw->intra.latency_s;
    x->ae = hw->inter.latency_s;
    x->base = inter ? hw->inter.base_latency_s : hw->intra.base_latency_s;
    x->bw_scale = 1.0;
  }
}

static void init_ctx(Ctx *x, const MmHardware *hw, const MmLinks *links, const MmCollective *c)
{
  x->hw = hw;
  x->links = links;
  x->c = c;
  x->sh = mm_comm_group_shape(hw, c->degree, c->stride);
  x->p = (double)c->degree;
  x->k1 = (double)x->sh.per_node;
  x->k2 = (double)x->sh.nodes;
  x->S = c->bytes;
  set_protocol(x, MM_PROTO_SIMPLE);
}

gboolean mm_comm_applies(const MmHardware *hw, const MmLinks *links, const MmCollective *c, MmAlgorithm a)
{
  Ctx x;
  MmCommCost o;
  init_ctx(&x, hw, links, c);
  if (a == MM_ALGO_AUTO) return FALSE;
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
    set_protocol(&x, (MmProtocol)pr);
    if (algorithm(&x, a, &o)) return TRUE;
  }
  return FALSE;
}

gboolean mm_comm_cost(const MmHardware *hw, const MmLinks *links, const MmCollective *c, MmCommCost *out)
{
  Ctx x;
  init_ctx(&x, hw, links, c);
  memset(out, 0, sizeof *out);
  out->shape = x.sh;
  out->algorithm = c->algorithm == MM_ALGO_AUTO ? MM_ALGO_RING : c->algorithm;
  if (c->degree <= 1 || c->bytes <= 0) return TRUE;
  /* the fastest protocol for the forced algorithm, or the fastest (algorithm, protocol) on
   * idle links, as NCCL's and RCCL's tuners pick (host staging only when asked) */
  gboolean found = FALSE;
  MmCommCost best = {0}, o;
  if (c->algorithm != MM_ALGO_AUTO) {
    for (int pr = 0; pr < MM_PROTO_COUNT && c->algorithm != MM_ALGO_HOST; pr++) {
      set_protocol(&x, (MmProtocol)pr);
      if (algorithm(&x, c->algorithm, &o) && (!found || o.time_s < best.time_s)) best = o, found = TRUE;
    }
    set_protocol(&x, MM_PROTO_SIMPLE);
    if (!found && algorithm(&x, c->algorithm, &o)) best = o, found = TRUE;
    if (found) {
      *out = best;
      return TRUE;
    }
  }
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
    set_protocol(&x, (MmProtocol)pr);
    for (int a = MM_ALGO_RING; a < MM_ALGO_COUNT; a++) {
      if (a == MM_ALGO_HOST || a == MM_ALGO_HIERARCHICAL || (a == MM_ALGO_ONE_SHOT && !c->one_shot)) continue;
      if (!algorithm(&x, (MmAlgorithm)a, &o)) continue;
      if (!found || o.time_s < best.time_s) best = o, found = TRUE;
    }
  }
  set_protocol(&x, MM_PROTO_SIMPLE);
  if (!found) algorithm(&x, MM_ALGO_HOST, &best);
  *out = best;
  return c->algorithm == MM_ALGO_AUTO;
}

/* ---- sparse gradient synchronization ------------------------------------ */

void mm_comm_sparse_cost(const MmHardware *hw, const MmLinks *links, const MmSparseGrad *g, MmSparseMethod m,
                         MmSparseCost *out)
{
  memset(out, 0, sizeof *out);
  out->method = m;
  const double p = (double)g->degree, rows = (double)g->rows;
  const double local = MIN(rows, g->touched_frac * rows);
  /* distinct rows across ranks: a share `overlap` of each rank's rows is common to all */
  double uni = local * g->overlap + (1.0 - g->overlap) * local * p;
  out->union_rows = MIN(rows, MAX(local, uni));
  MmCollective ar = {MM_COLL_ALL_REDUCE, 0, g->degree, g->stride, MM_ALGO_AUTO, 1.0, FALSE};
  if (m == MM_SYNC_DENSE) {
    ar.bytes = rows * (double)g->dim * g->elem_bytes;
    out->value_bytes = ar.bytes;
    mm_comm_cost(hw, links, &ar, &out->reduce);
    out->time_s = out->reduce.time_s;
    return;
  }
  /* indices: int64 per touched row, padded to the largest count (PyTorch blog, step 1) */
  MmCollective ag = {MM_COLL_ALL_GATHER, local * 8.0 * p, g->degree, g->stride, MM_ALGO_AUTO, 1.0, FALSE};
  if (m == MM_SYNC_HOST) ag.algorithm = ar.algorithm = MM_ALGO_HOST;
  mm_comm_cost(hw, links, &ag, &out->gather);
  out->index_bytes = ag.bytes;
  ar.bytes = out->union_rows * (double)g->dim * g->elem_bytes;
  out->value_bytes = ar.bytes;
  mm_comm_cost(hw, links, &ar, &out->reduce);
  /* de-duplication and the scatter into the union layout: memory passes over the indices and values */
  double dedup_bytes = 2.0 * ag.bytes + 2.0 * local * (double)g->dim * g->elem_bytes;
  out->dedup_s = dedup_bytes / (hw->device.hbm_bw_Bps * hw->device.util_hbm.value);
  if (m == MM_SYNC_HOST) out->dedup_s = dedup_bytes / (20e9); /* on the CPU: one socket's memory bandwidth share */
  out->time_s = out->gather.time_s + out->dedup_s + out->reduce.time_s;
}

MmSparseMethod mm_comm_sparse_best(const MmHardware *hw, const MmLinks *links, const MmSparseGrad *g,
                                   MmSparseCost *out)
{
  MmSparseCost c;
  gboolean first = TRUE;
  for (int m = 0; m < MM_SYNC_COUNT; m++) {
    mm_comm_sparse_cost(hw, links, g, (MmSparseMethod)m, &c);
    if (first || c.time_s < out->time_s) *out = c, first = FALSE;
  }
  return out->method;
}

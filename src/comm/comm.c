/* comm: alpha-beta costs of ring, hierarchical and pairwise collectives on the system's two networks. */
#include "comm.h"

const char *const mm_coll_names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p", NULL};
const char *const mm_scope_names[] = {"intra_node", "inter_node", "intra_and_inter_node", NULL};

MmGroupShape mm_comm_group_shape(const MmHardware *hw, int64_t degree, int64_t stride)
{
  const int64_t g = hw->gpus_per_node;
  MmGroupShape s;
  if (degree <= 1 || g % (stride * degree) == 0) {
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

/* Effective intra-node bandwidth of one GPU toward @peers other members of its node.
 * On a full mesh only the links to those peers carry traffic (a pair uses one of seven
 * links on MI300X); through a switch every link does. */
static double intra_bw(const MmNetwork *n, int64_t gpus_per_node, int64_t peers)
{
  if (peers <= 0) return 0;
  double bw = n->bw_per_gpu_Bps;
  if (n->topology == MM_TOPO_FULL_MESH && gpus_per_node > 1) {
    double per_peer = (double)n->links / (double)(gpus_per_node - 1) * n->link_bw_Bps;
    bw = MIN(bw, (double)peers * per_peer);
  }
  return bw * n->efficiency;
}

static double inter_bw(const MmNetwork *n) { return n->bw_per_gpu_Bps * n->efficiency; }

/* One ring phase over p ranks moving fraction f of @bytes per step pattern. */
static double ring(double p, double bytes, double factor, double bw, double lat, double steps, double *latency)
{
  if (p <= 1 || bytes <= 0) return 0;
  *latency += steps * lat;
  return steps * lat + factor * (p - 1.0) / p * bytes / bw;
}

void mm_comm_cost(const MmHardware *hw, const MmCollective *c, MmCommCost *out)
{
  *out = (MmCommCost){0};
  out->shape = mm_comm_group_shape(hw, c->degree, c->stride);
  out->algorithm = "ring";
  if (c->degree <= 1 || c->bytes <= 0) return;
  const MmNetwork *in = &hw->intra, *ex = &hw->inter;
  const double p = (double)c->degree, S = c->bytes;
  const double k1 = (double)out->shape.per_node, k2 = (double)out->shape.nodes;
  double bi = out->shape.per_node > 1 ? intra_bw(in, hw->gpus_per_node, out->shape.per_node - 1) : 0;
  double be = out->shape.nodes > 1 ? inter_bw(ex) : 0;
  out->intra_bw_Bps = bi;
  out->inter_bw_Bps = be;
  double li = in->latency_s, le = ex->latency_s, lat = 0, t = 0;

  switch (c->kind) {
  case MM_COLL_ALL_REDUCE:
    if (out->shape.scope == MM_SCOPE_INTRA) t = ring(p, S, 2, bi, li, 2 * (p - 1), &lat);
    else if (out->shape.scope == MM_SCOPE_INTER) t = ring(p, S, 2, be, le, 2 * (p - 1), &lat);
    else {
      out->algorithm = "hierarchical";
      t = ring(k1, S, 1, bi, li, k1 - 1, &lat) + ring(k2, S / k1, 2, be, le, 2 * (k2 - 1), &lat) +
          ring(k1, S, 1, bi, li, k1 - 1, &lat);
    }
    break;
  case MM_COLL_ALL_GATHER:
  case MM_COLL_REDUCE_SCATTER:
    if (out->shape.scope == MM_SCOPE_INTRA) t = ring(p, S, 1, bi, li, p - 1, &lat);
    else if (out->shape.scope == MM_SCOPE_INTER) t = ring(p, S, 1, be, le, p - 1, &lat);
    else {
      out->algorithm = "hierarchical";
      t = ring(k2, S / k1, 1, be, le, k2 - 1, &lat) + ring(k1, S, 1, bi, li, k1 - 1, &lat);
    }
    break;
  case MM_COLL_ALL_TO_ALL: {
    /* every pair exchanges concurrently; the slower network sets the pace */
    out->algorithm = "pairwise";
    double local = (k1 - 1.0) / p * S, remote = (p - k1) / p * S;
    double ti = local > 0 ? local / bi : 0, te = remote > 0 ? remote / be : 0;
    lat = remote > 0 ? le : li;
    t = lat + MAX(ti, te);
    break;
  }
  case MM_COLL_P2P: {
    /* one message to one peer: a single link on a mesh, the GPU's NIC share across nodes */
    out->algorithm = "direct";
    double bw = out->shape.scope == MM_SCOPE_INTRA ? intra_bw(in, hw->gpus_per_node, 1) : be;
    lat = out->shape.scope == MM_SCOPE_INTRA ? li : le;
    t = lat + S / bw;
    break;
  }
  case MM_COLL_COUNT:
    g_assert_not_reached();
  }
  out->latency_s = lat;
  out->time_s = t;
}

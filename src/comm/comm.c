/* comm: collective algorithms as per-link traffic + latency on switch, mesh, ring, fat-tree, rail and torus networks. */
#include "comm.h"
#include "cost/cost.h"

#include <math.h>
#include <string.h>

const char *const mm_scope_names[] = {"intra_node", "inter_node", "intra_and_inter_node", NULL};
const char *const mm_sparse_method_names[] = {"dense", "sparse", "host", NULL};


gboolean mm_comm_group_even(const MmHardware *hw, int64_t degree, int64_t stride)
{
  const int64_t g = hw->gpus_per_node, span = stride * degree;
  return degree <= 1 || g % span == 0 /* within one node */ || stride % g == 0 /* one member per node */ ||
         (g % stride == 0 && span % g == 0) /* whole nodes */;
}

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
      double per_peer = (double)in->links / (double)(g - 1) * in->link_bw_Bps * in->efficiency.value;
      g_assert(g - 1 + 2 <= MM_LINKS_MAX); /* the loader caps full meshes at MM_FULL_MESH_MAX_GPUS */
      out->n_intra = (uint32_t)(g - 1);
      for (uint32_t i = 0; i < out->n_intra; i++) {
        out->bw_Bps[out->n] = per_peer;
        out->kind[out->n++] = MM_LINK_INTRA;
      }
    } else if (in->topology == MM_TOPO_RING) {
      out->n_intra = 2; /* to the next and to the previous GPU */
      for (int i = 0; i < 2; i++) {
        out->bw_Bps[out->n] = in->bw_per_gpu_Bps * in->efficiency.value / 2.0;
        out->kind[out->n++] = MM_LINK_INTRA;
      }
    } else {
      out->n_intra = 1; /* the GPU's port into the switch */
      out->bw_Bps[out->n] = in->bw_per_gpu_Bps * in->efficiency.value;
      out->kind[out->n++] = MM_LINK_INTRA;
      if (in->in_network_reduction) out->in_network_bw_Bps = in->bw_per_gpu_Bps * in->in_network_efficiency.value;
    }
  }
  if (hw->inter.present) {
    out->nic = out->n;
    out->bw_Bps[out->n] = hw->inter.bw_per_gpu_Bps * hw->inter.efficiency.value;
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
  double ph;            /* phases: 2 for an AllReduce (reduce-scatter + all-gather), else 1 */
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

/* Latency steps of one algorithm: how many per-step latencies (alpha) it pays on the
 * intra-node network and on the inter-node one. */
typedef struct {
  double intra, inter;
} Steps;

/* @n steps on the network the group's slowest hop crosses (the NICs when it spans nodes). */
static Steps on_group(const Ctx *x, double n) { return x->k2 > 1 ? (Steps){0, n} : (Steps){n, 0}; }

/* The torus ring: dimension-ordered bidirectional rings along each dimension of a torus that
 * the group covers whole (an AllReduce goes around and back). */
static gboolean torus_ring(const Ctx *x)
{
  return x->k2 > 1 && x->hw->inter.n_dims > 0 && x->k2 == (double)x->hw->nodes && x->c->kind != MM_COLL_BROADCAST;
}

/* Broadcast (ring or tree): every rank receives the buffer once. */
static void broadcast_traffic(const Ctx *x, MmCommCost *o)
{
  put_intra(x, o, x->k1 > 1 ? x->S : 0);
  put(o, x->links->nic, x->k2 > 1 ? x->S / x->k1 : 0);
}

/* ---- ring: AllReduce (reduce-scatter + all-gather), AllGather, ReduceScatter, Broadcast */

static void ring_traffic(const Ctx *x, MmCommCost *o)
{
  const double p = x->p, k1 = x->k1, S = x->S, ph = x->ph;
  if (x->c->kind == MM_COLL_BROADCAST) {
    broadcast_traffic(x, o);
  } else if (torus_ring(x)) {
    const MmHardware *hw = x->hw;
    double chunk = S / k1, links = (double)hw->inter.links, e = 0;
    for (guint d = 0; d < hw->inter.n_dims; d++) {
      double kd = (double)hw->inter.dims[d];
      e += ph * (kd - 1.0) / kd * chunk * links / 2.0; /* two of the node's links carry each phase */
      chunk /= kd;
    }
    if (k1 > 1) put_intra(x, o, ph * (k1 - 1.0) / k1 * S);
    put(o, x->links->nic, e);
    o->sequential = TRUE;
  } else {
    put_intra(x, o, k1 > 1 ? ph * (p - 1.0) / p * S : 0);
    put(o, x->links->nic, x->k2 > 1 ? ph * (p - 1.0) / p * S / k1 : 0);
  }
}

static Steps ring_steps(const Ctx *x)
{
  if (x->c->kind == MM_COLL_BROADCAST) return on_group(x, x->p - 1.0);
  if (torus_ring(x)) {
    double n = 0;
    for (guint d = 0; d < x->hw->inter.n_dims; d++) n += x->ph * ((double)x->hw->inter.dims[d] - 1.0);
    return (Steps){0, n};
  }
  return on_group(x, x->ph * (x->p - 1.0));
}

/* ---- tree: double binary trees across nodes, chains inside (AllReduce); Broadcast */

static gboolean tree_applies(const Ctx *x) { return x->c->kind == MM_COLL_BROADCAST || x->k2 > 1; }

static void tree_traffic(const Ctx *x, MmCommCost *o)
{
  const MmLinks *L = x->links;
  const double k1 = x->k1, k2 = x->k2, S = x->S;
  if (x->c->kind == MM_COLL_BROADCAST) {
    broadcast_traffic(x, o);
    return;
  }
  if (k1 > 1) {
    if (L->in_network_bw_Bps > 0) put(o, L->intra_first, S * L->bw_Bps[L->intra_first] / L->in_network_bw_Bps);
    else put_intra(x, o, 2.0 * (k1 - 1.0) / k1 * S);
  }
  put(o, L->nic, 2.0 * (k2 - 1.0) / k2 * S / k1);
}

static Steps tree_steps(const Ctx *x)
{
  if (x->c->kind == MM_COLL_BROADCAST) return on_group(x, lg2(x->p));
  return (Steps){2.0 * (x->k1 - 1.0), 2.0 * lg2(x->k2)};
}

/* ---- direct: every rank reads every peer (AllReduce), direct sends (AllGather, ReduceScatter),
 * point-to-point messages. The reductions need a link to every peer: full meshes (the fused-kernel
 * paper's GEMV + AllReduce). */

static gboolean is_p2p(const Ctx *x) { return x->c->kind == MM_COLL_P2P || x->c->kind == MM_COLL_PERMUTE; }

static gboolean one_mesh(const Ctx *x) { return x->k2 <= 1 && x->hw->intra.topology == MM_TOPO_FULL_MESH; }

static gboolean direct_applies(const Ctx *x) { return is_p2p(x) || one_mesh(x); }

static void direct_traffic(const Ctx *x, MmCommCost *o)
{
  const double p = x->p, S = x->S;
  if (!is_p2p(x)) {
    put_intra(x, o, x->c->kind == MM_COLL_ALL_REDUCE ? (p - 1.0) * S : (p - 1.0) / p * S);
  } else if (x->k2 > 1 || x->sh.scope != MM_SCOPE_INTRA) {
    put(o, x->links->nic, S);
  } else if (x->hw->intra.topology == MM_TOPO_FULL_MESH) {
    int64_t off = x->c->stride % x->hw->gpus_per_node; /* the link to the next member */
    put(o, x->links->intra_first + (uint32_t)(off - 1), S);
  } else {
    put_intra(x, o, S);
  }
}

static Steps direct_steps(const Ctx *x) { return is_p2p(x) ? on_group(x, 1) : (Steps){1, 0}; }

/* ---- two_phase: direct reduce-scatter then direct all-gather over a mesh */

static void two_phase_traffic(const Ctx *x, MmCommCost *o) { put_intra(x, o, 2.0 * (x->p - 1.0) / x->p * x->S); }

static Steps two_phase_steps(const Ctx *x)
{
  (void)x;
  return (Steps){2, 0};
}

/* ---- halving_doubling: recursive halving (reduce-scatter) and doubling (all-gather) */

static gboolean hd_applies(const Ctx *x) { return is_pow2(x->p) && is_pow2(x->k1); }

static void hd_traffic(const Ctx *x, MmCommCost *o)
{
  const double p = x->p, k2 = x->k2, S = x->S, ph = x->ph;
  put_intra(x, o, x->k1 > 1 ? ph * S * (1.0 / k2 - 1.0 / p) : 0);
  put(o, x->links->nic, k2 > 1 ? ph * S * (1.0 - 1.0 / k2) : 0);
}

static Steps hd_steps(const Ctx *x) { return (Steps){x->ph * lg2(x->k1), x->ph * lg2(x->k2)}; }

/* ---- hierarchical: intra reduce-scatter, inter all-reduce, intra all-gather, one after the other */

static gboolean hier_applies(const Ctx *x) { return x->k1 > 1 && x->k2 > 1; }

static void hier_traffic(const Ctx *x, MmCommCost *o)
{
  const double k1 = x->k1, k2 = x->k2, S = x->S, ph = x->ph;
  put_intra(x, o, ph * (k1 - 1.0) / k1 * S);
  put(o, x->links->nic, ph * (k2 - 1.0) / k2 * S / k1);
  o->sequential = TRUE;
}

static Steps hier_steps(const Ctx *x) { return (Steps){x->ph * (x->k1 - 1.0), x->ph * (x->k2 - 1.0)}; }

/* ---- in_network: the switch reduces (NVLink SHARP; SHARP across nodes) */

static gboolean in_network_applies(const Ctx *x) { return x->k1 > 1 && x->links->in_network_bw_Bps > 0; }

static void in_network_traffic(const Ctx *x, MmCommCost *o)
{
  const MmLinks *L = x->links;
  /* each GPU pushes S into the switch and pulls the reduced S back */
  put(o, L->intra_first, x->S * L->bw_Bps[L->intra_first] / L->in_network_bw_Bps);
  if (x->k2 > 1) put(o, L->nic, (x->hw->inter.in_network_reduction ? 1.0 : 2.0 * (x->k2 - 1.0) / x->k2) * x->S / x->k1);
}

static Steps in_network_steps(const Ctx *x) { return (Steps){2.0, x->k2 > 1 ? 2.0 * lg2(x->k2) : 0}; }

/* ---- pairwise All2All: every pair at once */

/* The links a remote byte crosses on average when a group spanning a whole torus sends to every
 * other node by shortest dimension-ordered paths (1 elsewhere: a switched network's one hop).
 * Along a ring of k nodes the distances to all k sum to k^2/4 (k even) or (k^2 - 1)/4 (odd);
 * each dimension's sum recurs once per node of the other dimensions, and the mean is over the
 * nodes - 1 destinations. Forwarded bytes load the intermediate nodes' links as much as the
 * sender's, so by symmetry every node's links carry its own remote bytes times this. */
static double torus_hops(const Ctx *x)
{
  const MmHardware *hw = x->hw;
  if (!(x->k2 > 1 && hw->inter.n_dims > 0 && x->k2 == (double)hw->nodes)) return 1.0;
  double sum = 0;
  for (guint d = 0; d < hw->inter.n_dims; d++) {
    const double k = (double)hw->inter.dims[d];
    const double ring = fmod(k, 2.0) == 0 ? k * k / 4.0 : (k * k - 1.0) / 4.0;
    sum += ring * (double)hw->nodes / k;
  }
  return sum / ((double)hw->nodes - 1.0);
}

/* Per-node dispatch (DeepEP, DeepSeek-V3 Sec. 3.2.2): a token's payload (S / top_k) crosses the
 * network once to each remote node holding one of its experts, to the GPU of the sender's own
 * index there, which forwards the copies of that node's other GPUs over the node's links (the
 * combine is the reverse). With its top_k experts drawn evenly from M of the k2 nodes (M = k2
 * without node-limited routing), a node the token picks holds at least one of them with
 * probability q = 1 - (1 - 1/M)^top_k, and is remote with probability (k2 - 1) / k2: the
 * network carries D (k2 - 1) / k2 payloads per token, D = M q, where copy-per-expert dispatch
 * carries top_k (k2 - 1) / k2. The intra links carry the local copies, as there, plus the
 * forwarded ones: of the top_k / D copies one arriving payload stands for, (k1 - 1) / k1 live on
 * other GPUs. */
static double node_payloads(const Ctx *x)
{
  const double M = x->c->route_nodes > 0 ? MIN(x->c->route_nodes, x->k2) : x->k2;
  return M * (1.0 - pow(1.0 - 1.0 / M, x->c->route_top_k));
}

static void pairwise_traffic(const Ctx *x, MmCommCost *o)
{
  /* remote shares leave through the NICs, local ones over the intra links; with uneven routing
   * the busiest rank sets the pace */
  double sk = x->c->skew > 1.0 ? x->c->skew : 1.0;
  if (x->c->route_top_k > 0 && x->k2 > 1) {
    const double remote = (x->k2 - 1.0) / x->k2, fwd = (x->k1 - 1.0) / x->k1;
    put_intra(x, o, ((x->k1 - 1.0) / x->p + remote * fwd) * x->S * sk);
    put(o, x->links->nic, node_payloads(x) / x->c->route_top_k * remote * x->S * sk * torus_hops(x));
    return;
  }
  put_intra(x, o, (x->k1 - 1.0) / x->p * x->S * sk);
  put(o, x->links->nic, (x->p - x->k1) / x->p * x->S * sk * torus_hops(x));
}

static Steps one_step(const Ctx *x) { return on_group(x, 1); }

/* ---- one_shot: the serving engines' custom AllReduce kernel (vLLM, SGLang, TensorRT-LLM): one
 * launch in which every GPU writes its buffer into each peer's over NVLink / xGMI with flags in the
 * data (LL-style stores, hence the LL protocol's bandwidth) and sums the p buffers; a fixed cost of
 * its own instead of NCCL's */

static gboolean one_shot_applies(const Ctx *x) { return x->k2 <= 1 && x->hw->intra.topology != MM_TOPO_RING; }

static void one_shot_traffic(const Ctx *x, MmCommCost *o) { put_intra(x, o, (x->p - 1.0) * x->S); }

static Steps no_steps(const Ctx *x)
{
  (void)x;
  return (Steps){0, 0};
}

/* ---- host: staged through host memory over PCIe (Gloo, NCCL with P2P disabled) */

static void host_traffic(const Ctx *x, MmCommCost *o) { put(o, x->links->host, x->ph * (x->p - 1.0) / x->p * x->S); }

static Steps host_steps(const Ctx *x) { return on_group(x, x->ph * (x->p - 1.0)); }

/* ---- the table ------------------------------------------------------------ */

#define K(kind) (1u << (kind))
#define REDUCTIONS (K(MM_COLL_ALL_REDUCE) | K(MM_COLL_ALL_GATHER) | K(MM_COLL_REDUCE_SCATTER))
#define ALL_PROTOCOLS ((1u << MM_PROTO_COUNT) - 1)

/* Whether the automatic choice considers an algorithm. */
typedef enum {
  AUTO_YES,        /* NCCL's and RCCL's tuners pick among these */
  AUTO_IF_ASKED,   /* only when the collective allows it (one_shot: serving engines' kernel) */
  AUTO_NO,         /* only when forced */
  AUTO_FALLBACK,   /* forced, or when nothing else applies */
} AutoPick;

/* Where the per-collective latency comes from. */
typedef enum { BASE_PROTOCOL, BASE_ONE_SHOT } BaseLatency;

/* One collective algorithm: the kinds it implements, the protocols it runs under, whether it
 * applies to a group (beyond its kinds; NULL: always), the bytes it puts on each link, its
 * latency steps, and whether auto considers it. Adding an algorithm is adding a row (and its
 * MmAlgorithm value and name in config). */
typedef struct {
  MmAlgorithm id;
  unsigned kinds;     /* bits 1 << MmCollKind */
  unsigned protocols; /* bits 1 << MmProtocol */
  gboolean (*applies)(const Ctx *x);
  void (*traffic)(const Ctx *x, MmCommCost *o);
  Steps (*steps)(const Ctx *x);
  BaseLatency base;
  AutoPick auto_pick;
} Algorithm;

static const Algorithm algorithms[MM_ALGO_COUNT] = {
  [MM_ALGO_AUTO] = {MM_ALGO_AUTO, 0, 0, NULL, NULL, NULL, BASE_PROTOCOL, AUTO_NO},
  [MM_ALGO_RING] = {MM_ALGO_RING, REDUCTIONS | K(MM_COLL_BROADCAST), ALL_PROTOCOLS, NULL, ring_traffic, ring_steps,
                    BASE_PROTOCOL, AUTO_YES},
  [MM_ALGO_TREE] = {MM_ALGO_TREE, K(MM_COLL_ALL_REDUCE) | K(MM_COLL_BROADCAST), ALL_PROTOCOLS, tree_applies,
                    tree_traffic, tree_steps, BASE_PROTOCOL, AUTO_YES},
  [MM_ALGO_DIRECT] = {MM_ALGO_DIRECT, REDUCTIONS | K(MM_COLL_P2P) | K(MM_COLL_PERMUTE), ALL_PROTOCOLS,
                      direct_applies, direct_traffic, direct_steps, BASE_PROTOCOL, AUTO_YES},
  [MM_ALGO_TWO_PHASE] = {MM_ALGO_TWO_PHASE, K(MM_COLL_ALL_REDUCE), ALL_PROTOCOLS, one_mesh, two_phase_traffic,
                         two_phase_steps, BASE_PROTOCOL, AUTO_YES},
  [MM_ALGO_HALVING_DOUBLING] = {MM_ALGO_HALVING_DOUBLING, REDUCTIONS, ALL_PROTOCOLS, hd_applies, hd_traffic,
                                hd_steps, BASE_PROTOCOL, AUTO_YES},
  [MM_ALGO_HIERARCHICAL] = {MM_ALGO_HIERARCHICAL, REDUCTIONS, ALL_PROTOCOLS, hier_applies, hier_traffic,
                            hier_steps, BASE_PROTOCOL, AUTO_NO},
  [MM_ALGO_IN_NETWORK] = {MM_ALGO_IN_NETWORK, K(MM_COLL_ALL_REDUCE), ALL_PROTOCOLS, in_network_applies,
                          in_network_traffic, in_network_steps, BASE_PROTOCOL, AUTO_YES},
  [MM_ALGO_PAIRWISE] = {MM_ALGO_PAIRWISE, K(MM_COLL_ALL_TO_ALL), ALL_PROTOCOLS, NULL, pairwise_traffic, one_step,
                        BASE_PROTOCOL, AUTO_YES},
  [MM_ALGO_ONE_SHOT] = {MM_ALGO_ONE_SHOT, K(MM_COLL_ALL_REDUCE), 1u << MM_PROTO_LL, one_shot_applies,
                        one_shot_traffic, no_steps, BASE_ONE_SHOT, AUTO_IF_ASKED},
  [MM_ALGO_HOST] = {MM_ALGO_HOST, REDUCTIONS | K(MM_COLL_ALL_TO_ALL), 1u << MM_PROTO_SIMPLE, NULL, host_traffic,
                    host_steps, BASE_PROTOCOL, AUTO_FALLBACK},
};

/* Fills @o with the cost of @a under the context's protocol; FALSE when @a does not apply. */
static gboolean algorithm(const Ctx *x, MmAlgorithm a, MmCommCost *o)
{
  const Algorithm *row = &algorithms[a];
  const MmLinks *L = x->links;
  g_assert(row->id == a);
  o->n_use = 0; /* the link arrays are filled up to n_use; no need to clear them */
  o->sequential = FALSE;
  o->algorithm = a;
  o->protocol = x->proto;
  o->shape = x->sh;
  if (!(row->kinds & K(x->c->kind)) || !(row->protocols & (1u << x->proto))) return FALSE;
  if (x->k2 > 1 && L->nic == UINT32_MAX) return FALSE;
  if (row->applies && !row->applies(x)) return FALSE;
  row->traffic(x, o);
  Steps st = row->steps(x);
  double base = row->base == BASE_ONE_SHOT ? x->hw->intra.one_shot_latency_s.value : x->base;
  o->latency_s = base + (st.intra * x->ai + st.inter * x->ae);
  double data = 0;
  for (uint32_t i = 0; i < o->n_use; i++) {
    double t = o->bytes[i] / L->bw_Bps[o->link[i]];
    data = o->sequential ? data + t : MAX(data, t);
  }
  o->time_s = o->latency_s + data;
  o->alg_bw_Bps = o->time_s > 0 ? x->S / o->time_s : 0;
  const double p = x->p;
  double f = 1.0;
  if (x->c->kind == MM_COLL_ALL_REDUCE) f = 2.0 * (p - 1.0) / p;
  else if (x->c->kind == MM_COLL_ALL_GATHER || x->c->kind == MM_COLL_REDUCE_SCATTER || x->c->kind == MM_COLL_ALL_TO_ALL)
    f = (p - 1.0) / p;
  o->bus_bw_Bps = o->alg_bw_Bps * f;
  return TRUE;
}

/* The protocol's parameters (a row of each network's protocol table): per-step latencies on
 * both networks, the per-collective latency of the network the group's slowest hop crosses, and
 * link bytes per payload byte (1 / its efficiency; across nodes the lower of the two networks'). */
static void set_protocol(Ctx *x, MmProtocol proto)
{
  const MmHardware *hw = x->hw;
  const MmProtocolParams *pi = &hw->intra.protocol[proto], *pe = &hw->inter.protocol[proto];
  const gboolean inter = x->sh.nodes > 1;
  x->proto = proto;
  x->ai = pi->latency_s.value;
  x->ae = pe->latency_s.value;
  x->base = inter ? pe->base_latency_s.value : pi->base_latency_s.value;
  x->bw_scale = 1.0 / (inter ? MIN(pe->efficiency.value, hw->intra.present ? pi->efficiency.value : 1.0)
                             : pi->efficiency.value);
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
  x->ph = c->kind == MM_COLL_ALL_REDUCE ? 2.0 : 1.0;
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

/* Whether the automatic choice for @c considers @a. */
static gboolean auto_considers(const MmCollective *c, MmAlgorithm a)
{
  AutoPick ap = algorithms[a].auto_pick;
  return ap == AUTO_YES || (ap == AUTO_IF_ASKED && c->one_shot);
}

gboolean mm_comm_cost(const MmHardware *hw, const MmLinks *links, const MmCollective *c, MmCommCost *out)
{
  Ctx x;
  init_ctx(&x, hw, links, c);
  if (c->degree <= 1 || c->bytes <= 0) {
    memset(out, 0, sizeof *out);
    out->shape = x.sh;
    out->algorithm = c->algorithm == MM_ALGO_AUTO ? MM_ALGO_RING : c->algorithm;
    return TRUE;
  }
  /* the fastest protocol for the forced algorithm, or the fastest (algorithm, protocol) on
   * idle links, as NCCL's and RCCL's tuners pick (the fallback only when nothing else applies).
   * Candidates fill one of two buffers, the best so far kept in the other (no copy per
   * improvement) */
  MmCommCost cand[2];
  int best = -1, cur = 0;
  if (c->algorithm != MM_ALGO_AUTO) {
    for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
      set_protocol(&x, (MmProtocol)pr);
      if (algorithm(&x, c->algorithm, &cand[cur]) && (best < 0 || cand[cur].time_s < cand[best].time_s))
        best = cur, cur ^= 1;
    }
    if (best >= 0) {
      *out = cand[best];
      return TRUE;
    }
  }
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
    set_protocol(&x, (MmProtocol)pr);
    for (int a = MM_ALGO_AUTO + 1; a < MM_ALGO_COUNT; a++) {
      if (!auto_considers(c, (MmAlgorithm)a) || !algorithm(&x, (MmAlgorithm)a, &cand[cur])) continue;
      if (best < 0 || cand[cur].time_s < cand[best].time_s) best = cur, cur ^= 1;
    }
  }
  if (best >= 0) {
    *out = cand[best];
    return c->algorithm == MM_ALGO_AUTO;
  }
  memset(out, 0, sizeof *out);
  gboolean found = FALSE;
  for (int a = MM_ALGO_AUTO + 1; a < MM_ALGO_COUNT && !found; a++) {
    if (algorithms[a].auto_pick != AUTO_FALLBACK) continue;
    for (int pr = 0; pr < MM_PROTO_COUNT && !found; pr++) {
      if (!(algorithms[a].protocols & (1u << pr))) continue;
      set_protocol(&x, (MmProtocol)pr);
      found = algorithm(&x, (MmAlgorithm)a, out); /* when even this fails, @out says so: no time */
    }
  }
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
  MmCollective ar = {.kind = MM_COLL_ALL_REDUCE, .degree = g->degree, .stride = g->stride, .algorithm = MM_ALGO_AUTO,
                     .skew = 1.0};
  if (m == MM_SYNC_DENSE) {
    ar.bytes = rows * (double)g->dim * g->elem_bytes;
    out->value_bytes = ar.bytes;
    mm_comm_cost(hw, links, &ar, &out->reduce);
    out->time_s = out->reduce.time_s;
    return;
  }
  /* indices: int64 per touched row, padded to the largest count (PyTorch blog, step 1) */
  MmCollective ag = {.kind = MM_COLL_ALL_GATHER, .bytes = local * 8.0 * p, .degree = g->degree, .stride = g->stride,
                     .algorithm = MM_ALGO_AUTO, .skew = 1.0};
  if (m == MM_SYNC_HOST) ag.algorithm = ar.algorithm = MM_ALGO_HOST;
  mm_comm_cost(hw, links, &ag, &out->gather);
  out->index_bytes = ag.bytes;
  ar.bytes = out->union_rows * (double)g->dim * g->elem_bytes;
  out->value_bytes = ar.bytes;
  mm_comm_cost(hw, links, &ar, &out->reduce);
  /* de-duplication and the scatter into the union layout: memory passes over the indices and values */
  double dedup_bytes = 2.0 * ag.bytes + 2.0 * local * (double)g->dim * g->elem_bytes;
  const MmKernel scatter = {.kind = MM_KERNEL_ELEMENTWISE, .dtype = MM_DTYPE_FP32, .m = 1,
                            .n = 1, .k = 1, .batch = 1}; /* memory bound */
  out->dedup_bytes = dedup_bytes;
  out->dedup_s = mm_cost_kernel_s(&hw->device, &scatter, 0, dedup_bytes, NULL);
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

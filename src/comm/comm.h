/* comm: collective algorithms on the system's topologies -> per-link traffic and latency of one collective. */
#pragma once

#include "config/config.h"

G_BEGIN_DECLS

/* MmCollKind, MmAlgorithm and their name tables live in config/config.h (configs name them). */

/* The links of one device as resources the engine shares between concurrent
 * transfers: the intra-node port (switch) or one link per peer (full mesh) or two
 * (ring), the device's share of the node's NICs, and the host (PCIe) link.
 * Bandwidths are effective (line rate x efficiency), bytes/s, per direction. */
#define MM_LINKS_MAX (MM_FULL_MESH_MAX_GPUS + 1) /* a full mesh's peers + the NIC + the host link */

typedef enum { MM_LINK_INTRA, MM_LINK_NIC, MM_LINK_HOST } MmLinkKind;

typedef struct {
  uint32_t n;
  double bw_Bps[MM_LINKS_MAX];
  MmLinkKind kind[MM_LINKS_MAX];
  uint32_t intra_first, n_intra; /* switch: 1 port; full mesh: gpus_per_node - 1 (by peer offset); ring: 2 */
  uint32_t nic, host;            /* UINT32_MAX when absent */
  double in_network_bw_Bps;      /* what the switch's reduction delivers per GPU (0: none) */
} MmLinks;

/* The resources of one device of @hw. */
void mm_comm_links(const MmHardware *hw, MmLinks *out);
/* "nvlink", "link+3", "nic", "host" (transfer full) */
char *mm_comm_link_name(const MmHardware *hw, const MmLinks *links, uint32_t r);

/* One collective over a group of devices: members are d0 + j * stride, j < degree.
 * bytes: AllReduce / Broadcast the buffer; AllGather the gathered output; ReduceScatter
 * the input; All2All what one rank sends in all; P2P / permute the message. */
typedef struct {
  MmCollKind kind;
  double bytes;
  int64_t degree;
  int64_t stride;
  MmAlgorithm algorithm; /* MM_ALGO_AUTO: the fastest applicable */
  double skew;           /* All2All: the busiest rank's traffic / the average (uneven MoE routing); <= 1: even */
  gboolean one_shot;     /* AllReduce: the automatic choice may take the serving engines' one-shot kernel */
  /* All2All of MoE tokens sent once per destination node (DeepEP): the copies of one token the
   * bytes count (its top_k), and the most nodes of the group one token reaches (node-limited
   * routing; 0: any). route_top_k 0: every copy travels on its own */
  double route_top_k, route_nodes;
} MmCollective;

typedef enum { MM_SCOPE_INTRA, MM_SCOPE_INTER, MM_SCOPE_MIXED } MmScope;
extern const char *const mm_scope_names[];

/* How a group sits on the system: members per node and nodes. */
typedef struct {
  MmScope scope;
  int64_t per_node;
  int64_t nodes;
} MmGroupShape;

MmGroupShape mm_comm_group_shape(const MmHardware *hw, int64_t degree, int64_t stride);

/* Whether a group of @degree members @stride devices apart (starting at a multiple of
 * stride x degree) sits on @hw's nodes evenly: inside one node, one member per node, or
 * whole nodes. The one node-layout rule: levels, pipeline stages and `op` groups use it. */
gboolean mm_comm_group_even(const MmHardware *hw, int64_t degree, int64_t stride);

/* What one collective costs one member device: latency, and the bytes it pushes
 * through each of its links. Alone on idle links it takes latency + max over links
 * of bytes / bandwidth (pipelined algorithms), or latency + their sum (sequential
 * phases). The engine shares links between concurrent collectives. */
/* MmProtocol (simple, LL) and its parameters live in config/config.h (system files give them). */

typedef struct {
  MmAlgorithm algorithm; /* the one chosen */
  MmProtocol protocol;
  MmGroupShape shape;
  double latency_s;
  uint32_t n_use;
  uint32_t link[MM_LINKS_MAX];
  double bytes[MM_LINKS_MAX]; /* at the link's bandwidth */
  gboolean sequential;
  double time_s;      /* on idle links */
  double alg_bw_Bps;  /* nccl-tests conventions: bytes / time */
  double bus_bw_Bps;  /* alg_bw x (2(p-1)/p AllReduce, (p-1)/p AllGather/ReduceScatter/All2All, 1 otherwise) */
} MmCommCost;

/* Costs @c on @hw. Returns FALSE when a forced algorithm does not apply to the
 * group (then @out holds the automatic choice). */
gboolean mm_comm_cost(const MmHardware *hw, const MmLinks *links, const MmCollective *c, MmCommCost *out);

/* Whether @a can run @c's kind on @c's group on @hw. */
gboolean mm_comm_applies(const MmHardware *hw, const MmLinks *links, const MmCollective *c, MmAlgorithm a);

/* ---- sparse gradient synchronization (embedding tables) ----------------- */

typedef enum { MM_SYNC_DENSE, MM_SYNC_SPARSE, MM_SYNC_HOST, MM_SYNC_COUNT } MmSparseMethod;
extern const char *const mm_sparse_method_names[];

/* An embedding gradient to synchronize over a data-parallel group. */
typedef struct {
  int64_t rows, dim;
  double elem_bytes;       /* gradient dtype */
  double touched_frac;     /* rows one rank touches per iteration */
  double overlap;          /* fraction of a rank's rows also touched by the others (0: disjoint, 1: identical) */
  int64_t degree, stride;  /* the group */
} MmSparseGrad;

typedef struct {
  MmSparseMethod method;
  double time_s;
  double index_bytes;  /* all-gathered indices (padded to the largest count) */
  double value_bytes;  /* the all-reduced values */
  double union_rows;   /* distinct rows after de-duplication */
  double dedup_s;      /* de-duplication and scatter into the union layout (GPU, or the CPU for host) */
  double dedup_bytes;  /* the memory traffic of that pass */
  MmCommCost gather;   /* the index AllGather (dense: none) */
  MmCommCost reduce;   /* the value AllReduce */
} MmSparseCost;

/* Dense: AllReduce of the whole table gradient. Sparse (PyTorch blog): all-gather of
 * padded local indices, de-duplicate into the union, AllReduce of the union's rows.
 * Host: the sparse exchange staged through host memory (Gloo). */
void mm_comm_sparse_cost(const MmHardware *hw, const MmLinks *links, const MmSparseGrad *g, MmSparseMethod m,
                         MmSparseCost *out);
/* The cheapest of the three. */
MmSparseMethod mm_comm_sparse_best(const MmHardware *hw, const MmLinks *links, const MmSparseGrad *g,
                                   MmSparseCost *out);

G_END_DECLS

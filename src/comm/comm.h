/* comm: collective algorithms on the system's networks -> time of one collective. */
#pragma once

#include "config/config.h"

G_BEGIN_DECLS

typedef enum {
  MM_COLL_ALL_REDUCE,
  MM_COLL_ALL_GATHER,
  MM_COLL_REDUCE_SCATTER,
  MM_COLL_ALL_TO_ALL,
  MM_COLL_P2P,
  MM_COLL_COUNT
} MmCollKind;

extern const char *const mm_coll_names[]; /* "all_reduce", ... (JSON keys) */

/* One collective over a group of devices: members are d0 + j * stride, j < degree.
 * bytes: AllReduce the buffer; AllGather the gathered output; ReduceScatter the
 * input; All2All what one rank sends in all (itself included); P2P the message. */
typedef struct {
  MmCollKind kind;
  double bytes;
  int64_t degree;
  int64_t stride;
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

/* The terms behind a collective's time. */
typedef struct {
  double time_s;
  double latency_s;     /* alpha terms */
  double intra_bw_Bps;  /* effective bandwidths used (0 if the level is not crossed) */
  double inter_bw_Bps;
  MmGroupShape shape;
  const char *algorithm; /* "ring", "hierarchical", "pairwise", "direct" */
} MmCommCost;

/* Alpha-beta cost of @c on @hw: ring AllGather / ReduceScatter move (p-1)/p of
 * the buffer, ring AllReduce 2(p-1)/p, each step paying the level's latency;
 * groups spanning nodes use the hierarchical form (intra reduce-scatter, inter
 * phase on 1/k of the data, intra all-gather); All2All is bound by the slower
 * of its intra- and inter-node shares (MAD-Max Sec. IV-C). */
void mm_comm_cost(const MmHardware *hw, const MmCollective *c, MmCommCost *out);

static inline double mm_comm_time(const MmHardware *hw, const MmCollective *c)
{
  MmCommCost cc;
  mm_comm_cost(hw, c, &cc);
  return cc.time_s;
}

G_END_DECLS

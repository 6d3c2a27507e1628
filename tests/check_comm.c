/* check_comm: collective algorithms, topologies, selection, sparse sync, and the measured curves. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "comm/comm.h"
#include "report/report.h"
#include "testutil.h"
#include "validate/validate.h"

static MmHardware *load_hw(const char *rel)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *p = rel[0] == '{' ? mm_test_write("hw.json", rel) : mm_test_src(rel);
  MmHardware *h = mm_hardware_load(p, &error);
  ck_assert_msg(h != NULL, "%s", error ? error->message : "");
  return h;
}

static MmCommCost cost(const MmHardware *hw, MmCollKind kind, double bytes, int64_t degree, int64_t stride,
                       MmAlgorithm algo)
{
  MmLinks links;
  mm_comm_links(hw, &links);
  MmCollective c = {.kind = kind, .bytes = bytes, .degree = degree, .stride = stride, .algorithm = algo, .skew = 1.0};
  MmCommCost o;
  ck_assert(mm_comm_cost(hw, &links, &c, &o));
  return o;
}

static double link_bytes(const MmCommCost *o, uint32_t link)
{
  for (uint32_t i = 0; i < o->n_use; i++)
    if (o->link[i] == link) return o->bytes[i];
  return 0;
}

#define GiB (1024.0 * 1024.0 * 1024.0)

START_TEST(test_mesh_pair_gets_one_link)
{
  /* MI300X: 7 xGMI links; a pair uses one of them, the 8-GPU group all seven */
  g_autoptr(MmHardware) hw = load_hw("hardware/mi300x-8.json");
  MmCommCost pair = cost(hw, MM_COLL_ALL_REDUCE, 4 * GiB, 2, 1, MM_ALGO_AUTO);
  MmCommCost all = cost(hw, MM_COLL_ALL_REDUCE, 4 * GiB, 8, 1, MM_ALGO_AUTO);
  double ratio = pair.bus_bw_Bps / all.bus_bw_Bps;
  ck_assert_msg(ratio > 1.0 / 7.0 * 0.85 && ratio < 1.0 / 7.0 * 1.15, "pair/all = %.3f", ratio);
  ck_assert_uint_eq(pair.n_use, 1);
  ck_assert_uint_eq(all.n_use, 7);
  /* a pair at distance 4 uses the link at that offset */
  MmCommCost far = cost(hw, MM_COLL_ALL_REDUCE, 4 * GiB, 2, 4, MM_ALGO_AUTO);
  ck_assert_uint_eq(far.link[0], 3);
}
END_TEST

START_TEST(test_switch_pair_gets_full_port)
{
  /* through NVSwitch a pair is as fast per rank as the whole node (ring bus bandwidth) */
  g_autoptr(MmHardware) hw = load_hw("hardware/dgx-h100-2048.json");
  MmCommCost pair = cost(hw, MM_COLL_ALL_REDUCE, 4 * GiB, 2, 1, MM_ALGO_RING);
  MmCommCost all = cost(hw, MM_COLL_ALL_REDUCE, 4 * GiB, 8, 1, MM_ALGO_RING);
  ck_assert_double_gt(pair.bus_bw_Bps / all.bus_bw_Bps, 0.95);
}
END_TEST

START_TEST(test_volumes_closed_form)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/dgx-a100-2048.json");
  MmLinks L;
  mm_comm_links(hw, &L);
  double S = GiB;
  MmCommCost ar = cost(hw, MM_COLL_ALL_REDUCE, S, 8, 1, MM_ALGO_RING);
  ck_assert_double_eq_tol(link_bytes(&ar, L.intra_first), 2.0 * 7.0 / 8.0 * S, 1);
  MmCommCost ag = cost(hw, MM_COLL_ALL_GATHER, S, 8, 1, MM_ALGO_RING);
  ck_assert_double_eq_tol(link_bytes(&ag, L.intra_first), 7.0 / 8.0 * S, 1);
  /* 64 ranks over 8 nodes: the NIC carries 2(p-1)/p S / 8, NVLink 2(p-1)/p S */
  MmCommCost mixed = cost(hw, MM_COLL_ALL_REDUCE, S, 64, 1, MM_ALGO_RING);
  ck_assert_int_eq(mixed.shape.scope, MM_SCOPE_MIXED);
  ck_assert_double_eq_tol(link_bytes(&mixed, L.nic), 2.0 * 63.0 / 64.0 * S / 8.0, 1);
  /* time on idle links: latency + the slowest link */
  double t = MAX(link_bytes(&mixed, L.nic) / L.bw_Bps[L.nic], link_bytes(&mixed, L.intra_first) / L.bw_Bps[L.intra_first]);
  ck_assert_double_eq_tol(mixed.time_s, mixed.latency_s + t, 1e-12);
  /* All2All over 2 nodes of 8: 7/16 of the buffer stays in the node, 8/16 leaves through the NIC */
  MmCommCost a2a = cost(hw, MM_COLL_ALL_TO_ALL, S, 16, 1, MM_ALGO_AUTO);
  ck_assert_int_eq(a2a.algorithm, MM_ALGO_PAIRWISE);
  ck_assert_double_eq_tol(link_bytes(&a2a, L.nic), 8.0 / 16.0 * S, 1);
  ck_assert_double_eq_tol(link_bytes(&a2a, L.intra_first), 7.0 / 16.0 * S, 1);
  /* uneven routing: the busiest rank moves skew x the average */
  MmCollective sk = {.kind = MM_COLL_ALL_TO_ALL, .bytes = S, .degree = 16, .stride = 1, .algorithm = MM_ALGO_AUTO,
                     .skew = 2.0};
  MmCommCost a2s;
  mm_comm_cost(hw, &L, &sk, &a2s);
  ck_assert_double_eq_tol(link_bytes(&a2s, L.nic), 2.0 * link_bytes(&a2a, L.nic), 1);
  /* hierarchical phases run one after the other */
  MmCommCost h = cost(hw, MM_COLL_ALL_REDUCE, S, 64, 1, MM_ALGO_HIERARCHICAL);
  ck_assert(h.sequential);
  double sum = link_bytes(&h, L.nic) / L.bw_Bps[L.nic] + link_bytes(&h, L.intra_first) / L.bw_Bps[L.intra_first];
  ck_assert_double_eq_tol(h.time_s, h.latency_s + sum, 1e-12);
}
END_TEST

/* DeepEP-style dispatch: a token's payload crosses the network once per remote node holding one
 * of its experts and is forwarded inside the node; node-limited routing caps those nodes. */
START_TEST(test_per_node_dispatch)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/dgx-h100-2048.json");
  MmLinks L;
  mm_comm_links(hw, &L);
  const double S = 256.0 * 1024 * 1024, k = 8; /* 64 ranks: 8 nodes of 8; top_k 8 */
  MmCollective c = {.kind = MM_COLL_ALL_TO_ALL, .bytes = S, .degree = 64, .stride = 1, .algorithm = MM_ALGO_AUTO,
                    .skew = 1.0};
  MmCommCost plain, node, limited, one, inside;
  ck_assert(mm_comm_cost(hw, &L, &c, &plain));
  c.route_top_k = k;
  ck_assert(mm_comm_cost(hw, &L, &c, &node));
  c.route_nodes = 4;
  ck_assert(mm_comm_cost(hw, &L, &c, &limited));
  /* each copy on its own: 56 of 64 shares leave the node */
  ck_assert_double_eq_tol(link_bytes(&plain, L.nic), 56.0 / 64.0 * S, 1);
  /* once per node: the 8 experts fall on 8 (1 - (7/8)^8) = 5.25 distinct nodes, 7/8 of them remote, one
   * token payload (S / 8) each */
  const double d8 = 8.0 * (1.0 - pow(7.0 / 8.0, 8)), d4 = 4.0 * (1.0 - pow(3.0 / 4.0, 8));
  ck_assert_double_eq_tol(link_bytes(&node, L.nic), S / k * d8 * 7.0 / 8.0, 1);
  ck_assert_double_eq_tol(link_bytes(&limited, L.nic), S / k * d4 * 7.0 / 8.0, 1);
  ck_assert_double_lt(link_bytes(&limited, L.nic), 0.46 * link_bytes(&plain, L.nic)); /* 3.6 of 8 copies */
  /* the node's links carry the local copies and forward the remote ones to their GPUs */
  const double intra = (7.0 / 64.0 + 7.0 / 8.0 * 7.0 / 8.0) * S;
  ck_assert_double_eq_tol(link_bytes(&node, L.intra_first), intra, 1);
  ck_assert_double_eq_tol(link_bytes(&limited, L.intra_first), intra, 1);
  ck_assert_double_lt(limited.time_s, node.time_s);
  ck_assert_double_lt(node.time_s, plain.time_s);
  /* one expert per token: one payload per remote node either way */
  c.route_top_k = 1;
  c.route_nodes = 0;
  ck_assert(mm_comm_cost(hw, &L, &c, &one));
  ck_assert_double_eq_tol(link_bytes(&one, L.nic), link_bytes(&plain, L.nic), 1);
  /* inside one node nothing changes */
  c.route_top_k = k;
  c.degree = 8;
  ck_assert(mm_comm_cost(hw, &L, &c, &inside));
  MmCommCost in_plain = cost(hw, MM_COLL_ALL_TO_ALL, S, 8, 1, MM_ALGO_AUTO);
  ck_assert_double_eq(inside.time_s, in_plain.time_s);
}
END_TEST

START_TEST(test_in_network_reduction)
{
  /* NVLS: each GPU sends S into the switch and receives S, at the in-network efficiency */
  g_autoptr(MmHardware) hw = load_hw("hardware/dgx-h100-2048.json");
  MmCommCost o = cost(hw, MM_COLL_ALL_REDUCE, 16 * GiB, 8, 1, MM_ALGO_IN_NETWORK);
  double algbw = 450e9 * hw->intra.in_network_efficiency.value;
  ck_assert_double_eq_tol(o.alg_bw_Bps / algbw, 1.0, 0.01);
  /* A100 has no NVLS: forcing it does not apply, and auto never picks it */
  g_autoptr(MmHardware) a100 = load_hw("hardware/dgx-a100-2048.json");
  MmLinks L;
  mm_comm_links(a100, &L);
  MmCollective c = {.kind = MM_COLL_ALL_REDUCE, .bytes = GiB, .degree = 8, .stride = 1,
                    .algorithm = MM_ALGO_IN_NETWORK, .skew = 1.0};
  ck_assert(!mm_comm_applies(a100, &L, &c, MM_ALGO_IN_NETWORK));
  MmCommCost o2;
  ck_assert(!mm_comm_cost(a100, &L, &c, &o2)); /* falls back to auto, says so */
  ck_assert_int_ne(o2.algorithm, MM_ALGO_IN_NETWORK);
}
END_TEST

START_TEST(test_auto_picks_fastest)
{
  g_autoptr(MmHardware) hw = load_hw("hardware/dgx-a100-2048.json");
  MmLinks L;
  mm_comm_links(hw, &L);
  static const double sizes[] = {1024, 1 << 20, 64.0 * (1 << 20), 4 * GiB};
  static const int64_t groups[][2] = {{8, 1}, {64, 1}, {256, 8}, {2048, 1}};
  for (guint s = 0; s < G_N_ELEMENTS(sizes) * 2; s++) {
    for (guint g = 0; g < G_N_ELEMENTS(groups); g++) {
      /* the second pass lets auto take the serving engines' one-shot kernel too */
      const gboolean one_shot = s >= G_N_ELEMENTS(sizes);
      MmCollective c = {.kind = MM_COLL_ALL_REDUCE, .bytes = sizes[s % G_N_ELEMENTS(sizes)], .degree = groups[g][0],
                        .stride = groups[g][1], .algorithm = MM_ALGO_AUTO, .skew = 1.0, .one_shot = one_shot};
      MmCommCost best;
      mm_comm_cost(hw, &L, &c, &best);
      for (int a = MM_ALGO_RING; a < MM_ALGO_COUNT; a++) {
        if (a == MM_ALGO_HOST || a == MM_ALGO_HIERARCHICAL || (a == MM_ALGO_ONE_SHOT && !one_shot) ||
            !mm_comm_applies(hw, &L, &c, (MmAlgorithm)a))
          continue;
        c.algorithm = (MmAlgorithm)a;
        MmCommCost o;
        mm_comm_cost(hw, &L, &c, &o);
        ck_assert_double_le(best.time_s, o.time_s);
        c.algorithm = MM_ALGO_AUTO;
      }
    }
  }
  /* latency-bound small AllReduce across 256 nodes: a logarithmic algorithm, not a 2048-rank ring */
  MmCommCost small = cost(hw, MM_COLL_ALL_REDUCE, 1024, 2048, 1, MM_ALGO_AUTO);
  ck_assert(small.algorithm == MM_ALGO_TREE || small.algorithm == MM_ALGO_HALVING_DOUBLING);
  MmCommCost ring = cost(hw, MM_COLL_ALL_REDUCE, 1024, 2048, 1, MM_ALGO_RING);
  ck_assert_double_lt(10 * small.time_s, ring.time_s);
}
END_TEST

START_TEST(test_one_shot)
{
  /* the serving engines' custom kernel: one call of fixed cost in which every GPU writes its
   * buffer into each of the 7 peers' at the LL fraction of its NVSwitch port */
  g_autoptr(MmHardware) hw = load_hw("hardware/dgx-h100-2048.json");
  MmLinks L;
  mm_comm_links(hw, &L);
  const double S = 32768;
  MmCommCost o = cost(hw, MM_COLL_ALL_REDUCE, S, 8, 1, MM_ALGO_ONE_SHOT);
  const double port = 18 * 25e9 * hw->intra.efficiency.value; /* 18 NVLink4 links of 25 GB/s */
  ck_assert_double_eq_tol(o.time_s, hw->intra.one_shot_latency_s.value + 7 * S / (port * hw->intra.protocol[MM_PROTO_LL].efficiency.value), 1e-12);
  /* SGLang's 8 x H100 custom all-reduce (PR 2904): 5.7 us at 4 KiB, 7.8 us at 32 KiB */
  MmCommCost o4 = cost(hw, MM_COLL_ALL_REDUCE, 4096, 8, 1, MM_ALGO_ONE_SHOT);
  ck_assert_double_eq_tol(o4.time_s, 5.7e-6, 0.1 * 5.7e-6);
  ck_assert_double_eq_tol(o.time_s, 7.8e-6, 0.1 * 7.8e-6);
  /* auto takes it only when allowed, for small buffers; large ones stay with NCCL */
  MmCollective c = {.kind = MM_COLL_ALL_REDUCE, .bytes = S, .degree = 8, .stride = 1, .algorithm = MM_ALGO_AUTO,
                    .skew = 1.0};
  MmCommCost nccl, custom, big;
  mm_comm_cost(hw, &L, &c, &nccl);
  ck_assert_int_ne(nccl.algorithm, MM_ALGO_ONE_SHOT);
  c.one_shot = TRUE;
  mm_comm_cost(hw, &L, &c, &custom);
  ck_assert_int_eq(custom.algorithm, MM_ALGO_ONE_SHOT);
  ck_assert_double_lt(3 * custom.time_s, nccl.time_s);
  c.bytes = 256.0 * (1 << 20);
  mm_comm_cost(hw, &L, &c, &big);
  ck_assert_int_ne(big.algorithm, MM_ALGO_ONE_SHOT);
  /* inside one node only (P2P stores over NVLink / xGMI) */
  c.bytes = S;
  c.degree = 16;
  ck_assert(!mm_comm_applies(hw, &L, &c, MM_ALGO_ONE_SHOT));
  mm_comm_cost(hw, &L, &c, &big);
  ck_assert_int_ne(big.algorithm, MM_ALGO_ONE_SHOT);
  /* MI300X's xGMI mesh: the bytes spread over the seven peer links */
  g_autoptr(MmHardware) mi = load_hw("hardware/mi300x-8.json");
  MmCommCost m = cost(mi, MM_COLL_ALL_REDUCE, S, 8, 1, MM_ALGO_ONE_SHOT);
  ck_assert_uint_eq(m.n_use, 7);
  ck_assert_double_eq_tol(m.bytes[0], S / mi->intra.protocol[MM_PROTO_LL].efficiency.value, 1e-6);
}
END_TEST

/* A full mesh of @g GPUs (one node, each GPU with a link to every peer). */
static char *mesh_system(int g)
{
  g_autofree char *dev = mm_test_src("hardware/devices/mi300x.json");
  return g_strdup_printf("{\"name\":\"mesh\",\"device\":\"%s\",\"gpus_per_node\":%d,\"nodes\":2,"
                         "\"intra_node\":{\"topology\":\"full_mesh\",\"links_per_gpu\":%d,\"link_bw_GBps\":64},"
                         "\"inter_node\":{\"topology\":\"fat_tree\",\"nics_per_gpu\":1,\"nic_bw_Gbps\":400}}",
                         dev, g, g - 1);
}

START_TEST(test_large_full_mesh)
{
  /* 40 GPUs: the traffic to the peer at offset 39 takes its own mesh link, not the NIC (the link
   * arrays used to hold 38 peers); 48 GPUs used to abort */
  static const int sizes[] = {40, 48, MM_FULL_MESH_MAX_GPUS};
  for (guint i = 0; i < G_N_ELEMENTS(sizes); i++) {
    const int g = sizes[i];
    g_autofree char *sys = mesh_system(g);
    g_autoptr(MmHardware) hw = load_hw(sys);
    MmLinks L;
    mm_comm_links(hw, &L);
    ck_assert_uint_eq(L.n_intra, (uint32_t)(g - 1));
    ck_assert_uint_eq(L.n, (uint32_t)(g + 1));
    for (uint32_t r = L.intra_first; r < L.intra_first + L.n_intra; r++) ck_assert_int_eq(L.kind[r], MM_LINK_INTRA);
    ck_assert_int_eq(L.kind[L.nic], MM_LINK_NIC);
    ck_assert_int_eq(L.kind[L.host], MM_LINK_HOST);
    /* the whole node: every mesh link (the last one to the peer at offset g - 1), each with 1/(g-1) of
     * the traffic, nothing on the NIC or the host link */
    MmCommCost all = cost(hw, MM_COLL_ALL_GATHER, GiB, g, 1, MM_ALGO_RING);
    ck_assert_uint_eq(all.n_use, (uint32_t)(g - 1));
    ck_assert_double_gt(link_bytes(&all, L.intra_first + (uint32_t)(g - 2)), 0);
    ck_assert_double_eq(link_bytes(&all, L.nic), 0);
    ck_assert_double_eq(link_bytes(&all, L.host), 0);
    for (uint32_t u = 0; u < all.n_use; u++) {
      ck_assert_int_eq(L.kind[all.link[u]], MM_LINK_INTRA);
      ck_assert_double_eq_tol(all.bytes[u], (g - 1.0) / g * GiB / (g - 1.0), 1);
    }
  }
  /* one more GPU than the link arrays hold: a load error naming the key, not an abort */
  g_autofree char *sys = mesh_system(MM_FULL_MESH_MAX_GPUS + 1);
  g_autofree char *p = mm_test_write("bigmesh.json", sys);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) none = mm_hardware_load(p, &error);
  ck_assert_ptr_null(none);
  ck_assert(g_error_matches(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_RANGE));
  ck_assert_msg(strstr(error->message, "bigmesh.json: $.gpus_per_node: ") != NULL, "%s", error->message);
}
END_TEST

START_TEST(test_torus)
{
  g_autofree char *dev = mm_test_src("hardware/devices/mi210.json");
  g_autofree char *sys = g_strdup_printf(
    "{\"name\":\"torus\",\"device\":\"%s\",\"gpus_per_node\":1,\"nodes\":128,\"inter_node\":{\"topology\":\"torus2d\","
    "\"dims\":[8,16],\"nics_per_node\":4,\"nic_bw_Gbps\":200,\"latency_us\":0.7,\"base_latency_us\":0}}",
    dev);
  g_autoptr(MmHardware) hw = load_hw(sys);
  ck_assert_uint_eq(hw->inter.n_dims, 2);
  MmLinks L;
  mm_comm_links(hw, &L);
  double S = GiB;
  MmCommCost o = cost(hw, MM_COLL_ALL_REDUCE, S, 128, 1, MM_ALGO_RING);
  /* dimension rings: 2 (7/8) S then 2 (15/16) S/8, each on two of the four links */
  double link = 200e9 / 8.0;
  double expect = (2.0 * 7.0 / 8.0 * S + 2.0 * 15.0 / 16.0 * S / 8.0) / (2.0 * link);
  ck_assert_double_eq_tol(o.time_s - o.latency_s, expect, expect * 1e-9);
  ck_assert_double_eq_tol(o.latency_s, 2.0 * (7 + 15) * 0.7e-6, 1e-12);
  /* a pairwise All2All over the whole torus: every remote byte crosses the mean shortest-path
   * distance, (8^2/4 x 16 + 16^2/4 x 8) / 127 links, all four links of each node loaded alike */
  MmCommCost a = cost(hw, MM_COLL_ALL_TO_ALL, S, 128, 1, MM_ALGO_PAIRWISE);
  const double hops = (16.0 * 16.0 + 64.0 * 8.0) / 127.0;
  double a_expect = 127.0 / 128.0 * S * hops / (4.0 * link);
  ck_assert_double_eq_tol(a.time_s - a.latency_s, a_expect, a_expect * 1e-9);
  /* a group of 8 nodes is not the whole torus: no forwarding charged */
  MmCommCost a8 = cost(hw, MM_COLL_ALL_TO_ALL, S, 8, 1, MM_ALGO_PAIRWISE);
  double a8_expect = 7.0 / 8.0 * S / (4.0 * link);
  ck_assert_double_eq_tol(a8.time_s - a8.latency_s, a8_expect, a8_expect * 1e-9);
  /* the dims must multiply to the node count */
  g_autofree char *bad = g_strdup_printf(
    "{\"name\":\"torus\",\"device\":\"%s\",\"gpus_per_node\":1,\"nodes\":100,\"inter_node\":{\"topology\":\"torus2d\","
    "\"dims\":[8,16],\"nics_per_node\":4,\"nic_bw_Gbps\":200}}",
    dev);
  g_autofree char *bp = mm_test_write("badtorus.json", bad);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) none = mm_hardware_load(bp, &error);
  ck_assert_ptr_null(none);
  ck_assert(g_error_matches(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_INCONSISTENT));
}
END_TEST

START_TEST(test_sparse_allreduce)
{
  /* the PyTorch blog's case: 5e6 x 2048 fp32 on 8 H100, ~1% of rows per rank */
  g_autoptr(MmHardware) hw = load_hw("hardware/dgx-h100-2048.json");
  MmLinks L;
  mm_comm_links(hw, &L);
  MmSparseGrad g = {5000000, 2048, 4, 0.01, 0.0, 8, 1};
  MmSparseCost dense, sparse, host;
  mm_comm_sparse_cost(hw, &L, &g, MM_SYNC_DENSE, &dense);
  mm_comm_sparse_cost(hw, &L, &g, MM_SYNC_SPARSE, &sparse);
  mm_comm_sparse_cost(hw, &L, &g, MM_SYNC_HOST, &host);
  ck_assert_double_eq_tol(sparse.union_rows, 8 * 50000.0, 1);        /* disjoint rows */
  ck_assert_double_eq_tol(dense.value_bytes, 5e6 * 2048 * 4, 1);
  ck_assert_double_lt(sparse.time_s, dense.time_s);                    /* the blog's final result */
  ck_assert_double_gt(host.time_s, sparse.time_s);                     /* host staging is the slow path */
  MmSparseCost best;
  ck_assert_int_eq(mm_comm_sparse_best(hw, &L, &g, &best), MM_SYNC_SPARSE);
  /* every row touched: the dense AllReduce wins */
  g.touched_frac = 1.0;
  g.overlap = 1.0;
  ck_assert_int_eq(mm_comm_sparse_best(hw, &L, &g, &best), MM_SYNC_DENSE);
}
END_TEST

/* The measured curves of public.json: median |error| of bus bandwidth <= 15% for >= 1 MiB. */
START_TEST(test_measured_curves)
{
  g_autofree char *p = mm_test_src("configs/validation/collectives.json");
  g_autoptr(GError) error = NULL;
  g_autoptr(MmValidation) v = mm_validation_run(p, &error);
  ck_assert_msg(v != NULL, "%s", error ? error->message : "");
  ck_assert_uint_ge(v->rows->len, 100);
  ck_assert_msg(v->median_abs_error <= 0.15, "median |error| %.1f%%", 100 * v->median_abs_error);
  /* every platform family on its own, too */
  g_autoptr(GHashTable) groups = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < v->rows->len; i++) {
    const MmValidationRow *r = g_ptr_array_index(v->rows, i);
    g_hash_table_add(groups, r->group);
  }
  ck_assert_uint_ge(g_hash_table_size(groups), 5);
}
END_TEST

/* MAD-Max: moving DLRM-A from DGX H100 to an H100 SuperPOD (inter-node bandwidth alone) gives 1.82x. */
START_TEST(test_superpod_speedup)
{
  g_autoptr(MmSimulation) dgx = mm_test_sim_ok("models/dlrm-a.json", "hardware/dgx-h100-2048.json",
                                               "configs/dlrm-pretrain-ddp-mp.json", 32);
  g_autoptr(MmSimulation) pod = mm_test_sim_ok("models/dlrm-a.json", "hardware/h100-superpod-256.json",
                                               "configs/dlrm-pretrain-ddp-mp.json", 0);
  ck_assert_int_eq(dgx->scenario->devices, pod->scenario->devices);
  double speedup = dgx->metrics.iteration_time_s / pod->metrics.iteration_time_s;
  ck_assert_msg(speedup > 1.6 && speedup < 2.1, "speedup %.2f", speedup);
  /* the All2All is what got faster */
  ck_assert_double_gt(dgx->metrics.comm_by_kind_s[MM_COLL_ALL_TO_ALL], 3 * pod->metrics.comm_by_kind_s[MM_COLL_ALL_TO_ALL]);
}
END_TEST

/* TP all-reduces (intra-node stream) and FSDP all-gathers spanning two nodes (inter-node
 * stream, but their ring also crosses NVLink) share the NVLink port and slow each other. */
START_TEST(test_contention_in_a_run)
{
  const char *model = "{\"name\":\"t\",\"seq_len\":2048,\"blocks\":[{\"kind\":\"transformer\",\"count\":4,"
                      "\"hidden\":4096,\"heads\":32,\"ffn\":16384}]}";
  const char *cfg = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":32,\"parallelism\":{\"default\":"
                    "[{\"strategy\":\"tp\",\"degree\":2},{\"strategy\":\"fsdp\",\"degree\":8}]}}";
  g_autoptr(MmSimulation) x = mm_test_sim_ok(model, "hardware/dgx-a100-2048.json", cfg, 2);
  g_autofree MmTime *t0 = g_new(MmTime, 2 * x->plan->programs[0].n_ops);
  mm_engine_class_times(x->engine, 0, t0, t0 + x->plan->programs[0].n_ops);
  guint slowed = 0;
  for (uint32_t i = 0; i < x->plan->programs[0].n_ops; i++) {
    const MmOpInfo *in = &x->plan->programs[0].info[i];
    if (in->what != MM_OP_COLLECTIVE) continue;
    double took = mm_time_to_s(t0[x->plan->programs[0].n_ops + i] - t0[i]);
    ck_assert_double_ge(took, in->time_s * (1 - 1e-9)); /* never faster than alone */
    if (took > 1.2 * in->time_s) slowed++;
  }
  ck_assert_uint_gt(slowed, 0);
}
END_TEST

START_TEST(test_sparse_grad_sync_in_a_run)
{
  const char *model = "{\"name\":\"e\",\"seq_len\":512,\"blocks\":[{\"kind\":\"token_embedding\",\"vocab\":2000000,"
                      "\"hidden\":1024},{\"kind\":\"transformer\",\"count\":2,\"hidden\":1024,\"heads\":8,\"ffn\":4096},"
                      "{\"kind\":\"lm_head\",\"vocab\":32000,\"hidden\":1024}]}";
  g_autofree char *hw = mm_test_node8();
  const char *dense = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,\"parallelism\":{\"default\":"
                      "[{\"strategy\":\"ddp\",\"degree\":8}]}}";
  const char *sparse = "{\"name\":\"c\",\"task\":\"pretrain\",\"global_batch\":64,\"parallelism\":{\"default\":"
                       "[{\"strategy\":\"ddp\",\"degree\":8}],\"token_embedding\":[{\"strategy\":\"ddp\",\"degree\":8,"
                       "\"grad_sync\":\"sparse\"}]}}";
  g_autoptr(MmSimulation) a = mm_test_sim_ok(model, hw, dense, 0);
  g_autoptr(MmSimulation) b = mm_test_sim_ok(model, hw, sparse, 0);
  guint gathers = 0;
  for (uint32_t i = 0; i < b->plan->programs[0].n_ops; i++)
    gathers += b->plan->programs[0].info[i].what == MM_OP_COLLECTIVE && b->plan->programs[0].info[i].coll == MM_COLL_ALL_GATHER;
  ck_assert_uint_eq(gathers, 1); /* the index exchange */
  ck_assert_double_lt(b->metrics.comm_s, a->metrics.comm_s);
  ck_assert_double_lt(b->metrics.iteration_time_s, a->metrics.iteration_time_s);
}
END_TEST

START_TEST(test_cli_op_collective)
{
  const char *args[] = {"op", "collective", "--kind", "all_reduce", "--bytes", "1GiB", "--hardware",
                        "hardware/dgx-h100-2048.json", "--json", "-", NULL};
  g_autofree char *out = NULL, *err = NULL;
  ck_assert_int_eq(mm_test_cli(args, &out, &err), 0);
  cJSON *root = cJSON_Parse(out);
  ck_assert_ptr_nonnull(root);
  static const char *const keys[] = {"time_s", "alg_bw_GBps", "bus_bw_GBps"};
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
    ck_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(root, keys[i])));
  ck_assert(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "algorithm")));
  cJSON_Delete(root);
  const char *sweep[] = {"op", "collective", "--kind", "all_gather", "--sweep", "8B:16GiB", "--hardware",
                         "hardware/mi300x-8.json", "--json", "-", NULL};
  g_autofree char *o2 = NULL;
  ck_assert_int_eq(mm_test_cli(sweep, &o2, NULL), 0);
  cJSON *r2 = cJSON_Parse(o2);
  ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r2, "points")), 32);
  cJSON_Delete(r2);
  static const char *const bad[][10] = {
    {"op", "collective", "--kind", "allreduce", "--bytes", "1GiB", "--hardware", "hardware/mi300x-8.json", NULL},
    {"op", "collective", "--kind", "all_reduce", "--bytes", "lots", "--hardware", "hardware/mi300x-8.json", NULL},
    {"op", "collective", "--kind", "all_reduce", "--bytes", "1GiB", "--hardware", "hardware/mi300x-8.json", "--ranks", "9"},
    {"op", "collective", "--kind", "all_reduce", "--bytes", "1GiB", "--hardware", "hardware/mi300x-8.json",
     "--algorithm", "in_network"},
    {"op", "frobnicate", NULL},
  };
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *e = NULL;
    ck_assert_msg(mm_test_cli(bad[i], NULL, &e) == 1, "case %u", i);
  }
}
END_TEST

/* ---- hardware files: protocols, provenance, fits ------------------------------------------- */

/* A one-node system of 8 A100 whose intra_node object is @intra (JSON members, no braces). */
static char *node_with(const char *intra, const char *inter)
{
  g_autofree char *dev = mm_test_src("hardware/devices/a100-80gb.json");
  return g_strdup_printf("{\"name\":\"n\",\"device\":\"%s\",\"gpus_per_node\":8,\"nodes\":%d,"
                         "\"intra_node\":{\"topology\":\"switch\",\"links_per_gpu\":12,\"link_bw_GBps\":25%s%s}%s%s%s}",
                         dev, inter ? 2 : 1, intra[0] ? "," : "", intra, inter ? ",\"inter_node\":{\"topology\":"
                         "\"fat_tree\",\"nics_per_gpu\":1,\"nic_bw_Gbps\":200," : "", inter ? inter : "", inter ? "}" : "");
}

/* @text with each keys[i][0] replaced by keys[i][1]. (transfer full) */
static char *subst(const char *text, const char *const keys[][2], guint n)
{
  if (!text) return NULL;
  char *s = g_strdup(text);
  for (guint k = 0; k < n; k++) {
    g_auto(GStrv) parts = g_strsplit(s, keys[k][0], -1);
    g_free(s);
    s = g_strjoinv(keys[k][1], parts);
  }
  return s;
}

typedef struct {
  const char *what, *intra, *inter;
  MmConfigError code;
  const char *where; /* in the message, after the file name */
} BadNet;

static const BadNet bad_nets[] = {
  {"flat LL key of the old layout", "\"ll_base_latency_us\":40", NULL, MM_CONFIG_ERROR_UNKNOWN_KEY,
   ": $.intra_node: \"ll_base_latency_us\" is now \"protocols.ll.base_latency_us\""},
  {"simple latency twice", "\"latency_us\":2,\"protocols\":{\"simple\":{\"latency_us\":3}}", NULL,
   MM_CONFIG_ERROR_INCONSISTENT, ": $.intra_node.latency_us: "},
  {"unknown protocol", "\"protocols\":{\"ll128\":{}}", NULL, MM_CONFIG_ERROR_UNKNOWN_KEY, ": $.intra_node.protocols: "},
  {"unknown protocol key", "\"protocols\":{\"ll\":{\"alpha\":1}}", NULL, MM_CONFIG_ERROR_UNKNOWN_KEY,
   ": $.intra_node.protocols.ll: "},
  {"protocol efficiency above 1", "\"protocols\":{\"ll\":{\"efficiency\":1.5}}", NULL, MM_CONFIG_ERROR_RANGE,
   ": $.intra_node.protocols.ll.efficiency: "},
  {"cited number without provenance", "\"efficiency\":{\"value\":0.8}", NULL, MM_CONFIG_ERROR_MISSING_KEY,
   ": $.intra_node.efficiency: "},
  {"unknown provenance", "\"efficiency\":{\"value\":0.8,\"provenance\":\"hearsay\"}", NULL,
   MM_CONFIG_ERROR_UNKNOWN_VALUE, ": $.intra_node.efficiency.provenance: "},
  {"cited value out of range", "\"efficiency\":{\"value\":2,\"provenance\":\"estimate\"}", NULL, MM_CONFIG_ERROR_RANGE,
   ": $.intra_node.efficiency.value: "},
  {"efficiency as a string", "\"efficiency\":\"high\"", NULL, MM_CONFIG_ERROR_TYPE, ": $.intra_node.efficiency: "},
  {"missing fit file", "\"fit\":\"fits/none.json\"", NULL, MM_CONFIG_ERROR_IO, ": $.intra_node.fit: fit file "},
  {"empty fit path", "\"fit\":\"\"", NULL, MM_CONFIG_ERROR_RANGE, ": $.intra_node.fit: "},
  {"fit with a bad value", "\"fit\":\"@BADFIT@\"", NULL, MM_CONFIG_ERROR_RANGE, "badfit.json: $.efficiency.value: "},
  {"fit without a name", "\"fit\":\"@NONAME@\"", NULL, MM_CONFIG_ERROR_MISSING_KEY, "noname.json: $: "},
  {"one-shot latency from a fit across nodes", "", "\"fit\":\"@A100FIT@\"", MM_CONFIG_ERROR_INCONSISTENT,
   ": $.inter_node.fit: "},
};

START_TEST(test_bad_network)
{
  const BadNet *b = &bad_nets[_i];
  g_autofree char *badfit = mm_test_write("badfit.json", "{\"name\":\"f\",\"efficiency\":{\"value\":0,"
                                                        "\"provenance\":\"measurement\"}}");
  g_autofree char *noname = mm_test_write("noname.json", "{\"efficiency\":0.5}");
  g_autofree char *a100fit = mm_test_write("oneshotfit.json", "{\"name\":\"f\",\"one_shot_latency_us\":5}");
  const char *const keys[][2] = {{"@BADFIT@", badfit}, {"@NONAME@", noname}, {"@A100FIT@", a100fit}};
  g_autofree char *in = subst(b->intra, keys, G_N_ELEMENTS(keys));
  g_autofree char *ex = subst(b->inter, keys, G_N_ELEMENTS(keys));
  g_autofree char *sys = node_with(in, ex);
  g_autofree char *path = mm_test_write("badnet.json", sys);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmHardware) hw = mm_hardware_load(path, &error);
  ck_assert_msg(hw == NULL, "case '%s' was accepted", b->what);
  ck_assert_msg((MmConfigError)error->code == b->code, "case '%s': code %d, expected %d (%s)", b->what, error->code,
                b->code, error->message);
  ck_assert_msg(strstr(error->message, b->where) != NULL, "case '%s': message lacks '%s': %s", b->what, b->where,
                error->message);
}
END_TEST

START_TEST(test_fit_layers)
{
  /* the system's keys override the fit's; keys neither gives take the protocol table's defaults */
  g_autofree char *fit = mm_test_src("hardware/fits/nccl-a100-nvswitch.json");
  g_autofree char *intra = g_strdup_printf(
    "\"fit\":\"%s\",\"protocols\":{\"ll\":{\"base_latency_us\":{\"value\":33,\"provenance\":\"estimate\","
    "\"source\":\"a test\"}}}",
    fit);
  g_autofree char *sys = node_with(intra, "\"latency_us\":7");
  g_autoptr(MmHardware) hw = load_hw(sys);
  const MmNetwork *n = &hw->intra;
  ck_assert_str_eq(n->fit, fit);
  ck_assert_double_eq(n->efficiency.value, 0.78);
  ck_assert_int_eq(n->efficiency.kind, MM_PARAM_CITED);
  ck_assert_int_eq(n->efficiency.provenance, MM_PROV_MEASUREMENT);
  ck_assert_ptr_eq(n->efficiency.fit, n->fit);
  const MmProtocolParams *s = &n->protocol[MM_PROTO_SIMPLE], *ll = &n->protocol[MM_PROTO_LL];
  ck_assert_double_eq_tol(s->latency_s.value, 12e-6, 1e-18);
  ck_assert_double_eq_tol(s->base_latency_s.value, 20e-6, 1e-18);
  ck_assert_ptr_eq(s->base_latency_s.fit, n->fit);
  ck_assert_double_eq_tol(ll->base_latency_s.value, 33e-6, 1e-18); /* the system's */
  ck_assert_ptr_null(ll->base_latency_s.fit);
  ck_assert_str_eq(ll->base_latency_s.source, "a test");
  ck_assert_int_eq(ll->latency_s.kind, MM_PARAM_DEFAULT); /* NCCL's tuning model: 0.5 us per NVLink step */
  ck_assert_double_eq_tol(ll->latency_s.value, 0.5e-6, 1e-18);
  ck_assert_double_eq(ll->efficiency.value, 0.4);
  ck_assert_double_eq(s->efficiency.value, 1.0);
  /* across nodes: 2.7 us per LL step, and the LL base latency defaults to the simple protocol's */
  const MmNetwork *x = &hw->inter;
  ck_assert_int_eq(x->protocol[MM_PROTO_SIMPLE].latency_s.kind, MM_PARAM_GIVEN); /* the shorthand */
  ck_assert_double_eq_tol(x->protocol[MM_PROTO_SIMPLE].latency_s.value, 7e-6, 1e-18);
  ck_assert_double_eq_tol(x->protocol[MM_PROTO_LL].latency_s.value, 2.7e-6, 1e-18);
  ck_assert_double_eq(x->protocol[MM_PROTO_LL].base_latency_s.value, x->protocol[MM_PROTO_SIMPLE].base_latency_s.value);
  ck_assert_double_eq_tol(x->protocol[MM_PROTO_SIMPLE].base_latency_s.value, 20e-6, 1e-18);

  /* describe: every number with its origin; the defaulted ones listed */
  g_autoptr(cJSON) root = cJSON_CreateObject();
  mm_report_hardware_params_json(hw, root);
  const cJSON *hp = cJSON_GetObjectItemCaseSensitive(root, "hardware_parameters");
  g_autofree char *text = cJSON_PrintUnformatted(hp);
  const cJSON *def = cJSON_GetObjectItemCaseSensitive(hp, "defaulted");
  gboolean ll_latency = FALSE, efficiency = FALSE;
  for (const cJSON *d = def->child; d; d = d->next) {
    ll_latency |= strcmp(d->valuestring, "$.intra_node.protocols.ll.latency_us") == 0;
    efficiency |= strcmp(d->valuestring, "$.intra_node.efficiency") == 0;
  }
  ck_assert_msg(ll_latency && !efficiency, "%s", text);
  ck_assert_ptr_nonnull(strstr(text, "\"path\":\"$.intra_node.efficiency\",\"value\":0.78,\"unit\":\"fraction\","
                                     "\"from\":\"fit\""));
  ck_assert_ptr_nonnull(strstr(text, "\"without_provenance\":[\"$.inter_node.protocols.simple.latency_us\"]"));
  /* the interference coefficient with its source, and the pace it gives */
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(hp, "interference");
  const double slow = hw->device.overlap.collective_slowdown.value;
  ck_assert_double_gt(slow, 0);
  ck_assert_double_eq(cJSON_GetObjectItemCaseSensitive(in, "collective_slowdown")->valuedouble, slow);
  ck_assert_double_eq_tol(cJSON_GetObjectItemCaseSensitive(in, "compute_pace_beside_collective")->valuedouble,
                          1 / (1 + slow), 1e-15);
  ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItemCaseSensitive(in, "source")->valuestring, "arXiv:2507.03114"));
}
END_TEST

START_TEST(test_shipped_numbers_cited)
{
  /* every behavioural number a shipped system gives carries its provenance (STYLE.md 16), and the
   * systems that share a fit reference it instead of copying it */
  g_autofree char *dir = mm_test_src("hardware");
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  ck_assert_ptr_nonnull(d);
  guint systems = 0, with_fit = 0;
  for (const char *name; (name = g_dir_read_name(d));) {
    if (!g_str_has_suffix(name, ".json")) continue;
    g_autofree char *rel = g_strdup_printf("hardware/%s", name);
    g_autoptr(MmHardware) hw = load_hw(rel);
    g_autoptr(GPtrArray) params = mm_hardware_params(hw);
    for (guint i = 0; i < params->len; i++) {
      const MmParamRef *r = params->pdata[i];
      ck_assert_msg(r->param->kind != MM_PARAM_GIVEN, "%s: %s has no provenance", name, r->path);
      if (r->param->kind == MM_PARAM_CITED)
        ck_assert_msg(r->param->source && r->param->source[0], "%s: %s cites nothing", name, r->path);
    }
    systems++;
    with_fit += hw->intra.fit != NULL;
  }
  ck_assert_uint_ge(systems, 14);
  ck_assert_uint_ge(with_fit, 10);
}
END_TEST

/* Which algorithms apply, per kind, to a group: a table of expectations. */
typedef struct {
  const char *hw;
  int64_t ranks, stride;
  MmCollKind kind;
  const char *algorithms; /* the ones that apply, in table order */
} Applies;

static const Applies applies_rows[] = {
  /* 8 GPUs of a full mesh: the direct algorithms, no tree (one node), no in-network reduction */
  {"hardware/mi300x-8.json", 8, 1, MM_COLL_ALL_REDUCE, "ring direct two_phase halving_doubling one_shot host"},
  {"hardware/mi300x-8.json", 8, 1, MM_COLL_ALL_GATHER, "ring direct halving_doubling host"},
  {"hardware/mi300x-8.json", 8, 1, MM_COLL_ALL_TO_ALL, "pairwise host"},
  {"hardware/mi300x-8.json", 8, 1, MM_COLL_BROADCAST, "ring tree"},
  {"hardware/mi300x-8.json", 2, 1, MM_COLL_P2P, "direct"},
  /* 64 GPUs over 8 NVSwitch nodes with NVLS: trees, the hierarchy, in-network; no direct */
  {"hardware/dgx-h100-2048.json", 64, 1, MM_COLL_ALL_REDUCE,
   "ring tree halving_doubling hierarchical in_network host"},
  {"hardware/dgx-h100-2048.json", 64, 1, MM_COLL_REDUCE_SCATTER, "ring halving_doubling hierarchical host"},
  {"hardware/dgx-h100-2048.json", 8, 1, MM_COLL_ALL_REDUCE, "ring halving_doubling in_network one_shot host"},
  /* 24 GPUs: not a power of two */
  {"hardware/a100-40gb-4hdr.json", 24, 1, MM_COLL_ALL_REDUCE, "ring tree hierarchical host"},
  {"hardware/a100-40gb-4hdr.json", 16, 8, MM_COLL_PERMUTE, "direct"},
};

START_TEST(test_algorithm_applicability)
{
  const Applies *a = &applies_rows[_i];
  g_autoptr(MmHardware) hw = load_hw(a->hw);
  MmLinks L;
  mm_comm_links(hw, &L);
  g_autoptr(GString) got = g_string_new(NULL);
  for (int al = MM_ALGO_AUTO + 1; al < MM_ALGO_COUNT; al++) {
    MmCollective c = {.kind = a->kind, .bytes = GiB, .degree = a->ranks, .stride = a->stride,
                      .algorithm = (MmAlgorithm)al, .skew = 1.0};
    if (!mm_comm_applies(hw, &L, &c, (MmAlgorithm)al)) continue;
    g_string_append_printf(got, "%s%s", got->len ? " " : "", mm_algorithm_names[al]);
    /* forcing an applicable algorithm takes it */
    MmCommCost o;
    ck_assert(mm_comm_cost(hw, &L, &c, &o));
    ck_assert_int_eq(o.algorithm, al);
  }
  ck_assert_msg(strcmp(got->str, a->algorithms) == 0, "%s, %s over %" G_GINT64_FORMAT ": %s, expected %s", a->hw,
                mm_coll_names[a->kind], a->ranks, got->str, a->algorithms);
}
END_TEST

static Suite *comm_suite(void)
{
  Suite *s = suite_create("comm");
  TCase *tc = tcase_create("comm");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_mesh_pair_gets_one_link);
  tcase_add_test(tc, test_switch_pair_gets_full_port);
  tcase_add_test(tc, test_volumes_closed_form);
  tcase_add_test(tc, test_in_network_reduction);
  tcase_add_test(tc, test_per_node_dispatch);
  tcase_add_test(tc, test_auto_picks_fastest);
  tcase_add_test(tc, test_one_shot);
  tcase_add_test(tc, test_torus);
  tcase_add_test(tc, test_large_full_mesh);
  tcase_add_loop_test(tc, test_bad_network, 0, G_N_ELEMENTS(bad_nets));
  tcase_add_test(tc, test_fit_layers);
  tcase_add_test(tc, test_shipped_numbers_cited);
  tcase_add_loop_test(tc, test_algorithm_applicability, 0, G_N_ELEMENTS(applies_rows));
  tcase_add_test(tc, test_sparse_allreduce);
  tcase_add_test(tc, test_measured_curves);
  tcase_add_test(tc, test_superpod_speedup);
  tcase_add_test(tc, test_contention_in_a_run);
  tcase_add_test(tc, test_sparse_grad_sync_in_a_run);
  tcase_add_test(tc, test_cli_op_collective);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return mm_test_main(comm_suite());
}

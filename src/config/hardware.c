/* hardware: device files (hardware/devices/) and system files (hardware/) -> MmDevice, MmHardware. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "json.h"

#define BIG MM_INT_MAX

/* ---- device ------------------------------------------------------------ */

typedef struct {
  char *name, *source;
  double hbm_GiB, hbm_bw_GBps, launch_overhead_us, graph_launch_overhead_us;
} DeviceRaw;
#define DEV(f) ((gssize)offsetof(DeviceRaw, f))

static const MmField device_fields[] = {
  {"name", MM_F_STR, TRUE, 0, 0, 0, NULL, DEV(name), NULL, "display name"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, DEV(source), NULL, "datasheet or paper the numbers come from"},
  {"peak_tflops", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, "TFLOP/s",
   "dense peak per dtype: keys among fp32, tf32, fp16, bf16, fp8, int8; omit types the device lacks"},
  {"hbm_GiB", MM_F_NUM, TRUE, 1e-3, 1e6, 0, NULL, DEV(hbm_GiB), "GiB", "device memory capacity"},
  {"hbm_bw_GBps", MM_F_NUM, TRUE, 1e-3, 1e9, 0, NULL, DEV(hbm_bw_GBps), "GB/s", "peak memory bandwidth"},
  {"launch_overhead_us", MM_F_NUM, FALSE, 0, 1e6, 0, NULL, DEV(launch_overhead_us), "us",
   "fixed cost added to every kernel"},
  {"graph_launch_overhead_us", MM_F_NUM, FALSE, 0, 1e6, 0.5, NULL, DEV(graph_launch_overhead_us), "us",
   "the same for kernels replayed from a CUDA/HIP graph (serving \"cuda_graphs\"); default 0.5: NVIDIA's "
   "CUDA Graphs blog ran 2.9-us kernels at 3.4 us each from a graph"},
  {"utilization", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "achievable fractions of peak, each {value, provenance, source}: keys gemm, hbm"},
  MM_FIELDS_END,
};

static const MmField util_fields[] = {
  {"value", MM_F_NUM, TRUE, 1e-6, 1, 0, NULL, (gssize)offsetof(MmUtil, value), "fraction",
   "achieved / peak"},
  {"provenance", MM_F_ENUM, TRUE, 0, 0, 0, mm_provenance_names, (gssize)offsetof(MmUtil, provenance),
   NULL, "kind of evidence behind the value"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, (gssize)offsetof(MmUtil, source), NULL,
   "citation or calibration run"},
  MM_FIELDS_END,
};

static const MmField util_table_fields[] = {
  {"gemm", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "compute-bound ops (GEMMs, attention): fraction of peak FLOP/s"},
  {"hbm", MM_F_OBJECT, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "memory-bound ops (embedding lookups, norms, elementwise): fraction of HBM bandwidth"},
  MM_FIELDS_END,
};

void mm_device_clear(MmDevice *d)
{
  if (!d) return;
  g_free(d->path);
  g_free(d->name);
  g_free(d->source);
  g_free(d->util_gemm.source);
  g_free(d->util_hbm.source);
  memset(d, 0, sizeof *d);
}

static gboolean device_from_json(const char *path, const cJSON *root, MmDevice *out, GError **error)
{
  MmJsonCtx ctx = {path};
  DeviceRaw raw = {0};
  memset(out, 0, sizeof *out);
  out->path = g_strdup(path);
  gboolean ok = mm_json_apply(&ctx, root, "$", device_fields, &raw, NULL, error);
  out->name = raw.name;
  out->source = raw.source;
  if (!ok) return FALSE;
  out->hbm_bytes = raw.hbm_GiB * 1024.0 * 1024.0 * 1024.0;
  out->hbm_bw_Bps = raw.hbm_bw_GBps * 1e9;
  out->launch_overhead_s = raw.launch_overhead_us * 1e-6;
  out->graph_launch_overhead_s = raw.graph_launch_overhead_us * 1e-6;

  const cJSON *peak = cJSON_GetObjectItemCaseSensitive(root, "peak_tflops");
  MmField pf[MM_DTYPE_COUNT + 1];
  for (int d = 0; d < MM_DTYPE_COUNT; d++) {
    pf[d] = (MmField){mm_dtype_names[d], MM_F_NUM, FALSE, 0, 1e7, 0, NULL,
                      (gssize)(d * (int)sizeof(double)), "TFLOP/s", NULL};
  }
  pf[MM_DTYPE_COUNT] = (MmField)MM_FIELDS_END;
  if (!mm_json_apply(&ctx, peak, "$.peak_tflops", pf, out->peak_flops, NULL, error)) return FALSE;
  gboolean any = FALSE;
  for (int d = 0; d < MM_DTYPE_COUNT; d++) {
    out->peak_flops[d] *= 1e12;
    any |= out->peak_flops[d] > 0;
  }
  if (!any) {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, "$.peak_tflops",
                  "expected at least one dtype with a positive peak");
    return FALSE;
  }

  const cJSON *util = cJSON_GetObjectItemCaseSensitive(root, "utilization");
  if (!mm_json_apply(&ctx, util, "$.utilization", util_table_fields, NULL, NULL, error)) return FALSE;
  if (!mm_json_apply(&ctx, cJSON_GetObjectItemCaseSensitive(util, "gemm"), "$.utilization.gemm",
                     util_fields, &out->util_gemm, NULL, error))
    return FALSE;
  if (!mm_json_apply(&ctx, cJSON_GetObjectItemCaseSensitive(util, "hbm"), "$.utilization.hbm",
                     util_fields, &out->util_hbm, NULL, error))
    return FALSE;
  return TRUE;
}

gboolean mm_device_load(const char *path, MmDevice *out, GError **error)
{
  g_autoptr(cJSON) root = mm_json_load_file(path, error);
  if (!root) {
    memset(out, 0, sizeof *out);
    return FALSE;
  }
  if (!device_from_json(path, root, out, error)) {
    mm_device_clear(out);
    return FALSE;
  }
  return TRUE;
}

/* ---- system ------------------------------------------------------------ */

typedef struct {
  char *name, *source, *device;
  int64_t gpus_per_node, nodes;
  double host_link_GBps, host_link_efficiency;
} SystemRaw;
#define SYS(f) ((gssize)offsetof(SystemRaw, f))

static const MmField system_fields[] = {
  {"name", MM_F_STR, TRUE, 0, 0, 0, NULL, SYS(name), NULL, "display name"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, SYS(source), NULL, "where the numbers come from"},
  {"device", MM_F_STR, TRUE, 0, 0, 0, NULL, SYS(device), NULL,
   "device file, relative to this file's directory (e.g. devices/a100-80gb.json)"},
  {"gpus_per_node", MM_F_INT, TRUE, 1, 1 << 16, 0, NULL, SYS(gpus_per_node), "GPUs", "GPUs in one node"},
  {"nodes", MM_F_INT, TRUE, 1, 1 << 20, 0, NULL, SYS(nodes), "nodes", "nodes in the system"},
  {"intra_node", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "scale-up network inside a node (required when gpus_per_node > 1)"},
  {"host_link_GBps", MM_F_NUM, FALSE, 1e-3, 1e6, 32, NULL, SYS(host_link_GBps), "GB/s",
   "GPU to host link (PCIe), per direction: host-staged collectives (Gloo, P2P disabled)"},
  {"host_link_efficiency", MM_F_NUM, FALSE, 1e-3, 1, 0.8, NULL, SYS(host_link_efficiency), "fraction",
   "achievable fraction of the host link for staged collectives"},
  {"inter_node", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "scale-out network between nodes (required when nodes > 1)"},
  MM_FIELDS_END,
};

typedef struct {
  int topology;
  int64_t links_per_gpu, nics_per_node, nics_per_gpu;
  double link_bw_GBps, nic_bw_Gbps, latency_us, base_latency_us, efficiency, in_network_efficiency;
  double ll_latency_us, ll_base_latency_us, ll_efficiency, one_shot_latency_us;
  gboolean in_network_reduction;
  char *source;
} NetRaw;
#define NET(f) ((gssize)offsetof(NetRaw, f))

/* The low-latency protocol's keys; @step: the default per-step latency (NCCL's tuning model). */
#define LL_FIELDS(step, where)                                                                           \
  {"ll_latency_us", MM_F_NUM, FALSE, 0, 1e6, step, NULL, NET(ll_latency_us), "us",                       \
   "low-latency protocol (NCCL LL: flag in every 8-byte store): per step; default NCCL's tuning model for " where}, \
  {"ll_base_latency_us", MM_F_NUM, FALSE, 0, 1e6, NAN, NULL, NET(ll_base_latency_us), "us",               \
   "low-latency protocol: per collective (default base_latency_us; fitted to small-size nccl-tests points)"}, \
  {"ll_efficiency", MM_F_NUM, FALSE, 1e-3, 1, 0.4, NULL, NET(ll_efficiency), "fraction",                  \
   "low-latency protocol: its bandwidth as a fraction of the bulk protocol's (half the bytes are flags; "   \
   "NCCL's tuning caps LL near 40%)"}

static const MmField intra_fields[] = {
  {"topology", MM_F_ENUM, TRUE, 0, 0, 0, mm_topology_names, NET(topology), NULL,
   "switch (NVSwitch), full_mesh (MI300X, MI210), ring"},
  {"links_per_gpu", MM_F_INT, TRUE, 1, 1024, 0, NULL, NET(links_per_gpu), "links", "links of one GPU"},
  {"link_bw_GBps", MM_F_NUM, TRUE, 1e-3, 1e7, 0, NULL, NET(link_bw_GBps), "GB/s",
   "one link, per direction"},
  {"latency_us", MM_F_NUM, FALSE, 0, 1e6, 1.0, NULL, NET(latency_us), "us", "per algorithm step (alpha)"},
  {"base_latency_us", MM_F_NUM, FALSE, 0, 1e6, 10.0, NULL, NET(base_latency_us), "us",
   "per collective: launch and protocol setup (fitted to nccl-tests curves)"},
  {"efficiency", MM_F_NUM, FALSE, 1e-3, 1, 1.0, NULL, NET(efficiency), "fraction",
   "achievable fraction of line rate (protocol overhead)"},
  LL_FIELDS(0.5, "NVLink"),
  {"one_shot_latency_us", MM_F_NUM, FALSE, 0, 1e6, 5.5, NULL, NET(one_shot_latency_us), "us",
   "a serving engine's one-shot AllReduce kernel (every GPU writes its buffer into each peer's, flags in "
   "the data, and sums; algorithm \"one_shot\"): fixed cost per call; default fitted to SGLang's 8 x H100 "
   "custom all-reduce measurement (5.7 us at 4 KiB, 7.8 us at 32 KiB)"},
  {"in_network_reduction", MM_F_BOOL, FALSE, 0, 0, 0, NULL, NET(in_network_reduction), NULL,
   "the switch reduces in the network (NVLink SHARP)"},
  {"in_network_efficiency", MM_F_NUM, FALSE, 1e-3, 1, NAN, NULL, NET(in_network_efficiency), "fraction",
   "fraction of line rate the in-switch reduction delivers (default: efficiency)"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, NET(source), NULL, "where bandwidth and efficiency come from"},
  MM_FIELDS_END,
};

static const MmField inter_fields[] = {
  {"topology", MM_F_ENUM, TRUE, 0, 0, 0, mm_topology_names, NET(topology), NULL,
   "fat_tree, rail, switch, torus2d, torus3d, ring"},
  {"nics_per_node", MM_F_INT, FALSE, 1, 1024, 0, NULL, NET(nics_per_node), "NICs",
   "NICs shared by the node's GPUs (give this or nics_per_gpu)"},
  {"nics_per_gpu", MM_F_INT, FALSE, 1, 64, 0, NULL, NET(nics_per_gpu), "NICs", "NICs of one GPU"},
  {"nic_bw_Gbps", MM_F_NUM, TRUE, 1e-3, 1e7, 0, NULL, NET(nic_bw_Gbps), "Gb/s",
   "one NIC, per direction (bits)"},
  {"latency_us", MM_F_NUM, FALSE, 0, 1e6, 5.0, NULL, NET(latency_us), "us",
   "per algorithm step (alpha; per hop on a torus)"},
  {"base_latency_us", MM_F_NUM, FALSE, 0, 1e6, 20.0, NULL, NET(base_latency_us), "us",
   "per collective: launch and protocol setup"},
  {"efficiency", MM_F_NUM, FALSE, 1e-3, 1, 1.0, NULL, NET(efficiency), "fraction",
   "achievable fraction of line rate (protocol overhead)"},
  LL_FIELDS(2.7, "the network"),
  {"in_network_reduction", MM_F_BOOL, FALSE, 0, 0, 0, NULL, NET(in_network_reduction), NULL,
   "switches reduce in the network (SHARP)"},
  {"in_network_efficiency", MM_F_NUM, FALSE, 1e-3, 1, NAN, NULL, NET(in_network_efficiency), "fraction",
   "fraction of line rate the in-network reduction delivers (default: efficiency)"},
  {"dims", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, "nodes",
   "torus2d / torus3d: nodes along each dimension (their product is the node count); NICs are the torus links"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, NET(source), NULL, "where bandwidth and efficiency come from"},
  MM_FIELDS_END,
};

void mm_hardware_free(MmHardware *h)
{
  if (!h) return;
  mm_device_clear(&h->device);
  g_free(h->intra.source);
  g_free(h->inter.source);
  g_free(h->path);
  g_free(h->name);
  g_free(h->source);
  g_free(h);
}

static gboolean parse_network(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, gboolean intra,
                              int64_t gpus_per_node, MmNetwork *out, GError **error)
{
  NetRaw raw = {.in_network_efficiency = -1, .ll_base_latency_us = -1};
  guint64 present = 0;
  const MmField *fields = intra ? intra_fields : inter_fields;
  gboolean ok = mm_json_apply(ctx, obj, jp, fields, &raw, &present, error);
  out->source = raw.source;
  if (!ok) return FALSE;
  out->present = TRUE;
  out->topology = (MmTopology)raw.topology;
  out->latency_s = raw.latency_us * 1e-6;
  out->base_latency_s = raw.base_latency_us * 1e-6;
  out->efficiency = raw.efficiency;
  out->ll_latency_s = raw.ll_latency_us * 1e-6;
  out->ll_base_latency_s = (raw.ll_base_latency_us < 0 ? raw.base_latency_us : raw.ll_base_latency_us) * 1e-6;
  out->ll_efficiency = raw.ll_efficiency;
  out->one_shot_latency_s = raw.one_shot_latency_us * 1e-6;
  out->in_network_efficiency = raw.in_network_efficiency > 0 ? raw.in_network_efficiency : raw.efficiency;
  out->in_network_reduction = raw.in_network_reduction;
  if (intra) {
    out->links = raw.links_per_gpu;
    out->link_bw_Bps = raw.link_bw_GBps * 1e9;
    out->bw_per_gpu_Bps = (double)raw.links_per_gpu * out->link_bw_Bps;
    if (out->topology == MM_TOPO_FULL_MESH && gpus_per_node > MM_FULL_MESH_MAX_GPUS) {
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, "$.gpus_per_node",
                    "%" G_GINT64_FORMAT " GPUs in a full mesh need %" G_GINT64_FORMAT
                    " links each; madmax models full meshes of up to %d GPUs",
                    gpus_per_node, gpus_per_node - 1, MM_FULL_MESH_MAX_GPUS);
      return FALSE;
    }
    if (out->topology == MM_TOPO_FULL_MESH && gpus_per_node > 1 && raw.links_per_gpu < gpus_per_node - 1) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "a full mesh of %" G_GINT64_FORMAT " GPUs needs at least %" G_GINT64_FORMAT
                    " links per GPU, got %" G_GINT64_FORMAT,
                    gpus_per_node, gpus_per_node - 1, raw.links_per_gpu);
      return FALSE;
    }
  } else {
    gboolean per_node = (present >> mm_json_field_index(fields, "nics_per_node")) & 1;
    gboolean per_gpu = (present >> mm_json_field_index(fields, "nics_per_gpu")) & 1;
    if (per_node == per_gpu) {
      mm_json_error(error, per_node ? MM_CONFIG_ERROR_INCONSISTENT : MM_CONFIG_ERROR_MISSING_KEY, ctx,
                    jp, "give exactly one of \"nics_per_node\" and \"nics_per_gpu\"");
      return FALSE;
    }
    out->link_bw_Bps = raw.nic_bw_Gbps * 1e9 / 8.0;
    out->links = per_node ? raw.nics_per_node : raw.nics_per_gpu * gpus_per_node;
    out->bw_per_gpu_Bps = (double)out->links * out->link_bw_Bps / (double)gpus_per_node;
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(obj, "dims");
    gboolean torus = out->topology == MM_TOPO_TORUS2D || out->topology == MM_TOPO_TORUS3D;
    g_autofree char *dp = g_strdup_printf("%s.dims", jp);
    if (torus != (dims != NULL)) {
      mm_json_error(error, torus ? MM_CONFIG_ERROR_MISSING_KEY : MM_CONFIG_ERROR_INCONSISTENT, ctx, torus ? jp : dp,
                    torus ? "a torus needs \"dims\" (nodes along each dimension)" : "\"dims\" applies to torus topologies only");
      return FALSE;
    }
    if (torus) {
      int want = out->topology == MM_TOPO_TORUS2D ? 2 : 3;
      if (cJSON_GetArraySize(dims) != want) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, dp, "expected %d dimensions for %s", want,
                      mm_topology_names[out->topology]);
        return FALSE;
      }
      int i = 0;
      for (const cJSON *d = dims->child; d; d = d->next, i++) {
        g_autofree char *ip = g_strdup_printf("%s[%d]", dp, i);
        static const MmField dim_field = {"dims", MM_F_INT, TRUE, 1, 1 << 16, 0, NULL, 0, NULL, NULL};
        if (!mm_json_apply_field(ctx, &dim_field, d, ip, &out->dims[i], error)) return FALSE;
      }
      out->n_dims = (guint)want;
      if (out->links < 2 * want) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                      "a %d-dimensional torus needs %d links per node (nics_per_node), got %" G_GINT64_FORMAT, want,
                      2 * want, out->links);
        return FALSE;
      }
    }
  }
  return TRUE;
}

static MmHardware *hardware_from_json(const char *path, const cJSON *root, GError **error)
{
  MmJsonCtx ctx = {path};
  g_autoptr(MmHardware) h = g_new0(MmHardware, 1);
  h->path = g_strdup(path);
  SystemRaw raw = {0};
  gboolean ok = mm_json_apply(&ctx, root, "$", system_fields, &raw, NULL, error);
  h->name = raw.name;
  h->source = raw.source;
  g_autofree char *device = raw.device;
  if (!ok) return NULL;
  h->gpus_per_node = raw.gpus_per_node;
  h->nodes = raw.nodes;
  h->host_bw_Bps = raw.host_link_GBps * 1e9 * raw.host_link_efficiency;
  if (h->gpus_per_node * h->nodes > (1 << 24)) {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, "$.nodes",
                  "%" G_GINT64_FORMAT " GPUs in all is more than madmax supports (16M)",
                  h->gpus_per_node * h->nodes);
    return NULL;
  }

  const cJSON *intra = cJSON_GetObjectItemCaseSensitive(root, "intra_node");
  const cJSON *inter = cJSON_GetObjectItemCaseSensitive(root, "inter_node");
  if (intra) {
    if (!parse_network(&ctx, intra, "$.intra_node", TRUE, h->gpus_per_node, &h->intra, error)) return NULL;
  } else if (h->gpus_per_node > 1) {
    mm_json_error(error, MM_CONFIG_ERROR_MISSING_KEY, &ctx, "$",
                  "missing \"intra_node\": a node of %" G_GINT64_FORMAT " GPUs needs a scale-up network",
                  h->gpus_per_node);
    return NULL;
  }
  if (inter) {
    if (!parse_network(&ctx, inter, "$.inter_node", FALSE, h->gpus_per_node, &h->inter, error)) return NULL;
    if (h->inter.n_dims > 0) {
      int64_t prod = 1;
      for (guint i = 0; i < h->inter.n_dims; i++) prod *= h->inter.dims[i];
      if (prod != h->nodes) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, "$.inter_node.dims",
                      "the torus dimensions multiply to %" G_GINT64_FORMAT " nodes, the system has %" G_GINT64_FORMAT,
                      prod, h->nodes);
        return NULL;
      }
    }
  } else if (h->nodes > 1) {
    mm_json_error(error, MM_CONFIG_ERROR_MISSING_KEY, &ctx, "$",
                  "missing \"inter_node\": %" G_GINT64_FORMAT " nodes need a scale-out network", h->nodes);
    return NULL;
  }

  if (device[0] == '\0') {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, "$.device", "expected a device file path");
    return NULL;
  }
  g_autofree char *dir = g_path_get_dirname(path);
  g_autofree char *dev_path = g_path_is_absolute(device) ? g_strdup(device)
                                                          : g_build_filename(dir, device, NULL);
  g_autoptr(GError) derr = NULL;
  if (!mm_device_load(dev_path, &h->device, &derr)) {
    if (derr->code == MM_CONFIG_ERROR_IO) {
      mm_json_error(error, MM_CONFIG_ERROR_IO, &ctx, "$.device", "device file %s: %s", dev_path,
                    derr->message);
    } else {
      g_propagate_error(error, g_steal_pointer(&derr));
    }
    return NULL;
  }
  return g_steal_pointer(&h);
}

gboolean mm_hardware_set_nodes(MmHardware *h, int64_t nodes, GError **error)
{
  if (nodes < 1 || nodes > (1 << 20) || nodes * h->gpus_per_node > (1 << 24)) {
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_RANGE,
                "--nodes %" G_GINT64_FORMAT ": expected 1 to %d nodes of %" G_GINT64_FORMAT " GPUs", nodes,
                (1 << 24) / (int)h->gpus_per_node, h->gpus_per_node);
    return FALSE;
  }
  if (nodes > 1 && !h->inter.present) {
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_INCONSISTENT,
                "%s: $: --nodes %" G_GINT64_FORMAT " needs an \"inter_node\" network, which this system lacks",
                h->path, nodes);
    return FALSE;
  }
  if (h->inter.n_dims > 0 && nodes != h->nodes) {
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_INCONSISTENT,
                "%s: $.inter_node.dims: a torus cannot be resized with --nodes; edit its dims", h->path);
    return FALSE;
  }
  if (nodes != h->nodes) { /* the file's name describes its own size */
    char *name = g_strdup_printf("%s, resized to %" G_GINT64_FORMAT " node%s", h->name, nodes, nodes == 1 ? "" : "s");
    g_free(h->name);
    h->name = name;
  }
  h->nodes = nodes;
  return TRUE;
}

MmHardware *mm_hardware_load(const char *path, GError **error)
{
  g_autoptr(cJSON) root = mm_json_load_file(path, error);
  return root ? hardware_from_json(path, root, error) : NULL;
}

void mm_hardware_write_schema(FILE *out)
{
  mm_json_write_schema(out, "Device file (`hardware/devices/*.json`)",
                       "One accelerator: peak FLOP/s per dtype, memory, and the utilization factors "
                       "the cost model applies, each with its provenance.",
                       device_fields);
  mm_json_write_schema(out, "`utilization`", "", util_table_fields);
  mm_json_write_schema(out, "`utilization.gemm` / `utilization.hbm`", "", util_fields);
  mm_json_write_schema(out, "System file (`hardware/*.json`)",
                       "A system: a device, how many per node, how many nodes, and the two networks.",
                       system_fields);
  mm_json_write_schema(out, "`intra_node`",
                       "Per-GPU scale-up bandwidth = links_per_gpu x link_bw_GBps (per direction).",
                       intra_fields);
  mm_json_write_schema(out, "`inter_node`",
                       "Per-GPU scale-out bandwidth = NICs x nic_bw_Gbps / 8 / gpus_per_node (per direction).",
                       inter_fields);
}

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
  {"efficiency", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "measured efficiency curves by kernel kind; where one covers a kernel it replaces the utilization scalar"},
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

/* ---- efficiency curves (src/cost/cost.h applies them) -------------------- */

static const MmField efficiency_fields[] = {
  {"gemm", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "GEMMs (grouped: batch = experts), keyed by dtype (fp32 .. int8): fraction of peak FLOP/s by shape"},
  {"gemv", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "GEMMs with fewer than 16 rows or columns (decode), keyed by dtype"},
  {"attention", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "fused attention (m queries, n keys, k head width, batch heads x sequences), keyed by dtype"},
  {"interaction", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "DLRM dot interaction (batched X X^T), keyed by dtype"},
  {"elementwise", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "norms, activations, softmax (m rows, n columns), keyed by dtype"},
  {"lookup", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "embedding gathers (m lookups, n row width, batch tables), keyed by dtype"},
  {"hbm", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "memory curves keyed by kernel kind (gemm, gemv, attention, interaction, elementwise, lookup): fraction "
   "of HBM bandwidth by bytes per call"},
  MM_FIELDS_END,
};

typedef struct {
  int provenance;
  char *source;
} CurveRaw;

static const MmField curve_fields[] = {
  {"provenance", MM_F_ENUM, TRUE, 0, 0, 0, mm_provenance_names, (gssize)offsetof(CurveRaw, provenance), NULL,
   "kind of evidence behind the points (calibrate writes \"calibration\")"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, (gssize)offsetof(CurveRaw, source), NULL,
   "citation or calibration run"},
  {"points", MM_F_ARRAY, TRUE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "measured points, at least one (compute: {m, n, k, batch, util}; hbm: {bytes, util})"},
  MM_FIELDS_END,
};

#define PT(f) ((gssize)offsetof(MmEffPoint, f))
static const MmField compute_point_fields[] = {
  {"m", MM_F_NUM, TRUE, 1, BIG, 0, NULL, PT(m), "rows", "rows of the output (tokens; queries for attention)"},
  {"n", MM_F_NUM, TRUE, 1, BIG, 0, NULL, PT(n), "columns", "columns of the output (keys for attention)"},
  {"k", MM_F_NUM, TRUE, 1, BIG, 0, NULL, PT(k), "elements", "reduction length (head width for attention)"},
  {"batch", MM_F_NUM, FALSE, 1, BIG, 1, NULL, PT(batch), "problems", "independent problems of one call"},
  {"util", MM_F_NUM, TRUE, 1e-6, 1, 0, NULL, PT(util), "fraction", "achieved / peak FLOP/s"},
  MM_FIELDS_END,
};

static const MmField memory_point_fields[] = {
  {"bytes", MM_F_NUM, TRUE, 1, BIG, 0, NULL, PT(bytes), "bytes", "HBM bytes of one call"},
  {"util", MM_F_NUM, TRUE, 1e-6, 1, 0, NULL, PT(util), "fraction", "achieved / peak HBM bandwidth"},
  MM_FIELDS_END,
};

static void eff_curve_free(MmEffCurve *c)
{
  if (!c) return;
  g_free(c->name);
  g_free(c->source);
  g_free(c->points);
  g_free(c);
}

/* Parses one curve object at @jp into @c (already owned by the device, so that a failure
 * part-way leaves nothing to leak). Compute points must differ in shape; memory points
 * must be sorted by strictly increasing bytes (the cost interpolates between neighbours). */
static gboolean parse_curve(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, gboolean compute,
                            MmEffCurve *c, GError **error)
{
  if (!mm_json_expect(ctx, obj, jp, cJSON_Object, "an object {provenance, source, points}", error)) return FALSE;
  CurveRaw raw = {0};
  gboolean ok = mm_json_apply(ctx, obj, jp, curve_fields, &raw, NULL, error);
  c->source = raw.source;
  if (!ok) return FALSE;
  c->provenance = (MmProvenance)raw.provenance;
  const cJSON *pts = cJSON_GetObjectItemCaseSensitive(obj, "points");
  g_autofree char *pp = g_strdup_printf("%s.points", jp);
  int n = cJSON_GetArraySize(pts);
  if (n == 0) {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, pp, "expected at least one point");
    return FALSE;
  }
  c->points = g_new0(MmEffPoint, n);
  const MmField *fields = compute ? compute_point_fields : memory_point_fields;
  for (const cJSON *it = pts->child; it; it = it->next) {
    g_autofree char *ip = g_strdup_printf("%s[%u]", pp, c->n_points);
    if (!mm_json_expect(ctx, it, ip, cJSON_Object, "an object", error)) return FALSE;
    MmEffPoint *p = &c->points[c->n_points];
    if (!mm_json_apply(ctx, it, ip, fields, p, NULL, error)) return FALSE;
    for (guint j = 0; compute && j < c->n_points; j++) {
      const MmEffPoint *q = &c->points[j];
      if (q->m == p->m && q->n == p->n && q->k == p->k && q->batch == p->batch) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, ip, "the same shape as %s[%u]", pp, j);
        return FALSE;
      }
    }
    if (!compute && c->n_points > 0 && p->bytes <= c->points[c->n_points - 1].bytes) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, ip,
                    "bytes %.17g after %.17g; expected points sorted by strictly increasing bytes", p->bytes,
                    c->points[c->n_points - 1].bytes);
      return FALSE;
    }
    c->n_points++;
  }
  return TRUE;
}

/* The optional "efficiency" object: compute curves by kind and dtype, memory curves by kind. */
static gboolean parse_efficiency(const MmJsonCtx *ctx, const cJSON *eff, MmDevice *out, GError **error)
{
  if (!mm_json_apply(ctx, eff, "$.efficiency", efficiency_fields, NULL, NULL, error)) return FALSE;
  MmField df[MM_DTYPE_COUNT + 1], kf[MM_KERNEL_KIND_COUNT + 1];
  for (int d = 0; d < MM_DTYPE_COUNT; d++)
    df[d] = (MmField){mm_dtype_names[d], MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL, NULL};
  df[MM_DTYPE_COUNT] = (MmField)MM_FIELDS_END;
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++)
    kf[k] = (MmField){mm_kernel_kind_names[k], MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL, NULL};
  kf[MM_KERNEL_KIND_COUNT] = (MmField)MM_FIELDS_END;

  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++) {
    const cJSON *byd = cJSON_GetObjectItemCaseSensitive(eff, mm_kernel_kind_names[k]);
    if (!byd) continue;
    g_autofree char *kp = g_strdup_printf("$.efficiency.%s", mm_kernel_kind_names[k]);
    if (!mm_json_apply(ctx, byd, kp, df, NULL, NULL, error)) return FALSE;
    for (int d = 0; d < MM_DTYPE_COUNT; d++) {
      const cJSON *cj = cJSON_GetObjectItemCaseSensitive(byd, mm_dtype_names[d]);
      if (!cj) continue;
      g_autofree char *cp = g_strdup_printf("%s.%s", kp, mm_dtype_names[d]);
      if (out->peak_flops[d] <= 0) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, cp,
                      "a curve for %s, which the device lacks (no peak_tflops.%s)", mm_dtype_names[d],
                      mm_dtype_names[d]);
        return FALSE;
      }
      MmEffCurve *c = out->compute_eff[k][d] = g_new0(MmEffCurve, 1);
      c->name = g_strdup_printf("%s.%s", mm_kernel_kind_names[k], mm_dtype_names[d]);
      if (!parse_curve(ctx, cj, cp, TRUE, c, error)) return FALSE;
    }
  }
  const cJSON *hbm = cJSON_GetObjectItemCaseSensitive(eff, "hbm");
  if (!hbm) return TRUE;
  if (!mm_json_apply(ctx, hbm, "$.efficiency.hbm", kf, NULL, NULL, error)) return FALSE;
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++) {
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(hbm, mm_kernel_kind_names[k]);
    if (!cj) continue;
    g_autofree char *cp = g_strdup_printf("$.efficiency.hbm.%s", mm_kernel_kind_names[k]);
    MmEffCurve *c = out->memory_eff[k] = g_new0(MmEffCurve, 1);
    c->name = g_strdup_printf("hbm.%s", mm_kernel_kind_names[k]);
    if (!parse_curve(ctx, cj, cp, FALSE, c, error)) return FALSE;
  }
  return TRUE;
}

void mm_device_clear(MmDevice *d)
{
  if (!d) return;
  g_free(d->path);
  g_free(d->name);
  g_free(d->source);
  g_free(d->util_gemm.source);
  g_free(d->util_hbm.source);
  for (int k = 0; k < MM_KERNEL_KIND_COUNT; k++) {
    for (int t = 0; t < MM_DTYPE_COUNT; t++) eff_curve_free(d->compute_eff[k][t]);
    eff_curve_free(d->memory_eff[k]);
  }
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
  const cJSON *eff = cJSON_GetObjectItemCaseSensitive(root, "efficiency");
  return eff == NULL || parse_efficiency(&ctx, eff, out, error);
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

const char *const mm_protocol_names[] = {"simple", "ll", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_protocol_names) == MM_PROTO_COUNT + 1);
const char *const mm_param_kind_names[] = {"default", "given", "cited", NULL};

typedef struct {
  char *name, *source, *device;
  int64_t gpus_per_node, nodes;
  double host_link_GBps;
  MmParam host_link_efficiency;
} SystemRaw;
#define SYS(f) ((gssize)offsetof(SystemRaw, f))

static const MmField system_fields[] = {
  {"name", MM_F_STR, TRUE, 0, 0, 0, NULL, SYS(name), NULL, "display name"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, SYS(source), NULL, "where the numbers come from"},
  {"device", MM_F_STR, TRUE, 0, 0, 0, NULL, SYS(device), NULL,
   "device file, relative to this file's directory (e.g. devices/a100-80gb.json)"},
  {"gpus_per_node", MM_F_INT, TRUE, 1, 1 << 16, 0, NULL, SYS(gpus_per_node), "GPUs",
   "GPUs in one node (a full_mesh node: at most 64)"},
  {"nodes", MM_F_INT, TRUE, 1, 1 << 20, 0, NULL, SYS(nodes), "nodes", "nodes in the system"},
  {"intra_node", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "scale-up network inside a node (required when gpus_per_node > 1)"},
  {"host_link_GBps", MM_F_NUM, FALSE, 1e-3, 1e6, 32, NULL, SYS(host_link_GBps), "GB/s",
   "GPU to host link (PCIe), per direction: host-staged collectives (Gloo, P2P disabled); default PCIe 4.0 x16"},
  {"host_link_efficiency", MM_F_PARAM, FALSE, 1e-3, 1, 0.8, NULL, SYS(host_link_efficiency), "fraction",
   "achievable fraction of the host link for staged collectives (default 0.8: an estimate)"},
  {"inter_node", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "scale-out network between nodes (required when nodes > 1)"},
  MM_FIELDS_END,
};

static void param_clear(MmParam *p)
{
  g_clear_pointer(&p->source, g_free);
}

/* Moves @src into @dst (its source string too); @fit: the fit file it came from, or NULL. */
static void param_take(MmParam *dst, MmParam *src, const char *fit)
{
  g_free(dst->source);
  *dst = *src;
  dst->fit = fit;
  src->source = NULL;
}

/* ---- protocols: one row per protocol ------------------------------------------------ */

/* A protocol's defaults per network ([0] intra-node, [1] inter-node). Adding a protocol is a
 * row here plus its MmProtocol value and name; src/comm runs every algorithm under each. */
typedef struct {
  double latency_us[2];
  double base_latency_us[2]; /* NAN: the simple protocol's */
  double efficiency;
  const char *latency_doc, *base_doc, *efficiency_doc;
} ProtocolRow;

static const ProtocolRow protocol_table[MM_PROTO_COUNT] = {
  [MM_PROTO_SIMPLE] = {{1.0, 5.0}, {10.0, 20.0}, 1.0, "per algorithm step (alpha); default an estimate",
                       "per collective: launch and protocol setup (fitted to nccl-tests curves); default an estimate",
                       "its bandwidth / the network's effective bandwidth (line rate x efficiency): 1 for the bulk "
                       "protocol"},
  [MM_PROTO_LL] = {{0.5, 2.7}, {NAN, NAN}, 0.4,
                   "per algorithm step; default NCCL's tuning model (0.5 us per NVLink step, 2.7 us per network step)",
                   "per collective (fitted to small-size nccl-tests points); default the simple protocol's",
                   "its bandwidth as a fraction of the bulk protocol's (half the bytes are flags; NCCL's tuning caps "
                   "LL near 40%)"},
};

typedef struct {
  MmParam latency_us, base_latency_us, efficiency;
} ProtoRaw;
#define PROTO(f) ((gssize)offsetof(ProtoRaw, f))

/* The keys of protocols.<pr> on an intra- (@inter FALSE) or inter-node network. */
static void protocol_fields(MmProtocol pr, gboolean inter, MmField out[4])
{
  const ProtocolRow *r = &protocol_table[pr];
  out[0] = (MmField){"latency_us", MM_F_PARAM, FALSE, 0, 1e6, r->latency_us[inter], NULL, PROTO(latency_us), "us",
                     r->latency_doc};
  out[1] = (MmField){"base_latency_us", MM_F_PARAM, FALSE, 0, 1e6, r->base_latency_us[inter], NULL,
                     PROTO(base_latency_us), "us", r->base_doc};
  out[2] = (MmField){"efficiency", MM_F_PARAM, FALSE, 1e-3, 1, r->efficiency, NULL, PROTO(efficiency), "fraction",
                     r->efficiency_doc};
  out[3] = (MmField)MM_FIELDS_END;
}

static void protocols_table(MmField out[MM_PROTO_COUNT + 1])
{
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++)
    out[pr] = (MmField){mm_protocol_names[pr], MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
                        pr == MM_PROTO_SIMPLE ? "the bulk protocol: latency_us, base_latency_us, efficiency"
                                              : "NCCL's low-latency protocol: latency_us, base_latency_us, efficiency"};
  out[MM_PROTO_COUNT] = (MmField)MM_FIELDS_END;
}

/* ---- networks -------------------------------------------------------------------------- */

typedef struct {
  int topology;
  int64_t links_per_gpu, nics_per_node, nics_per_gpu;
  double link_bw_GBps, nic_bw_Gbps;
  gboolean in_network_reduction;
  char *source, *fit, *name;
  MmParam efficiency, in_network_efficiency, one_shot_latency_us;
  MmParam latency_us, base_latency_us; /* shorthand for protocols.simple */
} NetRaw;
#define NET(f) ((gssize)offsetof(NetRaw, f))

#define EFFICIENCY_FIELD                                                                                        \
  {"efficiency", MM_F_PARAM, FALSE, 1e-3, 1, 1.0, NULL, NET(efficiency), "fraction",                            \
   "achievable fraction of line rate with the bulk (simple) protocol: the links' effective bandwidth; default 1"}
#define IN_NETWORK_EFFICIENCY_FIELD                                                                             \
  {"in_network_efficiency", MM_F_PARAM, FALSE, 1e-3, 1, NAN, NULL, NET(in_network_efficiency), "fraction",      \
   "fraction of line rate the in-network reduction delivers (default: efficiency)"}
#define ONE_SHOT_FIELD                                                                                          \
  {"one_shot_latency_us", MM_F_PARAM, FALSE, 0, 1e6, 5.5, NULL, NET(one_shot_latency_us), "us",                 \
   "a serving engine's one-shot AllReduce kernel (every GPU writes its buffer into each peer's, flags in the "   \
   "data, and sums; algorithm \"one_shot\"): fixed cost per call; default fitted to SGLang's 8 x H100 custom "   \
   "all-reduce measurement (5.7 us at 4 KiB, 7.8 us at 32 KiB)"}
#define SIMPLE_SHORTHAND_FIELDS                                                                                 \
  {"latency_us", MM_F_PARAM, FALSE, 0, 1e6, NAN, NULL, NET(latency_us), "us",                                   \
   "shorthand for protocols.simple.latency_us (give one of the two)"},                                          \
  {"base_latency_us", MM_F_PARAM, FALSE, 0, 1e6, NAN, NULL, NET(base_latency_us), "us",                         \
   "shorthand for protocols.simple.base_latency_us (give one of the two)"}
#define PROTOCOLS_FIELD                                                                                         \
  {"protocols", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,                                          \
   "per protocol (simple, ll): latency_us, base_latency_us, efficiency"}
#define FIT_FIELD                                                                                               \
  {"fit", MM_F_STR, FALSE, 0, 0, 0, NULL, NET(fit), NULL,                                                       \
   "a shared fit file (hardware/fits/*.json), relative to this file's directory: the network takes its "       \
   "numbers; keys given here override them"}
#define NET_SOURCE_FIELD                                                                                        \
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, NET(source), NULL, "where the bandwidth figures come from"}

static const MmField intra_fields[] = {
  {"topology", MM_F_ENUM, TRUE, 0, 0, 0, mm_topology_names, NET(topology), NULL,
   "switch (NVSwitch), full_mesh (MI300X, MI210), ring"},
  {"links_per_gpu", MM_F_INT, TRUE, 1, 1024, 0, NULL, NET(links_per_gpu), "links", "links of one GPU"},
  {"link_bw_GBps", MM_F_NUM, TRUE, 1e-3, 1e7, 0, NULL, NET(link_bw_GBps), "GB/s",
   "one link, per direction"},
  FIT_FIELD,
  EFFICIENCY_FIELD,
  SIMPLE_SHORTHAND_FIELDS,
  PROTOCOLS_FIELD,
  ONE_SHOT_FIELD,
  {"in_network_reduction", MM_F_BOOL, FALSE, 0, 0, 0, NULL, NET(in_network_reduction), NULL,
   "the switch reduces in the network (NVLink SHARP)"},
  IN_NETWORK_EFFICIENCY_FIELD,
  NET_SOURCE_FIELD,
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
  FIT_FIELD,
  EFFICIENCY_FIELD,
  SIMPLE_SHORTHAND_FIELDS,
  PROTOCOLS_FIELD,
  {"in_network_reduction", MM_F_BOOL, FALSE, 0, 0, 0, NULL, NET(in_network_reduction), NULL,
   "switches reduce in the network (SHARP)"},
  IN_NETWORK_EFFICIENCY_FIELD,
  {"dims", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, "nodes",
   "torus2d / torus3d: nodes along each dimension (their product is the node count); NICs are the torus links"},
  NET_SOURCE_FIELD,
  MM_FIELDS_END,
};

static const MmField fit_fields[] = {
  {"name", MM_F_STR, TRUE, 0, 0, 0, NULL, NET(name), NULL, "what was measured (library, interconnect)"},
  {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, NET(source), NULL, "the measurements the numbers are fitted to"},
  EFFICIENCY_FIELD,
  PROTOCOLS_FIELD,
  ONE_SHOT_FIELD,
  IN_NETWORK_EFFICIENCY_FIELD,
  MM_FIELDS_END,
};

static void net_raw_clear(NetRaw *r)
{
  g_clear_pointer(&r->source, g_free);
  g_clear_pointer(&r->fit, g_free);
  g_clear_pointer(&r->name, g_free);
  param_clear(&r->efficiency);
  param_clear(&r->in_network_efficiency);
  param_clear(&r->one_shot_latency_us);
  param_clear(&r->latency_us);
  param_clear(&r->base_latency_us);
}

static void network_clear(MmNetwork *n)
{
  g_free(n->source);
  g_free(n->fit);
  param_clear(&n->efficiency);
  param_clear(&n->in_network_efficiency);
  param_clear(&n->one_shot_latency_s);
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
    param_clear(&n->protocol[pr].latency_s);
    param_clear(&n->protocol[pr].base_latency_s);
    param_clear(&n->protocol[pr].efficiency);
  }
  memset(n, 0, sizeof *n);
}

void mm_hardware_free(MmHardware *h)
{
  if (!h) return;
  mm_device_clear(&h->device);
  network_clear(&h->intra);
  network_clear(&h->inter);
  param_clear(&h->host_link_efficiency);
  g_free(h->path);
  g_free(h->name);
  g_free(h->source);
  g_free(h);
}

/* One source of a network's numbers: the system file's object or the fit file it names. */
typedef struct {
  MmJsonCtx ctx;
  const char *jp; /* the object's JSON path */
  NetRaw raw;
  guint64 present; /* bits of the file's table */
  const MmField *fields;
  ProtoRaw proto[MM_PROTO_COUNT];
  gboolean proto_present[MM_PROTO_COUNT][3]; /* latency, base latency, efficiency given */
} Layer;

static void layer_clear(Layer *l)
{
  net_raw_clear(&l->raw);
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
    param_clear(&l->proto[pr].latency_us);
    param_clear(&l->proto[pr].base_latency_us);
    param_clear(&l->proto[pr].efficiency);
  }
}

static gboolean layer_has(const Layer *l, const char *key)
{
  return (l->present >> mm_json_field_index(l->fields, key)) & 1;
}

/* Keys of the flat layout the protocol table replaced: a message that says where they went. */
static gboolean reject_flat_protocol_keys(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, GError **error)
{
  static const char *const moved[][2] = {
    {"ll_latency_us", "protocols.ll.latency_us"},
    {"ll_base_latency_us", "protocols.ll.base_latency_us"},
    {"ll_efficiency", "protocols.ll.efficiency"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(moved); i++) {
    if (cJSON_GetObjectItemCaseSensitive(obj, moved[i][0])) {
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_KEY, ctx, jp, "\"%s\" is now \"%s\" (each protocol's keys: "
                    "latency_us, base_latency_us, efficiency)", moved[i][0], moved[i][1]);
      return FALSE;
    }
  }
  return TRUE;
}

/* Validates @obj (a network object or a fit file's root) into @l, with its protocols. */
static gboolean layer_parse(Layer *l, const cJSON *obj, gboolean inter, GError **error)
{
  if (!reject_flat_protocol_keys(&l->ctx, obj, l->jp, error)) return FALSE;
  if (!mm_json_apply(&l->ctx, obj, l->jp, l->fields, &l->raw, &l->present, error)) return FALSE;
  const cJSON *protocols = cJSON_GetObjectItemCaseSensitive(obj, "protocols");
  g_autofree char *pjp = g_strdup_printf("%s.protocols", l->jp);
  MmField pt[MM_PROTO_COUNT + 1];
  protocols_table(pt);
  if (protocols && !mm_json_apply(&l->ctx, protocols, pjp, pt, NULL, NULL, error)) return FALSE;
  g_autoptr(cJSON) empty = cJSON_CreateObject();
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
    const cJSON *po = protocols ? cJSON_GetObjectItemCaseSensitive(protocols, mm_protocol_names[pr]) : NULL;
    g_autofree char *jp = g_strdup_printf("%s.%s", pjp, mm_protocol_names[pr]);
    MmField f[4];
    protocol_fields((MmProtocol)pr, inter, f);
    guint64 present = 0;
    if (!mm_json_apply(&l->ctx, po ? po : empty, jp, f, &l->proto[pr], &present, error)) return FALSE;
    for (int k = 0; k < 3; k++) l->proto_present[pr][k] = (present >> k) & 1;
  }
  /* the simple protocol's shorthand keys */
  static const char *const shorthand[] = {"latency_us", "base_latency_us"};
  for (int k = 0; k < 2; k++) {
    if (l->fields == fit_fields || !layer_has(l, shorthand[k])) continue;
    if (l->proto_present[MM_PROTO_SIMPLE][k]) {
      g_autofree char *kp = g_strdup_printf("%s.%s", l->jp, shorthand[k]);
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &l->ctx, kp,
                    "give the simple protocol's %s once: here or at protocols.simple.%s", shorthand[k], shorthand[k]);
      return FALSE;
    }
    MmParam *dst = k == 0 ? &l->proto[MM_PROTO_SIMPLE].latency_us : &l->proto[MM_PROTO_SIMPLE].base_latency_us;
    param_take(dst, k == 0 ? &l->raw.latency_us : &l->raw.base_latency_us, NULL);
    l->proto_present[MM_PROTO_SIMPLE][k] = TRUE;
  }
  return TRUE;
}

/* Loads the fit file @sys names at @jp.fit into @fit. */
static gboolean load_fit(const Layer *sys, gboolean inter, const char *dir, Layer *fit, char **fit_path,
                         GError **error)
{
  g_autofree char *fjp = g_strdup_printf("%s.fit", sys->jp);
  if (sys->raw.fit[0] == '\0') {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &sys->ctx, fjp, "expected a fit file path");
    return FALSE;
  }
  *fit_path = g_path_is_absolute(sys->raw.fit) ? g_strdup(sys->raw.fit) : g_build_filename(dir, sys->raw.fit, NULL);
  g_autoptr(GError) ferr = NULL;
  g_autoptr(cJSON) root = mm_json_load_file(*fit_path, &ferr);
  if (!root) {
    if (ferr->code == MM_CONFIG_ERROR_IO)
      mm_json_error(error, MM_CONFIG_ERROR_IO, &sys->ctx, fjp, "fit file %s: %s", *fit_path, ferr->message);
    else
      g_propagate_error(error, g_steal_pointer(&ferr));
    return FALSE;
  }
  fit->ctx.file = *fit_path;
  fit->jp = "$";
  fit->fields = fit_fields;
  if (!layer_parse(fit, root, inter, error)) return FALSE;
  if (inter && layer_has(fit, "one_shot_latency_us")) {
    mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &sys->ctx, fjp,
                  "fit file %s gives one_shot_latency_us, which applies to intra_node only", *fit_path);
    return FALSE;
  }
  return TRUE;
}

/* @out takes the system's value when it gives the key, else the fit's, else the default. */
static void layered(MmParam *out, MmParam *sys, gboolean sys_has, MmParam *fit, gboolean fit_has, const char *fit_path)
{
  if (!sys_has && fit_has) param_take(out, fit, fit_path);
  else param_take(out, sys, NULL);
}

static gboolean parse_network(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, gboolean intra,
                              int64_t gpus_per_node, MmNetwork *out, GError **error)
{
  Layer sys = {.ctx = *ctx, .jp = jp, .fields = intra ? intra_fields : inter_fields};
  Layer fit = {0};
  gboolean ok = layer_parse(&sys, obj, !intra, error);
  out->source = g_steal_pointer(&sys.raw.source);
  if (ok && sys.raw.fit) {
    g_autofree char *dir = g_path_get_dirname(ctx->file);
    ok = load_fit(&sys, !intra, dir, &fit, &out->fit, error);
  }
  if (!ok) {
    layer_clear(&sys);
    layer_clear(&fit);
    return FALSE;
  }
  const gboolean with_fit = out->fit != NULL;
  out->present = TRUE;
  out->topology = (MmTopology)sys.raw.topology;
  out->in_network_reduction = sys.raw.in_network_reduction;
  layered(&out->efficiency, &sys.raw.efficiency, layer_has(&sys, "efficiency"), &fit.raw.efficiency,
          with_fit && layer_has(&fit, "efficiency"), out->fit);
  layered(&out->in_network_efficiency, &sys.raw.in_network_efficiency, layer_has(&sys, "in_network_efficiency"),
          &fit.raw.in_network_efficiency, with_fit && layer_has(&fit, "in_network_efficiency"), out->fit);
  if (intra)
    layered(&out->one_shot_latency_s, &sys.raw.one_shot_latency_us, layer_has(&sys, "one_shot_latency_us"),
            &fit.raw.one_shot_latency_us, with_fit && layer_has(&fit, "one_shot_latency_us"), out->fit);
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
    MmProtocolParams *pp = &out->protocol[pr];
    MmParam *slot[3] = {&pp->latency_s, &pp->base_latency_s, &pp->efficiency};
    MmParam *from_sys[3] = {&sys.proto[pr].latency_us, &sys.proto[pr].base_latency_us, &sys.proto[pr].efficiency};
    MmParam *from_fit[3] = {&fit.proto[pr].latency_us, &fit.proto[pr].base_latency_us, &fit.proto[pr].efficiency};
    for (int k = 0; k < 3; k++)
      layered(slot[k], from_sys[k], sys.proto_present[pr][k], from_fit[k], with_fit && fit.proto_present[pr][k], out->fit);
  }
  layer_clear(&sys);
  layer_clear(&fit);
  /* defaults derived from other keys */
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++)
    if (out->protocol[pr].base_latency_s.kind == MM_PARAM_DEFAULT && isnan(protocol_table[pr].base_latency_us[!intra]))
      out->protocol[pr].base_latency_s.value = out->protocol[MM_PROTO_SIMPLE].base_latency_s.value;
  if (out->in_network_efficiency.kind == MM_PARAM_DEFAULT) out->in_network_efficiency.value = out->efficiency.value;
  /* microseconds to seconds */
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
    out->protocol[pr].latency_s.value *= 1e-6;
    out->protocol[pr].base_latency_s.value *= 1e-6;
  }
  out->one_shot_latency_s.value *= 1e-6;

  if (intra) {
    out->links = sys.raw.links_per_gpu;
    out->link_bw_Bps = sys.raw.link_bw_GBps * 1e9;
    out->bw_per_gpu_Bps = (double)sys.raw.links_per_gpu * out->link_bw_Bps;
    if (out->topology == MM_TOPO_FULL_MESH && gpus_per_node > MM_FULL_MESH_MAX_GPUS) {
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, "$.gpus_per_node",
                    "%" G_GINT64_FORMAT " GPUs in a full mesh need %" G_GINT64_FORMAT
                    " links each; madmax models full meshes of up to %d GPUs",
                    gpus_per_node, gpus_per_node - 1, MM_FULL_MESH_MAX_GPUS);
      return FALSE;
    }
    if (out->topology == MM_TOPO_FULL_MESH && gpus_per_node > 1 && sys.raw.links_per_gpu < gpus_per_node - 1) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp,
                    "a full mesh of %" G_GINT64_FORMAT " GPUs needs at least %" G_GINT64_FORMAT
                    " links per GPU, got %" G_GINT64_FORMAT,
                    gpus_per_node, gpus_per_node - 1, sys.raw.links_per_gpu);
      return FALSE;
    }
  } else {
    gboolean per_node = layer_has(&sys, "nics_per_node");
    gboolean per_gpu = layer_has(&sys, "nics_per_gpu");
    if (per_node == per_gpu) {
      mm_json_error(error, per_node ? MM_CONFIG_ERROR_INCONSISTENT : MM_CONFIG_ERROR_MISSING_KEY, ctx,
                    jp, "give exactly one of \"nics_per_node\" and \"nics_per_gpu\"");
      return FALSE;
    }
    out->link_bw_Bps = sys.raw.nic_bw_Gbps * 1e9 / 8.0;
    out->links = per_node ? sys.raw.nics_per_node : sys.raw.nics_per_gpu * gpus_per_node;
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
  param_take(&h->host_link_efficiency, &raw.host_link_efficiency, NULL);
  if (!ok) return NULL;
  h->gpus_per_node = raw.gpus_per_node;
  h->nodes = raw.nodes;
  h->host_bw_Bps = raw.host_link_GBps * 1e9 * h->host_link_efficiency.value;
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

gboolean mm_hardware_check_nodes(const MmHardware *h, int64_t nodes, GError **error)
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
  return TRUE;
}

gboolean mm_hardware_set_nodes(MmHardware *h, int64_t nodes, GError **error)
{
  if (!mm_hardware_check_nodes(h, nodes, error)) return FALSE;
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

static void param_ref_free(gpointer p)
{
  MmParamRef *r = p;
  g_free(r->path);
  g_free(r);
}

static void add_param(GPtrArray *a, const char *path, const MmParam *p, double scale, const char *unit)
{
  MmParamRef *r = g_new0(MmParamRef, 1);
  r->path = g_strdup(path);
  r->value = p->value * scale;
  r->unit = unit;
  r->param = p;
  g_ptr_array_add(a, r);
}

GPtrArray *mm_hardware_params(const MmHardware *h)
{
  g_return_val_if_fail(h != NULL, NULL);
  GPtrArray *a = g_ptr_array_new_with_free_func(param_ref_free);
  const MmNetwork *nets[2] = {&h->intra, &h->inter};
  static const char *const where[2] = {"$.intra_node", "$.inter_node"};
  for (int i = 0; i < 2; i++) {
    const MmNetwork *n = nets[i];
    if (!n->present) continue;
    g_autofree char *eff = g_strdup_printf("%s.efficiency", where[i]);
    add_param(a, eff, &n->efficiency, 1, "fraction");
    for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
      const MmProtocolParams *pp = &n->protocol[pr];
      g_autofree char *l = g_strdup_printf("%s.protocols.%s.latency_us", where[i], mm_protocol_names[pr]);
      g_autofree char *b = g_strdup_printf("%s.protocols.%s.base_latency_us", where[i], mm_protocol_names[pr]);
      g_autofree char *e = g_strdup_printf("%s.protocols.%s.efficiency", where[i], mm_protocol_names[pr]);
      add_param(a, l, &pp->latency_s, 1e6, "us");
      add_param(a, b, &pp->base_latency_s, 1e6, "us");
      add_param(a, e, &pp->efficiency, 1, "fraction");
    }
    if (n->in_network_reduction) {
      g_autofree char *ine = g_strdup_printf("%s.in_network_efficiency", where[i]);
      add_param(a, ine, &n->in_network_efficiency, 1, "fraction");
    }
    if (i == 0) add_param(a, "$.intra_node.one_shot_latency_us", &n->one_shot_latency_s, 1e6, "us");
  }
  add_param(a, "$.host_link_efficiency", &h->host_link_efficiency, 1, "fraction");
  return a;
}

void mm_hardware_write_schema(FILE *out)
{
  mm_json_write_schema(out, "Device file (`hardware/devices/*.json`)",
                       "One accelerator: peak FLOP/s per dtype, memory, and the utilization factors "
                       "the cost model applies, each with its provenance.",
                       device_fields);
  mm_json_write_schema(out, "`utilization`", "", util_table_fields);
  mm_json_write_schema(out, "`utilization.gemm` / `utilization.hbm`", "", util_fields);
  mm_json_write_schema(out, "`efficiency`",
                       "Optional measured curves (a calibration run writes them). A compute curve "
                       "(`efficiency.KIND.DTYPE`) applies to kernels of that kind and dtype whose m, n, k and "
                       "batch each lie within the range its points span: the utilization of the nearest point "
                       "in log space (squared distance over log2 m, n, k, batch; the first listed wins a tie). "
                       "A memory curve (`efficiency.hbm.KIND`) applies to calls whose HBM bytes lie within its "
                       "points: linear interpolation in log2 bytes. Outside a curve, or without one, the "
                       "`utilization` scalar applies. `madmax describe` shows which each kernel used.",
                       efficiency_fields);
  mm_json_write_schema(out, "`efficiency.KIND.DTYPE` / `efficiency.hbm.KIND`", "", curve_fields);
  mm_json_write_schema(out, "`points[]` of a compute curve", "One call measured: its shape and the fraction of peak FLOP/s it reached.",
                       compute_point_fields);
  mm_json_write_schema(out, "`points[]` of an `hbm` curve", "One call measured: its HBM bytes and the fraction of bandwidth it reached.",
                       memory_point_fields);
  mm_json_write_schema(out, "System file (`hardware/*.json`)",
                       "A system: a device, how many per node, how many nodes, and the two networks. "
                       "Behavioural numbers (efficiencies, latencies) are a bare number or "
                       "`{\"value\", \"provenance\", \"source\"}` (provenance as for utilizations); "
                       "`madmax describe` lists each with its origin and the ones left at their defaults.",
                       system_fields);
  mm_json_write_schema(out, "`intra_node`",
                       "Per-GPU scale-up bandwidth = links_per_gpu x link_bw_GBps (per direction).",
                       intra_fields);
  mm_json_write_schema(out, "`inter_node`",
                       "Per-GPU scale-out bandwidth = NICs x nic_bw_Gbps / 8 / gpus_per_node (per direction).",
                       inter_fields);
  MmField pt[MM_PROTO_COUNT + 1];
  protocols_table(pt);
  mm_json_write_schema(out, "`protocols`",
                       "One object per protocol; every collective algorithm runs under each it supports and the "
                       "automatic choice takes the fastest. Time = base_latency_us + steps x latency_us + "
                       "bytes / (link bandwidth x efficiency).",
                       pt);
  for (int inter = 0; inter < 2; inter++) {
    for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
      MmField f[4];
      protocol_fields((MmProtocol)pr, inter, f);
      g_autofree char *title = g_strdup_printf("`%s.protocols.%s`", inter ? "inter_node" : "intra_node",
                                               mm_protocol_names[pr]);
      mm_json_write_schema(out, title, "", f);
    }
  }
  mm_json_write_schema(out, "Fit file (`hardware/fits/*.json`)",
                       "Numbers fitted once to collective measurements (nccl-tests, rccl-tests) and shared by "
                       "every system whose network names the file in `fit`: the network takes each key the "
                       "fit gives unless it gives the key itself; keys neither gives take the network's "
                       "defaults. `protocols` as in a network.",
                       fit_fields);
}

/* network: a system's intra- and inter-node networks, their protocols, shared fits and cited parameters. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"

#define BIG MM_INT_MAX

void mm__param_clear(MmParam *p)
{
  g_clear_pointer(&p->source, g_free);
}

/* Moves @src into @dst (its source string too); @fit: the fit file it came from, or NULL. */
void mm__param_take(MmParam *dst, MmParam *src, const char *fit)
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
  mm__param_clear(&r->efficiency);
  mm__param_clear(&r->in_network_efficiency);
  mm__param_clear(&r->one_shot_latency_us);
  mm__param_clear(&r->latency_us);
  mm__param_clear(&r->base_latency_us);
}

void mm__network_clear(MmNetwork *n)
{
  g_free(n->source);
  g_free(n->fit);
  mm__param_clear(&n->efficiency);
  mm__param_clear(&n->in_network_efficiency);
  mm__param_clear(&n->one_shot_latency_s);
  for (int pr = 0; pr < MM_PROTO_COUNT; pr++) {
    mm__param_clear(&n->protocol[pr].latency_s);
    mm__param_clear(&n->protocol[pr].base_latency_s);
    mm__param_clear(&n->protocol[pr].efficiency);
  }
  memset(n, 0, sizeof *n);
}


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
    mm__param_clear(&l->proto[pr].latency_us);
    mm__param_clear(&l->proto[pr].base_latency_us);
    mm__param_clear(&l->proto[pr].efficiency);
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
    mm__param_take(dst, k == 0 ? &l->raw.latency_us : &l->raw.base_latency_us, NULL);
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
  if (!sys_has && fit_has) mm__param_take(out, fit, fit_path);
  else mm__param_take(out, sys, NULL);
}

gboolean mm__parse_network(const MmJsonCtx *ctx, const cJSON *obj, const char *jp, gboolean intra,
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
  add_param(a, "$.host_mem_efficiency", &h->host_mem_efficiency, 1, "fraction");
  return a;
}


void mm__network_write_schema(FILE *out)
{
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

/* hardware: system files (hardware/) -> MmHardware: a device, nodes, and the two networks (network.c). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"

#define BIG MM_INT_MAX

/* ---- system ------------------------------------------------------------ */

const char *const mm_protocol_names[] = {"simple", "ll", NULL};
G_STATIC_ASSERT(G_N_ELEMENTS(mm_protocol_names) == MM_PROTO_COUNT + 1);
const char *const mm_param_kind_names[] = {"default", "given", "cited", NULL};

typedef struct {
  char *name, *source, *device;
  int64_t gpus_per_node, nodes;
  double host_link_GBps;
  MmParam host_link_efficiency;
  double host_mem_GBps;
  MmParam host_mem_efficiency;
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
   "achievable fraction of the host link for staged collectives and offload copies (default 0.8: an estimate)"},
  {"host_mem_GBps", MM_F_NUM, FALSE, 1e-3, 1e6, 614.4, NULL, SYS(host_mem_GBps), "GB/s",
   "the node's CPU memory bandwidth, shared by its GPUs' CPU optimizer steps (optimizer.offload: cpu); default "
   "614.4: DGX H100's two Xeon Platinum 8480C (NVIDIA DGX H100 User Guide) with 8 DDR5-4800 channels each "
   "(Intel ARK), 2 x 8 x 38.4 GB/s"},
  {"host_mem_efficiency", MM_F_PARAM, FALSE, 1e-3, 1, 0.8, NULL, SYS(host_mem_efficiency), "fraction",
   "achievable fraction of host_mem_GBps for the CPU optimizer step (default 0.8: an estimate; replace with a "
   "STREAM triad measurement of the host)"},
  {"inter_node", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "scale-out network between nodes (required when nodes > 1)"},
  MM_FIELDS_END,
};


void mm_hardware_free(MmHardware *h)
{
  if (!h) return;
  mm_device_clear(&h->device);
  mm__network_clear(&h->intra);
  mm__network_clear(&h->inter);
  mm__param_clear(&h->host_link_efficiency);
  mm__param_clear(&h->host_mem_efficiency);
  g_free(h->path);
  g_free(h->name);
  g_free(h->source);
  g_free(h);
}

/* One source of a network's numbers: the system file's object or the fit file it names. */

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
  mm__param_take(&h->host_link_efficiency, &raw.host_link_efficiency, NULL);
  mm__param_take(&h->host_mem_efficiency, &raw.host_mem_efficiency, NULL);
  if (!ok) return NULL;
  h->gpus_per_node = raw.gpus_per_node;
  h->nodes = raw.nodes;
  h->host_bw_Bps = raw.host_link_GBps * 1e9 * h->host_link_efficiency.value;
  h->host_mem_Bps = raw.host_mem_GBps * 1e9 * h->host_mem_efficiency.value;
  if (h->gpus_per_node * h->nodes > (1 << 24)) {
    mm_json_error(error, MM_CONFIG_ERROR_RANGE, &ctx, "$.nodes",
                  "%" G_GINT64_FORMAT " GPUs in all is more than madmax supports (16M)",
                  h->gpus_per_node * h->nodes);
    return NULL;
  }

  const cJSON *intra = cJSON_GetObjectItemCaseSensitive(root, "intra_node");
  const cJSON *inter = cJSON_GetObjectItemCaseSensitive(root, "inter_node");
  if (intra) {
    if (!mm__parse_network(&ctx, intra, "$.intra_node", TRUE, h->gpus_per_node, &h->intra, error)) return NULL;
  } else if (h->gpus_per_node > 1) {
    mm_json_error(error, MM_CONFIG_ERROR_MISSING_KEY, &ctx, "$",
                  "missing \"intra_node\": a node of %" G_GINT64_FORMAT " GPUs needs a scale-up network",
                  h->gpus_per_node);
    return NULL;
  }
  if (inter) {
    if (!mm__parse_network(&ctx, inter, "$.inter_node", FALSE, h->gpus_per_node, &h->inter, error)) return NULL;
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
  /* at most 2^20 nodes and 2^24 devices: the smaller bound is the one stated */
  const int64_t most = MIN((int64_t)1 << 20, ((int64_t)1 << 24) / h->gpus_per_node);
  if (nodes < 1 || nodes > most) {
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_RANGE,
                "--nodes %" G_GINT64_FORMAT ": expected 1 to %" G_GINT64_FORMAT " nodes of %" G_GINT64_FORMAT " GPUs",
                nodes, most, h->gpus_per_node);
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

static void list_file(GPtrArray *labels, GPtrArray *paths, const char *label, const char *what, const char *path)
{
  g_ptr_array_add(labels, g_strdup_printf("%s's %s", label, what));
  g_ptr_array_add(paths, g_strdup(path));
}

void mm_hardware_list_files(const char *path, const char *label, gboolean calibrated, GPtrArray *labels,
                            GPtrArray *paths)
{
  g_autoptr(MmHardware) h = mm_hardware_load(path, NULL);
  if (!h) return;
  const char *const what[] = {"device", "intra_node fit", "inter_node fit"};
  const char *const files[] = {h->device.path, h->intra.fit, h->inter.fit};
  for (guint i = 0; i < G_N_ELEMENTS(files); i++)
    if (files[i]) list_file(labels, paths, label, what[i], files[i]);
  gboolean used = FALSE;
  if (calibrated && mm_hardware_use_calibrated(h, &used, NULL) && used)
    list_file(labels, paths, label, "calibrated device", h->device.path);
}

gboolean mm_hardware_use_calibrated(MmHardware *h, gboolean *used, GError **error)
{
  *used = FALSE;
  g_autofree char *stem = g_str_has_suffix(h->device.path, ".json")
                            ? g_strndup(h->device.path, strlen(h->device.path) - 5)
                            : g_strdup(h->device.path);
  g_autofree char *cal = g_strconcat(stem, "-calibrated.json", NULL);
  if (!g_file_test(cal, G_FILE_TEST_EXISTS)) return TRUE;
  MmDevice d;
  if (!mm_device_load(cal, &d, error)) return FALSE;
  mm_device_clear(&h->device);
  h->device = d;
  *used = TRUE;
  return TRUE;
}

MmHardware *mm_hardware_parse(const char *path, const char *text, gsize len, GError **error)
{
  g_autoptr(cJSON) root = mm_json_parse_text(path, text, len, error);
  return root ? hardware_from_json(path, root, error) : NULL;
}


void mm_hardware_write_schema(FILE *out)
{
  mm__device_write_schema(out);
  mm_json_write_schema(out, "System file (`hardware/*.json`)",
                       "A system: a device, how many per node, how many nodes, and the two networks. "
                       "Behavioural numbers (efficiencies, latencies) are a bare number or "
                       "`{\"value\", \"provenance\", \"source\"}` (provenance as for utilizations); "
                       "`madmax describe` lists each with its origin and the ones left at their defaults.",
                       system_fields);
  mm__network_write_schema(out);
}

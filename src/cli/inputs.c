/* inputs: loading the three input files (and the --nodes override) for every subcommand. */
#include <string.h>

#include "cli.h"

void mm_cli_inputs_clear(MmCliInputs *in)
{
  g_clear_pointer(&in->scenario, mm_scenario_free);
  g_clear_pointer(&in->config, mm_parallel_free);
  g_clear_pointer(&in->hardware, mm_hardware_free);
  g_clear_pointer(&in->model, mm_model_free);
}

gboolean mm_cli_inputs_load(MmCliInputs *in, const char *model, const char *hardware, const char *config, int64_t nodes,
                        GError **error)
{
  *in = (MmCliInputs){0};
  if (!(in->model = mm_model_load(model, error))) return FALSE;
  if (!hardware) return TRUE;
  if (!(in->hardware = mm_hardware_load(hardware, error))) return FALSE;
  if (!(in->config = mm_parallel_load(config, error))) return FALSE;
  MmPoint pt = {.nodes = nodes};
  if (!(in->scenario = mm_scenario_new(in->model, in->hardware, in->config, &pt, error))) return FALSE;
  return TRUE;
}

gboolean mm_cli_parse_int(const char *option, const char *text, gint64 min, gint64 max, gint64 *out, GError **error)
{
  gint64 v = 0;
  if (g_ascii_string_to_signed(text, 10, min, max, &v, NULL)) {
    *out = v;
    return TRUE;
  }
  g_autofree char *shown = mm_config_printable(text);
  g_autofree char *range = max == G_MAXINT64 ? (min == 1 ? g_strdup("a positive integer")
                                                         : g_strdup_printf("an integer >= %" G_GINT64_FORMAT, min))
                                             : g_strdup_printf("an integer from %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT,
                                                               min, max);
  g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "%s %s: expected %s", option, *text ? shown : "''",
              range);
  return FALSE;
}

/* The input options: a file option's slot, or -1 for --nodes. */
static const struct {
  const char *name;
  char short_name;
  gssize offset;
} input_options[] = {
  {"model", 'm', G_STRUCT_OFFSET(MmInputPaths, model)},
  {"hardware", 'H', G_STRUCT_OFFSET(MmInputPaths, hardware)},
  {"config", 'c', G_STRUCT_OFFSET(MmInputPaths, config)},
  {"nodes", 'n', -1},
};

/* Stores one input option: a file name must not be empty, --nodes is a positive integer
 * (its upper bound depends on the system: mm_hardware_check_nodes). */
static gboolean input_option(const char *name, const char *value, gpointer data, GError **error)
{
  MmInputPaths *paths = data;
  for (guint i = 0; i < G_N_ELEMENTS(input_options); i++) {
    const gboolean is_long = name[1] == '-' && strcmp(name + 2, input_options[i].name) == 0;
    if (!is_long && !(name[1] == input_options[i].short_name && name[2] == '\0')) continue;
    if (input_options[i].offset < 0) return mm_cli_parse_int(name, value, 1, G_MAXINT64, &paths->nodes, error);
    if (!*value) {
      g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "%s '': expected a file name", name);
      return FALSE;
    }
    char **slot = G_STRUCT_MEMBER_P(paths, input_options[i].offset);
    if (paths->hardware_list && input_options[i].short_name == 'H') g_ptr_array_add(paths->hardware_list, g_strdup(value));
    g_free(*slot);
    *slot = g_strdup(value);
    return TRUE;
  }
  g_assert_not_reached();
}

void mm_cli_add_input_options(GOptionContext *ctx, MmInputPaths *paths)
{
  /* GOptionEntry holds a callback as a data pointer (ISO C has no cast between the two) */
  const union {
    GOptionArgFunc fn;
    gpointer data;
  } cb = {.fn = input_option};
  GOptionEntry entries[] = {
    {"model", 'm', G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, cb.data, "Model file (models/*.json)", "M"},
    {"hardware", 'H', G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, cb.data, "System file (hardware/*.json)", "H"},
    {"config", 'c', G_OPTION_FLAG_FILENAME, G_OPTION_ARG_CALLBACK, cb.data, "Task + parallelism file (configs/*.json)", "C"},
    {"nodes", 'n', 0, G_OPTION_ARG_CALLBACK, cb.data, "Use N nodes of the system's design instead of its node count", "N"},
    G_OPTION_ENTRY_NULL,
  };
  /* the callbacks find @paths as their group's data: the main group, made here so that the
   * options list with the command's own (call this before adding those) */
  GOptionGroup *group = g_option_context_get_main_group(ctx);
  if (!group) {
    group = g_option_group_new(NULL, NULL, NULL, paths, NULL);
    g_option_context_set_main_group(ctx, group);
  } else {
    group = g_option_group_new("inputs", "Input options:", "Show the input options", paths, NULL);
    g_option_context_add_group(ctx, group);
  }
  g_option_group_add_entries(group, entries); /* GLib copies the table */
}

gboolean mm_cli_study_load(const MmInputPaths *paths, const char *space, MmInputs **in, MmSweepSpace **sp,
                           GError **error)
{
  *in = mm_inputs_load(paths->model, paths->hardware, paths->config, error);
  if (!*in) return FALSE;
  if (paths->nodes > 0 && !mm_hardware_set_nodes((*in)->hardware, paths->nodes, error)) return FALSE;
  *sp = mm_sweep_space_new(*in, space, error);
  return *sp != NULL;
}

gboolean mm_cli_outputs_check(const MmPathArg *outputs, const MmPathArg *inputs, GError **error)
{
  gboolean any = FALSE;
  for (const MmPathArg *o = outputs; o->option; o++) any |= o->path != NULL;
  if (!any) return TRUE; /* nothing written: no system to load for it */
  g_autoptr(GArray) all = g_array_new(TRUE, TRUE, sizeof(MmPathArg));
  g_autoptr(GPtrArray) labels = g_ptr_array_new_with_free_func(g_free), files = g_ptr_array_new_with_free_func(g_free);
  for (const MmPathArg *a = inputs; a->option; a++) {
    g_array_append_val(all, *a);
    if (a->path && strcmp(a->option, "--hardware") == 0) mm_hardware_list_files(a->path, a->option, FALSE, labels, files);
  }
  for (guint i = 0; i < files->len; i++)
    g_array_append_val(all, ((MmPathArg){g_ptr_array_index(labels, i), g_ptr_array_index(files, i)}));
  return mm_outputs_check(outputs, (const MmPathArg *)(void *)all->data, error);
}

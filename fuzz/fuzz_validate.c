/* fuzz_validate: validation cases files (configs/validation/): the loader, the cases' overrides and the
 * simulations they run. The input is written as <tmp>/v/cases/input.json beside links to the
 * source tree's models/, hardware/ and configs/, so the shipped cases' "root": "../.." resolves.
 * With MM_FUZZ_SEEDS=DIR set, it first writes the shipped cases into DIR one per file (small
 * seeds: a whole cases file runs dozens of simulations). */
#define _POSIX_C_SOURCE 200809L /* symlink */
#include <glib/gstdio.h>
#include <unistd.h>

#include "fuzz.h"
#include "validate/validate.h"

/* Writes every case (and collective curve) of the shipped cases files as a file of its own. */
static void write_seeds(const char *dir)
{
  g_autofree char *vdir = mm_fuzz_path("configs/validation");
  GDir *d = g_dir_open(vdir, 0, NULL);
  mm_fuzz_require(d != NULL, "cannot list %s", vdir);
  g_mkdir_with_parents(dir, 0755);
  const char *name;
  guint n = 0;
  while ((name = g_dir_read_name(d))) {
    g_autofree char *p = g_build_filename(vdir, name, NULL), *text = NULL;
    if (!g_str_has_suffix(name, ".json") || !g_file_get_contents(p, &text, NULL, NULL)) continue;
    g_autoptr(cJSON) root = cJSON_Parse(text);
    const char *const lists[] = {"cases", "collective_cases", "skipped"};
    for (guint l = 0; root && l < G_N_ELEMENTS(lists); l++) {
      const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, lists[l]);
      for (const cJSON *it = list ? list->child : NULL; it; it = it->next) {
        g_autoptr(cJSON) one = cJSON_CreateObject();
        cJSON_AddStringToObject(one, "name", "seed");
        cJSON_AddStringToObject(one, "root", "../..");
        cJSON *arr = cJSON_AddArrayToObject(one, lists[l]);
        cJSON_AddItemToArray(arr, cJSON_Duplicate(it, TRUE));
        g_autofree char *out = cJSON_PrintUnformatted(one);
        g_autofree char *seed = g_strdup_printf("%s/%s-%u.json", dir, lists[l], n++);
        g_file_set_contents(seed, out, -1, NULL);
      }
    }
  }
  g_dir_close(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc, (void)argv;
  mm_fuzz_init();
  const char *seeds = g_getenv("MM_FUZZ_SEEDS");
  if (seeds && *seeds) write_seeds(seeds);
  const char *const links[] = {"models", "hardware", "configs"};
  for (guint i = 0; i < G_N_ELEMENTS(links); i++) {
    g_autofree char *target = mm_fuzz_path(links[i]);
    g_autofree char *link = g_build_filename(mm_fuzz_tmpdir(), links[i], NULL);
    mm_fuzz_require(symlink(target, link) == 0, "cannot link %s", link);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  g_autofree char *file = mm_fuzz_write("v/cases/input.json", data, size);
  g_autoptr(GError) error = NULL;
  g_autoptr(MmValidation) v = mm_validation_run(file, &error);
  if (!v) {
    mm_fuzz_require(error && (error->domain == MM_VALIDATE_ERROR || error->domain == MM_CONFIG_ERROR),
                    "rejected with an internal error: %s", error ? error->message : "?");
    return 0;
  }
  g_autoptr(cJSON) doc = mm_validation_json(v);
  mm_fuzz_require_finite(doc, "validation");
  return 0;
}

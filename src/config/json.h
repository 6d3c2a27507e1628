/* json: schema tables and the generic parser the config loaders share (private to src/config). */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"

#ifndef MM_CJSON_AUTOPTR_DEFINED /* shared with the other header that defines it */
#define MM_CJSON_AUTOPTR_DEFINED
G_DEFINE_AUTOPTR_CLEANUP_FUNC(cJSON, cJSON_Delete)
#endif

typedef enum {
  MM_F_INT,    /* int64_t, integral JSON number within [min, max] */
  MM_F_NUM,    /* double, finite JSON number within [min, max] */
  MM_F_BOOL,   /* gboolean */
  MM_F_STR,    /* char * (g_strdup) */
  MM_F_ENUM,   /* int, one of names[] */
  MM_F_OBJECT, /* parsed by the caller; the table documents it */
  MM_F_ARRAY,  /* parsed by the caller; the table documents it */
  MM_F_CUSTOM, /* number or string, parsed by the caller */
  MM_F_PARAM,  /* MmParam: a number, or {value, provenance, source}; value within [min, max] */
} MmFieldType;

/* One row of a schema table: a JSON key of one object. */
typedef struct {
  const char *key;
  MmFieldType type;
  gboolean required;
  double min, max;          /* INT/NUM; inclusive */
  double def;               /* INT/NUM/BOOL/ENUM default when absent */
  const char *const *names; /* ENUM values */
  gssize offset;            /* into the output struct; -1: caller handles it */
  const char *unit;         /* for docs: "bytes", "GB/s", ... */
  const char *doc;          /* for docs: one line */
} MmField;

#define MM_NO_OFFSET ((gssize)-1)
#define MM_FIELDS_END {NULL, 0, FALSE, 0, 0, 0, NULL, 0, NULL, NULL}
/* Largest integer a double holds exactly; bigger sizes are rejected as overflow. */
#define MM_INT_MAX 9007199254740992.0

/* Where a value sits, for error messages. */
typedef struct {
  const char *file;
} MmJsonCtx;

/* The largest input file madmax reads (200 MB parse in well under a second). */
#define MM_JSON_MAX_FILE_BYTES ((gsize)256 << 20)

/* Reads and parses a JSON file: a regular file (not a directory, device or FIFO) of at most
 * MM_JSON_MAX_FILE_BYTES; the root must be an object; every key and string valid UTF-8 without
 * NUL or control characters. Errors name the file and line:column or JSON path. (transfer full) */
cJSON *mm_json_load_file(const char *path, GError **error);
/* The same for @len bytes of @text (NUL-terminated) read from @path. (transfer full) */
cJSON *mm_json_parse_text(const char *path, const char *text, gsize len, GError **error);

/* @v in the fewest digits that read back as @v (1e-06, 0.1, 16777216). (transfer full) */
char *mm_json_fmt_number(double v);

/* Applies a schema table to @obj at JSON path @jpath: rejects unknown keys,
 * missing required keys, wrong types and out-of-range values; writes defaults
 * and parsed values into @out. Bit i of *@present is set when fields[i] was
 * given (@present may be NULL). */
gboolean mm_json_apply(const MmJsonCtx *ctx, const cJSON *obj, const char *jpath,
                       const MmField *fields, void *out, guint64 *present, GError **error);

/* Parses one value @item at @jpath into @out per the row @f. */
gboolean mm_json_apply_field(const MmJsonCtx *ctx, const MmField *f, const cJSON *item,
                             const char *jpath, void *out, GError **error);

/* Index of @key in @fields (asserts it exists). */
guint mm_json_field_index(const MmField *fields, const char *key);

/* Checks the JSON type of @item (an object member) and sets an error naming it. */
gboolean mm_json_expect(const MmJsonCtx *ctx, const cJSON *item, const char *jpath,
                        int cjson_type, const char *what, GError **error);

/* Sets an MM_CONFIG_ERROR with the "FILE: PATH: message" layout. Without @error nothing is
 * formatted; the rule is noted instead (mm_json_rule). */
void mm_json_error(GError **error, MmConfigError code, const MmJsonCtx *ctx, const char *jpath,
                   const char *fmt, ...) G_GNUC_PRINTF(5, 6);

/* Which rule an input broke, for counting rejections without messages (a sweep's points): the
 * last mm_json_error without a GError on this thread since mm_json_rule_clear, as a hash of its
 * message's format (mm_json_note_rule: of a text), digits left out, so that one check with other
 * numbers is one rule; 0: none. */
void mm_json_rule_clear(void);
uint64_t mm_json_rule(void);
/* Notes @text as the rule broken (a check that formats its own reason: mm_json_error's format
 * is then "%s"). */
void mm_json_note_rule(const char *text);

/* A short rendering of a JSON value for messages ("-4", "\"abc\"", "an object"). */
char *mm_json_describe_value(const cJSON *item);

/* Writes one schema table as a Markdown table. */
void mm_json_write_schema(FILE *out, const char *title, const char *intro, const MmField *fields);

/* Per-file schema writers (model.c, hardware.c, parallel.c), joined by schema.c. */
void mm_model_write_schema(FILE *out);
void mm_hardware_write_schema(FILE *out);
void mm_parallel_write_schema(FILE *out);

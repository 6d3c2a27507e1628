/* json: schema-table driven JSON validation shared by the model, hardware and config loaders. */
#define _XOPEN_SOURCE 700 /* O_CLOEXEC, S_ISSOCK */
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

G_DEFINE_QUARK(mm-config-error-quark, mm_config_error)

static _Thread_local uint64_t last_rule;

void mm_json_rule_clear(void)
{
  last_rule = 0;
}

uint64_t mm_json_rule(void)
{
  return last_rule;
}

void mm_json_note_rule(const char *text)
{
  uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a over the text but its digits */
  for (const char *p = text; *p; p++)
    if (!g_ascii_isdigit(*p)) h = (h ^ (guchar)*p) * UINT64_C(0x100000001b3);
  last_rule = h | 1; /* never 0 */
}

void mm_json_error(GError **error, MmConfigError code, const MmJsonCtx *ctx, const char *jpath,
                   const char *fmt, ...)
{
  if (!error) { /* nothing asked: nothing formatted, the rule noted */
    mm_json_note_rule(fmt);
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, MM_CONFIG_ERROR, code, "%s: %s: %s", ctx->file, jpath, msg);
}

char *mm_config_printable(const char *s)
{
  GString *g = g_string_sized_new(strlen(s));
  for (const char *p = s; *p;) {
    gunichar c = g_utf8_get_char_validated(p, -1);
    if (c == (gunichar)-1 || c == (gunichar)-2) { /* not UTF-8: the byte in hex */
      g_string_append_printf(g, "\\x%02x", (guchar)*p++);
      continue;
    }
    const char *next = g_utf8_next_char(p);
    if (c < 0x20 || (c >= 0x7f && c < 0xa0)) /* ESC and friends: shown, never obeyed */
      g_string_append_printf(g, "\\u%04x", c);
    else
      g_string_append_len(g, p, next - p);
    p = next;
  }
  return g_string_free(g, FALSE);
}

char *mm_json_fmt_number(double v)
{
  /* the shortest of %.15g, %.16g, %.17g that reads back as @v: 1e-06, not 9.9999999999999995e-07 */
  for (int prec = 15; prec < 17; prec++) {
    char *s = g_strdup_printf("%.*g", prec, v);
    if (g_ascii_strtod(s, NULL) == v) return s;
    g_free(s);
  }
  return g_strdup_printf("%.17g", v);
}

/* Line and column (1-based) of byte @off in @text. */
static void line_col(const char *text, gsize off, guint *line, guint *col)
{
  *line = 1;
  *col = 1;
  for (gsize i = 0; i < off && text[i]; i++) {
    if (text[i] == '\n') {
      (*line)++;
      *col = 1;
    } else {
      (*col)++;
    }
  }
}

/* Why cJSON stopped at byte @stop of @text (it says where, not why): a scan up to there, outside
 * strings, for nesting over cJSON's limit and a comma before a closing bracket; else the end of
 * the input inside a value (truncated), or the character found. Sets *@at to the fault's offset. */
static char *parse_fault(const char *text, gsize len, gsize stop, gsize *at)
{
  guint depth = 0;
  gboolean in_string = FALSE;
  gsize last_comma = G_MAXSIZE; /* a ',' with only whitespace after it so far */
  for (gsize i = 0; i < len && i <= stop; i++) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') i++;
      else if (c == '"') in_string = FALSE;
      continue;
    }
    if (g_ascii_isspace(c)) continue;
    if ((c == '}' || c == ']') && last_comma != G_MAXSIZE) {
      *at = last_comma;
      return g_strdup_printf("a comma before '%c' (JSON allows no trailing comma)", c);
    }
    last_comma = c == ',' ? i : G_MAXSIZE;
    if (c == '"') in_string = TRUE;
    if (c == '{' || c == '[') {
      if (++depth > CJSON_NESTING_LIMIT) {
        *at = i;
        return g_strdup_printf("nested deeper than %d levels of objects and arrays", CJSON_NESTING_LIMIT);
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      depth--;
    }
  }
  *at = stop;
  if (stop >= len) return g_strdup(in_string || depth > 0 ? "unexpected end of input (truncated file?)"
                                                          : "unexpected end of input");
  const guchar c = (guchar)text[stop];
  if (g_ascii_isprint(c)) return g_strdup_printf("unexpected character '%c'", c);
  return g_strdup_printf("unexpected byte 0x%02x", c);
}

/* ---- strings: valid UTF-8, no NUL, no control characters ----------------- */

/* Raw string tokens of a text cJSON accepted, in document order (the order of its tree). */
typedef struct {
  const char *text;
  gsize len, pos;
} Tokens;

/* The next string token's raw content (between the quotes). */
static void next_string(Tokens *t, const char **start, gsize *n)
{
  while (t->pos < t->len && t->text[t->pos] != '"') t->pos++;
  g_assert(t->pos < t->len);
  gsize a = ++t->pos;
  while (t->pos < t->len && t->text[t->pos] != '"') t->pos += t->text[t->pos] == '\\' ? 2 : 1;
  *start = t->text + a;
  *n = t->pos - a;
  t->pos++;
}

/* What is wrong with a string (@raw its JSON spelling, @decoded cJSON's), or NULL. */
static char *string_fault(const char *raw, gsize n, const char *decoded)
{
  for (gsize i = 0; i + 1 < n; i++) {
    if (raw[i] != '\\') continue;
    if (raw[i + 1] == 'u' && i + 5 < n && strncmp(raw + i + 2, "0000", 4) == 0)
      return g_strdup("contains a NUL character (\\u0000)");
    i++; /* the escaped character */
  }
  const guchar *q = (const guchar *)decoded;
  while (*q >= 0x20 && *q < 0x7f) q++;
  if (*q == 0) return NULL; /* printable ASCII (nearly every key and value): valid, no control character */
  const char *bad = NULL;
  if (!g_utf8_validate(decoded, -1, &bad))
    return g_strdup_printf("is not valid UTF-8 (byte 0x%02x at byte %" G_GSIZE_FORMAT ")", (guchar)*bad,
                           (gsize)(bad - decoded));
  for (const char *p = decoded; *p; p = g_utf8_next_char(p)) {
    gunichar c = g_utf8_get_char(p);
    if (c < 0x20 || (c >= 0x7f && c < 0xa0))
      return g_strdup_printf("contains a control character (U+%04X); names and text may not", c);
  }
  return NULL;
}

/* The first key of object @node that an earlier key of it repeats, or NULL (cJSON keeps both and
 * every lookup finds the first: a repeated key would silently drop what the second says). Small
 * objects compare pairwise; large ones through a set. */
static const char *repeated_key(const cJSON *node)
{
  guint n = 0;
  for (const cJSON *it = node->child; it; it = it->next) n++;
  if (n <= 16) {
    for (const cJSON *it = node->child; it; it = it->next)
      for (const cJSON *prev = node->child; prev != it; prev = prev->next)
        if (strcmp(prev->string, it->string) == 0) return it->string;
    return NULL;
  }
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (const cJSON *it = node->child; it; it = it->next)
    if (!g_hash_table_add(seen, it->string)) return it->string;
  return NULL;
}

/* @jpath: the node's JSON path, grown and cut back in place as the walk descends (the text of a
 * message is built only on failure). */
static gboolean check_strings(const char *path, const cJSON *node, GString *jpath, Tokens *t, GError **error)
{
  if (cJSON_IsObject(node)) {
    const char *dup = repeated_key(node);
    if (dup) {
      g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_INCONSISTENT,
                  "%s: %s.%s: the key appears twice in one object; give it once", path, jpath->str, dup);
      return FALSE;
    }
  }
  const gsize base = jpath->len;
  gint i = 0;
  for (const cJSON *it = node->child; it; it = it->next, i++) {
    const char *raw;
    gsize n;
    if (cJSON_IsObject(node)) {
      next_string(t, &raw, &n);
      g_autofree char *fault = string_fault(raw, n, it->string);
      if (fault) {
        g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_ENCODING, "%s: %s: a key %s", path, jpath->str, fault);
        return FALSE;
      }
    }
    const gboolean string = cJSON_IsString(it), nested = cJSON_IsObject(it) || cJSON_IsArray(it);
    if (!string && !nested) continue;
    if (cJSON_IsObject(node)) {
      g_string_append_c(jpath, '.');
      g_string_append(jpath, it->string);
    } else {
      g_string_append_printf(jpath, "[%d]", i);
    }
    if (string) {
      next_string(t, &raw, &n);
      g_autofree char *fault = string_fault(raw, n, it->valuestring);
      if (fault) {
        g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_ENCODING, "%s: %s: the string %s", path, jpath->str,
                    fault);
        return FALSE;
      }
    } else if (!check_strings(path, it, jpath, t, error)) {
      return FALSE;
    }
    g_string_truncate(jpath, base);
  }
  return TRUE;
}

cJSON *mm_json_parse_text(const char *path, const char *text, gsize len, GError **error)
{
  const char *end = NULL;
  /* The length counts the NUL so cJSON sees the whole buffer (see STYLE.md 7). */
  cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, TRUE);
  if (!root) {
    gsize stop = end ? (gsize)(end - text) : len, at = stop;
    g_autofree char *why = len == 0 ? g_strdup("the file is empty") : parse_fault(text, len, stop, &at);
    guint line, col;
    line_col(text, at, &line, &col);
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_PARSE, "%s:%u:%u: invalid JSON: %s", path, line, col, why);
    return NULL;
  }
  if (!cJSON_IsObject(root)) {
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_TYPE,
                "%s: $: expected a JSON object at the top level", path);
    cJSON_Delete(root);
    return NULL;
  }
  Tokens t = {text, len, 0};
  g_autoptr(GString) jpath = g_string_new("$");
  if (!check_strings(path, root, jpath, &t, error)) {
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

/* What a path that is not a regular file is, for messages. */
static const char *file_kind(mode_t m)
{
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

cJSON *mm_json_load_file(const char *path, GError **error)
{
  if (!path[0]) {
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_IO, "'': cannot read: expected a file name");
    return NULL;
  }
  /* non-blocking: a FIFO must not wait for a writer; it is refused below */
  int fd = g_open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_IO, "%s: cannot read: %s", path, g_strerror(err));
    return NULL;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_IO, "%s: cannot read: %s", path, g_strerror(err));
    close(fd);
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_IO, "%s: cannot read: %s; expected a JSON file", path,
                file_kind(st.st_mode));
    close(fd);
    return NULL;
  }
  /* read up to one byte past the limit: the file may grow while it is read */
  GString *buf = g_string_sized_new((gsize)MIN(st.st_size, (off_t)MM_JSON_MAX_FILE_BYTES) + 1);
  gboolean ok = TRUE;
  int err = 0;
  while (buf->len <= MM_JSON_MAX_FILE_BYTES) {
    char chunk[65536];
    gsize want = MIN(sizeof chunk, MM_JSON_MAX_FILE_BYTES + 1 - buf->len);
    ssize_t n = read(fd, chunk, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = FALSE;
      err = errno;
      break;
    }
    if (n == 0) break;
    g_string_append_len(buf, chunk, n);
  }
  close(fd);
  g_autofree char *text = NULL;
  gsize len = buf->len;
  text = g_string_free(buf, FALSE);
  if (!ok) {
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_IO, "%s: cannot read: %s", path, g_strerror(err));
    return NULL;
  }
  if (len > MM_JSON_MAX_FILE_BYTES) {
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_IO,
                "%s: cannot read: larger than %u MiB, the most an input file may hold", path,
                (guint)(MM_JSON_MAX_FILE_BYTES >> 20));
    return NULL;
  }
  const char *nul = memchr(text, '\0', len);
  if (nul) {
    guint line, col;
    line_col(text, (gsize)(nul - text), &line, &col);
    g_set_error(error, MM_CONFIG_ERROR, MM_CONFIG_ERROR_PARSE, "%s:%u:%u: invalid JSON: a NUL byte", path, line, col);
    return NULL;
  }
  return mm_json_parse_text(path, text, len, error);
}

char *mm_json_describe_value(const cJSON *item)
{
  if (cJSON_IsObject(item)) return g_strdup("an object");
  if (cJSON_IsArray(item)) return g_strdup("an array");
  if (cJSON_IsNull(item)) return g_strdup("null");
  if (cJSON_IsBool(item)) return g_strdup(cJSON_IsTrue(item) ? "true" : "false");
  if (cJSON_IsString(item)) { /* at most 40 characters, printable */
    const char *s = item->valuestring;
    g_autofree char *head = g_utf8_validate(s, -1, NULL) ? g_utf8_substring(s, 0, MIN(40, g_utf8_strlen(s, -1)))
                                                         : g_strndup(s, 40);
    g_autofree char *esc = mm_config_printable(head);
    return g_strdup_printf("\"%s\"", esc);
  }
  if (cJSON_IsNumber(item)) return mm_json_fmt_number(item->valuedouble);
  return g_strdup("a value");
}

gboolean mm_json_expect(const MmJsonCtx *ctx, const cJSON *item, const char *jpath,
                        int cjson_type, const char *what, GError **error)
{
  if ((item->type & 0xFF) == cjson_type) return TRUE;
  g_autofree char *got = mm_json_describe_value(item);
  mm_json_error(error, MM_CONFIG_ERROR_TYPE, ctx, jpath, "expected %s, got %s", what, got);
  return FALSE;
}

guint mm_json_field_index(const MmField *fields, const char *key)
{
  for (guint i = 0; fields[i].key; i++)
    if (strcmp(fields[i].key, key) == 0) return i;
  g_assert_not_reached();
}

static char *allowed_names(const char *const *names)
{
  GString *s = g_string_new(NULL);
  for (guint i = 0; names[i]; i++) g_string_append_printf(s, "%s\"%s\"", i ? ", " : "", names[i]);
  return g_string_free(s, FALSE);
}

static const char *type_word(MmFieldType t)
{
  switch (t) {
  case MM_F_INT: return "integer";
  case MM_F_NUM: return "number";
  case MM_F_BOOL: return "boolean";
  case MM_F_STR: return "string";
  case MM_F_ENUM: return "string";
  case MM_F_OBJECT: return "object";
  case MM_F_ARRAY: return "array";
  case MM_F_CUSTOM: return "number or string";
  case MM_F_PARAM: return "number or {value, provenance, source}";
  }
  return "value";
}

static char *range_text(const MmField *f)
{
  const char *what = f->type == MM_F_INT ? "integer" : "number";
  g_autofree char *lo = mm_json_fmt_number(f->min), *hi = mm_json_fmt_number(f->max);
  g_autofree char *upper = f->max < MM_INT_MAX ? g_strdup_printf(" up to %s", hi) : g_strdup("");
  if (f->min == 1 && f->type == MM_F_INT) return g_strdup_printf("a positive integer%s", upper);
  if (f->min == 0) return g_strdup_printf("a non-negative %s%s", what, upper);
  if (f->max >= MM_INT_MAX) return g_strdup_printf("a %s >= %s", what, lo);
  return g_strdup_printf("a %s between %s and %s", what, lo, hi);
}

gboolean mm_json_apply_field(const MmJsonCtx *ctx, const MmField *f, const cJSON *item,
                             const char *jpath, void *out_, GError **error)
{
  char *out = out_;
  switch (f->type) {
  case MM_F_INT:
  case MM_F_NUM: {
    if (!cJSON_IsNumber(item)) {
      g_autofree char *got = mm_json_describe_value(item);
      mm_json_error(error, MM_CONFIG_ERROR_TYPE, ctx, jpath, "expected %s, got %s",
                    type_word(f->type), got);
      return FALSE;
    }
    double v = item->valuedouble;
    /* the messages' texts are built only on failure (loading formats nothing for valid input) */
    if (!isfinite(v) || fabs(v) > MM_INT_MAX) {
      g_autofree char *want = range_text(f);
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, jpath,
                    "%.6g is too large (overflow); expected %s", v, want);
      return FALSE;
    }
    if ((f->type == MM_F_INT && v != floor(v)) || v < f->min || v > f->max) {
      g_autofree char *want = range_text(f);
      g_autofree char *got = mm_json_fmt_number(v);
      if (f->type == MM_F_INT && v != floor(v))
        mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, jpath, "%s is not an integer; expected %s", got, want);
      else
        mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, jpath, "%s is not %s", got, want);
      return FALSE;
    }
    if (f->offset >= 0) {
      if (f->type == MM_F_INT)
        *(int64_t *)(out + f->offset) = (int64_t)v;
      else
        *(double *)(out + f->offset) = v;
    }
    return TRUE;
  }
  case MM_F_BOOL:
    if (!cJSON_IsBool(item)) {
      g_autofree char *got = mm_json_describe_value(item);
      mm_json_error(error, MM_CONFIG_ERROR_TYPE, ctx, jpath, "expected true or false, got %s", got);
      return FALSE;
    }
    if (f->offset >= 0) *(gboolean *)(out + f->offset) = cJSON_IsTrue(item);
    return TRUE;
  case MM_F_STR:
    if (!cJSON_IsString(item)) {
      g_autofree char *got = mm_json_describe_value(item);
      mm_json_error(error, MM_CONFIG_ERROR_TYPE, ctx, jpath, "expected a string, got %s", got);
      return FALSE;
    }
    if (f->offset >= 0) {
      char **slot = (char **)(out + f->offset);
      g_free(*slot);
      *slot = g_strdup(item->valuestring);
    }
    return TRUE;
  case MM_F_ENUM: {
    if (!cJSON_IsString(item)) {
      g_autofree char *allowed = allowed_names(f->names);
      g_autofree char *got = mm_json_describe_value(item);
      mm_json_error(error, MM_CONFIG_ERROR_TYPE, ctx, jpath, "expected one of %s, got %s", allowed,
                    got);
      return FALSE;
    }
    for (int i = 0; f->names[i]; i++) {
      if (strcmp(f->names[i], item->valuestring) == 0) {
        if (f->offset >= 0) *(int *)(out + f->offset) = i;
        return TRUE;
      }
    }
    g_autofree char *allowed = allowed_names(f->names);
    g_autofree char *got = mm_json_describe_value(item);
    mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, ctx, jpath, "unknown value %s; expected one of %s",
                  got, allowed);
    return FALSE;
  }
  case MM_F_OBJECT:
    return mm_json_expect(ctx, item, jpath, cJSON_Object, "an object", error);
  case MM_F_ARRAY:
    return mm_json_expect(ctx, item, jpath, cJSON_Array, "an array", error);
  case MM_F_PARAM: {
    /* a bare number, or the number with its evidence (as a device's utilization) */
    MmField num = *f;
    num.type = MM_F_NUM;
    num.offset = MM_NO_OFFSET;
    MmParam *p = f->offset >= 0 ? (MmParam *)(out + f->offset) : NULL;
    if (cJSON_IsNumber(item)) {
      if (!mm_json_apply_field(ctx, &num, item, jpath, NULL, error)) return FALSE;
      if (p) {
        p->value = item->valuedouble;
        p->kind = MM_PARAM_GIVEN;
        g_clear_pointer(&p->source, g_free);
      }
      return TRUE;
    }
    if (!cJSON_IsObject(item)) {
      g_autofree char *got = mm_json_describe_value(item);
      mm_json_error(error, MM_CONFIG_ERROR_TYPE, ctx, jpath,
                    "expected a number or {\"value\", \"provenance\", \"source\"}, got %s", got);
      return FALSE;
    }
    const MmField sub[] = {
      {"value", MM_F_NUM, TRUE, f->min, f->max, 0, NULL, (gssize)offsetof(MmParam, value), f->unit, NULL},
      {"provenance", MM_F_ENUM, TRUE, 0, 0, 0, mm_provenance_names, (gssize)offsetof(MmParam, provenance), NULL,
       NULL},
      {"source", MM_F_STR, FALSE, 0, 0, 0, NULL, (gssize)offsetof(MmParam, source), NULL, NULL},
      MM_FIELDS_END,
    };
    MmParam tmp = {0};
    gboolean ok = mm_json_apply(ctx, item, jpath, sub, &tmp, NULL, error);
    if (ok && p) {
      g_free(p->source);
      p->value = tmp.value;
      p->provenance = tmp.provenance;
      p->source = g_steal_pointer(&tmp.source);
      p->kind = MM_PARAM_CITED;
    }
    g_free(tmp.source);
    return ok;
  }
  case MM_F_CUSTOM:
    if (cJSON_IsNumber(item) || cJSON_IsString(item)) return TRUE;
    {
      g_autofree char *got = mm_json_describe_value(item);
      mm_json_error(error, MM_CONFIG_ERROR_TYPE, ctx, jpath, "expected a number or a string, got %s",
                    got);
    }
    return FALSE;
  }
  g_assert_not_reached();
}

static void apply_default(const MmField *f, char *out)
{
  /* A NaN default means "computed by the caller": leave the slot as prefilled. */
  if (f->offset < 0 || isnan(f->def)) return;
  switch (f->type) {
  case MM_F_INT: *(int64_t *)(out + f->offset) = (int64_t)f->def; break;
  case MM_F_NUM: *(double *)(out + f->offset) = f->def; break;
  case MM_F_BOOL: *(gboolean *)(out + f->offset) = f->def != 0; break;
  case MM_F_ENUM: *(int *)(out + f->offset) = (int)f->def; break;
  case MM_F_PARAM:
    ((MmParam *)(out + f->offset))->value = f->def;
    ((MmParam *)(out + f->offset))->kind = MM_PARAM_DEFAULT;
    break;
  default: break;
  }
}

gboolean mm_json_apply(const MmJsonCtx *ctx, const cJSON *obj, const char *jpath,
                       const MmField *fields, void *out, guint64 *present, GError **error)
{
  g_return_val_if_fail(cJSON_IsObject(obj), FALSE);
  guint64 seen = 0;
  guint nfields = 0;
  while (fields[nfields].key) nfields++;
  g_assert(nfields <= 64);

  /* Unknown keys first: a typo explains a "missing" key better than the absence does. */
  for (const cJSON *it = obj->child; it; it = it->next) {
    guint i;
    for (i = 0; i < nfields; i++)
      if (strcmp(fields[i].key, it->string) == 0) break;
    if (i == nfields) {
      GString *known = g_string_new(NULL);
      for (guint k = 0; k < nfields; k++) g_string_append_printf(known, "%s%s", k ? ", " : "", fields[k].key);
      g_autofree char *known_s = g_string_free(known, FALSE);
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_KEY, ctx, jpath,
                    "unknown key \"%s\"; expected one of: %s", it->string, known_s);
      return FALSE;
    }
    if (seen & (G_GUINT64_CONSTANT(1) << i)) {
      mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jpath, "key \"%s\" appears twice",
                    it->string);
      return FALSE;
    }
    seen |= G_GUINT64_CONSTANT(1) << i;
  }
  for (guint i = 0; i < nfields; i++) {
    const MmField *f = &fields[i];
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, f->key);
    if (!item) {
      if (f->required) {
        mm_json_error(error, MM_CONFIG_ERROR_MISSING_KEY, ctx, jpath,
                      "missing required key \"%s\" (%s%s%s)", f->key, type_word(f->type),
                      f->unit ? ", " : "", f->unit ? f->unit : "");
        return FALSE;
      }
      apply_default(f, out);
      continue;
    }
    /* JPATH.KEY, on the stack when it fits (no allocation per field) */
    char buf[256];
    g_autofree char *heap = NULL;
    const gsize jl = strlen(jpath), kl = strlen(f->key);
    const char *sub = buf;
    if (jl + kl + 2 <= sizeof buf) {
      memcpy(buf, jpath, jl);
      buf[jl] = '.';
      memcpy(buf + jl + 1, f->key, kl + 1);
    } else {
      sub = heap = g_strdup_printf("%s.%s", jpath, f->key);
    }
    if (!mm_json_apply_field(ctx, f, item, sub, out, error)) return FALSE;
  }
  if (present) *present = seen;
  return TRUE;
}

void mm_json_write_schema(FILE *out, const char *title, const char *intro, const MmField *fields)
{
  fprintf(out, "### %s\n\n%s\n\n", title, intro);
  fprintf(out, "| key | type | required | default | range | unit | meaning |\n");
  fprintf(out, "|---|---|---|---|---|---|---|\n");
  for (guint i = 0; fields[i].key; i++) {
    const MmField *f = &fields[i];
    g_autofree char *type = NULL;
    g_autofree char *def = NULL;
    g_autofree char *range = NULL;
    if (f->type == MM_F_ENUM) {
      g_autofree char *names = allowed_names(f->names);
      type = g_strdup_printf("one of %s", names);
      def = f->required ? g_strdup("")
            : isnan(f->def) ? g_strdup("derived")
                            : g_strdup_printf("\"%s\"", f->names[(int)f->def]);
    } else {
      type = g_strdup(type_word(f->type));
      if (f->required)
        def = g_strdup("");
      else if (isnan(f->def))
        def = g_strdup("derived");
      else if (f->type == MM_F_INT || f->type == MM_F_NUM || f->type == MM_F_PARAM)
        def = mm_json_fmt_number(f->def);
      else if (f->type == MM_F_BOOL)
        def = g_strdup(f->def != 0 ? "true" : "false");
      else
        def = g_strdup("");
    }
    if (f->type == MM_F_INT || f->type == MM_F_NUM || f->type == MM_F_PARAM) {
      g_autofree char *lo = mm_json_fmt_number(f->min), *hi = mm_json_fmt_number(f->max);
      if (f->max >= MM_INT_MAX)
        range = g_strdup_printf(">= %s", lo);
      else
        range = g_strdup_printf("%s .. %s", lo, hi);
    } else {
      range = g_strdup("");
    }
    fprintf(out, "| `%s` | %s | %s | %s | %s | %s | %s |\n", f->key, type,
            f->required ? "yes" : "no", def, range, f->unit ? f->unit : "", f->doc ? f->doc : "");
  }
  fprintf(out, "\n");
}

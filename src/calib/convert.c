/* convert: rocblas-bench, hipblaslt-bench and nccl-tests outputs -> calibration rows (docs/CALIBRATION.md). */
#include "convert.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

/* Shapes and sizes above this are not a real run (and their products would leave the doubles). */
#define MAX_DIM 1099511627776.0 /* 2^40 */

/* The error every converter reports: file, line (0: the whole file), what was expected. */
static gboolean G_GNUC_PRINTF(4, 5) fail(GError **error, const char *path, guint line, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  if (line)
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT, "%s:%u: %s", path, line, msg);
  else
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT, "%s: %s", path, msg);
  return FALSE;
}

/* @s for a message: at most 40 characters, control bytes escaped. (transfer full) */
static char *shown(const char *s)
{
  g_autofree char *cut = g_strndup(s, 40);
  return g_strescape(cut, NULL);
}

/* A number: the whole field, finite. */
static gboolean parse_num(const char *s, double *out)
{
  char *end = NULL;
  errno = 0;
  double v = g_ascii_strtod(s, &end);
  if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v)) return FALSE;
  *out = v;
  return TRUE;
}

/* A shape or count: a whole number in [1, 2^40]. */
static gboolean parse_dim(const char *s, double *out)
{
  double v = 0;
  if (!parse_num(s, &v) || v != floor(v) || v < 1 || v > MAX_DIM) return FALSE;
  *out = v;
  return TRUE;
}

/* Seconds from a time field in @unit_s (1e-6: microseconds): finite and > 0. */
static gboolean parse_time(const char *s, double unit_s, double *out_s)
{
  double v = 0;
  if (!parse_num(s, &v) || v <= 0 || v > 1e15) return FALSE;
  *out_s = v * unit_s;
  return TRUE;
}

/* Whitespace-separated words of @line. (transfer full) */
static char **words(const char *line)
{
  char **w = g_strsplit_set(line, " \t", -1);
  guint o = 0;
  for (guint i = 0; w[i]; i++)
    if (*w[i])
      w[o++] = w[i];
    else
      g_free(w[i]);
  w[o] = NULL;
  return w;
}

/* Comma-separated fields of @line, each stripped; a trailing empty field (some rocblas-bench
 * headers end in ',') dropped. (transfer full) */
static char **fields(const char *line)
{
  char **f = g_strsplit(line, ",", -1);
  guint n = 0;
  for (; f[n]; n++) g_strstrip(f[n]);
  if (n > 1 && *f[n - 1] == '\0') g_clear_pointer(&f[n - 1], g_free);
  return f;
}

/* The file's lines (\r and trailing blanks dropped), or NULL and @error. (transfer full) */
static char **read_lines(const char *path, GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  g_autoptr(GError) local = NULL;
  if (!g_file_get_contents(path, &text, &len, &local)) {
    fail(error, path, 0, "%s", local->message);
    return NULL;
  }
  const char *nul = memchr(text, '\0', len);
  if (nul) {
    guint line = 1;
    for (const char *p = text; p < nul; p++) line += *p == '\n';
    fail(error, path, line, "a NUL byte: expected a text file");
    return NULL;
  }
  char **lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i]; i++) g_strchomp(lines[i]);
  return lines;
}

/* ---- GEMM: rocblas-bench and hipblaslt-bench -------------------------------- */

/* rocBLAS / hipBLASLt datatype names (rocblas_datatype, hipDataType "_r" spellings and
 * rocblas-bench's one-letter -r shorthands) -> the madmax dtype and bytes per element. */
static const struct {
  const char *name, *dtype;
  double bytes;
} blas_types[] = {
  {"bf16_r", "bf16", 2}, {"f16_r", "fp16", 2},    {"h", "fp16", 2},       {"f32_r", "fp32", 4},
  {"s", "fp32", 4},      {"xf32_r", "tf32", 4},   {"f64_r", "fp64", 8},   {"d", "fp64", 8},
  {"f8_r", "fp8", 1},    {"bf8_r", "fp8", 1},     {"f8_fnuz_r", "fp8", 1}, {"bf8_fnuz_r", "fp8", 1},
  {"i8_r", "int8", 1},   {"i32_r", "int32", 4},
};

static int blas_type(const char *name)
{
  for (guint i = 0; i < G_N_ELEMENTS(blas_types); i++)
    if (!g_ascii_strcasecmp(name, blas_types[i].name)) return (int)i;
  return -1;
}

static char *blas_type_names(void)
{
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < G_N_ELEMENTS(blas_types); i++)
    g_string_append_printf(s, "%s%s", i ? ", " : "", blas_types[i].name);
  return g_string_free(s, FALSE);
}

/* One tool's spelling of the same CSV result. */
typedef struct {
  const char *tool;     /* "rocblas-bench" */
  const char *gflops;   /* the column before the time: "rocblas-Gflops" */
  const char *library;  /* the "<library> version: X" line -> header "blas" */
} BlasFlavor;

static const BlasFlavor rocblas_flavor = {"rocblas-bench", "rocblas-Gflops", "rocBLAS"};
static const BlasFlavor hipblaslt_flavor = {"hipblaslt-bench", "hipblaslt-Gflops", "hipBLASLt"};

/* Types given on the last bench command line seen (-r/--precision/--a_type, --c_type, --d_type). */
typedef struct {
  char *a, *c, *d;
} BenchOpts;

static void bench_opts_clear(BenchOpts *o)
{
  g_clear_pointer(&o->a, g_free);
  g_clear_pointer(&o->c, g_free);
  g_clear_pointer(&o->d, g_free);
}

static void bench_opts_scan(BenchOpts *o, const char *line, const char *tool)
{
  if (!strstr(line, tool)) return;
  bench_opts_clear(o);
  g_auto(GStrv) w = words(line);
  for (guint i = 0; w[i] && w[i + 1]; i++) {
    char **slot = !strcmp(w[i], "-r") || !strcmp(w[i], "--precision") || !strcmp(w[i], "--a_type") ? &o->a
                  : !strcmp(w[i], "--c_type")                                                      ? &o->c
                  : !strcmp(w[i], "--d_type")                                                      ? &o->d
                                                                                                   : NULL;
    if (slot) {
      g_free(*slot);
      *slot = g_strdup(w[i + 1]);
    }
  }
}

/* The CSV header if @line is one ("[0]:" prefix dropped), else NULL. */
static const char *blas_header(const char *line, const BlasFlavor *fl)
{
  const char *s = line + strspn(line, " \t");
  if (*s == '[') {
    const char *c = strstr(s, "]:");
    if (!c) return NULL;
    s = c + 2;
  }
  if (g_ascii_strncasecmp(s, "transA,transB,", 14)) return NULL;
  g_autofree char *low = g_ascii_strdown(s, -1), *want = g_ascii_strdown(fl->gflops, -1);
  return strstr(low, want) ? s : NULL;
}

/* A values line starts with a transpose letter and a comma. */
static gboolean blas_values(const char *line)
{
  const char *s = line + strspn(line, " \t");
  return *s && strchr("NTCntc", *s) && s[1 + strspn(s + 1, " ")] == ',';
}

static int column(char **cols, const char *name, int from)
{
  for (int i = from; cols[i]; i++)
    if (!g_ascii_strcasecmp(cols[i], name)) return i;
  return -1;
}

/* "Device ID 0 : AMD Instinct MI350X gfx950:sramecc+:xnack-" and "<library> version: X". */
static void blas_meta(MmCalibTable *t, const char *line, const BlasFlavor *fl)
{
  const char *s = line + strspn(line, " \t");
  g_autofree char *lib = g_strdup_printf("%s version:", fl->library);
  if (g_str_has_prefix(s, lib) && !mm_calib_table_meta(t, "blas")) {
    g_autofree char *v = g_strstrip(g_strdup(s + strlen(lib)));
    g_autofree char *blas = g_strdup_printf("%s %s", fl->library, v);
    if (*v) mm_calib_table_set_meta(t, "blas", blas);
  }
  if (g_str_has_prefix(s, "Device ID ") && strstr(s, " : ") && !mm_calib_table_meta(t, "device")) {
    g_autofree char *name = g_strstrip(g_strdup(strstr(s, " : ") + 3));
    char *last = strrchr(name, ' ');
    if (last && g_str_has_prefix(last + 1, "gfx")) {
      g_autofree char *arch = g_strndup(last + 1, strcspn(last + 1, ":"));
      mm_calib_table_set_meta(t, "arch", arch);
      *last = '\0';
    }
    if (*name) mm_calib_table_set_meta(t, "device", name);
  }
}

/* One values line -> a row. */
static gboolean blas_row(const char *path, guint li, char **cols, char **vals, const BenchOpts *opt,
                         const BlasFlavor *fl, const char *source, MmCalibTable *t, GError **error)
{
  int im = column(cols, "M", 0), in = column(cols, "N", 0), ik = column(cols, "K", 0);
  int ib = column(cols, "batch_count", 0), ig = column(cols, fl->gflops, 0);
  int ius = column(cols, "us", ig);
  int ia = column(cols, "a_type", 0), ic = column(cols, "c_type", 0), id = column(cols, "d_type", 0);
  MmCalibRow r = {.batch = 1, .variant = "vendor", .source = (char *)source};
  double *dims[] = {&r.m, &r.n, &r.k, &r.batch};
  const int at[] = {im, in, ik, ib};
  const char *names[] = {"M", "N", "K", "batch_count"};
  for (guint i = 0; i < 4; i++)
    if (at[i] >= 0 && !parse_dim(vals[at[i]], dims[i])) {
      g_autofree char *v = shown(vals[at[i]]);
      return fail(error, path, li, "column %s: \"%s\" is not a whole number between 1 and 2^40", names[i], v);
    }
  double s = 0;
  if (!parse_time(vals[ius], 1e-6, &s)) {
    g_autofree char *v = shown(vals[ius]);
    return fail(error, path, li, "column us: \"%s\" is not a time in microseconds > 0", v);
  }
  const char *a = ia >= 0 ? vals[ia] : opt->a ? opt->a : id >= 0 ? vals[id] : NULL;
  const char *o = id >= 0 ? vals[id] : ic >= 0 ? vals[ic] : opt->d ? opt->d : opt->c ? opt->c : a;
  if (!a)
    return fail(error, path, li,
                "no a_type column and no %s command line (-r or --a_type) before it: cannot tell the dtype",
                fl->tool);
  int ta = blas_type(a), to = blas_type(o);
  if (ta < 0 || to < 0) {
    g_autofree char *v = shown(ta < 0 ? a : o), *known = blas_type_names();
    return fail(error, path, li, "data type \"%s\": expected one of %s", v, known);
  }
  gboolean gemv = r.m <= 16;
  r.bench = gemv ? "gemv" : "gemm";
  r.kind = r.bench;
  r.dtype = (char *)blas_types[ta].dtype;
  r.flops = 2 * r.m * r.n * r.k * r.batch;
  r.bytes = (blas_types[ta].bytes * (r.m * r.k + r.k * r.n) + blas_types[to].bytes * r.m * r.n) * r.batch;
  r.median_s = r.min_s = r.max_s = s;
  mm_calib_table_add(t, &r);
  return TRUE;
}

static gboolean convert_blas(const char *path, char **lines, const BlasFlavor *fl, MmCalibTable *t,
                             GError **error)
{
  g_autofree char *base = g_path_get_basename(path);
  g_autofree char *source = g_strdup_printf("%s %s", fl->tool, base);
  BenchOpts opt = {0};
  gboolean ok = TRUE;
  guint results = 0;
  for (guint li = 0; ok && lines[li]; li++) {
    blas_meta(t, lines[li], fl);
    bench_opts_scan(&opt, lines[li], fl->tool);
    const char *h = blas_header(lines[li], fl);
    if (!h) continue;
    g_auto(GStrv) cols = fields(h);
    guint nc = g_strv_length(cols);
    int ig = column(cols, fl->gflops, 0);
    const char *need[] = {"M", "N", "K", fl->gflops};
    for (guint i = 0; ok && i < G_N_ELEMENTS(need); i++)
      if (column(cols, need[i], 0) < 0)
        ok = fail(error, path, li + 1, "the header has no column %s", need[i]);
    if (ok && column(cols, "us", ig) < 0) ok = fail(error, path, li + 1, "the header has no column us after %s", fl->gflops);
    guint hl = li, n_values = 0;
    while (ok && lines[li + 1] && blas_values(lines[li + 1])) {
      li++;
      g_auto(GStrv) vals = fields(lines[li]);
      guint nv = g_strv_length(vals);
      if (nv != nc)
        ok = fail(error, path, li + 1, "%u fields, expected %u as in the header on line %u", nv, nc, hl + 1);
      else
        ok = blas_row(path, li + 1, cols, vals, &opt, fl, source, t, error);
      n_values++;
    }
    if (ok && n_values == 0)
      ok = fail(error, path, hl + 2, "expected a values line (N,T,...; %u fields) after the header on line %u", nc,
                hl + 1);
    results += n_values;
  }
  bench_opts_clear(&opt);
  if (ok && results == 0)
    ok = fail(error, path, 0, "no %s result: expected a header line \"transA,transB,...,%s,us\" and a values line",
              fl->tool, fl->gflops);
  if (ok) mm_calib_table_set_meta(t, "platform", "rocm");
  return ok;
}

static gboolean convert_rocblas(const char *path, char **lines, MmCalibTable *t, GError **error)
{
  return convert_blas(path, lines, &rocblas_flavor, t, error);
}

static gboolean convert_hipblaslt(const char *path, char **lines, MmCalibTable *t, GError **error)
{
  return convert_blas(path, lines, &hipblaslt_flavor, t, error);
}

/* ---- collectives: nccl-tests and rccl-tests --------------------------------- */

/* The test binaries and the madmax bench each measures. */
static const struct {
  const char *binary, *alias, *bench;
} nccl_tests[] = {
  {"all_reduce_perf", "allreduce", "allreduce"},          {"all_gather_perf", "allgather", "allgather"},
  {"reduce_scatter_perf", "reducescatter", "reducescatter"}, {"alltoall_perf", "alltoall", "alltoall"},
  {"broadcast_perf", "broadcast", "broadcast"},
};

/* nccl-tests' -d type names -> madmax dtypes. */
static const struct {
  const char *name, *dtype;
} nccl_types[] = {
  {"float", "fp32"},  {"half", "fp16"},     {"bfloat16", "bf16"},   {"double", "fp64"},
  {"int8", "int8"},   {"uint8", "uint8"},   {"int32", "int32"},     {"int", "int32"},
  {"uint32", "uint32"}, {"int64", "int64"}, {"uint64", "uint64"},   {"fp8_e4m3", "fp8"},
  {"fp8_e5m2", "fp8"}, {"f8e4m3", "fp8"},   {"f8e5m2", "fp8"},
};

/* Which collective ran: a test binary named in the output, else a name in the file's name. */
static const char *nccl_bench(const char *path, char **lines)
{
  for (guint li = 0; lines[li]; li++)
    for (guint i = 0; i < G_N_ELEMENTS(nccl_tests); i++)
      if (strstr(lines[li], nccl_tests[i].binary)) return nccl_tests[i].bench;
  g_autofree char *base = g_path_get_basename(path);
  g_autofree char *low = g_ascii_strdown(base, -1);
  for (guint i = 0; i < G_N_ELEMENTS(nccl_tests); i++) {
    g_autofree char *under = g_strndup(nccl_tests[i].binary, strlen(nccl_tests[i].binary) - 5); /* "_perf" */
    if (strstr(low, nccl_tests[i].alias) || strstr(low, under)) return nccl_tests[i].bench;
  }
  return NULL;
}

static gboolean all_digits(const char *s)
{
  return *s && strspn(s, "0123456789") == strlen(s);
}

static gboolean convert_nccl(const char *path, char **lines, MmCalibTable *t, GError **error)
{
  const char *bench = nccl_bench(path, lines);
  if (!bench) {
    GString *names = g_string_new(NULL);
    for (guint i = 0; i < G_N_ELEMENTS(nccl_tests); i++)
      g_string_append_printf(names, "%s%s", i ? ", " : "", nccl_tests[i].binary);
    g_autofree char *list = g_string_free(names, FALSE);
    return fail(error, path, 0,
                "cannot tell which collective ran: expected a line naming one of %s, or a file name that does",
                list);
  }
  /* Ranks: one "#  Rank  r ..." line per rank; without them, nThread x nGpus of one process. */
  double ranks = 0, threads = 0, gpus = 0, unit_s = 1e-6;
  gboolean have_unit = FALSE;
  for (guint li = 0; lines[li]; li++) {
    if (lines[li][0] != '#') continue;
    g_auto(GStrv) w = words(lines[li] + 1);
    if (w[0] && !strcmp(w[0], "Rank") && w[1] && all_digits(w[1])) {
      ranks++;
      const char *dev = strstr(lines[li], "] ");
      if (dev && !mm_calib_table_meta(t, "device")) {
        g_autofree char *name = g_strstrip(g_strdup(dev + 2));
        if (*name) mm_calib_table_set_meta(t, "device", name);
      }
    }
    if (w[0] && !strcmp(w[0], "nThread") && w[1] && w[2] && !strcmp(w[2], "nGpus") && w[3])
      if (!parse_dim(w[1], &threads) || !parse_dim(w[3], &gpus)) {
        g_autofree char *v = shown(lines[li]);
        return fail(error, path, li + 1, "expected \"# nThread N nGpus G ...\" with whole numbers, got \"%s\"", v);
      }
    if (!have_unit && (strstr(lines[li], "(us)") || strstr(lines[li], "(ms)")))
      have_unit = TRUE, unit_s = strstr(lines[li], "(us)") ? 1e-6 : 1e-3;
  }
  if (ranks == 0) ranks = threads * gpus;
  if (ranks == 0)
    return fail(error, path, 0,
                "cannot tell the number of ranks: expected \"#  Rank r ...\" lines or a \"# nThread N nGpus G\" line");

  g_autofree char *base = g_path_get_basename(path);
  g_autofree char *source = g_strdup_printf("nccl-tests %s", base);
  guint n_rows = 0;
  for (guint li = 0; lines[li]; li++) {
    g_auto(GStrv) w = words(lines[li]);
    if (!w[0] || !all_digits(w[0])) continue; /* comments, NCCL INFO lines, ... */
    guint nw = g_strv_length(w);
    if (nw < 11 || nw > 13)
      return fail(error, path, li + 1,
                  "%u columns, expected 11 to 13: size count type [redop root] time algbw busbw #wrong time algbw "
                  "busbw #wrong",
                  nw);
    double size = 0, count = 0;
    if (!parse_num(w[0], &size) || size > MAX_DIM * 1024) {
      g_autofree char *v = shown(w[0]);
      return fail(error, path, li + 1, "size \"%s\": expected bytes up to 2^50", v);
    }
    if (!all_digits(w[1]) || !parse_num(w[1], &count)) {
      g_autofree char *v = shown(w[1]);
      return fail(error, path, li + 1, "count \"%s\": expected a whole number of elements", v);
    }
    if (count == 0) continue; /* nccl-tests' size-0 rows launch nothing: not a collective's time */
    const char *dtype = NULL;
    for (guint i = 0; i < G_N_ELEMENTS(nccl_types); i++)
      if (!strcmp(w[2], nccl_types[i].name)) dtype = nccl_types[i].dtype;
    if (!dtype) {
      g_autofree char *v = shown(w[2]);
      return fail(error, path, li + 1, "type \"%s\": expected a nccl-tests type (float, half, bfloat16, ...)", v);
    }
    static const char *const variants[] = {"out_of_place", "in_place"};
    double s[2];
    for (guint p = 0; p < 2; p++)
      if (!parse_time(w[nw - 8 + 4 * p], unit_s, &s[p])) {
        g_autofree char *v = shown(w[nw - 8 + 4 * p]);
        return fail(error, path, li + 1, "%s time \"%s\": expected a time > 0", variants[p], v);
      }
    for (guint p = 0; p < 2; p++) {
      MmCalibRow r = {.bench = (char *)bench, .kind = "", .dtype = (char *)dtype, .m = ranks, .n = 1, .k = 1,
                      .batch = 1, .bytes = size, .variant = (char *)variants[p], .median_s = s[p],
                      .min_s = s[p], .max_s = s[p], .source = source};
      mm_calib_table_add(t, &r);
    }
    n_rows++;
  }
  if (n_rows == 0)
    return fail(error, path, 0, "no result table: expected lines \"size count type ... time algbw busbw #wrong ...\"");
  return TRUE;
}

/* ---- the table of formats ---------------------------------------------------- */

typedef gboolean (*ConvertFn)(const char *path, char **lines, MmCalibTable *t, GError **error);

static const struct {
  const char *name;
  ConvertFn fn;
} formats[] = {
  {"rocblas-bench", convert_rocblas},
  {"hipblaslt-bench", convert_hipblaslt},
  {"nccl-tests", convert_nccl},
  {"rccl-tests", convert_nccl},
};

const char *const *mm_calib_convert_formats(void)
{
  static const char *const names[] = {"rocblas-bench", "hipblaslt-bench", "nccl-tests", "rccl-tests", NULL};
  G_STATIC_ASSERT(G_N_ELEMENTS(names) == G_N_ELEMENTS(formats) + 1);
  return names;
}

gboolean mm_calib_convert(const char *format, const char *path, MmCalibTable *t, GError **error)
{
  g_return_val_if_fail(format != NULL && path != NULL && t != NULL, FALSE);
  ConvertFn fn = NULL;
  for (guint i = 0; i < G_N_ELEMENTS(formats); i++)
    if (!strcmp(format, formats[i].name)) fn = formats[i].fn;
  if (!fn) {
    g_autofree char *known = g_strjoinv(", ", (char **)mm_calib_convert_formats());
    g_autofree char *v = shown(format);
    g_set_error(error, MM_CALIB_ERROR, MM_CALIB_ERROR_INPUT, "unknown format \"%s\": expected one of %s", v, known);
    return FALSE;
  }
  g_auto(GStrv) lines = read_lines(path, error);
  if (!lines) return FALSE;
  /* Convert into a scratch table so that a failure leaves @t untouched. */
  g_autoptr(MmCalibTable) tmp = mm_calib_table_new();
  if (!fn(path, lines, tmp, error)) return FALSE;
  g_autofree char *base = g_path_get_basename(path);
  g_autofree char *src = g_strdup_printf("converted from %s output %s", format, base);
  mm_calib_table_set_meta(tmp, "source", src);
  for (guint i = 0; i < tmp->keys->len; i++) mm_calib_table_set_meta(t, tmp->keys->pdata[i], tmp->values->pdata[i]);
  for (guint i = 0; i < tmp->rows->len; i++) mm_calib_table_add(t, tmp->rows->pdata[i]);
  return TRUE;
}

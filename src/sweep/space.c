/* space: a sweep's design space (per layer kind the strategy hierarchies; pipeline, micro-batch,
 * recompute, ZeRO and node dimensions) and the point at an index of it. */
#include <math.h>
#include <string.h>

#include "config/json.h"
#include "sweep.h"

/* Block kinds whose strategy a sweep varies; the others follow the first of these present. */
static const MmBlockKind varied_kinds[] = {MM_BLOCK_TRANSFORMER, MM_BLOCK_MLP, MM_BLOCK_EMBEDDING_BAG};

static const MmField space_fields[] = {
  {"strategies", MM_F_OBJECT, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "per varied block kind (transformer, mlp, embedding_bag) the strategies its levels may use, e.g. "
   "{\"transformer\": [\"tp\", \"sp\", \"fsdp\"]}; default: every strategy that applies (sp: tp with sequence "
   "parallelism; mp in its table, row and column shardings; ep only where the block has experts)"},
  {"max_levels", MM_F_INT, FALSE, 1, 3, 2, NULL, MM_NO_OFFSET, "levels",
   "levels per hierarchy: 1 (one strategy over all devices) to 3 (inner, middle, outer)"},
  {"degrees", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, "devices",
   "degrees of the inner levels of a hierarchy (the outermost takes what is left); default: the divisors "
   "of gpus_per_node above 1"},
  {"pipeline_degrees", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, "stages",
   "pipeline stages; default: the config's"},
  {"virtual_stages", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, "chunks",
   "model chunks per stage (interleaved 1F1B); default: the config's"},
  {"pipeline_schedules", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "pipeline schedules (gpipe, 1f1b, interleaved_1f1b, zb_h1, dualpipev); a schedule's chunks per stage are "
   "the config's for interleaved_1f1b, 2 for dualpipev and 1 for the others unless virtual_stages says; "
   "default: the config's"},
  {"micro_batches", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, "samples",
   "micro-batch sizes (samples per data-parallel rank per micro-step); default: the config's"},
  {"recompute", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "activation recompute policies (none, selective, full, op_selective); default: the config's"},
  {"zero", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "ZeRO stages (0, 1, 2) of the ddp levels; default: 0"},
  {"nodes", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, "nodes",
   "node counts of the system's design; default: the system's"},
  {"tp_overlap", MM_F_ARRAY, FALSE, 0, 0, 0, NULL, MM_NO_OFFSET, NULL,
   "TP communication overlap of the sp candidates (bulk, collective_matmul, async_tp, userbuffers; "
   "docs/tp-overlap.md): each listed value is a candidate of its own; default: bulk only"},
  MM_FIELDS_END,
};

void mm_sweep_space_write_schema(FILE *out)
{
  mm_json_write_schema(out, "Sweep space (`madmax sweep --space`)",
                       "What `madmax sweep` varies. Every key narrows or widens one dimension; the points are "
                       "the product of the dimensions, and points the scenario rejects (degrees that do not "
                       "divide, groups that straddle nodes) are skipped. `--space full` varies every dimension "
                       "(pipeline degrees, micro-batches 1-8, every recompute policy and ZeRO stage).",
                       space_fields);
}

void mm_sweep_space_free(MmSweepSpace *sp)
{
  if (!sp) return;
  for (guint k = 0; k < sp->n_kinds; k++) g_free(sp->kinds[k].choices);
  g_free(sp->kinds);
  g_free(sp->nodes);
  g_free(sp->pp);
  g_free(sp->vpp);
  g_free(sp->micro);
  g_free(sp->recompute);
  g_free(sp->schedule);
  g_free(sp->zero);
  g_free(sp->path);
  g_free(sp);
}

/* ---- hierarchies -------------------------------------------------------- */

/* A candidate level strategy: a row's strategy, tp with sequence parallelism, or mp in one
 * sharding. */
typedef struct {
  MmStrategy st;
  gboolean sp;
  MmShardKind sharding;
  MmOverlap overlap; /* sp candidates: their TP overlap */
} Cand;

static MmLevel cand_level(const Cand *c, int64_t degree, MmDegreeSpec spec)
{
  MmLevel l = {.strategy = c->st, .spec = spec, .degree = degree, .sharding = c->sharding,
               .sequence_parallel = c->sp, .overlap = c->overlap};
  return l;
}

static gboolean same_cand(const Cand *a, const Cand *b)
{
  return a->st == b->st; /* one strategy appears once in a hierarchy */
}

static void add_choice(GArray *out, MmBlockKind kind, const MmLevel *levels, guint n)
{
  MmStrategyEntry e = {.key = (char *)mm_block_kind_names[kind], .n_levels = n};
  memcpy(e.levels, levels, sizeof(MmLevel) * n);
  g_array_append_val(out, e);
}

/* Every ordered hierarchy of up to @max_levels distinct candidates: inner levels of the given
 * degrees (a middle level's degree times the inner one's must divide the node or be a
 * multiple of it: the scenario rejects the others), the outermost over what is left. */
static void hierarchies(MmBlockKind kind, const Cand *cands, guint n, const int64_t *deg, guint n_deg,
                        guint max_levels, GArray *out)
{
  for (guint a = 0; a < n; a++) {
    MmLevel one = cand_level(&cands[a], 0, MM_DEG_ALL);
    add_choice(out, kind, &one, 1);
  }
  if (max_levels < 2) return;
  for (guint a = 0; a < n; a++)
    for (guint d = 0; d < n_deg; d++)
      for (guint b = 0; b < n; b++) {
        if (same_cand(&cands[a], &cands[b])) continue;
        MmLevel two[2] = {cand_level(&cands[a], deg[d], MM_DEG_NUMBER), cand_level(&cands[b], 0, MM_DEG_ALL)};
        add_choice(out, kind, two, 2);
        if (max_levels < 3) continue;
        for (guint d2 = 0; d2 < n_deg; d2++)
          for (guint c = 0; c < n; c++) {
            if (same_cand(&cands[c], &cands[a]) || same_cand(&cands[c], &cands[b])) continue;
            MmLevel three[3] = {two[0], cand_level(&cands[b], deg[d2], MM_DEG_NUMBER),
                                cand_level(&cands[c], 0, MM_DEG_ALL)};
            add_choice(out, kind, three, 3);
          }
      }
}

/* The candidates of block kind @kind: @names (strategy names, "sp", "mp" in every sharding)
 * or every strategy whose row applies. */
static GArray *kind_candidates(const MmModel *m, MmBlockKind kind, const cJSON *names, const int *tp_overlap,
                               guint n_tp_overlap, const MmJsonCtx *ctx, const char *jp, GError **error)
{
  gboolean experts = FALSE;
  for (guint i = 0; i < m->n_blocks; i++) experts |= m->blocks[i].kind == kind && m->blocks[i].experts > 0;
  for (int i = 0; names && i < cJSON_GetArraySize(names); i++) {
    const char *nm = cJSON_GetArrayItem(names, i)->valuestring;
    gboolean known = strcmp(nm, "sp") == 0;
    for (int st = 0; st < MM_STRAT_COUNT; st++) known |= mm_strategy_row((MmStrategy)st) && strcmp(nm, mm_strategy_names[st]) == 0;
    if (!known) {
      g_autofree char *ip = g_strdup_printf("%s[%d]", jp, i);
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, ctx, ip,
                    "\"%s\": expected a level strategy (fsdp, tp, sp, ddp, mp, ep, cp, ulysses)", nm);
      return NULL;
    }
  }
  GArray *c = g_array_new(FALSE, FALSE, sizeof(Cand));
  for (int st = 0; st < MM_STRAT_COUNT; st++) {
    const MmStrategyRow *row = mm_strategy_row((MmStrategy)st);
    if (st == MM_STRAT_SP || st == MM_STRAT_PP) continue; /* names only: sp is tp with sequence parallelism */
    const char *name = mm_strategy_names[st];
    gboolean listed = !names, want_sp = FALSE;
    for (int i = 0; names && i < cJSON_GetArraySize(names); i++) {
      const cJSON *it = cJSON_GetArrayItem(names, i);
      listed |= strcmp(it->valuestring, name) == 0;
      want_sp |= st == MM_STRAT_TP && strcmp(it->valuestring, "sp") == 0;
    }
    if (!names && st == MM_STRAT_TP) want_sp = kind == MM_BLOCK_TRANSFORMER;
    if (!row || !(row->kinds & MM_KIND(kind)) || (st == MM_STRAT_EP && !experts)) {
      if (names && (listed || want_sp)) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, ctx, jp, "%s does not apply to %s blocks of %s",
                      want_sp ? "sp" : name, mm_block_kind_names[kind], m->path);
        g_array_free(c, TRUE);
        return NULL;
      }
      continue;
    }
    if (st == MM_STRAT_MP) {
      for (int k = MM_SHARD_TABLE; k <= MM_SHARD_COLUMN && listed; k++) {
        Cand x = {st, FALSE, (MmShardKind)k, MM_OVERLAP_BULK};
        g_array_append_val(c, x);
      }
      continue;
    }
    if (listed) {
      Cand x = {(MmStrategy)st, FALSE, MM_SHARD_TABLE, MM_OVERLAP_BULK};
      g_array_append_val(c, x);
    }
    for (guint o = 0; want_sp && o < n_tp_overlap; o++) {
      Cand x = {MM_STRAT_TP, TRUE, MM_SHARD_TABLE, (MmOverlap)tp_overlap[o]};
      g_array_append_val(c, x);
    }
  }
  return c;
}

/* ---- the space file ------------------------------------------------------- */

static gboolean int_list(const MmJsonCtx *ctx, const cJSON *root, const char *key, int64_t lo, int64_t hi,
                         int64_t **out, guint *n, GError **error)
{
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!a) return TRUE;
  g_autofree char *jp = g_strdup_printf("$.%s", key);
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) == 0) {
    mm_json_error(error, MM_CONFIG_ERROR_TYPE, ctx, jp, "expected a non-empty array of integers");
    return FALSE;
  }
  g_free(*out);
  *n = (guint)cJSON_GetArraySize(a);
  *out = g_new(int64_t, *n);
  for (guint i = 0; i < *n; i++) {
    const cJSON *it = cJSON_GetArrayItem(a, (int)i);
    double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
    /* the range first: casting a double outside int64_t's is undefined */
    if (!cJSON_IsNumber(it) || !(v >= (double)lo && v <= (double)hi) || v != floor(v)) {
      g_autofree char *ip = g_strdup_printf("%s[%u]", jp, i);
      g_autofree char *got = mm_json_describe_value(it);
      mm_json_error(error, MM_CONFIG_ERROR_RANGE, ctx, ip, "%s: expected an integer from %" G_GINT64_FORMAT
                    " to %" G_GINT64_FORMAT, got, lo, hi);
      return FALSE;
    }
    (*out)[i] = (int64_t)v;
  }
  return TRUE;
}

static gboolean name_list(const MmJsonCtx *ctx, const cJSON *root, const char *key, const char *const *names,
                          int offset, int **out, guint *n, GError **error)
{
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!a) return TRUE;
  g_autofree char *jp = g_strdup_printf("$.%s", key);
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) == 0) {
    mm_json_error(error, MM_CONFIG_ERROR_TYPE, ctx, jp, "expected a non-empty array of names");
    return FALSE;
  }
  g_free(*out);
  *n = (guint)cJSON_GetArraySize(a);
  *out = g_new(int, *n);
  for (guint i = 0; i < *n; i++) {
    const cJSON *it = cJSON_GetArrayItem(a, (int)i);
    int found = -1;
    for (int k = 0; cJSON_IsString(it) && names[k]; k++)
      if (strcmp(it->valuestring, names[k]) == 0) found = k;
    if (found < 0) {
      g_autofree char *ip = g_strdup_printf("%s[%u]", jp, i);
      g_autofree char *got = mm_json_describe_value(it);
      g_autofree char *allowed = g_strjoinv(", ", (char **)names);
      mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_VALUE, ctx, ip, "%s: expected one of %s", got, allowed);
      return FALSE;
    }
    (*out)[i] = found + offset;
  }
  return TRUE;
}

static int64_t *one(int64_t v, guint *n)
{
  int64_t *a = g_new(int64_t, 1);
  a[0] = v;
  *n = 1;
  return a;
}

MmSweepSpace *mm_sweep_space_new(const MmInputs *in, const char *path, GError **error)
{
  g_autoptr(cJSON) root = NULL;
  const gboolean full = path && strcmp(path, "full") == 0;
  if (path && !full && !(root = mm_json_load_file(path, error))) return NULL;
  MmJsonCtx ctx = {path ? path : "(default space)"};
  if (root && !mm_json_apply(&ctx, root, "$", space_fields, NULL, NULL, error)) return NULL;
  g_autoptr(MmSweepSpace) sp = g_new0(MmSweepSpace, 1);
  sp->path = g_strdup(path);
  const MmModel *m = in->model;
  const MmHardware *hw = in->hardware;
  const MmParallelConfig *c = in->config;

  const cJSON *ml = root ? cJSON_GetObjectItemCaseSensitive(root, "max_levels") : NULL;
  sp->max_levels = ml ? (guint)ml->valuedouble : 2;
  g_autofree int64_t *deg = NULL;
  guint n_deg = 0;
  GArray *dv = g_array_new(FALSE, FALSE, sizeof(int64_t));
  for (int64_t d = 2; d <= hw->gpus_per_node; d++)
    if (hw->gpus_per_node % d == 0) g_array_append_val(dv, d);
  n_deg = dv->len;
  deg = (int64_t *)(void *)g_array_free(dv, FALSE);
  sp->nodes = one(0, &sp->n_nodes);
  sp->pp = one(c->pipeline.degree, &sp->n_pp);
  sp->vpp = one(0, &sp->n_vpp); /* 0: the config's, or its schedule's */
  sp->micro = one(0, &sp->n_micro);
  sp->recompute = g_new0(int, 1);
  sp->n_recompute = 1;
  sp->schedule = g_new0(int, 1);
  sp->n_schedule = 1;
  sp->zero = g_new0(int, 1);
  sp->n_zero = 1;
  if (full) {
    GArray *p = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (int64_t d = 1; d <= 64; d *= 2) g_array_append_val(p, d);
    g_free(sp->pp);
    sp->n_pp = p->len;
    sp->pp = (int64_t *)(void *)g_array_free(p, FALSE);
    g_free(sp->micro);
    sp->micro = g_new(int64_t, 4);
    for (guint i = 0; i < 4; i++) sp->micro[i] = (int64_t)1 << i;
    sp->n_micro = 4;
    g_free(sp->recompute);
    sp->recompute = g_new(int, 3);
    for (int i = 0; i < 3; i++) sp->recompute[i] = i + 1;
    sp->n_recompute = 3;
    g_free(sp->zero);
    sp->zero = g_new(int, 3);
    for (int i = 0; i < 3; i++) sp->zero[i] = i;
    sp->n_zero = 3;
  }
  g_autofree int *tp_overlap = g_new0(int, 1); /* bulk */
  guint n_tp_overlap = 1;
  if (root) {
    static const char *const tp_overlap_names[] = {"bulk", "collective_matmul", "async_tp", "userbuffers", NULL};
    if (!name_list(&ctx, root, "tp_overlap", tp_overlap_names, 0, &tp_overlap, &n_tp_overlap, error)) return NULL;
    static const char *const zero_names[] = {"0", "1", "2", NULL};
    if (!int_list(&ctx, root, "degrees", 2, 1 << 20, &deg, &n_deg, error) ||
        !int_list(&ctx, root, "pipeline_degrees", 1, 1 << 20, &sp->pp, &sp->n_pp, error) ||
        !int_list(&ctx, root, "virtual_stages", 1, 64, &sp->vpp, &sp->n_vpp, error) ||
        !int_list(&ctx, root, "micro_batches", 1, 1 << 30, &sp->micro, &sp->n_micro, error) ||
        !int_list(&ctx, root, "nodes", 1, 1 << 20, &sp->nodes, &sp->n_nodes, error) ||
        !name_list(&ctx, root, "recompute", mm_recompute_names, 1, &sp->recompute, &sp->n_recompute, error) ||
        !name_list(&ctx, root, "pipeline_schedules", mm_pipe_schedule_names, 1, &sp->schedule, &sp->n_schedule,
                   error))
      return NULL;
    const cJSON *z = cJSON_GetObjectItemCaseSensitive(root, "zero");
    if (z) { /* numbers in JSON; checked against 0..2 */
      int64_t *zs = NULL;
      guint nz = 0;
      if (!int_list(&ctx, root, "zero", 0, 2, &zs, &nz, error)) return NULL;
      g_free(sp->zero);
      sp->zero = g_new(int, nz);
      for (guint i = 0; i < nz; i++) sp->zero[i] = (int)zs[i];
      sp->n_zero = nz;
      g_free(zs);
    }
    (void)zero_names;
  }

  const cJSON *strat = root ? cJSON_GetObjectItemCaseSensitive(root, "strategies") : NULL;
  if (strat) {
    for (const cJSON *it = strat->child; it; it = it->next) {
      gboolean known = FALSE;
      for (guint k = 0; k < G_N_ELEMENTS(varied_kinds); k++) known |= strcmp(it->string, mm_block_kind_names[varied_kinds[k]]) == 0;
      g_autofree char *jp = g_strdup_printf("$.strategies.%s", it->string);
      if (!known) {
        mm_json_error(error, MM_CONFIG_ERROR_UNKNOWN_KEY, &ctx, jp,
                      "expected a varied block kind: transformer, mlp or embedding_bag");
        return NULL;
      }
      gboolean present = FALSE;
      for (guint i = 0; i < m->n_blocks; i++) present |= strcmp(mm_block_kind_names[m->blocks[i].kind], it->string) == 0;
      if (!present) {
        mm_json_error(error, MM_CONFIG_ERROR_INCONSISTENT, &ctx, jp, "model %s has no %s block", m->path, it->string);
        return NULL;
      }
      gboolean ok = cJSON_IsArray(it) && cJSON_GetArraySize(it) > 0;
      for (int i = 0; ok && i < cJSON_GetArraySize(it); i++) ok = cJSON_IsString(cJSON_GetArrayItem(it, i));
      if (!ok) {
        mm_json_error(error, MM_CONFIG_ERROR_TYPE, &ctx, jp, "expected a non-empty array of strategy names");
        return NULL;
      }
    }
  }
  GArray *kinds = g_array_new(FALSE, TRUE, sizeof(MmSweepKind));
  for (guint k = 0; k < G_N_ELEMENTS(varied_kinds); k++) {
    gboolean present = FALSE;
    for (guint i = 0; i < m->n_blocks; i++) present |= m->blocks[i].kind == varied_kinds[k];
    if (!present) continue;
    const cJSON *names = strat ? cJSON_GetObjectItemCaseSensitive(strat, mm_block_kind_names[varied_kinds[k]]) : NULL;
    g_autofree char *jp = g_strdup_printf("$.strategies.%s", mm_block_kind_names[varied_kinds[k]]);
    GArray *cands = kind_candidates(m, varied_kinds[k], names, tp_overlap, n_tp_overlap, &ctx, jp, error);
    if (!cands) {
      for (guint j = 0; j < kinds->len; j++) g_free(g_array_index(kinds, MmSweepKind, j).choices);
      g_array_free(kinds, TRUE);
      return NULL;
    }
    GArray *ch = g_array_new(FALSE, FALSE, sizeof(MmStrategyEntry));
    hierarchies(varied_kinds[k], (const Cand *)(void *)cands->data, cands->len, deg, n_deg, sp->max_levels, ch);
    g_array_free(cands, TRUE);
    MmSweepKind sk = {.kind = varied_kinds[k], .n_choices = ch->len};
    sk.choices = (MmStrategyEntry *)(void *)g_array_free(ch, FALSE);
    g_array_append_val(kinds, sk);
  }
  sp->n_kinds = kinds->len;
  sp->kinds = (MmSweepKind *)(void *)g_array_free(kinds, FALSE);

  uint64_t n = (uint64_t)sp->n_nodes * sp->n_pp * sp->n_schedule * sp->n_vpp * sp->n_micro * sp->n_recompute *
               sp->n_zero;
  for (guint k = 0; k < sp->n_kinds; k++) n *= sp->kinds[k].n_choices;
  sp->n_points = n;
  return g_steal_pointer(&sp);
}

/* ---- points ------------------------------------------------------------- */

/* Maps the strategies of @src onto block kind @kind: those whose row does not apply there
 * become ddp (the block is replicated over that group). */
static MmStrategyEntry follow(const MmStrategyEntry *src, MmBlockKind kind)
{
  MmStrategyEntry e = *src;
  e.key = (char *)mm_block_kind_names[kind];
  for (guint i = 0; i < e.n_levels; i++) {
    const MmStrategyRow *row = mm_strategy_row(e.levels[i].strategy);
    if (!row || !(row->kinds & MM_KIND(kind)) || e.levels[i].strategy == MM_STRAT_EP) {
      e.levels[i].strategy = MM_STRAT_DDP;
      e.levels[i].sequence_parallel = FALSE;
      e.levels[i].overlap = MM_OVERLAP_BULK;
    }
  }
  return e;
}

void mm_sweep_space_point(const MmSweepSpace *sp, const MmModel *m, uint64_t i, MmSweepPoint *out)
{
  memset(out, 0, sizeof *out);
  uint64_t r = i;
  /* innermost dimension first: the kinds' choices, then zero, recompute, micro, vpp, schedule, pp, nodes */
  for (guint k = sp->n_kinds; k-- > 0;) {
    out->choice[k] = (uint32_t)(r % sp->kinds[k].n_choices);
    r /= sp->kinds[k].n_choices;
  }
  const int zero = sp->zero[r % sp->n_zero];
  r /= sp->n_zero;
  out->point.recompute = sp->recompute[r % sp->n_recompute];
  r /= sp->n_recompute;
  out->point.micro_batch = sp->micro[r % sp->n_micro];
  r /= sp->n_micro;
  out->point.virtual_stages = sp->vpp[r % sp->n_vpp];
  r /= sp->n_vpp;
  out->point.schedule = sp->schedule[r % sp->n_schedule];
  r /= sp->n_schedule;
  out->point.pipeline_degree = sp->pp[r % sp->n_pp];
  r /= sp->n_pp;
  out->point.nodes = sp->nodes[r % sp->n_nodes];
  out->zero = zero;

  guint n = 0;
  for (guint k = 0; k < sp->n_kinds; k++) out->entries[n++] = sp->kinds[k].choices[out->choice[k]];
  /* the other block kinds follow the first varied kind */
  for (int kind = 0; kind < MM_BLOCK_KIND_COUNT && sp->n_kinds > 0; kind++) {
    gboolean varied = FALSE, present = FALSE;
    for (guint k = 0; k < sp->n_kinds; k++) varied |= sp->kinds[k].kind == (MmBlockKind)kind;
    for (guint b = 0; b < m->n_blocks; b++) present |= m->blocks[b].kind == (MmBlockKind)kind;
    if (!varied && present) out->entries[n++] = follow(&out->entries[0], (MmBlockKind)kind);
  }
  for (guint e = 0; e < n; e++)
    for (guint l = 0; l < out->entries[e].n_levels; l++)
      if (out->entries[e].levels[l].strategy == MM_STRAT_DDP) out->entries[e].levels[l].zero = zero;
  out->n_entries = n;
  out->point.strategies = out->entries;
  out->point.n_strategies = n;
}

GBytes *mm_sweep_point_key(const MmSweepPoint *p, guint system)
{
  GByteArray *k = g_byte_array_new();
  g_byte_array_append(k, (const guint8 *)&system, sizeof system);
  mm_point_key(&p->point, k);
  return g_byte_array_free_to_bytes(k);
}

/* The key of point @i of @sp. (transfer full) */
static GBytes *point_key(const MmSweepSpace *sp, const MmModel *m, uint64_t i)
{
  MmSweepPoint p;
  mm_sweep_space_point(sp, m, i, &p);
  return mm_sweep_point_key(&p, 0);
}

gboolean mm_sweep_space_repeat(const MmSweepSpace *sp, const MmModel *m, uint64_t i)
{
  uint64_t stride = 1; /* of the zero dimension: the kinds' choices are inside it */
  for (guint k = 0; k < sp->n_kinds; k++) stride *= sp->kinds[k].n_choices;
  const uint64_t z = (i / stride) % sp->n_zero;
  if (z == 0) return FALSE;
  g_autoptr(GBytes) key = point_key(sp, m, i);
  for (uint64_t y = 1; y <= z; y++) {
    g_autoptr(GBytes) other = point_key(sp, m, i - y * stride);
    if (g_bytes_equal(key, other)) return TRUE;
  }
  return FALSE;
}

char *mm_sweep_entry_text(const MmStrategyEntry *e)
{
  static const char *const shard[] = {"table", "row", "column"};
  GString *s = g_string_new("");
  for (guint i = 0; i < e->n_levels; i++) {
    const MmLevel *l = &e->levels[i];
    const char *name = l->strategy == MM_STRAT_TP && l->sequence_parallel ? "sp" : mm_strategy_names[l->strategy];
    g_string_append_printf(s, "%s%s", i ? ">" : "", name);
    if (l->strategy == MM_STRAT_MP) g_string_append_printf(s, "(%s)", shard[l->sharding]);
    if (l->overlap != MM_OVERLAP_BULK) g_string_append_printf(s, "(%s)", mm_overlap_names[l->overlap]);
    if (l->spec == MM_DEG_ALL) g_string_append(s, "*");
    else g_string_append_printf(s, "%" G_GINT64_FORMAT, l->degree);
  }
  return g_string_free(s, FALSE);
}

/* cpu_fused: the CPU backend's internals shared by cpu.c and cpu_fused.c (and the tests): the
 * worker pool ("threads as workgroups") and fused computation-collective kernels among
 * simulated ranks. Not part of the public calib API (hence the mm__ prefix). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* ---- the worker pool (src/calib/cpu.c) ------------------------------------------------- */

/* A kernel body: worker @wg of @n_wg runs its share of the work in @data. */
typedef void (*MmCpuKernelFn)(guint wg, guint n_wg, gpointer data);

typedef struct MmCpuPool MmCpuPool;

/* A pool of @n_workers (>= 1) threads waiting for launches; NULL (and @error, domain
 * MM_CALIB_ERROR, code BACKEND) when a thread cannot be started. (transfer full) */
MmCpuPool *mm__cpu_pool_new(guint n_workers, GError **error);
void mm__cpu_pool_free(MmCpuPool *pool);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmCpuPool, mm__cpu_pool_free)
guint mm__cpu_pool_size(const MmCpuPool *pool);
/* One launch: every worker runs @fn(wg, n, @data) once; returns when all have finished (the
 * mutex handoff orders everything written before the launch before the workers' reads, and
 * everything the workers wrote before the return). */
void mm__cpu_pool_run(MmCpuPool *pool, MmCpuKernelFn fn, gpointer data);

/* A deterministic value in [-0.5, 0.5) for element @i of stream @seed (the harness's fill). */
float mm__cpu_fill_value(guint64 i, guint64 seed);
/* The row of a table of @rows that sample-table group @group reads at pool position @p (the
 * GPU harness's uniform hash, src/calib/hip/calib.cpp embedding_bag). */
gsize mm__cpu_bag_row(guint64 group, guint p, gsize rows);

/* ---- fused computation-collective kernels (src/calib/cpu_fused.c) ------------------------ */

/* The three fused operators of the AMD paper (papers/fused-computation-collective-ops.txt). */
typedef enum {
  MM_FUSED_GEMV_ALLREDUCE,      /* row-parallel GEMV, partial outputs all-reduced */
  MM_FUSED_EMBEDDING_ALLTOALL,  /* model-parallel embedding bags -> data-parallel batch */
  MM_FUSED_GEMM_ALLTOALL,       /* per-rank GEMM, row blocks scattered to their ranks */
  MM_FUSED_OP_COUNT
} MmFusedOp;

/* A problem among @ranks simulated ranks (each its own buffers), inputs filled
 * deterministically. Shapes:
 *   GEMV + AllReduce: y[n] = x[k] W[k x n]; rank r holds a contiguous K-slice of x and W.
 *   Embedding + All2All: @tables tables of @rows x @dim split contiguously over the ranks;
 *     @batch samples, @pool rows summed per (sample, table); rank d receives a contiguous
 *     part of the batch with every table: out[local sample][table][dim].
 *   GEMM + All2All: each rank computes C = A[m x k] B[k x n] (its own A, B); rank d receives
 *     a contiguous part of the rows of every rank's C: out[src][local row][n]. */
typedef struct {
  MmFusedOp op;
  guint ranks; /* P >= 1 */
  guint wgs;   /* persistent workgroups (threads) per rank, >= 1 */
  gsize m, n, k;
  gsize batch, tables, rows, dim, pool;
} MmFusedSpec;

/* How one call runs. */
typedef struct {
  gboolean fused;  /* FALSE: the bulk reference (compute, then a separate collective) */
  gsize slice;     /* units per slice (GEMV: outputs, embedding: samples, GEMM: rows), >= 1 */
  gboolean aware;  /* communication-aware order: slices for remote ranks before local ones */
} MmFusedRun;

/* Book-keeping of the last fused call, for the flag protocol check. */
typedef struct {
  guint slices;      /* slices of the output space (every source rank sends each one) */
  guint flags;       /* ready flags: slices x P (+ slices x P all-gather flags for GEMV) */
  guint flags_once;  /* flags set exactly once */
  guint stray;       /* flags set where no slice goes (must be 0) */
  guint puts;        /* slice puts issued by a last-finishing logical workgroup */
  guint waits;       /* flags waited on by consumers */
} MmFusedStats;

typedef struct MmFused MmFused;

/* A problem, its buffers filled and a pool of ranks x wgs threads started; NULL (and @error)
 * when a shape is empty or memory or threads are short. (transfer full) */
MmFused *mm__fused_new(const MmFusedSpec *spec, GError **error);
void mm__fused_free(MmFused *f);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmFused, mm__fused_free)
/* Runs one call (fused or bulk) and leaves the outputs in every rank's output buffer. */
void mm__fused_run(MmFused *f, const MmFusedRun *run);
/* Rank @rank's output after the last call; *@len its number of floats. (transfer none) */
const float *mm__fused_output(const MmFused *f, guint rank, gsize *len);
/* The flag protocol's book-keeping after the last fused call. */
MmFusedStats mm__fused_stats(const MmFused *f);
/* The number of slices a run with @slice units per slice uses (the same for every rank). */
guint mm__fused_n_slices(const MmFused *f, gsize slice);

G_END_DECLS

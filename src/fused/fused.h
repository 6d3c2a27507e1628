/* fused: fused compute-collective kernels (slice puts from persistent workgroups) and decomposed
 * compute-communication overlap (shard overlap, FiCCO, collective matmul), simulated in the
 * event engine: compute is work on the device's SMs and HBM, communication is work on its
 * links (and on HBM, and on SMs when compute units drive it), and what overlaps shares them
 * max-min fairly (src/engine), so contention (CIL) comes out of the sharing. docs/FUSED.md. */
#pragma once

#include "comm/comm.h"
#include "config/config.h"
#include "engine/engine.h"

G_BEGIN_DECLS

#define MM_FUSED_ERROR (mm_fused_error_quark())
GQuark mm_fused_error_quark(void);
typedef enum {
  MM_FUSED_ERROR_INVALID, /* a shape or option the op cannot take (sizes, ranks, schedule) */
  MM_FUSED_ERROR_ENGINE,  /* the simulation failed (a bug: the lowering built a bad program) */
} MmFusedError;

/* ---- resources of one device, shared by every model here ------------------- */

/* A device's engine resources: its links (src/comm: resources 0 .. links.n - 1, in bytes),
 * then its compute (work in SM-picoseconds: 1 unit is every SM of the device for 1 ps, so a
 * kernel that alone runs T seconds carries T x 1e12 units) and its HBM (bytes, at the
 * achievable bandwidth hbm_bw x utilization.hbm). */
typedef struct {
  MmLinks links;
  uint32_t sm, hbm;              /* resource indices */
  uint32_t n;                    /* links.n + 2 */
  double cap[MM_LINKS_MAX + 2];  /* per resource, work units per picosecond (MmEngineClass.link_bw) */
} MmFusedRes;

void mm_fused_res_init(const MmHardware *hw, MmFusedRes *r);

/* A growing engine program (one device's ops), for building a fused or decomposed op. */
typedef struct {
  GArray *ops;   /* MmEngineOp */
  GArray *deps;  /* uint32_t */
  GArray *dur;   /* MmTime: a fixed op's time or a flow's tail */
  GArray *xlink; /* uint32_t: resource per (resource, amount) pair */
  GArray *xwork; /* double */
  uint32_t n_streams;
} MmFusedProg;

void mm_fused_prog_init(MmFusedProg *p, uint32_t n_streams);
void mm_fused_prog_clear(MmFusedProg *p);
/* Appends an op on @stream lasting @tail_s after its work (or exactly @tail_s with no work),
 * depending on @n_deps earlier ops; @n_work (resource, amount) pairs (amounts <= 0 skipped).
 * Returns its index. */
uint32_t mm_fused_prog_op(MmFusedProg *p, uint32_t stream, double tail_s, const uint32_t *deps, uint32_t n_deps,
                          const uint32_t *res, const double *work, uint32_t n_work);
/* The program's engine view (borrows @p's arrays: valid until @p changes). */
MmEngineProgram mm_fused_prog_view(const MmFusedProg *p, uint32_t n_resources);

/* ==== fused compute-collective kernels (slice puts) ========================= */
/* (src/fused/kernel.c; docs/fused-kernels.md)
 *
 * A persistent kernel: P physical workgroups (compute_units x waves_per_cu x occupancy / waves
 * per WG) run a task loop over the op's logical WGs; logical WGs form slices; the last WG to
 * finish a slice puts it to its destination (a NIC put, or zero-copy stores inside a node) and
 * sets its flag after a fence; the consumer waits for its flags. Simulated per device at slice
 * granularity in src/engine: slices in flight are flows on the SMs and HBM, puts are flows on
 * the links (and HBM), so the kernel's compute, its own puts and link contention share the
 * device max-min fairly. The baseline is bulk-synchronous: the kernel, then the library
 * collective (mm_comm_cost). A pure function of the hardware and the spec. */

typedef enum {
  MM_FUSED_EMB_A2A,  /* embedding pooling + All2All (DLRM): slices of pooled vectors */
  MM_FUSED_GEMV_AR,  /* GEMV + AllReduce (decode): two-phase direct reduce-scatter + all-gather */
  MM_FUSED_GEMM_A2A, /* GEMM + All2All (MoE combine): output tiles */
  MM_FUSED_OP_COUNT
} MmFusedOp;
extern const char *const mm_fused_op_names[]; /* "emb-a2a", "gemv-ar", "gemm-a2a"; NULL-terminated */

typedef enum {
  MM_FUSED_AWARE,     /* remote slices first (rotated: next rank first), local slices last */
  MM_FUSED_OBLIVIOUS, /* logical WG order: destination rank 0, 1, ... (the local block where it falls) */
  MM_FUSED_INTERLEAVED, /* not in the paper (a what-if): remote slices first, each round spread over every
                         * remote destination (a put stream per destination), so all links carry puts */
  MM_FUSED_SCHED_COUNT
} MmFusedSchedule;
extern const char *const mm_fused_schedule_names[]; /* "aware", "oblivious", "interleaved"; NULL-terminated */

/* One fused op. Sizes are per rank unless said; 0 takes the op's default (mm_fused_spec_defaults). */
typedef struct {
  MmFusedOp op;
  MmDtype dtype;     /* emb-a2a: fp32 (DLRM); gemv-ar, gemm-a2a: fp16 (when !dtype_given) */
  gboolean dtype_given;
  int64_t ranks;     /* devices in the group (default: one node) */
  int64_t stride;    /* device-index distance between members (default 1) */
  /* emb-a2a */
  int64_t batch;     /* global batch (split evenly over the ranks by the All2All) */
  int64_t tables;    /* embedding tables per rank */
  int64_t dim;       /* embedding dimension */
  int64_t pooling;   /* rows pooled per bag */
  /* gemv-ar: y[m] = A[m x k] x[k] (k: this rank's shard); gemm-a2a: C[m x n] = A[m x k] B[k x n] */
  int64_t m, n, k;
  /* the kernel */
  int64_t slice_wgs;    /* logical WGs per slice (emb-a2a 32, gemv-ar 1, gemm-a2a 1) */
  int64_t wg_elems;     /* output elements per logical WG (emb-a2a: dim, one vector; gemv-ar 256 rows;
                         * gemm-a2a 128 x 128) */
  int64_t wg_threads;   /* threads per WG (256) */
  double thread_bytes;  /* HBM bytes a thread keeps in flight (emb-a2a 8: two fp32 gathers; gemv-ar, gemm-a2a
                         * 16: one 16-byte load) */
  int64_t bulk_grid;    /* emb-a2a baseline: the blocks of each per-table EmbeddingBag launch (PyTorch's fixed
                         * 1024); -1: one launch over every table at full occupancy */
  double occupancy;     /* fused kernel's, a fraction of the plain kernel's full occupancy (0: 1 -
                         * occupancy_loss; at most that) */
  MmFusedSchedule schedule;
  gboolean timeline;    /* keep the per-slice timeline (MmFusedResult.slices) */
  gboolean per_rank;    /* one engine class per rank even where one stands for all (the aware schedule
                         * inside a node or one rank per node); for checks: both agree */
} MmFusedSpec;

/* Fills the zero fields of @s with the op's defaults for @hw (ranks: gpus_per_node). */
void mm_fused_spec_defaults(const MmHardware *hw, MmFusedSpec *s);

/* One step of one rank in the fused run (the timeline for traces and plots): the slices
 * [first, first + count) of its schedule that one lane group computed together, and their put. */
typedef struct {
  uint32_t device;   /* rank in the group */
  uint32_t group;    /* the lane group that computed them */
  uint32_t dest;     /* rank they go to (== device: local) */
  uint32_t phase;    /* 0: compute (+ put); 1: gemv-ar's reduce (+ all-gather put) */
  uint64_t first, count; /* slices (phase 0: index over destination blocks; phase 1: tiles reduced; a rank can
                          * have more than 2^32) */
  gboolean zero_copy;
  double start_s, end_s;         /* compute */
  double put_start_s, put_end_s; /* its put (0, 0: none) */
} MmFusedSlice;

typedef struct {
  MmFusedSpec spec;            /* with defaults filled */
  /* the kernel */
  int64_t logical_wgs;         /* per rank */
  int64_t n_slices;            /* per rank */
  int64_t physical_wgs;        /* persistent WGs per rank */
  int64_t lanes;               /* slices in flight at once: physical_wgs / slice_wgs */
  int64_t groups;              /* lane groups simulated (lanes in lockstep merged) */
  double slice_bytes;
  double flops, hbm_bytes;     /* the plain kernel's, per rank */
  double comm_bytes;           /* sent by one rank (All2All: to peers; AllReduce: both phases) */
  /* the baseline: launch + kernel + launch + collective */
  double kernel_s;             /* the baseline's kernel: the plain kernel at full occupancy; emb-a2a: one
                               * EmbeddingBag launch per table at the occupancy its batch fills */
  double coll_s;               /* the collective, mm_comm_cost */
  const char *coll_algorithm;  /* (transfer none) */
  double launch_s;             /* one kernel launch */
  double baseline_s;
  /* the fused op (one launch + the simulated kernel); the slowest rank's */
  double fused_s;
  double fused_min_s;          /* the fastest rank's */
  double skew;                 /* fused_s / fused_min_s - 1 */
  double speedup;              /* baseline_s / fused_s */
  double compute_s;            /* only compute running (slowest rank) */
  double comm_s;               /* only puts running */
  double both_s;               /* compute and puts at once */
  double stalled_s;            /* neither: waiting for flags, put tails */
  double exposed_comm_s;       /* fused_s - launch - time any compute runs */
  double compute_alone_s;      /* the fused kernel's compute alone at its occupancy */
  double comm_alone_s;         /* its puts alone on idle links */
  double lower_bound_s;        /* launch + max(compute_alone_s, comm_alone_s) */
  double *rank_s;              /* per rank: its fused time (ranks entries) */
  GArray *slices;              /* MmFusedSlice, when spec.timeline (else NULL) */
  uint64_t events;             /* engine events */
} MmFusedResult;

void mm_fused_result_free(MmFusedResult *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmFusedResult, mm_fused_result_free)

/* Checks @s (defaults filled) against @hw; MM_FUSED_ERROR_INVALID naming the field otherwise. */
gboolean mm_fused_spec_check(const MmHardware *hw, const MmFusedSpec *s, GError **error);

/* Simulates @spec on @hw: baseline and fused. (transfer full) NULL and @error on bad input. */
MmFusedResult *mm_fused_kernel_run(const MmHardware *hw, const MmFusedSpec *spec, GError **error);

/* The achieved HBM rate of a memory-bound kernel at @occupancy (of full) on @dev, and the
 * factor by which contention inflates its HBM traffic (>= 1): Little's law for parallelism,
 * row-buffer contention above the achievable bandwidth @hbm_Bps. Exposed for tests and docs. */
double mm_fused_mem_rate(const MmDevice *dev, double occupancy, double thread_bytes, double hbm_Bps, double *inflate);

/* How much longer an embedding lookup (PyTorch's EmbeddingBag kernel: 8 bytes in flight per
 * thread) takes when its kernel runs at @occupancy of full instead of full, by the same
 * mechanism (mm_fused_mem_rate at the device's achievable HBM bandwidth): below the
 * contention knee it runs slower (> 1), above it faster (< 1). The plan's fused embedding +
 * All2All uses it for the occupancy the communication API's registers cost. */
double mm_fused_lookup_occupancy_factor(const MmDevice *dev, double occupancy);


/* ==== decomposed overlap: shard overlap, FiCCO, collective matmul =========== */
/* (src/fused/overlap.c) */

/* One GEMM beside the collective that feeds or drains it, on @ranks GPUs of one node:
 *   ag-gemm   AllGather of A (M x K, row-sharded: M/p rows per GPU), then C = A B with B K x N
 *             (the GPU's N columns): sequence/tensor parallelism (FiCCO Table I g1-g12, Flux);
 *   a2a-gemm  All2All of M x K token rows (each GPU receives (p-1)/p of them), then the
 *             expert GEMM (FiCCO g13-g16); on every link it moves what ag-gemm moves;
 *   gemm-rs   C = A B with A M x K (the GPU's K columns), then ReduceScatter of C (M x N).
 * (M, N, K) is the layer's whole GEMM (FiCCO Table I, Flux's report): under ag-gemm and a2a-gemm a
 * GPU computes N / p of its columns over all M rows; under gemm-rs it multiplies over K / p. */
typedef enum { MM_OVERLAP_AG_GEMM, MM_OVERLAP_A2A_GEMM, MM_OVERLAP_GEMM_RS, MM_OVERLAP_OP_COUNT } MmOverlapOp;
extern const char *const mm_overlap_op_names[]; /* "ag-gemm", "a2a-gemm", "gemm-rs"; NULL-terminated */

/* The schedules, one row each in overlap.c's table:
 *   serial             the collective, then the GEMM (the baseline)
 *   shard              shard overlap (PyTorch async-TP): p - 1 peer-to-peer steps of a whole shard
 *                      beside the partial GEMM of the shard received before
 *   uniform-fused-1d   FiCCO: every step receives 1/p of every peer's shard (all-to-all), gathers it
 *                      with the local piece, one GEMM of M/p rows, scatters the rows
 *   hetero-fused-1d    FiCCO: the local shard first (hides step 0), then one GEMM of the (p-1) pieces
 *   hetero-unfused-1d  FiCCO: the local shard first, then one GEMM per received piece (no gather)
 *   uniform-fused-2d   FiCCO: pieces cut along K; every step one accumulating GEMM M x N x K/p
 *   cmm-x1, cmm-x2     XLA collective matmul: a loop of bidirectional collective-permutes and
 *                      partial GEMMs, unrolled onto one or two compute streams
 *   flux               Flux-style fused kernel: tile-granular, AG by copy engine, RS by the GEMM
 *                      epilogue's remote writes */
typedef enum {
  MM_OVERLAP_SERIAL,
  MM_OVERLAP_SHARD,
  MM_OVERLAP_UNIFORM_FUSED_1D,
  MM_OVERLAP_HETERO_FUSED_1D,
  MM_OVERLAP_HETERO_UNFUSED_1D,
  MM_OVERLAP_UNIFORM_FUSED_2D,
  MM_OVERLAP_CMM_X1,
  MM_OVERLAP_CMM_X2,
  MM_OVERLAP_FLUX,
  MM_OVERLAP_SCHEDULE_COUNT
} MmOverlapSchedule;
extern const char *const mm_overlap_schedule_names[]; /* NULL-terminated */

/* Who moves the bytes: DMA (copy) engines take links and HBM; compute units (RCCL/NCCL-like
 * kernels) take links, HBM and a share of the SMs. */
typedef enum { MM_OVERLAP_COMM_DMA, MM_OVERLAP_COMM_CU, MM_OVERLAP_COMM_COUNT } MmOverlapComm;
extern const char *const mm_overlap_comm_names[]; /* "dma", "cu"; NULL-terminated */

typedef struct {
  MmOverlapOp op;
  int64_t m, n, k; /* the layer's GEMM (see MmOverlapOp), >= 1 */
  int64_t ranks;   /* GPUs of one node, 2 .. gpus_per_node */
  MmDtype dtype;
  MmOverlapComm comm;
} MmOverlapSpec;

/* Whether @s applies to @op (FiCCO's schedules and shard overlap: ag-gemm and a2a-gemm; DMA
 * engines do no arithmetic, so FiCCO leaves gemm-rs out, Sec. IV-B2). */
gboolean mm_overlap_applies(MmOverlapOp op, MmOverlapSchedule s);

/* What an op of a simulated schedule did. */
typedef enum { MM_OVERLAP_STEP_GEMM, MM_OVERLAP_STEP_COMM, MM_OVERLAP_STEP_COPY, MM_OVERLAP_STEP_COUNT } MmOverlapStepKind;
extern const char *const mm_overlap_step_names[]; /* "gemm", "comm", "copy" (gather, scatter, reduce) */

typedef struct {
  MmOverlapStepKind kind;
  uint32_t stream;
  uint32_t step;      /* loop step it belongs to */
  double start_s, end_s;
  double alone_s;     /* its time alone on the device */
} MmOverlapStep;

typedef struct {
  MmOverlapSchedule schedule;
  gboolean applies;
  double time_s;          /* makespan */
  double speedup;         /* serial time / time_s */
  double gemm_alone_s;    /* sum of its GEMM pieces alone (decomposition included) */
  double comm_alone_s;    /* sum of its transfers alone */
  double copy_alone_s;    /* gathers, scatters, reductions alone */
  double gemm_dil;        /* gemm_alone_s / the undecomposed GEMM's time */
  double comm_dil;        /* comm_alone_s / the undecomposed collective's time */
  double gemm_cil;        /* sum of GEMM pieces' simulated durations / gemm_alone_s */
  double comm_cil;        /* the same for transfers */
  double exposed_comm_s;  /* time_s minus the time a GEMM piece was running */
  GArray *steps;          /* MmOverlapStep, in program order */
} MmOverlapRun;

typedef struct {
  MmOverlapSpec spec;
  double gemm_s;          /* the undecomposed GEMM alone (launch included) */
  double comm_s;          /* the undecomposed collective alone (src/comm) */
  double lower_bound_s;   /* max(the GEMM's roofline time, the collective's busiest link's bytes / bandwidth):
                           * no schedule beats it */
  double flops, otb_flop_per_B, mt_bytes; /* 2MNK; op-to-byte 2MNK / MT; MT = (MK + NK + MN) x dtype bytes */
  double machine_otb;     /* peak FLOP/s / HBM B/s */
  double heuristic_score; /* OTB x MT / (machine OTB x HBM B/s x 1 s), see mm_overlap_heuristic */
  MmOverlapSchedule heuristic, oracle; /* the heuristic's FiCCO pick; the fastest FiCCO schedule simulated */
  MmOverlapSchedule best;              /* the fastest of every schedule that applies */
  MmOverlapRun runs[MM_OVERLAP_SCHEDULE_COUNT];
} MmOverlapResult;

/* FiCCO Sec. V-C: uniform-fused-2d unless M > K; otherwise the GEMM's OTB x MT (its FLOPs) against
 * the machine's (peak FLOP/s at its clocks, the product of its OTB and HBM bandwidth): below overlap.heuristic_low
 * (1x) uniform-fused-1d, above overlap.heuristic_high (5x) hetero-unfused-1d, else hetero-fused-1d.
 * @score (may be NULL) receives the ratio. */
MmOverlapSchedule mm_overlap_heuristic(const MmDevice *dev, const MmOverlapSpec *spec, double *score);

/* Simulates every schedule that applies to @spec on @hw (a pure function of both) in the event
 * engine. Fails (MM_FUSED_ERROR_INVALID) on sizes, ranks or dtypes the op cannot take, with a
 * message naming the field and what is allowed. (transfer full) */
MmOverlapResult *mm_overlap_run(const MmHardware *hw, const MmOverlapSpec *spec, GError **error);
void mm_overlap_result_free(MmOverlapResult *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmOverlapResult, mm_overlap_result_free)


G_END_DECLS

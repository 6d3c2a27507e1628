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
/* (src/fused/kernel.c) */


/* ==== decomposed overlap: shard overlap, FiCCO, collective matmul =========== */
/* (src/fused/overlap.c) */


G_END_DECLS

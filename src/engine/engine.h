/* engine: discrete-event simulation of op streams with dependencies and collectives (no layers here). */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

#define MM_ENGINE_ERROR (mm_engine_error_quark())
GQuark mm_engine_error_quark(void);
typedef enum {
  MM_ENGINE_ERROR_DEADLOCK,
  MM_ENGINE_ERROR_INVALID,
  MM_ENGINE_ERROR_OVERFLOW, /* simulated time ran past MM_TIME_MAX (inputs the plan's bounds let through) */
} MmEngineError;

/* Simulated time: integer picoseconds; 2^64 ps is about 1.8e7 s (213 days). The plan rejects
 * scenarios whose iterations approach that (src/plan/limits.c); the engine fails a run whose
 * clock would pass it rather than wrap. */
typedef uint64_t MmTime;
#define MM_TIME_MAX UINT64_MAX
#define MM_PS_PER_S 1e12
/* Seconds -> picoseconds, rounded; saturates at MM_TIME_MAX (and maps NaN and negatives to 0)
 * instead of the undefined conversion of an out-of-range double. */
static inline MmTime mm_time_from_s(double s)
{
  const double ps = s * MM_PS_PER_S + 0.5;
  if (!(ps >= 1.0)) return 0;
  if (ps >= 18446744073709551616.0) return MM_TIME_MAX; /* 2^64 */
  return (MmTime)ps;
}
static inline double mm_time_to_s(MmTime t) { return (double)t / MM_PS_PER_S; }

#define MM_NO_COLL UINT32_MAX
/* Streams of all classes together that one engine holds (mm_engine_new fails beyond). */
#define MM_ENGINE_MAX_STREAMS (1u << 24)

/* One op of a program. It starts when it is at the head of its stream (streams
 * are FIFO queues in program order), its stream is idle and every dependency
 * has finished. A collective (coll != MM_NO_COLL) additionally waits until every
 * member of its group has reached it; members are the devices whose index
 * differs from this device's only in the level digit (stride, degree), or, when
 * peer != 0, this device and device + peer (a point-to-point pair: the sender's and
 * the receiver's op share the collective id). All members start together, and all
 * end together, when the slowest member's transfer is done.
 *
 * An op that carries work (n_xfer > 0) is a flow: it puts the given amounts of
 * work on the given resources of its device, and ends when all of it is done plus
 * its fixed tail (the class's dur: a collective's latency, a kernel's launch cost).
 * A device has n_links resources (the name is from when all were links), each
 * with a capacity (the class's link_bw) in its own work unit per picosecond: its
 * links (bytes), then whatever else the plan models, e.g. SMs (FLOPs) and HBM
 * (bytes); the engine treats all alike. A flow progressing at r (fraction of its
 * work per ps) carries r x amount on each of its resources at once or, when
 * sequential, crosses them one after another (phases): it then holds a share of
 * each for its whole work time, and its time is the sum of its per-resource times.
 *
 * Concurrent flows of a device share each resource max-min fairly (progressive
 * filling: a resource that bounds every flow on it is saturated, each of them
 * gets an equal share, and what is left goes round again; a flow bounded
 * elsewhere leaves the rest of its share to the others). Work first, then the
 * tail: a flow releases its shares when its work is done, and its tail holds
 * none. Shares are recomputed whenever a flow of the device starts or finishes its
 * work. An op that carries no work (or only amounts <= 0) is fixed: it lasts its dur.
 *
 * Interference (cil): while a device runs an op marked MM_CIL_INTERFERES (a collective kernel
 * occupying SMs, from its launch to its end), its fixed ops marked MM_CIL_SLOWED (compute
 * kernels) progress at the class's slow_pace (fraction of their dur per ps) instead of 1: their
 * end moves out whenever the first interfering op starts or the last one ends. A class whose
 * slow_pace is 0 (or 1) has no interference. */
typedef enum { MM_CIL_NONE, MM_CIL_SLOWED, MM_CIL_INTERFERES } MmCilRole;
typedef struct {
  uint32_t stream;
  uint32_t dep_first; /* into the program's deps */
  uint32_t n_deps;    /* dependencies: indices of earlier ops of the same program */
  uint32_t coll;      /* collective id shared by matching ops of all programs, or MM_NO_COLL */
  uint32_t degree;    /* collective group shape */
  uint32_t stride;
  int32_t peer;       /* point-to-point: the other member's device-index offset (0: a level group) */
  uint32_t xfer_first; /* into the program's xfer_link / xfer_bytes: its (resource, amount) pairs */
  uint16_t n_xfer;
  uint8_t sequential; /* its resources one after another, not all at once */
  uint8_t cil;        /* MmCilRole */
} MmEngineOp;

typedef struct {
  const MmEngineOp *ops;
  uint32_t n_ops;
  const uint32_t *deps;
  uint32_t n_streams;
  const uint32_t *xfer_link; /* resource per transfer */
  const double *xfer_bytes;  /* work per transfer, in its resource's unit (bytes on links) */
  uint32_t n_links;          /* resources per device (named when all were links): links, then e.g. SMs, HBM */
} MmEngineProgram;

/* A device class: devices that behave identically, simulated once. */
typedef struct {
  uint32_t program;
  const MmTime *dur;      /* per op of its program: a fixed op's time, or a flow's tail after its work */
  uint32_t rep_device;    /* a member device: locates its collective groups */
  const double *link_bw;  /* per resource: work units per picosecond, bytes on links (NULL when no flows) */
  double slow_pace;       /* pace of MM_CIL_SLOWED ops while an MM_CIL_INTERFERES op runs (0: no interference) */
} MmEngineClass;

typedef struct MmEngine MmEngine;

/* Builds the engine's flat state for @programs and @classes (borrowed: they must
 * outlive the engine). Fails when a program is malformed (a dependency on a
 * later op, a stream or resource out of range), a class lacks a positive capacity
 * for a resource its program puts work on, or collectives do not match. */
MmEngine *mm_engine_new(const MmEngineProgram *programs, uint32_t n_programs, const MmEngineClass *classes,
                        uint32_t n_classes, GError **error);
void mm_engine_free(MmEngine *e);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmEngine, mm_engine_free)

/* Runs the simulation from time 0 (may be called again). Fails on deadlock, and when the
 * simulated clock would pass MM_TIME_MAX (MM_ENGINE_ERROR_OVERFLOW). */
gboolean mm_engine_run(MmEngine *e, GError **error);

/* Results of the last run. */
MmTime mm_engine_makespan(const MmEngine *e);
MmTime mm_engine_class_end(const MmEngine *e, uint32_t cls);
MmTime mm_engine_op_start(const MmEngine *e, uint32_t cls, uint32_t op);
MmTime mm_engine_op_end(const MmEngine *e, uint32_t cls, uint32_t op);
/* Start and end of every op of class @cls, into arrays of its program's length. */
void mm_engine_class_times(const MmEngine *e, uint32_t cls, MmTime *start, MmTime *end);
/* Whether the engine finds collective groups by arithmetic (each class one device, class c =
 * device c, as --per-device lowers: nothing stored per member) rather than listing them
 * (docs/ARCHITECTURE.md, "Engine"). Either way the groups and their member order are the same. */
gboolean mm_engine_groups_arithmetic(const MmEngine *e);
/* Events processed in the last run (one per op completion). */
uint64_t mm_engine_events(const MmEngine *e);

/* ---- runs kept for reuse (a sweep's memo) ---------------------------- *
 * A run's results depend on its programs and classes alone: nothing else enters the engine, and
 * the simulation is deterministic. A sweep meets the same programs again and again (ZeRO stages
 * that a fully sharded strategy ignores, recompute policies that change nothing it lowers), so
 * it keeps results by a digest of what the engine reads and replays them instead of
 * simulating again. */

/* 128 bits over every field of @programs and @classes the engine reads (op fields, dependency
 * and transfer arrays, durations, capacities, interference pace, representative devices, counts).
 * Not cryptographic (xxHash64's round in four lanes): inputs that differ in one 8-byte word never
 * collide; others by chance only, about 2^-64 for a pair. Equal digests stand for equal runs. */
typedef struct {
  uint64_t h[2];
} MmEngineDigest;
void mm_engine_digest(const MmEngineProgram *programs, uint32_t n_programs, const MmEngineClass *classes,
                      uint32_t n_classes, MmEngineDigest *out);

/* What a finished run of an engine produced (every op's start and end, class ends, events,
 * the group lookup). (transfer full) */
typedef struct MmEngineResult MmEngineResult;
MmEngineResult *mm_engine_result_new(const MmEngine *e);
/* Bytes it holds. */
gsize mm_engine_result_size(const MmEngineResult *r);
void mm_engine_result_free(MmEngineResult *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmEngineResult, mm_engine_result_free)

/* An engine over @programs and @classes (borrowed) that has run already: its results are @r's
 * (copied), which a run of the same programs and classes produced. It answers every result
 * accessor as that run's engine did; it cannot run again (mm_engine_run fails). Fails when @r
 * does not have the shape of these programs and classes. */
MmEngine *mm_engine_new_replayed(const MmEngineProgram *programs, uint32_t n_programs, const MmEngineClass *classes,
                                 uint32_t n_classes, const MmEngineResult *r, GError **error);

/* Runs kept by digest, shared by threads: the newest up to @budget bytes (the oldest go first). */
typedef struct MmEngineMemo MmEngineMemo;
MmEngineMemo *mm_engine_memo_new(gsize budget);
void mm_engine_memo_free(MmEngineMemo *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(MmEngineMemo, mm_engine_memo_free)
/* A run of @programs and @classes: replayed from @m when it holds one of the same digest (*hit
 * TRUE), else built, run and kept. NULL @m: built and run. Errors as mm_engine_new and
 * mm_engine_run. (transfer full) */
MmEngine *mm_engine_memo_run(MmEngineMemo *m, const MmEngineProgram *programs, uint32_t n_programs,
                             const MmEngineClass *classes, uint32_t n_classes, gboolean *hit, GError **error);
/* Lookups answered from the memo, and runs it kept, so far (either pointer may be NULL). */
void mm_engine_memo_counts(MmEngineMemo *m, uint64_t *hits, uint64_t *kept);

G_END_DECLS

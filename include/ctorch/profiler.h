/* ctorch/profiler.h -- the op profiler (torch.profiler) and the
 * determinism switch (torch.use_deterministic_algorithms).
 *
 * PROFILER
 *
 *     ct_profiler_start(NULL);
 *     ... run a few training steps ...
 *     ct_profiler_stop();
 *     char *t = ct_profiler_table("self_cpu_time_total", 20);
 *     puts(t); free(t);
 *     if (ct_profiler_export_chrome_trace("trace.json")) ...   (open it in Perfetto)
 *
 * While the profiler runs, every op (every kernel call) is recorded with its
 * name, input shapes and dtypes, device, thread, start and end time
 * (CLOCK_MONOTONIC), self and total time (total includes the ops a kernel
 * runs inside itself, and user ranges include the ops run inside them),
 * an estimate of its FLOPs (elementwise: numel of the output; matmul family:
 * 2*M*N*K; conv: 2*N*Cout*Hout*Wout*(Cin/groups)*kh*kw; reductions: numel of
 * the input; the fused batch-norm ops: numel of the input, twice that for
 * batch_norm_bwd) and of the bytes it touches (inputs + outputs).  Fused
 * kernels are table ops like any other (BatchNorm's: batch_norm_fwd,
 * batch_norm_bwd, batch_norm_eval); each optimizer step is recorded as a
 * range "Optimizer.step#<name>.step".  Ops run by
 * other threads (DataLoader workers, OpenMP threads) are recorded in
 * per-thread buffers that are merged at ct_profiler_stop().  When the
 * profiler is off the cost is one predictable branch per op.
 *
 * Any program profiles itself when run with CT_PROFILE=1 in the environment
 * (checked once, at the first op): the profiler starts then, and at exit the
 * table is printed on stdout (sorted by CT_PROFILE_SORT, default
 * self_cpu_time_total; CT_PROFILE_ROWS rows, default 40; grouped by input
 * shapes when CT_PROFILE_SHAPES=1) and, when CT_PROFILE_TRACE=path is set,
 * the Chrome trace is written there.  A program that stops the session and
 * calls ct_profiler_clear() itself (printing its own tables) gets nothing
 * more at exit.
 *
 * The results of the last stopped session stay available (for the table and
 * the trace) until the next ct_profiler_start() or ct_profiler_clear().
 * Start/stop are meant to be called from one thread; ops may run on any.
 */
#ifndef CTORCH_PROFILER_H
#define CTORCH_PROFILER_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_profiler_opts {
    bool record_shapes;  /* record input shapes and dtypes of each op */
    bool with_flops;     /* estimate FLOPs and bytes of each op */
    int64_t max_events;  /* events kept per session (<= 0: 1,000,000); the
                          * table reports how many were dropped beyond it */
} ct_profiler_opts;

/* Starts a session (NULL opts: shapes and FLOPs on, default limit).
 * Discards the previous session's results.  CT_ERR_RUNTIME when a session
 * is already running. */
CT_API CT_NODISCARD ct_status ct_profiler_start(const ct_profiler_opts *opts);
/* Stops the session and merges the events of every thread.
 * CT_ERR_RUNTIME when no session is running. */
CT_API CT_NODISCARD ct_status ct_profiler_stop(void);
/* Whether a session is running. */
CT_API bool ct_profiler_is_enabled(void);
/* Forgets the last session's results (frees their memory). */
CT_API void ct_profiler_clear(void);

/* A user range, like torch.profiler.record_function: shows in the table and
 * the trace as one row/slice whose total time contains the ops run inside
 * it on this thread.  Ranges nest; pop closes the innermost range of the
 * calling thread.  Both are no-ops (CT_OK) when the profiler is off;
 * pop without a matching push gives CT_ERR_RUNTIME. */
CT_API CT_NODISCARD ct_status ct_profiler_push_range(const char *name);
CT_API CT_NODISCARD ct_status ct_profiler_pop_range(void);

/* The last session as a table like torch.profiler's
 * key_averages().table(): one row per op name with columns Name,
 * Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, # of Calls,
 * Total FLOPs, GFLOPS (FLOPs / CPU total).  sort_by: "self_cpu_time_total"
 * (NULL or ""), "cpu_time_total", "cpu_time" (average), "count" or
 * "flops"; row_limit <= 0: every row.  Returns a malloc'ed string (free it)
 * or NULL with an error (no session recorded, bad sort key, out of memory). */
CT_API char *ct_profiler_table(const char *sort_by, int row_limit);
/* Same, grouped by op name and input shapes (key_averages(
 * group_by_input_shape=True)), with an "Input Shapes" column. */
CT_API char *ct_profiler_table_by_shape(const char *sort_by, int row_limit);
/* Writes the last session as Chrome trace JSON ({"traceEvents": [{"name",
 * "ph": "X", "ts", "dur" (microseconds), "pid", "tid", "args": {"Input
 * Dims", "Input type", "flops", "bytes", "device"}}, ...]}), which
 * chrome://tracing and Perfetto open.  The write is atomic (temp file,
 * fsync, rename). */
CT_API CT_NODISCARD ct_status ct_profiler_export_chrome_trace(const char *path);
/* Number of events recorded in the last session (0 when none). */
CT_API int64_t ct_profiler_event_count(void);

/* DETERMINISM
 *
 * With a fixed seed (ct_manual_seed) and a fixed thread count, results are
 * bitwise identical from run to run.  ct_use_deterministic_algorithms(true)
 * makes them identical across thread counts too (ct_set_num_threads(1) and
 * (n) give the same bits), at some cost in speed:
 *  - full reductions (sum, mean, nansum, nanmean, prod over one long row)
 *    split the row into fixed-size chunks, independent of the thread count,
 *    and combine the partials in a fixed order;
 *  - OpenBLAS runs single-threaded (its thread count is restored when the
 *    switch is turned off), so GEMMs (matmul, linear, conv) never depend on
 *    how BLAS partitions the work;
 *  - the other kernels are already thread-count independent: elementwise
 *    ops compute each element alone; row reductions, softmax, scans and
 *    sorting keep each row on one thread; scatter_add, index_add and
 *    index_put(accumulate) use serial, atomic-free loops over the indices;
 *    random ops use a counter-based generator (Philox) whose streams do not
 *    depend on the threads.
 * Like torch.use_deterministic_algorithms, the switch is process-wide. */
CT_API void ct_use_deterministic_algorithms(bool on);
CT_API bool ct_are_deterministic_algorithms_enabled(void);

#ifdef __cplusplus
}
#endif
#endif

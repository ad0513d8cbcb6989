/* ta_multi.c: the multi-device layer. One backend object that owns n per-device backends
 * (GPUs on CUDA; separate memory pools on the CPU backend, so that the routing is tested
 * without a GPU) and presents the ordinary vtable (ta_backend.h), so that nothing above it
 * changes: the daemon's registry holds, as a tile's "memory", this layer's record of the
 * tile's parts.
 *
 * Placement (ta_place.h), decided at tile_alloc_placed:
 *  - a device: the whole tile on that device;
 *  - auto: the whole tile on the device with the most free memory (mem_info of its backend;
 *    for backends without it, the CPU pools, the one with the fewest tile bytes placed by
 *    this layer); ties go to the lowest ordinal;
 *  - shard (over every device, or shard:N over N): the first axis is split into ranges of
 *    rows, as even as possible (the first rows % N parts get one row more), one per device,
 *    rows ascending with the ordinals; with fewer rows than devices, one row per part. The
 *    N devices are those auto would rank first (all of them when N is the device count);
 *  - parts (TA_PLACE_PARTS: a tile restored where it lived): exactly the parts given, each
 *    on an existing device, ordinals ascending with the rows as shard makes them.
 * tile_alloc (no shape) places the whole tile as the default says, with shard taken as auto.
 *
 * Apply. A tile wholly on one device: the plan goes to that device's backend unchanged. A
 * region plan (element-wise, read, write, fill: no indices, nothing out of range) on a
 * sharded tile: one region sub-plan per part its rows meet, operands and old_out moved to
 * that part's first row (apply_region). Any other plan on a sharded tile: the plan (already
 * validated for the whole tile, so that bounds rules are decided for the whole request before
 * anything is applied: with check_bounds off ta_plan_build has rejected any out-of-range index) is
 * resolved on the host element by element (ta_plan_resolve), TA_MULTI_CHUNK elements at a time;
 * each element that is neither masked off nor skipped goes to the part holding its flat offset,
 * into a per-part FLAT sub-plan (offsets relative to the part, values and compare gathered,
 * relative order kept). The sub-plans of one request run at the same time, one per device:
 * the calling thread runs one, each other device's helper lane (its own queue and threads,
 * so that no lock is shared between devices) runs the others, and apply returns when all
 * have finished; old values come back into old_out in request order; masked-off and skipped
 * elements get what ta_plan.h says (the compare value for CAS, the padding for LOAD, zero
 * bits otherwise) and skipped ones are counted. Every element is applied exactly once, on
 * its device, with the request's op and sem, so it keeps the semantics it has on one device.
 *
 * apply_many (the dispatcher's batches of small requests): runs of relaxed requests on tiles
 * wholly on one device are split by device (order kept within each) and each device's share
 * goes to its backend's own apply_many (on CUDA, that GPU's batcher) at the same time; a
 * request with acquire/release semantics, on a sharded tile or with device operands runs
 * alone, after all before it and before all after it.
 *
 * sem and scope across devices (docs/MULTI-GPU.md): apply returns only when every part has
 * run, so a connection's later request sees every part of its earlier ones, and a release in
 * a later request covers the earlier writes on every device (on the CPU pools, which share
 * the host's coherent memory, C11 gives that directly; a CUDA device backend's apply has
 * finished its writes when it returns). Where one chunk of a request touches more than one
 * device, its scope is raised to sys (when sys is a legal variant of the op), since the
 * request's elements are then observed from several devices. There is no order among the
 * elements of one request, as on one device.
 *
 * Device operands (CUDA IPC buffers, opened by device 0's backend; a CUDA mapping serves only
 * its own context's GPU, so each device that reads one maps it in its own context too):
 * into a tile wholly on one device they are read in place (over peer access, which the daemon
 * enables and reports with ta_multi_set_peers; a device without it is refused); into a
 * sharded tile, integer adds and subs without old values take apply_partials (scratch tiles,
 * see there: with every key on one GPU, one apply there with a merge-out, ta_plan.h, that
 * zeroes the scratch, runs the keys into it and adds each part's rows into the part on one
 * stream with one wait), anything else is refused with UNIMPLEMENTED. A failure on one
 * device after others have applied their parts leaves those parts applied (the error names
 * the device).
 *
 * Faults per device. A device whose backend reports it failed (vtable failed: a sticky CUDA
 * error) or that a drill fails (TILEATOM_FAIL_DEVICE=N[:K], read here at startup: device N
 * fails once it has run K requests, or parts of requests; K defaults to 0) is marked failed
 * for good. From then on every request on a tile with a part there is refused whole, before
 * any part runs (a region plan on a sharded tile only when its rows meet such a part; any
 * other plan, whose elements are known only once resolved, whatever it touches), with UNAVAILABLE
 * "device N failed: <cause>" (the request during which it failed answers with its backend's own
 * error and may have applied its other parts, as above); a new tile placed there is refused the
 * same way, and auto placement ranks it last. The other devices keep serving. device_stats reports
 * the flag and the cause. */
#include "ta_backend.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Elements of a sharded plan resolved and routed at a time. */
#define TA_MULTI_CHUNK 65536
/* Plans up to this many elements route through buffers on the stack. */
#define TA_MULTI_STACK 64

/* One part of a tile: a range of rows on one device. */
typedef struct multi_part {
	int device;    /* device ordinal */
	int64_t first; /* first row */
	int64_t end;   /* one past the last row */
	int64_t elem0; /* flat element offset of its first element in the whole tile */
	int64_t elems; /* elements it holds */
	size_t bytes;  /* bytes of its memory */
	void *mem;     /* its memory on that device's backend */
} multi_part;

/* A tile of this layer (what its tile_alloc hands out as "memory"). */
typedef struct multi_tile {
	size_t bytes;      /* bytes of the whole tile */
	int nparts;        /* parts, 1..TA_MAX_DEVICES */
	multi_part part[]; /* rows ascending */
} multi_tile;

/* Helper threads per device that run other devices' parts of a request while the calling
 * thread runs one part itself. */
#define TA_MULTI_HELPERS 4

/* Counts down the parts of one request still running; the caller waits on it. */
typedef struct multi_latch {
	pthread_mutex_t mu; /* guards left */
	pthread_cond_t cv;  /* signalled when left reaches 0 */
	int left;           /* parts not yet finished */
} multi_latch;

/* One unit of work for a device's helpers: run fn(arg), then count down latch. */
typedef struct multi_job {
	void (*fn)(void *arg);  /* the work */
	void *arg;              /* its argument */
	multi_latch *latch;     /* counted down when fn returns */
	struct multi_job *next; /* queue link */
} multi_job;

/* A device's queue of jobs and its helper threads (one lane per device, so that nothing
 * here serialises different devices). */
typedef struct multi_lane {
	pthread_mutex_t mu;                  /* guards head, tail, stop */
	pthread_cond_t cv;                   /* signalled when a job arrives or on stop */
	multi_job *head, *tail;              /* FIFO of jobs */
	bool stop;                           /* the helpers exit */
	int nthreads;                        /* helpers started */
	pthread_t threads[TA_MULTI_HELPERS]; /* the helpers */
} multi_lane;

/* Scratch tiles a device keeps for apply_partials between requests (reused after zeroing,
 * so that a histogram request does not allocate and free device memory each time). */
#define TA_MULTI_SCRATCH_KEEP 4

/* One kept scratch. */
typedef struct multi_scratch {
	void *mem;    /* memory of the device's backend */
	size_t bytes; /* its size */
} multi_scratch;

/* A device's kept scratches. */
typedef struct scratch_pool {
	pthread_mutex_t mu;                        /* guards n and kept */
	int n;                                     /* kept now */
	multi_scratch kept[TA_MULTI_SCRATCH_KEEP]; /* the kept ones */
} scratch_pool;

/* The composing backend. */
typedef struct multi_backend {
	ta_backend base;                               /* points at vt; must be first */
	ta_backend_vtbl vt;                            /* multi_vtbl, less what device 0 lacks */
	int n;                                         /* devices */
	ta_backend *dev[TA_MAX_DEVICES];               /* their backends */
	atomic_uint_fast64_t used[TA_MAX_DEVICES];     /* tile bytes placed on each */
	atomic_uint_fast64_t tiles[TA_MAX_DEVICES];    /* tile parts placed on each */
	atomic_uint_fast64_t requests[TA_MAX_DEVICES]; /* requests (parts) each has run */
	ta_placement dflt;                             /* the default placement */
	multi_lane lane[TA_MAX_DEVICES];               /* each device's helpers (n > 1 only) */
	scratch_pool pool[TA_MAX_DEVICES];             /* each device's kept scratches */
	bool pools_ready;                              /* the pools' mutexes exist */
	bool lanes_ready;                              /* the lanes' mutexes and conds exist */
	bool has_peers;                                /* ords and peer are set (CUDA) */
	bool partials_for_host; /* TA_MULTI_PARTIALS set: host-operand plans that qualify take
	                           the partial-tile path too (tests it on CPU pools) */
	bool partials_single;   /* TA_MULTI_PARTIALS=single: ... with one scratch, on the
	                           first part's device (as for GPU keys that live there) */
	atomic_bool failed[TA_MAX_DEVICES]; /* the device failed (for good) */
	atomic_int failing[TA_MAX_DEVICES]; /* 1 once a thread has claimed writing cause */
	char cause[TA_MAX_DEVICES][160];    /* why (written before failed is set) */
	int drill_device;                   /* TILEATOM_FAIL_DEVICE's device; -1: no drill */
	uint64_t drill_after;               /* ... fails after this many requests */
	bool trace; /* TA_MULTI_TRACE=1: time apply_partials' steps (both kinds, printed apart) */
	atomic_uint_fast64_t tr_n; /* apply_partials calls timed (separate steps) */
	atomic_uint_fast64_t
	    tr_ns[5];               /* their ns: scratch zeroed, run, merge, scratch back, whole */
	atomic_uint_fast64_t tr1_n; /* apply_partials_merged calls timed (one apply) */
	atomic_uint_fast64_t
	    tr1_ns[4];            /* their ns: scratch taken, the apply, scratch back, whole */
	int ords[TA_MAX_DEVICES]; /* each device's CUDA ordinal */
	unsigned char peer[TA_MAX_DEVICES * TA_MAX_DEVICES]; /* [i * n + j]: i reads j's memory */
} multi_backend;

/* ---- faults: devices that can no longer serve --------------------------------------- */

/* Marks device d failed for cause (the first cause stays) and logs it once. */
static void mark_failed(multi_backend *mb, int d, const char *cause)
{
	int zero = 0;
	if (!atomic_compare_exchange_strong(&mb->failing[d], &zero, 1))
		return;
	snprintf(mb->cause[d], sizeof mb->cause[d], "%s", cause);
	atomic_store_explicit(&mb->failed[d], true, memory_order_release);
	fprintf(stderr,
	        "tileatom multi-device: device %d failed: %s; its tiles answer "
	        "UNAVAILABLE, the other devices keep serving\n",
	        d, cause);
}

/* True when device d has failed: marked before, its backend says so now, or the drill's
 * request count is reached. */
static bool device_failed(multi_backend *mb, int d)
{
	if (atomic_load_explicit(&mb->failed[d], memory_order_acquire))
		return true;
	char cause[sizeof mb->cause[d]];
	ta_backend *dev = mb->dev[d];
	if (dev->vt->failed && dev->vt->failed(dev, cause, sizeof cause)) {
		mark_failed(mb, d, cause);
		return true;
	}
	if (d == mb->drill_device &&
	    atomic_load_explicit(&mb->requests[d], memory_order_relaxed) >= mb->drill_after) {
		snprintf(cause, sizeof cause,
		         "fault injected by TILEATOM_FAIL_DEVICE after %llu requests",
		         (unsigned long long)mb->drill_after);
		mark_failed(mb, d, cause);
		return true;
	}
	return false;
}

/* The first failed device among tile t's parts, -1 when none has failed. */
static int tile_failed_device(multi_backend *mb, const multi_tile *t)
{
	for (int p = 0; p < t->nparts; p++)
		if (device_failed(mb, t->part[p].device))
			return t->part[p].device;
	return -1;
}

/* Sets err to UNAVAILABLE naming failed device d and its cause. */
static ta_status device_failed_error(multi_backend *mb, int d, ta_error *err)
{
	return ta_error_set(err, TA_UNAVAILABLE, "device %d failed: %s", d, mb->cause[d]);
}

/* Reads TILEATOM_FAIL_DEVICE ("N" or "N:K"): the drill's device and request count; false
 * (with err set) for a value that is not that or names no device. */
static bool drill_read(multi_backend *mb, ta_error *err)
{
	mb->drill_device = -1;
	const char *v = getenv("TILEATOM_FAIL_DEVICE");
	if (!v || !*v)
		return true;
	char *end = NULL;
	long d = strtol(v, &end, 10);
	unsigned long long k = 0;
	if (end != v && *end == ':') {
		const char *ks = end + 1;
		k = strtoull(ks, &end, 10);
		if (end == ks || *ks == '-')
			end = (char *)v; /* no count: invalid */
	}
	if (end == v || *end != '\0' || d < 0 || d >= mb->n) {
		ta_error_set(
		    err, TA_INVALID_ARGUMENT,
		    "TILEATOM_FAIL_DEVICE=%s: expected N or N:K with N a device (0..%d) and "
		    "K a request count",
		    v, mb->n - 1);
		return false;
	}
	mb->drill_device = (int)d;
	mb->drill_after = k;
	fprintf(stderr, "tileatom multi-device: drill: device %ld fails after %llu requests\n", d,
	        k);
	return true;
}

/* ---- helpers: running parts on several devices at the same time ----------------------- */

/* A helper thread of one lane: runs its jobs until stop. */
static void *lane_main(void *arg)
{
	multi_lane *ln = arg;
	pthread_mutex_lock(&ln->mu);
	for (;;) {
		while (!ln->head && !ln->stop)
			pthread_cond_wait(&ln->cv, &ln->mu);
		if (!ln->head) /* stop and nothing left */
			break;
		multi_job *j = ln->head;
		ln->head = j->next;
		if (!ln->head)
			ln->tail = NULL;
		pthread_mutex_unlock(&ln->mu);
		j->fn(j->arg);
		multi_latch *l = j->latch; /* j may go once the latch opens */
		pthread_mutex_lock(&l->mu);
		if (--l->left == 0)
			pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_mutex_lock(&ln->mu);
	}
	pthread_mutex_unlock(&ln->mu);
	return NULL;
}

/* Stops and joins every lane's helpers and frees the lanes' locks. */
static void lanes_stop(multi_backend *mb)
{
	if (!mb->lanes_ready)
		return;
	for (int d = 0; d < mb->n; d++) {
		multi_lane *ln = &mb->lane[d];
		pthread_mutex_lock(&ln->mu);
		ln->stop = true;
		pthread_cond_broadcast(&ln->cv);
		pthread_mutex_unlock(&ln->mu);
		for (int i = 0; i < ln->nthreads; i++)
			pthread_join(ln->threads[i], NULL);
		pthread_cond_destroy(&ln->cv);
		pthread_mutex_destroy(&ln->mu);
	}
	mb->lanes_ready = false;
}

/* Creates each device's lane and starts its helpers (only with more than one device). */
static ta_status lanes_start(multi_backend *mb, ta_error *err)
{
	if (mb->n < 2)
		return TA_OK;
	int d = 0;
	for (; d < mb->n; d++) {
		multi_lane *ln = &mb->lane[d];
		if (pthread_mutex_init(&ln->mu, NULL) != 0)
			break;
		if (pthread_cond_init(&ln->cv, NULL) != 0) {
			pthread_mutex_destroy(&ln->mu);
			break;
		}
	}
	if (d < mb->n) {
		for (int k = 0; k < d; k++) {
			pthread_cond_destroy(&mb->lane[k].cv);
			pthread_mutex_destroy(&mb->lane[k].mu);
		}
		return ta_error_set(err, TA_INTERNAL, "multi-device: creating a lock failed");
	}
	mb->lanes_ready = true;
	for (d = 0; d < mb->n; d++)
		for (int i = 0; i < TA_MULTI_HELPERS; i++) {
			int rc =
			    pthread_create(&mb->lane[d].threads[i], NULL, lane_main, &mb->lane[d]);
			if (rc != 0) {
				lanes_stop(mb);
				return ta_error_set(err, TA_INTERNAL,
				                    "multi-device: starting a helper thread: %s",
				                    strerror(rc));
			}
			mb->lane[d].nthreads++;
		}
	return TA_OK;
}

/* Runs fn(args[i]) for i in [0, k), job i on device devs[i]: jobs 1.. go to their devices'
 * helpers, job 0 runs on the calling thread; returns when all have finished. */
static void run_on_devices(multi_backend *mb, int k, const int *devs, void (*fn)(void *),
                           void *const *args)
{
	if (k <= 1 || !mb->lanes_ready) {
		for (int i = 0; i < k; i++)
			fn(args[i]);
		return;
	}
	multi_latch latch;
	multi_job jobs[TA_MAX_DEVICES];
	if (pthread_mutex_init(&latch.mu, NULL) != 0) { /* then one after another */
		for (int i = 0; i < k; i++)
			fn(args[i]);
		return;
	}
	if (pthread_cond_init(&latch.cv, NULL) != 0) {
		pthread_mutex_destroy(&latch.mu);
		for (int i = 0; i < k; i++)
			fn(args[i]);
		return;
	}
	latch.left = k - 1;
	for (int i = 1; i < k; i++) {
		multi_lane *ln = &mb->lane[devs[i]];
		jobs[i] = (multi_job){fn, args[i], &latch, NULL};
		pthread_mutex_lock(&ln->mu);
		if (ln->tail)
			ln->tail->next = &jobs[i];
		else
			ln->head = &jobs[i];
		ln->tail = &jobs[i];
		pthread_cond_signal(&ln->cv);
		pthread_mutex_unlock(&ln->mu);
	}
	fn(args[0]);
	pthread_mutex_lock(&latch.mu);
	while (latch.left > 0)
		pthread_cond_wait(&latch.cv, &latch.mu);
	pthread_mutex_unlock(&latch.mu);
	pthread_cond_destroy(&latch.cv);
	pthread_mutex_destroy(&latch.mu);
}

/* One device's part of a request: a plan on one device's memory and what came of it. */
typedef struct part_call {
	ta_backend *be;              /* the device's backend */
	atomic_uint_fast64_t *count; /* the device's request counter */
	void *mem;                   /* the part's memory there */
	size_t bytes;                /* its bytes */
	ta_plan plan;                /* the sub-plan */
	ta_result res;               /* its result */
	ta_error err;                /* its error */
	ta_status st;                /* its outcome */
} part_call;

/* Part calls held on the stack for tiles of up to this many parts (more: the heap). */
#define TA_MULTI_STACK_PARTS 4

/* Room for n part calls: stack (TA_MULTI_STACK_PARTS of them) when it suffices, else the
 * heap (NULL when that fails); free it with part_calls_free. */
static part_call *part_calls_get(part_call *stack, int n)
{
	return n <= TA_MULTI_STACK_PARTS ? stack : malloc((size_t)n * sizeof(part_call));
}

/* Frees what part_calls_get gave, unless it was stack. */
static void part_calls_free(part_call *calls, part_call *stack)
{
	if (calls != stack)
		free(calls);
}

/* run_on_devices job: applies one part_call. */
static void part_call_run(void *arg)
{
	part_call *c = arg;
	c->res = (ta_result){0, 0};
	atomic_fetch_add_explicit(c->count, 1, memory_order_relaxed);
	c->st = ta_backend_apply(c->be, c->mem, c->bytes, &c->plan, &c->res, &c->err);
}

/* ---- placement ----------------------------------------------------------------------- */

/* A device's free-memory score for auto: free bytes where its backend tells them, else
 * fewer placed bytes score higher. */
static uint64_t free_score(multi_backend *mb, int d)
{
	ta_backend *be = mb->dev[d];
	uint64_t freeb = 0, total = 0;
	if (device_failed(mb, d))
		return 0;
	if (be->vt->mem_info && be->vt->mem_info(be, &freeb, &total) == TA_OK)
		return freeb;
	return UINT64_MAX - atomic_load(&mb->used[d]);
}

/* Fills order[0..n) with the devices by descending free score (ties: lower ordinal). */
static void rank_devices(multi_backend *mb, int *order)
{
	uint64_t score[TA_MAX_DEVICES];
	for (int d = 0; d < mb->n; d++) {
		score[d] = free_score(mb, d);
		order[d] = d;
	}
	for (int i = 1; i < mb->n; i++) /* insertion sort: stable, n is small */
		for (int j = i; j > 0 && score[order[j]] > score[order[j - 1]]; j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
}

/* Compares two ints ascending (qsort). */
static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Decides the parts of a tile of rows rows of row_bytes each under place: fills devs and
 * rows per part and returns the part count, or 0 with err set. */
static int plan_parts(multi_backend *mb, const ta_placement *place, int64_t rows, int *devs,
                      int64_t *nrows, ta_error *err)
{
	ta_placement p = place && place->kind != TA_PLACE_DEFAULT ? *place : mb->dflt;
	int order[TA_MAX_DEVICES];
	switch (p.kind) {
	case TA_PLACE_DEVICE:
		if (p.device < 0 || p.device >= mb->n) {
			ta_error_set(err, TA_INVALID_ARGUMENT,
			             "placement: device %d does not exist (devices 0..%d)",
			             p.device, mb->n - 1);
			return 0;
		}
		devs[0] = p.device;
		nrows[0] = rows;
		return 1;
	case TA_PLACE_SHARD: {
		int n = p.shards > 0 ? p.shards : mb->n;
		if (n > mb->n) {
			ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "placement: cannot shard over %d devices (the daemon serves %d)", n,
			    mb->n);
			return 0;
		}
		if ((int64_t)n > rows)
			n = (int)rows;
		rank_devices(mb, order);
		memcpy(devs, order, (size_t)n * sizeof(int));
		qsort(devs, (size_t)n, sizeof(int), cmp_int);
		for (int i = 0; i < n; i++)
			nrows[i] = rows / n + (i < rows % n ? 1 : 0);
		return n;
	}
	case TA_PLACE_PARTS: {
		const ta_tile_where *w = p.parts;
		if (ta_tile_where_check(w, rows, err) != TA_OK)
			return 0;
		for (int i = 0; i < w->nparts; i++) {
			int d = w->part[i].device;
			if (d >= mb->n) {
				ta_error_set(err, TA_INVALID_ARGUMENT,
				             "placement: device %d does not exist (devices 0..%d)",
				             d, mb->n - 1);
				return 0;
			}
			if (i > 0 && d <= devs[i - 1]) {
				ta_error_set(
				    err, TA_INVALID_ARGUMENT,
				    "placement: part %d is on device %d after device %d (parts "
				    "go on distinct devices, ordinals ascending with the rows)",
				    i, d, devs[i - 1]);
				return 0;
			}
			devs[i] = d;
			nrows[i] = w->part[i].end - w->part[i].first;
		}
		return w->nparts;
	}
	case TA_PLACE_AUTO:
		rank_devices(mb, order);
		devs[0] = order[0];
		nrows[0] = rows;
		return 1;
	default: /* TA_PLACE_DEFAULT as the daemon's default: device 0 */
		devs[0] = 0;
		nrows[0] = rows;
		return 1;
	}
}

/* Frees the parts [0, n) of t and t. */
static void free_parts(multi_backend *mb, multi_tile *t, int n)
{
	for (int i = 0; i < n; i++) {
		multi_part *pt = &t->part[i];
		ta_backend_tile_free(mb->dev[pt->device], pt->mem);
		atomic_fetch_sub(&mb->used[pt->device], (uint_fast64_t)pt->bytes);
		atomic_fetch_sub(&mb->tiles[pt->device], 1);
	}
	free(t);
}

/* Allocates a tile of rows rows of row_bytes bytes (bytes in all, elements of es bytes)
 * under place. */
static ta_status alloc_rows(multi_backend *mb, int64_t rows, size_t row_bytes, size_t bytes,
                            size_t es, const ta_placement *place, void **mem, ta_error *err)
{
	*mem = NULL;
	int devs[TA_MAX_DEVICES];
	int64_t nrows[TA_MAX_DEVICES];
	int n = plan_parts(mb, place, rows, devs, nrows, err);
	if (n == 0)
		return err ? err->code : TA_INVALID_ARGUMENT;
	multi_tile *t = calloc(1, sizeof(*t) + (size_t)n * sizeof(multi_part));
	if (!t)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "multi-device: out of memory");
	t->bytes = bytes;
	t->nparts = n;
	int64_t row = 0;
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		multi_part *pt = &t->part[i];
		pt->device = devs[i];
		pt->first = row;
		pt->end = row + nrows[i];
		pt->bytes = n == 1 ? bytes : (size_t)nrows[i] * row_bytes;
		pt->elem0 = (int64_t)(at / es);
		pt->elems = (int64_t)(pt->bytes / es);
		if (device_failed(mb, pt->device)) {
			free_parts(mb, t, i);
			return device_failed_error(mb, devs[i], err);
		}
		ta_error derr = {0};
		ta_status st =
		    ta_backend_tile_alloc(mb->dev[pt->device], pt->bytes, &pt->mem, &derr);
		if (st != TA_OK) {
			free_parts(mb, t, i);
			return ta_error_set(err, st, "device %d: %s", pt->device, derr.msg);
		}
		atomic_fetch_add(&mb->used[pt->device], (uint_fast64_t)pt->bytes);
		atomic_fetch_add(&mb->tiles[pt->device], 1);
		row = pt->end;
		at += pt->bytes;
	}
	*mem = t;
	return TA_OK;
}

/* vtable tile_alloc_placed: see ta_backend.h. */
static ta_status multi_tile_alloc_placed(ta_backend *be, const ta_tile_shape *shape, size_t bytes,
                                         const ta_placement *place, void **mem, ta_error *err)
{
	multi_backend *mb = (multi_backend *)be;
	int64_t rows = shape && shape->rank > 0 ? shape->shape[0] : 1;
	if (rows < 1 || bytes % (size_t)rows != 0)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "multi-device: %zu bytes are not a whole number of %lld rows",
		                    bytes, (long long)rows);
	size_t es = shape ? ta_dtype_size(shape->dtype) : 1;
	if (es == 0 || (bytes / (size_t)rows) % es != 0)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "multi-device: rows of %zu bytes are not whole elements",
		                    bytes / (size_t)rows);
	return alloc_rows(mb, rows, bytes / (size_t)rows, bytes, es, place, mem, err);
}

/* vtable tile_alloc: the whole tile on one device as the default says (shard: auto). */
static ta_status multi_tile_alloc(ta_backend *be, size_t bytes, void **mem, ta_error *err)
{
	multi_backend *mb = (multi_backend *)be;
	ta_placement p = mb->dflt;
	if (p.kind == TA_PLACE_SHARD)
		p.kind = TA_PLACE_AUTO;
	return alloc_rows(mb, 1, bytes, bytes, 1, &p, mem, err); /* one part: never routed */
}

/* vtable tile_free. */
static void multi_tile_free(ta_backend *be, void *mem)
{
	if (mem)
		free_parts((multi_backend *)be, mem, ((multi_tile *)mem)->nparts);
}

/* vtable tile_footprint: each part's footprint on its device plus the layer's own record
 * (a tile not yet allocated, mem NULL: as one part on device 0). */
static uint64_t multi_tile_footprint(ta_backend *be, void *mem, size_t bytes)
{
	multi_backend *mb = (multi_backend *)be;
	if (!mem)
		return sizeof(multi_tile) + sizeof(multi_part) +
		       ta_backend_tile_footprint(mb->dev[0], NULL, bytes);
	const multi_tile *t = mem;
	uint64_t sum = sizeof(multi_tile) + (uint64_t)t->nparts * sizeof(multi_part);
	for (int i = 0; i < t->nparts; i++)
		sum += ta_backend_tile_footprint(mb->dev[t->part[i].device], t->part[i].mem,
		                                 t->part[i].bytes);
	return sum;
}

/* vtable tile_where. */
static void multi_tile_where(ta_backend *be, void *mem, const ta_tile_shape *shape,
                             ta_tile_where *where)
{
	(void)be;
	const multi_tile *t = mem;
	where->nparts = t->nparts;
	for (int i = 0; i < t->nparts; i++) {
		where->part[i].device = t->part[i].device;
		where->part[i].first = t->part[i].first;
		where->part[i].end =
		    t->nparts == 1 && shape && shape->rank > 0 ? shape->shape[0] : t->part[i].end;
	}
}

/* ---- apply --------------------------------------------------------------------------- */

/* Reads element i (size es) of packed little-endian data as raw bits. */
static inline uint64_t get_bits(const void *data, int64_t i, size_t es)
{
	uint64_t v = 0;
	memcpy(&v, (const char *)data + i * (int64_t)es, es);
	return v;
}

/* Writes bits as element i (size es) of packed data. */
static inline void put_bits(void *data, int64_t i, size_t es, uint64_t v)
{
	memcpy((char *)data + i * (int64_t)es, &v, es);
}

/* Per-chunk routing buffers (n elements each). */
typedef struct route_buf {
	int *code;      /* per element: its part, -1 masked off, -2 skipped */
	int64_t *flat;  /* per element: its flat tile offset (when routed) */
	int64_t *idx;   /* per routed element, grouped by part: offset inside the part */
	int64_t *where; /* per routed element: its position in the chunk */
	uint8_t *vals;  /* per routed element: values bits (es bytes each) */
	uint8_t *cmps;  /* per routed element: compare bits */
	uint8_t *olds;  /* per routed element: old value bits */
} route_buf;

/* The part holding flat element offset off (binary search; parts ascend). */
static int part_of(const multi_tile *t, int64_t off)
{
	int lo = 0, hi = t->nparts - 1;
	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (t->part[mid].elem0 <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* Fills *s: the FLAT sub-plan of plan for part pt of cnt elements at offsets idx (inside the
 * part) with values and compare bits at vals and cmps (used when plan has them) and old
 * values into olds (NULL: none), with scope. */
static void flat_subplan(ta_plan *s, const ta_plan *plan, ta_scope scope, const multi_part *pt,
                         int64_t cnt, int64_t *idx, void *vals, void *cmps, void *olds)
{
	memset(s, 0, sizeof(*s));
	s->op = plan->op;
	s->dtype = plan->dtype;
	s->sem = plan->sem;
	s->scope = scope;
	s->space = plan->space;
	s->addr = TA_ADDR_FLAT;
	s->check_bounds = true;
	s->want_old = plan->want_old;
	s->rank = 1;
	s->shape[0] = cnt;
	s->count = cnt;
	s->tile_rank = 1;
	s->tile_shape[0] = pt->elems;
	s->tile_stride[0] = 1;
	s->extent[0] = pt->elems;
	s->region_count = pt->elems;
	s->n_index = 1;
	s->index[0].data = idx;
	s->index[0].dtype = TA_DTYPE_I64;
	s->index[0].stride[0] = 1;
	if (plan->values.data) {
		s->values.data = vals;
		s->values.dtype = plan->dtype;
		s->values.stride[0] = 1;
	}
	if (plan->compare.data) {
		s->compare.data = cmps;
		s->compare.dtype = plan->dtype;
		s->compare.stride[0] = 1;
	}
	s->padding_bits = plan->padding_bits;
	s->old_out = olds;
}

/* Runs elements [k0, k0 + n) of plan over the parts of t through buffers b; adds to *res. */
static ta_status route_chunk(multi_backend *mb, const multi_tile *t, const ta_plan *plan,
                             int64_t k0, int64_t n, route_buf *b, ta_result *res, ta_error *err)
{
	size_t es = ta_dtype_size(plan->dtype);
	uint64_t emask = es == 8 ? UINT64_MAX : (UINT64_C(1) << (es * 8)) - 1;
	int64_t cnt[TA_MAX_DEVICES] = {0}, start[TA_MAX_DEVICES], pos[TA_MAX_DEVICES];
	int touched = 0;
	for (int64_t i = 0; i < n; i++) {
		int64_t off = 0;
		int how = ta_plan_resolve(plan, k0 + i, &off);
		if (how <= 0) {
			b->code[i] = how < 0 ? -2 : -1;
			continue;
		}
		int p = part_of(t, off);
		if (off - t->part[p].elem0 >= t->part[p].elems)
			return ta_error_set(err, TA_INTERNAL,
			                    "multi-device: element %lld resolved outside the tile",
			                    (long long)(k0 + i));
		b->code[i] = p;
		b->flat[i] = off;
		if (cnt[p]++ == 0)
			touched++;
	}
	int64_t sum = 0;
	for (int p = 0; p < t->nparts; p++) {
		start[p] = pos[p] = sum;
		sum += cnt[p];
	}
	/* group by part, keeping the request order inside each: routed element j is chunk
	 * element where[j] */
	for (int64_t i = 0; i < n; i++)
		if (b->code[i] >= 0)
			b->where[pos[b->code[i]]++] = i;
	for (int64_t j = 0; j < sum; j++) {
		int64_t i = b->where[j];
		int64_t k = k0 + i;
		int p = b->code[i];
		b->idx[j] = b->flat[i] - t->part[p].elem0;
		if (plan->values.data)
			put_bits(b->vals, j, es, ta_operand_bits(plan, &plan->values, k));
		if (plan->compare.data)
			put_bits(b->cmps, j, es, ta_operand_bits(plan, &plan->compare, k));
	}
	ta_scope scope = plan->scope;
	if (touched > 1 && ta_variant_legal(plan->op, plan->dtype, plan->sem, TA_SCOPE_SYS,
	                                    plan->space, plan->want_old))
		scope = TA_SCOPE_SYS;
	part_call stack[TA_MULTI_STACK_PARTS];
	part_call *calls = part_calls_get(stack, t->nparts);
	if (!calls)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "multi-device: out of memory");
	void *args[TA_MAX_DEVICES] = {0};
	int devs[TA_MAX_DEVICES] = {0}, parts[TA_MAX_DEVICES] = {0}, k = 0;
	for (int p = 0; p < t->nparts; p++) {
		if (cnt[p] == 0)
			continue;
		const multi_part *pt = &t->part[p];
		part_call *c = &calls[k];
		memset(c, 0, sizeof(*c));
		c->be = mb->dev[pt->device];
		c->count = &mb->requests[pt->device];
		c->mem = pt->mem;
		c->bytes = pt->bytes;
		devs[k] = pt->device;
		parts[k] = p;
		args[k] = c;
		k++;
		flat_subplan(&c->plan, plan, scope, pt, cnt[p], b->idx + start[p],
		             b->vals + start[p] * (int64_t)es, b->cmps + start[p] * (int64_t)es,
		             plan->want_old ? b->olds + start[p] * (int64_t)es : NULL);
	}
	/* every part at the same time, each on its device; all finish before old values
	 * are merged and before apply returns */
	run_on_devices(mb, k, devs, part_call_run, args);
	ta_status st = TA_OK;
	for (int i = 0; i < k && st == TA_OK; i++) {
		const part_call *c = &calls[i];
		int p = parts[i];
		if (c->st != TA_OK)
			st = ta_error_set(err, c->st, "device %d: %s", devs[i], c->err.msg);
		else if (c->res.skipped != 0 || c->res.applied != (uint64_t)cnt[p])
			st = ta_error_set(err, TA_INTERNAL,
			                  "multi-device: device %d applied %llu of %lld elements",
			                  devs[i], (unsigned long long)c->res.applied,
			                  (long long)cnt[p]);
		else
			res->applied += c->res.applied;
	}
	part_calls_free(calls, stack);
	if (st != TA_OK)
		return st;
	if (plan->want_old) {
		uint64_t fill_load = plan->padding_bits & emask;
		for (int64_t j = 0; j < sum; j++)
			put_bits(plan->old_out, k0 + b->where[j], es, get_bits(b->olds, j, es));
		for (int64_t i = 0; i < n; i++) {
			if (b->code[i] >= 0)
				continue;
			uint64_t v = plan->op == TA_OP_CAS
			                 ? ta_operand_bits(plan, &plan->compare, k0 + i)
			             : plan->op == TA_OP_LOAD ? fill_load
			                                      : 0;
			put_bits(plan->old_out, k0 + i, es, v);
		}
	}
	for (int64_t i = 0; i < n; i++)
		if (b->code[i] == -2)
			res->skipped++;
	return TA_OK;
}

/* An operand of a region plan moved to iteration row r0 of the first axis (its stride
 * there: 0 for a broadcast operand, which stays). */
static ta_operand operand_from_row(const ta_operand *op, int64_t r0, size_t esize)
{
	ta_operand o = *op;
	if (o.data)
		o.data = (const char *)o.data + r0 * o.stride[0] * (int64_t)esize;
	return o;
}

/* Applies a REGION plan (no indices: every element is in range) to a sharded tile without
 * resolving elements: the region's rows [o, o + e) of the first axis meet each part in a
 * range of rows, which is a region of that part with the same extents along the other
 * axes; operands and old_out (row-major over the iteration shape, which is the region's)
 * start at that range's first row. Parts run in row order, so old values stay in request
 * order (each part writes its own rows of old_out; the parts run at the same time). */
static ta_status apply_region(multi_backend *mb, const multi_tile *t, const ta_plan *plan,
                              ta_result *result, ta_error *err)
{
	size_t es = ta_dtype_size(plan->dtype);
	int64_t row_elems = 1; /* iteration elements per row of the first axis */
	for (int a = 1; a < plan->rank; a++)
		row_elems *= plan->shape[a];
	int64_t lo = plan->origin[0], hi = plan->origin[0] + plan->extent[0];
	int touched = 0;
	for (int p = 0; p < t->nparts; p++) {
		if (t->part[p].first >= hi || t->part[p].end <= lo)
			continue;
		if (device_failed(mb, t->part[p].device)) /* reject-whole: nothing has run */
			return device_failed_error(mb, t->part[p].device, err);
		touched++;
	}
	ta_scope scope = plan->scope;
	if (touched > 1 && ta_variant_legal(plan->op, plan->dtype, plan->sem, TA_SCOPE_SYS,
	                                    plan->space, plan->want_old))
		scope = TA_SCOPE_SYS;
	ta_result res = {0, 0};
	part_call stack[TA_MULTI_STACK_PARTS];
	part_call *calls = part_calls_get(stack, t->nparts);
	if (!calls)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "multi-device: out of memory");
	void *args[TA_MAX_DEVICES] = {0};
	int devs[TA_MAX_DEVICES] = {0}, k = 0;
	for (int p = 0; p < t->nparts; p++) {
		const multi_part *pt = &t->part[p];
		int64_t a0 = lo > pt->first ? lo : pt->first, a1 = hi < pt->end ? hi : pt->end;
		if (a0 >= a1)
			continue;
		int64_t r0 = a0 - lo; /* first iteration row in this part */
		part_call *c = &calls[k];
		memset(c, 0, sizeof(*c));
		c->be = mb->dev[pt->device];
		c->count = &mb->requests[pt->device];
		c->mem = pt->mem;
		c->bytes = pt->bytes;
		devs[k] = pt->device;
		args[k] = c;
		k++;
		ta_plan s = *plan;
		s.prechecked = false;
		s.scope = scope;
		s.tile_shape[0] = pt->end - pt->first;
		s.origin[0] = a0 - pt->first;
		s.extent[0] = a1 - a0;
		s.shape[0] = a1 - a0;
		s.count = (a1 - a0) * row_elems;
		s.region_count = s.count;
		s.values = operand_from_row(&plan->values, r0, es);
		s.compare = operand_from_row(&plan->compare, r0, es);
		s.mask = operand_from_row(&plan->mask, r0, 1);
		s.old_out =
		    plan->want_old ? (char *)plan->old_out + r0 * row_elems * (int64_t)es : NULL;
		c->plan = s;
	}
	/* every part at the same time; each writes its own rows of old_out */
	run_on_devices(mb, k, devs, part_call_run, args);
	ta_status st = TA_OK;
	for (int i = 0; i < k && st == TA_OK; i++) {
		if (calls[i].st != TA_OK)
			st = ta_error_set(err, calls[i].st, "device %d: %s", devs[i],
			                  calls[i].err.msg);
		res.skipped += calls[i].res.skipped;
		res.applied += calls[i].res.applied;
	}
	part_calls_free(calls, stack);
	if (st != TA_OK)
		return st;
	if (result)
		*result = res;
	return TA_OK;
}

/* True when any operand of plan is device memory. */
static bool plan_on_device(const ta_plan *plan)
{
	bool on = plan->old_out_device || plan->values.device || plan->compare.device ||
	          plan->mask.device;
	for (int i = 0; i < plan->n_index && i < TA_MAX_RANK; i++)
		on = on || plan->index[i].device;
	return on;
}

/* OK when device d (an index of mb) can read every device operand of plan: the device
 * whose memory each is (its backend's ptr_device) is d or a peer d reads (peer access
 * enabled at startup); FAILED otherwise (UNIMPLEMENTED, naming both). Unknown owners pass. */
static ta_status device_operands_reachable(multi_backend *mb, int d, const ta_plan *plan,
                                           ta_error *err)
{
	if (!mb->has_peers || !mb->dev[d]->vt->ptr_device)
		return TA_OK;
	const ta_operand *ops[TA_MAX_RANK + 3];
	const void *ptrs[TA_MAX_RANK + 4];
	int k = 0;
	for (int i = 0; i < plan->n_index && i < TA_MAX_RANK; i++)
		ops[k++] = &plan->index[i];
	ops[k++] = &plan->values;
	ops[k++] = &plan->compare;
	ops[k++] = &plan->mask;
	int m = 0;
	for (int i = 0; i < k; i++)
		if (ops[i]->device && ops[i]->data)
			ptrs[m++] = ops[i]->data;
	if (plan->want_old && plan->old_out_device && plan->old_out)
		ptrs[m++] = plan->old_out;
	for (int i = 0; i < m; i++) {
		int ord = mb->dev[d]->vt->ptr_device(mb->dev[d], ptrs[i]);
		int owner = -1;
		for (int j = 0; j < mb->n; j++)
			if (mb->ords[j] == ord)
				owner = j;
		if (owner < 0 || mb->peer[d * mb->n + owner])
			continue;
		return ta_error_set(err, TA_UNIMPLEMENTED,
		                    "multi-device: the tile lives on GPU %d, which has no peer "
		                    "access to GPU %d where the device buffer is; copying keys "
		                    "between such GPUs is not supported yet",
		                    mb->ords[d], ord);
	}
	return TA_OK;
}

/* Largest sharded tile (bytes) the partial-tile path takes: each part's device holds a
 * zeroed scratch of the whole tile's size while the request runs. */
#define TA_MULTI_PARTIAL_MAX ((size_t)256 << 20)

/* True when plan on a sharded tile of tile_bytes may take the partial-tile path: an add or
 * sub of an integer dtype without old values (a histogram: the indexed add of ones, the
 * scatter add of a key vector), the whole tile no larger than TA_MULTI_PARTIAL_MAX. */
static bool partial_eligible(const ta_plan *plan, size_t tile_bytes)
{
	return (plan->op == TA_OP_ADD || plan->op == TA_OP_SUB) && ta_dtype_is_int(plan->dtype) &&
	       !plan->want_old && plan->addr != TA_ADDR_REGION &&
	       tile_bytes <= TA_MULTI_PARTIAL_MAX;
}

/* A zeroed whole-tile scratch on one part's device and what became of the request there. */
typedef struct partial_call {
	part_call run;      /* the request over all its keys into the scratch */
	part_call merge;    /* the scratch's rows of the part added into the part */
	void *scratch;      /* the scratch (memory of that device's backend) */
	scratch_pool *pool; /* where the scratch comes from and goes back to (NULL: none) */
	uint64_t got_ns;    /* when the scratch was ready (TA_MULTI_TRACE; else 0) */
} partial_call;

/* Gives back scratch mem (bytes) of device backend be to pool (NULL: freed), or frees it
 * when the pool is full. */
static void scratch_put(scratch_pool *pool, ta_backend *be, void *mem, size_t bytes)
{
	if (!mem)
		return;
	if (pool) {
		pthread_mutex_lock(&pool->mu);
		if (pool->n < TA_MULTI_SCRATCH_KEEP) {
			pool->kept[pool->n++] = (multi_scratch){mem, bytes};
			mem = NULL;
		}
		pthread_mutex_unlock(&pool->mu);
	}
	if (mem)
		ta_backend_tile_free(be, mem);
}

/* A kept scratch of bytes from pool (NULL: none) into *mem, its contents whatever the last
 * request left there; NULL when none is kept. */
static void *scratch_kept(scratch_pool *pool, size_t bytes)
{
	void *mem = NULL;
	if (!pool)
		return NULL;
	pthread_mutex_lock(&pool->mu);
	for (int i = 0; i < pool->n; i++)
		if (pool->kept[i].bytes == bytes) {
			mem = pool->kept[i].mem;
			pool->kept[i] = pool->kept[--pool->n];
			break;
		}
	pthread_mutex_unlock(&pool->mu);
	return mem;
}

/* A zeroed scratch of bytes (elements of dtype) on device backend be: a kept one of that
 * size zeroed by a store of 0, or a new one. */
static ta_status scratch_get(scratch_pool *pool, ta_backend *be, size_t bytes, ta_dtype dtype,
                             void **mem, ta_error *err)
{
	*mem = scratch_kept(pool, bytes);
	if (*mem) {
		size_t es = ta_dtype_size(dtype);
		int64_t n = (int64_t)(bytes / es);
		uint64_t zero = 0;
		ta_plan z;
		memset(&z, 0, sizeof(z));
		z.op = TA_OP_STORE;
		z.dtype = dtype;
		z.sem = TA_SEM_RELAXED;
		z.scope = TA_SCOPE_GPU;
		z.space = TA_SPACE_GLOBAL;
		z.addr = TA_ADDR_REGION;
		z.check_bounds = true;
		z.rank = 1;
		z.shape[0] = n;
		z.count = n;
		z.tile_rank = 1;
		z.tile_shape[0] = n;
		z.tile_stride[0] = 1;
		z.extent[0] = n;
		z.region_count = n;
		z.values.data = &zero;
		z.values.dtype = dtype;
		z.values.stride[0] = 0; /* the scalar, broadcast */
		ta_result r = {0, 0};
		ta_error zerr = {0};
		if (ta_backend_apply(be, *mem, bytes, &z, &r, &zerr) == TA_OK)
			return TA_OK;
		ta_backend_tile_free(be, *mem); /* then a new one */
		*mem = NULL;
	}
	return ta_backend_tile_alloc(be, bytes, mem, err);
}

/* CLOCK_MONOTONIC in ns (TA_MULTI_TRACE). */
static uint64_t trace_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* run_on_devices job: allocates the scratch (zeroed), runs the whole request into it. */
static void partial_run(void *arg)
{
	partial_call *pc = arg;
	part_call *c = &pc->run;
	c->res = (ta_result){0, 0};
	c->st = scratch_get(pc->pool, c->be, c->bytes, c->plan.dtype, &pc->scratch, &c->err);
	if (c->st != TA_OK)
		return;
	if (pc->got_ns)
		pc->got_ns = trace_ns();
	c->mem = pc->scratch;
	part_call_run(c);
}

/* run_on_devices job: adds the scratch's rows of the part into the part. */
static void partial_merge(void *arg)
{
	partial_call *pc = arg;
	part_call_run(&pc->merge);
}

/* The device (index of mb) whose memory holds every device operand of plan when that is
 * one device that every part of t can read (peer access), else -1. */
static int operands_home(multi_backend *mb, const multi_tile *t, const ta_plan *plan)
{
	if (!mb->has_peers || !mb->dev[0]->vt->ptr_device)
		return -1;
	const ta_operand *ops[TA_MAX_RANK + 3];
	int k = 0, home = -1;
	for (int i = 0; i < plan->n_index && i < TA_MAX_RANK; i++)
		ops[k++] = &plan->index[i];
	ops[k++] = &plan->values;
	ops[k++] = &plan->compare;
	ops[k++] = &plan->mask;
	for (int i = 0; i < k; i++) {
		if (!ops[i]->device || !ops[i]->data)
			continue;
		int ord = mb->dev[0]->vt->ptr_device(mb->dev[0], ops[i]->data), j = -1;
		for (int d = 0; d < mb->n; d++)
			if (mb->ords[d] == ord)
				j = d;
		if (j < 0 || (home >= 0 && j != home))
			return -1;
		home = j;
	}
	for (int p = 0; home >= 0 && p < t->nparts; p++)
		if (!mb->peer[t->part[p].device * mb->n + home])
			return -1;
	return home;
}

/* Fills the merge-out (ta_plan.h) that lets device home's backend finish an eligible plan
 * on t alone (apply_partials_merged): one target per part, remote unless it lives on home,
 * into tg[0..nparts) and *mo. False when home's backend cannot take it: a part on another
 * device that home cannot write (no peer access that way round) or adds that are no legal
 * variant (ta_plan_check_merge_out). */
static bool merge_out_fill(multi_backend *mb, const multi_tile *t, const ta_plan *plan, int home,
                           ta_merge_target *tg, ta_merge_out *mo)
{
	if (t->nparts > TA_MERGE_TARGETS_MAX)
		return false;
	for (int p = 0; p < t->nparts; p++) {
		const multi_part *pt = &t->part[p];
		bool remote = pt->device != home;
		if (remote && mb->has_peers && !mb->peer[home * mb->n + pt->device])
			return false;
		tg[p] = (ta_merge_target){pt->mem, pt->elem0, pt->elems, remote};
	}
	mo->zero_first = false;
	mo->n = t->nparts;
	mo->target = tg;
	ta_plan probe = *plan;
	probe.merge_out = mo;
	int64_t elems = (int64_t)(t->bytes / ta_dtype_size(plan->dtype));
	return ta_plan_check_merge_out(&probe, elems, NULL) == TA_OK;
}

/* Applies an eligible plan whose device operands all live on device home as ONE apply of
 * home's backend with the merge-out mo (merge_out_fill): it zeroes a kept scratch of the
 * whole tile's size (a new one is zero already), runs the request into it (the one-device
 * kernel choice) and adds each part's rows of it into the part (a part on another device
 * over peer access, at scope sys), all before it returns: on CUDA one stream and one wait,
 * one launch of the request's own and never the batcher. */
static ta_status apply_partials_merged(multi_backend *mb, const multi_tile *t, const ta_plan *plan,
                                       int home, ta_merge_out *mo, ta_result *result, ta_error *err)
{
	uint64_t t0 = mb->trace ? trace_ns() : 0, t1 = 0, t2 = 0;
	ta_backend *be = mb->dev[home];
	scratch_pool *pool = mb->pools_ready ? &mb->pool[home] : NULL;
	void *scratch = scratch_kept(pool, t->bytes);
	mo->zero_first = scratch != NULL; /* a new one comes zeroed from tile_alloc */
	ta_error e = {0};
	ta_status st = TA_OK;
	if (!scratch)
		st = ta_backend_tile_alloc(be, t->bytes, &scratch, &e);
	if (st != TA_OK)
		return ta_error_set(err, st, "device %d: %s", home, e.msg);
	if (mb->trace)
		t1 = trace_ns();
	ta_plan one = *plan;
	one.prechecked = false;
	one.merge_out = mo;
	ta_result res = {0, 0};
	atomic_fetch_add_explicit(&mb->requests[home], 1, memory_order_relaxed);
	st = ta_backend_apply(be, scratch, t->bytes, &one, &res, &e);
	if (mb->trace)
		t2 = trace_ns();
	scratch_put(pool, be, scratch, t->bytes); /* zeroed again when it is taken next */
	if (st != TA_OK)
		return ta_error_set(err, st, "device %d: %s", home, e.msg);
	if (result)
		*result = res;
	if (mb->trace) {
		uint64_t t3 = trace_ns();
		atomic_fetch_add(&mb->tr1_n, 1);
		atomic_fetch_add(&mb->tr1_ns[0], t1 - t0);
		atomic_fetch_add(&mb->tr1_ns[1], t2 - t1);
		atomic_fetch_add(&mb->tr1_ns[2], t3 - t2);
		atomic_fetch_add(&mb->tr1_ns[3], t3 - t0);
	}
	return TA_OK;
}

/* Applies an eligible plan (partial_eligible) to a sharded tile without reading its keys
 * on the host (they may be a client's GPU buffer): every part's device runs the whole
 * request, all keys, read in place (over peer access when they are another GPU's), with
 * the kernel the one-device path picks (the privatised histogram), into a zeroed scratch
 * the size of the whole tile; then each device adds its part's rows of its scratch into
 * its part. Every device at the same time in both steps. Scratches are kept per device
 * (TA_MULTI_SCRATCH_KEEP, reused when the size matches, zeroed by a store of 0). The bounds rules
 * hold for the whole request: a request rejected (reject-whole) fails in the first step, before any
 * part changes; skipped and applied counts are those of one run. Integer adds commute,
 * so the tile ends exactly as if the elements had been applied one by one.
 * When the keys all live on one GPU (home >= 0) that every part's GPU reads, only that GPU
 * runs the request (its keys read locally), so that requests whose keys are split over the
 * GPUs run on their own GPUs at the same time: as one apply of its backend that also zeroes
 * the scratch and adds each part's rows into the part (apply_partials_merged, a merge-out:
 * one synchronisation instead of three, and no small requests that would wake the CUDA
 * batcher's resident kernel between large ones) when it can write every part; else in
 * three steps, each waited for: its scratch zeroed (a store of 0), the request run into
 * it, and each part's GPU adding its rows of that scratch over peer access. */
static ta_status apply_partials(multi_backend *mb, const multi_tile *t, const ta_plan *plan,
                                int home, ta_result *result, ta_error *err)
{
	ta_merge_target tg[TA_MAX_DEVICES];
	ta_merge_out mo;
	if (home >= 0 && merge_out_fill(mb, t, plan, home, tg, &mo))
		return apply_partials_merged(mb, t, plan, home, &mo, result, err);
	uint64_t t0 = mb->trace ? trace_ns() : 0, t1 = 0, t2 = 0, t3 = 0;
	size_t es = ta_dtype_size(plan->dtype);
	bool dev = plan_on_device(plan);
	partial_call *pcs = calloc((size_t)t->nparts, sizeof(*pcs));
	if (!pcs)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "multi-device: out of memory");
	void *args[TA_MAX_DEVICES] = {0};
	int devs[TA_MAX_DEVICES] = {0};
	ta_scope scope = plan->scope;
	if (t->nparts > 1 && ta_variant_legal(TA_OP_ADD, plan->dtype, plan->sem, TA_SCOPE_SYS,
	                                      TA_SPACE_GLOBAL, false))
		scope = TA_SCOPE_SYS;
	for (int p = 0; p < t->nparts; p++) {
		const multi_part *pt = &t->part[p];
		partial_call *pc = &pcs[p];
		pc->run.be = pc->merge.be = mb->dev[pt->device];
		pc->run.count = pc->merge.count = &mb->requests[pt->device];
		pc->run.bytes = t->bytes;
		pc->run.plan = *plan;
		pc->run.plan.prechecked = false;
		pc->pool = mb->pools_ready ? &mb->pool[pt->device] : NULL;
		devs[p] = pt->device;
		args[p] = pc;
	}
	/* the scratch runs: every part's device, or only the keys' home (its own or an extra
	 * slot after the parts when no part lives there) */
	int src = -1; /* the one scratch's slot, -1: each part's own */
	partial_call home_pc;
	memset(&home_pc, 0, sizeof(home_pc));
	if (home >= 0) {
		for (int p = 0; p < t->nparts; p++)
			if (t->part[p].device == home)
				src = p;
		if (src < 0) {
			home_pc.run.be = mb->dev[home];
			home_pc.run.count = &mb->requests[home];
			home_pc.run.bytes = t->bytes;
			home_pc.run.plan = *plan;
			home_pc.run.plan.prechecked = false;
			home_pc.pool = mb->pools_ready ? &mb->pool[home] : NULL;
		}
		partial_call *one = src >= 0 ? &pcs[src] : &home_pc;
		one->got_ns = mb->trace; /* nonzero: partial_run notes the time */
		partial_run(one);
	} else {
		run_on_devices(mb, t->nparts, devs, partial_run, args);
	}
	partial_call *first = home >= 0 && src < 0 ? &home_pc : src >= 0 ? &pcs[src] : &pcs[0];
	ta_status st = TA_OK;
	if (mb->trace)
		t1 = trace_ns();
	if (home >= 0 && first->run.st != TA_OK)
		st = ta_error_set(err, first->run.st, "device %d: %s", home, first->run.err.msg);
	for (int p = 0; home < 0 && p < t->nparts && st == TA_OK; p++)
		if (pcs[p].run.st != TA_OK)
			st = ta_error_set(err, pcs[p].run.st, "device %d: %s", devs[p],
			                  pcs[p].run.err.msg);
	if (st == TA_OK) {
		for (int p = 0; p < t->nparts; p++) {
			const multi_part *pt = &t->part[p];
			part_call *m = &pcs[p].merge;
			m->mem = pt->mem;
			m->bytes = pt->bytes;
			ta_plan *s = &m->plan;
			memset(s, 0, sizeof(*s));
			s->op = TA_OP_ADD;
			s->dtype = plan->dtype;
			s->sem = plan->sem;
			s->scope = scope;
			s->space = TA_SPACE_GLOBAL;
			s->addr = TA_ADDR_REGION;
			s->check_bounds = true;
			s->rank = 1;
			s->shape[0] = pt->elems;
			s->count = pt->elems;
			s->tile_rank = 1;
			s->tile_shape[0] = pt->elems;
			s->tile_stride[0] = 1;
			s->extent[0] = pt->elems;
			s->region_count = pt->elems;
			const void *scratch = home >= 0 ? first->scratch : pcs[p].scratch;
			s->values.data = (const char *)scratch + pt->elem0 * (int64_t)es;
			s->values.dtype = plan->dtype;
			s->values.stride[0] = 1;
			s->values.device = dev;
		}
		run_on_devices(mb, t->nparts, devs, partial_merge, args);
		if (mb->trace)
			t2 = trace_ns();
		for (int p = 0; p < t->nparts && st == TA_OK; p++)
			if (pcs[p].merge.st != TA_OK)
				st = ta_error_set(err, pcs[p].merge.st, "device %d: %s", devs[p],
				                  pcs[p].merge.err.msg);
	}
	if (st == TA_OK && result)
		*result = first->run.res;
	for (int p = 0; p < t->nparts; p++)
		scratch_put(pcs[p].pool, pcs[p].run.be, pcs[p].scratch, t->bytes);
	scratch_put(home_pc.pool, home_pc.run.be, home_pc.scratch, t->bytes);
	free(pcs);
	if (mb->trace && t2 && first->got_ns > 1) { /* the keys' home runs: one scratch */
		t3 = trace_ns();
		atomic_fetch_add(&mb->tr_n, 1);
		atomic_fetch_add(&mb->tr_ns[0], first->got_ns - t0);
		atomic_fetch_add(&mb->tr_ns[1], t1 - first->got_ns);
		atomic_fetch_add(&mb->tr_ns[2], t2 - t1);
		atomic_fetch_add(&mb->tr_ns[3], t3 - t2);
		atomic_fetch_add(&mb->tr_ns[4], t3 - t0);
	}
	return st;
}

/* vtable apply: see the file comment. */
static ta_status multi_apply(ta_backend *be, void *mem, size_t tile_bytes, const ta_plan *plan,
                             ta_result *result, ta_error *err)
{
	multi_backend *mb = (multi_backend *)be;
	const multi_tile *t = mem;
	ta_result res = {0, 0};
	if (result)
		*result = res;
	if (!t || !plan)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "multi-device: no tile or no plan");
	/* reject-whole: nothing has run (a region plan on a sharded tile: apply_region checks
	 * the parts its rows meet) */
	int bad = t->nparts == 1 || plan->addr != TA_ADDR_REGION ? tile_failed_device(mb, t) : -1;
	if (bad >= 0)
		return device_failed_error(mb, bad, err);
	if (t->nparts == 1) {
		const multi_part *pt = &t->part[0];
		if (plan_on_device(plan)) { /* read in place, over peer access when not local */
			ta_status st = device_operands_reachable(mb, pt->device, plan, err);
			if (st != TA_OK)
				return st;
		}
		atomic_fetch_add_explicit(&mb->requests[pt->device], 1, memory_order_relaxed);
		return ta_backend_apply(mb->dev[pt->device], pt->mem, tile_bytes, plan, result,
		                        err);
	}
	ta_status st =
	    ta_plan_check(plan, tile_bytes < t->bytes ? tile_bytes : t->bytes, NULL, err);
	if (st != TA_OK)
		return st;
	if (plan->merge_out)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "multi-device: a merge-out plan goes to a device's backend, "
		                    "not to a sharded tile");
	bool eligible = partial_eligible(plan, t->bytes);
	if (plan_on_device(plan) && eligible) {
		for (int p = 0; p < t->nparts; p++) {
			st = device_operands_reachable(mb, t->part[p].device, plan, err);
			if (st != TA_OK)
				return st;
		}
		if ((bad = tile_failed_device(mb, t)) >= 0)
			return device_failed_error(mb, bad, err);
		return apply_partials(mb, t, plan, operands_home(mb, t, plan), result, err);
	}
	if (mb->partials_for_host && eligible && plan->count > 0 &&
	    (bad = tile_failed_device(mb, t)) >= 0)
		return device_failed_error(mb, bad, err);
	if (mb->partials_for_host && eligible && plan->count > 0)
		return apply_partials(mb, t, plan, mb->partials_single ? t->part[0].device : -1,
		                      result, err);
	if (plan_on_device(plan))
		return ta_error_set(
		    err, TA_UNIMPLEMENTED,
		    "multi-device: device operands (CUDA IPC buffers) into a sharded "
		    "tile are supported only for adds and subs of integer dtypes without old "
		    "values into tiles of at most 256 MiB (histograms); a tile placed wholly "
		    "on any one GPU takes them all");
	if (plan->count == 0)
		return TA_OK;
	if (plan->addr == TA_ADDR_REGION)
		return apply_region(mb, t, plan, result, err);
	size_t es = ta_dtype_size(plan->dtype);
	int64_t ch = plan->count < TA_MULTI_CHUNK ? plan->count : TA_MULTI_CHUNK;
	int code_s[TA_MULTI_STACK];
	int64_t flat_s[TA_MULTI_STACK], idx_s[TA_MULTI_STACK], where_s[TA_MULTI_STACK];
	uint64_t vals_s[TA_MULTI_STACK], cmps_s[TA_MULTI_STACK], olds_s[TA_MULTI_STACK];
	route_buf b = {
	    code_s,           flat_s, idx_s, where_s, (uint8_t *)vals_s, (uint8_t *)cmps_s,
	    (uint8_t *)olds_s};
	bool heap = ch > TA_MULTI_STACK;
	if (heap) {
		b.code = malloc((size_t)ch * sizeof(int));
		b.flat = malloc((size_t)ch * sizeof(int64_t));
		b.idx = malloc((size_t)ch * sizeof(int64_t));
		b.where = malloc((size_t)ch * sizeof(int64_t));
		b.vals = malloc((size_t)ch * es);
		b.cmps = malloc((size_t)ch * es);
		b.olds = malloc((size_t)ch * es);
		if (!b.code || !b.flat || !b.idx || !b.where || !b.vals || !b.cmps || !b.olds) {
			st = ta_error_set(err, TA_RESOURCE_EXHAUSTED,
			                  "multi-device: out of memory for routing %lld elements",
			                  (long long)ch);
			goto out;
		}
	}
	for (int64_t k0 = 0; k0 < plan->count && st == TA_OK; k0 += ch) {
		int64_t n = plan->count - k0 < ch ? plan->count - k0 : ch;
		st = route_chunk(mb, t, plan, k0, n, &b, &res, err);
	}
	if (st == TA_OK && result)
		*result = res;
out:
	if (heap) {
		free(b.code);
		free(b.flat);
		free(b.idx);
		free(b.where);
		free(b.vals);
		free(b.cmps);
		free(b.olds);
	}
	return st;
}

/* ---- apply_many: batches of requests over tiles on several devices ------------------- */

/* One device's share of an apply_many batch. */
typedef struct device_batch {
	ta_backend *be;              /* the device's backend */
	atomic_uint_fast64_t *count; /* the device's request counter */
	ta_apply_call *calls;        /* its calls, in the batch's order, memory that of the part */
	size_t n;                    /* how many */
} device_batch;

/* run_on_devices job: one device's share through its own apply_many (the CUDA backend
 * puts them into one launch). */
static void device_batch_run(void *arg)
{
	device_batch *b = arg;
	atomic_fetch_add_explicit(b->count, b->n, memory_order_relaxed);
	ta_backend_apply_many(b->be, b->calls, b->n);
}

/* A one-element request on a sharded tile, routed to its part ahead of a batch. */
typedef struct single_call {
	ta_plan plan; /* the FLAT sub-plan on the part */
	int64_t idx;  /* the element's offset inside the part */
	uint64_t val; /* its value bits */
	uint64_t cmp; /* its compare bits */
	int part;     /* the part */
} single_call;

/* Routes the one-element plan on sharded tile t (tile_bytes) to the part holding its
 * element into *sc; false when it is masked off, out of range or the plan is not valid
 * for the tile (then multi_apply runs it, with its usual answer). */
static bool route_single(const multi_tile *t, size_t tile_bytes, const ta_plan *plan,
                         single_call *sc)
{
	ta_error err = {0};
	if (plan->count != 1 ||
	    ta_plan_check(plan, tile_bytes < t->bytes ? tile_bytes : t->bytes, NULL, &err) != TA_OK)
		return false;
	int64_t off = 0;
	if (ta_plan_resolve(plan, 0, &off) != 1)
		return false;
	int p = part_of(t, off);
	const multi_part *pt = &t->part[p];
	if (off < pt->elem0 || off - pt->elem0 >= pt->elems)
		return false;
	sc->idx = off - pt->elem0;
	sc->val = plan->values.data ? ta_operand_bits(plan, &plan->values, 0) : 0;
	sc->cmp = plan->compare.data ? ta_operand_bits(plan, &plan->compare, 0) : 0;
	flat_subplan(&sc->plan, plan, plan->scope, pt, 1, &sc->idx, &sc->val, &sc->cmp,
	             plan->want_old ? plan->old_out : NULL);
	sc->part = p;
	return true;
}

/* The part call c runs on in a batch: 0 for a tile wholly on one device, the routed part of
 * a one-element request on a sharded tile (*sc filled), or -1 when c must run alone, after
 * every call before it and before every call after it: a memory order other than relaxed
 * (an acquire or release orders the connection's other requests around it on every device),
 * device operands, a tile with a part on a failed device (multi_apply refuses it), or any
 * other request on a sharded tile (multi_apply runs its parts at the same time itself). */
static int call_part(multi_backend *mb, const ta_apply_call *c, single_call *sc)
{
	const multi_tile *t = c->mem;
	if (!t || !c->plan || c->plan->sem != TA_SEM_RELAXED || plan_on_device(c->plan) ||
	    tile_failed_device(mb, t) >= 0)
		return -1;
	if (t->nparts == 1)
		return 0;
	return sc && route_single(t, c->tile_bytes, c->plan, sc) ? sc->part : -1;
}

/* Counting sort of calls[i, j) (each with part[c] >= 0) by the device of its part, stable:
 * sorted[first[d], + cnt[d]) are device d's calls, their memory that of the part (a routed
 * one-element call on a sharded tile gets single[c]'s sub-plan), status OK and result zero;
 * from[s] is the index in calls of sorted[s] (s counts from 0 for calls[i]). */
static void split_by_device(const multi_backend *mb, const ta_apply_call *calls, const int *part,
                            single_call *single, size_t i, size_t j, ta_apply_call *sorted,
                            size_t *from, size_t *first, size_t *cnt)
{
	size_t at[TA_MAX_DEVICES], sum = 0;
	for (int d = 0; d < mb->n; d++)
		cnt[d] = 0;
	for (size_t c = i; c < j; c++)
		cnt[((const multi_tile *)calls[c].mem)->part[part[c]].device]++;
	for (int d = 0; d < mb->n; d++) {
		first[d] = at[d] = sum;
		sum += cnt[d];
	}
	for (size_t c = i; c < j; c++) {
		const multi_tile *t = calls[c].mem;
		const multi_part *pt = &t->part[part[c]];
		size_t to = at[pt->device]++;
		sorted[to] = calls[c];
		sorted[to].mem = pt->mem;
		if (t->nparts > 1) { /* a routed one-element call */
			sorted[to].plan = &single[c].plan;
			sorted[to].tile_bytes = pt->bytes;
		}
		sorted[to].status = TA_OK;
		if (sorted[to].result)
			*sorted[to].result = (ta_result){0, 0};
		from[to] = c;
	}
}

/* vtable apply_many: as n successive applies. A run of relaxed calls on tiles wholly on
 * one device each (or one-element calls on sharded tiles, routed to their part first) is
 * split by device, keeping the order inside each device (so each tile sees its calls in
 * order), and every device runs its share at the same time through its backend's
 * apply_many; relaxed requests on different tiles promise no order among themselves. A
 * call that must run alone (call_part) runs between runs. */
static void multi_apply_many(ta_backend *be, ta_apply_call *calls, size_t n)
{
	multi_backend *mb = (multi_backend *)be;
	ta_apply_call *sorted = n > 1 ? malloc(n * sizeof(*sorted)) : NULL;
	size_t *from = n > 1 ? malloc(n * sizeof(*from)) : NULL;
	int *part = n > 1 ? malloc(n * sizeof(*part)) : NULL;
	single_call *single = NULL; /* allocated at the first one-element sharded call */
	for (size_t c = 0; part && c < n; c++) {
		const multi_tile *t = calls[c].mem;
		if (t && t->nparts > 1 && !single)
			single = malloc(n * sizeof(*single));
		part[c] = call_part(mb, &calls[c], single ? &single[c] : NULL);
	}
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (part && j < n && part[j] >= 0)
			j++;
		if (j == i || !sorted || !from || j - i == 1) { /* one at a time */
			size_t end = j == i ? i + 1 : j;
			for (; i < end; i++)
				calls[i].status =
				    multi_apply(be, calls[i].mem, calls[i].tile_bytes,
				                calls[i].plan, calls[i].result, calls[i].err);
			continue;
		}
		size_t first[TA_MAX_DEVICES], cnt[TA_MAX_DEVICES];
		split_by_device(mb, calls, part, single, i, j, sorted, from, first, cnt);
		device_batch batch[TA_MAX_DEVICES];
		void *args[TA_MAX_DEVICES];
		int devs[TA_MAX_DEVICES], k = 0;
		for (int d = 0; d < mb->n; d++) {
			if (cnt[d] > 0) {
				batch[k] = (device_batch){mb->dev[d], &mb->requests[d],
				                          sorted + first[d], cnt[d]};
				args[k] = &batch[k];
				devs[k] = d;
				k++;
			}
		}
		run_on_devices(mb, k, devs, device_batch_run, args);
		for (size_t s = 0; s < j - i; s++)
			calls[from[s]].status = sorted[s].status;
		i = j;
	}
	free(sorted);
	free(from);
	free(part);
	free(single);
}

/* vtable async_attach: the calling thread attaches to every device that takes it; true when
 * one did (the thread then polls them all). */
static bool multi_async_attach(ta_backend *be)
{
	multi_backend *mb = (multi_backend *)be;
	bool any = false;
	for (int d = 0; d < mb->n; d++)
		if (ta_backend_async_attach(mb->dev[d]))
			any = true;
	return any;
}

/* vtable poll_async: polls every device for the calling thread; true while any has its
 * calls out. */
static bool multi_poll_async(ta_backend *be)
{
	multi_backend *mb = (multi_backend *)be;
	bool out = false;
	for (int d = 0; d < mb->n; d++)
		if (ta_backend_poll_async(mb->dev[d]))
			out = true;
	return out;
}

/* An apply_async in flight over several devices: each device's share went to its own
 * backend's apply_async; the last share to finish copies the statuses back, frees this and
 * calls done. */
typedef struct multi_async {
	ta_apply_call *calls;    /* the caller's calls */
	size_t n;                /* how many */
	void (*done)(void *arg); /* the caller's completion */
	void *arg;               /* its argument */
	atomic_int left;         /* shares not yet finished */
	ta_apply_call *sorted;   /* the calls by device, memory that of the part */
	size_t *from;            /* sorted[s] is calls[from[s]] */
	int *part;               /* each call's part (call_part) */
	single_call *single;     /* routed one-element calls' sub-plans (NULL: none) */
} multi_async;

/* Frees a (NULL: nothing). */
static void multi_async_free(multi_async *a)
{
	if (!a)
		return;
	free(a->sorted);
	free(a->from);
	free(a->part);
	free(a->single);
	free(a);
}

/* A device backend's completion of its share. */
static void multi_async_share_done(void *arg)
{
	multi_async *a = arg;
	if (atomic_fetch_sub_explicit(&a->left, 1, memory_order_acq_rel) != 1)
		return;
	for (size_t s = 0; s < a->n; s++)
		a->calls[a->from[s]].status = a->sorted[s].status;
	void (*done)(void *) = a->done;
	void *done_arg = a->arg;
	multi_async_free(a);
	done(done_arg);
}

/* The device every one of calls[0, n) runs on when each is a call_part call on a tile
 * wholly on that one device and the device offers apply_async (a loop's group of one
 * connection's requests, the common case); -1 otherwise. */
static int one_device(multi_backend *mb, const ta_apply_call *calls, size_t n)
{
	int dev = -1;
	for (size_t c = 0; c < n; c++) {
		const multi_tile *t = calls[c].mem;
		if (!t || t->nparts != 1 || call_part(mb, &calls[c], NULL) != 0 ||
		    (dev >= 0 && t->part[0].device != dev))
			return -1;
		dev = t->part[0].device;
	}
	return dev >= 0 && mb->dev[dev]->vt->apply_async ? dev : -1;
}

/* vtable apply_async: when every call may join a split run (call_part: relaxed, host
 * operands, a tile wholly on one device or one element of a sharded tile) and every device
 * concerned offers apply_async, each device's share (in the calls' order) goes to its own
 * backend's apply_async at once, with no thread of this layer between; otherwise (an
 * acquire or release among several devices, a larger request on a sharded tile, no memory
 * for the bookkeeping) the calls run here as apply_many runs them and done is called
 * before returning. */
static void multi_apply_async(ta_backend *be, ta_apply_call *calls, size_t n,
                              void (*done)(void *arg), void *arg)
{
	multi_backend *mb = (multi_backend *)be;
	int one = one_device(mb, calls, n);
	if (one >= 0) { /* the calls go on as that device's: no bookkeeping, no hop back */
		for (size_t c = 0; c < n; c++) {
			calls[c].mem = ((const multi_tile *)calls[c].mem)->part[0].mem;
			calls[c].status = TA_OK;
			if (calls[c].result)
				*calls[c].result = (ta_result){0, 0};
		}
		atomic_fetch_add_explicit(&mb->requests[one], n, memory_order_relaxed);
		ta_backend_apply_async(mb->dev[one], calls, n, done, arg);
		return;
	}
	multi_async *a = n > 0 ? calloc(1, sizeof(*a)) : NULL;
	bool split = a != NULL;
	if (split) {
		a->sorted = malloc(n * sizeof(*a->sorted));
		a->from = malloc(n * sizeof(*a->from));
		a->part = malloc(n * sizeof(*a->part));
		split = a->sorted && a->from && a->part;
	}
	for (size_t c = 0; split && c < n; c++) {
		const multi_tile *t = calls[c].mem;
		if (t && t->nparts > 1 && !a->single &&
		    !(a->single = malloc(n * sizeof(*a->single)))) {
			split = false;
			break;
		}
		a->part[c] = call_part(mb, &calls[c], a->single ? &a->single[c] : NULL);
		split =
		    a->part[c] >= 0 && mb->dev[t->part[a->part[c]].device]->vt->apply_async != NULL;
	}
	if (!split) {
		multi_async_free(a);
		multi_apply_many(be, calls, n);
		done(arg);
		return;
	}
	size_t first[TA_MAX_DEVICES], cnt[TA_MAX_DEVICES];
	split_by_device(mb, calls, a->part, a->single, 0, n, a->sorted, a->from, first, cnt);
	/* what the shares need is taken before the first goes: a may be freed by the last
	 * share's completion, on another thread, before this loop ends */
	int devs[TA_MAX_DEVICES] = {0}, k = 0;
	for (int d = 0; d < mb->n; d++)
		if (cnt[d] > 0)
			devs[k++] = d;
	ta_apply_call *sorted = a->sorted;
	a->calls = calls;
	a->n = n;
	a->done = done;
	a->arg = arg;
	atomic_init(&a->left, k);
	for (int i = 0; i < k; i++) {
		int d = devs[i];
		atomic_fetch_add_explicit(&mb->requests[d], cnt[d], memory_order_relaxed);
		ta_backend_apply_async(mb->dev[d], sorted + first[d], cnt[d],
		                       multi_async_share_done, a);
	}
}

/* ---- the rest of the vtable ---------------------------------------------------------- */

/* vtable info: device 0's facts, the device line naming the count. */
static void multi_info(ta_backend *be, ta_backend_info *info)
{
	multi_backend *mb = (multi_backend *)be;
	ta_backend_info_get(mb->dev[0], info);
	char one[sizeof(info->device)];
	memcpy(one, info->device, sizeof(one));
	one[sizeof(one) - 1] = '\0';
	snprintf(info->device, sizeof(info->device), "%d x %.100s", mb->n, one);
	uint64_t mem = info->device_memory;
	for (int d = 1; d < mb->n; d++) {
		ta_backend_info di;
		ta_backend_info_get(mb->dev[d], &di);
		mem += di.device_memory;
	}
	info->device_memory = mem;
}

/* vtable set_batch_window: every device. */
static void multi_set_batch_window(ta_backend *be, unsigned usec)
{
	multi_backend *mb = (multi_backend *)be;
	for (int d = 0; d < mb->n; d++)
		ta_backend_set_batch_window(mb->dev[d], usec);
}

/* vtable host_register: device 0's backend (one registration per process on CUDA). */
static ta_status multi_host_register(ta_backend *be, void *ptr, size_t bytes, ta_error *err)
{
	return ta_backend_host_register(((multi_backend *)be)->dev[0], ptr, bytes, err);
}

/* vtable host_unregister. */
static void multi_host_unregister(ta_backend *be, void *ptr)
{
	ta_backend_host_unregister(((multi_backend *)be)->dev[0], ptr);
}

/* vtable ipc_open: opened by device 0's backend (present only when that has it), which
 * opens it first on the GPU gpu_uuid names when it serves that one. */
static ta_status multi_ipc_open(ta_backend *be, const void *handle, size_t handle_len,
                                const uint8_t *gpu_uuid, size_t bytes, void **dptr, ta_error *err)
{
	return ta_backend_ipc_open(((multi_backend *)be)->dev[0], handle, handle_len, gpu_uuid,
	                           bytes, dptr, err);
}

/* vtable ipc_close. */
static void multi_ipc_close(ta_backend *be, void *dptr)
{
	ta_backend_ipc_close(((multi_backend *)be)->dev[0], dptr);
}

/* vtable device_stats: the layer's counts, the memory as the device's backend tells it
 * (CUDA: total - free) or else the tile bytes placed there. */
static bool multi_device_stats(ta_backend *be, int d, ta_device_stats *out)
{
	multi_backend *mb = (multi_backend *)be;
	if (d < 0 || d >= mb->n)
		return false;
	out->tiles = atomic_load(&mb->tiles[d]);
	out->tile_bytes = atomic_load(&mb->used[d]);
	out->requests = atomic_load(&mb->requests[d]);
	out->failed = device_failed(mb, d);
	if (out->failed)
		snprintf(out->cause, sizeof out->cause, "%s", mb->cause[d]);
	uint64_t freeb = 0, total = 0;
	ta_backend *dev = mb->dev[d];
	if (dev->vt->mem_info && dev->vt->mem_info(dev, &freeb, &total) == TA_OK) {
		out->memory_total = total;
		out->memory_used = total - freeb;
	} else {
		out->memory_total = 0;
		out->memory_used = out->tile_bytes;
	}
	return true;
}

/* vtable device_count. */
static int multi_device_count(ta_backend *be)
{
	return ((multi_backend *)be)->n;
}

/* vtable destroy: the helpers, then every device's backend. */
static void multi_destroy(ta_backend *be)
{
	multi_backend *mb = (multi_backend *)be;
	uint64_t trn = atomic_load(&mb->tr_n);
	if (mb->trace && trn) {
		double us[5];
		for (int i = 0; i < 5; i++)
			us[i] = (double)atomic_load(&mb->tr_ns[i]) / 1e3 / (double)trn;
		fprintf(
		    stderr,
		    "tileatom multi trace: %llu partial-tile requests (keys on one device); mean "
		    "us: scratch zeroed %.2f, run %.2f, merge %.2f, scratch back %.2f, whole "
		    "%.2f\n",
		    (unsigned long long)trn, us[0], us[1], us[2], us[3], us[4]);
	}
	uint64_t tr1n = atomic_load(&mb->tr1_n);
	if (mb->trace && tr1n) {
		double us[4];
		for (int i = 0; i < 4; i++)
			us[i] = (double)atomic_load(&mb->tr1_ns[i]) / 1e3 / (double)tr1n;
		fprintf(stderr,
		        "tileatom multi trace: %llu partial-tile requests (keys on one device) "
		        "in one apply there (zero, run, merge); mean us: scratch taken %.2f, "
		        "apply %.2f, scratch back %.2f, whole %.2f\n",
		        (unsigned long long)tr1n, us[0], us[1], us[2], us[3]);
	}
	lanes_stop(mb);
	for (int d = 0; mb->pools_ready && d < mb->n; d++) {
		for (int i = 0; i < mb->pool[d].n; i++)
			ta_backend_tile_free(mb->dev[d], mb->pool[d].kept[i].mem);
		pthread_mutex_destroy(&mb->pool[d].mu);
	}
	for (int d = 0; d < mb->n; d++)
		ta_backend_destroy(mb->dev[d]);
	free(mb);
}

/* The layer's operations. */
static const ta_backend_vtbl multi_vtbl = {
    .destroy = multi_destroy,
    .tile_alloc = multi_tile_alloc,
    .tile_free = multi_tile_free,
    .apply = multi_apply,
    .apply_many = multi_apply_many,
    .info = multi_info,
    .set_batch_window = multi_set_batch_window,
    .host_register = multi_host_register,
    .host_unregister = multi_host_unregister,
    .ipc_open = multi_ipc_open,
    .ipc_close = multi_ipc_close,
    .tile_alloc_placed = multi_tile_alloc_placed,
    .tile_where = multi_tile_where,
    .device_count = multi_device_count,
    .device_stats = multi_device_stats,
    .tile_footprint = multi_tile_footprint,
    .apply_async = multi_apply_async,
    .async_attach = multi_async_attach,
    .poll_async = multi_poll_async,
};

ta_backend *ta_multi_backend_new(ta_backend *const *devices, int n,
                                 const ta_placement *default_place, ta_error *err)
{
	if (n < 1 || n > TA_MAX_DEVICES || !devices) {
		for (int d = 0; devices && d < n && d < TA_MAX_DEVICES; d++)
			ta_backend_destroy(devices[d]);
		ta_error_set(err, TA_INVALID_ARGUMENT, "multi-device: %d devices (1..%d)", n,
		             TA_MAX_DEVICES);
		return NULL;
	}
	multi_backend *mb = calloc(1, sizeof(*mb));
	if (!mb) {
		for (int d = 0; d < n; d++)
			ta_backend_destroy(devices[d]);
		ta_error_set(err, TA_RESOURCE_EXHAUSTED, "multi-device: out of memory");
		return NULL;
	}
	mb->vt = multi_vtbl;
	if (!ta_backend_has_ipc(devices[0])) { /* the daemon then refuses device buffers */
		mb->vt.ipc_open = NULL;
		mb->vt.ipc_close = NULL;
	}
	if (!ta_backend_has_apply_async(devices[0])) /* the daemon then keeps its workers */
		mb->vt.apply_async = NULL;
	mb->base.vt = &mb->vt;
	mb->n = n;
	for (int d = 0; d < n; d++) {
		mb->dev[d] = devices[d];
		devices[d]->parent = &mb->base; /* the daemon's cancel reaches each device */
		atomic_init(&mb->used[d], 0);
		atomic_init(&mb->tiles[d], 0);
		atomic_init(&mb->requests[d], 0);
		atomic_init(&mb->failed[d], false);
		atomic_init(&mb->failing[d], 0);
	}
	if (!drill_read(mb, err)) {
		for (int d = 0; d < n; d++)
			ta_backend_destroy(devices[d]);
		free(mb);
		return NULL;
	}
	mb->pools_ready = true;
	for (int d = 0; d < n; d++)
		if (pthread_mutex_init(&mb->pool[d].mu, NULL) != 0) {
			for (int k = 0; k < d; k++)
				pthread_mutex_destroy(&mb->pool[k].mu);
			mb->pools_ready = false; /* then scratches are allocated each time */
			break;
		}
	const char *partials = getenv("TA_MULTI_PARTIALS");
	mb->partials_for_host = partials != NULL;
	mb->partials_single = partials && strcmp(partials, "single") == 0;
	const char *trace = getenv("TA_MULTI_TRACE");
	mb->trace = trace && strcmp(trace, "1") == 0;
	if (lanes_start(mb, err) != TA_OK) {
		multi_destroy(&mb->base);
		return NULL;
	}
	if (default_place)
		mb->dflt = *default_place;
	if (mb->dflt.kind == TA_PLACE_DEVICE && (mb->dflt.device < 0 || mb->dflt.device >= n)) {
		ta_error_set(err, TA_INVALID_ARGUMENT,
		             "placement: device %d does not exist (devices 0..%d)", mb->dflt.device,
		             n - 1);
		multi_destroy(&mb->base);
		return NULL;
	}
	if (mb->dflt.kind == TA_PLACE_SHARD && mb->dflt.shards > n) {
		ta_error_set(err, TA_INVALID_ARGUMENT,
		             "placement: cannot shard over %d devices (the daemon serves %d)",
		             mb->dflt.shards, n);
		multi_destroy(&mb->base);
		return NULL;
	}
	return &mb->base;
}

void ta_multi_set_peers(ta_backend *be, const int *ords, int n, const unsigned char *peer)
{
	multi_backend *mb = (multi_backend *)be;
	if (!be || be->vt->apply != multi_apply || n != mb->n)
		return;
	memcpy(mb->ords, ords, (size_t)n * sizeof(int));
	memcpy(mb->peer, peer, (size_t)n * (size_t)n);
	mb->has_peers = true;
}

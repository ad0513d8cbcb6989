/* check_persist.c: unit tests of tileatomd's durability (daemon/persist_*.c) in-process, on
 * the CPU backend: the settings (data_dir, fsync, compact_size), the mutation locks
 * (shared by one op, alone otherwise, waiters not starved), a log replayed into a fresh
 * registry with exact values, a snapshot request compacting the log, a data directory
 * locked against a second daemon, the snapshot request refused without --data-dir, a
 * full disk (a file size limit, RLIMIT_FSIZE, makes the log's writes fail with EFBIG) with
 * --fsync always and everysec, and the bound on the log buffer (backpressure); where tiles
 * lived (tiles on CPU memory pools behind the multi-device layer: back where they were
 * after a restart from a snapshot or from the log alone, or placed by the default placement
 * with one warning each on fewer pools; files of the formats before placements still load).
 * The kill -9 and damaged-file tests are in check_persist_crash.c. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <check.h>
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "conf.h"
#include "dispatch.h"
#include "persist.h"
#include "persist_int.h"
#include "registry.h"
#include "ta_frame.h"
#include "tileatom.pb-c.h"

/* ---- settings ---- */

START_TEST(test_settings)
{
	ta_config cfg;
	ta_config_init(&cfg);
	ta_error err = {0};
	ck_assert_ptr_null(cfg.data_dir);
	ck_assert_int_eq(cfg.fsync_mode, TA_FSYNC_EVERYSEC);
	ck_assert_uint_eq(cfg.compact_size, UINT64_C(64) << 20);
	ck_assert_int_eq(ta_config_set(&cfg, "data-dir", "/var/lib/tileatom", &err), TA_OK);
	ck_assert_str_eq(cfg.data_dir, "/var/lib/tileatom");
	ck_assert_int_eq(ta_config_set(&cfg, "fsync", "always", &err), TA_OK);
	ck_assert_int_eq(cfg.fsync_mode, TA_FSYNC_ALWAYS);
	ck_assert_int_eq(ta_config_set(&cfg, "fsync", "no", &err), TA_OK);
	ck_assert_int_eq(cfg.fsync_mode, TA_FSYNC_NO);
	ck_assert_int_eq(ta_config_set(&cfg, "fsync", "sometimes", &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "fsync: 'sometimes' is not always, everysec or no");
	ck_assert_int_eq(cfg.fsync_mode, TA_FSYNC_NO);
	ck_assert_int_eq(ta_config_set(&cfg, "compact_size", "1M", &err), TA_OK);
	ck_assert_uint_eq(cfg.compact_size, 1u << 20);
	ck_assert_int_eq(ta_config_set(&cfg, "compact_size", "12Q", &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "compact_size: '12Q' is not a size (e.g. 64M; 0 = never)");
	ck_assert_uint_eq(cfg.max_log_buffer, UINT64_C(64) << 20);
	ck_assert_int_eq(ta_config_set(&cfg, "max-log-buffer", "1M", &err), TA_OK);
	ck_assert_uint_eq(cfg.max_log_buffer, 1u << 20);
	ck_assert_int_eq(ta_config_set(&cfg, "max_log_buffer", "lots", &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "max_log_buffer: 'lots' is not a size (e.g. 64M; 0 = unbounded)");
	ck_assert_int_eq(ta_config_set(&cfg, "data_dir", "", &err), TA_OK);
	ck_assert_ptr_null(cfg.data_dir);
	char *argv[] = {"tileatomd", "--data-dir", "/tmp/x", "--fsync", "bogus", NULL};
	ta_config_action action;
	ck_assert_int_eq(ta_config_parse_args(&cfg, 5, argv, &action, &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, "--fsync: 'bogus' is not always, everysec or no");
	ta_config_free(&cfg);
}
END_TEST

/* ---- a service around a persistence directory ---- */

/* Backend, registry, service and data directory of one test. */
typedef struct fixture {
	ta_backend *be;   /* CPU backend */
	ta_registry *reg; /* registry */
	ta_service svc;   /* service */
	ta_persist *p;    /* persistence (NULL when closed) */
	char dir[64];     /* the temporary data directory */
	uint64_t next_id; /* next request id */
	uint64_t log_seq; /* log record of the last call's response (0: none) */
} fixture;

/* A fresh registry and service (no persistence yet). */
static void fx_service(fixture *fx)
{
	ta_error err = {0};
	fx->be = ta_cpu_backend_new(2, &err);
	ck_assert_ptr_nonnull(fx->be);
	fx->reg = ta_registry_new(fx->be, 0, 0, &err);
	ck_assert_ptr_nonnull(fx->reg);
	ta_service_init(&fx->svc, fx->be, fx->reg, 1u << 20);
}

/* Opens the data directory into the service (replaying it), accepting a lost part of the
 * log or not; returns the status, err says why not. */
static ta_status fx_try_open(fixture *fx, ta_fsync_mode mode, bool accept_log_loss, ta_error *err)
{
	ta_persist_settings set = {mode, 0, accept_log_loss};
	ta_status st = ta_persist_open(&fx->p, fx->dir, &set, &fx->svc, err);
	fx->svc.persist = fx->p;
	return st;
}

/* Opens the data directory into the service (replaying it). */
static void fx_open(fixture *fx, ta_fsync_mode mode)
{
	ta_error err = {0};
	ck_assert_msg(fx_try_open(fx, mode, false, &err) == TA_OK, "%s", err.msg);
}

/* Closes persistence and frees the service. */
static void fx_close(fixture *fx)
{
	fx->svc.persist = NULL;
	ta_persist_close(fx->p);
	fx->p = NULL;
	ta_registry_free(fx->reg);
	ta_backend_destroy(fx->be);
}

/* Runs a request through dispatch; returns the decoded response. */
static Tileatom__Response *call(fixture *fx, Tileatom__Request *req)
{
	req->id = ++fx->next_id;
	size_t n = protobuf_c_message_get_packed_size(&req->base);
	uint8_t *buf = malloc(n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(protobuf_c_message_pack(&req->base, buf), n);
	ta_reply reply;
	ta_dispatch_frame(&fx->svc, buf, n, &reply);
	fx->log_seq = reply.log_seq;
	free(buf);
	ck_assert_ptr_nonnull(reply.frame);
	Tileatom__Response *resp = tileatom__response__unpack(NULL, reply.len - TA_FRAME_HEADER,
	                                                      reply.frame + TA_FRAME_HEADER);
	free(reply.frame);
	ck_assert_ptr_nonnull(resp);
	return resp;
}

/* Asserts OK and frees the response. */
static void ok(Tileatom__Response *resp)
{
	ck_assert_msg(resp->status == TILEATOM__STATUS__OK, "status %d: %s", resp->status,
	              resp->message);
	tileatom__response__free_unpacked(resp, NULL);
}

/* create NAME int64 [n]. */
static Tileatom__Response *create_i64(fixture *fx, const char *name, int64_t n)
{
	int64_t shape[1] = {n};
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = (char *)name;
	c.dtype = TILEATOM__DTYPE__INT64;
	c.n_shape = 1;
	c.shape = shape;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &c;
	return call(fx, &req);
}

/* An indexed op on element index with 8-byte value and compare (cas) bits of dtype dt. */
static Tileatom__Response *op_at_dt(fixture *fx, const char *name, Tileatom__Op op, int64_t index,
                                    Tileatom__DType dt, int64_t value, int64_t compare)
{
	int64_t one[1] = {1};
	Tileatom__Array idx = TILEATOM__ARRAY__INIT, val = TILEATOM__ARRAY__INIT,
	                cmp = TILEATOM__ARRAY__INIT;
	idx.dtype = TILEATOM__DTYPE__INT64;
	idx.n_shape = 1;
	idx.shape = one;
	idx.data.data = (uint8_t *)&index;
	idx.data.len = 8;
	val.dtype = dt;
	val.data.data = (uint8_t *)&value;
	val.data.len = 8;
	cmp = val;
	cmp.data.data = (uint8_t *)&compare;
	Tileatom__Array *indices[1] = {&idx};
	Tileatom__IndexedAddr addr = TILEATOM__INDEXED_ADDR__INIT;
	addr.n_indices = 1;
	addr.indices = indices;
	addr.flat = true;
	Tileatom__IndexedAtomicRequest x = TILEATOM__INDEXED_ATOMIC_REQUEST__INIT;
	x.tile = (char *)name;
	x.op = op;
	x.addr = &addr;
	x.values = &val;
	x.compare = op == TILEATOM__OP__CAS ? &cmp : NULL;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_INDEXED;
	req.indexed = &x;
	return call(fx, &req);
}

/* An indexed op on element index of an int64 tile (compare for cas). */
static Tileatom__Response *op_at(fixture *fx, const char *name, Tileatom__Op op, int64_t index,
                                 int64_t value, int64_t compare)
{
	return op_at_dt(fx, name, op, index, TILEATOM__DTYPE__INT64, value, compare);
}

/* Reads an int64 tile of n elements into out. */
static void read_i64(fixture *fx, const char *name, int64_t *out, size_t n)
{
	Tileatom__ReadRegionRequest r = TILEATOM__READ_REGION_REQUEST__INIT;
	r.tile = (char *)name;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_READ;
	req.read = &r;
	Tileatom__Response *resp = call(fx, &req);
	ck_assert_msg(resp->status == TILEATOM__STATUS__OK, "%s", resp->message);
	ck_assert_uint_eq(resp->data->data.len, n * 8);
	memcpy(out, resp->data->data.data, n * 8);
	tileatom__response__free_unpacked(resp, NULL);
}

/* The snapshot request. */
static Tileatom__Response *snapshot(fixture *fx)
{
	Tileatom__SnapshotRequest s = TILEATOM__SNAPSHOT_REQUEST__INIT;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_SNAPSHOT;
	req.snapshot = &s;
	return call(fx, &req);
}

/* Number of log files in the directory. */
static int count_logs(const char *dir)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		n += strncmp(e->d_name, "log-", 4) == 0;
	closedir(d);
	return n;
}

static void fx_mkdir(fixture *fx)
{
	memset(fx, 0, sizeof(*fx));
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/check-persist-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(fx->dir));
}

static void fx_rmdir(fixture *fx)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_replay)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ok(create_i64(&fx, "c", 4));
	for (int i = 0; i < 5; i++)
		ok(op_at(&fx, "c", TILEATOM__OP__ADD, 0, 3, 0));
	ok(op_at(&fx, "c", TILEATOM__OP__CAS, 1, 7, 0));   /* 0 -> 7 */
	ok(op_at(&fx, "c", TILEATOM__OP__CAS, 1, 9, 5));   /* fails: stays 7 */
	ok(op_at(&fx, "c", TILEATOM__OP__EXCH, 2, -4, 0)); /* 0 -> -4 */
	ok(op_at(&fx, "c", TILEATOM__OP__MAX, 3, 11, 0));
	ok(op_at(&fx, "c", TILEATOM__OP__ADD, 3, -1, 0)); /* 10 */
	ok(create_i64(&fx, "gone", 2));
	Tileatom__DestroyTileRequest d = TILEATOM__DESTROY_TILE_REQUEST__INIT;
	d.name = "gone";
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_DESTROY;
	req.destroy = &d;
	ok(call(&fx, &req));
	/* an index outside the tile is skipped (logged, and skipped again on replay); a failed
	 * mutation is not logged */
	Tileatom__Response *resp = op_at(&fx, "c", TILEATOM__OP__ADD, 9, 1, 0);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->op->skipped, 1);
	tileatom__response__free_unpacked(resp, NULL);
	resp = op_at(&fx, "nope", TILEATOM__OP__ADD, 0, 1, 0);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__NOT_FOUND);
	tileatom__response__free_unpacked(resp, NULL);
	int64_t want[4] = {15, 7, -4, 10}, got[4];
	read_i64(&fx, "c", got, 4);
	ck_assert_mem_eq(got, want, sizeof(want));
	uint32_t tiles_before = 0;
	uint64_t bytes_before = 0;
	ta_registry_stats(fx.reg, &tiles_before, &bytes_before);
	fx_close(&fx);

	/* a fresh registry gets the same tiles from the log */
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	memset(got, 0, sizeof(got));
	read_i64(&fx, "c", got, 4);
	ck_assert_mem_eq(got, want, sizeof(want));
	uint32_t tiles = 0;
	uint64_t bytes = 0;
	ta_registry_stats(fx.reg, &tiles, &bytes);
	ck_assert_uint_eq(tiles, 1);
	ck_assert_uint_eq(tiles_before, 1);
	ck_assert_uint_eq(bytes, bytes_before); /* 32 bytes of data and the bookkeeping */
	uint64_t requests, errors, elements;
	ta_service_read_totals(&fx.svc, &requests, &errors, &elements);
	ck_assert_uint_eq(requests, 1); /* the read; replay not counted */

	/* a snapshot compacts: one log left, and the state survives another reopen */
	ok(op_at(&fx, "c", TILEATOM__OP__ADD, 0, 1, 0));
	resp = snapshot(&fx);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_SNAPSHOT);
	ck_assert_uint_eq(resp->snapshot->tiles, 1);
	ck_assert_uint_eq(resp->snapshot->seq, 15); /* 2 creates, 11 ops, 1 destroy, 1 add */
	ck_assert_uint_gt(resp->snapshot->log_removed, 0);
	tileatom__response__free_unpacked(resp, NULL);
	ck_assert_int_eq(count_logs(fx.dir), 1);
	ok(op_at(&fx, "c", TILEATOM__OP__SUB, 1, 2, 0));
	fx_close(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_NO);
	int64_t want2[4] = {16, 5, -4, 10};
	read_i64(&fx, "c", got, 4);
	ck_assert_mem_eq(got, want2, sizeof(want2));
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* Storage of one indexed request built by build_indexed. */
typedef struct indexed_msg {
	int64_t one[1];                   /* index array shape */
	int64_t index, value, compare;    /* the element data */
	Tileatom__Array idx, val, cmp;    /* arrays */
	Tileatom__Array *indices[1];      /* addr.indices */
	Tileatom__IndexedAddr addr;       /* addressing */
	Tileatom__IndexedAtomicRequest x; /* the body */
	Tileatom__Request req;            /* the request */
} indexed_msg;

/* Builds an indexed int64 op at element index into m. */
static void build_indexed(indexed_msg *m, uint64_t id, const char *name, Tileatom__Op op,
                          int64_t index, int64_t value, int64_t compare)
{
	memset(m, 0, sizeof(*m));
	m->one[0] = 1;
	m->index = index;
	m->value = value;
	m->compare = compare;
	tileatom__array__init(&m->idx);
	m->idx.dtype = TILEATOM__DTYPE__INT64;
	m->idx.n_shape = 1;
	m->idx.shape = m->one;
	m->idx.data.data = (uint8_t *)&m->index;
	m->idx.data.len = 8;
	tileatom__array__init(&m->val);
	m->val.dtype = TILEATOM__DTYPE__INT64;
	m->val.data.data = (uint8_t *)&m->value;
	m->val.data.len = 8;
	m->cmp = m->val;
	m->cmp.data.data = (uint8_t *)&m->compare;
	m->indices[0] = &m->idx;
	tileatom__indexed_addr__init(&m->addr);
	m->addr.n_indices = 1;
	m->addr.indices = m->indices;
	m->addr.flat = true;
	tileatom__indexed_atomic_request__init(&m->x);
	m->x.tile = (char *)name;
	m->x.op = op;
	m->x.addr = &m->addr;
	m->x.values = &m->val;
	m->x.compare = op == TILEATOM__OP__CAS ? &m->cmp : NULL;
	tileatom__request__init(&m->req);
	m->req.id = id;
	m->req.body_case = TILEATOM__REQUEST__BODY_INDEXED;
	m->req.indexed = &m->x;
}

/* Appends a read of a whole tile as a frame. */
static void append_read(ta_frame_buf *buf, uint64_t id, const char *name)
{
	Tileatom__ReadRegionRequest r = TILEATOM__READ_REGION_REQUEST__INIT;
	r.tile = (char *)name;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_READ;
	req.read = &r;
	ck_assert_int_eq(ta_frame_append(&req.base, 1u << 20, buf), 0);
}

START_TEST(test_batch_with_log)
{
	/* a worker's pipelined run (ta_dispatch_run_batch, which groups small plans): logged
	 * mutations between reads are answered in order with exact values, the run reports
	 * its last log record, and the log replays to the same tile */
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ok(create_i64(&fx, "b", 2)); /* record 1 */
	ta_frame_buf frames = {NULL, 0, 0};
	indexed_msg m;
	build_indexed(&m, 1, "b", TILEATOM__OP__ADD, 0, 5, 0);
	ck_assert_int_eq(ta_frame_append(&m.req.base, 1u << 20, &frames), 0);
	append_read(&frames, 2, "b");
	build_indexed(&m, 3, "b", TILEATOM__OP__ADD, 0, 2, 0);
	ck_assert_int_eq(ta_frame_append(&m.req.base, 1u << 20, &frames), 0);
	append_read(&frames, 4, "b");
	build_indexed(&m, 5, "b", TILEATOM__OP__CAS, 1, 9, 0);
	ck_assert_int_eq(ta_frame_append(&m.req.base, 1u << 20, &frames), 0);
	append_read(&frames, 6, "b");
	ta_dispatch_scratch scratch;
	ta_dispatch_scratch_init(&scratch);
	ta_frame_buf out = {NULL, 0, 0};
	bool close_after = true;
	uint32_t nframes = 0;
	size_t done = ta_dispatch_run_batch(&fx.svc, &scratch, NULL, frames.data, frames.len,
	                                    1u << 20, &out, &close_after, &nframes);
	ck_assert_uint_eq(done, frames.len);
	ck_assert_uint_eq(nframes, 6);
	ck_assert(!close_after);
	ck_assert_uint_eq(scratch.log_seq, 4); /* create, add, add, cas */
	ta_dispatch_scratch_free(&scratch);
	const int64_t reads[3][2] = {{5, 0}, {7, 0}, {7, 9}};
	size_t off = 0;
	for (uint64_t id = 1; id <= 6; id++) {
		ck_assert_uint_ge(out.len - off, TA_FRAME_HEADER);
		uint32_t n = ta_frame_get_header(out.data + off);
		Tileatom__Response *resp =
		    tileatom__response__unpack(NULL, n, out.data + off + TA_FRAME_HEADER);
		ck_assert_ptr_nonnull(resp);
		ck_assert_uint_eq(resp->id, id);
		ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
		if (id % 2 == 0) {
			ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY_DATA);
			ck_assert_uint_eq(resp->data->data.len, 16);
			ck_assert_mem_eq(resp->data->data.data, reads[id / 2 - 1], 16);
		}
		tileatom__response__free_unpacked(resp, NULL);
		off += TA_FRAME_HEADER + n;
	}
	ck_assert_uint_eq(off, out.len);
	ta_frame_buf_free(&out);
	ta_frame_buf_free(&frames);
	fx_close(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	int64_t got[2];
	read_i64(&fx, "b", got, 2);
	ck_assert_mem_eq(got, reads[2], 16);
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* Runs a request as a session's identity; returns the decoded response. */
static Tileatom__Response *call_as(fixture *fx, ta_session *session, Tileatom__Request *req)
{
	req->id = ++fx->next_id;
	size_t n = protobuf_c_message_get_packed_size(&req->base);
	uint8_t *buf = malloc(n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(protobuf_c_message_pack(&req->base, buf), n);
	ta_dispatch_scratch scratch;
	ta_dispatch_scratch_init(&scratch);
	ta_frame_buf out = {NULL, 0, 0};
	bool close_after = false;
	(void)ta_dispatch_run_session(&fx->svc, &scratch, session, buf, n, -1, &out, &close_after);
	ta_dispatch_scratch_free(&scratch);
	free(buf);
	ck_assert_uint_gt(out.len, TA_FRAME_HEADER);
	Tileatom__Response *resp =
	    tileatom__response__unpack(NULL, out.len - TA_FRAME_HEADER, out.data + TA_FRAME_HEADER);
	ta_frame_buf_free(&out);
	ck_assert_ptr_nonnull(resp);
	return resp;
}

/* Asserts that tile name is private to owner: owner gets it, another uid is denied. */
static void expect_private(fixture *fx, const char *name, ta_owner owner)
{
	ta_error err = {0};
	ta_tile *tile = NULL;
	ck_assert_int_eq(ta_registry_get_as(fx->reg, name, owner, &tile, &err), TA_OK);
	ck_assert_int_eq(tile->owner, owner);
	ta_tile_unref(tile);
	ck_assert_int_eq(ta_registry_get_as(fx->reg, name, owner + 1, &tile, &err),
	                 TA_PERMISSION_DENIED);
}

START_TEST(test_private_owner)
{
	/* a private tile created by uid 4242 over a connection keeps its owner through the
	 * log's replay and through a snapshot */
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ta_session session;
	ta_error err = {0};
	ck_assert_int_eq(ta_session_init(&session, &fx.svc, false, 4242, 1, &err), TA_OK);
	session.hello_done = true;
	int64_t shape[1] = {2};
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = "mine";
	c.dtype = TILEATOM__DTYPE__INT64;
	c.n_shape = 1;
	c.shape = shape;
	c.private_tile = true;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &c;
	ok(call_as(&fx, &session, &req));
	indexed_msg m;
	build_indexed(&m, 0, "mine", TILEATOM__OP__ADD, 1, 6, 0);
	ok(call_as(&fx, &session, &m.req));
	expect_private(&fx, "mine", 4242);
	fx_close(&fx);

	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS); /* replayed as uid 4242 */
	expect_private(&fx, "mine", 4242);
	int64_t want[2] = {0, 6}, got[2];
	read_i64(&fx, "mine", got, 2); /* in-process: sees every tile */
	ck_assert_mem_eq(got, want, sizeof(want));
	ok(snapshot(&fx));
	fx_close(&fx);

	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS); /* from the snapshot */
	expect_private(&fx, "mine", 4242);
	read_i64(&fx, "mine", got, 2);
	ck_assert_mem_eq(got, want, sizeof(want));
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

START_TEST(test_dir_locked)
{
	fixture a, b;
	fx_mkdir(&a);
	fx_service(&a);
	fx_open(&a, TA_FSYNC_EVERYSEC);
	memset(&b, 0, sizeof(b));
	memcpy(b.dir, a.dir, sizeof(b.dir));
	fx_service(&b);
	ta_error err = {0};
	ck_assert_int_eq(fx_try_open(&b, TA_FSYNC_EVERYSEC, false, &err), TA_UNAVAILABLE);
	ck_assert_ptr_nonnull(strstr(err.msg, "is in use by another tileatomd"));
	ck_assert_ptr_nonnull(strstr(err.msg, a.dir));
	fx_close(&b);
	fx_close(&a);
	fx_rmdir(&a);
}
END_TEST

START_TEST(test_snapshot_without_data_dir)
{
	fixture fx;
	memset(&fx, 0, sizeof(fx));
	fx_service(&fx);
	Tileatom__Response *resp = snapshot(&fx);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__UNAVAILABLE);
	ck_assert_str_eq(resp->message, "this daemon keeps no data (start it with --data-dir DIR)");
	tileatom__response__free_unpacked(resp, NULL);
	ta_registry_free(fx.reg);
	ta_backend_destroy(fx.be);
}
END_TEST

/* ---- the mutation locks ---- */

/* A thread taking a lock: name, kind; sets got once it holds it, releases on go. */
typedef struct locker {
	ta_persist *p;    /* persistence */
	const char *name; /* tile name */
	int kind;         /* lock kind */
	atomic_bool got;  /* it holds the lock */
	atomic_bool go;   /* release it */
	pthread_t thread; /* the thread */
} locker;

static void *locker_main(void *arg)
{
	locker *l = arg;
	ta_persist_hold hold;
	ta_error err = {0};
	if (ta_persist_run_lock(l->p, NULL, l->name, l->kind, &hold, &err) != TA_OK)
		return NULL;
	atomic_store(&l->got, true);
	while (!atomic_load(&l->go)) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	ta_persist_unlock(l->p, &hold);
	return NULL;
}

static void locker_start(locker *l, ta_persist *p, const char *name, int kind)
{
	l->p = p;
	l->name = name;
	l->kind = kind;
	atomic_init(&l->got, false);
	atomic_init(&l->go, false);
	ck_assert_int_eq(pthread_create(&l->thread, NULL, locker_main, l), 0);
}

/* (The positive waits below allow 20 s, a bound for a hang on a busy machine; the
 * negative ones, 50-100 ms, only get surer on a slower machine.) */
/* Waits up to ms for l to hold its lock; returns whether it does. */
static bool locker_holds(locker *l, int ms)
{
	for (int i = 0; i < ms && !atomic_load(&l->got); i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return atomic_load(&l->got);
}

static void locker_release(locker *l)
{
	atomic_store(&l->go, true);
	ck_assert_int_eq(pthread_join(l->thread, NULL), 0);
}

START_TEST(test_lock_kinds)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_NO);
	locker add1, add2, max1, alone, add3, other;
	/* two adds share; a max waits for them; an add arriving after the max waits too */
	locker_start(&add1, fx.p, "t", 1);
	ck_assert(locker_holds(&add1, 20000));
	locker_start(&add2, fx.p, "t", 1);
	ck_assert(locker_holds(&add2, 20000));
	locker_start(&max1, fx.p, "t", 4);
	ck_assert(!locker_holds(&max1, 100));
	locker_start(&add3, fx.p, "t", 1);
	ck_assert(!locker_holds(&add3, 100)); /* the waiting max is not starved */
	/* another tile name (another stripe: FNV-1a 35 and 8 of 64) is not held up */
	locker_start(&other, fx.p, "another tile", -1);
	ck_assert(locker_holds(&other, 20000));
	locker_release(&other);
	locker_release(&add1);
	ck_assert(!locker_holds(&max1, 50));
	locker_release(&add2);
	/* the max and the late add each get it, one after the other */
	for (int i = 0; i < 20000 && !atomic_load(&max1.got) && !atomic_load(&add3.got); i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	ck_assert(atomic_load(&max1.got) != atomic_load(&add3.got));
	locker *first = atomic_load(&max1.got) ? &max1 : &add3;
	locker *second = first == &max1 ? &add3 : &max1;
	ck_assert(!locker_holds(second, 50));
	locker_release(first);
	ck_assert(locker_holds(second, 20000));
	/* held alone: nobody shares */
	locker_start(&alone, fx.p, "t", -1);
	ck_assert(!locker_holds(&alone, 50));
	locker_release(second);
	ck_assert(locker_holds(&alone, 20000));
	locker add4;
	locker_start(&add4, fx.p, "t", 1);
	ck_assert(!locker_holds(&add4, 50));
	locker_release(&alone);
	ck_assert(locker_holds(&add4, 20000));
	locker_release(&add4);
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* A request run through dispatch on a thread of its own. */
typedef struct runner {
	fixture *fx;      /* the service */
	const char *tile; /* tile name */
	Tileatom__Op op;  /* indexed op at element 0 */
	atomic_bool done; /* it answered */
	int status;       /* its status */
	pthread_t thread; /* the thread */
} runner;

static void *runner_main(void *arg)
{
	runner *r = arg;
	double one = 1.0;
	int64_t fbits;
	memcpy(&fbits, &one, sizeof(fbits));
	bool f = strcmp(r->tile, "f") == 0; /* the float64 tile */
	Tileatom__Response *resp =
	    op_at_dt(r->fx, r->tile, r->op, 0,
	             f ? TILEATOM__DTYPE__FLOAT64 : TILEATOM__DTYPE__INT64, f ? fbits : 1, 0);
	r->status = resp->status;
	tileatom__response__free_unpacked(resp, NULL);
	atomic_store(&r->done, true);
	return NULL;
}

/* Starts op on tile; returns whether it answered within ms (then joins it). */
static bool run_within(fixture *fx, runner *r, const char *tile, Tileatom__Op op, int ms)
{
	r->fx = fx;
	r->tile = tile;
	r->op = op;
	atomic_init(&r->done, false);
	ck_assert_int_eq(pthread_create(&r->thread, NULL, runner_main, r), 0);
	for (int i = 0; i < ms && !atomic_load(&r->done); i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	bool done = atomic_load(&r->done);
	if (done)
		ck_assert_int_eq(pthread_join(r->thread, NULL), 0);
	return done;
}

START_TEST(test_dispatch_lock_choice)
{
	/* while integer adds hold tile i's lock, another add runs; a max, a cas and an exch
	 * wait; on a float tile an add waits too (float adds do not commute) */
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_NO);
	ok(create_i64(&fx, "i", 2));
	int64_t shape[1] = {2};
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = "f";
	c.dtype = TILEATOM__DTYPE__FLOAT64;
	c.n_shape = 1;
	c.shape = shape;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &c;
	ok(call(&fx, &req));
	locker adds, fadds;
	locker_start(&adds, fx.p, "i", (int)TA_OP_ADD);
	ck_assert(locker_holds(&adds, 20000));
	locker_start(&fadds, fx.p, "f", (int)TA_OP_ADD);
	ck_assert(locker_holds(&fadds, 20000));
	runner add, max, cas, fadd;
	ck_assert(run_within(&fx, &add, "i", TILEATOM__OP__ADD, 20000));
	ck_assert_int_eq(add.status, TILEATOM__STATUS__OK);
	ck_assert(!run_within(&fx, &max, "i", TILEATOM__OP__MAX, 100));
	ck_assert(!run_within(&fx, &cas, "i", TILEATOM__OP__CAS, 100));
	ck_assert(!run_within(&fx, &fadd, "f", TILEATOM__OP__ADD, 100));
	locker_release(&adds);
	locker_release(&fadds);
	runner *waited[] = {&max, &cas, &fadd};
	for (int k = 0; k < 3; k++) {
		ck_assert_int_eq(pthread_join(waited[k]->thread, NULL), 0);
		ck_assert_int_eq(waited[k]->status, TILEATOM__STATUS__OK);
	}
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* ---- a full disk ---- */

/* Size of the newest log in dir (the only one: these tests do not compact). */
static off_t log_size(const char *dir)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	off_t size = -1;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, "log-", 4) != 0)
			continue;
		char path[384];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ck_assert_int_eq(stat(path, &st), 0);
		size = st.st_size;
	}
	closedir(d);
	ck_assert_int_ge(size, 0);
	return size;
}

static size_t pack_add(uint64_t id, int64_t value, uint8_t **out);

/* Appends 5,000 adds of 0 to "c" (no change, about 285 KB of log) and waits until the log
 * holds them: the file size limit the tests set is then far above the sizes of Check's own
 * files, which it limits too. Returns the log's size. */
static off_t pad_log(fixture *fx)
{
	off_t before = log_size(fx->dir);
	for (int i = 0; i < 10000 && before == 8; i++) { /* the create's record (everysec) */
		usleep(1000);
		before = log_size(fx->dir);
	}
	uint8_t *rec = NULL;
	size_t n = pack_add(1, 0, &rec);
	ta_error err = {0};
	for (int i = 0; i < 5000; i++)
		ck_assert_uint_gt(ta_persist_append(fx->p, TA_OWNER_PUBLIC, rec, n, &err), 0);
	free(rec);
	off_t want = before + (off_t)(5000 * (n + 28)), size = 0;
	for (int i = 0; i < 10000 && (size = log_size(fx->dir)) != want; i++)
		usleep(1000);
	ck_assert_int_eq(size, want);
	return size;
}

/* Sets the soft file size limit of the process (writes past it fail with EFBIG: SIGXFSZ
 * is ignored). */
static void set_fsize(rlim_t bytes)
{
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = bytes;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

/* Waits (up to 10 s) until the log is longer than size or persistence failed; returns
 * the log's size. */
static off_t wait_log_growth(fixture *fx, off_t size)
{
	char why[160];
	for (int i = 0; i < 10000; i++) {
		off_t now = log_size(fx->dir);
		ta_persist_failure(fx->p, why, sizeof(why));
		if (now > size || why[0])
			return now;
		usleep(1000);
	}
	ck_abort_msg("the log did not grow within 10 s");
	return -1;
}

/* One add of 1 to element 0 of "c"; returns the response's status and copies its message. */
static int add_one(fixture *fx, char *msg, size_t n)
{
	Tileatom__Response *resp = op_at(fx, "c", TILEATOM__OP__ADD, 0, 1, 0);
	int status = resp->status;
	snprintf(msg, n, "%s", resp->message ? resp->message : "");
	tileatom__response__free_unpacked(resp, NULL);
	return status;
}

/* --fsync always: three adds fit under the limit and are acknowledged (durable); the
 * fourth's write fails: it is never reported durable, the log is cut back to the three,
 * mutations are refused with a message naming the problem, reads go on, and a restart
 * (limit gone) has exactly the acknowledged adds. */
START_TEST(test_disk_full_always)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ck_assert(signal(SIGXFSZ, SIG_IGN) != SIG_ERR);
	ok(create_i64(&fx, "c", 1));
	off_t s0 = pad_log(&fx);
	char msg[512];
	ck_assert_int_eq(add_one(&fx, msg, sizeof(msg)), TILEATOM__STATUS__OK);
	while (ta_persist_durable(fx.p, fx.log_seq) == 0)
		usleep(1000);
	off_t s1 = log_size(fx.dir), rec = s1 - s0; /* one add's record (the same every time) */
	ck_assert_int_gt(rec, 28);
	set_fsize((rlim_t)(s1 + 3 * rec + rec / 2)); /* room for 3.5 more */
	int acked = 1, durable = 1;
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(add_one(&fx, msg, sizeof(msg)), TILEATOM__STATUS__OK);
		while ((durable = ta_persist_durable(fx.p, fx.log_seq)) == 0)
			usleep(1000);
		if (durable < 0)
			break;
		acked++;
	}
	ck_assert_int_eq(durable, -1);
	ck_assert_int_eq(acked, 4);
	ck_assert_int_eq(log_size(fx.dir), s1 + 3 * rec); /* the half record was cut off */
	char why[160];
	ta_persist_failure(fx.p, why, sizeof(why));
	ck_assert_str_eq(why, "persistence log write failed: File too large");
	ck_assert_int_eq(add_one(&fx, msg, sizeof(msg)), TILEATOM__STATUS__UNAVAILABLE);
	char want[512];
	snprintf(want, sizeof(want),
	         "persistence log write failed: File too large (data directory %s); mutations "
	         "are refused until the daemon is restarted",
	         fx.dir);
	ck_assert_str_eq(msg, want);
	Tileatom__Response *resp = snapshot(&fx);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__UNAVAILABLE);
	tileatom__response__free_unpacked(resp, NULL);
	int64_t v = 0;
	read_i64(&fx, "c", &v, 1);
	ck_assert_int_eq(v, 5); /* reads go on: the 5th add, not acknowledged, is in memory */
	fx_close(&fx);

	set_fsize(RLIM_INFINITY);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	read_i64(&fx, "c", &v, 1);
	ck_assert_int_eq(v, 4); /* exactly the acknowledged adds */
	ok(op_at(&fx, "c", TILEATOM__OP__ADD, 0, 1, 0));
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* --fsync everysec: adds are acknowledged at once; the write that passes the limit fails,
 * the log is cut back to the whole records, mutations are refused (reads go on), the
 * records keep waiting; once the limit is lifted the writer's next try (within a second)
 * writes them, mutations are accepted again, and a restart has every acknowledged add. */
START_TEST(test_disk_full_everysec)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_EVERYSEC);
	ck_assert(signal(SIGXFSZ, SIG_IGN) != SIG_ERR);
	ok(create_i64(&fx, "c", 1));
	off_t s0 = pad_log(&fx);
	char msg[512];
	ck_assert_int_eq(add_one(&fx, msg, sizeof(msg)), TILEATOM__STATUS__OK);
	off_t s1 = wait_log_growth(&fx, s0), rec = s1 - s0;
	ck_assert_int_gt(rec, 28);
	set_fsize((rlim_t)(s1 + 3 * rec + rec / 2));
	off_t size = s1;
	int written = 1;
	char why[160] = "";
	for (int i = 0; i < 4 && !why[0]; i++) {
		ck_assert_int_eq(add_one(&fx, msg, sizeof(msg)), TILEATOM__STATUS__OK);
		off_t now = wait_log_growth(&fx, size);
		ta_persist_failure(fx.p, why, sizeof(why));
		if (!why[0]) {
			ck_assert_int_eq(now, size + rec);
			size = now;
			written++;
		}
	}
	ck_assert_int_eq(written, 4);
	ck_assert_str_eq(why, "persistence log write failed: File too large");
	ck_assert_int_eq(log_size(fx.dir), s1 + 3 * rec); /* cut back to whole records */
	ck_assert_int_eq(add_one(&fx, msg, sizeof(msg)), TILEATOM__STATUS__UNAVAILABLE);
	char want[512];
	snprintf(want, sizeof(want),
	         "persistence log write failed: File too large (data directory %s); mutations "
	         "are refused until the log can be written again",
	         fx.dir);
	ck_assert_str_eq(msg, want);
	int64_t v = 0;
	read_i64(&fx, "c", &v, 1);
	ck_assert_int_eq(v, 5); /* 5 acknowledged adds; the refused one changed nothing */

	set_fsize(RLIM_INFINITY); /* space again: the retry writes the waiting record */
	for (int i = 0; i < 5000 && why[0]; i++) {
		usleep(1000);
		ta_persist_failure(fx.p, why, sizeof(why));
	}
	ck_assert_str_eq(why, "");
	ck_assert_int_eq(log_size(fx.dir), s1 + 4 * rec);
	ck_assert_int_eq(add_one(&fx, msg, sizeof(msg)), TILEATOM__STATUS__OK);
	fx_close(&fx);

	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_EVERYSEC);
	read_i64(&fx, "c", &v, 1);
	ck_assert_int_eq(v, 6); /* every acknowledged add */
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* ---- the bound on the log buffer ---- */

/* A Request adding value to element 0 of "c", packed (malloc'd) into *out. */
static size_t pack_add(uint64_t id, int64_t value, uint8_t **out)
{
	int64_t one[1] = {1}, index = 0;
	Tileatom__Array idx = TILEATOM__ARRAY__INIT, val = TILEATOM__ARRAY__INIT;
	idx.dtype = TILEATOM__DTYPE__INT64;
	idx.n_shape = 1;
	idx.shape = one;
	idx.data.data = (uint8_t *)&index;
	idx.data.len = 8;
	val.dtype = TILEATOM__DTYPE__INT64;
	val.data.data = (uint8_t *)&value;
	val.data.len = 8;
	Tileatom__Array *indices[1] = {&idx};
	Tileatom__IndexedAddr addr = TILEATOM__INDEXED_ADDR__INIT;
	addr.n_indices = 1;
	addr.indices = indices;
	addr.flat = true;
	Tileatom__IndexedAtomicRequest x = TILEATOM__INDEXED_ATOMIC_REQUEST__INIT;
	x.tile = "c";
	x.op = TILEATOM__OP__ADD;
	x.addr = &addr;
	x.values = &val;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_INDEXED;
	req.indexed = &x;
	size_t n = protobuf_c_message_get_packed_size(&req.base);
	*out = malloc(n);
	ck_assert_ptr_nonnull(*out);
	ck_assert_uint_eq(protobuf_c_message_pack(&req.base, *out), n);
	return n;
}

/* everysec with --max-log-buffer 1024: 5,000 records appended as fast as possible never
 * hold more than 1,024 bytes waiting (the appends wait for the writer instead), and every
 * one of them is in the log (the replay adds them all). */
START_TEST(test_buffer_bound)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_EVERYSEC);
	ta_persist_set_buffer_max(fx.p, 1024);
	ok(create_i64(&fx, "c", 1));
	uint8_t *rec = NULL;
	size_t n = pack_add(1, 3, &rec);
	ta_error err = {0};
	for (int i = 0; i < 5000; i++)
		ck_assert_uint_gt(ta_persist_append(fx.p, TA_OWNER_PUBLIC, rec, n, &err), 0);
	free(rec);
	uint64_t high = 0, waits = 0;
	ta_persist_buffer_stats(fx.p, &high, &waits);
	ck_assert_uint_le(high, 1024);
	ck_assert_uint_ge(high, n + 28);
	ck_assert_uint_gt(waits, 0); /* 5,000 x 57 bytes cannot all fit in 1 KiB */
	fx_close(&fx);

	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_EVERYSEC);
	int64_t v = 0;
	read_i64(&fx, "c", &v, 1);
	ck_assert_int_eq(v, 15000);
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* ---- a pipelined run ---- */

/* Logs an add of 5 to "c" in run (its lock taken as kind); returns whether the run's lock
 * served (kept). The record gets no number yet. */
static bool run_add5(fixture *fx, ta_persist_run *run, int kind)
{
	ta_persist_hold hold;
	ta_error err = {0};
	ck_assert_int_eq(ta_persist_run_lock(fx->p, run, "c", kind, &hold, &err), TA_OK);
	uint8_t *rec = NULL;
	size_t n = pack_add(1, 5, &rec);
	uint64_t seq = 99;
	ck_assert_int_eq(ta_persist_record(fx->p, &hold, TA_OWNER_ANY, rec, n, &seq, &err), TA_OK);
	free(rec);
	ck_assert_uint_eq(seq, 0); /* numbered when the run's records go to the log */
	bool kept = hold.kept;
	ta_persist_unlock(fx->p, &hold);
	ck_assert(run->hold.held); /* the run keeps it */
	return kept;
}

START_TEST(test_run)
{
	/* a run keeps its lock from one add to the next (a lock held alone waits for the end
	 * of the run, which does not wait for it), numbers its records when they go to the
	 * log together, releases the lock (its records first) when another is needed, and
	 * the records replay */
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ok(create_i64(&fx, "c", 1)); /* record 1 */
	ta_persist_run run;
	ta_persist_run_init(&run);
	ck_assert(!run_add5(&fx, &run, (int)TA_OP_ADD));
	locker alone;
	locker_start(&alone, fx.p, "c", -1);
	ck_assert(!locker_holds(&alone, 100));
	ck_assert(run_add5(&fx, &run, (int)TA_OP_ADD));
	ck_assert(run_add5(&fx, &run, (int)TA_OP_ADD));
	ck_assert(!locker_holds(&alone, 50));
	ck_assert_int_eq(ta_persist_durable(fx.p, 2), 0);     /* not even in the log's buffer */
	ck_assert_uint_eq(ta_persist_run_end(fx.p, &run), 4); /* records 2, 3 and 4 */
	ck_assert(!run.hold.held);
	ck_assert(locker_holds(&alone, 20000));
	locker_release(&alone);
	ck_assert_uint_eq(ta_persist_run_end(fx.p, &run), 0); /* nothing since */
	/* held alone next: the shared lock goes first, with its record (5) */
	ck_assert(!run_add5(&fx, &run, (int)TA_OP_ADD));
	ck_assert(!run_add5(&fx, &run, -1));
	ck_assert_uint_eq(run.last_seq, 5);
	ck_assert(run_add5(&fx, &run, (int)TA_OP_ADD)); /* a lock held alone serves an add */
	ck_assert_uint_eq(ta_persist_run_end(fx.p, &run), 7);
	/* a run whose records could not be buffered: its responses never leave */
	ck_assert_int_eq(ta_persist_durable(fx.p, TA_PERSIST_SEQ_LOST), -1);
	ta_persist_run_free(&run);
	fx_close(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_NO);
	int64_t v = 0;
	read_i64(&fx, "c", &v, 1);
	ck_assert_int_eq(v, 30); /* six adds of 5 */
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* ---- log recovery: a torn last record told from a log cut short or missing ---- */

/* Path of file name in fx's data directory into buf. */
static void fx_path(const fixture *fx, const char *name, char *buf, size_t n)
{
	snprintf(buf, n, "%.63s/%.63s", fx->dir, name);
}

/* The end offsets of the whole records of the log at path into ends (at most max);
 * returns how many. */
static size_t record_ends(const char *path, uint64_t *ends, size_t max)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 8, SEEK_SET), 0);
	uint64_t off = 8;
	size_t n = 0;
	uint8_t h[28];
	while (n < max && fread(h, 1, sizeof(h), f) == sizeof(h)) {
		uint32_t len = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 |
		               (uint32_t)h[3] << 24;
		ck_assert_int_eq(fseek(f, (long)len, SEEK_CUR), 0);
		off += sizeof(h) + len;
		ends[n++] = off;
	}
	fclose(f);
	return n;
}

/* n adds of 1 to element 0 of "c". */
static void add_n(fixture *fx, int n)
{
	for (int i = 0; i < n; i++)
		ok(op_at(fx, "c", TILEATOM__OP__ADD, 0, 1, 0));
}

/* Element 0 of "c". */
static int64_t c0(fixture *fx)
{
	int64_t v = -1;
	read_i64(fx, "c", &v, 1);
	return v;
}

/* Opens fx's directory expecting the refusal whose message is "DIR/" + want + the
 * --accept-log-loss hint; then opens it with --accept-log-loss (the service fresh both
 * times) and leaves it open. */
static void expect_loss(fixture *fx, const char *want)
{
	ta_error err = {0};
	fx_service(fx);
	ck_assert_int_eq(fx_try_open(fx, TA_FSYNC_ALWAYS, false, &err), TA_INTERNAL);
	char full[512];
	snprintf(full, sizeof(full), "%s/%s; refusing to start without --accept-log-loss", fx->dir,
	         want);
	ck_assert_str_eq(err.msg, full);
	fx_close(fx);
	fx_service(fx);
	ck_assert_msg(fx_try_open(fx, TA_FSYNC_ALWAYS, true, &err) == TA_OK, "%s", err.msg);
}

/* Closes fx and opens it again without --accept-log-loss: the accepted loss left a
 * directory that starts as it is. */
static void reopen_plain(fixture *fx)
{
	fx_close(fx);
	fx_service(fx);
	fx_open(fx, TA_FSYNC_ALWAYS);
}

/* 100 adds after a clean stop; the log cut in the middle of the 71st: refused, naming what
 * is lost (30 adds); --accept-log-loss starts with the 70 (and writes a snapshot, so that a
 * plain start works again); a partial record appended past the durable end instead (what a
 * crash leaves) is dropped as a torn last record, as before. */
START_TEST(test_log_cut)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ok(create_i64(&fx, "c", 1));
	add_n(&fx, 100);
	fx_close(&fx);
	char path[256];
	fx_path(&fx, "log-0000000000000001.tal", path, sizeof(path));
	uint64_t ends[128];
	ck_assert_uint_eq(record_ends(path, ends, 128), 101); /* the create and 100 adds */

	/* a torn last record past the durable end: dropped, every add kept */
	uint8_t part[40];
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, (long)ends[99], SEEK_SET), 0);
	ck_assert_uint_eq(fread(part, 1, sizeof(part), f), sizeof(part));
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	ck_assert_uint_eq(fwrite(part, 1, sizeof(part), f), sizeof(part)); /* a copy, cut */
	ck_assert_int_eq(fclose(f), 0);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ck_assert_int_eq(c0(&fx), 100);
	fx_close(&fx);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)ends[100]); /* the torn bytes cut off */

	/* cut in the middle of record 72 (the 71st add) */
	ck_assert_int_eq(truncate(path, (off_t)(ends[70] + (ends[71] - ends[70]) / 2)), 0);
	char want[400];
	snprintf(want, sizeof(want),
	         "log-0000000000000001.tal: cut short at byte %" PRIu64 ", after record 71, of "
	         "%" PRIu64 " bytes durable through record 101: at least %" PRIu64
	         " bytes, 30 records lost",
	         ends[70], ends[100], ends[100] - ends[70]);
	expect_loss(&fx, want);
	ck_assert_int_eq(c0(&fx), 70);
	ok(op_at(&fx, "c", TILEATOM__OP__ADD, 0, 5, 0));
	reopen_plain(&fx);
	ck_assert_int_eq(c0(&fx), 75);

	/* cut at a record boundary: as much a loss */
	fx_close(&fx);
	ck_assert_int_eq(count_logs(fx.dir), 1);
	char name[64];
	DIR *d = opendir(fx.dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, "log-", 4) == 0)
			snprintf(name, sizeof(name), "%.63s", e->d_name);
	closedir(d);
	fx_path(&fx, name, path, sizeof(path));
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(truncate(path, 8), 0); /* the one add after the snapshot */
	snprintf(want, sizeof(want),
	         "%s: cut short at byte 8, after record 71, of %lld bytes durable through record "
	         "72: at least %lld bytes, 1 record lost",
	         name, (long long)st.st_size, (long long)st.st_size - 8);
	expect_loss(&fx, want);
	ck_assert_int_eq(c0(&fx), 70);
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* A log deleted after a snapshot (40 adds in it, 60 after): refused naming the 60 records;
 * accepted, 40 are left. The snapshot deleted instead: the log's first record tells 41
 * records before it are missing. Neither the log nor the logmark: the snapshot still needs
 * its log. */
START_TEST(test_log_missing)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ok(create_i64(&fx, "c", 1));
	add_n(&fx, 40);
	ok(snapshot(&fx)); /* through record 41 */
	add_n(&fx, 60);
	fx_close(&fx);
	char path[256], snap[256], keep[300];
	fx_path(&fx, "log-000000000000002a.tal", path, sizeof(path));
	fx_path(&fx, "snapshot.tas", snap, sizeof(snap));
	snprintf(keep, sizeof(keep), "%s.kept", path);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(rename(path, keep), 0);
	char want[400];
	snprintf(want, sizeof(want),
	         "log-000000000000002a.tal: missing; %lld bytes through record 101 were durable: "
	         "at least %lld bytes, 60 records lost",
	         (long long)st.st_size, (long long)st.st_size);
	expect_loss(&fx, want);
	ck_assert_int_eq(c0(&fx), 40);
	reopen_plain(&fx);
	ck_assert_int_eq(c0(&fx), 40);
	fx_close(&fx);

	/* the log back, the snapshot (and the log the accepted loss started) gone */
	char mark[256];
	fx_path(&fx, "logmark", mark, sizeof(mark));
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -f %s/log-*.tal %s %s", fx.dir, snap, mark);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(rename(keep, path), 0);
	expect_loss(&fx,
	            "log-000000000000002a.tal: starts at record 42, but no snapshot or earlier "
	            "log holds records 1 to 41: 41 records lost");
	uint32_t tiles = 1;
	uint64_t bytes = 0;
	ta_registry_stats(fx.reg, &tiles, &bytes);
	ck_assert_uint_eq(tiles, 0); /* the tile's create was in the snapshot: its adds skipped */
	fx_close(&fx);
	fx_rmdir(&fx);

	/* a snapshot without its log and without a logmark */
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ok(create_i64(&fx, "c", 1));
	add_n(&fx, 3);
	ok(snapshot(&fx)); /* through record 4 */
	fx_close(&fx);
	snprintf(cmd, sizeof(cmd), "rm -f %s/log-*.tal %s/logmark", fx.dir, fx.dir);
	ck_assert_int_eq(system(cmd), 0);
	expect_loss(&fx, "log-0000000000000005.tal: missing, though the snapshot through record 4 "
	                 "needs it: the records after 4 are lost (how many is unknown)");
	ck_assert_int_eq(c0(&fx), 3);
	reopen_plain(&fx);
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* The logmark deleted, or both of its slots damaged: whether the log is whole cannot be
 * told, so that is refused too; one damaged slot is not (the other one holds). */
START_TEST(test_logmark_damage)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ok(create_i64(&fx, "c", 1));
	add_n(&fx, 5);
	fx_close(&fx);
	char mark[256];
	fx_path(&fx, "logmark", mark, sizeof(mark));
	ck_assert_int_eq(unlink(mark), 0);
	expect_loss(&fx, "logmark: missing, though log-0000000000000001.tal was written with one: "
	                 "whether the log is complete is unknown");
	ck_assert_int_eq(c0(&fx), 5);
	add_n(&fx, 1);
	reopen_plain(&fx);
	ck_assert_int_eq(c0(&fx), 6);
	fx_close(&fx);

	/* one slot damaged: the other holds */
	FILE *f = fopen(mark, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputc('X', f), 'X'); /* the magic of slot 0 */
	ck_assert_int_eq(fclose(f), 0);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ck_assert_int_eq(c0(&fx), 6);
	fx_close(&fx);
	/* both */
	f = fopen(mark, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputc('X', f), 'X');
	ck_assert_int_eq(fseek(f, 4096, SEEK_SET), 0);
	ck_assert_int_eq(fputc('X', f), 'X');
	ck_assert_int_eq(fclose(f), 0);
	expect_loss(&fx,
	            "logmark: damaged (no whole slot): whether the log is complete is unknown");
	ck_assert_int_eq(c0(&fx), 6);
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* A data directory of the format before the logmark (TALOG003 logs, no logmark) loads as
 * before; its log is kept, new records go to a TALOG005 log, and both replay next time. */
START_TEST(test_old_format)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ok(create_i64(&fx, "c", 1));
	add_n(&fx, 9);
	fx_close(&fx);
	char path[256], mark[256];
	fx_path(&fx, "log-0000000000000001.tal", path, sizeof(path));
	fx_path(&fx, "logmark", mark, sizeof(mark));
	ck_assert_int_eq(unlink(mark), 0);
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite("TALOG003", 1, 8, f), 8);
	ck_assert_int_eq(fclose(f), 0);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ck_assert_int_eq(c0(&fx), 9);
	add_n(&fx, 2);
	fx_close(&fx);
	ck_assert_int_eq(count_logs(fx.dir), 2); /* log-1 (old) and log-b (new) */
	char newer[256];
	fx_path(&fx, "log-000000000000000b.tal", newer, sizeof(newer));
	f = fopen(newer, "rb");
	ck_assert_ptr_nonnull(f);
	char magic[9] = {0};
	ck_assert_uint_eq(fread(magic, 1, 8, f), 8);
	fclose(f);
	ck_assert_str_eq(magic, "TALOG005");
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_ALWAYS);
	ck_assert_int_eq(c0(&fx), 11);
	ok(snapshot(&fx)); /* covers both logs: the old one goes */
	ck_assert_int_eq(count_logs(fx.dir), 1);
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* Reads the mark of the logmark at path (the whole slot with the higher count): the log it
 * names and its durable bytes; false when there is none. */
static bool read_mark(const char *path, uint64_t *first, uint64_t *bytes)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return false;
	uint64_t best = 0;
	for (int i = 0; i < 2; i++) {
		uint8_t b[48];
		uint64_t v[4];
		if (fseek(f, i * 4096L, SEEK_SET) != 0 || fread(b, 1, sizeof(b), f) != sizeof(b) ||
		    memcmp(b, "TAMARK01", 8) != 0)
			continue;
		memcpy(v, b + 8, sizeof(v)); /* little-endian hosts only (the tests' hosts) */
		if (v[0] > best) {
			best = v[0];
			*first = v[1];
			*bytes = v[2];
		}
	}
	fclose(f);
	return best > 0;
}

/* While the daemon runs, the syncer thread moves the logmark on as the log becomes durable
 * (always and everysec; waited for up to 10 s). */
START_TEST(test_logmark_follows)
{
	ta_fsync_mode modes[2] = {TA_FSYNC_ALWAYS, TA_FSYNC_EVERYSEC};
	for (int m = 0; m < 2; m++) {
		fixture fx;
		fx_mkdir(&fx);
		fx_service(&fx);
		fx_open(&fx, modes[m]);
		ok(create_i64(&fx, "c", 1));
		add_n(&fx, 20);
		char mark[256];
		fx_path(&fx, "logmark", mark, sizeof(mark));
		uint64_t first = 0, bytes = 0;
		for (int i = 0; i < 10000; i++) {
			if (read_mark(mark, &first, &bytes) && bytes > 8 + 21 * 28 &&
			    bytes == (uint64_t)log_size(fx.dir))
				break;
			usleep(1000);
		}
		ck_assert_uint_eq(first, 1);
		ck_assert_uint_eq(bytes, (uint64_t)log_size(fx.dir));
		ck_assert_uint_gt(bytes, 8 + 21 * 28);
		fx_close(&fx);
		fx_rmdir(&fx);
	}
}
END_TEST

/* The snapshot request is the daemon's user's, root's and the auth secret's holder's:
 * another local user, or an unauthenticated TCP client, gets PERMISSION_DENIED and no
 * snapshot is written. */
START_TEST(test_snapshot_permission)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service(&fx);
	fx_open(&fx, TA_FSYNC_NO);
	Tileatom__SnapshotRequest sr = TILEATOM__SNAPSHOT_REQUEST__INIT;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_SNAPSHOT;
	req.snapshot = &sr;
	char snap[256];
	fx_path(&fx, "snapshot.tas", snap, sizeof(snap));
	ta_owner other = (ta_owner)geteuid() + 4242;
	struct {
		bool tcp;     /* a TCP session (else Unix) */
		ta_owner uid; /* its peer identity */
		bool auth;    /* authenticated with the secret */
		int status;   /* the answer */
	} cases[] = {
	    {false, other, false, TILEATOM__STATUS__PERMISSION_DENIED},
	    {true, TA_OWNER_PUBLIC, false, TILEATOM__STATUS__PERMISSION_DENIED},
	    {false, (ta_owner)geteuid(), false, TILEATOM__STATUS__OK},
	    {false, 0, false, TILEATOM__STATUS__OK},
	    {true, TA_OWNER_PUBLIC, true, TILEATOM__STATUS__OK},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unlink(snap);
		ta_session session;
		ta_error err = {0};
		ck_assert_int_eq(
		    ta_session_init(&session, &fx.svc, cases[i].tcp, cases[i].uid, 1, &err), TA_OK);
		session.hello_done = true;
		session.authenticated = cases[i].auth;
		Tileatom__Response *resp = call_as(&fx, &session, &req);
		ck_assert_msg((int)resp->status == cases[i].status, "case %zu: status %d: %s", i,
		              resp->status, resp->message);
		if (cases[i].status != TILEATOM__STATUS__OK)
			ck_assert_str_eq(resp->message,
			                 "snapshot: only the daemon's user, root or an "
			                 "authenticated TCP client may ask for one");
		tileatom__response__free_unpacked(resp, NULL);
		struct stat st;
		ck_assert_int_eq(stat(snap, &st) == 0, cases[i].status == TILEATOM__STATUS__OK);
	}
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* ---- where tiles lived (issue 24, item 5) ---- */

/* A fresh registry and service on n CPU memory pools behind the multi-device layer with
 * default placement dflt (tileatomd --devices n --placement dflt); n 1 without dflt: the
 * plain CPU backend, as tileatomd serves one device. */
static void fx_service_devices(fixture *fx, int n, const char *dflt)
{
	ta_error err = {0};
	ta_placement place;
	ck_assert_int_eq(ta_placement_parse(dflt, &place, &err), TA_OK);
	if (n == 1 && place.kind == TA_PLACE_DEFAULT) {
		fx_service(fx);
		return;
	}
	ta_backend *devs[TA_MAX_DEVICES];
	for (int d = 0; d < n; d++) {
		devs[d] = ta_cpu_backend_new(2, &err);
		ck_assert_msg(devs[d] != NULL, "%s", err.msg);
	}
	fx->be = ta_multi_backend_new(devs, n, &place, &err);
	ck_assert_msg(fx->be != NULL, "%s", err.msg);
	fx->reg = ta_registry_new(fx->be, 0, 0, &err);
	ck_assert_ptr_nonnull(fx->reg);
	ta_service_init(&fx->svc, fx->be, fx->reg, 1u << 20);
}

/* create NAME int64 of shape rows x cols (cols 0: rank 1) placed as placement asks. */
static void create_placed(fixture *fx, const char *name, int64_t rows, int64_t cols,
                          const char *placement)
{
	int64_t shape[2] = {rows, cols};
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = (char *)name;
	c.dtype = TILEATOM__DTYPE__INT64;
	c.n_shape = cols ? 2 : 1;
	c.shape = shape;
	c.placement = (char *)placement;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &c;
	ok(call(fx, &req));
}

/* Element k of the tile named name in the placement tests: distinct, some negative. */
static int64_t place_value(const char *name, int64_t k)
{
	return (int64_t)name[0] * 1000 + (int64_t)strlen(name) * 100000 + k * 37 - 60;
}

/* Writes place_value into every one of the n elements of name, element by element
 * (exchanges). */
static void place_write(fixture *fx, const char *name, int64_t n)
{
	for (int64_t k = 0; k < n; k++)
		ok(op_at(fx, name, TILEATOM__OP__EXCH, k, place_value(name, k), 0));
}

/* Asserts that the n elements of name hold place_value exactly. */
static void place_check(fixture *fx, const char *name, int64_t n)
{
	int64_t got[32];
	ck_assert_int_le(n, 32);
	read_i64(fx, name, got, (size_t)n);
	for (int64_t k = 0; k < n; k++)
		ck_assert_msg(got[k] == place_value(name, k),
		              "%s[%" PRId64 "] = %" PRId64 " after the restart, %" PRId64
		              " was written",
		              name, k, got[k], place_value(name, k));
}

/* Where name lives, as describe says (TileInfo.placement), into buf. */
static const char *placement_of(fixture *fx, const char *name, char *buf, size_t n)
{
	Tileatom__DescribeTileRequest d = TILEATOM__DESCRIBE_TILE_REQUEST__INIT;
	d.name = (char *)name;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.body_case = TILEATOM__REQUEST__BODY_DESCRIBE;
	req.describe = &d;
	Tileatom__Response *resp = call(fx, &req);
	ck_assert_msg(resp->status == TILEATOM__STATUS__OK, "%s", resp->message);
	ck_assert_ptr_nonnull(resp->tile);
	snprintf(buf, n, "%s", resp->tile->placement);
	tileatom__response__free_unpacked(resp, NULL);
	return buf;
}

/* The tiles of the placement tests: name, rows, columns (0: rank 1), the placement asked
 * and where that put them on 3 pools with the default placement (device 0). "sh" splits 7
 * rows unevenly; "sh2" goes to the 2 pools that held the fewest bytes then (0: 96, 1: 88,
 * 2: 80), not the first. */
static const struct {
	const char *name;   /* the tile */
	int64_t rows, cols; /* its shape */
	const char *asked;  /* the create's placement */
	const char *placed; /* where it went */
} place_tiles[] = {
    {"dflt", 3, 0, "", "0"},
    {"on1", 5, 0, "1", "1"},
    {"on2", 4, 0, "2", "2"},
    {"sh", 7, 3, "shard", "0:[0,3) 1:[3,5) 2:[5,7)"},
    {"sh2", 5, 0, "shard:2", "1:[0,3) 2:[3,5)"},
};
#define PLACE_TILES (sizeof(place_tiles) / sizeof(place_tiles[0]))

/* Elements of place_tiles[i]. */
static int64_t place_elems(size_t i)
{
	return place_tiles[i].rows * (place_tiles[i].cols ? place_tiles[i].cols : 1);
}

/* Creates the tiles of place_tiles on fx (3 pools, default placement), checks where they
 * went and writes their values. */
static void place_setup(fixture *fx)
{
	char where[TA_WHERE_TEXT];
	for (size_t i = 0; i < PLACE_TILES; i++) {
		create_placed(fx, place_tiles[i].name, place_tiles[i].rows, place_tiles[i].cols,
		              place_tiles[i].asked);
		ck_assert_str_eq(placement_of(fx, place_tiles[i].name, where, sizeof(where)),
		                 place_tiles[i].placed);
		place_write(fx, place_tiles[i].name, place_elems(i));
	}
}

/* Makes the daemon's log lines (stderr) go to a temporary file until capture_end; returns
 * the saved stderr. */
static int capture_begin(char *path, size_t n)
{
	snprintf(path, n, "/tmp/check-persist-log-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	int saved = dup(2);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(fd, 2), 2);
	ck_assert_int_eq(close(fd), 0);
	return saved;
}

/* Restores stderr (saved) and reads what capture_begin's file got into buf (n bytes);
 * writes it to stderr too, for the test log. */
static void capture_end(int saved, const char *path, char *buf, size_t n)
{
	ck_assert_int_eq(dup2(saved, 2), 2);
	ck_assert_int_eq(close(saved), 0);
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	size_t got = fread(buf, 1, n - 1, f);
	ck_assert_uint_lt(got, n - 1);
	buf[got] = '\0';
	fclose(f);
	ck_assert_int_eq(unlink(path), 0);
	fputs(buf, stderr);
}

/* Lines of text that contain what. */
static int count_lines_with(const char *text, const char *what)
{
	int n = 0;
	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char one[2048];
		snprintf(one, sizeof(one), "%.*s", (int)len, line);
		n += strstr(one, what) != NULL;
		line += len + (end ? 1 : 0);
	}
	return n;
}

/* Opens fx's directory on n pools with default placement dflt, capturing the log into
 * logbuf (n bytes). */
static void place_reopen(fixture *fx, int n, const char *dflt, char *logbuf, size_t size)
{
	char path[64];
	fx_service_devices(fx, n, dflt);
	int saved = capture_begin(path, sizeof(path));
	ta_error err = {0};
	ta_status st = fx_try_open(fx, TA_FSYNC_ALWAYS, false, &err);
	capture_end(saved, path, logbuf, size);
	ck_assert_msg(st == TA_OK, "%s", err.msg);
}

/* The warning a restart logs for a tile it could not put back: name was on was, went to
 * went, and why (the allocation's error, of bytes bytes). */
static void expect_fallback(const char *log, const char *name, const char *was, const char *went,
                            uint64_t bytes, const char *why)
{
	char line[1024];
	snprintf(line, sizeof(line),
	         "<4>tile '%s' was on %s; placed by the default placement (--placement) on %s "
	         "instead: tile '%s': cannot allocate %" PRIu64 " bytes: %s\n",
	         name, was, went, name, bytes, why);
	ck_assert_msg(strstr(log, line) != NULL, "no line\n%sin the log:\n%s", line, log);
}

/* Restarts of a directory whose tiles were created on 3 pools (place_setup) and are to come
 * back from from_what (a snapshot, or the log alone): on 3 pools with another default
 * placement every tile is where it was; on 2 pools (default shard) the tiles that were on
 * pool 2 are placed by the policy, each logged once, the rest stay; on the plain
 * one-device backend every tile is on device 0, those not there before logged. Values
 * exact each time. */
static void place_restarts(fixture *fx)
{
	char log[16384], where[TA_WHERE_TEXT];
	place_reopen(fx, 3, "auto", log, sizeof(log));
	for (size_t i = 0; i < PLACE_TILES; i++) {
		ck_assert_str_eq(placement_of(fx, place_tiles[i].name, where, sizeof(where)),
		                 place_tiles[i].placed);
		place_check(fx, place_tiles[i].name, place_elems(i));
	}
	ck_assert_int_eq(count_lines_with(log, "placed by the default placement"), 0);
	fx_close(fx);

	place_reopen(fx, 2, "shard", log, sizeof(log));
	const char *on2[] = {"0", "1", "0:[0,2) 1:[2,4)", "0:[0,4) 1:[4,7)", "0:[0,3) 1:[3,5)"};
	for (size_t i = 0; i < PLACE_TILES; i++) {
		ck_assert_str_eq(placement_of(fx, place_tiles[i].name, where, sizeof(where)),
		                 on2[i]);
		place_check(fx, place_tiles[i].name, place_elems(i));
	}
	const char *gone = "placement: device 2 does not exist (devices 0..1)";
	expect_fallback(log, "on2", "2", on2[2], 32, gone);
	expect_fallback(log, "sh", place_tiles[3].placed, on2[3], 168, gone);
	expect_fallback(log, "sh2", place_tiles[4].placed, on2[4], 40, gone);
	ck_assert_int_eq(count_lines_with(log, "placed by the default placement"), 3);
	fx_close(fx);

	place_reopen(fx, 1, "", log, sizeof(log));
	const char *one = "placement: device 1 does not exist (the backend serves one device, 0)";
	const char *two = "placement: device 2 does not exist (the backend serves one device, 0)";
	for (size_t i = 0; i < PLACE_TILES; i++) {
		ck_assert_str_eq(placement_of(fx, place_tiles[i].name, where, sizeof(where)), "");
		place_check(fx, place_tiles[i].name, place_elems(i));
	}
	expect_fallback(log, "on1", "1", "0", 40, one);
	expect_fallback(log, "on2", "2", "0", 32, two);
	expect_fallback(log, "sh", place_tiles[3].placed, "0", 168, one);
	expect_fallback(log, "sh2", place_tiles[4].placed, "0", 40, one);
	ck_assert_int_eq(count_lines_with(log, "placed by the default placement"), 4);
	fx_close(fx);
}

/* A snapshot records where each tile lived: restarts put the tiles back there, or by the
 * default placement (logged) where this daemon lacks a device. */
START_TEST(test_placement_snapshot)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service_devices(&fx, 3, "");
	fx_open(&fx, TA_FSYNC_ALWAYS);
	place_setup(&fx);
	ok(snapshot(&fx));
	fx_close(&fx);
	ck_assert_int_eq(count_logs(fx.dir), 1); /* the empty log after the snapshot */
	place_restarts(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* The log alone (no snapshot was taken) records where each created tile went: the same
 * restarts as from a snapshot. */
START_TEST(test_placement_log)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service_devices(&fx, 3, "");
	fx_open(&fx, TA_FSYNC_ALWAYS);
	place_setup(&fx);
	fx_close(&fx);
	char snap[256];
	struct stat sb;
	fx_path(&fx, "snapshot.tas", snap, sizeof(snap));
	ck_assert_int_ne(stat(snap, &sb), 0);
	place_restarts(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* Reads the whole file at path into a malloc'd buffer (*n bytes). */
static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	long size = ftell(f);
	ck_assert_int_gt(size, 0);
	rewind(f);
	uint8_t *buf = malloc((size_t)size);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	*n = (size_t)size;
	return buf;
}

/* Writes n bytes to path (replacing it). */
static void spill(const char *path, const uint8_t *buf, size_t n)
{
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

/* A snapshot of the format before placements (TASNAP03) loads: its tiles are placed by the
 * default placement, without a line per tile. Made from a TASNAP04 snapshot of one rank-1
 * tile by cutting out its parts and sealing it again. */
START_TEST(test_placement_old_snapshot)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service_devices(&fx, 3, "");
	fx_open(&fx, TA_FSYNC_ALWAYS);
	create_placed(&fx, "old", 4, 0, "1");
	place_write(&fx, "old", 4);
	ok(snapshot(&fx));
	fx_close(&fx);
	char path[256];
	fx_path(&fx, "snapshot.tas", path, sizeof(path));
	size_t n = 0;
	uint8_t *snap = slurp(path, &n);
	ck_assert(memcmp(snap, "TASNAP04", 8) == 0);
	size_t parts_at = 20 + 2 + 3 + 16 + 8 + 8; /* header, name, owner..rank, extent, bytes */
	ck_assert_uint_eq(get_u32(snap + parts_at), 1);
	ck_assert_uint_eq(get_u32(snap + parts_at + 4), 1); /* device 1 */
	ck_assert_uint_eq(get_u64(snap + parts_at + 8), 0);
	ck_assert_uint_eq(get_u64(snap + parts_at + 16), 4);
	memmove(snap + parts_at, snap + parts_at + 24, n - parts_at - 24);
	n -= 24;
	memcpy(snap, "TASNAP03", 8);
	put_u32(snap + n - 4, sum32(snap, n - 4));
	spill(path, snap, n);
	free(snap);
	char log[16384], where[TA_WHERE_TEXT];
	place_reopen(&fx, 3, "2", log, sizeof(log));
	ck_assert_str_eq(placement_of(&fx, "old", where, sizeof(where)), "2");
	place_check(&fx, "old", 4);
	ck_assert_int_eq(count_lines_with(log, "placed by the default placement on"), 0);
	ck_assert_int_eq(count_lines_with(log, "a snapshot of an older format (TASNAP03"), 1);
	ok(snapshot(&fx)); /* a TASNAP04 one again, where the tile is now */
	fx_close(&fx);
	place_reopen(&fx, 3, "", log, sizeof(log));
	ck_assert_str_eq(placement_of(&fx, "old", where, sizeof(where)), "2");
	place_check(&fx, "old", 4);
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

/* A create Request for name (int64 [rows], every element fill) placed as placement says,
 * packed (malloc'd) into *out. */
static size_t pack_create(const char *name, int64_t rows, int64_t fill, const char *placement,
                          uint8_t **out)
{
	int64_t shape[1] = {rows};
	Tileatom__Array f = TILEATOM__ARRAY__INIT;
	f.dtype = TILEATOM__DTYPE__INT64;
	f.data.data = (uint8_t *)&fill;
	f.data.len = 8;
	Tileatom__CreateTileRequest c = TILEATOM__CREATE_TILE_REQUEST__INIT;
	c.name = (char *)name;
	c.dtype = TILEATOM__DTYPE__INT64;
	c.n_shape = 1;
	c.shape = shape;
	c.fill = &f;
	c.placement = (char *)placement;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 1;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &c;
	size_t n = protobuf_c_message_get_packed_size(&req.base);
	*out = malloc(n);
	ck_assert_ptr_nonnull(*out);
	ck_assert_uint_eq(protobuf_c_message_pack(&req.base, *out), n);
	return n;
}

/* Appends a record (seq, a public request, payload) to the log at path. */
static void append_record(const char *path, uint64_t seq, const uint8_t *payload, size_t len)
{
	uint8_t h[28];
	put_u32(h, (uint32_t)len);
	put_u64(h + 4, seq);
	put_u64(h + 12, (uint64_t)TA_OWNER_PUBLIC);
	put_u32(h + 20, sum32(payload, len));
	put_u32(h + 24, sum32(h, 24));
	FILE *f = fopen(path, "ab");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(h, 1, sizeof(h), f), sizeof(h));
	ck_assert_uint_eq(fwrite(payload, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

/* Elements 0..n-1 of name all equal v. */
static void expect_all(fixture *fx, const char *name, int64_t n, int64_t v)
{
	int64_t got[16];
	ck_assert_int_le(n, 16);
	read_i64(fx, name, got, (size_t)n);
	for (int64_t k = 0; k < n; k++)
		ck_assert_int_eq(got[k], v);
}

/* A log of the format before placements (TALOG004), whose creates hold the placement the
 * client asked for: replayed as asked ("1": on 1), and where that cannot be met here
 * ("shard:3" on 2 pools) by the default placement, logged; it is kept, new records go to a
 * TALOG005 log. */
START_TEST(test_placement_old_log)
{
	fixture fx;
	fx_mkdir(&fx);
	fx_service_devices(&fx, 2, "");
	fx_open(&fx, TA_FSYNC_ALWAYS);
	fx_close(&fx);
	char path[256];
	fx_path(&fx, "log-0000000000000001.tal", path, sizeof(path));
	size_t n = 0;
	uint8_t *log0 = slurp(path, &n);
	ck_assert_uint_eq(n, 8);
	ck_assert(memcmp(log0, "TALOG005", 8) == 0);
	spill(path, (const uint8_t *)"TALOG004", 8);
	free(log0);
	uint8_t *rec = NULL;
	size_t len = pack_create("v4", 5, 42, "shard:3", &rec);
	append_record(path, 1, rec, len);
	free(rec);
	len = pack_create("v4b", 3, -7, "1", &rec);
	append_record(path, 2, rec, len);
	free(rec);
	char log[16384], where[TA_WHERE_TEXT];
	place_reopen(&fx, 2, "shard", log, sizeof(log));
	ck_assert_str_eq(placement_of(&fx, "v4", where, sizeof(where)), "0:[0,3) 1:[3,5)");
	ck_assert_str_eq(placement_of(&fx, "v4b", where, sizeof(where)), "1");
	expect_all(&fx, "v4", 5, 42);
	expect_all(&fx, "v4b", 3, -7);
	expect_fallback(log, "v4", "shard:3", "0:[0,3) 1:[3,5)", 40,
	                "placement: cannot shard over 3 devices (the daemon serves 2)");
	ck_assert_int_eq(count_lines_with(log, "placed by the default placement"), 1);
	ck_assert_int_eq(count_lines_with(log, "a log of an older format (TALOG004"), 1);
	create_placed(&fx, "new", 2, 0, "1");
	fx_close(&fx);
	ck_assert_int_eq(count_logs(fx.dir), 2);
	char newer[256];
	fx_path(&fx, "log-0000000000000003.tal", newer, sizeof(newer));
	uint8_t *log3 = slurp(newer, &n);
	ck_assert(memcmp(log3, "TALOG005", 8) == 0);
	free(log3);
	place_reopen(&fx, 2, "shard", log, sizeof(log));
	ck_assert_str_eq(placement_of(&fx, "new", where, sizeof(where)), "1");
	expect_all(&fx, "v4", 5, 42);
	fx_close(&fx);
	fx_rmdir(&fx);
}
END_TEST

static Suite *persist_suite(void)
{
	Suite *s = suite_create("persist");
	TCase *tc = tcase_create("persist");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_settings);
	tcase_add_test(tc, test_replay);
	tcase_add_test(tc, test_batch_with_log);
	tcase_add_test(tc, test_private_owner);
	tcase_add_test(tc, test_dir_locked);
	tcase_add_test(tc, test_snapshot_without_data_dir);
	tcase_add_test(tc, test_lock_kinds);
	tcase_add_test(tc, test_dispatch_lock_choice);
	tcase_add_test(tc, test_disk_full_always);
	tcase_add_test(tc, test_disk_full_everysec);
	tcase_add_test(tc, test_buffer_bound);
	tcase_add_test(tc, test_run);
	tcase_add_test(tc, test_log_cut);
	tcase_add_test(tc, test_log_missing);
	tcase_add_test(tc, test_logmark_damage);
	tcase_add_test(tc, test_old_format);
	tcase_add_test(tc, test_logmark_follows);
	tcase_add_test(tc, test_snapshot_permission);
	suite_add_tcase(s, tc);
	TCase *place = tcase_create("placement");
	tcase_set_timeout(place, 60);
	tcase_add_test(place, test_placement_snapshot);
	tcase_add_test(place, test_placement_log);
	tcase_add_test(place, test_placement_old_snapshot);
	tcase_add_test(place, test_placement_old_log);
	suite_add_tcase(s, place);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(persist_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

/* check_tilemem.c: tile memory and listings, in-process: each tile counted as the memory
 * it really takes, tile records given back after a flood of destroys, paged listings (the
 * registry's cursor across creates and destroys, and ListTilesRequest through dispatch:
 * pages, limits, a bad cursor, an unpaged request too large for a frame), the host memory
 * check before an allocation (fake cgroup v1 and v2 limits and /proc/meminfo through
 * TILEATOM_HOSTMEM_ROOT) and an allocation cancelled by the shutdown. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#define _XOPEN_SOURCE 700
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dispatch.h"
#include "recpool.h"
#include "registry.h"
#include "ta_frame.h"
#include "ta_hostmem.h"
#include "tileatom.pb-c.h"

/* A CPU backend with 2 workers. */
static ta_backend *cpu_backend(void)
{
	ta_error err = {0};
	ta_backend *be = ta_cpu_backend_new(2, &err);
	ck_assert_msg(be != NULL, "%s", err.msg);
	return be;
}

/* A rank-1 shape. */
static ta_tile_shape shape1(ta_dtype dt, int64_t n)
{
	ta_tile_shape s;
	memset(&s, 0, sizeof(s));
	s.dtype = dt;
	s.rank = 1;
	s.shape[0] = n;
	return s;
}

/* Creates and publishes a one-element int32 tile owned by owner. */
static void create_as(ta_registry *reg, const char *name, ta_owner owner)
{
	ta_tile *t = NULL;
	ta_error err = {0};
	ta_tile_shape s = shape1(TA_DTYPE_I32, 1);
	ck_assert_msg(ta_registry_create_placed(reg, name, &s, owner, NULL, &t, &err) == TA_OK,
	              "%s", err.msg);
	ta_registry_publish(t);
	ta_tile_unref(t);
}

/* Removes a tile by name. */
static void remove_tile(ta_registry *reg, const char *name)
{
	ta_error err = {0};
	ck_assert_msg(ta_registry_remove(reg, name, NULL, &err) == TA_OK, "%s", err.msg);
}

/* ---- bookkeeping ------------------------------------------------------------------------ */

START_TEST(test_bookkeeping_exact)
{
	ta_backend *be = cpu_backend();
	ta_error err = {0};
	ta_registry *reg = ta_registry_new(be, 0, 0, &err);
	ta_tile *t = NULL;
	ta_tile_shape s = shape1(TA_DTYPE_I32, 1);
	ck_assert_int_eq(ta_registry_create(reg, "one", &s, &t, &err), TA_OK);
	ta_registry_publish(t);
	/* a 64-byte aligned request of 64 bytes: glibc gives 72 usable bytes, or 104 when the
	 * aligned chunk's tail was too small to split off (it depends on the heap's state, so
	 * on what ran before); AddressSanitizer's allocator (make distcheck) exactly 64. Each
	 * plus the 8-byte header rounds to the same 128-byte chunk, so the footprint below is
	 * exact whichever it was */
	size_t usable = malloc_usable_size(t->mem);
	ck_assert_msg(usable >= 64 && usable + sizeof(size_t) <= 128, "usable %zu", usable);
	ta_tile_unref(t);
	uint32_t tiles = 0;
	uint64_t bytes = 0;
	ta_registry_stats(reg, &tiles, &bytes);
	/* the record's slot 256 (sizeof(ta_tile) 248 rounded to 64), the hash share 16 (two
	 * bucket pointers), the heap chunk 192 (72 or 104 usable + 8 of header rounded to 64, and
	 * the 64 of alignment slack before the next chunk): 464 bytes, where 260 were counted */
	ck_assert_uint_eq(sizeof(ta_tile), 248);
	ck_assert_uint_eq(tiles, 1);
	ck_assert_uint_eq(bytes, 464);
	ck_assert_uint_eq(ta_registry_tile_cost(reg, 4), 464);
	/* 1000 float64: 8000 bytes, a chunk of 8000 + 8 usable + 8 rounded to 8064, + 64 */
	s = shape1(TA_DTYPE_F64, 1000);
	ck_assert_int_eq(ta_registry_create(reg, "big", &s, &t, &err), TA_OK);
	ta_registry_publish(t);
	ta_tile_unref(t);
	ta_registry_stats(reg, &tiles, &bytes);
	ck_assert_uint_eq(bytes, 464 + 256 + 16 + 8128);
	remove_tile(reg, "one");
	remove_tile(reg, "big");
	ta_registry_stats(reg, &tiles, &bytes);
	ck_assert_uint_eq(tiles, 0);
	ck_assert_uint_eq(bytes, 0);
	ta_registry_free(reg);
	ta_backend_destroy(be);
}
END_TEST

START_TEST(test_records_given_back)
{
	ta_backend *be = cpu_backend();
	ta_error err = {0};
	ta_registry *reg = ta_registry_new(be, 0, 0, &err);
	ck_assert_uint_eq(ta_registry_record_bytes(reg), 0);
	enum { N = 20000 };
	char name[32];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "r%05d", i);
		create_as(reg, name, TA_OWNER_PUBLIC);
	}
	/* 20,000 records of 256 bytes: 79 slabs of 64 KiB (256 records each) */
	ck_assert_uint_eq(ta_registry_record_bytes(reg), 79 * TA_RECPOOL_SLAB_BYTES);
	/* a thread's cached lookup of a tile whose slab goes back to the system */
	ta_tile_cache cache;
	memset(&cache, 0, sizeof(cache));
	ta_tile *t = NULL;
	ck_assert_int_eq(ta_registry_get_cached(reg, &cache, "r10000", TA_OWNER_ANY, &t, &err),
	                 TA_OK);
	ta_tile_unref(t);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "r%05d", i);
		remove_tile(reg, name);
	}
	/* every slab is empty: all but TA_RECPOOL_KEEP_EMPTY of them given back */
	ck_assert_uint_eq(ta_registry_record_bytes(reg),
	                  TA_RECPOOL_KEEP_EMPTY * TA_RECPOOL_SLAB_BYTES);
	/* the stale cache reads the given-back record (zeros now) and misses */
	ck_assert_int_eq(ta_registry_get_cached(reg, &cache, "r10000", TA_OWNER_ANY, &t, &err),
	                 TA_NOT_FOUND);
	/* records come back from the 2 kept slabs and then from 2 given-back ones */
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "s%05d", i);
		create_as(reg, name, TA_OWNER_PUBLIC);
	}
	ck_assert_uint_eq(ta_registry_record_bytes(reg), 4 * TA_RECPOOL_SLAB_BYTES);
	ck_assert_int_eq(ta_registry_get(reg, "s00999", &t, &err), TA_OK);
	ck_assert_str_eq(t->name, "s00999");
	ta_tile_unref(t);
	ta_registry_free(reg);
	ta_backend_destroy(be);
}
END_TEST

/* ---- paged listings ---------------------------------------------------------------------- */

/* Lists pages of limit after cursor until the end into names (cap entries; returns the
 * count), calling between(page index) after each page. */
static size_t list_all_pages(ta_registry *reg, ta_owner who, size_t limit,
                             char (*names)[TA_NAME_MAX + 1], size_t cap, size_t *pages,
                             void (*between)(ta_registry *, size_t))
{
	char cursor[TA_NAME_MAX + 1] = "";
	size_t n = 0;
	*pages = 0;
	for (;;) {
		ta_tile_info *infos = NULL;
		size_t k = 0;
		bool more = false;
		ta_error err = {0};
		ck_assert_int_eq(
		    ta_registry_list_page_as(reg, who, cursor, limit, &infos, &k, &more, &err),
		    TA_OK);
		ck_assert_uint_le(k, limit);
		(*pages)++;
		for (size_t i = 0; i < k; i++) {
			ck_assert_uint_lt(n, cap);
			snprintf(names[n++], TA_NAME_MAX + 1, "%s", infos[i].name);
		}
		if (k)
			snprintf(cursor, sizeof(cursor), "%s", infos[k - 1].name);
		free(infos);
		if (!more)
			return n;
		ck_assert_uint_eq(k, limit); /* a page short of the limit is the last */
		if (between)
			between(reg, *pages);
	}
}

/* Changes between the first and second page of test_list_pages. */
static void change_after_first_page(ta_registry *reg, size_t page)
{
	if (page != 1)
		return;
	remove_tile(reg, "n0050");                 /* listed already */
	remove_tile(reg, "n0500");                 /* not listed yet */
	create_as(reg, "a-new", TA_OWNER_PUBLIC);  /* sorts before the cursor */
	create_as(reg, "n0999z", TA_OWNER_PUBLIC); /* sorts after it */
}

START_TEST(test_list_pages)
{
	ta_backend *be = cpu_backend();
	ta_error err = {0};
	ta_registry *reg = ta_registry_new(be, 0, 0, &err);
	enum { N = 1000 };
	char name[32];
	for (int i = 0; i < N; i++) { /* in a scattered order */
		snprintf(name, sizeof(name), "n%04d", (i * 367) % N);
		create_as(reg, name, TA_OWNER_PUBLIC);
	}
	create_as(reg, "p-mine", 1000); /* private to uid 1000 */
	static char names[N + 8][TA_NAME_MAX + 1];
	size_t pages = 0;
	/* 1000 public tiles in pages of 64: 16 pages, every name once, in order */
	size_t n = list_all_pages(reg, 2000, 64, names, N + 8, &pages, NULL);
	ck_assert_uint_eq(n, N);
	ck_assert_uint_eq(pages, 16);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "n%04d", i);
		ck_assert_str_eq(names[i], name);
	}
	/* the owner sees its private tile too, in its place */
	n = list_all_pages(reg, 1000, 300, names, N + 8, &pages, NULL);
	ck_assert_uint_eq(n, N + 1);
	ck_assert_uint_eq(pages, 4);
	ck_assert_str_eq(names[N], "p-mine");
	/* a page size over the count: one page, nothing more */
	n = list_all_pages(reg, 2000, 5000, names, N + 8, &pages, NULL);
	ck_assert_uint_eq(n, N);
	ck_assert_uint_eq(pages, 1);

	/* creates and destroys between pages: every tile there for the whole scan listed once;
	 * this implementation also gives n0050 (listed before it went) and n0999z (created
	 * after the cursor), and not n0500 (gone before its page) or a-new (before the cursor) */
	n = list_all_pages(reg, 2000, 100, names, N + 8, &pages, change_after_first_page);
	ck_assert_uint_eq(pages, 10);
	ck_assert_uint_eq(n, N);
	size_t k = 0;
	for (int i = 0; i < N; i++) {
		if (i == 500)
			continue;
		snprintf(name, sizeof(name), "n%04d", i);
		ck_assert_str_eq(names[k++], name);
	}
	ck_assert_str_eq(names[k++], "n0999z");
	ck_assert_uint_eq(k, n);

	/* limit 0 is 1; a cursor after every name: an empty last page */
	ta_tile_info *infos = NULL;
	bool more = true;
	ck_assert_int_eq(ta_registry_list_page_as(reg, 2000, "", 0, &infos, &k, &more, &err),
	                 TA_OK);
	ck_assert_uint_eq(k, 1);
	ck_assert_str_eq(infos[0].name, "a-new");
	ck_assert(more);
	free(infos);
	ck_assert_int_eq(ta_registry_list_page_as(reg, 2000, "zzz", 10, &infos, &k, &more, &err),
	                 TA_OK);
	ck_assert_uint_eq(k, 0);
	ck_assert_ptr_null(infos);
	ck_assert(!more);
	ta_registry_free(reg);
	ta_backend_destroy(be);
}
END_TEST

/* Runs a list request through dispatch (max_frame of svc); returns the response. */
static Tileatom__Response *dispatch_list(ta_service *svc, bool paged, const char *cursor,
                                         uint32_t limit)
{
	Tileatom__ListTilesRequest l = TILEATOM__LIST_TILES_REQUEST__INIT;
	l.paged = paged;
	l.cursor = (char *)cursor;
	l.limit = limit;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = 7;
	req.body_case = TILEATOM__REQUEST__BODY_LIST;
	req.list = &l;
	size_t n = protobuf_c_message_get_packed_size(&req.base);
	uint8_t *buf = malloc(n + 1);
	ck_assert_ptr_nonnull(buf);
	protobuf_c_message_pack(&req.base, buf);
	ta_reply reply;
	ta_dispatch_frame(svc, buf, n, &reply);
	free(buf);
	ck_assert_ptr_nonnull(reply.frame);
	ck_assert_uint_le(reply.len - TA_FRAME_HEADER, svc->max_frame);
	Tileatom__Response *resp = tileatom__response__unpack(NULL, reply.len - TA_FRAME_HEADER,
	                                                      reply.frame + TA_FRAME_HEADER);
	free(reply.frame);
	ck_assert_ptr_nonnull(resp);
	return resp;
}

START_TEST(test_dispatch_list_pages)
{
	ta_backend *be = cpu_backend();
	ta_error err = {0};
	ta_registry *reg = ta_registry_new(be, 0, 0, &err);
	ta_service svc;
	ta_service_init(&svc, be, reg, 4096); /* a page fits (4096 - 256 - 66) / 130 = 29 */
	char name[80];
	for (int i = 0; i < 100; i++) { /* 64-character names */
		snprintf(name, sizeof(name), "t%063d", i);
		create_as(reg, name, TA_OWNER_PUBLIC);
	}
	/* the daemon's page: as many as surely fit the frame */
	Tileatom__Response *resp = dispatch_list(&svc, true, "", 0);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->list->n_tiles, 29);
	snprintf(name, sizeof(name), "t%063d", 28);
	ck_assert_str_eq(resp->list->next_cursor, name);
	tileatom__response__free_unpacked(resp, NULL);
	/* every page of 10: all 100 names in order, the last page with no next cursor */
	char cursor[80] = "";
	int seen = 0, pages = 0;
	do {
		resp = dispatch_list(&svc, true, cursor, 10);
		ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
		ck_assert_uint_eq(resp->list->n_tiles, 10);
		for (size_t i = 0; i < resp->list->n_tiles; i++) {
			snprintf(name, sizeof(name), "t%063d", seen++);
			ck_assert_str_eq(resp->list->tiles[i]->name, name);
			ck_assert_uint_eq(resp->list->tiles[i]->bytes, 4);
		}
		snprintf(cursor, sizeof(cursor), "%s", resp->list->next_cursor);
		pages++;
		tileatom__response__free_unpacked(resp, NULL);
	} while (cursor[0]);
	ck_assert_int_eq(seen, 100);
	ck_assert_int_eq(pages, 10);
	/* a cursor that is no name */
	resp = dispatch_list(&svc, true, "a b", 10);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__INVALID_ARGUMENT);
	ck_assert_str_eq(resp->message,
	                 "list: cursor 'a b' is not one this daemon gives (a next_cursor, or \"\" "
	                 "to start)");
	tileatom__response__free_unpacked(resp, NULL);
	/* a client that does not page: a clear refusal, never a cut list (75 bytes a tile) */
	resp = dispatch_list(&svc, false, "", 0);
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__RESOURCE_EXHAUSTED);
	ck_assert_int_eq(resp->body_case, TILEATOM__RESPONSE__BODY__NOT_SET);
	ck_assert_str_eq(resp->message,
	                 "list: the 100 tiles need 7500 bytes, over the frame limit of 4096 bytes "
	                 "(max_frame): this client lists in one response; a client that pages "
	                 "listings (ListTilesRequest.paged) lists them all");
	tileatom__response__free_unpacked(resp, NULL);
	for (int i = 5; i < 100; i++) {
		snprintf(name, sizeof(name), "t%063d", i);
		remove_tile(reg, name);
	}
	resp = dispatch_list(&svc, false, "", 0); /* what fits still comes whole */
	ck_assert_int_eq(resp->status, TILEATOM__STATUS__OK);
	ck_assert_uint_eq(resp->list->n_tiles, 5);
	ck_assert_str_eq(resp->list->next_cursor, "");
	tileatom__response__free_unpacked(resp, NULL);
	ta_registry_free(reg);
	ta_backend_destroy(be);
}
END_TEST

/* ---- host memory check ------------------------------------------------------------------- */

/* The fake root of a test (TILEATOM_HOSTMEM_ROOT). */
static char fake_root[64];

/* Writes text to fake_root/rel, making the directories on the way. */
static void put(const char *rel, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", fake_root, rel);
	for (char *p = path + strlen(fake_root) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		ck_assert_msg(mkdir(path, 0700) == 0 || errno == EEXIST, "mkdir %s", path);
		*p = '/';
	}
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

/* Makes an empty fake root and points TILEATOM_HOSTMEM_ROOT at it. */
static void fake_begin(void)
{
	snprintf(fake_root, sizeof(fake_root), "/tmp/ta_hostmem.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(fake_root));
	setenv(TA_HOSTMEM_ROOT_ENV, fake_root, 1);
}

/* nftw callback: removes one entry. */
static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Removes the fake root and unsets the variable. */
static void fake_end(void)
{
	unsetenv(TA_HOSTMEM_ROOT_ENV);
	nftw(fake_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Allocates bytes on a fresh CPU backend (a fresh budget: the limits are read); returns
 * the status, with the message in err. */
static ta_status try_alloc(size_t bytes, ta_error *err)
{
	ta_backend *be = cpu_backend();
	void *mem = NULL;
	ta_status st = ta_backend_tile_alloc(be, bytes, &mem, err);
	if (st == TA_OK)
		ta_backend_tile_free(be, mem);
	else
		ck_assert_ptr_null(mem);
	ta_backend_destroy(be);
	return st;
}

/* A machine of 64 GiB with 60 GiB available. */
static const char big_meminfo[] = "MemTotal:       67108864 kB\n"
                                  "MemFree:        60000000 kB\n"
                                  "MemAvailable:   62914560 kB\n";

START_TEST(test_hostmem_cgroup_v1)
{
	fake_begin();
	put("proc/meminfo", big_meminfo);
	put("proc/self/cgroup", "5:cpu,cpuacct:/job/step\n4:memory:/job/step\n0::/\n");
	/* the limit is on the parent; the process's own cgroup and the root have none */
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/memory/job/memory.limit_in_bytes", "268435456\n");
	put("sys/fs/cgroup/memory/job/memory.usage_in_bytes", "0\n");
	put("sys/fs/cgroup/memory/job/step/memory.limit_in_bytes", "9223372036854771712\n");
	ta_error err = {0};
	ck_assert_int_eq(try_alloc(200u << 20, &err), TA_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(err.msg, "cpu backend: 209715200 bytes of tile memory do not fit: "
	                          "268435456 bytes are available (cgroup v1 /job "
	                          "memory.limit_in_bytes), less a margin of 67108864 bytes "
	                          "(1/16 of 268435456, at least 67108864)");
	ck_assert_int_eq(try_alloc(1u << 20, &err), TA_OK);
	/* a small tile is checked too: 40 MiB left are under the margin */
	put("sys/fs/cgroup/memory/job/memory.usage_in_bytes", "226492416\n");
	ck_assert_int_eq(try_alloc(4096, &err), TA_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(err.msg, "cpu backend: 4096 bytes of tile memory do not fit: 41943040 "
	                          "bytes are available (cgroup v1 /job memory.limit_in_bytes), "
	                          "less a margin of 67108864 bytes (1/16 of 268435456, at least "
	                          "67108864)");
	fake_end();
}
END_TEST

START_TEST(test_hostmem_cgroup_v2_and_meminfo)
{
	fake_begin();
	put("proc/meminfo", big_meminfo);
	put("proc/self/cgroup", "0::/svc/inner\n");
	put("sys/fs/cgroup/svc/memory.max", "1073741824\n");
	put("sys/fs/cgroup/svc/memory.current", "104857600\n");
	put("sys/fs/cgroup/svc/inner/memory.max", "max\n");
	put("sys/fs/cgroup/svc/inner/memory.current", "104857600\n");
	ta_error err = {0};
	ck_assert_int_eq(try_alloc(900u << 20, &err), TA_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(err.msg, "cpu backend: 943718400 bytes of tile memory do not fit: "
	                          "968884224 bytes are available (cgroup v2 /svc memory.max), "
	                          "less a margin of 67108864 bytes (1/16 of 1073741824, at "
	                          "least 67108864)");
	/* the budget: a reading grants half of what is left after the tile that caused it
	 * ((968884224 - 67108864 - 8 MiB) / 2 = 446693376); later creates draw from it without
	 * reading, and one it does not cover reads again */
	ta_backend *be = cpu_backend();
	void *mem[3];
	ck_assert_int_eq(ta_backend_tile_alloc(be, 8u << 20, &mem[0], &err), TA_OK);
	put("sys/fs/cgroup/svc/memory.current", "1000000000\n"); /* nearly full now */
	ck_assert_int_eq(ta_backend_tile_alloc(be, 16u << 20, &mem[1], &err), TA_OK);
	ck_assert_int_eq(ta_backend_tile_alloc(be, 430u << 20, &mem[2], &err),
	                 TA_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(err.msg, "cpu backend: 450887680 bytes of tile memory do not fit: "
	                          "73741824 bytes are available (cgroup v2 /svc memory.max), "
	                          "less a margin of 67108864 bytes (1/16 of 1073741824, at "
	                          "least 67108864)");
	ta_backend_tile_free(be, mem[0]);
	ta_backend_tile_free(be, mem[1]);
	ta_backend_destroy(be);

	/* the case: a 24 GB create on a 24 GiB machine with the size limits off */
	put("proc/self/cgroup", "0::/\n");
	put("proc/meminfo", "MemTotal:       24684084 kB\n"
	                    "MemAvailable:   23535156 kB\n");
	ck_assert_int_eq(try_alloc((size_t)24000000000u, &err), TA_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(err.msg, "cpu backend: 24000000000 bytes of tile memory do not fit: "
	                          "24099999744 bytes are available (MemAvailable), less a margin "
	                          "of 1579781376 bytes (1/16 of 25276502016, at least 67108864)");
	fake_end();
}
END_TEST

START_TEST(test_alloc_cancelled)
{
	ta_backend *be = cpu_backend();
	ta_error err = {0};
	void *mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 4096, &mem, &err), TA_OK);
	ta_backend_tile_free(be, mem);
	ck_assert(!ta_backend_allocs_cancelled(be));
	ta_backend_cancel_allocs(be);
	ck_assert(ta_backend_allocs_cancelled(be));
	mem = NULL;
	ck_assert_int_eq(ta_backend_tile_alloc(be, 4096, &mem, &err), TA_UNAVAILABLE);
	ck_assert_ptr_null(mem);
	ck_assert_str_eq(err.msg, "the daemon is shutting down");
	ta_backend_destroy(be);
}
END_TEST

/* The suite. */
static Suite *tilemem_suite(void)
{
	Suite *s = suite_create("tilemem");
	TCase *tc = tcase_create("registry");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bookkeeping_exact);
	tcase_add_test(tc, test_records_given_back);
	tcase_add_test(tc, test_list_pages);
	tcase_add_test(tc, test_dispatch_list_pages);
	suite_add_tcase(s, tc);
	tc = tcase_create("hostmem");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_hostmem_cgroup_v1);
	tcase_add_test(tc, test_hostmem_cgroup_v2_and_meminfo);
	tcase_add_test(tc, test_alloc_cancelled);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(tilemem_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

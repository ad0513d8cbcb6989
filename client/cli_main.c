/* cli_main.c: tileatom-cli, the command-line client of tileatomd: global options and the
 * subcommands ping, stats, snapshot, create, ls, info, rm, get, the single-element atomics
 * (add sub min max xchg and or xor cas) and load/store (hist: cli_hist.c). Every command that
 * prints data takes --json: one JSON value and a newline instead of the text. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Default connect timeout in milliseconds. */
#define CLI_CONNECT_TIMEOUT_MS 5000
/* Largest read per request of `get` (bytes); bigger tiles are read in row blocks. */
#define CLI_GET_CHUNK_BYTES (16u << 20)

static const char global_usage[] =
    "Usage: tileatom-cli [-s SOCKET] [-t MS] [--auth-file FILE] COMMAND [ARGS...]\n"
    "\n"
    "Talks to tileatomd, the GPU atomics service.\n"
    "\n"
    "Global options:\n"
    "  -s, --socket SOCKET   daemon address: a Unix socket path or HOST:PORT\n"
    "                        (default: $TILEATOM_SOCKET, else the daemon's default path)\n"
    "  -t, --timeout MS      connect timeout in milliseconds (default 5000)\n"
    "      --auth-file FILE  the daemon's secret, for TCP daemons that require\n"
    "                        authentication (default: $TILEATOM_AUTH_FILE)\n"
    "  -h, --help            show this help\n"
    "  -V, --version         show the version\n"
    "\n"
    "Commands:\n"
    "  ping                               check that the daemon answers\n"
    "  stats                              daemon statistics and per-request counters\n"
    "  snapshot                           save every tile and compact the log (--data-dir)\n"
    "  create NAME --dtype DTYPE --shape D0[,D1...] [--fill V] [--private] [--device P]\n"
    "  ls                                 list tiles\n"
    "  info NAME                          describe a tile\n"
    "  rm NAME                            destroy a tile\n"
    "  get NAME                           print a tile's values\n"
    "  hist NAME [FILE] [--range LO:HI]   histogram numbers into a 1-D tile\n"
    "  %s NAME INDEX VALUE\n"
    "                                     atomic op on one element; prints the old value\n"
    "  cas NAME INDEX EXPECTED DESIRED    compare-and-swap; exit 0 swapped, 3 not\n"
    "  load NAME INDEX                    atomic load of one element\n"
    "  store NAME INDEX VALUE             atomic store to one element\n"
    "\n"
    "Ops take --sem %s and --scope %s.\n"
    "Every command that prints data takes --json (one JSON value per run).\n"
    "INDEX is a flat row-major index or comma-separated coordinates.\n"
    "Run 'tileatom-cli COMMAND --help' for a command's options.\n";

/* Which names name_list joins. */
typedef enum name_sort {
	NAMES_SEM,   /* the sems a request of kind (running op) accepts (all: TILEATOM_REQ_NONE) */
	NAMES_SCOPE, /* every scope */
	NAMES_RMW    /* the RMW ops but cas; exch as xchg (the shell tour's; both parse) */
} name_sort;

/* Writes the names of one sort that the library knows (until its name function says "?")
 * joined by sep into buf (n bytes); returns buf. */
static const char *name_list(char *buf, size_t n, const char *sep, name_sort sort,
                             tileatom_request_kind kind, tileatom_op op)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = sort == NAMES_RMW ? TILEATOM_OP_NONE + 1 : 0;; i++) {
		const char *name = sort == NAMES_SEM       ? tileatom_sem_name((tileatom_sem)i)
		                   : sort == NAMES_SCOPE   ? tileatom_scope_name((tileatom_scope)i)
		                   : i == TILEATOM_OP_EXCH ? "xchg"
		                                           : tileatom_op_name((tileatom_op)i);
		if (strcmp(name, "?") == 0)
			return buf;
		bool skip = sort == NAMES_SEM ? kind != TILEATOM_REQ_NONE &&
		                                    !tileatom_sem_allowed(kind, op, (tileatom_sem)i)
		                              : sort == NAMES_RMW && i == TILEATOM_OP_CAS;
		if (!skip && used < n)
			used +=
			    (size_t)snprintf(buf + used, n - used, "%s%s", used ? sep : "", name);
	}
}

/* Prints the global usage, with the op, sem and scope names from the library. */
static void print_usage(FILE *out)
{
	char ops[128], sems[128], scopes[128];
	fprintf(out, global_usage,
	        name_list(ops, sizeof ops, "|", NAMES_RMW, TILEATOM_REQ_NONE, TILEATOM_OP_NONE),
	        name_list(sems, sizeof sems, "|", NAMES_SEM, TILEATOM_REQ_NONE, TILEATOM_OP_NONE),
	        name_list(scopes, sizeof scopes, "|", NAMES_SCOPE, TILEATOM_REQ_NONE,
	                  TILEATOM_OP_NONE));
}

/* The option of the commands whose only option is --json. */
static const cli_option json_opt[] = {{"json", false}};

/* Formats a shape as "D0,D1,...". */
static void shape_text(const int64_t *shape, int rank, char *buf, size_t n)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int a = 0; a < rank && used < n; a++)
		used +=
		    (size_t)snprintf(buf + used, n - used, "%s%" PRId64, a ? "," : "", shape[a]);
}

/* ---- simple commands ---------------------------------------------------------------- */

static const char ping_usage[] =
    "Usage: tileatom-cli [-s SOCKET] ping [--json]\n"
    "Checks that tileatomd answers; prints its version, backend and the round-trip time\n"
    "(--json: {\"version\":...,\"backend\":...,\"rtt_ms\":...}).\n";
static int cmd_ping(cli_call *k)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int st = tileatom_ping(k->c, &k->err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (st != TILEATOM_OK)
		return cli_lib_error(k);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	if (!k->a.value[0]) {
		printf("pong from tileatomd %s (backend %s) in %.3f ms\n",
		       tileatom_server_version(k->c), tileatom_server_backend(k->c), ms);
		return CLI_EXIT_OK;
	}
	char ms_text[32]; /* the same 3 decimals as the text output */
	snprintf(ms_text, sizeof(ms_text), "%.3f", ms);
	json_object *o = json_object_new_object();
	bool ok =
	    cli_json_add(o, "version", json_object_new_string(tileatom_server_version(k->c))) &&
	    cli_json_add(o, "backend", json_object_new_string(tileatom_server_backend(k->c))) &&
	    cli_json_add(o, "rtt_ms", json_object_new_double_s(ms, ms_text));
	return cli_json_print("ping", cli_json_done(o, ok));
}

/* The JSON of stats: the daemon's facts and totals, "devices": [one object per device],
 * and "kinds": {KIND: counters}. */
static json_object *stats_json(const tileatom_stats_info *s, const tileatom_kind_stats *k,
                               size_t nk, const tileatom_device_stats *d, size_t nd)
{
	json_object *o = json_object_new_object();
	bool ok = cli_json_add(o, "backend", json_object_new_string(s->backend)) &&
	          cli_json_add(o, "device", json_object_new_string(s->device));
	if (ok && s->device_memory)
		ok = cli_json_add(o, "device_memory", json_object_new_uint64(s->device_memory));
	if (ok && s->compute_capability[0])
		ok = cli_json_add(o, "compute_capability",
		                  json_object_new_string(s->compute_capability));
	ok = ok && cli_json_add(o, "tiles", json_object_new_uint64(s->tiles)) &&
	     cli_json_add(o, "tile_bytes", json_object_new_uint64(s->tile_bytes)) &&
	     cli_json_add(o, "requests", json_object_new_uint64(s->requests)) &&
	     cli_json_add(o, "errors", json_object_new_uint64(s->errors)) &&
	     cli_json_add(o, "connections", json_object_new_uint64(s->connections)) &&
	     cli_json_add(o, "elements", json_object_new_uint64(s->elements));
	json_object *devs = ok ? json_object_new_array() : NULL;
	ok = ok && cli_json_add(o, "devices", devs);
	for (size_t i = 0; ok && i < nd; i++) {
		json_object *e = json_object_new_object();
		ok = cli_json_add(devs, NULL, e) &&
		     cli_json_add(e, "device", json_object_new_uint64(d[i].device)) &&
		     cli_json_add(e, "memory_used", json_object_new_uint64(d[i].memory_used)) &&
		     cli_json_add(e, "memory_total", json_object_new_uint64(d[i].memory_total)) &&
		     cli_json_add(e, "tiles", json_object_new_uint64(d[i].tiles)) &&
		     cli_json_add(e, "tile_bytes", json_object_new_uint64(d[i].tile_bytes)) &&
		     cli_json_add(e, "requests", json_object_new_uint64(d[i].requests)) &&
		     cli_json_add(e, "failed", json_object_new_boolean(d[i].failed)) &&
		     cli_json_add(e, "failure", json_object_new_string(d[i].failure));
	}
	/* the finite upper bounds (the same for every kind) */
	ok = ok && cli_json_add(o, "latency_le_ns",
	                        cli_json_u64s(nk ? k[0].le_ns : NULL, nk ? k[0].nbuckets - 1 : 0));
	json_object *kinds = ok ? json_object_new_object() : NULL;
	ok = ok && cli_json_add(o, "kinds", kinds);
	for (size_t i = 0; ok && i < nk; i++) {
		json_object *e = json_object_new_object();
		ok = cli_json_add(kinds, k[i].kind, e) &&
		     cli_json_add(e, "requests", json_object_new_uint64(k[i].requests)) &&
		     cli_json_add(e, "errors", json_object_new_uint64(k[i].errors)) &&
		     cli_json_add(e, "elements", json_object_new_uint64(k[i].elements)) &&
		     cli_json_add(e, "bytes_in", json_object_new_uint64(k[i].bytes_in)) &&
		     cli_json_add(e, "bytes_out", json_object_new_uint64(k[i].bytes_out)) &&
		     cli_json_add(e, "latency_ns", json_object_new_uint64(k[i].latency_ns)) &&
		     cli_json_add(e, "latency_buckets", cli_json_u64s(k[i].bucket, k[i].nbuckets));
	}
	return cli_json_done(o, ok);
}

static const char stats_usage[] =
    "Usage: tileatom-cli [-s SOCKET] stats [--json]\n"
    "Prints the daemon's statistics, one 'key: value' per line (device_memory and\n"
    "compute_capability only on a GPU), then a table of the request kinds served so\n"
    "far: REQUEST REQUESTS ERRORS ELEMENTS BYTES_IN BYTES_OUT MEAN_US (tab-separated;\n"
    "MEAN_US is - unless the daemon times requests, which it does with --metrics).\n"
    "These are the numbers tileatomd --metrics serves. One line per device the daemon\n"
    "serves ('device N: memory_used B memory_total B tiles T tile_bytes B requests R\n"
    "failed F', F 1 for a device that can no longer serve, then ' cause: TEXT';\n"
    "memory_total 0 on a CPU pool). --json: one object with every device under\n"
    "\"devices\" and every kind under \"kinds\", each with its latency histogram\n"
    "(requests per bucket, the buckets' upper bounds in \"latency_le_ns\", the last\n"
    "bucket unbounded).\n";
static int cmd_stats(cli_call *k)
{
	tileatom_stats_info s;
	tileatom_kind_stats *kinds = NULL;
	tileatom_device_stats *devs = NULL;
	size_t nk = 0, nd = 0;
	int rc = CLI_EXIT_OK;
	if (tileatom_stats_kinds(k->c, &s, &kinds, &nk, &k->err) != TILEATOM_OK ||
	    tileatom_stats_devices(k->c, &devs, &nd, &k->err) != TILEATOM_OK) {
		rc = cli_lib_error(k);
	} else if (k->a.value[0]) {
		rc = cli_json_print("stats", stats_json(&s, kinds, nk, devs, nd));
	} else {
		printf("backend: %s\ndevice: %s\n", s.backend, s.device);
		if (s.device_memory)
			printf("device_memory: %" PRIu64 "\n", s.device_memory);
		if (s.compute_capability[0])
			printf("compute_capability: %s\n", s.compute_capability);
		printf("tiles: %" PRIu32 "\ntile_bytes: %" PRIu64 "\nrequests: %" PRIu64
		       "\nerrors: %" PRIu64 "\nconnections: %" PRIu32 "\nelements: %" PRIu64 "\n",
		       s.tiles, s.tile_bytes, s.requests, s.errors, s.connections, s.elements);
		for (size_t i = 0; i < nd; i++)
			printf("device %" PRIu32 ": memory_used %" PRIu64 " memory_total %" PRIu64
			       " tiles %" PRIu32 " tile_bytes %" PRIu64 " requests %" PRIu64
			       " failed %d%s%s\n",
			       devs[i].device, devs[i].memory_used, devs[i].memory_total,
			       devs[i].tiles, devs[i].tile_bytes, devs[i].requests,
			       devs[i].failed ? 1 : 0, devs[i].failed ? " cause: " : "",
			       devs[i].failed ? devs[i].failure : "");
		printf("\nREQUEST\tREQUESTS\tERRORS\tELEMENTS\tBYTES_IN\tBYTES_OUT\tMEAN_US\n");
		for (size_t i = 0; i < nk; i++) {
			if (kinds[i].requests == 0)
				continue;
			uint64_t timed = 0; /* requests in the histogram (timing is optional) */
			for (int b = 0; b < kinds[i].nbuckets; b++)
				timed += kinds[i].bucket[b];
			char mean[32] = "-";
			if (timed > 0)
				snprintf(mean, sizeof(mean), "%.1f",
				         (double)kinds[i].latency_ns / 1e3 / (double)timed);
			printf("%s\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64
			       "\t%s\n",
			       kinds[i].kind, kinds[i].requests, kinds[i].errors, kinds[i].elements,
			       kinds[i].bytes_in, kinds[i].bytes_out, mean);
		}
	}
	tileatom_free(kinds);
	tileatom_free(devs);
	return rc;
}

static const char snapshot_usage[] =
    "Usage: tileatom-cli [-s SOCKET] snapshot\n"
    "Asks the daemon (started with --data-dir) to write a snapshot "
    "of every tile\nand to remove the log it makes obsolete.\n";
static int cmd_snapshot(cli_call *k)
{
	tileatom_snapshot_info s;
	if (tileatom_snapshot(k->c, &s, &k->err) != TILEATOM_OK)
		return cli_lib_error(k);
	printf("snapshot: %" PRIu32 " tiles, %" PRIu64 " bytes, through record %" PRIu64
	       "; %" PRIu64 " bytes of log removed\n",
	       s.tiles, s.bytes, s.seq, s.log_removed);
	return CLI_EXIT_OK;
}

static const char create_usage[] =
    "Usage: tileatom-cli [-s SOCKET] create NAME --dtype DTYPE --shape D0[,D1...] "
    "[--fill V] [--private] [--device P]\n"
    "Creates a tile. DTYPE: int32 uint32 int64 uint64 float32 float64 float16 "
    "bfloat16.\n"
    "Up to 4 axes; every element starts at V (default 0).\n"
    "--private: only this identity may use it (your uid over the Unix socket; over\n"
    "TCP, whoever holds the daemon's auth secret).\n"
    "--device P: where it lives on a daemon serving several devices: a device N, auto\n"
    "(most free memory), shard (first axis split over every device) or shard:N\n"
    "(default: the daemon's --placement).\n";
static const cli_option create_opts[] = {
    {"dtype", true}, {"shape", true}, {"fill", true}, {"private", false}, {"device", true}};
static int cmd_create(cli_call *k)
{
	const cli_args *a = &k->a;
	if (!a->value[0] || !a->value[1]) {
		cli_error("create: --dtype and --shape are required (see 'create --help')");
		return CLI_EXIT_USAGE;
	}
	tileatom_dtype dtype = tileatom_dtype_parse(a->value[0]);
	if (!tileatom_dtype_is_int(dtype) && !tileatom_dtype_is_float(dtype)) {
		cli_error("create: unknown dtype '%s'", a->value[0]);
		return CLI_EXIT_USAGE;
	}
	int64_t shape[TILEATOM_MAX_RANK];
	int rank = cli_parse_counts(a->value[1], TILEATOM_MAX_RANK, shape);
	for (int ax = 0; ax < rank; ax++)
		if (shape[ax] < 1)
			rank = 0;
	if (rank == 0) {
		cli_error("create: bad shape '%s' (expected 1 to %d positive extents, e.g. 4,3)",
		          a->value[1], TILEATOM_MAX_RANK);
		return CLI_EXIT_USAGE;
	}
	uint64_t fill[2] = {0, 0};
	if (a->value[2] && tileatom_value_parse(dtype, a->value[2], fill, &k->err) != TILEATOM_OK) {
		cli_error("create: bad --fill value: %s", k->err.message);
		return CLI_EXIT_USAGE;
	}
	if (cli_connect(k) != CLI_EXIT_OK)
		return CLI_EXIT_ERROR;
	unsigned flags = a->value[3] ? TILEATOM_CREATE_PRIVATE : 0;
	return tileatom_create_placed(k->c, a->pos[0], dtype, rank, shape,
	                              a->value[2] ? fill : NULL, flags, a->value[4], NULL,
	                              &k->err) != TILEATOM_OK
	           ? cli_lib_error(k)
	           : CLI_EXIT_OK;
}

static const char ls_usage[] =
    "Usage: tileatom-cli [-s SOCKET] ls [--json] [--placement]\n"
    "Lists the tiles by name under a header line, one per line: NAME DTYPE SHAPE BYTES\n"
    "(tab-separated; SHAPE as D0,D1,...), with --placement then PLACEMENT (where the\n"
    "tile lives, as in info: a device N, or each part of a sharded tile as\n"
    "DEVICE:[FIRST,END)), then 'private' for a private tile. Other\n"
    "clients' private tiles are not listed. --json: an array of\n"
    "{\"name\":...,\"dtype\":...,\"shape\":[...],\"bytes\":...,\"placement\":...}\n"
    "(placement: where it lives, as in info). The listing is fetched and printed page by\n"
    "page (up to 65536 tiles each): every tile that exists for the whole listing is\n"
    "printed once; tiles created or destroyed meanwhile may or may not be.\n";
static const cli_option ls_opts[] = {{"json", false}, {"placement", false}};
static int cmd_ls(cli_call *k)
{
	bool json = k->a.value[0] != NULL, placed = json || k->a.value[1] != NULL;
	char cursor[TILEATOM_LIST_CURSOR_MAX] = "";
	bool first = true, opened = false, ok = true;
	int rc = CLI_EXIT_OK;
	while (ok) {
		tileatom_tile_info *tiles = NULL;
		char(*places)[TILEATOM_PLACEMENT_MAX] = NULL;
		size_t n = 0;
		char next[TILEATOM_LIST_CURSOR_MAX];
		if (tileatom_list_page(k->c, cursor, 0, &tiles, placed ? &places : NULL, &n, next,
		                       &k->err) != TILEATOM_OK) {
			if (json && opened) /* the cut array ends its line; the status tells */
				printf("\n");
			rc = cli_lib_error(k);
			break;
		}
		if (!opened) /* the header once the first page is in */
			ok = (json ? printf("[")
			           : printf("NAME\tDTYPE\tSHAPE\tBYTES%s\n",
			                    placed ? "\tPLACEMENT" : "")) >= 0;
		opened = true;
		for (size_t t = 0; ok && t < n; t++) {
			char shape[128];
			shape_text(tiles[t].shape, tiles[t].rank, shape, sizeof(shape));
			ok = json ? cli_json_array_item(
			                cli_json_tile(&tiles[t], false, places ? places[t] : NULL),
			                first)
			          : printf("%s\t%s\t%s\t%" PRIu64 "%s%s%s\n", tiles[t].name,
			                   tileatom_dtype_name(tiles[t].dtype), shape,
			                   tiles[t].bytes, places ? "\t" : "",
			                   places ? places[t] : "",
			                   tiles[t].private_tile ? "\tprivate" : "") >= 0;
			first = false;
		}
		tileatom_free(tiles);
		tileatom_free(places);
		if (!next[0] || strcmp(next, cursor) == 0) /* done (or a daemon that loops) */
			break;
		memcpy(cursor, next, sizeof(cursor));
	}
	if (ok && rc == CLI_EXIT_OK && json)
		ok = printf("]\n") >= 0;
	if (!ok) {
		cli_error("ls: writing the output: %s", strerror(errno));
		rc = CLI_EXIT_ERROR;
	}
	return rc;
}

static const char info_usage[] =
    "Usage: tileatom-cli [-s SOCKET] info NAME [--json]\n"
    "Describes a tile: name, dtype, shape, elements and bytes, one 'key: value' per "
    "line\n"
    "(--json: {\"name\":...,\"dtype\":...,\"shape\":[...],\"elements\":...,"
    "\"bytes\":...,\"placement\":...}), and where it lives: a device N, or for a "
    "sharded\ntile each part as DEVICE:[FIRST,END) of its first axis.\n";
static int cmd_info(cli_call *k)
{
	tileatom_tile_info info;
	char place[TILEATOM_PLACEMENT_MAX] = "";
	if (tileatom_describe(k->c, k->a.pos[0], &info, &k->err) != TILEATOM_OK ||
	    tileatom_tile_placement(k->c, k->a.pos[0], place, sizeof(place), &k->err) !=
	        TILEATOM_OK)
		return cli_lib_error(k);
	if (k->a.value[0])
		return cli_json_print("info", cli_json_tile(&info, true, place));
	char shape[128];
	shape_text(info.shape, info.rank, shape, sizeof(shape));
	printf("name: %s\ndtype: %s\nshape: %s\nelements: %" PRId64 "\nbytes: %" PRIu64 "\n",
	       info.name, tileatom_dtype_name(info.dtype), shape, cli_tile_count(&info),
	       info.bytes);
	if (info.private_tile)
		printf("private: yes\n");
	if (place[0])
		printf("placement: %s\n", place);
	return CLI_EXIT_OK;
}

static const char rm_usage[] = "Usage: tileatom-cli [-s SOCKET] rm NAME\n"
                               "Destroys a tile.\n";
static int cmd_rm(cli_call *k)
{
	return tileatom_destroy(k->c, k->a.pos[0], &k->err) != TILEATOM_OK ? cli_lib_error(k)
	                                                                   : CLI_EXIT_OK;
}

static const char get_usage[] =
    "Usage: tileatom-cli [-s SOCKET] get NAME [--json]\n"
    "Prints a tile's values in row-major order, one per line; with --json one object\n"
    "{\"name\":...,\"dtype\":...,\"shape\":[...],\"values\":[...]} with a flat "
    "values array.\n"
    "NaN and infinities are written as the JSON strings \"nan\", \"inf\", \"-inf\".\n";
static int cmd_get(cli_call *k)
{
	bool json = k->a.value[0] != NULL;
	tileatom_tile_info info;
	if (tileatom_describe(k->c, k->a.pos[0], &info, &k->err) != TILEATOM_OK)
		return cli_lib_error(k);
	size_t es = tileatom_dtype_size(info.dtype);
	/* Read blocks of whole rows (along axis 0) of at most CLI_GET_CHUNK_BYTES. */
	uint64_t row_bytes = es * (uint64_t)(cli_tile_count(&info) / info.shape[0]);
	int64_t rows_per = row_bytes > CLI_GET_CHUNK_BYTES ? 1 : CLI_GET_CHUNK_BYTES / row_bytes;
	if (json) {
		json_object *head = json_object_new_object();
		bool ok = cli_json_add(head, "name", json_object_new_string(info.name)) &&
		          cli_json_add(head, "dtype",
		                       json_object_new_string(tileatom_dtype_name(info.dtype))) &&
		          cli_json_add(head, "shape",
		                       cli_json_u64s((const uint64_t *)info.shape, info.rank));
		if (!cli_json_open_array(cli_json_done(head, ok), "values")) {
			cli_error("get: out of memory building the JSON output");
			return CLI_EXIT_ERROR;
		}
	}
	int rc = CLI_EXIT_OK;
	bool first = true;
	tileatom_region reg = {.rank = info.rank};
	memcpy(reg.shape, info.shape, sizeof(reg.shape));
	for (int64_t r0 = 0; r0 < info.shape[0] && rc == CLI_EXIT_OK; r0 += rows_per) {
		reg.origin[0] = r0;
		reg.shape[0] = info.shape[0] - r0 < rows_per ? info.shape[0] - r0 : rows_per;
		void *data = NULL;
		size_t nbytes = 0;
		if (tileatom_read_alloc(k->c, info.name, &reg, &data, &nbytes, &k->err) !=
		    TILEATOM_OK) {
			rc = cli_lib_error(k);
			break;
		}
		const uint8_t *p = data;
		for (size_t off = 0; off + es <= nbytes && rc == CLI_EXIT_OK; off += es) {
			if (!json) {
				char buf[64];
				tileatom_value_format(info.dtype, p + off, buf, sizeof(buf));
				puts(buf);
			} else if (!cli_json_array_item(cli_json_value(info.dtype, p + off),
			                                first)) {
				cli_error("get: out of memory building the JSON output");
				rc = CLI_EXIT_ERROR;
			}
			first = false;
		}
		tileatom_free(data);
	}
	if (json) /* the array ends also when cut short; the status says it failed */
		printf("]}\n");
	if (fflush(stdout) != 0 && rc == CLI_EXIT_OK) {
		cli_error("get: writing the output: %s", strerror(errno));
		rc = CLI_EXIT_ERROR;
	}
	return rc;
}

/* ---- single-element ops ------------------------------------------------------------- */

/* Parses INDEX (flat or comma-separated coordinates) against a tile. Returns -1 when valid
 * (*flat set), else an exit status after a message. */
static int parse_index(const char *cmd, const char *text, const tileatom_tile_info *info,
                       int64_t *flat)
{
	int64_t coord[TILEATOM_MAX_RANK];
	int n = cli_parse_counts(text, TILEATOM_MAX_RANK, coord);
	if (n == 0) {
		cli_error("%s: bad index '%s' (expected a flat index or coordinates like 1,2)", cmd,
		          text);
		return CLI_EXIT_USAGE;
	}
	char shape[128];
	shape_text(info->shape, info->rank, shape, sizeof(shape));
	if (n == 1) {
		if (coord[0] >= cli_tile_count(info)) {
			cli_error("%s: index %" PRId64 " is outside tile '%s' of shape %s (%" PRId64
			          " elements)",
			          cmd, coord[0], info->name, shape, cli_tile_count(info));
			return CLI_EXIT_ERROR;
		}
		*flat = coord[0];
		return -1;
	}
	if (n != info->rank) {
		cli_error("%s: index '%s' has %d coordinates but tile '%s' has %d axes", cmd, text,
		          n, info->name, info->rank);
		return CLI_EXIT_ERROR;
	}
	*flat = 0;
	for (int ax = 0; ax < n; ax++) {
		if (coord[ax] >= info->shape[ax]) {
			cli_error("%s: coordinate %" PRId64 " along axis %d is outside tile '%s' "
			          "of shape %s",
			          cmd, coord[ax], ax, info->name, shape);
			return CLI_EXIT_ERROR;
		}
		*flat = *flat * info->shape[ax] + coord[ax];
	}
	return -1;
}

/* Reads --sem and --scope (options 0 and 1) into o; -1 or CLI_EXIT_USAGE. */
static int parse_sem_scope(const char *cmd, const cli_args *a, tileatom_op_options *o)
{
	tileatom_op_options_init(o);
	int sem = a->value[0] ? tileatom_sem_parse(a->value[0]) : (int)o->sem;
	int scope = a->value[1] ? tileatom_scope_parse(a->value[1]) : (int)o->scope;
	if (sem >= 0 && scope >= 0) {
		o->sem = (tileatom_sem)sem;
		o->scope = (tileatom_scope)scope;
		return -1;
	}
	char names[128];
	cli_error("%s: unknown --%s '%s' (%s)", cmd, sem < 0 ? "sem" : "scope",
	          a->value[sem < 0 ? 0 : 1],
	          name_list(names, sizeof names, ", ", sem < 0 ? NAMES_SEM : NAMES_SCOPE,
	                    TILEATOM_REQ_NONE, TILEATOM_OP_NONE));
	return CLI_EXIT_USAGE;
}

/* Options every single-element op takes. */
static const cli_option op_opts[] = {{"sem", true}, {"scope", true}, {"json", false}};

/* What each kind of single-element command takes and says. */
static const struct elem_spec {
	const char *name;              /* the command; "" for the RMW ops, named by their op */
	const char *args;              /* its positionals */
	int npos;                      /* how many */
	tileatom_request_kind request; /* what it goes as (the sems it accepts) */
	const char *what;              /* what it does, for its usage */
	const char *json;              /* its --json object, for its usage */
} elem_specs[] = {
    {"cas", "NAME INDEX EXPECTED DESIRED", 4, TILEATOM_REQ_INDEXED,
     "Compare-and-swap: if the element equals EXPECTED (bitwise) it becomes\n"
     "DESIRED. Prints the old value; exit status 0 when the swap happened, 3 when not.\n",
     "{\"tile\":...,\"index\":...,\"old\":...,\"swapped\":true|false}"},
    {"load", "NAME INDEX", 2, TILEATOM_REQ_ATOMIC_LOAD,
     "Atomically loads one element and prints it.\n", "{\"tile\":...,\"index\":...,\"value\":...}"},
    {"store", "NAME INDEX VALUE", 3, TILEATOM_REQ_ATOMIC_STORE,
     "Atomically stores VALUE into one element.\n",
     "{\"tile\":...,\"index\":...,\"value\":...} (the value stored)"},
    {"", "NAME INDEX VALUE", 3, TILEATOM_REQ_INDEXED,
     "Applies the atomic op to one element with VALUE and prints the old value.\n",
     "{\"tile\":...,\"index\":...,\"old\":...}"},
};

/* add/sub/.../cas/load/store: what it does comes from its name (argv[0]). */
static int cmd_element(cli_call *k)
{
	char usage[1024], sems[128], scopes[128];
	const char *cmd = k->argv[0];
	const cli_args *a = &k->a;
	const struct elem_spec *e = elem_specs;
	while (e->name[0] && strcmp(cmd, e->name) != 0)
		e++;
	tileatom_op op = tileatom_op_parse(cmd); /* TILEATOM_OP_NONE for load and store */
	bool cas = op == TILEATOM_OP_CAS, load = e->request == TILEATOM_REQ_ATOMIC_LOAD,
	     store = e->request == TILEATOM_REQ_ATOMIC_STORE;
	snprintf(usage, sizeof(usage),
	         "Usage: tileatom-cli [-s SOCKET] %s %s [--sem SEM] [--scope SCOPE] [--json]\n%s"
	         "INDEX is a flat row-major index or comma-separated coordinates (e.g. 2,5).\n"
	         "Values are parsed in the tile's dtype (decimal, 0x hex for integers).\n"
	         "SEM: %s (default relaxed). SCOPE: %s (default gpu).\n"
	         "--json: %s, INDEX as a flat index.\n",
	         cmd, e->args, e->what,
	         name_list(sems, sizeof sems, ", ", NAMES_SEM, e->request, op),
	         name_list(scopes, sizeof scopes, ", ", NAMES_SCOPE, TILEATOM_REQ_NONE,
	                   TILEATOM_OP_NONE),
	         e->json);
	int rc = cli_parse(k, op_opts, 3, e->npos, e->npos, usage, false);
	if (rc >= 0)
		return rc;
	tileatom_op_options o;
	if ((rc = parse_sem_scope(cmd, a, &o)) >= 0 || (rc = cli_connect(k)) != CLI_EXIT_OK)
		return rc;
	tileatom_tile_info info;
	if (tileatom_describe(k->c, a->pos[0], &info, &k->err) != TILEATOM_OK)
		return cli_lib_error(k);
	int64_t flat;
	if ((rc = parse_index(cmd, a->pos[1], &info, &flat)) >= 0)
		return rc;
	uint64_t value[2] = {0, 0}, compare[2] = {0, 0}, old[2] = {0, 0};
	if (cas && tileatom_value_parse(info.dtype, a->pos[2], compare, &k->err) != TILEATOM_OK) {
		cli_error("%s: bad expected value: %s", cmd, k->err.message);
		return CLI_EXIT_USAGE;
	}
	if (!load &&
	    tileatom_value_parse(info.dtype, a->pos[e->npos - 1], value, &k->err) != TILEATOM_OK) {
		cli_error("%s: bad value: %s", cmd, k->err.message);
		return CLI_EXIT_USAGE;
	}
	tileatom_array index = tileatom_scalar(TILEATOM_INT64, &flat);
	tileatom_array v = tileatom_scalar(info.dtype, value);
	tileatom_addr addr = {TILEATOM_ADDR_FLAT, NULL, 0, 1, &index};
	tileatom_op_result res = {0};
	int st = load ? tileatom_atomic_load(k->c, info.name, NULL, &addr, &o, old, sizeof(old),
	                                     &res, &k->err)
	         : store
	             ? tileatom_atomic_store(k->c, info.name, NULL, &addr, &v, &o, &res, &k->err)
	             : tileatom_atomic_at(k->c, info.name, op, flat, info.dtype, value,
	                                  cas ? compare : NULL, &o, old, &k->err);
	if (st == TILEATOM_OK && res.skipped) {
		/* Only when the tile was replaced by a smaller one since it was described. */
		st = k->err.code = TILEATOM_E_OUT_OF_RANGE;
		snprintf(k->err.message, sizeof(k->err.message),
		         "index %" PRId64 " is outside tile '%s'", flat, info.name);
	}
	if (st != TILEATOM_OK)
		return cli_lib_error(k);
	bool swapped = !cas || memcmp(old, compare, tileatom_dtype_size(info.dtype)) == 0;
	rc = CLI_EXIT_OK;
	if (a->value[2]) {
		json_object *jo = json_object_new_object();
		bool ok = cli_json_add(jo, "tile", json_object_new_string(info.name)) &&
		          cli_json_add(jo, "index", json_object_new_int64(flat)) &&
		          cli_json_add(jo, load || store ? "value" : "old",
		                       cli_json_value(info.dtype, store ? value : old)) &&
		          (!cas || cli_json_add(jo, "swapped", json_object_new_boolean(swapped)));
		rc = cli_json_print(cmd, cli_json_done(jo, ok));
	} else if (!store) {
		char buf[64];
		tileatom_value_format(info.dtype, old, buf, sizeof(buf));
		printf("%s\n", buf);
	}
	return rc == CLI_EXIT_OK && !swapped ? CLI_EXIT_CAS_FAILED : rc;
}

/* ---- dispatch ----------------------------------------------------------------------- */

/* One subcommand: how main parses its line, and what runs it. */
typedef struct cli_command {
	const char *name;        /* as typed; NULL: the single-element ops, by their op name */
	int (*run)(cli_call *k); /* returns the exit status; main closes k->c after it */
	const char *usage;       /* its --help; NULL: run parses its line itself */
	const cli_option *opts;  /* its options (cli_parse) */
	int nopts;               /* how many */
	int min_pos, max_pos;    /* how many positionals it takes */
	bool connect;            /* connect before run (else run connects once its line is valid) */
} cli_command;

static const cli_command commands[] = {
    {"ping", cmd_ping, ping_usage, json_opt, 1, 0, 0, true},
    {"stats", cmd_stats, stats_usage, json_opt, 1, 0, 0, true},
    {"snapshot", cmd_snapshot, snapshot_usage, NULL, 0, 0, 0, true},
    {"create", cmd_create, create_usage, create_opts, 5, 1, 1, false},
    {"ls", cmd_ls, ls_usage, ls_opts, 2, 0, 0, true},
    {"info", cmd_info, info_usage, json_opt, 1, 1, 1, true},
    {"rm", cmd_rm, rm_usage, NULL, 0, 1, 1, true},
    {"get", cmd_get, get_usage, json_opt, 1, 1, 1, true},
    {.name = "hist", .run = cli_cmd_hist},
    {.name = "load", .run = cmd_element},
    {.name = "store", .run = cmd_element},
    {.run = cmd_element},
};

int main(int argc, char **argv)
{
	cli_call k = {.timeout_ms = CLI_CONNECT_TIMEOUT_MS};
	int64_t ms;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			print_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			printf("tileatom-cli %s\n", tileatom_version());
			return CLI_EXIT_OK;
		}
		/* the global options that take a value: -s, -t, --auth-file (o = 0, 1, 2) */
		static const char *const names[][2] = {
		    {"-s", "--socket"}, {"-t", "--timeout"}, {"--auth-file", "--auth-file"}};
		const char *eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		int o = 0;
		while (o < 3 && strcmp(a, names[o][0]) != 0 &&
		       (strlen(names[o][1]) != len || strncmp(a, names[o][1], len) != 0))
			o++;
		if (o == 3) {
			cli_error("unknown option '%s' (see 'tileatom-cli --help')", a);
			return CLI_EXIT_USAGE;
		}
		const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
		if (!val) {
			cli_error("option %s needs a value", a);
			return CLI_EXIT_USAGE;
		}
		if (o == 0) {
			k.socket = val;
		} else if (o == 2) {
			k.auth_file = val;
		} else if (cli_parse_counts(val, 1, &ms) != 1 || ms > INT_MAX) {
			cli_error("bad timeout '%s' (milliseconds)", val);
			return CLI_EXIT_USAGE;
		} else {
			k.timeout_ms = (int)ms;
		}
	}
	if (i >= argc) {
		print_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	const cli_command *cmd = commands;
	while (cmd->name && strcmp(argv[i], cmd->name) != 0)
		cmd++;
	if (!cmd->name && tileatom_op_parse(argv[i]) == TILEATOM_OP_NONE) {
		cli_error("unknown command '%s' (see 'tileatom-cli --help')", argv[i]);
		return CLI_EXIT_USAGE;
	}
	k.argc = argc - i;
	k.argv = argv + i;
	int rc = cmd->usage ? cli_parse(&k, cmd->opts, cmd->nopts, cmd->min_pos, cmd->max_pos,
	                                cmd->usage, cmd->connect)
	                    : -1;
	if (rc < 0)
		rc = cmd->run(&k);
	tileatom_close(k.c);
	return rc;
}

/* cli_main.c: tileatom-cli, the command-line client of tileatomd: global options and the
 * subcommands ping, stats, create, ls, info, rm, get, the single-element atomics (add sub
 * min max xchg and or xor cas) and load/store. hist lives in cli_hist.c, the --json helpers
 * in cli_json.c, the option parser and connecting in cli_common.c. Everything goes through
 * libtileatom-client. Every command that prints data takes --json: one JSON value (made with
 * json-c) and a newline on stdout instead of the text.
 *
 * Exit status: 0 success, 1 error (a message on stderr names the cause), 2 usage error,
 * 3 cas did not swap. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
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

/* The CLI's name of an op (exch is spelled xchg, as in the shell tour; both parse). */
static const char *cli_op_name(tileatom_op op)
{
	return op == TILEATOM_OP_EXCH ? "xchg" : tileatom_op_name(op);
}

/* Appends name to buf (n bytes, *used of them in use) after sep unless it is the first. */
static void join_name(char *buf, size_t n, size_t *used, const char *sep, const char *name)
{
	if (*used < n)
		*used += (size_t)snprintf(buf + *used, n - *used, "%s%s", *used ? sep : "", name);
}

/* Writes the sem names the library knows (until tileatom_sem_name says "?") joined by sep
 * into buf: all of them for kind TILEATOM_REQ_NONE, else those a request of kind (running
 * op) accepts. Returns buf. */
static const char *sem_list(char *buf, size_t n, const char *sep, tileatom_request_kind kind,
                            tileatom_op op)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int s = 0; strcmp(tileatom_sem_name((tileatom_sem)s), "?") != 0; s++)
		if (kind == TILEATOM_REQ_NONE || tileatom_sem_allowed(kind, op, (tileatom_sem)s))
			join_name(buf, n, &used, sep, tileatom_sem_name((tileatom_sem)s));
	return buf;
}

/* The scope names the library knows, joined by sep, into buf. */
static const char *scope_list(char *buf, size_t n, const char *sep)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int s = 0; strcmp(tileatom_scope_name((tileatom_scope)s), "?") != 0; s++)
		join_name(buf, n, &used, sep, tileatom_scope_name((tileatom_scope)s));
	return buf;
}

/* The single-value RMW ops (every op but cas) joined by '|', into buf. */
static const char *rmw_list(char *buf, size_t n)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int op = TILEATOM_OP_NONE + 1; strcmp(tileatom_op_name((tileatom_op)op), "?") != 0;
	     op++)
		if (op != TILEATOM_OP_CAS)
			join_name(buf, n, &used, "|", cli_op_name((tileatom_op)op));
	return buf;
}

/* Prints the global usage, with the op, sem and scope names from the library. */
static void print_usage(FILE *out)
{
	char ops[128], sems[128], scopes[128];
	fprintf(out, global_usage, rmw_list(ops, sizeof ops),
	        sem_list(sems, sizeof sems, "|", TILEATOM_REQ_NONE, TILEATOM_OP_NONE),
	        scope_list(scopes, sizeof scopes, "|"));
}

/* Prints a library error for command cmd; returns CLI_EXIT_ERROR. */
static int lib_error(const char *cmd, const tileatom_error *err)
{
	cli_error("%s: %s", cmd, err->message);
	return CLI_EXIT_ERROR;
}

/* The option of the commands whose only option is --json. */
static const cli_option json_opt[] = {{"json", false}};

/* The start of most subcommands: parses the line (exactly npos positionals), then
 * connects. Returns true with *c connected and *rc = CLI_EXIT_OK, or false with the exit
 * status in *rc (--help, a usage error or no daemon). */
static bool parse_connect(int argc, char **argv, const cli_option *opts, int nopts, int npos,
                          const char *usage, cli_global *g, cli_args *a, tileatom_client **c,
                          int *rc)
{
	*rc = cli_parse(argc, argv, opts, nopts, npos, npos, usage, g, a);
	if (*rc >= 0)
		return false;
	*rc = cli_connect(g, c);
	return *rc == CLI_EXIT_OK;
}

/* Formats a shape as "D0,D1,...". */
static void shape_text(const int64_t *shape, int rank, char *buf, size_t n)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int a = 0; a < rank && used < n; a++)
		used +=
		    (size_t)snprintf(buf + used, n - used, "%s%" PRId64, a ? "," : "", shape[a]);
}

/* Elements of a tile. */
static int64_t tile_count(const tileatom_tile_info *info)
{
	int64_t n = 1;
	for (int a = 0; a < info->rank; a++)
		n *= info->shape[a];
	return n;
}

/* ---- simple commands ---------------------------------------------------------------- */

static int cmd_ping(int argc, char **argv, cli_global *g)
{
	static const char usage[] =
	    "Usage: tileatom-cli [-s SOCKET] ping [--json]\n"
	    "Checks that tileatomd answers; prints its version, backend and the round-trip time\n"
	    "(--json: {\"version\":...,\"backend\":...,\"rtt_ms\":...}).\n";
	cli_args a;
	tileatom_client *c;
	int rc;
	if (!parse_connect(argc, argv, json_opt, 1, 0, usage, g, &a, &c, &rc))
		return rc;
	tileatom_error err = {0, ""};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int st = tileatom_ping(c, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (st != TILEATOM_OK) {
		rc = lib_error("ping", &err);
	} else {
		double ms =
		    (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
		if (a.value[0]) {
			char ms_text[32]; /* the same 3 decimals as the text output */
			snprintf(ms_text, sizeof(ms_text), "%.3f", ms);
			json_object *o = json_object_new_object();
			bool ok =
			    cli_json_add(o, "version",
			                 json_object_new_string(tileatom_server_version(c))) &&
			    cli_json_add(o, "backend",
			                 json_object_new_string(tileatom_server_backend(c))) &&
			    cli_json_add(o, "rtt_ms", json_object_new_double_s(ms, ms_text));
			rc = cli_json_print("ping", cli_json_done(o, ok));
		} else {
			printf("pong from tileatomd %s (backend %s) in %.3f ms\n",
			       tileatom_server_version(c), tileatom_server_backend(c), ms);
		}
	}
	tileatom_close(c);
	return rc;
}

/* A JSON array of n unsigned numbers; NULL when out of memory. */
static json_object *u64_array(const uint64_t *v, int n)
{
	json_object *arr = json_object_new_array();
	for (int i = 0; arr && i < n; i++) {
		json_object *e = json_object_new_uint64(v[i]);
		if (!e || json_object_array_add(arr, e) != 0) {
			json_object_put(e);
			json_object_put(arr);
			return NULL;
		}
	}
	return arr;
}

/* A new object appended to the array arr (which then owns it); NULL when out of memory. */
static json_object *array_add_object(json_object *arr)
{
	json_object *e = json_object_new_object();
	if (e && json_object_array_add(arr, e) != 0) {
		json_object_put(e);
		e = NULL;
	}
	return e;
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
		json_object *e = array_add_object(devs);
		ok = cli_json_add(e, "device", json_object_new_uint64(d[i].device)) &&
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
	                        u64_array(nk ? k[0].le_ns : NULL, nk ? k[0].nbuckets - 1 : 0));
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
		     cli_json_add(e, "latency_buckets", u64_array(k[i].bucket, k[i].nbuckets));
	}
	return cli_json_done(o, ok);
}

static int cmd_stats(int argc, char **argv, cli_global *g)
{
	static const char usage[] =
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
	cli_args a;
	tileatom_client *c;
	int rc;
	if (!parse_connect(argc, argv, json_opt, 1, 0, usage, g, &a, &c, &rc))
		return rc;
	tileatom_error err = {0, ""};
	tileatom_stats_info s;
	tileatom_kind_stats *kinds = NULL;
	tileatom_device_stats *devs = NULL;
	size_t nk = 0, nd = 0;
	if (tileatom_stats_kinds(c, &s, &kinds, &nk, &err) != TILEATOM_OK ||
	    tileatom_stats_devices(c, &devs, &nd, &err) != TILEATOM_OK) {
		rc = lib_error("stats", &err);
	} else if (a.value[0]) {
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
	tileatom_close(c);
	return rc;
}

static int cmd_snapshot(int argc, char **argv, cli_global *g)
{
	static const char usage[] = "Usage: tileatom-cli [-s SOCKET] snapshot\n"
	                            "Asks the daemon (started with --data-dir) to write a snapshot "
	                            "of every tile\nand to remove the log it makes obsolete.\n";
	cli_args a;
	tileatom_client *c;
	int rc;
	if (!parse_connect(argc, argv, NULL, 0, 0, usage, g, &a, &c, &rc))
		return rc;
	tileatom_error err = {0, ""};
	tileatom_snapshot_info s;
	if (tileatom_snapshot(c, &s, &err) != TILEATOM_OK)
		rc = lib_error("snapshot", &err);
	else
		printf("snapshot: %" PRIu32 " tiles, %" PRIu64 " bytes, through record %" PRIu64
		       "; %" PRIu64 " bytes of log removed\n",
		       s.tiles, s.bytes, s.seq, s.log_removed);
	tileatom_close(c);
	return rc;
}

static int cmd_create(int argc, char **argv, cli_global *g)
{
	static const char usage[] =
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
	static const cli_option opts[] = {
	    {"dtype", true}, {"shape", true}, {"fill", true}, {"private", false}, {"device", true}};
	cli_args a;
	int rc = cli_parse(argc, argv, opts, 5, 1, 1, usage, g, &a);
	if (rc >= 0)
		return rc;
	if (!a.value[0] || !a.value[1]) {
		cli_error("create: --dtype and --shape are required (see 'create --help')");
		return CLI_EXIT_USAGE;
	}
	tileatom_dtype dtype = tileatom_dtype_parse(a.value[0]);
	if (!tileatom_dtype_is_int(dtype) && !tileatom_dtype_is_float(dtype)) {
		cli_error("create: unknown dtype '%s'", a.value[0]);
		return CLI_EXIT_USAGE;
	}
	int64_t shape[TILEATOM_MAX_RANK];
	int rank = cli_parse_counts(a.value[1], TILEATOM_MAX_RANK, shape);
	for (int ax = 0; ax < rank; ax++)
		if (shape[ax] < 1)
			rank = 0;
	if (rank == 0) {
		cli_error("create: bad shape '%s' (expected 1 to %d positive extents, e.g. 4,3)",
		          a.value[1], TILEATOM_MAX_RANK);
		return CLI_EXIT_USAGE;
	}
	uint64_t fill[2] = {0, 0};
	tileatom_error err = {0, ""};
	if (a.value[2] && tileatom_value_parse(dtype, a.value[2], fill, &err) != TILEATOM_OK) {
		cli_error("create: bad --fill value: %s", err.message);
		return CLI_EXIT_USAGE;
	}
	tileatom_client *c;
	if ((rc = cli_connect(g, &c)) != CLI_EXIT_OK)
		return rc;
	unsigned flags = a.value[3] ? TILEATOM_CREATE_PRIVATE : 0;
	if (tileatom_create_placed(c, a.pos[0], dtype, rank, shape, a.value[2] ? fill : NULL, flags,
	                           a.value[4], NULL, &err) != TILEATOM_OK)
		rc = lib_error("create", &err);
	tileatom_close(c);
	return rc;
}

/* Prints one page of ls: --json objects (each after a comma but the first of all, *first
 * cleared once one is printed) or text lines. False when writing or building fails. */
static bool ls_print_page(const tileatom_tile_info *tiles,
                          const char (*places)[TILEATOM_PLACEMENT_MAX], size_t n, bool json,
                          bool *first)
{
	for (size_t i = 0; i < n; i++) {
		if (json) {
			json_object *t = cli_json_tile(&tiles[i], false, places ? places[i] : NULL);
			const char *text =
			    t ? json_object_to_json_string_ext(t, CLI_JSON_FLAGS) : NULL;
			bool ok = text && printf("%s%s", *first ? "" : ",", text) >= 0;
			json_object_put(t);
			if (!ok)
				return false;
			*first = false;
			continue;
		}
		char shape[128];
		shape_text(tiles[i].shape, tiles[i].rank, shape, sizeof(shape));
		if (printf("%s\t%s\t%s\t%" PRIu64 "%s%s%s\n", tiles[i].name,
		           tileatom_dtype_name(tiles[i].dtype), shape, tiles[i].bytes,
		           places ? "\t" : "", places ? places[i] : "",
		           tiles[i].private_tile ? "\tprivate" : "") < 0)
			return false;
	}
	return true;
}

static int cmd_ls(int argc, char **argv, cli_global *g)
{
	static const char usage[] =
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
	cli_args a;
	tileatom_client *c;
	int rc;
	static const cli_option opts[] = {{"json", false}, {"placement", false}};
	if (!parse_connect(argc, argv, opts, 2, 0, usage, g, &a, &c, &rc))
		return rc;
	bool json = a.value[0] != NULL, placed = json || a.value[1] != NULL;
	tileatom_error err = {0, ""};
	char cursor[TILEATOM_LIST_CURSOR_MAX] = "";
	bool first = true, opened = false, ok = true;
	rc = CLI_EXIT_OK;
	while (ok) {
		tileatom_tile_info *tiles = NULL;
		char(*places)[TILEATOM_PLACEMENT_MAX] = NULL;
		size_t n = 0;
		char next[TILEATOM_LIST_CURSOR_MAX];
		if (tileatom_list_page(c, cursor, 0, &tiles, placed ? &places : NULL, &n, next,
		                       &err) != TILEATOM_OK) {
			if (json && opened)
				printf("\n"); /* the cut array ends its line; the status says it
				                 failed */
			rc = lib_error("ls", &err);
			break;
		}
		if (!opened) /* the header once the first page is in */
			ok = json     ? printf("[") >= 0
			     : placed ? printf("NAME\tDTYPE\tSHAPE\tBYTES\tPLACEMENT\n") >= 0
			              : printf("NAME\tDTYPE\tSHAPE\tBYTES\n") >= 0;
		opened = true;
		ok = ok && ls_print_page(tiles, (const char(*)[TILEATOM_PLACEMENT_MAX])places, n,
		                         json, &first);
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
	tileatom_close(c);
	return rc;
}

static int cmd_info(int argc, char **argv, cli_global *g)
{
	static const char usage[] =
	    "Usage: tileatom-cli [-s SOCKET] info NAME [--json]\n"
	    "Describes a tile: name, dtype, shape, elements and bytes, one 'key: value' per "
	    "line\n"
	    "(--json: {\"name\":...,\"dtype\":...,\"shape\":[...],\"elements\":...,"
	    "\"bytes\":...,\"placement\":...}), and where it lives: a device N, or for a "
	    "sharded\ntile each part as DEVICE:[FIRST,END) of its first axis.\n";
	cli_args a;
	tileatom_client *c;
	int rc;
	if (!parse_connect(argc, argv, json_opt, 1, 1, usage, g, &a, &c, &rc))
		return rc;
	tileatom_error err = {0, ""};
	tileatom_tile_info info;
	char place[TILEATOM_PLACEMENT_MAX] = "";
	if (tileatom_describe(c, a.pos[0], &info, &err) != TILEATOM_OK ||
	    tileatom_tile_placement(c, a.pos[0], place, sizeof(place), &err) != TILEATOM_OK) {
		rc = lib_error("info", &err);
	} else if (a.value[0]) {
		rc = cli_json_print("info", cli_json_tile(&info, true, place));
	} else {
		char shape[128];
		shape_text(info.shape, info.rank, shape, sizeof(shape));
		printf("name: %s\ndtype: %s\nshape: %s\nelements: %" PRId64 "\nbytes: %" PRIu64
		       "\n",
		       info.name, tileatom_dtype_name(info.dtype), shape, tile_count(&info),
		       info.bytes);
		if (info.private_tile)
			printf("private: yes\n");
		if (place[0])
			printf("placement: %s\n", place);
	}
	tileatom_close(c);
	return rc;
}

static int cmd_rm(int argc, char **argv, cli_global *g)
{
	static const char usage[] = "Usage: tileatom-cli [-s SOCKET] rm NAME\n"
	                            "Destroys a tile.\n";
	cli_args a;
	tileatom_client *c;
	int rc;
	if (!parse_connect(argc, argv, NULL, 0, 1, usage, g, &a, &c, &rc))
		return rc;
	tileatom_error err = {0, ""};
	if (tileatom_destroy(c, a.pos[0], &err) != TILEATOM_OK)
		rc = lib_error("rm", &err);
	tileatom_close(c);
	return rc;
}

static int cmd_get(int argc, char **argv, cli_global *g)
{
	static const char usage[] =
	    "Usage: tileatom-cli [-s SOCKET] get NAME [--json]\n"
	    "Prints a tile's values in row-major order, one per line; with --json one object\n"
	    "{\"name\":...,\"dtype\":...,\"shape\":[...],\"values\":[...]} with a flat "
	    "values array.\n"
	    "NaN and infinities are written as the JSON strings \"nan\", \"inf\", \"-inf\".\n";
	static const cli_option opts[] = {{"json", false}};
	cli_args a;
	tileatom_client *c;
	int rc;
	if (!parse_connect(argc, argv, opts, 1, 1, usage, g, &a, &c, &rc))
		return rc;
	bool json = a.value[0] != NULL;
	tileatom_error err = {0, ""};
	tileatom_tile_info info;
	if (tileatom_describe(c, a.pos[0], &info, &err) != TILEATOM_OK) {
		rc = lib_error("get", &err);
		tileatom_close(c);
		return rc;
	}
	size_t es = tileatom_dtype_size(info.dtype);
	/* Read blocks of whole rows (along axis 0) of at most CLI_GET_CHUNK_BYTES. */
	uint64_t row_bytes = es;
	for (int ax = 1; ax < info.rank; ax++)
		row_bytes *= (uint64_t)info.shape[ax];
	int64_t rows_per = (int64_t)(CLI_GET_CHUNK_BYTES / row_bytes);
	if (rows_per < 1)
		rows_per = 1;
	if (json) {
		json_object *head = json_object_new_object();
		bool ok = cli_json_add(head, "name", json_object_new_string(info.name)) &&
		          cli_json_add(head, "dtype",
		                       json_object_new_string(tileatom_dtype_name(info.dtype))) &&
		          cli_json_add(head, "shape", cli_json_shape(info.shape, info.rank));
		if (!cli_json_open_array(cli_json_done(head, ok), "values")) {
			cli_error("get: out of memory building the JSON output");
			tileatom_close(c);
			return CLI_EXIT_ERROR;
		}
	}
	bool first = true;
	for (int64_t r0 = 0; r0 < info.shape[0] && rc == CLI_EXIT_OK; r0 += rows_per) {
		tileatom_region reg;
		memset(&reg, 0, sizeof(reg));
		reg.rank = info.rank;
		for (int ax = 0; ax < info.rank; ax++)
			reg.shape[ax] = info.shape[ax];
		reg.origin[0] = r0;
		reg.shape[0] = info.shape[0] - r0 < rows_per ? info.shape[0] - r0 : rows_per;
		void *data = NULL;
		size_t nbytes = 0;
		if (tileatom_read_alloc(c, info.name, &reg, &data, &nbytes, &err) != TILEATOM_OK) {
			if (json)
				printf("]}\n");
			rc = lib_error("get", &err);
			break;
		}
		const uint8_t *p = data;
		for (size_t off = 0; off + es <= nbytes; off += es) {
			if (json) {
				if (!cli_json_array_item(cli_json_value(info.dtype, p + off),
				                         first)) {
					printf("]}\n");
					cli_error("get: out of memory building the JSON output");
					rc = CLI_EXIT_ERROR;
					break;
				}
			} else {
				char buf[64];
				tileatom_value_format(info.dtype, p + off, buf, sizeof(buf));
				puts(buf);
			}
			first = false;
		}
		tileatom_free(data);
	}
	if (json && rc == CLI_EXIT_OK)
		printf("]}\n");
	tileatom_close(c);
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
		if (coord[0] >= tile_count(info)) {
			cli_error("%s: index %" PRId64 " is outside tile '%s' of shape %s (%" PRId64
			          " elements)",
			          cmd, coord[0], info->name, shape, tile_count(info));
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
	int64_t f = 0;
	for (int ax = 0; ax < n; ax++) {
		if (coord[ax] >= info->shape[ax]) {
			cli_error("%s: coordinate %" PRId64 " along axis %d is outside tile '%s' "
			          "of shape %s",
			          cmd, coord[ax], ax, info->name, shape);
			return CLI_EXIT_ERROR;
		}
		f = f * info->shape[ax] + coord[ax];
	}
	*flat = f;
	return -1;
}

/* Reads --sem (index si) and --scope (index si + 1) into opts; -1 or CLI_EXIT_USAGE. */
static int parse_sem_scope(const char *cmd, const cli_args *a, int si, tileatom_op_options *o)
{
	tileatom_op_options_init(o);
	if (a->value[si]) {
		int s = tileatom_sem_parse(a->value[si]);
		if (s < 0) {
			char sems[128];
			cli_error(
			    "%s: unknown --sem '%s' (%s)", cmd, a->value[si],
			    sem_list(sems, sizeof sems, ", ", TILEATOM_REQ_NONE, TILEATOM_OP_NONE));
			return CLI_EXIT_USAGE;
		}
		o->sem = (tileatom_sem)s;
	}
	if (a->value[si + 1]) {
		int s = tileatom_scope_parse(a->value[si + 1]);
		if (s < 0) {
			char scopes[128];
			cli_error("%s: unknown --scope '%s' (%s)", cmd, a->value[si + 1],
			          scope_list(scopes, sizeof scopes, ", "));
			return CLI_EXIT_USAGE;
		}
		o->scope = (tileatom_scope)s;
	}
	return -1;
}

/* Options every single-element op takes. */
static const cli_option op_opts[] = {{"sem", true}, {"scope", true}, {"json", false}};

/* What a single-element command does. */
typedef enum elem_kind {
	ELEM_RMW,  /* add .. xor: one value */
	ELEM_CAS,  /* expected and desired */
	ELEM_LOAD, /* atomic load */
	ELEM_STORE /* atomic store of one value */
} elem_kind;

/* add/sub/.../cas/load/store: what it does comes from its name (argv[0]). */
static int cmd_element(int argc, char **argv, cli_global *g)
{
	char usage[1024], sems[128], scopes[128];
	const char *cmd = argv[0];
	elem_kind kind = strcmp(cmd, "cas") == 0     ? ELEM_CAS
	                 : strcmp(cmd, "load") == 0  ? ELEM_LOAD
	                 : strcmp(cmd, "store") == 0 ? ELEM_STORE
	                                             : ELEM_RMW;
	tileatom_op op = kind == ELEM_RMW   ? tileatom_op_parse(cmd)
	                 : kind == ELEM_CAS ? TILEATOM_OP_CAS
	                                    : TILEATOM_OP_NONE;
	/* the sems this command's request accepts (single elements go as indexed atomics or
	 * atomic loads / stores) */
	tileatom_request_kind rk = kind == ELEM_LOAD    ? TILEATOM_REQ_ATOMIC_LOAD
	                           : kind == ELEM_STORE ? TILEATOM_REQ_ATOMIC_STORE
	                                                : TILEATOM_REQ_INDEXED;
	const char *args = kind == ELEM_CAS    ? "NAME INDEX EXPECTED DESIRED"
	                   : kind == ELEM_LOAD ? "NAME INDEX"
	                                       : "NAME INDEX VALUE";
	const char *what =
	    kind == ELEM_CAS
	        ? "Compare-and-swap: if the element equals EXPECTED (bitwise) it becomes\n"
	          "DESIRED. Prints the old value; exit status 0 when the swap happened, 3 "
	          "when not.\n"
	    : kind == ELEM_LOAD  ? "Atomically loads one element and prints it.\n"
	    : kind == ELEM_STORE ? "Atomically stores VALUE into one element.\n"
	                         : "Applies the atomic op to one element with VALUE and prints the "
	                           "old value.\n";
	const char *json_what =
	    kind == ELEM_CAS     ? "{\"tile\":...,\"index\":...,\"old\":...,\"swapped\":true|false}"
	    : kind == ELEM_LOAD  ? "{\"tile\":...,\"index\":...,\"value\":...}"
	    : kind == ELEM_STORE ? "{\"tile\":...,\"index\":...,\"value\":...} (the value stored)"
	                         : "{\"tile\":...,\"index\":...,\"old\":...}";
	snprintf(usage, sizeof(usage),
	         "Usage: tileatom-cli [-s SOCKET] %s %s [--sem SEM] [--scope SCOPE] [--json]\n%s"
	         "INDEX is a flat row-major index or comma-separated coordinates (e.g. 2,5).\n"
	         "Values are parsed in the tile's dtype (decimal, 0x hex for integers).\n"
	         "SEM: %s (default relaxed). SCOPE: %s (default gpu).\n"
	         "--json: %s, INDEX as a flat index.\n",
	         cmd, args, what, sem_list(sems, sizeof sems, ", ", rk, op),
	         scope_list(scopes, sizeof scopes, ", "), json_what);
	int npos = kind == ELEM_CAS ? 4 : kind == ELEM_LOAD ? 2 : 3;
	cli_args a;
	int rc = cli_parse(argc, argv, op_opts, 3, npos, npos, usage, g, &a);
	if (rc >= 0)
		return rc;
	tileatom_op_options o;
	if ((rc = parse_sem_scope(cmd, &a, 0, &o)) >= 0)
		return rc;
	tileatom_client *c;
	if ((rc = cli_connect(g, &c)) != CLI_EXIT_OK)
		return rc;
	tileatom_error err = {0, ""};
	tileatom_tile_info info;
	if (tileatom_describe(c, a.pos[0], &info, &err) != TILEATOM_OK) {
		rc = lib_error(cmd, &err);
		goto out;
	}
	int64_t flat;
	if ((rc = parse_index(cmd, a.pos[1], &info, &flat)) >= 0)
		goto out;
	rc = CLI_EXIT_OK;
	uint64_t value[2] = {0, 0}, compare[2] = {0, 0}, old[2] = {0, 0};
	if (kind != ELEM_LOAD) {
		const char *vtext = kind == ELEM_CAS ? a.pos[3] : a.pos[2];
		if (kind == ELEM_CAS &&
		    tileatom_value_parse(info.dtype, a.pos[2], compare, &err) != TILEATOM_OK) {
			cli_error("%s: bad expected value: %s", cmd, err.message);
			rc = CLI_EXIT_USAGE;
			goto out;
		}
		if (tileatom_value_parse(info.dtype, vtext, value, &err) != TILEATOM_OK) {
			cli_error("%s: bad value: %s", cmd, err.message);
			rc = CLI_EXIT_USAGE;
			goto out;
		}
	}
	int st;
	if (kind == ELEM_LOAD || kind == ELEM_STORE) {
		tileatom_array index = tileatom_scalar(TILEATOM_INT64, &flat);
		tileatom_addr addr = {TILEATOM_ADDR_FLAT, NULL, 0, 1, &index};
		tileatom_op_result res;
		if (kind == ELEM_LOAD) {
			st = tileatom_atomic_load(c, info.name, NULL, &addr, &o, old, sizeof(old),
			                          &res, &err);
		} else {
			tileatom_array v = tileatom_scalar(info.dtype, value);
			st = tileatom_atomic_store(c, info.name, NULL, &addr, &v, &o, &res, &err);
		}
		if (st == TILEATOM_OK && res.skipped) {
			/* Only when the tile was replaced by a smaller one since it was described.
			 */
			st = err.code = TILEATOM_E_OUT_OF_RANGE;
			snprintf(err.message, sizeof(err.message),
			         "index %" PRId64 " is outside tile '%s'", flat, info.name);
		}
	} else {
		st = tileatom_atomic_at(c, info.name, op, flat, info.dtype, value,
		                        kind == ELEM_CAS ? compare : NULL, &o, old, &err);
	}
	if (st != TILEATOM_OK) {
		rc = lib_error(cmd, &err);
		goto out;
	}
	bool swapped =
	    kind != ELEM_CAS || memcmp(old, compare, tileatom_dtype_size(info.dtype)) == 0;
	if (a.value[2]) {
		json_object *jo = json_object_new_object();
		bool ok = cli_json_add(jo, "tile", json_object_new_string(info.name)) &&
		          cli_json_add(jo, "index", json_object_new_int64(flat));
		if (ok && (kind == ELEM_LOAD || kind == ELEM_STORE))
			ok = cli_json_add(
			    jo, "value",
			    cli_json_value(info.dtype, kind == ELEM_LOAD ? old : value));
		else if (ok)
			ok = cli_json_add(jo, "old", cli_json_value(info.dtype, old));
		if (ok && kind == ELEM_CAS)
			ok = cli_json_add(jo, "swapped", json_object_new_boolean(swapped));
		rc = cli_json_print(cmd, cli_json_done(jo, ok));
	} else if (kind != ELEM_STORE) {
		char buf[64];
		tileatom_value_format(info.dtype, old, buf, sizeof(buf));
		printf("%s\n", buf);
	}
	if (rc == CLI_EXIT_OK && !swapped)
		rc = CLI_EXIT_CAS_FAILED;
out:
	tileatom_close(c);
	return rc;
}

/* ---- dispatch ----------------------------------------------------------------------- */

/* One subcommand. */
typedef struct cli_command {
	const char *name;                                 /* as typed */
	int (*run)(int argc, char **argv, cli_global *g); /* argv[0] is the name */
} cli_command;

static const cli_command commands[] = {
    {"ping", cmd_ping},    {"stats", cmd_stats},   {"create", cmd_create},
    {"ls", cmd_ls},        {"info", cmd_info},     {"rm", cmd_rm},
    {"get", cmd_get},      {"hist", cli_cmd_hist}, {"add", cmd_element},
    {"sub", cmd_element},  {"min", cmd_element},   {"max", cmd_element},
    {"xchg", cmd_element}, {"exch", cmd_element},  {"and", cmd_element},
    {"or", cmd_element},   {"xor", cmd_element},   {"cas", cmd_element},
    {"load", cmd_element}, {"store", cmd_element}, {"snapshot", cmd_snapshot},
};

int main(int argc, char **argv)
{
	cli_global g = {NULL, CLI_CONNECT_TIMEOUT_MS, NULL};
	int64_t ms;
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			print_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			printf("tileatom-cli %s\n", tileatom_version());
			return CLI_EXIT_OK;
		}
		/* the global options that take a value: -s, -t, --auth-file (k = 0, 1, 2) */
		static const char *const names[][2] = {
		    {"-s", "--socket"}, {"-t", "--timeout"}, {"--auth-file", "--auth-file"}};
		const char *val = NULL;
		int k = 0;
		for (; k < 3; k++) {
			size_t len = strlen(names[k][1]);
			if (strcmp(a, names[k][0]) == 0 || strcmp(a, names[k][1]) == 0)
				break;
			if (strncmp(a, names[k][1], len) == 0 && a[len] == '=') {
				val = a + len + 1;
				break;
			}
		}
		if (k == 3 && a[0] == '-') {
			cli_error("unknown option '%s' (see 'tileatom-cli --help')", a);
			return CLI_EXIT_USAGE;
		}
		if (k == 3)
			break;
		if (!val) {
			if (i + 1 >= argc) {
				cli_error("option %s needs a value", a);
				return CLI_EXIT_USAGE;
			}
			val = argv[++i];
		}
		if (k == 0) {
			g.socket = val;
		} else if (k == 2) {
			g.auth_file = val;
		} else if (cli_parse_counts(val, 1, &ms) != 1 || ms > INT_MAX) {
			cli_error("bad timeout '%s' (milliseconds)", val);
			return CLI_EXIT_USAGE;
		} else {
			g.timeout_ms = (int)ms;
		}
	}
	if (i >= argc) {
		print_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
		if (strcmp(argv[i], commands[k].name) == 0)
			return commands[k].run(argc - i, argv + i, &g);
	cli_error("unknown command '%s' (see 'tileatom-cli --help')", argv[i]);
	return CLI_EXIT_USAGE;
}

/* check_operator.c: what a newcomer and an operator meet, end to end against real
 * tileatomd processes (CPU backend): tileatom-cli --json on every command that prints data
 * (parsed back with json-c, exact values), the ls header, stats without GPU-only fields on
 * the CPU backend, the Prometheus endpoint (--metrics: exact counters after a known
 * sequence of requests, the same numbers as the Stats request, 404/405, loopback only),
 * and the messages and exit statuses without XDG_RUNTIME_DIR (tileatomd: 1, a socket
 * problem; tileatom-cli: which socket it tried and why). */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_client_util.h"
#include "registry.h" /* TA_TILE_BOOKKEEPING: what stats counts per tile besides its memory */
#include "tileatom.h"

/* The daemon shared by the CLI tests. */
static tcu_daemon D;

/* What the daemon counts for a tile of bytes bytes: its record and hash share, and its
 * memory as the backend holds it (the CPU backend's heap chunk; CUDA: the bytes). */
static uint64_t tile_cost(uint64_t bytes)
{
	return TA_TILE_BOOKKEEPING +
	       (strcmp(tcu_backend(), "cpu") == 0 ? TA_CPU_TILE_FOOTPRINT(bytes) : bytes);
}

/* Runs the CLI against D with args (a NULL-terminated list). */
#define CLI(res, stdin_text, ...)                                                                  \
	do {                                                                                       \
		const char *args_[] = {__VA_ARGS__, NULL};                                         \
		tcu_cli(&D, (stdin_text), args_, (res));                                           \
	} while (0)

/* Parses r's stdout as one JSON value followed by a newline (asserting both, and exit
 * status want); frees r. The caller puts the result. */
static json_object *parse_out(tcu_result *r, int want, const char *what)
{
	ck_assert_msg(r->status == want, "%s: status %d, expected %d (stderr: %s)", what, r->status,
	              want, r->err);
	ck_assert_msg(strcmp(r->err, "") == 0, "%s: stderr '%s'", what, r->err);
	size_t n = strlen(r->out);
	ck_assert_msg(n > 0 && strchr(r->out, '\n') == r->out + n - 1, "%s: not one line: '%s'",
	              what, r->out);
	json_tokener *tok = json_tokener_new();
	ck_assert_ptr_nonnull(tok);
	json_object *o = json_tokener_parse_ex(tok, r->out, (int)n - 1);
	enum json_tokener_error e = json_tokener_get_error(tok);
	ck_assert_msg(o != NULL && e == json_tokener_success, "%s: not JSON (%s): '%s'", what,
	              json_tokener_error_desc(e), r->out);
	json_tokener_free(tok);
	tcu_result_free(r);
	return o;
}

/* The member key of o (asserted present and of type t). */
static json_object *member(json_object *o, const char *key, json_type t)
{
	json_object *v = NULL;
	ck_assert_msg(json_object_object_get_ex(o, key, &v), "no key '%s' in %s", key,
	              json_object_to_json_string(o));
	ck_assert_msg(json_object_is_type(v, t), "'%s' has type %s in %s", key,
	              json_type_to_name(json_object_get_type(v)), json_object_to_json_string(o));
	return v;
}

/* Asserts o[key] is the string want. */
static void want_str(json_object *o, const char *key, const char *want)
{
	ck_assert_str_eq(json_object_get_string(member(o, key, json_type_string)), want);
}

/* Asserts o[key] is the integer want. */
static void want_int(json_object *o, const char *key, int64_t want)
{
	ck_assert_int_eq(json_object_get_int64(member(o, key, json_type_int)), want);
}

/* Asserts arr is an array of the integers want[0..n-1]. */
static void want_ints(json_object *arr, const int64_t *want, size_t n)
{
	ck_assert(json_object_is_type(arr, json_type_array));
	ck_assert_uint_eq(json_object_array_length(arr), n);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(json_object_get_int64(json_object_array_get_idx(arr, i)), want[i]);
}

START_TEST(test_json_commands)
{
	tcu_result r;
	CLI(&r, NULL, "create", "j1", "--dtype", "int32", "--shape", "2,3", "--fill", "-4");
	ck_assert_int_eq(r.status, 0);
	tcu_result_free(&r);

	CLI(&r, NULL, "info", "j1", "--json");
	json_object *o = parse_out(&r, 0, "info --json");
	want_str(o, "name", "j1");
	want_str(o, "dtype", "int32");
	want_ints(member(o, "shape", json_type_array), (const int64_t[]){2, 3}, 2);
	want_int(o, "elements", 6);
	want_int(o, "bytes", 24);
	json_object_put(o);

	CLI(&r, NULL, "add", "j1", "1,2", "10", "--json");
	o = parse_out(&r, 0, "add --json");
	want_str(o, "tile", "j1");
	want_int(o, "index", 5);
	want_int(o, "old", -4);
	json_object_put(o);

	CLI(&r, NULL, "cas", "j1", "5", "6", "1", "--json");
	o = parse_out(&r, 0, "cas --json swapped");
	want_int(o, "old", 6);
	ck_assert(json_object_get_boolean(member(o, "swapped", json_type_boolean)));
	json_object_put(o);
	CLI(&r, NULL, "cas", "j1", "5", "6", "2", "--json");
	o = parse_out(&r, 3, "cas --json not swapped"); /* exit 3 also with --json */
	want_int(o, "old", 1);
	ck_assert(!json_object_get_boolean(member(o, "swapped", json_type_boolean)));
	json_object_put(o);

	CLI(&r, NULL, "store", "j1", "0", "0x7fffffff", "--json");
	o = parse_out(&r, 0, "store --json");
	want_int(o, "index", 0);
	want_int(o, "value", 2147483647);
	json_object_put(o);
	CLI(&r, NULL, "load", "j1", "0", "--json");
	o = parse_out(&r, 0, "load --json");
	want_int(o, "value", 2147483647);
	json_object_put(o);

	CLI(&r, NULL, "get", "j1", "--json");
	o = parse_out(&r, 0, "get --json");
	want_str(o, "name", "j1");
	want_ints(member(o, "values", json_type_array),
	          (const int64_t[]){2147483647, -4, -4, -4, -4, 1}, 6);
	json_object_put(o);

	/* floats: exact shortest text, non-finite values as strings */
	CLI(&r, NULL, "create", "j2", "--dtype", "float64", "--shape", "3", "--fill", "0.1");
	ck_assert_int_eq(r.status, 0);
	tcu_result_free(&r);
	CLI(&r, NULL, "xchg", "j2", "2", "-inf");
	ck_assert_int_eq(r.status, 0);
	tcu_result_free(&r);
	CLI(&r, NULL, "get", "j2", "--json");
	ck_assert_str_eq(r.out, "{\"name\":\"j2\",\"dtype\":\"float64\",\"shape\":[3],\"values\":"
	                        "[0.10000000000000001,0.10000000000000001,"
	                        "\"-inf\"]}\n");
	o = parse_out(&r, 0, "get --json float64");
	json_object *vals = member(o, "values", json_type_array);
	ck_assert(json_object_get_double(json_object_array_get_idx(vals, 0)) == 0.1);
	json_object_put(o);

	/* hist */
	CLI(&r, NULL, "create", "j3", "--dtype", "uint32", "--shape", "4");
	tcu_result_free(&r);
	CLI(&r, "0 1 1 3 7 -1\n", "hist", "j3", "--json");
	o = parse_out(&r, 0, "hist --json");
	want_str(o, "tile", "j3");
	want_int(o, "numbers", 6);
	want_int(o, "added", 4);
	want_int(o, "outside", 2);
	json_object_put(o);
	CLI(&r, NULL, "get", "j3", "--json");
	o = parse_out(&r, 0, "get --json uint32");
	want_ints(member(o, "values", json_type_array), (const int64_t[]){1, 2, 0, 1}, 4);
	json_object_put(o);

	/* ls: an array of tiles sorted by name */
	CLI(&r, NULL, "ls", "--json");
	o = parse_out(&r, 0, "ls --json");
	ck_assert(json_object_is_type(o, json_type_array));
	ck_assert_uint_eq(json_object_array_length(o), 3);
	json_object *t = json_object_array_get_idx(o, 1);
	want_str(t, "name", "j2");
	want_str(t, "dtype", "float64");
	want_ints(member(t, "shape", json_type_array), (const int64_t[]){3}, 1);
	want_int(t, "bytes", 24);
	json_object_put(o);

	/* ping and stats */
	CLI(&r, NULL, "ping", "--json");
	o = parse_out(&r, 0, "ping --json");
	want_str(o, "backend", tcu_backend());
	want_str(o, "version", TILEATOM_CLIENT_VERSION);
	ck_assert(json_object_get_double(member(o, "rtt_ms", json_type_double)) >= 0);
	json_object_put(o);
	CLI(&r, NULL, "stats", "--json");
	o = parse_out(&r, 0, "stats --json");
	want_str(o, "backend", tcu_backend());
	want_int(o, "tiles", 3);
	want_int(o, "tile_bytes", 2 * tile_cost(24) + tile_cost(16)); /* bookkeeping counts */
	json_object *kinds = member(o, "kinds", json_type_object);
	json_object *hist = member(kinds, "indexed", json_type_object);
	/* indexed so far: add (1 element), 2 cas and xchg (1 each), hist (6 indices: 7 and -1
	 * go to the daemon too, whose bounds check skips them; skipped elements count) */
	want_int(hist, "requests", 5);
	want_int(hist, "errors", 0);
	want_int(hist, "elements", 1 + 1 + 1 + 1 + 6);
	json_object *buckets = member(hist, "latency_buckets", json_type_array);
	ck_assert_uint_eq(json_object_array_length(buckets),
	                  json_object_array_length(member(o, "latency_le_ns", json_type_array)) +
	                      1);
	int64_t sum = 0;
	for (size_t i = 0; i < json_object_array_length(buckets); i++)
		sum += json_object_get_int64(json_object_array_get_idx(buckets, i));
	ck_assert_int_eq(sum, 0); /* D runs without --metrics: requests are not timed */
	want_int(hist, "latency_ns", 0);
	if (strcmp(tcu_backend(), "cpu") == 0) {
		ck_assert(!json_object_object_get_ex(o, "compute_capability", NULL));
		ck_assert(!json_object_object_get_ex(o, "device_memory", NULL));
	}
	json_object_put(o);

	for (const char *const *n = (const char *const[]){"j1", "j2", "j3", NULL}; *n; n++) {
		CLI(&r, NULL, "rm", *n);
		ck_assert_int_eq(r.status, 0);
		tcu_result_free(&r);
	}
}
END_TEST

START_TEST(test_ls_header_and_stats_text)
{
	tcu_result r;
	CLI(&r, NULL, "ls");
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.out, "NAME\tDTYPE\tSHAPE\tBYTES\n");
	tcu_result_free(&r);
	CLI(&r, NULL, "create", "h1", "--dtype", "int64", "--shape", "2,2");
	tcu_result_free(&r);
	CLI(&r, NULL, "ls");
	ck_assert_str_eq(r.out, "NAME\tDTYPE\tSHAPE\tBYTES\nh1\tint64\t2,2\t32\n");
	tcu_result_free(&r);
	CLI(&r, NULL, "stats");
	ck_assert_int_eq(r.status, 0);
	if (strcmp(tcu_backend(), "cpu") == 0) {
		ck_assert_msg(!strstr(r.out, "compute_capability"), "stats: %s", r.out);
		ck_assert_msg(!strstr(r.out, "device_memory"), "stats: %s", r.out);
	}
	char want_bytes[64];
	snprintf(want_bytes, sizeof(want_bytes), "\ntiles: 1\ntile_bytes: %" PRIu64 "\n",
	         tile_cost(32));
	ck_assert_msg(strstr(r.out, want_bytes), "stats: %s", r.out);
	ck_assert_msg(strstr(r.out, "\nREQUEST\tREQUESTS\tERRORS\tELEMENTS\tBYTES_IN\tBYTES_OUT\t"
	                            "MEAN_US\n"),
	              "stats: %s", r.out);
	ck_assert_msg(strstr(r.out, "\ncreate\t"), "stats: %s", r.out);
	tcu_result_free(&r);
	CLI(&r, NULL, "rm", "h1");
	tcu_result_free(&r);
}
END_TEST

/* The port a daemon serves metrics on, from its log line "serving metrics on ... (port N)". */
static int metrics_port(const tcu_daemon *d)
{
	FILE *f = fopen(d->log, "r");
	ck_assert_ptr_nonnull(f);
	char line[512];
	int port = -1;
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "serving metrics on ");
		if (p && (p = strstr(p, "(port ")))
			port = atoi(p + 6);
	}
	fclose(f);
	ck_assert_msg(port > 0, "no metrics port in %s", d->log);
	return port;
}

/* Sends request (a whole HTTP/1.0 request) to 127.0.0.1:port and returns the whole
 * response (malloc'd, NUL-terminated). */
static char *http(int port, const char *request)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: %s",
	              strerror(errno));
	size_t len = strlen(request);
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, request + off, len - off);
		ck_assert_msg(n > 0, "write: %s", strerror(errno));
		off += (size_t)n;
	}
	size_t cap = 65536, used = 0;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	for (;;) {
		if (used + 1 == cap) {
			cap *= 2;
			char *bigger = realloc(buf, cap);
			ck_assert_ptr_nonnull(bigger);
			buf = bigger;
		}
		ssize_t n = read(fd, buf + used, cap - used - 1);
		ck_assert_msg(n >= 0, "read: %s", strerror(errno));
		if (n == 0)
			break;
		used += (size_t)n;
	}
	buf[used] = '\0';
	close(fd);
	return buf;
}

/* The value of the sample line "series VALUE" in an exposition text (asserted present). */
static uint64_t sample(const char *text, const char *series)
{
	size_t n = strlen(series);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtoull(p + n + 1, NULL, 10);
	}
	ck_abort_msg("no sample %s in:\n%s", series, text);
	return 0;
}

/* A counter of request kind in the exposition text. */
static uint64_t kind_sample(const char *text, const char *metric, const char *kind)
{
	char series[160];
	snprintf(series, sizeof(series), "%s{backend=\"%s\",request=\"%s\"}", metric, tcu_backend(),
	         kind);
	return sample(text, series);
}

START_TEST(test_metrics_scrape)
{
	tcu_daemon m;
	/* --batch-min 2: pipelined requests go to the workers in runs whose small plans are
	 * applied and answered as a group; they must be counted all the same */
	const char *extra[] = {"--metrics", "127.0.0.1:0", "--batch-min", "2", NULL};
	ck_assert(tcu_daemon_start(&m, extra));
	int port = metrics_port(&m);

	/* A known sequence on one connection. tcu_daemon_start connected once to see the
	 * daemon up: that was a hello on another connection (counted too). */
	tileatom_client *c;
	tileatom_error err = {0, ""};
	ck_assert_int_eq(tileatom_connect(m.socket, 5000, &c, &err), TILEATOM_OK);
	int64_t shape[1] = {8};
	ck_assert_int_eq(tileatom_create(c, "m", TILEATOM_INT32, 1, shape, NULL, NULL, &err),
	                 TILEATOM_OK);
	tileatom_tile_info info;
	ck_assert_int_eq(tileatom_describe(c, "absent", &info, &err), TILEATOM_E_NOT_FOUND);
	int32_t keys[5] = {0, 1, 1, 7, 3};
	tileatom_array idx = tileatom_vector(TILEATOM_INT32, 5, keys);
	int32_t one = 1;
	tileatom_array ones = tileatom_scalar(TILEATOM_INT32, &one);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(tileatom_indexed(c, "m", TILEATOM_OP_ADD, NULL, 1, &idx, true,
		                                  &ones, NULL, NULL, NULL, &err),
		                 TILEATOM_OK);
	/* 40 single-element adds, pipelined */
	int32_t key2 = 2;
	tileatom_array idx2 = tileatom_vector(TILEATOM_INT32, 1, &key2);
	for (int i = 0; i < 40; i++)
		ck_assert_int_eq(tileatom_submit_indexed(c, "m", TILEATOM_OP_ADD, NULL, 1, &idx2,
		                                         true, &ones, NULL, NULL, NULL, &err),
		                 TILEATOM_OK);
	for (int i = 0; i < 40; i++) {
		tileatom_response resp;
		ck_assert_int_eq(tileatom_collect(c, &resp, &err), TILEATOM_OK);
	}
	int32_t bins[8];
	ck_assert_int_eq(tileatom_read(c, "m", NULL, bins, sizeof(bins), NULL, &err), TILEATOM_OK);
	ck_assert_int_eq(bins[1], 6);
	ck_assert_int_eq(bins[2], 40);

	char *text = http(port, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
	ck_assert_msg(strncmp(text, "HTTP/1.0 200", 12) == 0 ||
	                  strncmp(text, "HTTP/1.1 200", 12) == 0,
	              "response: %.200s", text);
	ck_assert_msg(strstr(text, "Content-Type: text/plain; version=0.0.4"), "%.400s", text);
	char *body = strstr(text, "\r\n\r\n");
	ck_assert_ptr_nonnull(body);
	body += 4;
	ck_assert_uint_eq(kind_sample(body, "tileatom_requests_total", "create"), 1);
	ck_assert_uint_eq(kind_sample(body, "tileatom_request_errors_total", "create"), 0);
	ck_assert_uint_eq(kind_sample(body, "tileatom_requests_total", "describe"), 1);
	ck_assert_uint_eq(kind_sample(body, "tileatom_request_errors_total", "describe"), 1);
	ck_assert_uint_eq(kind_sample(body, "tileatom_requests_total", "indexed"), 43);
	ck_assert_uint_eq(kind_sample(body, "tileatom_request_errors_total", "indexed"), 0);
	ck_assert_uint_eq(kind_sample(body, "tileatom_elements_total", "indexed"), 55);
	ck_assert_uint_eq(kind_sample(body, "tileatom_requests_total", "read"), 1);
	ck_assert_uint_eq(kind_sample(body, "tileatom_elements_total", "read"), 8);
	ck_assert_uint_eq(kind_sample(body, "tileatom_requests_total", "hello"), 2);
	ck_assert_uint_eq(kind_sample(body, "tileatom_requests_total", "stats"), 0);
	ck_assert_uint_eq(kind_sample(body, "tileatom_requests_total", "invalid"), 0);
	/* every indexed request is in the histogram exactly once */
	char series[200];
	snprintf(series, sizeof(series),
	         "tileatom_request_duration_seconds_count{backend=\"%s\",request=\"indexed\"}",
	         tcu_backend());
	ck_assert_uint_eq(sample(body, series), 43);
	snprintf(series, sizeof(series),
	         "tileatom_request_duration_seconds_bucket{backend=\"%s\",request=\"indexed\","
	         "le=\"+Inf\"}",
	         tcu_backend());
	ck_assert_uint_eq(sample(body, series), 43);
	ck_assert_uint_eq(sample(body, "tileatom_tiles"), 1);
	ck_assert_uint_eq(sample(body, "tileatom_tile_bytes"), tile_cost(32));
	ck_assert_uint_eq(sample(body, "tileatom_tile_bytes_limit"), UINT64_C(8) << 30);
	ck_assert_uint_eq(sample(body, "tileatom_connections"), 1);
	uint64_t in_bytes = kind_sample(body, "tileatom_request_bytes_total", "indexed");
	uint64_t out_bytes = kind_sample(body, "tileatom_response_bytes_total", "indexed");
	ck_assert_uint_gt(in_bytes, 3 * 5 * 4 + 40 * 4); /* the indices at least */
	free(text);

	/* tileatom-cli stats reads the same counters (the stats request itself comes after). */
	tileatom_stats_info s;
	tileatom_kind_stats *kinds = NULL;
	size_t nk = 0;
	ck_assert_int_eq(tileatom_stats_kinds(c, &s, &kinds, &nk, &err), TILEATOM_OK);
	bool seen = false;
	for (size_t i = 0; i < nk; i++) {
		if (strcmp(kinds[i].kind, "indexed") != 0)
			continue;
		seen = true;
		ck_assert_uint_eq(kinds[i].requests, 43);
		ck_assert_uint_eq(kinds[i].elements, 55);
		ck_assert_uint_eq(kinds[i].bytes_in, in_bytes);
		ck_assert_uint_eq(kinds[i].bytes_out, out_bytes);
		uint64_t total = 0;
		for (int b = 0; b < kinds[i].nbuckets; b++)
			total += kinds[i].bucket[b];
		ck_assert_uint_eq(total, 43);
		ck_assert_uint_eq(kinds[i].le_ns[kinds[i].nbuckets - 1], UINT64_MAX);
	}
	ck_assert(seen);
	tileatom_free(kinds);
	tileatom_close(c);

	/* Only GET /metrics. */
	text = http(port, "GET /other HTTP/1.0\r\n\r\n");
	ck_assert_msg(strstr(text, " 404 "), "%.200s", text);
	free(text);
	text = http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
	ck_assert_msg(strstr(text, " 405 "), "%.200s", text);
	free(text);

	ck_assert_int_eq(tcu_daemon_stop(&m, 20000), 0);
	tcu_daemon_cleanup(&m);
}
END_TEST

/* Runs the daemon binary with args, without XDG_RUNTIME_DIR, as nobody when root (so that
 * the root default /run is not used); stderr into err (n bytes). Returns the exit status,
 * or -1 when it could not run as another user (the caller skips). */
static int run_daemon_no_xdg(const char *const *args, char *err, size_t n)
{
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		dup2(pfd[1], 2);
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
		}
		unsetenv("XDG_RUNTIME_DIR");
		if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
			_exit(125);
		const char *argv[16];
		int k = 0;
		argv[k++] = tcu_daemon_path();
		for (; args[k - 1] && k < 15; k++)
			argv[k] = args[k - 1];
		argv[k] = NULL;
		execv(argv[0], (char *const *)argv);
		_exit(126); /* not executable by this user */
	}
	close(pfd[1]);
	size_t used = 0;
	ssize_t got;
	while (used + 1 < n && (got = read(pfd[0], err + used, n - used - 1)) > 0)
		used += (size_t)got;
	err[used] = '\0';
	close(pfd[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	int code = WEXITSTATUS(st);
	return code == 125 || code == 126 ? -1 : code;
}

START_TEST(test_no_xdg_runtime_dir)
{
	/* tileatomd: no socket path is a socket problem, exit 1, naming the cure */
	char err[2048];
	const char *args[] = {"--backend", "cpu", NULL};
	int st = run_daemon_no_xdg(args, err, sizeof(err));
	if (st >= 0) {
		ck_assert_msg(st == 1, "exit %d, stderr: %s", st, err);
		ck_assert_msg(strstr(err, "XDG_RUNTIME_DIR is not set"), "stderr: %s", err);
		ck_assert_msg(strstr(err, "--socket PATH"), "stderr: %s", err);
	} else {
		fprintf(stderr, "check_operator: cannot run tileatomd as another user; daemon part "
		                "skipped\n");
	}
	/* a usage error stays 2 */
	const char *bad[] = {"--no-such-option", NULL};
	st = run_daemon_no_xdg(bad, err, sizeof(err));
	if (st >= 0)
		ck_assert_msg(st == 2, "exit %d, stderr: %s", st, err);

	/* tileatom-cli: says which socket it tried and why */
	unsetenv("XDG_RUNTIME_DIR");
	unsetenv("TILEATOM_SOCKET");
	char def[4096];
	ck_assert_int_eq(tileatom_default_socket(def, sizeof(def)), 0);
	ck_assert_str_eq(def, "/run/tileatom/tileatomd.sock");
	struct stat sb;
	if (stat(def, &sb) == 0)
		return; /* a system daemon runs here: nothing to fail against */
	tcu_result r;
	const char *argv[] = {tcu_cli_path(), "ping", NULL};
	tcu_run(D.dir, NULL, argv, &r);
	ck_assert_int_eq(r.status, 1);
	ck_assert_msg(strstr(r.err, "cannot connect to /run/tileatom/tileatomd.sock: "),
	              "stderr: %s", r.err);
	ck_assert_msg(strstr(r.err, "the system daemon's socket, tried because XDG_RUNTIME_DIR is "
	                            "not set"),
	              "stderr: %s", r.err);
	ck_assert_msg(strstr(r.err, "give -s SOCKET"), "stderr: %s", r.err);
	tcu_result_free(&r);
}
END_TEST

START_TEST(test_metrics_refused)
{
	/* a non-loopback address needs --allow-remote: the daemon does not start */
	tcu_result r;
	char sock[400];
	snprintf(sock, sizeof(sock), "%s/refused.sock", D.dir);
	const char *argv[] = {tcu_daemon_path(), "--socket",  sock, "--backend", "cpu",
	                      "--metrics",       "0.0.0.0:0", NULL};
	tcu_run(D.dir, NULL, argv, &r);
	ck_assert_int_eq(r.status, 1);
	ck_assert_msg(strstr(r.err, "refusing to serve metrics on 0.0.0.0:0: not a loopback "
	                            "address"),
	              "stderr: %s", r.err);
	tcu_result_free(&r);
	/* the same key in a configuration file */
	char conf[400];
	snprintf(conf, sizeof(conf), "%s/metrics.conf", D.dir);
	const char *text = "[tileatomd]\nmetrics = 127.0.0.1:0\n";
	ck_assert(tcu_write_file(conf, text, strlen(text)));
	tcu_daemon m;
	const char *extra[] = {"--config", conf, NULL};
	ck_assert(tcu_daemon_start(&m, extra));
	char *got = http(metrics_port(&m), "GET /metrics HTTP/1.0\r\n\r\n");
	ck_assert_msg(strstr(got, "\ntileatom_tiles 0\n"), "%.300s", got);
	free(got);
	ck_assert_int_eq(tcu_daemon_stop(&m, 20000), 0);
	tcu_daemon_cleanup(&m);
	/* a malformed address is a usage error */
	const char *argv2[] = {tcu_daemon_path(), "--socket", sock, "--metrics", "9100", NULL};
	tcu_run(D.dir, NULL, argv2, &r);
	ck_assert_int_eq(r.status, 2);
	ck_assert_msg(strstr(r.err, "--metrics: '9100' is not HOST:PORT"), "stderr: %s", r.err);
	tcu_result_free(&r);
}
END_TEST

/* Opens a TCP connection to 127.0.0.1:port (receives time out after 20 s). */
static int tcp_open(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	struct timeval tv = {20, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

START_TEST(test_metrics_trickle_bound)
{
	/* 16 connections trickle a request line, a byte each per 500 ms (never idle long
	 * enough to be closed): a scrape beside them is answered (given 20 s, which only a
	 * daemon whose connection slots they fill would need) */
	tcu_daemon m;
	const char *extra[] = {"--metrics", "127.0.0.1:0", NULL};
	ck_assert(tcu_daemon_start(&m, extra));
	int port = metrics_port(&m);
	int slow[16];
	for (int i = 0; i < 16; i++) {
		slow[i] = tcp_open(port);
		ck_assert_int_eq(write(slow[i], "G", 1), 1);
	}
	int scrape = tcp_open(port);
	const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	ck_assert_int_eq(write(scrape, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	char head[16] = "";
	size_t got = 0;
	for (int round = 0; round < 40 && got < 12; round++) {
		struct pollfd pfd = {scrape, POLLIN, 0};
		if (poll(&pfd, 1, 500) > 0) {
			ssize_t n = read(scrape, head + got, 12 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
			continue;
		}
		for (int i = 0; i < 16; i++)
			ck_assert_int_eq(write(slow[i], "E", 1), 1);
	}
	head[got] = '\0';
	ck_assert_msg(strcmp(head, "HTTP/1.0 200") == 0 || strcmp(head, "HTTP/1.1 200") == 0,
	              "scrape beside 16 trickling connections: '%s'", head);
	close(scrape);
	/* once they stop, the daemon closes each of them (EOF, well before 20 s) */
	for (int i = 0; i < 16; i++) {
		char c;
		ck_assert_int_eq(read(slow[i], &c, 1), 0);
		close(slow[i]);
	}
	ck_assert_int_eq(tcu_daemon_stop(&m, 20000), 0);
}
END_TEST

static Suite *operator_suite(void)
{
	Suite *s = suite_create("operator");
	TCase *tc = tcase_create("operator");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_json_commands);
	tcase_add_test(tc, test_ls_header_and_stats_text);
	tcase_add_test(tc, test_metrics_scrape);
	tcase_add_test(tc, test_no_xdg_runtime_dir);
	tcase_add_test(tc, test_metrics_refused);
	tcase_add_test(tc, test_metrics_trickle_bound);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (!tcu_daemon_start(&D, NULL)) {
		fprintf(stderr, "cannot start %s\n", tcu_daemon_path());
		return EXIT_FAILURE;
	}
	SRunner *sr = srunner_create(operator_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	int st = tcu_daemon_stop(&D, 20000);
	if (st != 0) {
		fprintf(stderr, "tileatomd exit status %d\n", st);
		tcu_daemon_dump_log(&D);
		failed++;
	}
	tcu_daemon_cleanup(&D);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

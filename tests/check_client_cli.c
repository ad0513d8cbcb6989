/* check_client_cli.c: end-to-end tests of tileatom-cli, run as a subprocess against a real
 * tileatomd (CPU backend) on a temporary socket. Every subcommand is checked by its exact
 * stdout, stderr and exit status: ping, create/ls/info/rm, get (plain and JSON), each
 * single-element op and cas (exit 0 vs 3), load/store, --help everywhere, usage errors
 * (exit 2) and runtime errors (exit 1), and hist with and without --range against bins
 * computed independently here (integer arithmetic on dyadic inputs; a few cases whose
 * expected bins come from numpy.histogram); --auth-file and TILEATOM_AUTH_FILE against a
 * daemon that requires authentication over TCP, and private tiles (create --private)
 * seen from the Unix socket and from TCP; ls and tileatom_list over many pages. */
#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_client_util.h"
#include "tileatom.h"

/* The daemon shared by the suite. */
static tcu_daemon D;

/* Runs the CLI with args (a NULL-terminated list) and optional stdin text. */
#define CLI(res, stdin_text, ...)                                                                  \
	do {                                                                                       \
		const char *args_[] = {__VA_ARGS__, NULL};                                         \
		tcu_cli(&D, (stdin_text), args_, (res));                                           \
	} while (0)

/* Asserts status, stdout and (when not NULL) stderr of a run, then frees it. */
static void expect(tcu_result *r, int status, const char *out, const char *err, const char *what)
{
	ck_assert_msg(r->status == status, "%s: status %d, expected %d (stderr: %s)", what,
	              r->status, status, r->err);
	if (out)
		ck_assert_msg(strcmp(r->out, out) == 0, "%s: stdout '%s', expected '%s'", what,
		              r->out, out);
	if (err)
		ck_assert_msg(strcmp(r->err, err) == 0, "%s: stderr '%s', expected '%s'", what,
		              r->err, err);
	tcu_result_free(r);
}

/* Asserts status and that stderr contains needle. */
static void expect_err(tcu_result *r, int status, const char *needle, const char *what)
{
	ck_assert_msg(r->status == status, "%s: status %d, expected %d (stderr: %s)", what,
	              r->status, status, r->err);
	ck_assert_msg(strstr(r->err, needle) != NULL, "%s: stderr '%s' lacks '%s'", what, r->err,
	              needle);
	ck_assert_msg(strncmp(r->err, "tileatom-cli: ", 14) == 0, "%s: stderr '%s'", what, r->err);
	tcu_result_free(r);
}

START_TEST(test_cli_ping)
{
	tcu_result r;
	CLI(&r, NULL, "ping");
	ck_assert_int_eq(r.status, 0);
	ck_assert_msg(strncmp(r.out, "pong from tileatomd ", 20) == 0, "stdout: %s", r.out);
	char want_backend[64];
	snprintf(want_backend, sizeof(want_backend), "(backend %s)", tcu_backend());
	ck_assert_msg(strstr(r.out, want_backend), "stdout: %s", r.out);
	ck_assert_str_eq(r.err, "");
	tcu_result_free(&r);
	/* The socket may also follow the command. */
	const char *argv[] = {tcu_cli_path(), "ping", "-s", D.socket, NULL};
	tcu_run(D.dir, NULL, argv, &r);
	ck_assert_int_eq(r.status, 0);
	tcu_result_free(&r);
	/* Through $TILEATOM_SOCKET. */
	setenv("TILEATOM_SOCKET", D.socket, 1);
	const char *argv2[] = {tcu_cli_path(), "ping", NULL};
	tcu_run(D.dir, NULL, argv2, &r);
	unsetenv("TILEATOM_SOCKET");
	ck_assert_int_eq(r.status, 0);
	tcu_result_free(&r);
}
END_TEST

START_TEST(test_cli_tiles)
{
	tcu_result r;
	CLI(&r, NULL, "create", "c1", "--dtype", "int32", "--shape", "4,3", "--fill", "7");
	expect(&r, 0, "", "", "create");
	CLI(&r, NULL, "ls");
	ck_assert_int_eq(r.status, 0);
	ck_assert_msg(strstr(r.out, "c1\tint32\t4,3\t48\n"), "ls: %s", r.out);
	tcu_result_free(&r);
	CLI(&r, NULL, "info", "c1");
	expect(&r, 0, "name: c1\ndtype: int32\nshape: 4,3\nelements: 12\nbytes: 48\n", "", "info");
	CLI(&r, NULL, "get", "c1");
	expect(&r, 0, "7\n7\n7\n7\n7\n7\n7\n7\n7\n7\n7\n7\n", "", "get");
	CLI(&r, NULL, "create", "c1", "--dtype=int32", "--shape=2");
	expect_err(&r, 1, "c1", "create twice");
	CLI(&r, NULL, "rm", "c1");
	expect(&r, 0, "", "", "rm");
	CLI(&r, NULL, "info", "c1");
	expect_err(&r, 1, "c1", "info after rm");
	CLI(&r, NULL, "rm", "c1");
	expect_err(&r, 1, "c1", "rm twice");
	CLI(&r, NULL, "ls");
	ck_assert_int_eq(r.status, 0);
	ck_assert_msg(!strstr(r.out, "c1\t"), "ls after rm: %s", r.out);
	tcu_result_free(&r);
}
END_TEST

/* ls and tileatom_list over many pages: a daemon whose 4 KiB frames hold 29 tiles of 64-character
 * names a page lists 300 of them in 11 pages, each name once and in order. */
START_TEST(test_cli_ls_pages)
{
	tcu_daemon A;
	const char *const extra[] = {"--max-frame", "4K", NULL};
	ck_assert(tcu_daemon_start(&A, extra));
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	CK(tileatom_connect(A.socket, 10000, &c, &e), e);
	enum { N = 300 };
	char name[80];
	const int64_t one = 1;
	for (int i = N - 1; i >= 0; i--) {
		snprintf(name, sizeof(name), "t%063d", i);
		CK(tileatom_create(c, name, TILEATOM_INT32, 1, &one, NULL, NULL, &e), e);
	}
	tileatom_tile_info *tiles = NULL;
	size_t n = 0;
	CK(tileatom_list(c, &tiles, &n, &e), e);
	ck_assert_uint_eq(n, N);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "t%063d", i);
		ck_assert_str_eq(tiles[i].name, name);
	}
	tileatom_free(tiles);
	/* one page of 7, then the page after it */
	char next[TILEATOM_LIST_CURSOR_MAX];
	CK(tileatom_list_page(c, "", 7, &tiles, NULL, &n, next, &e), e);
	ck_assert_uint_eq(n, 7);
	snprintf(name, sizeof(name), "t%063d", 6);
	ck_assert_str_eq(tiles[6].name, name);
	tileatom_free(tiles);
	CK(tileatom_list_page(c, next, 100, &tiles, NULL, &n, next, &e), e);
	ck_assert_uint_eq(n, 29); /* the daemon's page is at most what a frame holds */
	snprintf(name, sizeof(name), "t%063d", 7);
	ck_assert_str_eq(tiles[0].name, name);
	tileatom_free(tiles);
	tileatom_close(c);

	/* the CLI, plain and --json: exactly every tile */
	size_t cap = 400 * N + 64;
	char *want = malloc(cap), *want_json = malloc(cap);
	ck_assert(want && want_json);
	size_t w = (size_t)snprintf(want, cap, "NAME\tDTYPE\tSHAPE\tBYTES\n");
	size_t wj = (size_t)snprintf(want_json, cap, "[");
	for (int i = 0; i < N; i++) {
		w += (size_t)snprintf(want + w, cap - w, "t%063d\tint32\t1\t4\n", i);
		wj += (size_t)snprintf(want_json + wj, cap - wj,
		                       "%s{\"name\":\"t%063d\",\"dtype\":\"int32\",\"shape\":[1],"
		                       "\"bytes\":4}",
		                       i ? "," : "", i);
	}
	snprintf(want_json + wj, cap - wj, "]\n");
	tcu_result r;
	const char *const ls[] = {"ls", NULL};
	tcu_cli(&A, NULL, ls, &r);
	expect(&r, 0, want, "", "ls over pages");
	const char *const ls_json[] = {"ls", "--json", NULL};
	tcu_cli(&A, NULL, ls_json, &r);
	expect(&r, 0, want_json, "", "ls --json over pages");
	free(want);
	free(want_json);
	ck_assert_int_eq(tcu_daemon_stop(&A, 10000), 0);
	tcu_daemon_cleanup(&A);
}
END_TEST

START_TEST(test_cli_get_json)
{
	tcu_result r;
	CLI(&r, NULL, "create", "g", "--dtype", "float32", "--shape", "2,2");
	expect(&r, 0, "", "", "create");
	CLI(&r, NULL, "xchg", "g", "0", "nan");
	expect(&r, 0, "0\n", "", "xchg nan");
	CLI(&r, NULL, "xchg", "g", "1", "inf");
	expect(&r, 0, "0\n", "", "xchg inf");
	CLI(&r, NULL, "xchg", "g", "1,1", "-1.5");
	expect(&r, 0, "0\n", "", "xchg -1.5");
	CLI(&r, NULL, "get", "g");
	expect(&r, 0, "nan\ninf\n0\n-1.5\n", "", "get");
	CLI(&r, NULL, "get", "g", "--json");
	expect(&r, 0,
	       "{\"name\":\"g\",\"dtype\":\"float32\",\"shape\":[2,2],\"values\":[\"nan\","
	       "\"inf\",0,-1.5]}\n",
	       "", "get --json");
	CLI(&r, NULL, "create", "gi", "--dtype", "uint64", "--shape", "3", "--fill",
	    "18446744073709551615");
	expect(&r, 0, "", "", "create uint64");
	CLI(&r, NULL, "get", "--json", "gi");
	expect(&r, 0,
	       "{\"name\":\"gi\",\"dtype\":\"uint64\",\"shape\":[3],\"values\":"
	       "[18446744073709551615,18446744073709551615,18446744073709551615]}\n",
	       "", "get --json uint64");
	CLI(&r, NULL, "rm", "g");
	expect(&r, 0, "", "", "rm");
	CLI(&r, NULL, "rm", "gi");
	expect(&r, 0, "", "", "rm");
}
END_TEST

START_TEST(test_cli_ops)
{
	tcu_result r;
	CLI(&r, NULL, "create", "o", "--dtype", "int32", "--shape", "3,4");
	expect(&r, 0, "", "", "create");
	/* Element (1,2) is flat 6. */
	CLI(&r, NULL, "add", "o", "1,2", "5");
	expect(&r, 0, "0\n", "", "add");
	CLI(&r, NULL, "sub", "o", "6", "2", "--sem", "acq_rel", "--scope", "sys");
	expect(&r, 0, "5\n", "", "sub");
	CLI(&r, NULL, "min", "o", "6", "-10", "--sem=acquire");
	expect(&r, 0, "3\n", "", "min");
	CLI(&r, NULL, "max", "o", "6", "100", "--scope", "cta");
	expect(&r, 0, "-10\n", "", "max");
	CLI(&r, NULL, "xchg", "o", "6", "12", "--sem", "release");
	expect(&r, 0, "100\n", "", "xchg");
	CLI(&r, NULL, "and", "o", "6", "10");
	expect(&r, 0, "12\n", "", "and");
	CLI(&r, NULL, "or", "o", "6", "3", "--scope", "cluster");
	expect(&r, 0, "8\n", "", "or");
	CLI(&r, NULL, "xor", "o", "6", "0xff");
	expect(&r, 0, "11\n", "", "xor");
	CLI(&r, NULL, "get", "o");
	expect(&r, 0, "0\n0\n0\n0\n0\n0\n244\n0\n0\n0\n0\n0\n", "", "get after ops");
	/* cas: exit 0 when it swapped, 3 when not; the old value either way. */
	CLI(&r, NULL, "cas", "o", "2,3", "0", "9", "--sem", "acq_rel");
	expect(&r, 0, "0\n", "", "cas swaps");
	CLI(&r, NULL, "cas", "o", "11", "0", "9");
	expect(&r, 3, "9\n", "", "cas fails");
	CLI(&r, NULL, "cas", "o", "11", "9", "-1");
	expect(&r, 0, "9\n", "", "cas swaps again");
	/* load / store */
	CLI(&r, NULL, "load", "o", "6", "--sem", "acquire");
	expect(&r, 0, "244\n", "", "load");
	CLI(&r, NULL, "store", "o", "6", "1", "--sem", "release");
	expect(&r, 0, "", "", "store");
	CLI(&r, NULL, "load", "o", "1,2");
	expect(&r, 0, "1\n", "", "load after store");
	CLI(&r, NULL, "store", "o", "6", "1", "--sem", "acquire");
	expect_err(&r, 1, "store", "store acquire");
	CLI(&r, NULL, "get", "o", "--json");
	expect(&r, 0,
	       "{\"name\":\"o\",\"dtype\":\"int32\",\"shape\":[3,4],\"values\":[0,0,0,0,"
	       "0,0,1,0,0,0,0,-1]}\n",
	       "", "get --json");
	/* float tile: add and min with floats */
	CLI(&r, NULL, "create", "of", "--dtype", "float64", "--shape", "2", "--fill", "0.25");
	expect(&r, 0, "", "", "create float64");
	CLI(&r, NULL, "add", "of", "1", "0.5");
	expect(&r, 0, "0.25\n", "", "add float");
	CLI(&r, NULL, "min", "of", "1", "-inf");
	expect(&r, 0, "0.75\n", "", "min float");
	CLI(&r, NULL, "get", "of");
	expect(&r, 0, "0.25\n-inf\n", "", "get float");
	CLI(&r, NULL, "and", "of", "0", "1");
	expect_err(&r, 1, "and", "and on a float tile");
	CLI(&r, NULL, "rm", "o");
	expect(&r, 0, "", "", "rm");
	CLI(&r, NULL, "rm", "of");
	expect(&r, 0, "", "", "rm");
}
END_TEST

START_TEST(test_cli_errors)
{
	tcu_result r;
	CLI(&r, NULL, "create", "e", "--dtype", "int32", "--shape", "2,3");
	expect(&r, 0, "", "", "create");
	CLI(&r, NULL, "add", "e", "0", "1", "--sem", "seq_cst");
	expect_err(&r, 2, "seq_cst", "bad sem");
	CLI(&r, NULL, "add", "e", "0", "1", "--scope", "planet");
	expect_err(&r, 2, "planet", "bad scope");
	CLI(&r, NULL, "add", "e", "0", "1", "--bogus");
	expect_err(&r, 2, "--bogus", "unknown option");
	CLI(&r, NULL, "add", "e", "0");
	expect_err(&r, 2, "missing arguments", "missing value");
	CLI(&r, NULL, "add", "e", "0", "1", "2");
	expect_err(&r, 2, "unexpected argument", "extra argument");
	CLI(&r, NULL, "frobnicate");
	expect_err(&r, 2, "unknown command 'frobnicate'", "unknown command");
	CLI(&r, NULL, "add", "e", "abc", "1");
	expect_err(&r, 2, "bad index 'abc'", "bad index");
	CLI(&r, NULL, "add", "e", "0", "1.5");
	expect_err(&r, 2, "bad value", "bad value");
	CLI(&r, NULL, "add", "e", "6", "1");
	expect_err(&r, 1, "index 6 is outside tile 'e'", "index out of range");
	CLI(&r, NULL, "add", "e", "1,3", "1");
	expect_err(&r, 1, "coordinate 3 along axis 1", "coordinate out of range");
	CLI(&r, NULL, "add", "e", "1,1,1", "1");
	expect_err(&r, 1, "3 coordinates", "too many coordinates");
	CLI(&r, NULL, "add", "nosuch", "0", "1");
	expect_err(&r, 1, "nosuch", "missing tile");
	CLI(&r, NULL, "get", "nosuch");
	expect_err(&r, 1, "nosuch", "get missing tile");
	CLI(&r, NULL, "create", "x", "--dtype", "int8", "--shape", "2");
	expect_err(&r, 2, "unknown dtype 'int8'", "bad dtype");
	CLI(&r, NULL, "create", "x", "--dtype", "int32");
	expect_err(&r, 2, "--shape", "missing shape");
	CLI(&r, NULL, "create", "x", "--dtype", "int32", "--shape", "2,0");
	expect_err(&r, 2, "bad shape", "zero extent");
	CLI(&r, NULL, "create", "x", "--dtype", "int32", "--shape", "1,1,1,1,1");
	expect_err(&r, 2, "bad shape", "rank 5");
	CLI(&r, NULL, "create", "x", "--dtype", "int32", "--shape", "2", "--fill", "zz");
	expect_err(&r, 2, "--fill", "bad fill");
	CLI(&r, NULL, "create", "bad/name", "--dtype", "int32", "--shape", "2");
	expect_err(&r, 1, "create", "bad tile name");
	CLI(&r, NULL, "rm", "e");
	expect(&r, 0, "", "", "rm");

	/* The daemon is not there: exit 1 and a message naming the path and the cause. */
	const char *argv[] = {tcu_cli_path(), "-s", "/nonexistent/tileatomd.sock", "ping", NULL};
	tcu_run(D.dir, NULL, argv, &r);
	expect(&r, 1, "",
	       "tileatom-cli: cannot connect to /nonexistent/tileatomd.sock: No such file or "
	       "directory (is tileatomd running?)\n",
	       "no daemon");
	const char *argv2[] = {tcu_cli_path(), "-t", "soon", "ping", NULL};
	tcu_run(D.dir, NULL, argv2, &r);
	expect_err(&r, 2, "bad timeout", "bad timeout");
	const char *argv3[] = {tcu_cli_path(), "-s", NULL};
	tcu_run(D.dir, NULL, argv3, &r);
	expect_err(&r, 2, "needs a value", "-s without value");
	const char *argv4[] = {tcu_cli_path(), "--frob", NULL};
	tcu_run(D.dir, NULL, argv4, &r);
	expect_err(&r, 2, "--frob", "unknown global option");
}
END_TEST

START_TEST(test_cli_help)
{
	static const char *const cmds[] = {"ping", "stats", "create", "ls",   "info", "rm",   "get",
	                                   "hist", "add",   "sub",    "min",  "max",  "xchg", "and",
	                                   "or",   "xor",   "cas",    "load", "store"};
	tcu_result r;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		const char *argv[] = {tcu_cli_path(), cmds[i], "--help", NULL};
		tcu_run(D.dir, NULL, argv, &r);
		ck_assert_msg(r.status == 0, "%s --help: status %d", cmds[i], r.status);
		ck_assert_msg(strncmp(r.out, "Usage: tileatom-cli", 19) == 0, "%s --help: %s",
		              cmds[i], r.out);
		ck_assert_msg(strstr(r.out, cmds[i]), "%s --help: %s", cmds[i], r.out);
		ck_assert_str_eq(r.err, "");
		tcu_result_free(&r);
	}
	const char *h[] = {tcu_cli_path(), "--help", NULL};
	tcu_run(D.dir, NULL, h, &r);
	ck_assert_int_eq(r.status, 0);
	ck_assert(strstr(r.out, "hist NAME [FILE] [--range LO:HI]"));
	tcu_result_free(&r);
	const char *v[] = {tcu_cli_path(), "--version", NULL};
	tcu_run(D.dir, NULL, v, &r);
	char want[64];
	snprintf(want, sizeof(want), "tileatom-cli %s\n", tileatom_version());
	expect(&r, 0, want, "", "--version");
	const char *none[] = {tcu_cli_path(), NULL};
	tcu_run(D.dir, NULL, none, &r);
	ck_assert_int_eq(r.status, 2);
	ck_assert(strstr(r.err, "Usage: tileatom-cli"));
	tcu_result_free(&r);
}
END_TEST

/* Parses `get` output of n integers. */
static void parse_counts(const char *out, int64_t *counts, int n)
{
	const char *p = out;
	for (int i = 0; i < n; i++) {
		char *end;
		counts[i] = strtoll(p, &end, 10);
		ck_assert_msg(end != p && *end == '\n', "get output at bin %d: '%s'", i, p);
		p = end + 1;
	}
	ck_assert_msg(*p == '\0', "get output has extra lines: '%s'", p);
}

START_TEST(test_cli_hist_indices)
{
	const int nbins = 100;
	const int count = tcu_slow() ? 5000 : 200000;
	char path[400];
	snprintf(path, sizeof(path), "%s/indices.txt", D.dir);
	/* Integers in [-10, 110) with varied separators, plus integral spellings. */
	size_t cap = (size_t)count * 8 + 256, len = 0;
	char *text = malloc(cap);
	ck_assert_ptr_nonnull(text);
	int64_t expect_bins[100] = {0};
	uint64_t added = 0, outside = 0, seed = 12345;
	static const char *const seps[] = {" ", "\n", "\t", "\r\n", "  \n "};
	for (int i = 0; i < count; i++) {
		int v = (int)(tcu_rand(&seed) % 120) - 10;
		len +=
		    (size_t)snprintf(text + len, cap - len, "%d%s", v, seps[tcu_rand(&seed) % 5]);
		if (v >= 0 && v < nbins) {
			expect_bins[v]++;
			added++;
		} else {
			outside++;
		}
	}
	len += (size_t)snprintf(text + len, cap - len, "3.0 1e1 +4 99999999999999999999 -0");
	expect_bins[3]++;
	expect_bins[10]++;
	expect_bins[4]++;
	expect_bins[0]++;
	added += 4;
	outside += 1;
	ck_assert(tcu_write_file(path, text, len));
	free(text);

	tcu_result r;
	CLI(&r, NULL, "create", "hb", "--dtype", "int64", "--shape", "100");
	expect(&r, 0, "", "", "create");
	CLI(&r, NULL, "hist", "hb", path, "--chunk", "9999");
	char want[128];
	snprintf(want, sizeof(want), "added %" PRIu64 " outside %" PRIu64 "\n", added, outside);
	expect(&r, 0, want, "", "hist");
	CLI(&r, NULL, "get", "hb");
	ck_assert_int_eq(r.status, 0);
	int64_t got[100];
	parse_counts(r.out, got, nbins);
	tcu_result_free(&r);
	for (int i = 0; i < nbins; i++)
		ck_assert_msg(got[i] == expect_bins[i], "bin %d: %lld, expected %lld", i,
		              (long long)got[i], (long long)expect_bins[i]);
	/* Again from stdin with the default chunk: every bin doubles. */
	CLI(&r, "1 2 2\n", "hist", "hb");
	expect(&r, 0, "added 3 outside 0\n", "", "hist stdin");
	CLI(&r, NULL, "get", "hb");
	parse_counts(r.out, got, nbins);
	tcu_result_free(&r);
	ck_assert_int_eq(got[1], expect_bins[1] + 1);
	ck_assert_int_eq(got[2], expect_bins[2] + 2);
	CLI(&r, NULL, "rm", "hb");
	expect(&r, 0, "", "", "rm");
}
END_TEST

START_TEST(test_cli_hist_range)
{
	/* 10 bins over [-2, 3]: every input is m/1024, so (x - lo) / (hi - lo) * 10 = (m +
	 * 2048) / 512 exactly, and the expected bin is integer arithmetic: floor((m + 2048) /
	 * 512), with x == 3 (m == 3072) in the last bin and m outside [-2048, 3072] outside. */
	const int count = tcu_slow() ? 5000 : 100000;
	size_t cap = (size_t)count * 28 + 256, len = 0;
	char *text = malloc(cap);
	ck_assert_ptr_nonnull(text);
	int64_t expect_bins[10] = {0};
	uint64_t added = 0, outside = 0, seed = 777;
	for (int i = 0; i < count + 8; i++) {
		int m;
		if (i < count)
			m = (int)(tcu_rand(&seed) % (7 * 1024 + 1)) - 3 * 1024;
		else
			m = (int[]){-2048, 3072, -2049, 3073, 0, 512, -1536, 2560}[i - count];
		len += (size_t)snprintf(text + len, cap - len, "%.17g\n", m / 1024.0);
		if (m < -2048 || m > 3072) {
			outside++;
			continue;
		}
		int bin = (m + 2048) / 512;
		if (bin == 10)
			bin = 9;
		expect_bins[bin]++;
		added++;
	}
	len += (size_t)snprintf(text + len, cap - len, "nan inf -inf\n");
	outside += 3;
	tcu_result r;
	CLI(&r, NULL, "create", "hr", "--dtype", "uint32", "--shape", "10");
	expect(&r, 0, "", "", "create");
	CLI(&r, text, "hist", "hr", "-", "--range", "-2:3", "--chunk", "4096");
	free(text);
	char want[128];
	snprintf(want, sizeof(want), "added %" PRIu64 " outside %" PRIu64 "\n", added, outside);
	expect(&r, 0, want, "", "hist --range");
	CLI(&r, NULL, "get", "hr");
	ck_assert_int_eq(r.status, 0);
	int64_t got[10];
	parse_counts(r.out, got, 10);
	tcu_result_free(&r);
	for (int i = 0; i < 10; i++)
		ck_assert_msg(got[i] == expect_bins[i], "bin %d: %lld, expected %lld", i,
		              (long long)got[i], (long long)expect_bins[i]);
	CLI(&r, NULL, "rm", "hr");
	expect(&r, 0, "", "", "rm");

	/* Inputs where floating point decides the bin; the expected bins are what
	 * numpy.histogram(x, bins=10, range=(0, 1)) returns for these numbers. */
	CLI(&r, NULL, "create", "hn", "--dtype", "int32", "--shape", "10");
	expect(&r, 0, "", "", "create");
	CLI(&r, "0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1 0 0.30000000000000004 0.7000000000000001",
	    "hist", "hn", "--range", "0:1");
	expect(&r, 0, "added 13 outside 0\n", "", "hist numpy edges");
	CLI(&r, NULL, "get", "hn", "--json");
	expect(&r, 0,
	       "{\"name\":\"hn\",\"dtype\":\"int32\",\"shape\":[10],\"values\":[1,1,2,1,"
	       "1,2,1,1,1,2]}\n",
	       "", "numpy edges bins");
	CLI(&r, NULL, "rm", "hn");
	expect(&r, 0, "", "", "rm");

	/* The bin edges of numpy.linspace(0.1, 0.7, 8) and their neighbours one ulp below and
	 * above; numpy.histogram(x, bins=7, range=(0.1, 0.7)) gives [3, 3, 3, 3, 3, 3, 4] and
	 * leaves 0.09999999999999999 and 0.7000000000000001 outside. */
	CLI(&r, NULL, "create", "hu", "--dtype", "int64", "--shape", "7");
	expect(&r, 0, "", "", "create");
	CLI(&r,
	    "0.1 0.18571428571428572 0.27142857142857146 0.3571428571428571 0.44285714285714284 "
	    "0.5285714285714286 0.6142857142857142 0.7 0.09999999999999999 0.1857142857142857 "
	    "0.2714285714285714 0.35714285714285704 0.4428571428571428 0.5285714285714285 "
	    "0.6142857142857141 0.6999999999999998 0.10000000000000002 0.18571428571428575 "
	    "0.2714285714285715 0.35714285714285715 0.4428571428571429 0.5285714285714287 "
	    "0.6142857142857143 0.7000000000000001\n",
	    "hist", "hu", "--range", "0.1:0.7");
	expect(&r, 0, "added 22 outside 2\n", "", "hist numpy ulps");
	CLI(&r, NULL, "get", "hu", "--json");
	expect(&r, 0,
	       "{\"name\":\"hu\",\"dtype\":\"int64\",\"shape\":[7],\"values\":[3,3,3,3,"
	       "3,3,4]}\n",
	       "", "numpy ulp bins");
	CLI(&r, NULL, "rm", "hu");
	expect(&r, 0, "", "", "rm");
}
END_TEST

START_TEST(test_cli_hist_formats)
{
	/* --format i32/i64/f32/f64: raw little-endian files with exact bins; malformed input
	 * (text and raw) names its line or element and byte offset. */
	char path[400];
	snprintf(path, sizeof(path), "%s/keys.raw", D.dir);
	tcu_result r;
	CLI(&r, NULL, "create", "hf", "--dtype", "int64", "--shape", "8");
	expect(&r, 0, "", "", "create");
	/* int32: 0..7 inside, -1, 8 and INT32_MIN outside; many elements to cross reads */
	enum { N = 300000 };
	int32_t *k32 = malloc(N * sizeof(int32_t));
	ck_assert_ptr_nonnull(k32);
	int64_t expect_bins[8] = {0};
	uint64_t added = 0, outside = 0, seed = 99;
	for (int i = 0; i < N; i++) {
		int v = (int)(tcu_rand(&seed) % 11) - 1;
		k32[i] = v == 9 ? INT32_MIN : v;
		if (k32[i] >= 0 && k32[i] < 8) {
			expect_bins[k32[i]]++;
			added++;
		} else {
			outside++;
		}
	}
	ck_assert(tcu_write_file(path, (const char *)k32, N * sizeof(int32_t)));
	free(k32);
	char want[128];
	CLI(&r, NULL, "hist", "hf", path, "--format", "i32", "--chunk", "7777");
	snprintf(want, sizeof(want), "added %" PRIu64 " outside %" PRIu64 "\n", added, outside);
	expect(&r, 0, want, "", "hist --format i32");
	/* int64: values past int32 are outside; float32 / float64: integral values */
	int64_t k64[5] = {1, 7, INT64_C(1) << 40, -5, 7};
	ck_assert(tcu_write_file(path, (const char *)k64, sizeof(k64)));
	CLI(&r, NULL, "hist", "hf", path, "--format", "i64");
	expect(&r, 0, "added 3 outside 2\n", "", "hist --format i64");
	expect_bins[1]++;
	expect_bins[7] += 2;
	float f32[4] = {2.0f, 3.0f, 1e20f, -0.0f};
	ck_assert(tcu_write_file(path, (const char *)f32, sizeof(f32)));
	CLI(&r, NULL, "hist", "hf", path, "--format", "f32");
	expect(&r, 0, "added 3 outside 1\n", "", "hist --format f32");
	expect_bins[2]++;
	expect_bins[3]++;
	expect_bins[0]++;
	double f64[3] = {4.0, 5.0, 6.0};
	ck_assert(tcu_write_file(path, (const char *)f64, sizeof(f64)));
	CLI(&r, NULL, "hist", "hf", path, "--format", "f64");
	expect(&r, 0, "added 3 outside 0\n", "", "hist --format f64");
	expect_bins[4]++;
	expect_bins[5]++;
	expect_bins[6]++;
	/* float64 with --range 0:8 (8 bins of width 1): 0.5 -> 0, 7.99 -> 7, 8 -> 7, 9 out */
	double r64[4] = {0.5, 7.99, 8.0, 9.0};
	ck_assert(tcu_write_file(path, (const char *)r64, sizeof(r64)));
	CLI(&r, NULL, "hist", "hf", path, "--format", "f64", "--range", "0:8");
	expect(&r, 0, "added 3 outside 1\n", "", "hist --format f64 --range");
	expect_bins[0]++;
	expect_bins[7] += 2;
	CLI(&r, NULL, "get", "hf");
	ck_assert_int_eq(r.status, 0);
	int64_t got[8];
	parse_counts(r.out, got, 8);
	tcu_result_free(&r);
	for (int i = 0; i < 8; i++)
		ck_assert_msg(got[i] == expect_bins[i], "bin %d: %lld, expected %lld", i,
		              (long long)got[i], (long long)expect_bins[i]);
	/* text through the fast path and the slow path agree: the same bins again */
	CLI(&r, "0 1 2 3 4 5 6 7\n+1 1.0 1e0 -0 007\n", "hist", "hf");
	expect(&r, 0, "added 13 outside 0\n", "", "hist text spellings");
	/* malformed input */
	double bad[3] = {1.0, 2.5, 3.0};
	ck_assert(tcu_write_file(path, (const char *)bad, sizeof(bad)));
	CLI(&r, NULL, "hist", "hf", path, "--format", "f64");
	expect_err(&r, 1, "element 1 (byte offset 8): 2.5 is not an integer bin index",
	           "non-integral f64");
	ck_assert(tcu_write_file(path, "\x01\x00\x00\x00\x02\x00", 6));
	CLI(&r, NULL, "hist", "hf", path, "--format", "i32");
	expect_err(&r, 1, "2 trailing byte(s) at byte offset 4 are not a whole 4-byte element",
	           "partial i32");
	CLI(&r, "1 2\n3 x4\n", "hist", "hf");
	expect_err(&r, 1, "stdin:2: 'x4' is not an integer bin index (byte offset 6)",
	           "malformed text");
	CLI(&r, "0.5 0.25\n\n  1..5", "hist", "hf", "--range", "0:1");
	expect_err(&r, 1, "stdin:3: '1..5' is not a number (byte offset 12)", "malformed decimal");
	CLI(&r, "1", "hist", "hf", "--format", "i16");
	expect_err(&r, 2, "bad --format 'i16'", "bad format");
	CLI(&r, NULL, "rm", "hf");
	expect(&r, 0, "", "", "rm");
}
END_TEST

START_TEST(test_cli_hist_errors)
{
	tcu_result r;
	CLI(&r, NULL, "create", "he", "--dtype", "int32", "--shape", "4");
	expect(&r, 0, "", "", "create");
	CLI(&r, "1 2\n3\n0 1.5 2\n", "hist", "he");
	expect_err(&r, 1, "stdin:3: '1.5' is not an integer bin index", "non-integer");
	CLI(&r, "1 2\nfoo\n", "hist", "he", "--range", "0:4");
	expect_err(&r, 1, "stdin:2: 'foo' is not a number", "not a number");
	CLI(&r, "1", "hist", "he", "--range", "3:1");
	expect_err(&r, 2, "bad --range '3:1'", "bad range");
	CLI(&r, "1", "hist", "he", "--range", "nan:1");
	expect_err(&r, 2, "bad --range", "nan range");
	CLI(&r, "1", "hist", "he", "--chunk", "0");
	expect_err(&r, 2, "bad --chunk", "bad chunk");
	CLI(&r, NULL, "hist", "he", "/nonexistent/data.txt");
	expect_err(&r, 1, "cannot open /nonexistent/data.txt", "missing file");
	CLI(&r, "1", "hist", "nosuch");
	expect_err(&r, 1, "nosuch", "missing tile");
	CLI(&r, NULL, "create", "he2", "--dtype", "int32", "--shape", "2,2");
	expect(&r, 0, "", "", "create 2-D");
	CLI(&r, "1", "hist", "he2");
	expect_err(&r, 1, "must be 1-D", "2-D tile");
	/* Empty input adds nothing. */
	CLI(&r, "  \n", "hist", "he");
	expect(&r, 0, "added 0 outside 0\n", "", "empty input");
	CLI(&r, NULL, "rm", "he");
	expect(&r, 0, "", "", "rm");
	CLI(&r, NULL, "rm", "he2");
	expect(&r, 0, "", "", "rm");
}
END_TEST

START_TEST(test_cli_auth_private)
{
	tcu_daemon A;
	char secret[300], wrong[300], open_file[300], addr[64];
	/* the secret files live in the suite daemon's private directory */
	snprintf(secret, sizeof(secret), "%s/secret", D.dir);
	snprintf(wrong, sizeof(wrong), "%s/wrong", D.dir);
	snprintf(open_file, sizeof(open_file), "%s/open", D.dir);
	const char *text = "9d2f6c1e0b8a47f3a5c4e2d1b0f9e8c7\n";
	ck_assert(tcu_write_file(secret, text, strlen(text)));
	ck_assert(tcu_write_file(wrong, "not-the-secret-at-all\n", 22));
	ck_assert(tcu_write_file(open_file, text, strlen(text)));
	ck_assert_int_eq(chmod(secret, 0600), 0);
	ck_assert_int_eq(chmod(wrong, 0600), 0);
	ck_assert_int_eq(chmod(open_file, 0644), 0);
	const char *const extra[] = {"--listen", "127.0.0.1:0", "--auth-file", secret, NULL};
	ck_assert(tcu_daemon_start(&A, extra));
	int port = tcu_daemon_tcp_port(&A);
	ck_assert_int_gt(port, 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	tcu_result r;
	char want[1024];

	/* no secret: refused before anything runs */
	const char *noauth[] = {tcu_cli_path(), "-s", addr, "ls", NULL};
	tcu_run(A.dir, NULL, noauth, &r);
	snprintf(want, sizeof(want),
	         "tileatom-cli: tileatomd at %s requires authentication: give its secret file "
	         "(tileatom-cli --auth-file FILE, or TILEATOM_AUTH_FILE)\n",
	         addr);
	expect(&r, 1, "", want, "no auth file");
	/* the wrong secret */
	const char *bad[] = {tcu_cli_path(), "-s", addr, "--auth-file", wrong, "ping", NULL};
	tcu_run(A.dir, NULL, bad, &r);
	expect(&r, 1, "",
	       "tileatom-cli: authentication failed: the proof does not match the daemon's secret; "
	       "closing the connection\n",
	       "wrong secret");
	/* a secret file others may read is refused by the client too */
	const char *loose[] = {tcu_cli_path(), "-s", addr, "--auth-file", open_file, "ping", NULL};
	tcu_run(A.dir, NULL, loose, &r);
	snprintf(want, sizeof(want),
	         "tileatom-cli: the auth file %s has mode 0644: group and others must have no "
	         "access (chmod 600 %s)\n",
	         open_file, open_file);
	expect(&r, 1, "", want, "loose secret file");
	/* the right secret, by option: a private tile of the secret's holder */
	const char *mk[] = {
	    tcu_cli_path(), "-s",    addr,      "--auth-file", secret,      "create", "held",
	    "--dtype",      "int32", "--shape", "2",           "--private", NULL};
	tcu_run(A.dir, NULL, mk, &r);
	expect(&r, 0, "", "", "create --private over TCP");
	const char *mk2[] = {tcu_cli_path(), "-s",      A.socket, "create",    "local", "--dtype",
	                     "int32",        "--shape", "3",      "--private", NULL};
	tcu_run(A.dir, NULL, mk2, &r);
	expect(&r, 0, "", "", "create --private over the Unix socket");
	const char *mk3[] = {tcu_cli_path(), "-s",    A.socket,  "create", "shared",
	                     "--dtype",      "int32", "--shape", "1",      NULL};
	tcu_run(A.dir, NULL, mk3, &r);
	expect(&r, 0, "", "", "create public");
	/* by environment: the TCP identity sees its own private tile and the public one */
	setenv("TILEATOM_AUTH_FILE", secret, 1);
	tcu_run(A.dir, NULL, noauth, &r);
	expect(&r, 0,
	       "NAME\tDTYPE\tSHAPE\tBYTES\nheld\tint32\t2\t8\tprivate\nshared\tint32\t1\t4\n", "",
	       "ls over TCP");
	const char *peek[] = {tcu_cli_path(), "-s", addr, "info", "local", NULL};
	tcu_run(A.dir, NULL, peek, &r);
	expect(&r, 1, "", "tileatom-cli: info: tile 'local' is private to another client\n",
	       "info of another identity's tile");
	unsetenv("TILEATOM_AUTH_FILE");
	/* the Unix identity (this uid) sees its own */
	const char *uls[] = {tcu_cli_path(), "-s", A.socket, "ls", NULL};
	tcu_run(A.dir, NULL, uls, &r);
	expect(&r, 0,
	       "NAME\tDTYPE\tSHAPE\tBYTES\nlocal\tint32\t3\t12\tprivate\nshared\tint32\t1\t4\n", "",
	       "ls over the Unix socket");
	const char *urm[] = {tcu_cli_path(), "-s", A.socket, "rm", "held", NULL};
	tcu_run(A.dir, NULL, urm, &r);
	expect(&r, 1, "", "tileatom-cli: rm: tile 'held' is private to another client\n",
	       "rm of another identity's tile");
	const char *uinfo[] = {tcu_cli_path(), "-s", A.socket, "info", "local", NULL};
	tcu_run(A.dir, NULL, uinfo, &r);
	expect(&r, 0, "name: local\ndtype: int32\nshape: 3\nelements: 3\nbytes: 12\nprivate: yes\n",
	       "", "info of one's own private tile");
	ck_assert_int_eq(tcu_daemon_stop(&A, 20000), 0);
	tcu_daemon_cleanup(&A);
	unlink(secret);
	unlink(wrong);
	unlink(open_file);
}
END_TEST

/* Placement on a daemon serving 3 CPU memory pools (issue 24): create --device by ordinal,
 * auto (the pool with the fewest tile bytes), shard and shard:N (uneven splits), errors
 * for a pool that does not exist and a bad text; info and ls --json say where. */
START_TEST(test_cli_placement)
{
	tcu_daemon P;
	/* CPU pools whatever TA_TEST_BACKEND says: a one-GPU host has no 3 devices */
	const char *const extra[] = {"--devices", "3",   "--placement", "auto",
	                             "--backend", "cpu", NULL};
	ck_assert(tcu_daemon_start(&P, extra));
	tcu_result r;
	struct {
		const char *name, *shape, *dtype, *device, *where;
	} tiles[] = {
	    {"a", "7,5", "int32", "shard", "0:[0,3) 1:[3,5) 2:[5,7)"}, /* 60, 40, 40 bytes */
	    {"b", "10", "float32", "2", "2"},                          /* 2: 80 */
	    {"c", "4", "int64", NULL, "1"},                            /* auto: 1 has 40 */
	    {"d", "9", "int32", "shard:2", "0:[0,5) 1:[5,9)"},         /* 0: 60, 1: 72 */
	};
	char want[512];
	for (size_t i = 0; i < sizeof(tiles) / sizeof(tiles[0]); i++) {
		const char *create[] = {tcu_cli_path(),  "-s",
		                        P.socket,        "create",
		                        tiles[i].name,   "--dtype",
		                        tiles[i].dtype,  "--shape",
		                        tiles[i].shape,  tiles[i].device ? "--device" : NULL,
		                        tiles[i].device, NULL};
		tcu_run(P.dir, NULL, create, &r);
		expect(&r, 0, "", "", "create with a placement");
		const char *info[] = {tcu_cli_path(), "-s",     P.socket, "info",
		                      tiles[i].name,  "--json", NULL};
		tcu_run(P.dir, NULL, info, &r);
		ck_assert_msg(r.status == 0, "info: %s", r.err);
		snprintf(want, sizeof(want), "\"placement\":\"%s\"}", tiles[i].where);
		ck_assert_msg(strstr(r.out, want) != NULL, "info of %s: '%s' lacks '%s'",
		              tiles[i].name, r.out, want);
		tcu_result_free(&r);
	}
	const char *ls[] = {tcu_cli_path(), "-s", P.socket, "ls", "--json", NULL};
	tcu_run(P.dir, NULL, ls, &r);
	expect(&r, 0,
	       "[{\"name\":\"a\",\"dtype\":\"int32\",\"shape\":[7,5],\"bytes\":140,"
	       "\"placement\":\"0:[0,3) 1:[3,5) 2:[5,7)\"},"
	       "{\"name\":\"b\",\"dtype\":\"float32\",\"shape\":[10],\"bytes\":40,"
	       "\"placement\":\"2\"},"
	       "{\"name\":\"c\",\"dtype\":\"int64\",\"shape\":[4],\"bytes\":32,"
	       "\"placement\":\"1\"},"
	       "{\"name\":\"d\",\"dtype\":\"int32\",\"shape\":[9],\"bytes\":36,"
	       "\"placement\":\"0:[0,5) 1:[5,9)\"}]\n",
	       "", "ls --json with placements");
	const char *ls_placed[] = {tcu_cli_path(), "-s", P.socket, "ls", "--placement", NULL};
	tcu_run(P.dir, NULL, ls_placed, &r);
	expect(&r, 0,
	       "NAME\tDTYPE\tSHAPE\tBYTES\tPLACEMENT\n"
	       "a\tint32\t7,5\t140\t0:[0,3) 1:[3,5) 2:[5,7)\n"
	       "b\tfloat32\t10\t40\t2\n"
	       "c\tint64\t4\t32\t1\n"
	       "d\tint32\t9\t36\t0:[0,5) 1:[5,9)\n",
	       "", "ls --placement");
	const char *bad[] = {tcu_cli_path(), "-s",      P.socket, "create",   "e", "--dtype",
	                     "int32",        "--shape", "9",      "--device", "3", NULL};
	tcu_run(P.dir, NULL, bad, &r);
	expect_err(&r, 1, "device 3 does not exist (devices 0..2)", "a pool that does not exist");
	bad[10] = "bogus";
	tcu_run(P.dir, NULL, bad, &r);
	expect_err(&r, 1, "placement 'bogus' is not auto, shard, shard:N or a device ordinal",
	           "a bad placement");
	ck_assert_int_eq(tcu_daemon_stop(&P, 20000), 0);
	tcu_daemon_cleanup(&P);
}
END_TEST

/* Bad --devices and --placement stop the daemon at start with a message naming them. */
START_TEST(test_cli_devices_refused)
{
	static const struct {
		const char *a1, *v1, *a2, *v2, *msg;
	} cases[] = {
	    {"--devices", "0,1", NULL, NULL,
	     "devices: '0,1' is not a pool count 1..64 (or all) for the CPU backend"},
	    {"--devices", "65", NULL, NULL, "devices: '65' is not a pool count 1..64"},
	    {"--devices", "2", "--placement", "5",
	     "cannot serve 2 devices: placement: device 5 does not exist (devices 0..1)"},
	    {"--placement", "bogus", NULL, NULL,
	     "placement: placement 'bogus' is not auto, shard, shard:N or a device ordinal"},
	    {"--devices", "all", "--placement", "shard:2",
	     "cannot serve 1 device: placement: cannot shard over 2 devices (the daemon serves "
	     "1)"},
	};
	char sock[400];
	snprintf(sock, sizeof(sock), "%s/refused.sock", D.dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *argv[] = {
		    tcu_daemon_path(), "--backend", "cpu",       "--socket",  sock, "--foreground",
		    cases[i].a1,       cases[i].v1, cases[i].a2, cases[i].v2, NULL};
		tcu_result r;
		tcu_run(D.dir, NULL, argv, &r);
		ck_assert_msg(r.status == 1, "%s %s: status %d", cases[i].a1, cases[i].v1,
		              r.status);
		ck_assert_msg(strstr(r.err, cases[i].msg) != NULL, "stderr '%s' lacks '%s'", r.err,
		              cases[i].msg);
		tcu_result_free(&r);
	}
}
END_TEST

/* Reads a whole small file into buf (NUL-terminated); false when it cannot. */
static bool read_small(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t got = fread(buf, 1, n - 1, f);
	buf[got] = '\0';
	fclose(f);
	return true;
}

/* A logged create for device 2 replayed by a daemon with one device: the tile comes back
 * by the default placement, with its contents, and the log says where it was and went. */
START_TEST(test_cli_placement_replay)
{
	char data[400];
	snprintf(data, sizeof(data), "%s/placed-data", D.dir);
	tcu_daemon P, Q;
	/* CPU pools whatever TA_TEST_BACKEND says: a one-GPU host has no 3 devices */
	const char *const three[] = {"--devices", "3",   "--data-dir", data,
	                             "--backend", "cpu", NULL};
	ck_assert(tcu_daemon_start(&P, three));
	tcu_result r;
	const char *create[] = {tcu_cli_path(), "-s",      P.socket, "create",   "far", "--dtype",
	                        "int32",        "--shape", "5",      "--device", "2",   NULL};
	tcu_run(P.dir, NULL, create, &r);
	expect(&r, 0, "", "", "create on device 2");
	const char *add[] = {tcu_cli_path(), "-s", P.socket, "add", "far", "3", "41", NULL};
	tcu_run(P.dir, NULL, add, &r);
	expect(&r, 0, "0\n", "", "add on device 2");
	ck_assert_int_eq(tcu_daemon_stop(&P, 20000), 0);
	tcu_daemon_cleanup(&P);

	const char *const one[] = {"--devices", "1", "--data-dir", data, "--backend", "cpu", NULL};
	ck_assert(tcu_daemon_start(&Q, one));
	const char *get[] = {tcu_cli_path(), "-s", Q.socket, "get", "far", NULL};
	tcu_run(Q.dir, NULL, get, &r);
	expect(&r, 0, "0\n0\n0\n41\n0\n", "", "the tile after the replay");
	ck_assert_int_eq(tcu_daemon_stop(&Q, 20000), 0);
	static char log[65536];
	ck_assert(read_small(Q.log, log, sizeof(log)));
	ck_assert_msg(strstr(log, "<4>tile 'far' was on 2; placed by the default placement "
	                          "(--placement) on 0 instead: tile 'far': cannot allocate 20 "
	                          "bytes: placement: device 2 does not exist (the backend serves "
	                          "one device, 0)\n"),
	              "log: %s", log);
	tcu_daemon_cleanup(&Q);
}
END_TEST

static Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("cli");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_cli_ping);
	tcase_add_test(tc, test_cli_tiles);
	tcase_add_test(tc, test_cli_ls_pages);
	tcase_add_test(tc, test_cli_get_json);
	tcase_add_test(tc, test_cli_ops);
	tcase_add_test(tc, test_cli_errors);
	tcase_add_test(tc, test_cli_help);
	tcase_add_test(tc, test_cli_hist_indices);
	tcase_add_test(tc, test_cli_hist_range);
	tcase_add_test(tc, test_cli_hist_formats);
	tcase_add_test(tc, test_cli_hist_errors);
	tcase_add_test(tc, test_cli_auth_private);
	tcase_add_test(tc, test_cli_placement);
	tcase_add_test(tc, test_cli_placement_replay);
	tcase_add_test(tc, test_cli_devices_refused);
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
	SRunner *sr = srunner_create(cli_suite());
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

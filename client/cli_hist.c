/* cli_hist.c: `tileatom-cli hist NAME [FILE] [--range LO:HI]`: streams whitespace-separated
 * numbers from FILE (or stdin) into a 1-D tile as a histogram. Each number becomes one bin
 * index (without --range: the number itself; with it: numpy.histogram's uniform binning
 * over [LO, HI], the last bin closed). Indices are sent in chunks (default 1M numbers) as
 * indexed flat scatter-adds of the scalar 1 with bounds checking on and space=shared,
 * pipelined a few chunks deep, so input larger than memory works. Numbers outside the bins
 * are counted: with --range on the client (NaN included), without it by the daemon's
 * bounds check (plus integers too large for the index type, on the client).
 *
 * Failure modes: a token that is not a number (or, without --range, not an integer) stops
 * the run with its file and line; chunks sent before it stay added, and the counts so far
 * are reported on stderr. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Default numbers per request. */
#define HIST_CHUNK_DEFAULT (1 << 20)
/* Requests in flight before the oldest response is collected. */
#define HIST_DEPTH 4
/* Bytes read from the input per fread(). */
#define HIST_READ_BYTES (1 << 20)
/* Longest token accepted. */
#define HIST_TOKEN_MAX 128

/* State of one hist run. */
typedef struct hist_run {
	tileatom_client *client;  /* connection */
	const char *tile;         /* tile name */
	tileatom_dtype dtype;     /* tile dtype */
	int64_t nbins;            /* tile extent */
	bool ranged;              /* --range given */
	double lo, hi;            /* the range */
	double step;              /* (hi - lo) / nbins, numpy's linspace step */
	bool idx64;               /* indices sent as INT64 (nbins > INT32_MAX) */
	void *chunk;              /* index buffer (int32_t or int64_t) */
	int64_t chunk_cap;        /* its capacity in elements */
	int64_t chunk_len;        /* elements in it */
	uint64_t one[2];          /* the value 1 in the tile dtype */
	tileatom_op_options opts; /* bounds checking on, space shared */
	uint64_t added;           /* applied, from the responses */
	uint64_t outside;         /* skipped by the daemon plus counted on the client */
	uint64_t numbers;         /* numbers read */
	const char *input_name;   /* FILE or "stdin" for messages */
	uint64_t line;            /* current input line (1-based) */
	bool progress;            /* draw a progress bar on stderr */
	uint64_t input_size;      /* bytes of a regular input file, 0 when unknown */
	uint64_t input_done;      /* bytes consumed so far */
} hist_run;

/* numpy.histogram's bin of x for nbins uniform bins over [lo, hi], or -1 when x is outside
 * (or NaN). Mirrors numpy: index = int((x - lo) / (hi - lo) * nbins), x == hi goes to the
 * last bin, then a one-step correction against the linspace edges lo + i * step. */
static int64_t hist_bin(const hist_run *h, double x)
{
	if (!(x >= h->lo && x <= h->hi))
		return -1;
	double f = (x - h->lo) / (h->hi - h->lo) * (double)h->nbins;
	int64_t i = (int64_t)f;
	if (i >= h->nbins)
		i = h->nbins - 1;
	if (i < 0)
		i = 0;
	double edge_lo = (double)i * h->step + h->lo;
	double edge_hi = i + 1 == h->nbins ? h->hi : (double)(i + 1) * h->step + h->lo;
	if (x < edge_lo && i > 0)
		i--;
	else if (x >= edge_hi && i != h->nbins - 1)
		i++;
	return i;
}

/* Collects the oldest response and adds its counts; returns CLI_EXIT_OK or an error. */
static int hist_collect(hist_run *h)
{
	tileatom_response r;
	tileatom_error err = {0, ""};
	if (tileatom_collect(h->client, &r, &err) != TILEATOM_OK) {
		cli_error("hist: %s", err.message);
		return CLI_EXIT_ERROR;
	}
	h->added += r.applied;
	h->outside += r.skipped;
	return CLI_EXIT_OK;
}

/* Redraws the progress bar. */
static void hist_progress(const hist_run *h, bool done)
{
	if (!h->progress)
		return;
	if (done) {
		fputs("\r\033[K", stderr);
	} else if (h->input_size > 0) {
		int width = 40;
		double frac = (double)h->input_done / (double)h->input_size;
		if (frac > 1)
			frac = 1;
		int fill = (int)(frac * width);
		fprintf(stderr, "\r[%.*s%*s] %3d%% %" PRIu64 " numbers", fill,
		        "########################################", width - fill, "",
		        (int)(frac * 100), h->numbers);
	} else {
		fprintf(stderr, "\r%" PRIu64 " numbers", h->numbers);
	}
	fflush(stderr);
}

/* Sends the buffered indices as one request, first collecting responses so that at most
 * HIST_DEPTH are in flight. */
static int hist_flush(hist_run *h)
{
	if (h->chunk_len == 0)
		return CLI_EXIT_OK;
	while (tileatom_pending(h->client) >= HIST_DEPTH) {
		int rc = hist_collect(h);
		if (rc != CLI_EXIT_OK)
			return rc;
	}
	tileatom_array idx =
	    tileatom_vector(h->idx64 ? TILEATOM_INT64 : TILEATOM_INT32, h->chunk_len, h->chunk);
	tileatom_array one = tileatom_scalar(h->dtype, h->one);
	tileatom_error err = {0, ""};
	if (tileatom_submit_indexed(h->client, h->tile, TILEATOM_OP_ADD, NULL, 1, &idx, true, &one,
	                            NULL, &h->opts, NULL, &err) != TILEATOM_OK) {
		cli_error("hist: %s", err.message);
		return CLI_EXIT_ERROR;
	}
	h->chunk_len = 0;
	hist_progress(h, false);
	return CLI_EXIT_OK;
}

/* Appends one bin index (already known to fit the index type). */
static int hist_push(hist_run *h, int64_t bin)
{
	if (h->idx64)
		((int64_t *)h->chunk)[h->chunk_len++] = bin;
	else
		((int32_t *)h->chunk)[h->chunk_len++] = (int32_t)bin;
	if (h->chunk_len == h->chunk_cap)
		return hist_flush(h);
	return CLI_EXIT_OK;
}

/* Handles one token. */
static int hist_token(hist_run *h, const char *tok)
{
	h->numbers++;
	char *end;
	if (h->ranged) {
		errno = 0;
		double x = strtod(tok, &end);
		if (*end != '\0' || end == tok) {
			cli_error("hist: %s:%" PRIu64 ": '%s' is not a number", h->input_name,
			          h->line, tok);
			return CLI_EXIT_ERROR;
		}
		int64_t bin = hist_bin(h, x);
		if (bin < 0) {
			h->outside++;
			return CLI_EXIT_OK;
		}
		return hist_push(h, bin);
	}
	errno = 0;
	long long v = strtoll(tok, &end, 10);
	bool outside = false;
	if (*end != '\0' || end == tok) {
		/* Not a plain integer: accept an integral float such as "3.0" or "1e3". */
		errno = 0;
		double x = strtod(tok, &end);
		if (*end != '\0' || end == tok || x != x || x != floor(x)) {
			cli_error("hist: %s:%" PRIu64 ": '%s' is not an integer bin index",
			          h->input_name, h->line, tok);
			return CLI_EXIT_ERROR;
		}
		if (x < -9.2e18 || x > 9.2e18)
			outside = true;
		else
			v = (long long)x;
	} else if (errno == ERANGE) {
		outside = true;
	}
	if (!outside && !h->idx64 && (v < INT32_MIN || v > INT32_MAX))
		outside = true;
	if (outside) {
		h->outside++;
		return CLI_EXIT_OK;
	}
	/* Negative and too-large indices go to the daemon, whose bounds check skips and
	 * counts them. */
	return hist_push(h, (int64_t)v);
}

/* Reads the whole input, tokenising across buffer boundaries. */
static int hist_read(hist_run *h, FILE *in)
{
	char *buf = malloc(HIST_READ_BYTES);
	if (!buf) {
		cli_error("hist: out of memory");
		return CLI_EXIT_ERROR;
	}
	char tok[HIST_TOKEN_MAX + 1];
	size_t tlen = 0;
	uint64_t tok_line = 1;
	int rc = CLI_EXIT_OK;
	h->line = 1;
	for (;;) {
		size_t n = fread(buf, 1, HIST_READ_BYTES, in);
		if (n == 0) {
			if (ferror(in)) {
				cli_error("hist: reading %s: %s", h->input_name, strerror(errno));
				rc = CLI_EXIT_ERROR;
			}
			break;
		}
		h->input_done += n;
		for (size_t i = 0; i < n && rc == CLI_EXIT_OK; i++) {
			char ch = buf[i];
			if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r' || ch == '\v' ||
			    ch == '\f') {
				if (tlen > 0) {
					tok[tlen] = '\0';
					uint64_t cur = h->line;
					h->line = tok_line;
					rc = hist_token(h, tok);
					h->line = cur;
					tlen = 0;
				}
				if (ch == '\n')
					h->line++;
				continue;
			}
			if (tlen == 0)
				tok_line = h->line;
			if (tlen == HIST_TOKEN_MAX) {
				tok[tlen] = '\0';
				cli_error("hist: %s:%" PRIu64
				          ": token '%.20s...' is longer than %d "
				          "characters",
				          h->input_name, tok_line, tok, HIST_TOKEN_MAX);
				rc = CLI_EXIT_ERROR;
				break;
			}
			tok[tlen++] = ch;
		}
		if (rc != CLI_EXIT_OK)
			break;
	}
	if (rc == CLI_EXIT_OK && tlen > 0) {
		tok[tlen] = '\0';
		h->line = tok_line;
		rc = hist_token(h, tok);
	}
	free(buf);
	return rc;
}

/* Parses "LO:HI" with finite LO < HI. */
static bool parse_range(const char *text, double *lo, double *hi)
{
	char *end;
	errno = 0;
	*lo = strtod(text, &end);
	if (end == text || *end != ':')
		return false;
	const char *p = end + 1;
	*hi = strtod(p, &end);
	if (end == p || *end != '\0' || errno == ERANGE)
		return false;
	return isfinite(*lo) && isfinite(*hi) && *lo < *hi;
}

int cli_cmd_hist(int argc, char **argv, cli_global *g)
{
	static const char usage[] =
	    "Usage: tileatom-cli [-s SOCKET] hist NAME [FILE] [--range LO:HI] [--chunk N] "
	    "[--json]\n"
	    "Reads whitespace-separated numbers from FILE (or stdin, also for '-') and adds 1\n"
	    "per number to the bins of the 1-D tile NAME (an indexed flat scatter-add, bounds\n"
	    "checking on, space shared).\n"
	    "Without --range each number is a bin index (it must be an integer; numbers outside\n"
	    "0..N-1 are counted as outside). With --range the numbers are binned uniformly over\n"
	    "[LO, HI] into the tile's N bins as numpy.histogram does: every bin is half-open\n"
	    "except the last, which includes HI; numbers outside [LO, HI] and NaN are outside.\n"
	    "The input is streamed in chunks of N numbers (--chunk, default 1048576) with\n"
	    "several requests in flight. Prints 'added A outside O'\n"
	    "(--json: {\"tile\":...,\"numbers\":N,\"added\":A,\"outside\":O}).\n";
	static const cli_option opts[] = {{"range", true}, {"chunk", true}, {"json", false}};
	cli_args a;
	int rc = cli_parse(argc, argv, opts, 3, 1, 2, usage, g, &a);
	if (rc >= 0)
		return rc;
	hist_run h;
	memset(&h, 0, sizeof(h));
	h.tile = a.pos[0];
	if (a.value[0]) {
		if (!parse_range(a.value[0], &h.lo, &h.hi)) {
			cli_error("hist: bad --range '%s' (expected LO:HI with LO < HI)",
			          a.value[0]);
			return CLI_EXIT_USAGE;
		}
		h.ranged = true;
	}
	h.chunk_cap = HIST_CHUNK_DEFAULT;
	if (a.value[1] && (!cli_parse_count(a.value[1], &h.chunk_cap) || h.chunk_cap < 1 ||
	                   h.chunk_cap > (INT64_C(1) << 26))) {
		cli_error("hist: bad --chunk '%s' (1 to 67108864 numbers)", a.value[1]);
		return CLI_EXIT_USAGE;
	}
	FILE *in = stdin;
	h.input_name = "stdin";
	if (a.npos == 2 && strcmp(a.pos[1], "-") != 0) {
		in = fopen(a.pos[1], "r");
		if (!in) {
			cli_error("hist: cannot open %s: %s", a.pos[1], strerror(errno));
			return CLI_EXIT_ERROR;
		}
		h.input_name = a.pos[1];
	}
	struct stat st;
	if (fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode))
		h.input_size = (uint64_t)st.st_size;
	h.progress = isatty(STDERR_FILENO) == 1;

	if ((rc = cli_connect(g, &h.client)) != CLI_EXIT_OK)
		goto out;
	tileatom_error err = {0, ""};
	tileatom_tile_info info;
	if (tileatom_describe(h.client, h.tile, &info, &err) != TILEATOM_OK) {
		cli_error("hist: %s", err.message);
		rc = CLI_EXIT_ERROR;
		goto out;
	}
	if (info.rank != 1) {
		cli_error("hist: tile '%s' must be 1-D (it has %d axes)", h.tile, info.rank);
		rc = CLI_EXIT_ERROR;
		goto out;
	}
	h.dtype = info.dtype;
	h.nbins = info.shape[0];
	h.step = h.ranged ? (h.hi - h.lo) / (double)h.nbins : 0.0;
	h.idx64 = h.nbins > INT32_MAX;
	if (tileatom_value_parse(h.dtype, "1", h.one, &err) != TILEATOM_OK) {
		cli_error("hist: %s", err.message);
		rc = CLI_EXIT_ERROR;
		goto out;
	}
	tileatom_op_options_init(&h.opts);
	h.opts.space = TILEATOM_SPACE_SHARED;
	h.opts.check_bounds = true;
	h.chunk = malloc((size_t)h.chunk_cap * (h.idx64 ? 8 : 4));
	if (!h.chunk) {
		cli_error("hist: out of memory for a chunk of %" PRId64 " numbers", h.chunk_cap);
		rc = CLI_EXIT_ERROR;
		goto out;
	}
	rc = hist_read(&h, in);
	if (rc == CLI_EXIT_OK)
		rc = hist_flush(&h);
	/* Collect whatever is in flight, also after an input error, to report the counts. */
	while (tileatom_pending(h.client) > 0) {
		int crc = hist_collect(&h);
		if (crc != CLI_EXIT_OK) {
			rc = crc;
			break;
		}
	}
	hist_progress(&h, true);
	if (rc == CLI_EXIT_OK && a.value[2]) {
		json_object *o = json_object_new_object();
		bool ok = cli_json_add(o, "tile", json_object_new_string(h.tile)) &&
		          cli_json_add(o, "numbers", json_object_new_uint64(h.numbers)) &&
		          cli_json_add(o, "added", json_object_new_uint64(h.added)) &&
		          cli_json_add(o, "outside", json_object_new_uint64(h.outside));
		rc = cli_json_print("hist", cli_json_done(o, ok));
	} else if (rc == CLI_EXIT_OK)
		printf("added %" PRIu64 " outside %" PRIu64 "\n", h.added, h.outside);
	else
		cli_error("hist: stopped after an error; added %" PRIu64 " outside %" PRIu64
		          " before it",
		          h.added, h.outside);
out:
	free(h.chunk);
	tileatom_close(h.client);
	if (in != stdin)
		fclose(in);
	return rc;
}

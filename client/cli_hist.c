/* cli_hist.c: `tileatom-cli hist`: streams whitespace-separated numbers (or, with --format,
 * raw little-endian elements) from FILE or stdin into a 1-D tile as a histogram. Each number
 * becomes a bin index (itself, or with --range numpy.histogram's uniform bin over [LO, HI])
 * sent in chunks as indexed flat scatter-adds of 1 (bounds checked, space shared), a few
 * chunks in flight (on a Unix socket, slots of a shared buffer). A token that is not a
 * number, or a partial last raw element, stops the run naming its place; chunks sent before
 * it stay added, and the counts are reported. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
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
/* Chunk slots of the shared buffer: the one being filled and HIST_DEPTH in flight. */
#define HIST_SLOTS (HIST_DEPTH + 1)
/* Bytes of the input read buffer (read(2) fills it). */
#define HIST_READ_BYTES (4 << 20)
/* Longest token accepted. */
#define HIST_TOKEN_MAX 128

/* State of one hist run. */
typedef struct hist_run {
	cli_call *k;              /* the run: its connection and last library error */
	const char *tile;         /* tile name */
	tileatom_dtype dtype;     /* tile dtype */
	int64_t nbins;            /* tile extent */
	bool ranged;              /* --range given */
	double lo, hi;            /* the range */
	double step;              /* (hi - lo) / nbins, numpy's linspace step */
	bool idx64;               /* indices sent as INT64 (nbins > INT32_MAX) */
	void *chunk;              /* index buffer being filled (int32_t or int64_t) */
	tileatom_buffer *shm;     /* shared buffer of HIST_SLOTS chunk slots, or NULL (TCP, or
	                             none could be made): chunks then travel inline */
	int slot;                 /* the shared buffer's slot chunk points at */
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
	size_t format_size;       /* --format: bytes of a raw element (4 or 8), 0 for text */
	bool format_float;        /* --format: raw elements are floats (f32, f64) */
	uint64_t offset;          /* byte offset of the start of the read buffer */
	uint64_t tok_offset;      /* byte offset of the current text token */
} hist_run;

/* Collects responses, adding their counts, until at most keep are in flight; returns
 * CLI_EXIT_OK or an error. */
static int hist_drain(hist_run *h, size_t keep)
{
	tileatom_response r;
	while (tileatom_pending(h->k->c) > keep) {
		if (tileatom_collect(h->k->c, &r, &h->k->err) != TILEATOM_OK)
			return cli_lib_error(h->k);
		h->added += r.applied;
		h->outside += r.skipped;
	}
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
	if (hist_drain(h, HIST_DEPTH - 1) != CLI_EXIT_OK)
		return CLI_EXIT_ERROR;
	tileatom_array idx =
	    tileatom_vector(h->idx64 ? TILEATOM_INT64 : TILEATOM_INT32, h->chunk_len, h->chunk);
	tileatom_array one = tileatom_scalar(h->dtype, h->one);
	if (tileatom_submit_indexed(h->k->c, h->tile, TILEATOM_OP_ADD, NULL, 1, &idx, true, &one,
	                            NULL, &h->opts, NULL, &h->k->err) != TILEATOM_OK)
		return cli_lib_error(h->k);
	h->chunk_len = 0;
	if (h->shm) {
		/* The daemon reads the chunk in place until its response: fill the next slot,
		 * whose request (HIST_SLOTS chunks ago) has been collected. */
		h->slot = (h->slot + 1) % HIST_SLOTS;
		h->chunk = (char *)tileatom_buffer_data(h->shm) +
		           (size_t)h->slot * (size_t)h->chunk_cap * (h->idx64 ? 8 : 4);
	}
	hist_progress(h, false);
	return CLI_EXIT_OK;
}

/* Appends one bin index (already known to fit the index type). */
static inline int hist_push(hist_run *h, int64_t bin)
{
	if (h->idx64)
		((int64_t *)h->chunk)[h->chunk_len++] = bin;
	else
		((int32_t *)h->chunk)[h->chunk_len++] = (int32_t)bin;
	if (h->chunk_len == h->chunk_cap)
		return hist_flush(h);
	return CLI_EXIT_OK;
}

/* Adds integer bin index v; one that does not fit the index type is counted outside
 * (negative and too-large ones go to the daemon, whose bounds check skips and counts them). */
static inline int hist_add_index(hist_run *h, int64_t v)
{
	if (!h->idx64 && (v < INT32_MIN || v > INT32_MAX)) {
		h->outside++;
		return CLI_EXIT_OK;
	}
	return hist_push(h, v);
}

/* Adds x to its --range bin, numpy.histogram's for nbins uniform bins over [lo, hi], or
 * counts it outside (NaN too). Mirrors numpy: index = int((x - lo) / (hi - lo) * nbins),
 * x == hi goes to the last bin, then a one-step correction against the linspace edges
 * lo + i * step. */
static int hist_add_value(hist_run *h, double x)
{
	if (!(x >= h->lo && x <= h->hi)) {
		h->outside++;
		return CLI_EXIT_OK;
	}
	int64_t i = (int64_t)((x - h->lo) / (h->hi - h->lo) * (double)h->nbins);
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
	return hist_push(h, i);
}

/* Adds x, an integral float, as a bin index (beyond int64: outside). */
static int hist_add_integral(hist_run *h, double x)
{
	if (x < -9.2e18 || x > 9.2e18) {
		h->outside++;
		return CLI_EXIT_OK;
	}
	return hist_add_index(h, (int64_t)x);
}

/* Handles one token. */
static int hist_token(hist_run *h, const char *tok)
{
	h->numbers++;
	char *end = NULL;
	errno = 0;
	long long v = h->ranged ? 0 : strtoll(tok, &end, 10);
	if (!h->ranged && end != tok && *end == '\0') { /* a plain integer */
		if (errno != ERANGE)
			return hist_add_index(h, (int64_t)v);
		h->outside++;
		return CLI_EXIT_OK;
	}
	/* a number (with --range) or an integral float such as "3.0" or "1e3" (without) */
	double x = strtod(tok, &end);
	if (*end != '\0' || end == tok || (!h->ranged && (x != x || x != floor(x)))) {
		cli_error("hist: %s:%" PRIu64 ": '%s' is not %s (byte offset %" PRIu64 ")",
		          h->input_name, h->line, tok,
		          h->ranged ? "a number" : "an integer bin index", h->tok_offset);
		return CLI_EXIT_ERROR;
	}
	return h->ranged ? hist_add_value(h, x) : hist_add_integral(h, x);
}

/* Powers of ten exactly representable as doubles (the fast decimal path). */
static const double hist_pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                    1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Character classes of the text parser: 1 for the blanks that separate numbers. */
static const uint8_t hist_space[256] = {
    [' '] = 1, ['\n'] = 1, ['\t'] = 1, ['\r'] = 1, ['\v'] = 1, ['\f'] = 1};

/* The fast path of the token at *p: a sign and up to 18 digits, with --range a fraction of
 * up to 15 significant digits in all (exact in a double, so one division by a power of ten
 * rounds as strtod does), ended by a blank or the end of input (at_eof). 1: handled (*p
 * past it), 0: for the slow path (exponents, inf, nan, long or unfinished tokens), -1: an
 * error of hist_push. */
static int hist_fast_token(hist_run *h, const char **p, const char *end, bool at_eof)
{
	const char *q = *p;
	bool neg = *q == '-';
	if (*q == '-' || *q == '+')
		q++;
	const char *d0 = q, *f0 = NULL;
	uint64_t mant = 0;
	while (q < end && (unsigned)(*q - '0') < 10)
		mant = mant * 10 + (uint64_t)(*q++ - '0');
	int digits = (int)(q - d0), frac = 0;
	if (h->ranged && q < end && *q == '.') {
		f0 = ++q;
		while (q < end && (unsigned)(*q - '0') < 10)
			mant = mant * 10 + (uint64_t)(*q++ - '0');
		frac = (int)(q - f0);
	}
	if (digits == 0 || digits > 18 || (f0 && digits + frac > 15) ||
	    (q < end ? !hist_space[(unsigned char)*q] : !at_eof))
		return 0;
	*p = q;
	h->numbers++;
	if (h->ranged) {
		double x = (double)mant;
		if (frac)
			x /= hist_pow10[frac];
		return hist_add_value(h, neg ? -x : x) == CLI_EXIT_OK ? 1 : -1;
	}
	return hist_add_index(h, neg ? -(int64_t)mant : (int64_t)mant) == CLI_EXIT_OK ? 1 : -1;
}

/* Parses the text in buf[0, len): whole tokens only unless at_eof (the unfinished last
 * token stays); *used gets the bytes consumed. Counts lines in h->line and the byte offset
 * of every token from h->offset (the offset of buf[0]). */
static int hist_parse_text(hist_run *h, const char *buf, size_t len, bool at_eof, size_t *used)
{
	const char *p = buf, *end = buf + len;
	*used = 0;
	for (;;) {
		while (p < end && hist_space[(unsigned char)*p]) {
			if (*p == '\n')
				h->line++;
			p++;
		}
		const char *tok = p;
		int fast = p < end ? hist_fast_token(h, &p, end, at_eof) : 0;
		if (fast < 0)
			return CLI_EXIT_ERROR;
		if (fast > 0)
			continue;
		while (p < end && !hist_space[(unsigned char)*p])
			p++;
		if (p == end && !at_eof) { /* the token may go on in the next read */
			*used = (size_t)(tok - buf);
			return CLI_EXIT_OK;
		}
		if (tok == p)
			break;
		h->tok_offset = h->offset + (uint64_t)(tok - buf);
		char t[HIST_TOKEN_MAX + 1];
		size_t tlen = (size_t)(p - tok);
		if (tlen > HIST_TOKEN_MAX) {
			cli_error("hist: %s:%" PRIu64
			          ": token '%.20s...' is longer than %d characters (byte offset "
			          "%" PRIu64 ")",
			          h->input_name, h->line, tok, HIST_TOKEN_MAX, h->tok_offset);
			return CLI_EXIT_ERROR;
		}
		memcpy(t, tok, tlen);
		t[tlen] = '\0';
		int rc = hist_token(h, t);
		if (rc != CLI_EXIT_OK)
			return rc;
	}
	*used = len;
	return CLI_EXIT_OK;
}

/* Handles n raw little-endian elements of the input format at data (element index of the
 * first: first): the bin index itself (integers; floats must be integral) or, with --range,
 * numpy's bin of the value. */
static int hist_parse_raw(hist_run *h, const uint8_t *data, size_t n, uint64_t first)
{
	size_t es = h->format_size;
	for (size_t i = 0; i < n; i++, data += es) {
		h->numbers++;
		cli_element e;
		memcpy(&e, data, es);
		int64_t v = es == 4 ? e.i32 : e.i64;
		double x = es == 4 ? (double)e.f32 : e.f64;
		if (!h->ranged && h->format_float && (x != x || x != floor(x))) {
			cli_error("hist: %s: element %" PRIu64 " (byte offset %" PRIu64
			          "): %.17g is not an integer bin index",
			          h->input_name, first + i, (first + i) * es, x);
			return CLI_EXIT_ERROR;
		}
		int rc = h->ranged         ? hist_add_value(h, h->format_float ? x : (double)v)
		         : h->format_float ? hist_add_integral(h, x)
		                           : hist_add_index(h, v);
		if (rc != CLI_EXIT_OK)
			return CLI_EXIT_ERROR;
	}
	return CLI_EXIT_OK;
}

/* Reads the whole input with read(2): raw int32 without --range (at most 2^31 bins) straight
 * into the chunk slots, anything else through one buffer (a token or element cut by a read
 * carried over). A partial last raw element is an error naming its offset. */
static int hist_read(hist_run *h, int fd)
{
	bool direct = h->format_size == 4 && !h->format_float && !h->ranged && !h->idx64;
	size_t cap = direct ? (size_t)h->chunk_cap * 4 : HIST_READ_BYTES;
	char *buf = direct ? NULL : malloc(cap);
	if (!direct && !buf) {
		cli_error("hist: out of memory");
		return CLI_EXIT_ERROR;
	}
	size_t have = 0; /* bytes carried over at the start of the buffer */
	int rc = CLI_EXIT_OK;
	h->line = 1;
	h->offset = 0;
	for (;;) {
		char *into = direct ? h->chunk : buf;
		ssize_t n = read(fd, into + have, cap - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			cli_error("hist: reading %s: %s", h->input_name, strerror(errno));
			rc = CLI_EXIT_ERROR;
			break;
		}
		bool at_eof = n == 0;
		h->input_done += (uint64_t)n;
		size_t len = have + (size_t)n, used = 0;
		if (h->format_size == 0) {
			rc = hist_parse_text(h, into, len, at_eof, &used);
		} else if (direct) { /* a full chunk goes now, the last one with the final flush */
			used = len == cap || at_eof ? len - len % 4 : 0;
			h->chunk_len = (int64_t)(used / 4);
			h->numbers += used / 4;
			if (len == cap)
				rc = hist_flush(h);
		} else {
			size_t whole = len / h->format_size;
			used = whole * h->format_size;
			rc = hist_parse_raw(h, (const uint8_t *)into, whole,
			                    h->offset / h->format_size);
		}
		if (rc == CLI_EXIT_OK && at_eof && used < len) {
			cli_error("hist: %s: %zu trailing byte(s) at byte offset %" PRIu64
			          " are not a whole %zu-byte element",
			          h->input_name, len - used, h->offset + used, h->format_size);
			rc = CLI_EXIT_ERROR;
		}
		if (rc != CLI_EXIT_OK || at_eof)
			break;
		if (used == 0 && len == cap) {
			cli_error("hist: %s:%" PRIu64 ": a token at byte offset %" PRIu64
			          " is longer than %d bytes",
			          h->input_name, h->line, h->offset, HIST_READ_BYTES);
			rc = CLI_EXIT_ERROR;
			break;
		}
		memmove(into, into + used, len - used);
		have = len - used;
		h->offset += used;
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

int cli_cmd_hist(cli_call *k)
{
	static const char usage[] =
	    "Usage: tileatom-cli [-s SOCKET] hist NAME [FILE] [--range LO:HI] [--chunk N]\n"
	    "                    [--format text|i32|i64|f32|f64] [--json]\n"
	    "Reads whitespace-separated numbers from FILE (or stdin, also for '-') and adds 1\n"
	    "per number to the bins of the 1-D tile NAME (an indexed flat scatter-add, bounds\n"
	    "checking on, space shared).\n"
	    "Without --range each number is a bin index (it must be an integer; numbers outside\n"
	    "0..N-1 are counted as outside). With --range the numbers are binned uniformly over\n"
	    "[LO, HI] into the tile's N bins as numpy.histogram does: every bin is half-open\n"
	    "except the last, which includes HI; numbers outside [LO, HI] and NaN are outside.\n"
	    "The input is streamed in chunks of N numbers (--chunk, default 1048576) with\n"
	    "several requests in flight. Prints 'added A outside O'\n"
	    "(--json: {\"tile\":...,\"numbers\":N,\"added\":A,\"outside\":O}).\n"
	    "--format reads raw little-endian int32, int64, float32 or float64 elements instead\n"
	    "of text (float elements must be integral without --range).\n";
	static const cli_option opts[] = {
	    {"range", true}, {"chunk", true}, {"json", false}, {"format", true}};
	const cli_args *a = &k->a;
	int rc = cli_parse(k, opts, 4, 1, 2, usage, false);
	if (rc >= 0)
		return rc;
	hist_run h = {.k = k,
	              .tile = a->pos[0],
	              .ranged = a->value[0] != NULL,
	              .chunk_cap = HIST_CHUNK_DEFAULT,
	              .input_name = "stdin"};
	if (h.ranged && !parse_range(a->value[0], &h.lo, &h.hi)) {
		cli_error("hist: bad --range '%s' (expected LO:HI with LO < HI)", a->value[0]);
		return CLI_EXIT_USAGE;
	}
	if (a->value[1] && (cli_parse_counts(a->value[1], 1, &h.chunk_cap) != 1 ||
	                    h.chunk_cap < 1 || h.chunk_cap > (INT64_C(1) << 26))) {
		cli_error("hist: bad --chunk '%s' (1 to 67108864 numbers)", a->value[1]);
		return CLI_EXIT_USAGE;
	}
	static const char *const formats[] = {"text", "i32", "i64", "f32", "f64", NULL};
	const char *format = a->value[3] ? a->value[3] : "text";
	int f = 0;
	while (formats[f] && strcmp(formats[f], format) != 0)
		f++;
	if (!formats[f]) {
		cli_error("hist: bad --format '%s' (text, i32, i64, f32 or f64)", format);
		return CLI_EXIT_USAGE;
	}
	h.format_size = f == 0 ? 0 : (size_t)atoi(format + 1) / 8; /* i32: 4 bytes */
	h.format_float = format[0] == 'f';
	int in = STDIN_FILENO;
	if (a->npos == 2 && strcmp(a->pos[1], "-") != 0) {
		in = open(a->pos[1], O_RDONLY | O_CLOEXEC);
		if (in < 0) {
			cli_error("hist: cannot open %s: %s", a->pos[1], strerror(errno));
			return CLI_EXIT_ERROR;
		}
		h.input_name = a->pos[1];
	}
	struct stat st;
	if (fstat(in, &st) == 0 && S_ISREG(st.st_mode))
		h.input_size = (uint64_t)st.st_size;
	h.progress = isatty(STDERR_FILENO) == 1;
	if ((rc = cli_connect(k)) != CLI_EXIT_OK)
		goto out;
	tileatom_tile_info info;
	if (tileatom_describe(k->c, h.tile, &info, &k->err) != TILEATOM_OK) {
		rc = cli_lib_error(k);
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
	if (tileatom_value_parse(h.dtype, "1", h.one, &k->err) != TILEATOM_OK) {
		rc = cli_lib_error(k);
		goto out;
	}
	tileatom_op_options_init(&h.opts);
	h.opts.space = TILEATOM_SPACE_SHARED;
	h.opts.check_bounds = true;
	/* On a Unix socket the chunks live in a shared buffer and requests name them instead of
	 * carrying them; where none can be made (TCP) they travel inline. */
	size_t chunk_bytes = (size_t)h.chunk_cap * (h.idx64 ? 8 : 4);
	if (tileatom_buffer_create(k->c, chunk_bytes * HIST_SLOTS, &h.shm, &k->err) == TILEATOM_OK)
		h.chunk = tileatom_buffer_data(h.shm);
	else
		h.chunk = malloc(chunk_bytes);
	if (!h.chunk) {
		cli_error("hist: out of memory for a chunk of %" PRId64 " numbers", h.chunk_cap);
		rc = CLI_EXIT_ERROR;
		goto out;
	}
	rc = hist_read(&h, in);
	if (rc == CLI_EXIT_OK)
		rc = hist_flush(&h);
	/* Collect whatever is in flight, also after an input error, to report the counts. */
	if (hist_drain(&h, 0) != CLI_EXIT_OK)
		rc = CLI_EXIT_ERROR;
	hist_progress(&h, true);
	if (rc == CLI_EXIT_OK && a->value[2]) {
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
	if (h.shm)
		tileatom_buffer_free(h.shm);
	else
		free(h.chunk);
	if (in != STDIN_FILENO)
		close(in);
	return rc;
}

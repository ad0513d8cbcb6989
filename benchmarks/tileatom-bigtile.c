/* tileatom-bigtile.c: a tile larger than one device's memory through a daemon serving several
 * (tileatomd --devices; issue 24): creates an int32 tile of --bytes bytes (rounded down to
 * whole rows of 1024 elements) sharded over the daemon's devices (--placement, default
 * shard), adds --value to every element with one element-wise request (each device adds
 * to its rows at the same time), then reads the tile back in chunks of --chunk-rows rows
 * and checks every element exactly. Prints one line per step ("create SECONDS", "add
 * SECONDS GB/s", "verify SECONDS GB/s", then "ok ELEMENTS" or the first wrong element) and
 * the tile's placement. Exit 0 when every element is right, 1 on a failure (message on
 * stderr), 2 on a usage error. Destroys the tile at the end either way. */
#include "tileatom.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Elements per row of the tile (its second axis). */
#define BIG_ROW 1024

/* Seconds on the monotonic clock. */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Prints usage to f. */
static void usage(FILE *f)
{
	fputs("Usage: tileatom-bigtile [-s SOCKET] --bytes N [--placement P] [--value V]\n"
	      "         [--chunk-rows R]\n",
	      f);
}

int main(int argc, char **argv)
{
	const char *address = NULL, *placement = "shard";
	int64_t bytes = 0, chunk_rows = 4096;
	int32_t value = 7;
	static const struct option longopts[] = {
	    {"bytes", required_argument, NULL, 'b'}, {"placement", required_argument, NULL, 'p'},
	    {"value", required_argument, NULL, 'v'}, {"chunk-rows", required_argument, NULL, 'r'},
	    {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "s:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			address = optarg;
			break;
		case 'b':
			bytes = strtoll(optarg, NULL, 0);
			break;
		case 'p':
			placement = optarg;
			break;
		case 'v':
			value = (int32_t)strtol(optarg, NULL, 0);
			break;
		case 'r':
			chunk_rows = strtoll(optarg, NULL, 0);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	int64_t rows = bytes / (int64_t)(BIG_ROW * sizeof(int32_t));
	if (rows < 1 || chunk_rows < 1) {
		usage(stderr);
		return 2;
	}
	tileatom_client *c = NULL;
	tileatom_error err = {0, ""};
	if (tileatom_connect(address, 5000, &c, &err) != TILEATOM_OK) {
		fprintf(stderr, "tileatom-bigtile: connect: %s\n", err.message);
		return 1;
	}
	tileatom_set_timeout(c, 0); /* creating and filling tens of GB takes a while */
	char tile[64];
	snprintf(tile, sizeof(tile), "bigtile-%ld", (long)getpid());
	int64_t shape[2] = {rows, BIG_ROW};
	double t0 = now_s();
	if (tileatom_create_placed(c, tile, TILEATOM_INT32, 2, shape, NULL, 0, placement, NULL,
	                           &err) != TILEATOM_OK) {
		fprintf(stderr, "tileatom-bigtile: create %" PRId64 " x %d int32 (%.2f GB): %s\n",
		        rows, BIG_ROW, (double)rows * BIG_ROW * 4 / 1e9, err.message);
		tileatom_close(c);
		return 1;
	}
	double t1 = now_s();
	double gb = (double)rows * BIG_ROW * 4 / 1e9;
	printf("create %" PRId64 "x%d int32 (%.2f GB) %.3f s\n", rows, BIG_ROW, gb, t1 - t0);
	char where[TILEATOM_PLACEMENT_MAX];
	if (tileatom_tile_placement(c, tile, where, sizeof(where), &err) == TILEATOM_OK)
		printf("placement %s\n", where);
	int rc = 0;
	tileatom_array v = tileatom_scalar(TILEATOM_INT32, &value);
	tileatom_op_result res;
	t0 = now_s();
	if (tileatom_elementwise(c, tile, TILEATOM_OP_ADD, NULL, &v, NULL, NULL, &res, &err) !=
	    TILEATOM_OK) {
		fprintf(stderr, "tileatom-bigtile: add: %s\n", err.message);
		rc = 1;
	} else if (res.applied != (uint64_t)(rows * BIG_ROW)) {
		fprintf(stderr, "tileatom-bigtile: add applied %" PRIu64 " of %" PRId64 "\n",
		        res.applied, rows * BIG_ROW);
		rc = 1;
	}
	t1 = now_s();
	if (rc == 0)
		printf("add %.3f s %.2f GB/s\n", t1 - t0, gb / (t1 - t0));
	int32_t *buf = rc == 0 ? malloc((size_t)chunk_rows * BIG_ROW * sizeof(int32_t)) : NULL;
	if (rc == 0 && !buf) {
		fputs("tileatom-bigtile: out of memory for a chunk\n", stderr);
		rc = 1;
	}
	t0 = now_s();
	for (int64_t r = 0; rc == 0 && r < rows; r += chunk_rows) {
		int64_t n = rows - r < chunk_rows ? rows - r : chunk_rows;
		tileatom_region reg = {2, {r, 0}, {n, BIG_ROW}};
		size_t want = (size_t)n * BIG_ROW * sizeof(int32_t), got = 0;
		if (tileatom_read(c, tile, &reg, buf, want, &got, &err) != TILEATOM_OK ||
		    got != want) {
			fprintf(stderr,
			        "tileatom-bigtile: read rows [%" PRId64 ", %" PRId64 "): %s\n", r,
			        r + n, err.message);
			rc = 1;
			break;
		}
		for (int64_t i = 0; i < n * BIG_ROW; i++)
			if (buf[i] != value) {
				fprintf(stderr,
				        "tileatom-bigtile: element (%" PRId64 ", %" PRId64
				        ") is %d, not %d\n",
				        r + i / BIG_ROW, i % BIG_ROW, buf[i], value);
				rc = 1;
				break;
			}
	}
	t1 = now_s();
	if (rc == 0) {
		printf("verify %.3f s %.2f GB/s\n", t1 - t0, gb / (t1 - t0));
		printf("ok %" PRId64 " elements\n", rows * BIG_ROW);
	}
	free(buf);
	if (tileatom_destroy(c, tile, &err) != TILEATOM_OK) {
		fprintf(stderr, "tileatom-bigtile: destroy: %s\n", err.message);
		rc = 1;
	}
	tileatom_close(c);
	return rc;
}

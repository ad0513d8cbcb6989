/* tileatom-histbench.c: end-to-end histogram benchmark through tileatomd, for comparison
 * with numpy.bincount (benchmarks/hist-vs-numpy runs both in one go). Generates N int32 keys
 * uniform over [0, BINS) with a fixed seed (splitmix64), optionally writes them raw
 * (little-endian int32) to a file for the numpy side, then for each mode histograms them
 * into a fresh BINS-bin int32 tile with indexed flat adds of the scalar 1 (space shared,
 * bounds checking on), timing from the first byte sent to the last response, and checks the
 * bins against its own count. Prints one line per mode: "mode keys seconds Gkeys/s".
 *
 * Modes: `chunked` (requests of --chunk keys, --depth in flight, inline), `split` (the whole
 * array in one library call with shared-memory staging off: one request when it fits the
 * daemon's frame, else the library splits it, part after part), `psplit` (the whole array in
 * one pipelined submit and collect, staging off: over the frame limit the library queues its
 * parts back to back and merges their responses), `pone` (the same submit with the library's
 * defaults: staged in its shared buffer, as `one`), `one` (the same call with the library's
 * defaults: on a Unix socket it stages the keys in its shared buffer, one memcpy), `shm`
 * (the keys already live in a registered shared buffer: sent by reference), `generic` (as
 * shm, but addressed as INDEXED instead of FLAT: the CPU backend's generic element loop),
 * `device` (CUDA builds; `--from device` runs it and devptr alone: the keys live in this process's
 * GPU memory, copied there once before timing, registered with the daemon once by their CUDA IPC
 * handle; each request names them by reference and the daemon's kernel reads them in place: needs
 * tileatomd --backend cuda on the same GPU), `devptr` (the same device keys passed as a raw device
 * pointer on a second connection that registers nothing: the library finds the allocation and
 * registers it itself, in the first repetition), `devsplit` (CUDA builds; the keys split in
 * equal runs over the GPUs of --split-devices, each run in that GPU's memory, registered on a
 * connection of its own; one thread per run, started before timing, sends its run at the same
 * time as the others, released by a barrier).
 * --placement puts the tile where tileatomd --devices should (a device, auto, shard[:N]);
 * --key-device puts the keys of modes device and devptr in that GPU's memory.
 *
 * Failure modes: any failed call, or bins that differ from the expected counts, print the
 * cause and exit 1; usage errors exit 2. */
#include "tileatom.h"

#ifdef TA_HISTBENCH_CUDA
#include <cuda_runtime_api.h>
#endif
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Command-line settings. */
typedef struct hb_opts {
	const char *address;   /* daemon socket; NULL: the default */
	int64_t keys;          /* keys to histogram */
	int64_t bins;          /* bins of the tile */
	int64_t chunk;         /* keys per request in mode chunked */
	int depth;             /* requests in flight in mode chunked */
	int reps;              /* repetitions of each mode (the best is printed) */
	const char *keys_out;  /* file to write the keys to (NULL: none) */
	const char *modes;     /* comma-separated modes */
	const char *placement; /* where the tile goes (--placement; NULL: the default) */
	int key_device;        /* the GPU holding the keys of modes device/devptr */
	int nsplit;            /* GPUs of --split-devices (mode devsplit) */
	int split_dev[8];      /* their ordinals */
} hb_opts;

/* One run of mode devsplit: a connection, its keys in one GPU, the thread sending them. */
typedef struct hb_split {
	tileatom_client *conn; /* the connection it registered its keys on */
	tileatom_buffer *buf;  /* its keys (a device buffer) */
	int64_t n;             /* how many */
	const char *tile;      /* the tile */
	uint64_t applied;      /* what the daemon applied */
	char failure[256];     /* an error, "" when none */
	void *dkeys;           /* the device memory (freed at the end) */
	pthread_t thread;      /* the thread sending its run, started once */
	bool started;          /* thread runs */
} hb_split;

/* The devsplit threads' meeting points: go (the main thread and every split thread) starts
 * a repetition, done ends it; quit (read after go) ends the threads. */
static pthread_barrier_t split_go, split_done;

#ifdef TA_HISTBENCH_CUDA /* devsplit needs device memory */
/* Set (before the last split_go) when the threads are to end. */
static bool split_quit;

/* One indexed add of ones at the split's keys into its tile. */
static void split_send(hb_split *sp)
{
	tileatom_error err = {0, ""};
	tileatom_op_options opts;
	tileatom_op_options_init(&opts);
	opts.space = TILEATOM_SPACE_SHARED;
	int32_t one = 1;
	tileatom_array val = tileatom_scalar(TILEATOM_INT32, &one);
	tileatom_array idx = tileatom_buffer_array(sp->buf, TILEATOM_INT32, 1, &sp->n, 0);
	tileatom_op_result res;
	if (tileatom_indexed(sp->conn, sp->tile, TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL,
	                     &opts, &res, &err) != TILEATOM_OK)
		snprintf(sp->failure, sizeof(sp->failure), "%s", err.message);
	else
		sp->applied = res.applied;
}

/* A devsplit thread: split_send once per repetition, between the barriers, until quit. */
static void *split_main(void *arg)
{
	for (;;) {
		pthread_barrier_wait(&split_go);
		if (split_quit)
			return NULL;
		split_send(arg);
		pthread_barrier_wait(&split_done);
	}
}
#endif

/* Seconds on the monotonic clock. */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* splitmix64: the next pseudo-random value of *state. */
static uint64_t rnd(uint64_t *state)
{
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Prints a failed call and exits 1. */
static void die(const char *what, const tileatom_error *err)
{
	fprintf(stderr, "tileatom-histbench: %s: %s\n", what, err ? err->message : "failed");
	exit(1);
}

/* Runs one mode once on a fresh tile; returns the seconds taken (bins verified). */
static double run_mode(tileatom_client *c, const hb_opts *o, const char *mode, const int32_t *keys,
                       const int32_t *shm_keys, const tileatom_buffer *dbuf, const void *devptr,
                       const int64_t *expect, hb_split *splits)
{
	tileatom_error err = {0, ""};
	char tile[64];
	snprintf(tile, sizeof(tile), "histbench-%ld", (long)getpid());
	(void)tileatom_destroy(c, tile, &err);
	if (tileatom_create_placed(c, tile, TILEATOM_INT32, 1, &o->bins, NULL, 0, o->placement,
	                           NULL, &err) != TILEATOM_OK)
		die("create", &err);
	tileatom_op_options opts;
	tileatom_op_options_init(&opts);
	opts.space = TILEATOM_SPACE_SHARED;
	int32_t one = 1;
	tileatom_array val = tileatom_scalar(TILEATOM_INT32, &one);
	uint64_t applied = 0;
	double t0 = now_s();
	bool split = strcmp(mode, "split") == 0, shm = strcmp(mode, "shm") == 0;
	bool generic = strcmp(mode, "generic") == 0;
	if (strcmp(mode, "devsplit") == 0) {
		if (o->nsplit < 1 || !splits) {
			fprintf(stderr, "tileatom-histbench: mode devsplit needs a CUDA build and "
			                "--split-devices\n");
			exit(2);
		}
		for (int i = 0; i < o->nsplit; i++) {
			splits[i].tile = tile;
			splits[i].failure[0] = '\0';
		}
		/* the threads wait at split_go (started before timing): all send at once */
		pthread_barrier_wait(&split_go);
		pthread_barrier_wait(&split_done);
		for (int i = 0; i < o->nsplit; i++) {
			if (splits[i].failure[0]) {
				fprintf(stderr,
				        "tileatom-histbench: devsplit run %d (GPU %d): %s\n", i,
				        o->split_dev[i], splits[i].failure);
				exit(1);
			}
			applied += splits[i].applied;
		}
	} else if (strcmp(mode, "devptr") == 0) {
		if (!dbuf) {
			fprintf(stderr, "tileatom-histbench: mode devptr needs a CUDA build\n");
			exit(2);
		}
		tileatom_array idx = tileatom_vector(TILEATOM_INT32, o->keys, devptr);
		tileatom_op_result res;
		if (tileatom_indexed(c, tile, TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL,
		                     &opts, &res, &err) != TILEATOM_OK)
			die("indexed add (raw device pointer)", &err);
		applied = res.applied;
	} else if (strcmp(mode, "device") == 0) {
		if (!dbuf) {
			fprintf(stderr, "tileatom-histbench: mode device needs a CUDA build\n");
			exit(2);
		}
		tileatom_array idx = tileatom_buffer_array(dbuf, TILEATOM_INT32, 1, &o->keys, 0);
		tileatom_op_result res;
		if (tileatom_indexed(c, tile, TILEATOM_OP_ADD, NULL, 1, &idx, true, &val, NULL,
		                     &opts, &res, &err) != TILEATOM_OK)
			die("indexed add (device keys)", &err);
		applied = res.applied;
	} else if (strcmp(mode, "one") == 0 || split || shm || generic) {
		tileatom_set_shm_threshold(c, split ? 0 : 1u << 20);
		tileatom_array idx =
		    tileatom_vector(TILEATOM_INT32, o->keys, shm || generic ? shm_keys : keys);
		tileatom_op_result res;
		/* generic: the same elements addressed as INDEXED (not FLAT), which the CPU
		 * backend's fast paths do not take */
		if (tileatom_indexed(c, tile, TILEATOM_OP_ADD, NULL, 1, &idx, !generic, &val, NULL,
		                     &opts, &res, &err) != TILEATOM_OK)
			die("indexed add (one call)", &err);
		applied = res.applied;
	} else if (strcmp(mode, "psplit") == 0 || strcmp(mode, "pone") == 0) {
		/* the whole array in one pipelined submit: over the frame limit, psplit (staging
		 * off) queues its parts back to back (no round trip between them), pone (the
		 * defaults) stages it in the library's shared buffer; collected as one */
		tileatom_set_shm_threshold(c, mode[1] == 's' ? 0 : 1u << 20);
		tileatom_array idx = tileatom_vector(TILEATOM_INT32, o->keys, keys);
		tileatom_response r;
		if (tileatom_submit_indexed(c, tile, TILEATOM_OP_ADD, NULL, 1, &idx, true, &val,
		                            NULL, &opts, NULL, &err) != TILEATOM_OK)
			die("submit (pipelined)", &err);
		if (tileatom_collect(c, &r, &err) != TILEATOM_OK)
			die("collect (pipelined)", &err);
		applied = r.applied;
	} else if (strcmp(mode, "chunked") == 0) {
		for (int64_t k = 0; k < o->keys; k += o->chunk) {
			int64_t n = o->keys - k < o->chunk ? o->keys - k : o->chunk;
			while (tileatom_pending(c) >= (size_t)o->depth) {
				tileatom_response r;
				if (tileatom_collect(c, &r, &err) != TILEATOM_OK)
					die("collect", &err);
				applied += r.applied;
			}
			tileatom_array idx = tileatom_vector(TILEATOM_INT32, n, keys + k);
			if (tileatom_submit_indexed(c, tile, TILEATOM_OP_ADD, NULL, 1, &idx, true,
			                            &val, NULL, &opts, NULL, &err) != TILEATOM_OK)
				die("submit", &err);
		}
		while (tileatom_pending(c) > 0) {
			tileatom_response r;
			if (tileatom_collect(c, &r, &err) != TILEATOM_OK)
				die("collect", &err);
			applied += r.applied;
		}
	} else {
		fprintf(stderr,
		        "tileatom-histbench: unknown mode '%s' (one, split, psplit, pone, shm, "
		        "generic, chunked, device, devptr)\n",
		        mode);
		exit(2);
	}
	double dt = now_s() - t0;
	int32_t *bins = malloc((size_t)o->bins * sizeof(int32_t));
	if (!bins)
		die("out of memory", NULL);
	if (tileatom_read(c, tile, NULL, bins, (size_t)o->bins * sizeof(int32_t), NULL, &err) !=
	    TILEATOM_OK)
		die("read", &err);
	for (int64_t b = 0; b < o->bins; b++)
		if (bins[b] != (int32_t)expect[b]) {
			fprintf(stderr,
			        "tileatom-histbench: mode %s: bin %" PRId64 " is %d, not %" PRId64
			        "\n",
			        mode, b, bins[b], expect[b]);
			exit(1);
		}
	if (applied != (uint64_t)o->keys) {
		fprintf(stderr, "tileatom-histbench: mode %s: %" PRIu64 " applied of %" PRId64 "\n",
		        mode, applied, o->keys);
		exit(1);
	}
	free(bins);
	(void)tileatom_destroy(c, tile, &err);
	return dt;
}

/* Prints usage to f. */
static void usage(FILE *f)
{
	fputs("Usage: tileatom-histbench [-s SOCKET] [-n KEYS] [-b BINS] [--chunk N] [--depth D]\n"
	      "         [--reps R] [--keys-out FILE] [--from host|device] [--placement P]\n"
	      "         [--key-device GPU] [--split-devices GPU,GPU...]\n"
	      "         [--modes shm,one,split,psplit,pone,chunked,generic,device,devptr,"
	      "devsplit]\n",
	      f);
}

int main(int argc, char **argv)
{
	hb_opts o = {NULL, 1 << 24, 256, 1 << 20, 4, 3, NULL, "shm,one,split,chunked",
	             NULL, 0,       0,   {0}};
	static const struct option longopts[] = {{"chunk", required_argument, NULL, 'c'},
	                                         {"depth", required_argument, NULL, 'd'},
	                                         {"reps", required_argument, NULL, 'r'},
	                                         {"keys-out", required_argument, NULL, 'o'},
	                                         {"modes", required_argument, NULL, 'm'},
	                                         {"from", required_argument, NULL, 'f'},
	                                         {"placement", required_argument, NULL, 'p'},
	                                         {"key-device", required_argument, NULL, 'k'},
	                                         {"split-devices", required_argument, NULL, 'S'},
	                                         {"help", no_argument, NULL, 'h'},
	                                         {NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "s:n:b:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.address = optarg;
			break;
		case 'n':
			o.keys = strtoll(optarg, NULL, 0);
			break;
		case 'b':
			o.bins = strtoll(optarg, NULL, 0);
			break;
		case 'c':
			o.chunk = strtoll(optarg, NULL, 0);
			break;
		case 'd':
			o.depth = atoi(optarg);
			break;
		case 'r':
			o.reps = atoi(optarg);
			break;
		case 'o':
			o.keys_out = optarg;
			break;
		case 'p':
			o.placement = optarg;
			break;
		case 'k':
			o.key_device = atoi(optarg);
			break;
		case 'S': {
			char *p = optarg, *end;
			o.nsplit = 0;
			while (*p && o.nsplit < 8) {
				long v = strtol(p, &end, 10);
				if (end == p || v < 0 || (*end && *end != ',')) {
					usage(stderr);
					return 2;
				}
				o.split_dev[o.nsplit++] = (int)v;
				p = *end ? end + 1 : end;
			}
			break;
		}
		case 'm':
			o.modes = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "device") == 0)
				o.modes = "device,devptr";
			else if (strcmp(optarg, "host") != 0) {
				usage(stderr);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (o.keys < 1 || o.bins < 1 || o.bins > INT32_MAX || o.chunk < 1 || o.depth < 1 ||
	    o.reps < 1) {
		usage(stderr);
		return 2;
	}
	int32_t *keys = malloc((size_t)o.keys * sizeof(int32_t));
	int64_t *expect = calloc((size_t)o.bins, sizeof(int64_t));
	if (!keys || !expect)
		die("out of memory for the keys", NULL);
	uint64_t st = 12345;
	for (int64_t k = 0; k < o.keys; k++) {
		keys[k] = (int32_t)(rnd(&st) % (uint64_t)o.bins);
		expect[keys[k]]++;
	}
	if (o.keys_out) {
		FILE *f = fopen(o.keys_out, "wb");
		if (!f || fwrite(keys, sizeof(int32_t), (size_t)o.keys, f) != (size_t)o.keys ||
		    fclose(f) != 0) {
			fprintf(stderr, "tileatom-histbench: cannot write %s\n", o.keys_out);
			return 1;
		}
	}
	tileatom_client *c = NULL;
	tileatom_error err = {0, ""};
	if (tileatom_connect(o.address, 5000, &c, &err) != TILEATOM_OK)
		die("connect", &err);
	/* mode shm: the same keys in a registered shared buffer (a Unix socket only) */
	tileatom_buffer *sbuf = NULL;
	const int32_t *shm_keys = NULL;
	if (strstr(o.modes, "shm") || strstr(o.modes, "generic")) {
		if (tileatom_buffer_create(c, (size_t)o.keys * sizeof(int32_t), &sbuf, &err) !=
		    TILEATOM_OK)
			die("shared buffer", &err);
		memcpy(tileatom_buffer_data(sbuf), keys, (size_t)o.keys * sizeof(int32_t));
		shm_keys = tileatom_buffer_data(sbuf);
	}
	/* mode device: the keys in this process's GPU memory, registered by IPC handle */
	tileatom_buffer *dbuf = NULL;
#ifdef TA_HISTBENCH_CUDA
	void *dkeys = NULL;
	if (strstr(o.modes, "device") || strstr(o.modes, "devptr")) {
		size_t bytes = (size_t)o.keys * sizeof(int32_t);
		cudaIpcMemHandle_t h;
		cudaError_t ce = cudaSetDevice(o.key_device);
		if (ce == cudaSuccess)
			ce = cudaMalloc(&dkeys, bytes);
		if (ce == cudaSuccess)
			ce = cudaMemcpy(dkeys, keys, bytes, cudaMemcpyHostToDevice);
		if (ce == cudaSuccess)
			ce = cudaIpcGetMemHandle(&h, dkeys);
		if (ce != cudaSuccess) {
			fprintf(stderr, "tileatom-histbench: device keys: %s\n",
			        cudaGetErrorString(ce));
			return 1;
		}
		if (tileatom_device_buffer_register(c, &h, bytes, dkeys, &dbuf, &err) !=
		    TILEATOM_OK)
			die("device buffer", &err);
	}
	/* mode devsplit: runs of the keys on the GPUs of --split-devices */
	hb_split splits[8];
	memset(splits, 0, sizeof(splits));
	if (strstr(o.modes, "devsplit")) {
		if (o.nsplit < 1) {
			fprintf(stderr,
			        "tileatom-histbench: mode devsplit needs --split-devices\n");
			return 2;
		}
		int64_t at = 0;
		for (int i = 0; i < o.nsplit; i++) {
			hb_split *sp = &splits[i];
			sp->n = o.keys / o.nsplit + (i < o.keys % o.nsplit ? 1 : 0);
			size_t bytes = (size_t)sp->n * sizeof(int32_t);
			cudaIpcMemHandle_t h;
			cudaError_t ce = cudaSetDevice(o.split_dev[i]);
			if (ce == cudaSuccess)
				ce = cudaMalloc(&sp->dkeys, bytes);
			if (ce == cudaSuccess)
				ce =
				    cudaMemcpy(sp->dkeys, keys + at, bytes, cudaMemcpyHostToDevice);
			if (ce == cudaSuccess)
				ce = cudaIpcGetMemHandle(&h, sp->dkeys);
			if (ce != cudaSuccess) {
				fprintf(stderr, "tileatom-histbench: device keys on GPU %d: %s\n",
				        o.split_dev[i], cudaGetErrorString(ce));
				return 1;
			}
			if (tileatom_connect(o.address, 5000, &sp->conn, &err) != TILEATOM_OK)
				die("connect", &err);
			if (tileatom_device_buffer_register(sp->conn, &h, bytes, sp->dkeys,
			                                    &sp->buf, &err) != TILEATOM_OK)
				die("device buffer (split)", &err);
			at += sp->n;
		}
		if (pthread_barrier_init(&split_go, NULL, (unsigned)o.nsplit + 1) != 0 ||
		    pthread_barrier_init(&split_done, NULL, (unsigned)o.nsplit + 1) != 0)
			die("pthread_barrier_init", NULL);
		for (int i = 0; i < o.nsplit; i++) {
			if (pthread_create(&splits[i].thread, NULL, split_main, &splits[i]) != 0)
				die("pthread_create", NULL);
			splits[i].started = true;
		}
	}
#else
	const void *dkeys = NULL;
	hb_split *splits = NULL;
	if (strstr(o.modes, "devsplit")) {
		fprintf(stderr, "tileatom-histbench: mode devsplit needs a CUDA build\n");
		return 2;
	}
#endif
	/* mode devptr: a connection of its own, on which nothing is registered by hand */
	tileatom_client *c2 = NULL;
	if (strstr(o.modes, "devptr") &&
	    tileatom_connect(o.address, 5000, &c2, &err) != TILEATOM_OK)
		die("connect", &err);
	/* the library asks the driver only about operands of at least its threshold (64 KiB by
	 * default) and reads smaller ones as host memory: the threshold is the keys' size, so
	 * that the keys are asked about and the scalar operand is not (the Python package's
	 * rule: the smallest device array passed) */
	if (c2)
		tileatom_set_device_ptr_threshold(c2, (size_t)o.keys * sizeof(int32_t));
	char modes[256];
	snprintf(modes, sizeof(modes), "%s", o.modes);
	char *save = NULL;
	for (char *m = strtok_r(modes, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
		double best = 0;
		for (int r = 0; r < o.reps; r++) {
			double t = run_mode(strcmp(m, "devptr") == 0 ? c2 : c, &o, m, keys,
			                    shm_keys, dbuf, dkeys, expect, splits);
			if (r == 0 && strcmp(m, "devptr") == 0)
				fprintf(stderr,
				        "devptr: first call (registers the allocation) %.6f s\n",
				        t);
			if (r == 0 || t < best)
				best = t;
		}
		printf("%s %" PRId64 " %.6f %.4f\n", m, o.keys, best, (double)o.keys / best * 1e-9);
		fflush(stdout);
	}
	tileatom_buffer_free(sbuf);
	tileatom_buffer_free(dbuf);
	tileatom_close(c2);
	tileatom_close(c);
#ifdef TA_HISTBENCH_CUDA
	if (dkeys)
		cudaFree(dkeys);
	if (o.nsplit > 0 && splits[0].started) { /* the threads end at their next split_go */
		split_quit = true;
		pthread_barrier_wait(&split_go);
		for (int i = 0; i < o.nsplit; i++)
			if (splits[i].started && pthread_join(splits[i].thread, NULL) != 0)
				die("pthread_join", NULL);
		pthread_barrier_destroy(&split_go);
		pthread_barrier_destroy(&split_done);
	}
	for (int i = 0; i < o.nsplit; i++) {
		tileatom_buffer_free(splits[i].buf);
		tileatom_close(splits[i].conn);
		if (splits[i].dkeys && (cudaSetDevice(o.split_dev[i]) != cudaSuccess ||
		                        cudaFree(splits[i].dkeys) != cudaSuccess))
			fprintf(stderr, "tileatom-histbench: freeing the keys on GPU %d failed\n",
			        o.split_dev[i]);
	}
#endif
	free(keys);
	free(expect);
	return 0;
}

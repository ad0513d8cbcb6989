/* check_persist_crash.c: durability of tileatomd --data-dir under kill -9, and its refusal
 * of damaged files. A plain program (exit 0: pass, 1: fail, 77: skipped) run by make check
 * with a short default; by hand with more rounds for the figures of docs/RELIABILITY.md:
 *
 *   tests/check_persist_crash [--rounds N] [--mode always|everysec|both] [--clients N]
 *                             [--seed S] [--no-corruption] [--keep]
 *
 * Crash rounds: one daemon per round on the same data directory (--compact-size 256K, so
 * that compactions run under the load too); clients of four kinds, each owning one element:
 * synchronous int64 adds, pipelined int64 adds (16 in flight), compare-and-swap increments
 * (not commutative: their order must survive), and synchronous float64 adds (the lock taken
 * alone). At a random moment the daemon gets SIGKILL; it is restarted and every element is
 * read. With --fsync always each counter must hold at least every acknowledged update and at
 * most every update sent (none applied twice), and each cas element must be its last
 * acknowledged value or one more (the one in flight). With everysec the counters must hold
 * every update acknowledged up to 1.1 s before the kill (the main thread samples the
 * acknowledgements every 50 ms), and never more than were sent.
 *
 * Damage: a partial record at the end of the newest log, past what the logmark recorded
 * durable (what a crash leaves), is dropped with a log line (the daemon starts with every
 * add); a byte flipped in the middle of a log, and one flipped in the snapshot's data, make
 * the daemon refuse to start with a message naming the file and the offset. A log cut in
 * the middle after a kill -9 (30 of 100 acknowledged adds cut away) and a log deleted after
 * a snapshot (60 adds) make it refuse with a message saying what is lost; with
 * --accept-log-loss it starts with what is left and says what was lost.
 *
 * Snapshot permission (as root): a client running as uid 65534 gets PERMISSION_DENIED for
 * a snapshot and none is written; root's snapshot works.
 *
 * Full disk: the daemon started with a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored: a
 * write past it fails with EFBIG) and --fsync always; synchronous adds until one fails: the
 * client whose add was not made durable gets an error naming the problem, a new client's
 * add is refused with UNAVAILABLE, its read still works, and after a restart without the
 * limit the value is exactly the number of acknowledged adds.
 *
 * Placements (--devices 3, CPU pools): a tile on pool 2 and one sharded over the 3 with an
 * uneven split, exact values; after kill -9 (from the log alone) and again after a snapshot
 * and kill -9 they are where they were; restarted with --devices 2, each is placed by the
 * default placement and one warning per tile says where it was and where it went. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tileatom.h"

#ifndef TILEATOMD_PATH
#define TILEATOMD_PATH "tileatomd"
#endif

/* Clients of each kind in the default run. */
#define KINDS 4
/* Requests a pipelined client keeps in flight. */
#define DEPTH 16
/* Acknowledgement samples kept per round (every SAMPLE_MS). */
#define SAMPLE_MS   50
#define MAX_SAMPLES 400

/* What a client does (by its index modulo KINDS). */
typedef enum client_kind {
	K_SYNC_ADD = 0, /* int64 add of 1, one at a time */
	K_PIPE_ADD = 1, /* int64 add of 1, DEPTH in flight */
	K_CAS = 2,      /* cas(v, v + 1) on its element, one at a time */
	K_FLOAT_ADD = 3 /* float64 add of 1.0, one at a time */
} client_kind;

/* One client's state across rounds. */
typedef struct client {
	int index;                   /* its element */
	client_kind kind;            /* what it does */
	uint64_t base;               /* the element's value verified at the start of the round */
	atomic_uint_least64_t sent;  /* updates sent this round (may have been applied) */
	atomic_uint_least64_t acked; /* updates acknowledged this round */
	bool cas_in_flight;          /* a cas was sent and not answered when the round ended */
	char error[256];             /* an unexpected answer (fails the test) */
	pthread_t thread;            /* the client thread */
} client;

/* The test's settings and shared state. */
typedef struct run {
	char dir[256];       /* temporary directory */
	char data[512];      /* the data directory */
	char sock[512];      /* the socket */
	char log[512];       /* the daemon's stderr (all rounds, appended) */
	const char *daemon;  /* tileatomd path */
	const char *mode;    /* fsync mode of the round */
	int nclients;        /* clients */
	client *clients;     /* them */
	pid_t pid;           /* the daemon */
	bool on_workers;     /* start it with every request on the workers (alternates) */
	bool accept_loss;    /* start it with --accept-log-loss */
	const char *group;   /* start it with --socket-group (NULL: none) */
	const char *devices; /* start it with --devices (NULL: none) */
	off_t fsize;         /* > 0: the daemon's file size limit (RLIMIT_FSIZE) */
	uint64_t rng;        /* xorshift state */
} run;

static uint64_t rnd(run *r)
{
	r->rng ^= r->rng >> 12;
	r->rng ^= r->rng << 25;
	r->rng ^= r->rng >> 27;
	return r->rng * UINT64_C(2685821657736338717);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}

/* Prints the daemon's log (on failure). */
static void dump_log(const run *r)
{
	FILE *f = fopen(r->log, "r");
	if (!f)
		return;
	fprintf(stderr, "---- tileatomd log (%s) ----\n", r->log);
	char line[512];
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
	fprintf(stderr, "----\n");
}

/* Appends the NULL-terminated more to the NULL-terminated argv (room is the caller's). */
static void append_args(const char **argv, const char *const *more)
{
	int n = 0;
	while (argv[n])
		n++;
	for (int i = 0; more[i]; i++)
		argv[n++] = more[i];
	argv[n] = NULL;
}

/* Starts the daemon (stderr appended to r->log, or to errlog when not NULL); with wait,
 * waits until it accepts a client. Returns false when it exits first (*status set). */
static bool daemon_start(run *r, const char *errlog, bool wait, int *status)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return false;
	}
	if (pid == 0) {
		int fd = open(errlog ? errlog : r->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		if (fd < 0)
			_exit(126);
		dup2(fd, STDERR_FILENO);
		dup2(fd, STDOUT_FILENO);
		unsetenv("NOTIFY_SOCKET");
		if (r->fsize > 0) {
			struct rlimit rl;
			signal(SIGXFSZ, SIG_IGN); /* stays ignored across exec */
			if (getrlimit(RLIMIT_FSIZE, &rl) != 0)
				_exit(125);
			rl.rlim_cur = (rlim_t)r->fsize;
			if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
				_exit(125);
		}
		const char *argv[28] = {r->daemon, "--socket",       r->sock, "--data-dir",
		                        r->data,   "--fsync",        r->mode, "--backend",
		                        "cpu",     "--workers",      "4",     "--log-level",
		                        "notice",  "--compact-size", "256K",  NULL};
		const char *loops = getenv("TA_TEST_LOOPS"); /* the suite again with --loops N */
		if (loops && *loops)
			append_args(argv, (const char *[]){"--loops", loops, NULL});
		const char *spin = getenv("TA_TEST_BUSY_POLL"); /* ... and with --busy-poll */
		if (spin && *spin)
			append_args(argv, (const char *[]){"--busy-poll", spin, NULL});
		/* on_workers: every request with elements on the workers, pipelined reads as
		 * batches: requests of different connections applied concurrently */
		if (r->on_workers)
			append_args(
			    argv, (const char *[]){"--inline-max", "0", "--batch-min", "2", NULL});
		if (r->accept_loss)
			append_args(argv, (const char *[]){"--accept-log-loss", NULL});
		if (r->group)
			append_args(argv, (const char *[]){"--socket-group", r->group, NULL});
		if (r->devices)
			append_args(argv, (const char *[]){"--devices", r->devices, NULL});
		execv(r->daemon, (char *const *)argv);
		_exit(127);
	}
	r->pid = pid;
	int64_t end = now_ms() + 30000;
	while (now_ms() < end) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			r->pid = 0;
			*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			return false;
		}
		if (!wait)
			return true;
		tileatom_client *c = NULL;
		if (access(r->sock, F_OK) == 0 && tileatom_connect(r->sock, 1000, &c, NULL) == 0) {
			tileatom_close(c);
			return true;
		}
		sleep_ms(5);
	}
	fprintf(stderr, "tileatomd did not come up within 30 s\n");
	return false;
}

/* Kills the daemon with sig and reaps it. */
static void daemon_kill(run *r, int sig)
{
	if (r->pid <= 0)
		return;
	kill(r->pid, sig);
	int st;
	while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR) {
	}
	r->pid = 0;
	unlink(r->sock);
}

/* Connects a client (5 s timeouts). */
static tileatom_client *connect_client(const run *r, tileatom_error *err)
{
	tileatom_client *c = NULL;
	if (tileatom_connect(r->sock, 5000, &c, err) != TILEATOM_OK)
		return NULL;
	tileatom_set_timeout(c, 5000);
	return c;
}

/* A client thread: updates its element until the daemon goes away. */
static void *client_main(void *arg)
{
	void **a = arg;
	run *r = a[0];
	client *cl = a[1];
	free(arg);
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	if (!c)
		return NULL; /* killed before we got in: nothing sent */
	int64_t one = 1;
	double fone = 1.0;
	uint64_t cur = cl->base;
	switch (cl->kind) {
	case K_SYNC_ADD:
		for (;;) {
			atomic_fetch_add(&cl->sent, 1);
			if (tileatom_atomic_at(c, "ctr", TILEATOM_OP_ADD, cl->index, TILEATOM_INT64,
			                       &one, NULL, NULL, NULL, &err) != TILEATOM_OK)
				break;
			atomic_fetch_add(&cl->acked, 1);
		}
		break;
	case K_FLOAT_ADD:
		for (;;) {
			atomic_fetch_add(&cl->sent, 1);
			if (tileatom_atomic_at(c, "fctr", TILEATOM_OP_ADD, cl->index,
			                       TILEATOM_FLOAT64, &fone, NULL, NULL, NULL,
			                       &err) != TILEATOM_OK)
				break;
			atomic_fetch_add(&cl->acked, 1);
		}
		break;
	case K_PIPE_ADD: {
		bool ok = true;
		for (int i = 0; i < DEPTH && ok; i++) {
			atomic_fetch_add(&cl->sent, 1);
			ok = tileatom_submit_atomic_at(c, "ctr", TILEATOM_OP_ADD, cl->index,
			                               TILEATOM_INT64, &one, NULL, NULL, NULL,
			                               &err) == TILEATOM_OK;
		}
		while (ok) {
			tileatom_response resp;
			if (tileatom_collect(c, &resp, &err) != TILEATOM_OK)
				break;
			atomic_fetch_add(&cl->acked, 1);
			atomic_fetch_add(&cl->sent, 1);
			ok = tileatom_submit_atomic_at(c, "ctr", TILEATOM_OP_ADD, cl->index,
			                               TILEATOM_INT64, &one, NULL, NULL, NULL,
			                               &err) == TILEATOM_OK;
		}
		break;
	}
	case K_CAS:
		for (;;) {
			int64_t expect = (int64_t)cur, desired = (int64_t)cur + 1, old = -1;
			cl->cas_in_flight = true;
			atomic_fetch_add(&cl->sent, 1);
			if (tileatom_atomic_at(c, "ctr", TILEATOM_OP_CAS, cl->index, TILEATOM_INT64,
			                       &desired, &expect, NULL, &old, &err) != TILEATOM_OK)
				break;
			cl->cas_in_flight = false;
			if (old != expect) {
				snprintf(cl->error, sizeof(cl->error),
				         "cas on element %d: expected %" PRId64 ", found %" PRId64
				         " (nobody else writes it)",
				         cl->index, expect, old);
				break;
			}
			cur++;
			atomic_fetch_add(&cl->acked, 1);
		}
		break;
	}
	tileatom_close(c);
	return NULL;
}

/* Reads both tiles into ints and floats (nclients each); quiet: no message on failure. */
static bool read_state(run *r, int64_t *ints, double *floats, bool quiet)
{
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	if (!c) {
		fprintf(stderr, "cannot connect after restart: %s\n", err.message);
		return false;
	}
	size_t n = (size_t)r->nclients;
	bool ok = tileatom_read(c, "ctr", NULL, ints, n * sizeof(*ints), NULL, &err) == 0 &&
	          tileatom_read(c, "fctr", NULL, floats, n * sizeof(*floats), NULL, &err) == 0;
	if (!ok && !quiet)
		fprintf(stderr, "cannot read the tiles after restart: %s\n", err.message);
	tileatom_close(c);
	return ok;
}

/* Creates the two tiles (first start). */
static bool create_tiles(run *r)
{
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	if (!c) {
		fprintf(stderr, "cannot connect: %s\n", err.message);
		return false;
	}
	int64_t shape[1] = {r->nclients};
	bool ok = tileatom_create(c, "ctr", TILEATOM_INT64, 1, shape, NULL, NULL, &err) == 0 &&
	          tileatom_create(c, "fctr", TILEATOM_FLOAT64, 1, shape, NULL, NULL, &err) == 0;
	if (!ok)
		fprintf(stderr, "cannot create the tiles: %s\n", err.message);
	tileatom_close(c);
	return ok;
}

/* Totals over all rounds of one mode, for the report. */
typedef struct totals {
	uint64_t rounds;     /* rounds run */
	uint64_t acked;      /* acknowledged updates */
	uint64_t lost;       /* acknowledged updates missing after the restart */
	uint64_t unacked;    /* updates applied without an acknowledgement (in flight) */
	uint64_t worst_lost; /* most lost in one round */
} totals;

/* One round: load, SIGKILL at a random moment, restart, verify. */
static bool crash_round(run *r, int round, int min_ms, int max_ms, totals *t)
{
	bool everysec = strcmp(r->mode, "everysec") == 0;
	for (int i = 0; i < r->nclients; i++) {
		client *cl = &r->clients[i];
		atomic_store(&cl->sent, 0);
		atomic_store(&cl->acked, 0);
		cl->cas_in_flight = false;
		void **a = malloc(2 * sizeof(void *));
		if (!a)
			return false;
		a[0] = r;
		a[1] = cl;
		if (pthread_create(&cl->thread, NULL, client_main, a) != 0) {
			free(a);
			fprintf(stderr, "pthread_create failed\n");
			return false;
		}
	}
	/* acknowledgements sampled every SAMPLE_MS: samples[s * nclients + i] */
	int duration = min_ms + (int)(rnd(r) % (uint64_t)(max_ms - min_ms + 1));
	int nsamples = duration / SAMPLE_MS + 1;
	if (nsamples > MAX_SAMPLES)
		nsamples = MAX_SAMPLES;
	uint64_t *samples = calloc((size_t)nsamples * (size_t)r->nclients, sizeof(uint64_t));
	if (!samples)
		return false;
	int64_t start = now_ms();
	int taken = 0;
	while (now_ms() - start < duration) {
		if (taken < nsamples && now_ms() - start >= (int64_t)taken * SAMPLE_MS) {
			for (int i = 0; i < r->nclients; i++)
				samples[(size_t)taken * (size_t)r->nclients + (size_t)i] =
				    atomic_load(&r->clients[i].acked);
			taken++;
		}
		sleep_ms(2);
	}
	int64_t kill_at = now_ms();
	daemon_kill(r, SIGKILL);
	for (int i = 0; i < r->nclients; i++)
		pthread_join(r->clients[i].thread, NULL);

	int status = 0;
	r->on_workers = !r->on_workers; /* the next daemon runs the other way */
	if (!daemon_start(r, NULL, true, &status)) {
		fprintf(stderr, "round %d: tileatomd did not restart (status %d)\n", round, status);
		free(samples);
		return false;
	}
	int64_t *ints = calloc((size_t)r->nclients, sizeof(*ints));
	double *floats = calloc((size_t)r->nclients, sizeof(*floats));
	bool ok = ints && floats && read_state(r, ints, floats, false);
	/* the newest sample at least 1.1 s before the kill: what everysec must have kept */
	int64_t keep_before = kill_at - start - 1100;
	int keep_sample = keep_before >= 0 ? (int)(keep_before / SAMPLE_MS) : -1;
	if (keep_sample >= taken)
		keep_sample = taken - 1;
	uint64_t round_lost = 0;
	for (int i = 0; ok && i < r->nclients; i++) {
		client *cl = &r->clients[i];
		uint64_t sent = atomic_load(&cl->sent), acked = atomic_load(&cl->acked);
		uint64_t v = cl->kind == K_FLOAT_ADD ? (uint64_t)floats[i] : (uint64_t)ints[i];
		if (cl->error[0]) {
			fprintf(stderr, "round %d: %s\n", round, cl->error);
			ok = false;
			break;
		}
		if (v < cl->base) {
			fprintf(stderr,
			        "round %d: element %d went back from %" PRIu64 " to %" PRIu64 "\n",
			        round, i, cl->base, v);
			ok = false;
			break;
		}
		uint64_t got = v - cl->base;
		uint64_t must = acked;
		if (everysec)
			must = keep_sample >= 0
			           ? samples[(size_t)keep_sample * (size_t)r->nclients + (size_t)i]
			           : 0;
		uint64_t most = cl->kind == K_CAS ? acked + (cl->cas_in_flight ? 1 : 0) : sent;
		if (got < must || got > most) {
			fprintf(stderr,
			        "round %d (%s): element %d (kind %d) holds %" PRIu64
			        " updates of this round: acknowledged %" PRIu64
			        ", required %" PRIu64 ", sent %" PRIu64 "%s\n",
			        round, r->mode, i, (int)cl->kind, got, acked, must, sent,
			        got < must ? ": ACKNOWLEDGED UPDATES LOST" : ": APPLIED TWICE");
			ok = false;
			break;
		}
		t->acked += acked;
		if (got < acked) {
			t->lost += acked - got;
			round_lost += acked - got;
		} else {
			t->unacked += got - acked;
		}
		cl->base = v;
	}
	if (round_lost > t->worst_lost)
		t->worst_lost = round_lost;
	t->rounds++;
	free(ints);
	free(floats);
	free(samples);
	return ok;
}

/* Runs rounds crash rounds with fsync mode. */
static bool crash_rounds(run *r, const char *mode, int rounds, int min_ms, int max_ms)
{
	r->mode = mode;
	int status = 0;
	if (!daemon_start(r, NULL, true, &status)) {
		fprintf(stderr, "tileatomd did not start (status %d)\n", status);
		return false;
	}
	/* the tiles exist from an earlier mode's rounds, or are created now */
	int64_t *ints = calloc((size_t)r->nclients, sizeof(*ints));
	double *floats = calloc((size_t)r->nclients, sizeof(*floats));
	bool ok = ints && floats;
	if (ok && !read_state(r, ints, floats, true))
		ok = create_tiles(r) && read_state(r, ints, floats, false);
	for (int i = 0; ok && i < r->nclients; i++)
		r->clients[i].base =
		    r->clients[i].kind == K_FLOAT_ADD ? (uint64_t)floats[i] : (uint64_t)ints[i];
	free(ints);
	free(floats);
	totals t = {0, 0, 0, 0, 0};
	int64_t t0 = now_ms();
	for (int round = 1; ok && round <= rounds; round++)
		ok = crash_round(r, round, min_ms, max_ms, &t);
	daemon_kill(r, SIGTERM);
	printf("fsync %s: %" PRIu64 " kill -9 rounds (%d clients, load %d..%d ms each, %.1f s): "
	       "%" PRIu64 " acknowledged updates, %" PRIu64 " lost (worst round %" PRIu64
	       "), %" PRIu64 " applied in flight without acknowledgement, 0 applied twice: %s\n",
	       mode, t.rounds, r->nclients, min_ms, max_ms, (double)(now_ms() - t0) / 1000.0,
	       t.acked, t.lost, t.worst_lost, t.unacked, ok ? "ok" : "FAILED");
	if (ok && strcmp(mode, "always") == 0 && t.lost != 0)
		ok = false;
	return ok;
}

static void fresh_data(run *r, const char *suffix);

/* ---- operands in shared buffers ---- */

/* Elements of the tile written and added to from a shared buffer. */
#define SHM_N 4096

/* A write and an element-wise add whose operands lie in a shared buffer (sent by
 * reference, not inline) are logged with their bytes: after a kill -9 and a restart the
 * tile holds them (the buffer is gone by then; a record that still referred to it could not
 * be replayed and the daemon would refuse to start). */
static bool shm_test(run *r)
{
	r->mode = "always";
	fresh_data(r, "shm");
	int status = 0;
	if (!daemon_start(r, NULL, true, &status))
		return false;
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	tileatom_buffer *buf = NULL;
	int64_t shape[1] = {SHM_N};
	bool ok = c && tileatom_create(c, "shm", TILEATOM_INT64, 1, shape, NULL, NULL, &err) == 0 &&
	          tileatom_buffer_create(c, 2 * SHM_N * sizeof(int64_t), &buf, &err) == 0;
	if (ok) {
		int64_t *d = tileatom_buffer_data(buf);
		for (int64_t i = 0; i < SHM_N; i++) {
			d[i] = 3 * i;         /* written */
			d[SHM_N + i] = i % 7; /* then added */
		}
		tileatom_array w = tileatom_buffer_array(buf, TILEATOM_INT64, 1, shape, 0);
		tileatom_array a =
		    tileatom_buffer_array(buf, TILEATOM_INT64, 1, shape, SHM_N * sizeof(int64_t));
		ok = tileatom_write(c, "shm", NULL, &w, &err) == 0 &&
		     tileatom_elementwise(c, "shm", TILEATOM_OP_ADD, NULL, &a, NULL, NULL, NULL,
		                          &err) == 0;
	}
	if (!ok)
		fprintf(stderr, "shared-buffer test: %s\n", err.message);
	if (c)
		tileatom_close(c); /* frees the buffer */
	daemon_kill(r, SIGKILL);
	int64_t *got = calloc(SHM_N, sizeof(int64_t));
	ok = ok && got && daemon_start(r, NULL, true, &status);
	c = ok ? connect_client(r, &err) : NULL;
	ok =
	    ok && c && tileatom_read(c, "shm", NULL, got, SHM_N * sizeof(int64_t), NULL, &err) == 0;
	if (c)
		tileatom_close(c);
	daemon_kill(r, SIGTERM);
	int64_t bad = -1;
	for (int64_t i = 0; ok && i < SHM_N && bad < 0; i++)
		if (got[i] != 3 * i + i % 7)
			bad = i;
	if (ok && bad >= 0) {
		fprintf(stderr,
		        "shared-buffer test: element %" PRId64 " holds %" PRId64 ", want %" PRId64
		        "\n",
		        bad, got[bad], 3 * bad + bad % 7);
		ok = false;
	}
	free(got);
	printf("write and add from a shared buffer, logged inline, kept across kill -9: %s\n",
	       ok ? "ok" : "FAILED");
	return ok;
}

/* ---- order of requests applied concurrently ---- */

/* Threads and cas successes each of the order test. */
#define ORDER_THREADS 6
#define ORDER_CAS     300
/* Elements of the tile the threads exchange whole, and how many times each does. */
#define ORDER_WIDE      262144
#define ORDER_WIDE_EXCH 10

/* One thread of the order test: cas-increments element 0 of "ord" (shared by all
 * threads) ORDER_CAS times, exchanges into element 1 and adds a value whose rounding
 * depends on the order into element 0 of the float64 tile "ordf". */
static void *order_main(void *arg)
{
	void **a = arg;
	run *r = a[0];
	intptr_t t = (intptr_t)a[1];
	atomic_bool *failed = a[2];
	free(arg);
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	if (!c) {
		fprintf(stderr, "order test thread %d: %s\n", (int)t, err.message);
		*failed = true;
		return NULL;
	}
	bool bad = false;
	int64_t cur = 0;
	double big = (t % 2) ? 1e16 : -1e16, small = 1.0 + (double)t;
	for (int done = 0; done < ORDER_CAS;) {
		int64_t desired = cur + 1, old = -1;
		if (tileatom_atomic_at(c, "ord", TILEATOM_OP_CAS, 0, TILEATOM_INT64, &desired, &cur,
		                       NULL, &old, &err) != TILEATOM_OK) {
			bad = true;
			break;
		}
		if (old == cur) {
			done++;
			cur++;
		} else {
			cur = old;
		}
		int64_t mine = t * 1000000 + done;
		double f = (done % 2) ? big : small;
		if (tileatom_atomic_at(c, "ord", TILEATOM_OP_EXCH, 1, TILEATOM_INT64, &mine, NULL,
		                       NULL, NULL, &err) != TILEATOM_OK ||
		    tileatom_atomic_at(c, "ordf", TILEATOM_OP_ADD, 0, TILEATOM_FLOAT64, &f, NULL,
		                       NULL, NULL, &err) != TILEATOM_OK) {
			bad = true;
			break;
		}
	}
	/* whole-tile exchanges (even threads) against one-element adds at element 0 (odd
	 * threads), on the workers. They do not commute: an add that lands on element 0 after
	 * a running exchange passed it, and finishes first, is logged before the exchange
	 * unless the exchange holds its lock alone; the log then replays to another value */
	int reps = t % 2 ? 20 * ORDER_WIDE_EXCH : ORDER_WIDE_EXCH;
	for (int i = 0; i < reps && !bad; i++) {
		int64_t v = t % 2 ? 1 : t * 1000 + i;
		tileatom_array val = tileatom_scalar(TILEATOM_INT64, &v);
		int rc = t % 2 ? tileatom_atomic_at(c, "ordw", TILEATOM_OP_ADD, 0, TILEATOM_INT64,
		                                    &v, NULL, NULL, NULL, &err)
		               : tileatom_elementwise(c, "ordw", TILEATOM_OP_EXCH, NULL, &val, NULL,
		                                      NULL, NULL, &err);
		bad = rc != TILEATOM_OK;
	}
	if (bad) {
		*failed = true;
		fprintf(stderr, "order test thread %d: %s\n", (int)t, err.message);
	}
	tileatom_close(c);
	return NULL;
}

/* Reads "ord" (2 int64), "ordf" (1 float64, as bits) and "ordw" (ORDER_WIDE int64). */
static bool read_order(run *r, int64_t *ints, uint64_t *fbits, int64_t *wide)
{
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	double f = 0;
	bool ok = c && tileatom_read(c, "ord", NULL, ints, 2 * sizeof(*ints), NULL, &err) == 0 &&
	          tileatom_read(c, "ordf", NULL, &f, sizeof(f), NULL, &err) == 0 &&
	          tileatom_read(c, "ordw", NULL, wide, ORDER_WIDE * sizeof(*wide), NULL, &err) == 0;
	if (c)
		tileatom_close(c);
	memcpy(fbits, &f, sizeof(f));
	if (!ok)
		fprintf(stderr, "order test: cannot read: %s\n", err.message);
	return ok;
}

/* Requests that do not commute (cas, exch, float adds) from several connections, applied
 * concurrently on the workers: after a kill -9 and a restart every value must be the one
 * read before, to the bit (a log in another order than the application would replay to
 * other values: a cas that succeeded failing, another exch last, other rounding). */
static bool order_test(run *r)
{
	r->mode = "always";
	r->on_workers = true;
	fresh_data(r, "order");
	int status = 0;
	if (!daemon_start(r, NULL, true, &status))
		return false;
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	int64_t shape2[1] = {2}, shape1[1] = {1}, shapew[1] = {ORDER_WIDE};
	bool ok = c &&
	          tileatom_create(c, "ord", TILEATOM_INT64, 1, shape2, NULL, NULL, &err) == 0 &&
	          tileatom_create(c, "ordf", TILEATOM_FLOAT64, 1, shape1, NULL, NULL, &err) == 0 &&
	          tileatom_create(c, "ordw", TILEATOM_INT64, 1, shapew, NULL, NULL, &err) == 0;
	if (c)
		tileatom_close(c);
	atomic_bool failed = !ok;
	pthread_t th[ORDER_THREADS];
	int started = 0;
	for (intptr_t t = 0; ok && t < ORDER_THREADS; t++) {
		void **a = malloc(3 * sizeof(void *));
		if (a) {
			a[0] = r;
			a[1] = (void *)t;
			a[2] = &failed;
		}
		if (!a || pthread_create(&th[t], NULL, order_main, a) != 0) {
			free(a);
			failed = true;
			break;
		}
		started++;
	}
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	int64_t before[2] = {0, 0}, after[2] = {-1, -1};
	uint64_t fb = 0, fa = 1;
	int64_t *wb = calloc(ORDER_WIDE, sizeof(int64_t)),
	        *wa = calloc(ORDER_WIDE, sizeof(int64_t));
	ok = !failed && wb && wa && read_order(r, before, &fb, wb);
	daemon_kill(r, SIGKILL);
	ok = ok && daemon_start(r, NULL, true, &status) && read_order(r, after, &fa, wa);
	daemon_kill(r, SIGTERM);
	int64_t mixed = 0, differ = 0;
	for (int64_t i = 0; ok && i < ORDER_WIDE; i++) {
		mixed += i > 0 && wb[i] != wb[1]; /* element 0 takes the adds too */
		differ += wa[i] != wb[i];
	}
	free(wb);
	free(wa);
	if (ok && (mixed || differ)) {
		fprintf(stderr,
		        "order test: the whole-tile exchanges left %" PRId64
		        " elements unlike the others before the kill, and %" PRId64
		        " differ after the restart\n",
		        mixed, differ);
		ok = false;
	}
	if (ok && (before[0] != ORDER_THREADS * ORDER_CAS || after[0] != before[0] ||
	           after[1] != before[1] || fa != fb)) {
		fprintf(stderr,
		        "order test: before the kill cas %" PRId64 " (want %d), exch %" PRId64
		        ", float bits %016" PRIx64 "; after the restart %" PRId64 ", %" PRId64
		        ", %016" PRIx64 "\n",
		        before[0], ORDER_THREADS * ORDER_CAS, before[1], fb, after[0], after[1],
		        fa);
		ok = false;
	}
	r->on_workers = false;
	printf("order of concurrent cas/exch/float adds (%d connections on the workers) kept "
	       "across kill -9: %s\n",
	       ORDER_THREADS, ok ? "ok" : "FAILED");
	return ok;
}

/* ---- damaged files ---- */

/* Runs n adds of 1 on element 0 of a fresh int64 tile "dmg" (created when absent). */
static bool do_adds(run *r, int n)
{
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	if (!c)
		return false;
	int64_t shape[1] = {4}, one = 1;
	int rc = tileatom_create(c, "dmg", TILEATOM_INT64, 1, shape, NULL, NULL, &err);
	bool ok = rc == 0 || rc == TILEATOM_E_ALREADY_EXISTS;
	for (int i = 0; ok && i < n; i++)
		ok = tileatom_atomic_at(c, "dmg", TILEATOM_OP_ADD, 0, TILEATOM_INT64, &one, NULL,
		                        NULL, NULL, &err) == 0;
	if (!ok)
		fprintf(stderr, "adds failed: %s\n", err.message);
	tileatom_close(c);
	return ok;
}

/* Element 0 of "dmg", or -1. */
static int64_t read_dmg(run *r)
{
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	int64_t v[4] = {-1, 0, 0, 0};
	if (!c || tileatom_read(c, "dmg", NULL, v, sizeof(v), NULL, &err) != 0)
		v[0] = -1;
	if (c)
		tileatom_close(c);
	return v[0];
}

/* Path of the newest log in the data directory into buf. */
static bool newest_log(const run *r, char *buf, size_t n)
{
	char cmd[768];
	snprintf(cmd, sizeof(cmd), "ls %s/log-*.tal 2>/dev/null | sort | tail -n 1", r->data);
	FILE *p = popen(cmd, "r");
	if (!p)
		return false;
	bool ok = fgets(buf, (int)n, p) != NULL;
	pclose(p);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok && buf[0];
}

/* Flips (xor 0xff) the byte at offset of path. */
static bool flip_byte(const char *path, off_t offset)
{
	int fd = open(path, O_RDWR);
	unsigned char b;
	bool ok = fd >= 0 && pread(fd, &b, 1, offset) == 1;
	b ^= 0xff;
	ok = ok && pwrite(fd, &b, 1, offset) == 1;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Size of a file, or -1. */
static off_t file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* True when the file holds every one of the NULL-terminated strings. */
static bool file_has(const char *path, const char *const *want)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	static char text[1 << 16];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	for (int i = 0; want[i]; i++)
		if (!strstr(text, want[i]))
			return false;
	return true;
}

/* Expects the daemon to refuse to start (exit status 1) with a message holding want. */
static bool expect_refusal(run *r, const char *what, const char *const *want)
{
	char errlog[512];
	snprintf(errlog, sizeof(errlog), "%s/refusal.log", r->dir);
	unlink(errlog);
	int status = 0;
	if (daemon_start(r, errlog, true, &status)) {
		fprintf(stderr, "%s: tileatomd started although its files are damaged\n", what);
		daemon_kill(r, SIGTERM);
		return false;
	}
	bool ok = status == 1 && file_has(errlog, want);
	FILE *f = fopen(errlog, "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "<3>"))
			printf("%s: refused as expected: %s", what, line);
	if (f)
		fclose(f);
	if (!ok) {
		fprintf(stderr, "%s: expected exit status 1 and a message with", what);
		for (int i = 0; want[i]; i++)
			fprintf(stderr, " '%s'", want[i]);
		fprintf(stderr, "; got status %d\n", status);
		snprintf(r->log, sizeof(r->log), "%s", errlog);
		dump_log(r);
	}
	return ok;
}

/* Moves the data directory away and starts from an empty one. */
static void fresh_data(run *r, const char *suffix)
{
	char moved[640];
	snprintf(moved, sizeof(moved), "%s.%s", r->data, suffix);
	if (rename(r->data, moved) != 0 && errno != ENOENT)
		perror("rename");
}

/* Appends n bytes of path read at offset from (a copy of part of a record: a partial
 * record at the end, as a write cut by a crash leaves it). */
static bool append_partial(const char *path, off_t from, size_t n)
{
	unsigned char buf[256];
	int fd = open(path, O_RDWR | O_APPEND);
	bool ok = fd >= 0 && n <= sizeof(buf) && pread(fd, buf, n, from) == (ssize_t)n &&
	          write(fd, buf, n) == (ssize_t)n;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* The end offsets of the whole records of the log at path into ends (at most max);
 * returns how many. */
static size_t record_ends(const char *path, off_t *ends, size_t max)
{
	FILE *f = fopen(path, "rb");
	if (!f || fseek(f, 8, SEEK_SET) != 0) {
		if (f)
			fclose(f);
		return 0;
	}
	off_t off = 8;
	size_t n = 0;
	unsigned char h[28];
	while (n < max && fread(h, 1, sizeof(h), f) == sizeof(h)) {
		uint32_t len = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 |
		               (uint32_t)h[3] << 24;
		if (fseek(f, (long)len, SEEK_CUR) != 0)
			break;
		off += (off_t)(sizeof(h) + len);
		ends[n++] = off;
	}
	fclose(f);
	return n;
}

/* The durable length of the log the data directory's logmark names (its whole slot with
 * the higher count), or -1. */
static off_t mark_bytes(const run *r)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/logmark", r->data);
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	uint64_t best = 0;
	off_t bytes = -1;
	for (int i = 0; i < 2; i++) {
		unsigned char b[48];
		uint64_t v[4];
		if (fseek(f, i * 4096L, SEEK_SET) != 0 || fread(b, 1, sizeof(b), f) != sizeof(b) ||
		    memcmp(b, "TAMARK01", 8) != 0)
			continue;
		memcpy(v, b + 8, sizeof(v)); /* count, first, bytes, last (little-endian host) */
		if (v[0] > best) {
			best = v[0];
			bytes = (off_t)v[2];
		}
	}
	fclose(f);
	return bytes;
}

/* Starts the daemon with --accept-log-loss expecting it to say want in its log and to hold
 * value in "dmg"; then a plain start must hold it too. */
static bool expect_accepted(run *r, const char *what, const char *want, int64_t value)
{
	char errlog[512];
	snprintf(errlog, sizeof(errlog), "%s/accepted.log", r->dir);
	unlink(errlog);
	int status = 0;
	r->accept_loss = true;
	bool ok = daemon_start(r, errlog, true, &status);
	r->accept_loss = false;
	int64_t v = ok ? read_dmg(r) : -1;
	daemon_kill(r, SIGTERM);
	const char *const logged[] = {want, "starting with what is left (--accept-log-loss)", NULL};
	bool said = file_has(errlog, logged);
	ok = ok && said && v == value;
	int64_t again = ok && daemon_start(r, NULL, true, &status) ? read_dmg(r) : -1;
	daemon_kill(r, SIGTERM);
	ok = ok && again == value;
	if (!ok) {
		fprintf(stderr,
		        "%s: expected --accept-log-loss to start with %" PRId64
		        " and say '%s'; got "
		        "%" PRId64 " (said: %d), then %" PRId64 " without it\n",
		        what, value, want, v, (int)said, again);
		snprintf(r->log, sizeof(r->log), "%s", errlog);
		dump_log(r);
	} else {
		printf("%s: --accept-log-loss started with %" PRId64 " and said what was lost; a "
		       "plain start then works: ok\n",
		       what, value);
	}
	return ok;
}

/* The log cut mid-way after a kill -9 (100 adds acknowledged with --fsync always, 30 of
 * them in the part cut away) and the log deleted after a snapshot (60 adds gone): each
 * refused with a message saying how much is lost; --accept-log-loss starts with what is
 * left and says so. */
static bool log_loss_tests(run *r)
{
	int status = 0;
	char logp[640];
	fresh_data(r, "before-cut");
	bool ok = daemon_start(r, NULL, true, &status) && do_adds(r, 100);
	ok = ok && newest_log(r, logp, sizeof(logp));
	/* wait (up to 10 s) for the logmark to cover every add, then kill -9 */
	off_t size = ok ? file_size(logp) : -1;
	for (int i = 0; ok && i < 1000 && mark_bytes(r) != size; i++)
		sleep_ms(10);
	ok = ok && mark_bytes(r) == size;
	daemon_kill(r, SIGKILL);
	off_t ends[128];
	ok = ok && record_ends(logp, ends, 128) == 101; /* the create and 100 adds */
	ok = ok && truncate(logp, ends[70] + 10) == 0;  /* 70 adds and 10 bytes of the 71st */
	if (!ok) {
		fprintf(stderr, "log cut: cannot set up\n");
		return false;
	}
	char want[256];
	snprintf(want, sizeof(want),
	         "cut short at byte %lld, after record 71, of %lld bytes durable through record "
	         "101: at least %lld bytes, 30 records lost",
	         (long long)ends[70], (long long)size, (long long)(size - ends[70]));
	const char *cut[] = {strrchr(logp, '/') + 1, want,
	                     "refusing to start without --accept-log-loss", NULL};
	ok = expect_refusal(r, "log cut mid-way", cut);
	ok = ok && expect_accepted(r, "log cut mid-way", want, 70);

	/* a deleted log: 40 adds in the snapshot, 60 after it */
	fresh_data(r, "before-delete");
	ok = ok && daemon_start(r, NULL, true, &status) && do_adds(r, 40);
	tileatom_error err = {0, ""};
	tileatom_snapshot_info info;
	tileatom_client *c = ok ? connect_client(r, &err) : NULL;
	ok = c && tileatom_snapshot(c, &info, &err) == 0 && info.seq == 41;
	if (c)
		tileatom_close(c);
	ok = ok && do_adds(r, 60);
	daemon_kill(r, SIGTERM);
	ok = ok && newest_log(r, logp, sizeof(logp));
	size = ok ? file_size(logp) : -1;
	ok = ok && unlink(logp) == 0;
	snprintf(want, sizeof(want),
	         "missing; %lld bytes through record 101 were durable: at least %lld bytes, 60 "
	         "records lost",
	         (long long)size, (long long)size);
	const char *gone[] = {strrchr(logp, '/') + 1, want,
	                      "refusing to start without --accept-log-loss", NULL};
	ok = ok && expect_refusal(r, "deleted log", gone);
	ok = ok && expect_accepted(r, "deleted log", want, 40);
	printf("log cut short or missing: %s\n", ok ? "ok" : "FAILED");
	return ok;
}

static bool damage_tests(run *r)
{
	r->mode = "always";
	int status = 0;
	char logp[640];
	bool ok = true;

	/* 1. a torn last record (a partial record past the durable end, as a crash leaves
	 * it): the daemon starts, drops it, says so, keeps every add */
	fresh_data(r, "crash");
	ok = daemon_start(r, NULL, true, &status) && do_adds(r, 10);
	daemon_kill(r, SIGTERM);
	ok = ok && newest_log(r, logp, sizeof(logp));
	off_t size = ok ? file_size(logp) : -1;
	off_t ends[16];
	ok = ok && record_ends(logp, ends, 16) == 11 && ends[10] == size; /* create, 10 adds */
	ok = ok && append_partial(logp, ends[9], 35); /* the start of the last one again */
	if (ok) {
		char errlog[640];
		snprintf(errlog, sizeof(errlog), "%s/torn.log", r->dir);
		unlink(errlog);
		ok = daemon_start(r, errlog, true, &status);
		int64_t v = ok ? read_dmg(r) : -1;
		daemon_kill(r, SIGTERM);
		const char *want[] = {"dropping a torn last record", strrchr(logp, '/') + 1,
		                      "recorded durable", NULL};
		if (!ok || v != 10 || !file_has(errlog, want) || file_size(logp) != size) {
			fprintf(stderr,
			        "torn record: expected a start with 10 adds, a log line naming %s "
			        "and the log cut back to %lld bytes; got start %d, value %" PRId64
			        "\n",
			        logp, (long long)size, (int)ok, v);
			ok = false;
		} else {
			printf(
			    "torn last record: dropped with a log line, 10 of 10 adds kept: ok\n");
		}
	}
	/* the log cut back must go on being appended to cleanly */
	if (ok) {
		ok = daemon_start(r, NULL, true, &status) && do_adds(r, 5);
		daemon_kill(r, SIGKILL);
		ok = ok && daemon_start(r, NULL, true, &status) && read_dmg(r) == 15;
		daemon_kill(r, SIGTERM);
		if (!ok)
			fprintf(stderr, "after the torn record: appending again failed\n");
	}

	/* 2. a byte flipped in the middle of the log */
	if (ok) {
		ok = daemon_start(r, NULL, true, &status) && do_adds(r, 200);
		daemon_kill(r, SIGTERM);
		ok = ok && newest_log(r, logp, sizeof(logp));
		size = ok ? file_size(logp) : -1;
		ok = ok && size > 1000 && flip_byte(logp, size / 2);
		const char *want[] = {strrchr(logp, '/') + 1, "offset", "refusing to start", NULL};
		ok = ok && expect_refusal(r, "flipped log byte", want);
		ok = ok && flip_byte(logp, size / 2); /* repaired: starts again */
		ok = ok && daemon_start(r, NULL, true, &status) && read_dmg(r) == 215;
		daemon_kill(r, SIGTERM);
	}

	/* 3. a byte flipped in the snapshot's data */
	if (ok) {
		tileatom_error err = {0, ""};
		tileatom_snapshot_info info;
		ok = daemon_start(r, NULL, true, &status);
		tileatom_client *c = ok ? connect_client(r, &err) : NULL;
		ok = c && tileatom_snapshot(c, &info, &err) == 0 && info.tiles == 1;
		if (c)
			tileatom_close(c);
		daemon_kill(r, SIGTERM);
		char snap[640];
		snprintf(snap, sizeof(snap), "%s/snapshot.tas", r->data);
		size = file_size(snap);
		ok = ok && size > 40 && flip_byte(snap, size - 12); /* in the elements */
		const char *want[] = {"snapshot.tas", "checksum mismatch at offset", NULL};
		ok = ok && expect_refusal(r, "flipped snapshot byte", want);
		if (!ok)
			fprintf(stderr, "snapshot damage test failed (%s)\n", err.message);
	}
	ok = ok && log_loss_tests(r);
	printf("damaged files: %s\n", ok ? "ok" : "FAILED");
	return ok;
}

/* ---- the snapshot request from another user ---- */

/* As root: a client running as nobody (uid and gid 65534, reaching the socket through
 * --socket-group) asks for a snapshot: PERMISSION_DENIED, and no snapshot is written; the
 * daemon's own user (root) may. Skipped (passes) when not root or without group 65534. */
static bool snapshot_uid_test(run *r)
{
	struct group *g = getgrgid(65534);
	if (geteuid() != 0 || !g) {
		printf("snapshot from another uid: skipped (needs root and group 65534)\n");
		return true;
	}
	char group[64];
	snprintf(group, sizeof(group), "%s", g->gr_name);
	fresh_data(r, "before-uid");
	int status = 0;
	r->group = group;
	bool ok = chmod(r->dir, 0711) == 0 && daemon_start(r, NULL, true, &status) && do_adds(r, 3);
	r->group = NULL;
	char snap[600];
	snprintf(snap, sizeof(snap), "%s/snapshot.tas", r->data);
	fflush(NULL);
	pid_t pid = ok ? fork() : -1;
	if (pid == 0) {
		tileatom_error err = {0, ""};
		tileatom_client *c = NULL;
		tileatom_snapshot_info info;
		if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			_exit(3);
		if (tileatom_connect(r->sock, 5000, &c, &err) != 0)
			_exit(4);
		int rc = tileatom_snapshot(c, &info, &err);
		tileatom_close(c);
		_exit(
		    rc == TILEATOM_E_PERMISSION_DENIED &&
		            strstr(err.message, "only the daemon's user, root or an authenticated")
		        ? 0
		        : 5);
	}
	int st = -1;
	ok = ok && pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	bool denied_nothing = file_size(snap) < 0;
	tileatom_error err = {0, ""};
	tileatom_snapshot_info info;
	tileatom_client *c = ok ? connect_client(r, &err) : NULL;
	bool own = c && tileatom_snapshot(c, &info, &err) == 0 && info.seq == 4;
	if (c)
		tileatom_close(c);
	daemon_kill(r, SIGTERM);
	ok = ok && denied_nothing && own && chmod(r->dir, 0700) == 0;
	printf("snapshot from uid 65534: PERMISSION_DENIED (child exit %d), nothing written: %d; "
	       "from root: %d: %s\n",
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1, (int)denied_nothing, (int)own,
	       ok ? "ok" : "FAILED");
	return ok;
}

/* ---- where tiles lived, across kill -9 ---- */

/* The placement test's tiles: name, rows, columns, the placement asked and where it put
 * them on 3 pools. */
static const struct {
	const char *name;   /* the tile */
	int64_t shape[2];   /* its shape */
	const char *asked;  /* the create's placement */
	const char *placed; /* where it went */
} place_tiles[] = {{"pa", {5, 1}, "2", "2"}, {"pb", {7, 3}, "shard", "0:[0,3) 1:[3,5) 2:[5,7)"}};

/* Element k of the placement test's tile t. */
static int64_t place_value(int t, int64_t k)
{
	return (t + 1) * 1000 - k * 13;
}

/* On a daemon with --devices r->devices: checks that the placement test's tiles are where
 * want[] says (NULL: where they were placed first) and hold their values (create: creates
 * and writes them first). */
static bool place_check(run *r, bool create, const char *const *want)
{
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	bool ok = c != NULL;
	for (int t = 0; ok && t < 2; t++) {
		const char *name = place_tiles[t].name;
		int64_t n = place_tiles[t].shape[0] * place_tiles[t].shape[1], v[21], got[21];
		for (int64_t k = 0; k < n; k++)
			v[k] = place_value(t, k);
		tileatom_array a = {
		    TILEATOM_INT64, 2, {place_tiles[t].shape[0], place_tiles[t].shape[1]}, v};
		if (create)
			ok = tileatom_create_placed(c, name, TILEATOM_INT64, 2,
			                            place_tiles[t].shape, NULL, 0,
			                            place_tiles[t].asked, NULL, &err) == 0 &&
			     tileatom_write(c, name, NULL, &a, &err) == 0;
		char where[TILEATOM_PLACEMENT_MAX];
		const char *expect = want ? want[t] : place_tiles[t].placed;
		ok =
		    ok && tileatom_tile_placement(c, name, where, sizeof(where), &err) == 0 &&
		    tileatom_read(c, name, NULL, got, (size_t)n * sizeof(int64_t), NULL, &err) == 0;
		if (ok && strcmp(where, expect) != 0) {
			fprintf(stderr, "tile %s is on %s, expected %s\n", name, where, expect);
			ok = false;
		}
		for (int64_t k = 0; ok && k < n; k++)
			if (got[k] != v[k]) {
				fprintf(stderr,
				        "%s[%" PRId64 "] = %" PRId64 ", written %" PRId64 "\n",
				        name, k, got[k], v[k]);
				ok = false;
			}
	}
	if (c && !ok)
		fprintf(stderr, "placement test: %s\n", err.message);
	if (c)
		tileatom_close(c);
	return ok;
}

/* Tiles placed on pool 2 and sharded over 3 pools with exact values; kill -9 (the log
 * alone holds them); restarted on 3 pools they are where they were; a snapshot, kill -9;
 * restarted on 2 pools they are placed by the default placement (device 0), each logged. */
static bool placement_test(run *r)
{
	fresh_data(r, "before-placement");
	char errlog[512];
	snprintf(errlog, sizeof(errlog), "%s/placement.log", r->dir);
	unlink(errlog);
	int status = 0;
	r->devices = "3";
	bool ok = daemon_start(r, errlog, true, &status) && place_check(r, true, NULL);
	daemon_kill(r, SIGKILL);
	ok = ok && daemon_start(r, errlog, true, &status) && place_check(r, false, NULL);
	tileatom_error err = {0, ""};
	tileatom_snapshot_info info;
	tileatom_client *c = ok ? connect_client(r, &err) : NULL;
	ok = ok && c && tileatom_snapshot(c, &info, &err) == 0 && info.tiles == 2;
	if (c)
		tileatom_close(c);
	daemon_kill(r, SIGKILL);
	r->devices = "2";
	const char *on2[] = {"0", "0"};
	ok = ok && daemon_start(r, errlog, true, &status) && place_check(r, false, on2);
	daemon_kill(r, SIGTERM);
	r->devices = NULL;
	const char *lines[] = {
	    "<4>tile 'pa' was on 2; placed by the default placement (--placement) on 0 instead: "
	    "tile 'pa': cannot allocate 40 bytes: placement: device 2 does not exist (devices "
	    "0..1)\n",
	    "<4>tile 'pb' was on 0:[0,3) 1:[3,5) 2:[5,7); placed by the default placement "
	    "(--placement) on 0 instead: tile 'pb': cannot allocate 168 bytes: placement: device 2 "
	    "does not exist (devices 0..1)\n",
	    NULL};
	ok = ok && file_has(errlog, lines);
	printf("placements across kill -9 (log alone, then a snapshot; 3 pools, then 2): %s\n",
	       ok ? "ok" : "FAILED");
	if (!ok) {
		snprintf(r->log, sizeof(r->log), "%s", errlog);
		dump_log(r);
	}
	return ok;
}

/* ---- a full disk ---- */

/* One add of 1 to element 0 of "full" on c; returns the library's code, message in err. */
static int full_add(tileatom_client *c, tileatom_error *err)
{
	int64_t one = 1;
	return tileatom_atomic_at(c, "full", TILEATOM_OP_ADD, 0, TILEATOM_INT64, &one, NULL, NULL,
	                          NULL, err);
}

static bool disk_full_test(run *r)
{
	fresh_data(r, "before-full");
	r->mode = "always";
	char errlog[512];
	snprintf(errlog, sizeof(errlog), "%s/full.log", r->dir);
	int status = 0;
	if (!daemon_start(r, errlog, true, &status))
		return false;
	tileatom_error err = {0, ""};
	tileatom_client *c = connect_client(r, &err);
	int64_t shape[1] = {1};
	bool ok = c && tileatom_create(c, "full", TILEATOM_INT64, 1, shape, NULL, NULL, &err) == 0;
	/* a 128 KiB write: the limit set below is then far above the daemon's own log file,
	 * which it limits too */
	int64_t pad_shape[1] = {16384};
	static int64_t pad[16384];
	tileatom_array values = {TILEATOM_INT64, 1, {16384}, pad};
	ok = ok && tileatom_create(c, "pad", TILEATOM_INT64, 1, pad_shape, NULL, NULL, &err) == 0 &&
	     tileatom_write(c, "pad", NULL, &values, &err) == 0;
	if (c)
		tileatom_close(c);
	daemon_kill(r, SIGTERM);
	char log[768];
	ok = ok && newest_log(r, log, sizeof(log));
	off_t size = ok ? file_size(log) : -1;
	if (!ok || size <= 0) {
		fprintf(stderr, "full disk: cannot set up: %s\n", err.message);
		return false;
	}
	r->fsize = size + 1000; /* room for about 12 adds (about 80 bytes each) */
	ok = daemon_start(r, errlog, true, &status);
	r->fsize = 0;
	c = ok ? connect_client(r, &err) : NULL;
	int acked = 0, rc = 0;
	while (c && acked < 1000 && (rc = full_add(c, &err)) == 0)
		acked++;
	char withheld[TILEATOM_MSG_MAX];
	snprintf(withheld, sizeof(withheld), "%s", err.message);
	if (c)
		tileatom_close(c);
	/* a new client: mutations refused with UNAVAILABLE, reads served */
	tileatom_client *c2 = ok ? connect_client(r, &err) : NULL;
	int rc2 = c2 ? full_add(c2, &err) : -1;
	char refused[TILEATOM_MSG_MAX];
	snprintf(refused, sizeof(refused), "%s", err.message);
	int64_t in_memory = -1;
	if (c2 && tileatom_read(c2, "full", NULL, &in_memory, sizeof(in_memory), NULL, &err) != 0)
		in_memory = -1;
	if (c2)
		tileatom_close(c2);
	daemon_kill(r, SIGTERM);
	ok = ok && daemon_start(r, errlog, true, &status);
	c = ok ? connect_client(r, &err) : NULL;
	int64_t after = -1;
	if (c && tileatom_read(c, "full", NULL, &after, sizeof(after), NULL, &err) != 0)
		after = -1;
	bool adds_again = c && full_add(c, &err) == 0;
	if (c)
		tileatom_close(c);
	daemon_kill(r, SIGTERM);
	const char *const logged[] = {"persistence log write failed: File too large; mutations "
	                              "are refused until the daemon is restarted",
	                              NULL};
	bool pass = ok && acked >= 1 && acked < 1000 && rc != 0 &&
	            strstr(withheld, "persistence log write failed: File too large") &&
	            strstr(withheld, "withheld") && rc2 == TILEATOM_E_UNAVAILABLE &&
	            strstr(refused, "persistence log write failed: File too large") &&
	            strstr(refused, "mutations are refused until the daemon is restarted") &&
	            in_memory == acked + 1 && after == acked && adds_again &&
	            file_has(errlog, logged);
	printf("full disk (--fsync always, file size limit): %d adds acknowledged; the next: "
	       "\"%s\"; a new client's add: \"%s\"; read while full %" PRId64
	       ", after a restart %" PRId64 ": %s\n",
	       acked, withheld, refused, in_memory, after, pass ? "ok" : "FAILED");
	if (!pass) {
		snprintf(r->log, sizeof(r->log), "%s", errlog);
		dump_log(r);
	}
	return pass;
}

int main(int argc, char **argv)
{
	int rounds = 0;
	const char *mode = "both";
	int nclients = 2 * KINDS;
	bool corruption = true, keep = false;
	run r;
	memset(&r, 0, sizeof(r));
	r.rng = (uint64_t)time(NULL) * 2654435761u + (uint64_t)getpid();
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc)
			mode = argv[++i];
		else if (strcmp(argv[i], "--clients") == 0 && i + 1 < argc)
			nclients = atoi(argv[++i]);
		else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			r.rng = strtoull(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--no-corruption") == 0)
			corruption = false;
		else if (strcmp(argv[i], "--keep") == 0)
			keep = true;
		else {
			fprintf(
			    stderr,
			    "usage: %s [--rounds N] [--mode always|everysec|both] [--clients N] "
			    "[--seed S] [--no-corruption] [--keep]\n",
			    argv[0]);
			return 2;
		}
	}
	if (nclients < 1 || rounds < 0) {
		fprintf(stderr, "bad --clients or --rounds\n");
		return 2;
	}
	if (!r.rng)
		r.rng = 1;
	printf("seed %" PRIu64 "\n", r.rng);
	r.daemon = getenv("TILEATOMD") ? getenv("TILEATOMD") : TILEATOMD_PATH;
	const char *tmp = getenv("TMPDIR");
	snprintf(r.dir, sizeof(r.dir), "%s/tileatom-crash-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(r.dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(r.data, sizeof(r.data), "%s/data", r.dir);
	snprintf(r.sock, sizeof(r.sock), "%s/d.sock", r.dir);
	snprintf(r.log, sizeof(r.log), "%s/tileatomd.log", r.dir);
	signal(SIGPIPE, SIG_IGN);
	r.nclients = nclients;
	r.clients = calloc((size_t)nclients, sizeof(*r.clients));
	if (!r.clients)
		return 1;
	for (int i = 0; i < nclients; i++) {
		r.clients[i].index = i;
		r.clients[i].kind = (client_kind)(i % KINDS);
	}
	if (!rounds && getenv("TA_UNDER_VALGRIND"))
		rounds = 2; /* the clients run under valgrind: keep it short */
	bool ok = true;
	bool both = strcmp(mode, "both") == 0;
	if (both || strcmp(mode, "always") == 0)
		ok = crash_rounds(&r, "always", rounds ? rounds : 10, 30, 400);
	if (ok && (both || strcmp(mode, "everysec") == 0))
		ok = crash_rounds(&r, "everysec", rounds ? rounds : 4, 1200, 2000);
	if (!ok)
		dump_log(&r);
	if (ok && corruption)
		ok = order_test(&r) && shm_test(&r) && damage_tests(&r) && snapshot_uid_test(&r) &&
		     disk_full_test(&r) && placement_test(&r);
	if (r.pid > 0)
		daemon_kill(&r, SIGKILL);
	free(r.clients);
	if (!keep && ok) {
		char cmd[400];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r.dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", r.dir);
	} else {
		printf("files kept in %s\n", r.dir);
	}
	return ok ? 0 : 1;
}

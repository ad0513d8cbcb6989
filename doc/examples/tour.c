/* tour.c: the README's C tour of libtileatom-client: a 256-bin histogram built with one
 * indexed atomic add (shared-space accumulation), and a compare-and-swap spin lock that
 * protects a plain read-modify-write of another tile.
 *
 * Build: cc tour.c $(pkg-config --cflags --libs tileatom-client) -o tour
 * Run:   ./tour [SOCKET]    (default: the daemon's default socket) */
#include <stdio.h>
#include <stdlib.h>
#include <tileatom.h>

/* Prints a failed call's message and exits. */
static void check(int rc, const tileatom_error *err, const char *what)
{
	if (rc != TILEATOM_OK) {
		fprintf(stderr, "tour: %s: %s (%s)\n", what, err->message, tileatom_strerror(rc));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	tileatom_client *c;
	tileatom_error err = {0};
	check(tileatom_connect(argc > 1 ? argv[1] : NULL, 2000, &c, &err), &err, "connect");

	/* Histogram: 100,000 keys into 256 int32 bins, one request. */
	enum { NKEYS = 100000, NBINS = 256 };
	int32_t *keys = malloc(sizeof(int32_t) * NKEYS);
	if (!keys)
		return 1;
	for (int i = 0; i < NKEYS; i++)
		keys[i] = (int32_t)((i * 2654435761u) % NBINS);
	int64_t bins_shape[1] = {NBINS};
	check(tileatom_create(c, "tour.hist", TILEATOM_INT32, 1, bins_shape, NULL, NULL, &err),
	      &err, "create tour.hist");
	tileatom_array idx = tileatom_vector(TILEATOM_INT32, NKEYS, keys);
	int32_t one = 1;
	tileatom_array ones = tileatom_scalar(TILEATOM_INT32, &one);
	tileatom_op_options opts;
	tileatom_op_options_init(&opts);
	opts.space = TILEATOM_SPACE_SHARED; /* private per-worker bins, merged at the end */
	tileatom_op_result res;
	check(tileatom_indexed(c, "tour.hist", TILEATOM_OP_ADD, NULL, 1, &idx, true, &ones, NULL,
	                       &opts, &res, &err),
	      &err, "histogram");
	int32_t bins[NBINS];
	check(tileatom_read(c, "tour.hist", NULL, bins, sizeof(bins), NULL, &err), &err, "read");
	printf("histogram: %llu keys added, bin 0 = %d, bin 255 = %d\n",
	       (unsigned long long)res.applied, bins[0], bins[NBINS - 1]);

	/* A cas lock word guarding a non-atomic read-modify-write of a counter tile. */
	int64_t one_shape[1] = {1};
	check(tileatom_create(c, "tour.lock", TILEATOM_INT32, 1, one_shape, NULL, NULL, &err), &err,
	      "create tour.lock");
	check(tileatom_create(c, "tour.counter", TILEATOM_INT64, 1, one_shape, NULL, NULL, &err),
	      &err, "create tour.counter");
	int32_t unlocked = 0, locked = 1, seen = 1;
	tileatom_op_options acq;
	tileatom_op_options_init(&acq);
	acq.sem = TILEATOM_SEM_ACQUIRE;
	while (seen != unlocked) /* spin until our cas sees 0 and stores 1 */
		check(tileatom_atomic_at(c, "tour.lock", TILEATOM_OP_CAS, 0, TILEATOM_INT32,
		                         &locked, &unlocked, &acq, &seen, &err),
		      &err, "lock");
	int64_t counter;
	check(tileatom_read(c, "tour.counter", NULL, &counter, sizeof(counter), NULL, &err), &err,
	      "read counter");
	counter += 1;
	tileatom_array v = tileatom_scalar(TILEATOM_INT64, &counter);
	check(tileatom_write(c, "tour.counter", NULL, &v, &err), &err, "write counter");
	tileatom_op_options rel;
	tileatom_op_options_init(&rel);
	rel.sem = TILEATOM_SEM_RELEASE;
	check(tileatom_atomic_at(c, "tour.lock", TILEATOM_OP_EXCH, 0, TILEATOM_INT32, &unlocked,
	                         NULL, &rel, NULL, &err),
	      &err, "unlock");
	printf("counter under the lock: %lld\n", (long long)counter);

	const char *names[] = {"tour.hist", "tour.lock", "tour.counter"};
	for (int i = 0; i < 3; i++)
		check(tileatom_destroy(c, names[i], &err), &err, "destroy");
	free(keys);
	tileatom_close(c);
	return 0;
}

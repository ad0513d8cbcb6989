/* check_copy.c: the multi-threaded host copy of tacore/ta_copy.h: every byte copied, each
 * chunk handed to the callback exactly once and whole, a callback's error returned, the
 * thread count's rules (sizes, $TILEATOM_COPY_THREADS). */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ta_copy.h"

/* What the callback saw: a mark per destination byte, counts and the chunk size rule. */
struct seen {
	pthread_mutex_t mu;             /* guards the fields below */
	unsigned char *marks;           /* times each destination byte was reported */
	size_t calls;                   /* callback calls */
	size_t max_len;                 /* longest chunk reported */
	const unsigned char *dst, *src; /* the copy (to check a chunk is there when reported) */
	size_t fail_at;                 /* report this offset with an error (SIZE_MAX: never) */
	int bad;                        /* a chunk was reported before its bytes were copied */
};

static int on_chunk(void *ctx, size_t off, size_t len)
{
	struct seen *s = ctx;
	int bad = memcmp(s->dst + off, s->src + off, len) != 0;
	pthread_mutex_lock(&s->mu);
	for (size_t i = off; i < off + len; i++)
		s->marks[i]++;
	s->calls++;
	if (len > s->max_len)
		s->max_len = len;
	s->bad |= bad;
	pthread_mutex_unlock(&s->mu);
	return off == s->fail_at ? 42 : 0;
}

/* Copies bytes on threads threads in chunks of chunk; checks bytes and reports. */
static void copy_case(size_t bytes, int threads, size_t chunk)
{
	unsigned char *src = malloc(bytes), *dst = malloc(bytes);
	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(dst);
	for (size_t i = 0; i < bytes; i++)
		src[i] = (unsigned char)(i * 131u + 7u);
	memset(dst, 0, bytes);
	struct seen s;
	memset(&s, 0, sizeof s);
	pthread_mutex_init(&s.mu, NULL);
	s.marks = calloc(bytes, 1);
	ck_assert_ptr_nonnull(s.marks);
	s.dst = dst;
	s.src = src;
	s.fail_at = SIZE_MAX;
	ck_assert_int_eq(ta_copy_parallel(dst, src, bytes, threads, chunk, on_chunk, &s), 0);
	ck_assert_int_eq(memcmp(dst, src, bytes), 0);
	for (size_t i = 0; i < bytes; i++)
		ck_assert_msg(s.marks[i] == 1, "byte %zu reported %u times (%zu bytes, %d threads)",
		              i, s.marks[i], bytes, threads);
	ck_assert_int_eq(s.bad, 0);
	if (chunk)
		ck_assert_uint_le(s.max_len, chunk);
	pthread_mutex_destroy(&s.mu);
	free(s.marks);
	free(src);
	free(dst);
}

START_TEST(test_copy_threads_chunks)
{
	copy_case(1, 1, 0);
	copy_case(4095, 3, 0);             /* under a page: one part */
	copy_case(3 * 4096 + 17, 3, 1000); /* the last part takes the rest */
	copy_case((1u << 20) + 5, 8, 65536);
	copy_case((1u << 20) + 5, 1, 0);
	copy_case(5u << 20, 4, 1u << 20);
	copy_case(100000, 20, 0); /* more threads than allowed: clamped */
	copy_case(100000, 0, 4096);
}
END_TEST

START_TEST(test_copy_callback_error)
{
	size_t bytes = 1u << 20;
	unsigned char *src = calloc(bytes, 1), *dst = calloc(bytes, 1);
	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(dst);
	struct seen s;
	memset(&s, 0, sizeof s);
	pthread_mutex_init(&s.mu, NULL);
	s.marks = calloc(bytes, 1);
	s.dst = dst;
	s.src = src;
	s.fail_at = 3 * 65536; /* in the first of 4 parts (262144 bytes each) */
	ck_assert_int_eq(ta_copy_parallel(dst, src, bytes, 4, 65536, on_chunk, &s), 42);
	/* the failing part stopped after its failing chunk: 4 chunks of it, 4 of each other */
	ck_assert_uint_eq(s.calls, 4 + 3 * 4);
	ck_assert_uint_eq(s.marks[4 * 65536 - 1], 1);
	ck_assert_uint_eq(s.marks[3 * 65536 - 1], 1);
	pthread_mutex_destroy(&s.mu);
	free(s.marks);
	free(src);
	free(dst);
}
END_TEST

START_TEST(test_copy_thread_count)
{
	unsetenv("TILEATOM_COPY_THREADS");
	ck_assert_int_eq(ta_copy_threads(0), 1);
	ck_assert_int_eq(ta_copy_threads(TA_COPY_PARALLEL_MIN - 1), 1);
	int n = ta_copy_threads((size_t)1 << 30);
	ck_assert_int_ge(n, 1);
	ck_assert_int_le(n, TA_COPY_THREADS_MAX);
	/* one thread per TA_COPY_PER_THREAD_MIN at most */
	setenv("TILEATOM_COPY_THREADS", "8", 1);
	ck_assert_int_eq(ta_copy_threads(TA_COPY_PARALLEL_MIN), 2);
	ck_assert_int_eq(ta_copy_threads((size_t)1 << 30), 8);
	setenv("TILEATOM_COPY_THREADS", "1", 1);
	ck_assert_int_eq(ta_copy_threads((size_t)1 << 30), 1);
	setenv("TILEATOM_COPY_THREADS", "3", 1);
	ck_assert_int_eq(ta_copy_threads((size_t)1 << 30), 3);
	/* not a count in 1..8: the CPU-based default */
	setenv("TILEATOM_COPY_THREADS", "9", 1);
	ck_assert_int_eq(ta_copy_threads((size_t)1 << 30), n);
	setenv("TILEATOM_COPY_THREADS", "x", 1);
	ck_assert_int_eq(ta_copy_threads((size_t)1 << 30), n);
	unsetenv("TILEATOM_COPY_THREADS");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("copy");
	TCase *tc = tcase_create("copy");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_copy_threads_chunks);
	tcase_add_test(tc, test_copy_callback_error);
	tcase_add_test(tc, test_copy_thread_count);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

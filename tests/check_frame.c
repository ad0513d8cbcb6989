/* check_frame.c: framing and decoding of tileatom messages (proto/ta_frame.[ch] and the
 * protoc-c codec): prefix byte order, round trips of Requests and Responses through
 * ta_frame_encode + ta_frame_reader (whole, byte at a time, several frames per buffer),
 * empty and truncated frames, a length prefix over the limit (rejected before any
 * allocation, and sticky), and garbage payloads that must fail to unpack without a crash
 * or a leak (run under ASan or `make check-valgrind`). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ta_frame.h"
#include "tileatom.pb-c.h"

/* Encodes msg as a frame or fails the test. */
static uint8_t *encode_or_fail(const ProtobufCMessage *msg, size_t *len)
{
	uint8_t *buf = NULL;
	ck_assert_int_eq(ta_frame_encode(msg, TA_FRAME_DEFAULT_MAX, &buf, len), 0);
	ck_assert_ptr_nonnull(buf);
	return buf;
}

/* A create request with a shape and an int32 fill of 7. */
static size_t make_create(uint64_t id, uint8_t **frame)
{
	static int64_t shape[3] = {2, 3, 4};
	static int64_t none[1];
	static uint8_t fill_bytes[4] = {7, 0, 0, 0};
	Tileatom__Array fill = TILEATOM__ARRAY__INIT;
	fill.dtype = TILEATOM__DTYPE__INT32;
	fill.n_shape = 0;
	fill.shape = none;
	fill.data.data = fill_bytes;
	fill.data.len = sizeof(fill_bytes);
	Tileatom__CreateTileRequest create = TILEATOM__CREATE_TILE_REQUEST__INIT;
	create.name = (char *)"hist.a-1";
	create.dtype = TILEATOM__DTYPE__INT32;
	create.n_shape = 3;
	create.shape = shape;
	create.fill = &fill;
	Tileatom__Request req = TILEATOM__REQUEST__INIT;
	req.id = id;
	req.body_case = TILEATOM__REQUEST__BODY_CREATE;
	req.create = &create;
	size_t len = 0;
	*frame = encode_or_fail(&req.base, &len);
	return len;
}

/* Checks that payload decodes to the request make_create(id) built. */
static void check_create(const uint8_t *payload, uint32_t len, uint64_t id)
{
	Tileatom__Request *req = tileatom__request__unpack(NULL, len, payload);
	ck_assert_ptr_nonnull(req);
	ck_assert_uint_eq(req->id, id);
	ck_assert_int_eq(req->body_case, TILEATOM__REQUEST__BODY_CREATE);
	ck_assert_str_eq(req->create->name, "hist.a-1");
	ck_assert_int_eq(req->create->dtype, TILEATOM__DTYPE__INT32);
	ck_assert_uint_eq(req->create->n_shape, 3);
	ck_assert_int_eq(req->create->shape[0], 2);
	ck_assert_int_eq(req->create->shape[1], 3);
	ck_assert_int_eq(req->create->shape[2], 4);
	ck_assert_ptr_nonnull(req->create->fill);
	ck_assert_uint_eq(req->create->fill->data.len, 4);
	ck_assert_int_eq(req->create->fill->data.data[0], 7);
	ck_assert_uint_eq(req->create->fill->n_shape, 0);
	tileatom__request__free_unpacked(req, NULL);
}

START_TEST(test_header_little_endian)
{
	uint8_t h[4];
	ta_frame_put_header(h, 0x01020304u);
	ck_assert_int_eq(h[0], 0x04);
	ck_assert_int_eq(h[1], 0x03);
	ck_assert_int_eq(h[2], 0x02);
	ck_assert_int_eq(h[3], 0x01);
	ck_assert_uint_eq(ta_frame_get_header(h), 0x01020304u);
	ta_frame_put_header(h, 0xffffffffu);
	ck_assert_uint_eq(ta_frame_get_header(h), 0xffffffffu);
	ta_frame_put_header(h, 0);
	ck_assert_uint_eq(ta_frame_get_header(h), 0);
}
END_TEST

START_TEST(test_round_trip_whole)
{
	uint8_t *frame = NULL;
	size_t len = make_create(42, &frame);
	ck_assert_uint_eq(ta_frame_get_header(frame), len - TA_FRAME_HEADER);
	ta_frame_reader r;
	ta_frame_reader_init(&r, TA_FRAME_DEFAULT_MAX);
	const uint8_t *p = frame;
	size_t n = len;
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_READY);
	ck_assert_uint_eq(n, 0);
	uint32_t plen = 0;
	uint8_t *payload = ta_frame_reader_take(&r, &plen);
	ck_assert_uint_eq(plen, len - TA_FRAME_HEADER);
	check_create(payload, plen, 42);
	free(payload);
	ta_frame_reader_free(&r);
	free(frame);
}
END_TEST

START_TEST(test_round_trip_byte_at_a_time)
{
	uint8_t *frame = NULL;
	size_t len = make_create(7, &frame);
	ta_frame_reader r;
	ta_frame_reader_init(&r, TA_FRAME_DEFAULT_MAX);
	for (size_t i = 0; i < len; i++) {
		const uint8_t *p = frame + i;
		size_t n = 1;
		ta_frame_status st = ta_frame_reader_feed(&r, &p, &n);
		ck_assert_uint_eq(n, 0);
		if (i + 1 < len)
			ck_assert_int_eq(st, TA_FRAME_NEED_MORE);
		else
			ck_assert_int_eq(st, TA_FRAME_READY);
	}
	uint32_t plen = 0;
	uint8_t *payload = ta_frame_reader_take(&r, &plen);
	check_create(payload, plen, 7);
	free(payload);
	ta_frame_reader_free(&r);
	free(frame);
}
END_TEST

START_TEST(test_several_frames_in_one_buffer)
{
	uint8_t *f[3];
	size_t l[3], total = 0;
	for (int i = 0; i < 3; i++) {
		l[i] = make_create((uint64_t)(100 + i), &f[i]);
		total += l[i];
	}
	uint8_t *all = malloc(total);
	ck_assert_ptr_nonnull(all);
	size_t off = 0;
	for (int i = 0; i < 3; i++) {
		memcpy(all + off, f[i], l[i]);
		off += l[i];
		free(f[i]);
	}
	ta_frame_reader r;
	ta_frame_reader_init(&r, TA_FRAME_DEFAULT_MAX);
	const uint8_t *p = all;
	size_t n = total;
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_READY);
		uint32_t plen = 0;
		uint8_t *payload = ta_frame_reader_take(&r, &plen);
		check_create(payload, plen, (uint64_t)(100 + i));
		free(payload);
	}
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_NEED_MORE);
	ta_frame_reader_free(&r);
	free(all);
}
END_TEST

START_TEST(test_empty_payload)
{
	uint8_t frame[4] = {0, 0, 0, 0};
	ta_frame_reader r;
	ta_frame_reader_init(&r, 16);
	const uint8_t *p = frame;
	size_t n = sizeof(frame);
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_READY);
	uint32_t plen = 99;
	uint8_t *payload = ta_frame_reader_take(&r, &plen);
	ck_assert_uint_eq(plen, 0);
	ck_assert_ptr_nonnull(payload);
	/* An empty message is a valid Request with id 0 and no body. */
	Tileatom__Request *req = tileatom__request__unpack(NULL, plen, payload);
	ck_assert_ptr_nonnull(req);
	ck_assert_uint_eq(req->id, 0);
	ck_assert_int_eq(req->body_case, TILEATOM__REQUEST__BODY__NOT_SET);
	tileatom__request__free_unpacked(req, NULL);
	free(payload);
	ta_frame_reader_free(&r);
}
END_TEST

START_TEST(test_truncated_frame)
{
	uint8_t *frame = NULL;
	size_t len = make_create(9, &frame);
	ta_frame_reader r;
	ta_frame_reader_init(&r, TA_FRAME_DEFAULT_MAX);
	/* The prefix alone, then part of the payload: never ready. */
	const uint8_t *p = frame;
	size_t n = 3;
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_NEED_MORE);
	ck_assert_uint_eq(r.header_have, 3);
	n = len / 2 - 3;
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_NEED_MORE);
	ck_assert_uint_eq(r.payload_len, len - TA_FRAME_HEADER);
	ck_assert_uint_eq(r.payload_have, len / 2 - TA_FRAME_HEADER);
	/* The connection ends here: freeing the reader releases the partial payload. */
	ta_frame_reader_free(&r);
	ck_assert_ptr_null(r.payload);
	/* A payload cut short does not unpack. */
	ck_assert_ptr_null(
	    tileatom__request__unpack(NULL, len / 2 - TA_FRAME_HEADER, frame + TA_FRAME_HEADER));
	free(frame);
}
END_TEST

START_TEST(test_length_over_limit)
{
	uint8_t frame[8];
	ta_frame_put_header(frame, 1025);
	memset(frame + 4, 0xab, 4);
	ta_frame_reader r;
	ta_frame_reader_init(&r, 1024);
	const uint8_t *p = frame;
	size_t n = sizeof(frame);
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_TOO_LARGE);
	ck_assert_ptr_null(r.payload); /* nothing was allocated */
	ck_assert_uint_eq(ta_frame_get_header(r.header), 1025);
	/* Sticky: further input is refused the same way. */
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_TOO_LARGE);
	ta_frame_reader_free(&r);

	/* A hostile 4 GiB prefix is refused the same way, without allocating. */
	ta_frame_put_header(frame, 0xffffffffu);
	ta_frame_reader_init(&r, TA_FRAME_DEFAULT_MAX);
	p = frame;
	n = 4;
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_TOO_LARGE);
	ck_assert_ptr_null(r.payload);
	ta_frame_reader_free(&r);
}
END_TEST

START_TEST(test_length_at_limit)
{
	uint8_t frame[4 + 16];
	ta_frame_put_header(frame, 16);
	memset(frame + 4, 0, 16);
	ta_frame_reader r;
	ta_frame_reader_init(&r, 16);
	const uint8_t *p = frame;
	size_t n = sizeof(frame);
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_READY);
	uint32_t plen = 0;
	uint8_t *payload = ta_frame_reader_take(&r, &plen);
	ck_assert_uint_eq(plen, 16);
	free(payload);
	ta_frame_reader_free(&r);
}
END_TEST

/* A peer that announces a large frame and sends little of it holds little memory: the
 * payload buffer grows with the bytes that arrive, and the frame still assembles. */
START_TEST(test_large_announced_frame_grows)
{
	const uint32_t big = 48u * 1024u * 1024u;
	uint8_t *frame = malloc(4 + (size_t)big);
	ck_assert_ptr_nonnull(frame);
	ta_frame_put_header(frame, big);
	for (uint32_t i = 0; i < big; i++)
		frame[4 + i] = (uint8_t)(i * 7u);
	ta_frame_reader r;
	ta_frame_reader_init(&r, TA_FRAME_DEFAULT_MAX);
	const uint8_t *p = frame;
	size_t n = 4 + 10;
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_NEED_MORE);
	ck_assert_uint_le(r.payload_cap, 64u * 1024u + 1u);
	n = 4 + (size_t)big - 14; /* the rest, in one go */
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_READY);
	ck_assert_uint_eq(n, 0);
	uint32_t plen = 0;
	uint8_t *payload = ta_frame_reader_take(&r, &plen);
	ck_assert_uint_eq(plen, big);
	ck_assert_int_eq(memcmp(payload, frame + 4, big), 0);
	free(payload);
	free(frame);
	ta_frame_reader_free(&r);
}
END_TEST

START_TEST(test_encode_over_limit)
{
	static uint8_t big[2048];
	Tileatom__Array arr = TILEATOM__ARRAY__INIT;
	arr.dtype = TILEATOM__DTYPE__UINT32;
	arr.data.data = big;
	arr.data.len = sizeof(big);
	Tileatom__Response resp = TILEATOM__RESPONSE__INIT;
	resp.id = 5;
	resp.body_case = TILEATOM__RESPONSE__BODY_DATA;
	resp.data = &arr;
	uint8_t *out = (uint8_t *)1;
	size_t len = 1;
	ck_assert_int_eq(ta_frame_encode(&resp.base, 1024, &out, &len), -1);
	ck_assert_ptr_null(out);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(ta_frame_encode(&resp.base, 4096, &out, &len), 0);
	ck_assert_ptr_nonnull(out);
	Tileatom__Response *back =
	    tileatom__response__unpack(NULL, len - TA_FRAME_HEADER, out + TA_FRAME_HEADER);
	ck_assert_ptr_nonnull(back);
	ck_assert_uint_eq(back->id, 5);
	ck_assert_int_eq(back->body_case, TILEATOM__RESPONSE__BODY_DATA);
	ck_assert_uint_eq(back->data->data.len, sizeof(big));
	ck_assert_int_eq(back->data->dtype, TILEATOM__DTYPE__UINT32);
	tileatom__response__free_unpacked(back, NULL);
	free(out);
}
END_TEST

START_TEST(test_response_round_trip)
{
	int64_t shape[2] = {2, 2};
	float vals[4] = {1.5f, -2.0f, 0.0f, 3.25f};
	Tileatom__Array old = TILEATOM__ARRAY__INIT;
	old.dtype = TILEATOM__DTYPE__FLOAT32;
	old.n_shape = 2;
	old.shape = shape;
	old.data.data = (uint8_t *)vals;
	old.data.len = sizeof(vals);
	Tileatom__OpResponse op = TILEATOM__OP_RESPONSE__INIT;
	op.old = &old;
	op.skipped = 3;
	op.applied = 4;
	Tileatom__Response resp = TILEATOM__RESPONSE__INIT;
	resp.id = UINT64_MAX;
	resp.status = TILEATOM__STATUS__OUT_OF_RANGE;
	resp.message = (char *)"index 9 is outside [0, 4)";
	resp.body_case = TILEATOM__RESPONSE__BODY_OP;
	resp.op = &op;
	size_t len = 0;
	uint8_t *frame = encode_or_fail(&resp.base, &len);
	ta_frame_reader r;
	ta_frame_reader_init(&r, TA_FRAME_DEFAULT_MAX);
	const uint8_t *p = frame;
	size_t n = len;
	ck_assert_int_eq(ta_frame_reader_feed(&r, &p, &n), TA_FRAME_READY);
	uint32_t plen = 0;
	uint8_t *payload = ta_frame_reader_take(&r, &plen);
	Tileatom__Response *back = tileatom__response__unpack(NULL, plen, payload);
	ck_assert_ptr_nonnull(back);
	ck_assert_uint_eq(back->id, UINT64_MAX);
	ck_assert_int_eq(back->status, TILEATOM__STATUS__OUT_OF_RANGE);
	ck_assert_str_eq(back->message, "index 9 is outside [0, 4)");
	ck_assert_int_eq(back->body_case, TILEATOM__RESPONSE__BODY_OP);
	ck_assert_uint_eq(back->op->skipped, 3);
	ck_assert_uint_eq(back->op->applied, 4);
	ck_assert_uint_eq(back->op->old->n_shape, 2);
	ck_assert_int_eq(memcmp(back->op->old->data.data, vals, sizeof(vals)), 0);
	tileatom__response__free_unpacked(back, NULL);
	free(payload);
	ta_frame_reader_free(&r);
	free(frame);
}
END_TEST

START_TEST(test_garbage_fails_to_unpack)
{
	/* Specific malformed payloads: each must be refused. */
	static const uint8_t bad1[] = {0xff, 0xff, 0xff, 0xff}; /* field 0 / bad varint */
	static const uint8_t bad2[] = {0x08};                   /* id tag without its value */
	static const uint8_t bad3[] = {0x22, 0x10, 0x0a, 0x01}; /* create: length past end */
	static const uint8_t bad4[] = {0x0f, 0x00};             /* wire type 7 */
	static const uint8_t bad5[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
	                               0xff, 0xff, 0xff, 0xff, 0xff, 0x01}; /* varint > 10 bytes */
	const struct {
		const uint8_t *p;
		size_t n;
	} cases[] = {{bad1, sizeof(bad1)},
	             {bad2, sizeof(bad2)},
	             {bad3, sizeof(bad3)},
	             {bad4, sizeof(bad4)},
	             {bad5, sizeof(bad5)}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(tileatom__request__unpack(NULL, cases[i].n, cases[i].p) == NULL,
		              "garbage case %zu decoded", i);

	/* Pseudo-random garbage: decoding may fail or succeed, never crash or leak. */
	uint64_t state = 0x9e3779b97f4a7c15u;
	int failed = 0;
	uint8_t buf[97];
	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)(round % (int)sizeof(buf)) + 1;
		for (size_t i = 0; i < n; i++) {
			state ^= state << 13;
			state ^= state >> 7;
			state ^= state << 17;
			buf[i] = (uint8_t)state;
		}
		Tileatom__Request *req = tileatom__request__unpack(NULL, n, buf);
		if (req)
			tileatom__request__free_unpacked(req, NULL);
		else
			failed++;
	}
	ck_assert_int_gt(failed, 1000);
}
END_TEST

/* The suite. */
static Suite *frame_suite(void)
{
	Suite *s = suite_create("frame");
	TCase *tc = tcase_create("framing");
	tcase_add_test(tc, test_header_little_endian);
	tcase_add_test(tc, test_round_trip_whole);
	tcase_add_test(tc, test_round_trip_byte_at_a_time);
	tcase_add_test(tc, test_several_frames_in_one_buffer);
	tcase_add_test(tc, test_empty_payload);
	tcase_add_test(tc, test_truncated_frame);
	tcase_add_test(tc, test_length_over_limit);
	tcase_add_test(tc, test_length_at_limit);
	tcase_add_test(tc, test_large_announced_frame_grows);
	tcase_add_test(tc, test_encode_over_limit);
	tcase_add_test(tc, test_response_round_trip);
	tcase_add_test(tc, test_garbage_fails_to_unpack);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(frame_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* check_client_codec.c: unit tests of libtileatom-client without a daemon. The request
 * builders are checked by packing and unpacking their messages and comparing every field;
 * the response checks, address parsing, default socket path and exported helpers are
 * checked directly; the connection layer runs against an in-process fake daemon (a thread
 * speaking the framed protocol over a Unix or TCP socket) that can misbehave on purpose:
 * wrong protocol version, wrong response id, undecodable or oversized frames, silence,
 * hang-up, and flood tests where the fake stops reading until the client drains its
 * responses (neither a pipelined submit nor a collect may deadlock). A gated fake that
 * reads nothing until told checks send coalescing byte for byte: submitted requests stay
 * in the client until a collect, a 64 KiB buffer or a close writes them out. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "tac_internal.h"

/* Packs m into a buffer and unpacks it again (the caller frees with
 * tileatom__request__free_unpacked). */
static Tileatom__Request *roundtrip(tac_msg *m)
{
	size_t len = protobuf_c_message_get_packed_size(&m->req.base);
	uint8_t *buf = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(protobuf_c_message_pack(&m->req.base, buf), len);
	Tileatom__Request *r = tileatom__request__unpack(NULL, len, buf);
	free(buf);
	ck_assert_ptr_nonnull(r);
	return r;
}

START_TEST(test_strerror_and_names)
{
	ck_assert_str_eq(tileatom_strerror(TILEATOM_OK), "OK");
	ck_assert_str_eq(tileatom_strerror(TILEATOM_E_NOT_FOUND), "NOT_FOUND");
	ck_assert_str_eq(tileatom_strerror(TILEATOM_E_INTERNAL), "INTERNAL");
	ck_assert_str_eq(tileatom_strerror(TILEATOM_E_IO), "IO");
	ck_assert_str_eq(tileatom_strerror(TILEATOM_E_PROTOCOL), "PROTOCOL");
	ck_assert_str_eq(tileatom_strerror(TILEATOM_E_STATE), "STATE");
	ck_assert_str_eq(tileatom_strerror(12345), "UNKNOWN");
	ck_assert_str_eq(tileatom_version(), TILEATOM_CLIENT_VERSION);

	ck_assert_int_eq(tileatom_dtype_parse("int32"), TILEATOM_INT32);
	ck_assert_int_eq(tileatom_dtype_parse("bfloat16"), TILEATOM_BFLOAT16);
	ck_assert_int_eq(tileatom_dtype_parse("int8"), TILEATOM_DTYPE_NONE);
	ck_assert_int_eq(tileatom_dtype_parse(NULL), TILEATOM_DTYPE_NONE);
	ck_assert_str_eq(tileatom_dtype_name(TILEATOM_FLOAT16), "float16");
	ck_assert_uint_eq(tileatom_dtype_size(TILEATOM_UINT64), 8);
	ck_assert_uint_eq(tileatom_dtype_size(TILEATOM_BOOL), 1);
	ck_assert_uint_eq(tileatom_dtype_size((tileatom_dtype)77), 0);
	ck_assert(tileatom_dtype_is_int(TILEATOM_UINT32));
	ck_assert(!tileatom_dtype_is_int(TILEATOM_FLOAT32));
	ck_assert(tileatom_dtype_is_float(TILEATOM_BFLOAT16));

	ck_assert_int_eq(tileatom_op_parse("add"), TILEATOM_OP_ADD);
	ck_assert_int_eq(tileatom_op_parse("xchg"), TILEATOM_OP_EXCH);
	ck_assert_int_eq(tileatom_op_parse("exch"), TILEATOM_OP_EXCH);
	ck_assert_int_eq(tileatom_op_parse("cas"), TILEATOM_OP_CAS);
	ck_assert_int_eq(tileatom_op_parse("load"), TILEATOM_OP_NONE);
	ck_assert_int_eq(tileatom_op_parse("nope"), TILEATOM_OP_NONE);
	ck_assert_str_eq(tileatom_op_name(TILEATOM_OP_XOR), "xor");
	ck_assert_str_eq(tileatom_op_name((tileatom_op)10), "?");
	ck_assert_int_eq(tileatom_sem_parse("acq_rel"), TILEATOM_SEM_ACQ_REL);
	ck_assert_int_eq(tileatom_sem_parse("seq_cst"), -1);
	ck_assert_int_eq(tileatom_scope_parse("cluster"), TILEATOM_SCOPE_CLUSTER);
	ck_assert_int_eq(tileatom_space_parse("shared"), TILEATOM_SPACE_SHARED);
	ck_assert_str_eq(tileatom_sem_name(TILEATOM_SEM_RELEASE), "release");
	ck_assert_str_eq(tileatom_scope_name(TILEATOM_SCOPE_SYS), "sys");
	ck_assert_str_eq(tileatom_space_name(TILEATOM_SPACE_GLOBAL), "global");
}
END_TEST

START_TEST(test_values)
{
	tileatom_error e = {0, ""};
	int32_t i32 = 0;
	ck_assert_int_eq(tileatom_value_parse(TILEATOM_INT32, "0x10", &i32, &e), TILEATOM_OK);
	ck_assert_int_eq(i32, 16);
	ck_assert_int_eq(tileatom_value_parse(TILEATOM_INT32, "-7", &i32, &e), TILEATOM_OK);
	ck_assert_int_eq(i32, -7);
	ck_assert_int_eq(tileatom_value_parse(TILEATOM_INT32, "abc", &i32, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(e.code, TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_value_parse(TILEATOM_INT32, "4294967296", &i32, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_value_parse(TILEATOM_INT32, NULL, &i32, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_value_parse((tileatom_dtype)0, "1", &i32, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	uint16_t h = 0;
	ck_assert_int_eq(tileatom_value_parse(TILEATOM_FLOAT16, "1.5", &h, &e), TILEATOM_OK);
	ck_assert_uint_eq(h, 0x3e00);
	ck_assert_double_eq(tileatom_value_to_double(TILEATOM_FLOAT16, &h), 1.5);
	char buf[64];
	float nan_f = NAN, f = -2.25f;
	tileatom_value_format(TILEATOM_FLOAT32, &nan_f, buf, sizeof(buf));
	ck_assert_str_eq(buf, "nan");
	tileatom_value_format(TILEATOM_FLOAT32, &f, buf, sizeof(buf));
	ck_assert_str_eq(buf, "-2.25");
	uint64_t u = UINT64_MAX;
	tileatom_value_format(TILEATOM_UINT64, &u, buf, sizeof(buf));
	ck_assert_str_eq(buf, "18446744073709551615");
	int64_t neg = -5;
	ck_assert_double_eq(tileatom_value_to_double(TILEATOM_INT64, &neg), -5.0);

	tileatom_op_options o;
	memset(&o, 0xff, sizeof(o));
	tileatom_op_options_init(&o);
	ck_assert(o.check_bounds);
	ck_assert(!o.want_old);
	ck_assert_ptr_null(o.mask);
	ck_assert_int_eq(o.sem, TILEATOM_SEM_RELAXED);
	tileatom_array s = tileatom_scalar(TILEATOM_INT64, &neg);
	ck_assert_int_eq(s.rank, 0);
	ck_assert_uint_eq(tileatom_array_bytes(&s), 8);
	tileatom_array v = {TILEATOM_FLOAT16, 3, {2, 3, 4}, &h};
	ck_assert_uint_eq(tileatom_array_bytes(&v), 48);
	v.rank = 9;
	ck_assert_uint_eq(tileatom_array_bytes(&v), 0);
}
END_TEST

START_TEST(test_parse_address)
{
	tileatom_error e = {0, ""};
	bool is_unix;
	char *host, *port;
	ck_assert_int_eq(tac_parse_address("/run/x.sock", &is_unix, &host, &port, &e), 0);
	ck_assert(is_unix);
	ck_assert_int_eq(tac_parse_address("relative.sock", &is_unix, &host, &port, &e), 0);
	ck_assert(is_unix);
	ck_assert_int_eq(tac_parse_address("./a:b", &is_unix, &host, &port, &e), 0);
	ck_assert(is_unix);
	ck_assert_int_eq(tac_parse_address("127.0.0.1:7000", &is_unix, &host, &port, &e), 0);
	ck_assert(!is_unix);
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_str_eq(port, "7000");
	free(host);
	free(port);
	ck_assert_int_eq(tac_parse_address("[::1]:80", &is_unix, &host, &port, &e), 0);
	ck_assert_str_eq(host, "::1");
	ck_assert_str_eq(port, "80");
	free(host);
	free(port);
	ck_assert_int_eq(tac_parse_address("host:", &is_unix, &host, &port, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_parse_address(":80", &is_unix, &host, &port, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_parse_address("host:99999", &is_unix, &host, &port, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_parse_address("host:8x", &is_unix, &host, &port, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_parse_address("[::1]80:1", &is_unix, &host, &port, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_parse_address("", &is_unix, &host, &port, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_ptr_null(host);
	ck_assert_ptr_null(port);
}
END_TEST

START_TEST(test_default_socket)
{
	char buf[512];
	setenv("TILEATOM_SOCKET", "/x/y.sock", 1);
	ck_assert_int_eq(tileatom_default_socket(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/x/y.sock");
	ck_assert_int_eq(tileatom_default_socket(buf, 4), -1);
	unsetenv("TILEATOM_SOCKET");

	char dir[] = "/tmp/tac-xdg-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	setenv("XDG_RUNTIME_DIR", dir, 1);
	char user[600];
	snprintf(user, sizeof(user), "%s/tileatom/tileatomd.sock", dir);
	struct stat st;
	bool system_exists = stat("/run/tileatom/tileatomd.sock", &st) == 0;
	ck_assert_int_eq(tileatom_default_socket(buf, sizeof(buf)), 0);
	if (!system_exists)
		ck_assert_str_eq(buf, geteuid() == 0 ? "/run/tileatom/tileatomd.sock" : user);
	/* An existing per-user socket wins unless the system one exists for root. */
	char sub[600];
	snprintf(sub, sizeof(sub), "%s/tileatom", dir);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	FILE *f = fopen(user, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(tileatom_default_socket(buf, sizeof(buf)), 0);
	if (!system_exists || geteuid() != 0)
		ck_assert_str_eq(buf, user);
	unlink(user);
	rmdir(sub);
	rmdir(dir);
	unsetenv("XDG_RUNTIME_DIR");
	ck_assert_int_eq(tileatom_default_socket(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/run/tileatom/tileatomd.sock");
}
END_TEST

START_TEST(test_build_elementwise)
{
	tac_msg m;
	tileatom_error e = {0, ""};
	int32_t vals[6] = {1, 2, 3, 4, 5, 6};
	uint8_t mask[3] = {1, 0, 1};
	tileatom_array va = {TILEATOM_INT32, 2, {2, 3}, vals};
	tileatom_array ma = tileatom_vector(TILEATOM_BOOL, 3, mask);
	tileatom_region reg = {2, {1, 2}, {2, 3}};
	tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
	o.sem = TILEATOM_SEM_ACQ_REL;
	o.scope = TILEATOM_SCOPE_SYS;
	o.space = TILEATOM_SPACE_SHARED;
	o.check_bounds = false;
	o.want_old = true;
	o.mask = &ma;
	/* space shared hides the pre-RMW values: refused before sending, in the daemon's words */
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "tile_1",
	                                                   .op = TILEATOM_OP_MAX,
	                                                   .region = &reg,
	                                                   .values = &va,
	                                                   .opts = &o},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_str_eq(e.message, "elementwise: space shared cannot return pre-RMW values (the "
	                            "private copy hides them); use space global");
	o.space = TILEATOM_SPACE_GLOBAL;
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "tile_1",
	                                                   .op = TILEATOM_OP_MAX,
	                                                   .region = &reg,
	                                                   .values = &va,
	                                                   .opts = &o},
	                                  &e),
	                 0);
	ck_assert_int_eq(m.kind, TILEATOM_REQ_ELEMENTWISE);
	m.req.id = 77;
	Tileatom__Request *r = roundtrip(&m);
	ck_assert_uint_eq(r->id, 77);
	ck_assert_int_eq(r->body_case, TILEATOM__REQUEST__BODY_ELEMENTWISE);
	const Tileatom__ElementwiseAtomicRequest *b = r->elementwise;
	ck_assert_str_eq(b->tile, "tile_1");
	ck_assert_int_eq(b->op, TILEATOM__OP__MAX);
	ck_assert_uint_eq(b->region->n_origin, 2);
	ck_assert_int_eq(b->region->origin[0], 1);
	ck_assert_int_eq(b->region->origin[1], 2);
	ck_assert_int_eq(b->region->shape[0], 2);
	ck_assert_int_eq(b->region->shape[1], 3);
	ck_assert_int_eq(b->values->dtype, TILEATOM__DTYPE__INT32);
	ck_assert_uint_eq(b->values->n_shape, 2);
	ck_assert_int_eq(b->values->shape[1], 3);
	ck_assert_uint_eq(b->values->data.len, 24);
	ck_assert_int_eq(memcmp(b->values->data.data, vals, 24), 0);
	ck_assert_ptr_null(b->compare);
	ck_assert_int_eq(b->options->sem, TILEATOM__SEM__ACQ_REL);
	ck_assert_int_eq(b->options->scope, TILEATOM__SCOPE__SYS);
	ck_assert_int_eq(b->options->space, TILEATOM__SPACE__GLOBAL);
	ck_assert(b->options->no_bounds_check);
	ck_assert(b->options->want_old);
	ck_assert_int_eq(b->options->mask->dtype, TILEATOM__DTYPE__BOOL);
	ck_assert_uint_eq(b->options->mask->data.len, 3);
	tileatom__request__free_unpacked(r, NULL);

	/* Defaults (NULL options, NULL region), CAS with compare. */
	int32_t want = 5, exp = 4;
	tileatom_array wa = tileatom_scalar(TILEATOM_INT32, &want);
	tileatom_array ea = tileatom_scalar(TILEATOM_INT32, &exp);
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_CAS,
	                                                   .values = &wa,
	                                                   .compare = &ea},
	                                  &e),
	                 0);
	r = roundtrip(&m);
	b = r->elementwise;
	ck_assert_ptr_null(b->region);
	ck_assert_uint_eq(b->values->n_shape, 0);
	ck_assert_uint_eq(b->values->data.len, 4);
	ck_assert_int_eq(*(const int32_t *)b->compare->data.data, 4);
	ck_assert(!b->options->no_bounds_check);
	ck_assert(!b->options->want_old);
	ck_assert_int_eq(b->options->sem, TILEATOM__SEM__RELAXED);
	ck_assert_ptr_null(b->options->mask);
	tileatom__request__free_unpacked(r, NULL);
}
END_TEST

START_TEST(test_build_indexed_scatter_atomic_at)
{
	tac_msg m;
	tileatom_error e = {0, ""};
	int64_t rows[3] = {0, 1, 2};
	int32_t cols[3] = {2, 1, 0};
	tileatom_array idx[2] = {tileatom_vector(TILEATOM_INT64, 3, rows),
	                         tileatom_vector(TILEATOM_INT32, 3, cols)};
	float one = 1.0f;
	tileatom_array va = tileatom_scalar(TILEATOM_FLOAT32, &one);
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_INDEXED,
	                                                   .tile = "ix",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .n_index = 2,
	                                                   .indices = idx,
	                                                   .flat = false,
	                                                   .values = &va},
	                                  &e),
	                 0);
	Tileatom__Request *r = roundtrip(&m);
	ck_assert_int_eq(r->body_case, TILEATOM__REQUEST__BODY_INDEXED);
	ck_assert_uint_eq(r->indexed->addr->n_indices, 2);
	ck_assert(!r->indexed->addr->flat);
	ck_assert_int_eq(r->indexed->addr->indices[0]->dtype, TILEATOM__DTYPE__INT64);
	ck_assert_uint_eq(r->indexed->addr->indices[0]->data.len, 24);
	ck_assert_int_eq(r->indexed->addr->indices[1]->dtype, TILEATOM__DTYPE__INT32);
	ck_assert_int_eq(((const int32_t *)r->indexed->addr->indices[1]->data.data)[0], 2);
	tileatom__request__free_unpacked(r, NULL);

	/* Flat takes exactly one index array. */
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_INDEXED,
	                                                   .tile = "ix",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .n_index = 2,
	                                                   .indices = idx,
	                                                   .flat = true,
	                                                   .values = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_INDEXED,
	                                                   .tile = "ix",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .n_index = 0,
	                                                   .indices = idx,
	                                                   .flat = false,
	                                                   .values = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);

	/* Scatter. */
	tileatom_region reg = {2, {0, 1}, {3, 2}};
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_SCATTER,
	                                                   .tile = "sc",
	                                                   .op = TILEATOM_OP_SUB,
	                                                   .region = &reg,
	                                                   .dim = 1,
	                                                   .n_index = 1,
	                                                   .indices = &idx[0],
	                                                   .values = &va},
	                                  &e),
	                 0);
	r = roundtrip(&m);
	ck_assert_int_eq(r->body_case, TILEATOM__REQUEST__BODY_SCATTER);
	ck_assert_uint_eq(r->scatter->addr->dim, 1);
	ck_assert_uint_eq(r->scatter->addr->indices->data.len, 24);
	ck_assert_int_eq(r->scatter->op, TILEATOM__OP__SUB);
	ck_assert_int_eq(r->scatter->region->origin[1], 1);
	tileatom__request__free_unpacked(r, NULL);
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_SCATTER,
	                                                   .tile = "sc",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .dim = 4,
	                                                   .n_index = 1,
	                                                   .indices = &idx[0],
	                                                   .values = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_SCATTER,
	                                                   .tile = "sc",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .dim = 0,
	                                                   .n_index = 1,
	                                                   .indices = NULL,
	                                                   .values = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);

	/* atomic_at: a flat scalar index, scalar operands, want_old forced on. */
	tileatom_array varr, carr;
	int32_t desired = 9, expected = 3;
	tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
	o.sem = TILEATOM_SEM_ACQUIRE;
	ck_assert_int_eq(tac_build_atomic_at(&m, "lock", TILEATOM_OP_CAS, 12345, TILEATOM_INT32,
	                                     &desired, &expected, &o, &varr, &carr, &e),
	                 0);
	r = roundtrip(&m);
	const Tileatom__IndexedAtomicRequest *x = r->indexed;
	ck_assert_str_eq(x->tile, "lock");
	ck_assert_int_eq(x->op, TILEATOM__OP__CAS);
	ck_assert(x->addr->flat);
	ck_assert_uint_eq(x->addr->n_indices, 1);
	ck_assert_uint_eq(x->addr->indices[0]->n_shape, 0);
	ck_assert_int_eq(x->addr->indices[0]->dtype, TILEATOM__DTYPE__INT64);
	ck_assert_int_eq(*(const int64_t *)x->addr->indices[0]->data.data, 12345);
	ck_assert_int_eq(*(const int32_t *)x->values->data.data, 9);
	ck_assert_int_eq(*(const int32_t *)x->compare->data.data, 3);
	ck_assert(x->options->want_old);
	ck_assert_int_eq(x->options->sem, TILEATOM__SEM__ACQUIRE);
	tileatom__request__free_unpacked(r, NULL);
	ck_assert_int_eq(tac_build_atomic_at(&m, "t", TILEATOM_OP_ADD, 0, TILEATOM_INT32, &desired,
	                                     NULL, NULL, &varr, &carr, &e),
	                 0);
	r = roundtrip(&m);
	ck_assert_ptr_null(r->indexed->compare);
	tileatom__request__free_unpacked(r, NULL);
	ck_assert_int_eq(tac_build_atomic_at(&m, "t", TILEATOM_OP_CAS, 0, TILEATOM_INT32, &desired,
	                                     NULL, NULL, &varr, &carr, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_build_atomic_at(&m, "t", TILEATOM_OP_ADD, 0, TILEATOM_INT32, NULL,
	                                     NULL, NULL, &varr, &carr, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_build_memory_and_tiles)
{
	tac_msg m;
	tileatom_error e = {0, ""};
	int32_t pad = -1;
	tileatom_array pa = tileatom_scalar(TILEATOM_INT32, &pad);
	tileatom_region win = {1, {2}, {4}};
	ck_assert_int_eq(tac_build_memory(&m, TILEATOM_REQ_GATHER, "g", &win, NULL, &pa, NULL, &e),
	                 0);
	Tileatom__Request *r = roundtrip(&m);
	ck_assert_int_eq(r->body_case, TILEATOM__REQUEST__BODY_GATHER);
	ck_assert_int_eq(r->gather->window->origin[0], 2);
	ck_assert_int_eq(r->gather->addr->form_case, TILEATOM__ADDRESSING__FORM_REGION);
	ck_assert_uint_eq(r->gather->addr->region->n_shape, 0);
	ck_assert(r->gather->options->want_old);
	ck_assert_int_eq(*(const int32_t *)r->gather->padding->data.data, -1);
	tileatom__request__free_unpacked(r, NULL);

	int64_t si[2] = {3, 0};
	tileatom_array sia = tileatom_vector(TILEATOM_INT64, 2, si);
	tileatom_addr sc = {TILEATOM_ADDR_SCATTER, NULL, 0, 1, &sia};
	ck_assert_int_eq(
	    tac_build_memory(&m, TILEATOM_REQ_SCATTER_STORE, "s", NULL, &sc, &pa, NULL, &e), 0);
	r = roundtrip(&m);
	ck_assert_int_eq(r->body_case, TILEATOM__REQUEST__BODY_SCATTER_STORE);
	ck_assert_ptr_null(r->scatter_store->window);
	ck_assert_int_eq(r->scatter_store->addr->form_case, TILEATOM__ADDRESSING__FORM_SCATTER);
	ck_assert_uint_eq(r->scatter_store->addr->scatter->indices->data.len, 16);
	ck_assert(!r->scatter_store->options->want_old);
	tileatom__request__free_unpacked(r, NULL);

	tileatom_addr fl = {TILEATOM_ADDR_FLAT, NULL, 0, 1, &sia};
	ck_assert_int_eq(
	    tac_build_memory(&m, TILEATOM_REQ_ATOMIC_LOAD, "l", NULL, &fl, NULL, NULL, &e), 0);
	r = roundtrip(&m);
	ck_assert_int_eq(r->atomic_load->addr->form_case, TILEATOM__ADDRESSING__FORM_INDEXED);
	ck_assert(r->atomic_load->addr->indexed->flat);
	ck_assert(r->atomic_load->options->want_old);
	tileatom__request__free_unpacked(r, NULL);
	ck_assert_int_eq(
	    tac_build_memory(&m, TILEATOM_REQ_ATOMIC_STORE, "l", NULL, &fl, NULL, NULL, &e),
	    TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_build_memory(&m, TILEATOM_REQ_PING, "l", NULL, &fl, NULL, NULL, &e),
	                 TILEATOM_E_INTERNAL);
	tileatom_addr bad = {(tileatom_addr_kind)9, NULL, 0, 1, &sia};
	ck_assert_int_eq(
	    tac_build_memory(&m, TILEATOM_REQ_ATOMIC_LOAD, "l", NULL, &bad, NULL, NULL, &e),
	    TILEATOM_E_INVALID_ARGUMENT);

	/* Tile requests. */
	int64_t shape[3] = {2, 3, 4};
	double fill = 0.5;
	ck_assert_int_eq(tac_build_create(&m, "new", TILEATOM_FLOAT64, 3, shape, &fill, &e), 0);
	r = roundtrip(&m);
	ck_assert_str_eq(r->create->name, "new");
	ck_assert_int_eq(r->create->dtype, TILEATOM__DTYPE__FLOAT64);
	ck_assert_uint_eq(r->create->n_shape, 3);
	ck_assert_int_eq(r->create->shape[2], 4);
	ck_assert_uint_eq(r->create->fill->n_shape, 0);
	ck_assert_double_eq(*(const double *)r->create->fill->data.data, 0.5);
	tileatom__request__free_unpacked(r, NULL);
	ck_assert_int_eq(tac_build_create(&m, "new", TILEATOM_BOOL, 3, shape, NULL, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	shape[1] = 0;
	ck_assert_int_eq(tac_build_create(&m, "new", TILEATOM_INT32, 3, shape, NULL, &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_msg(strstr(e.message, "axis 1"), "message: %s", e.message);
	ck_assert_int_eq(tac_build_named(&m, TILEATOM_REQ_DESCRIBE, "d", &e), 0);
	r = roundtrip(&m);
	ck_assert_str_eq(r->describe->name, "d");
	tileatom__request__free_unpacked(r, NULL);
	ck_assert_int_eq(tac_build_read(&m, "rd", &win, &e), 0);
	r = roundtrip(&m);
	ck_assert_int_eq(r->read->region->shape[0], 4);
	tileatom__request__free_unpacked(r, NULL);
}
END_TEST

START_TEST(test_build_rejects)
{
	tac_msg m;
	tileatom_error e = {0, ""};
	int32_t v = 1;
	tileatom_array va = tileatom_scalar(TILEATOM_INT32, &v);
	char long_name[80];
	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = NULL,
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .values = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = long_name,
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .values = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_NONE,
	                                                   .values = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .values = NULL},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .values = &va,
	                                                   .compare = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_msg(strstr(e.message, "only for cas"), "message: %s", e.message);
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_CAS,
	                                                   .values = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	tileatom_array bad = {TILEATOM_INT32,
	                      5,
	                      {
	                          1,
	                          1,
	                          1,
	                          1,
	                      },
	                      &v};
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .values = &bad},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	tileatom_array neg = {TILEATOM_INT32, 1, {-3}, &v};
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .values = &neg},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	tileatom_array nodata = {TILEATOM_INT32, 1, {3}, NULL};
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .values = &nodata},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	tileatom_array nodtype = {(tileatom_dtype)0, 0, {0}, &v};
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .values = &nodtype},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	tileatom_region r0 = {0, {0}, {0}};
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .region = &r0,
	                                                   .values = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	tileatom_region rn = {1, {-1}, {2}};
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .region = &rn,
	                                                   .values = &va},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	tileatom_op_options o = TILEATOM_OP_OPTIONS_INIT;
	o.sem = (tileatom_sem)7;
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .values = &va,
	                                                   .opts = &o},
	                                  &e),
	                 TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_msg(strstr(e.message, "sem"), "message: %s", e.message);
	/* A NULL err is allowed everywhere. */
	ck_assert_int_eq(tac_build_atomic(&m,
	                                  &(tac_split_req){.kind = TILEATOM_REQ_ELEMENTWISE,
	                                                   .tile = "t",
	                                                   .op = TILEATOM_OP_ADD,
	                                                   .values = NULL},
	                                  NULL),
	                 TILEATOM_E_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_check_response)
{
	tileatom_error e = {0, ""};
	Tileatom__Response r = TILEATOM__RESPONSE__INIT;
	r.status = TILEATOM__STATUS__NOT_FOUND;
	r.message = "no tile 'x'";
	ck_assert_int_eq(tac_check_response(&r, TILEATOM_REQ_DESCRIBE, &e), TILEATOM_E_NOT_FOUND);
	ck_assert_str_eq(e.message, "no tile 'x'");
	r.status = (Tileatom__Status)42;
	ck_assert_int_eq(tac_check_response(&r, TILEATOM_REQ_DESCRIBE, &e), TILEATOM_E_PROTOCOL);
	/* OK with the wrong body. */
	r.status = TILEATOM__STATUS__OK;
	r.message = "";
	Tileatom__PingResponse ping = TILEATOM__PING_RESPONSE__INIT;
	r.body_case = TILEATOM__RESPONSE__BODY_PING;
	r.ping = &ping;
	ck_assert_int_eq(tac_check_response(&r, TILEATOM_REQ_PING, &e), TILEATOM_OK);
	ck_assert_int_eq(tac_check_response(&r, TILEATOM_REQ_DESCRIBE, &e), TILEATOM_E_PROTOCOL);
	/* Destroy accepts no body. */
	r.body_case = TILEATOM__RESPONSE__BODY__NOT_SET;
	ck_assert_int_eq(tac_check_response(&r, TILEATOM_REQ_DESTROY, &e), TILEATOM_OK);
	/* Old values whose byte count does not match the shape. */
	Tileatom__OpResponse op = TILEATOM__OP_RESPONSE__INIT;
	Tileatom__Array old = TILEATOM__ARRAY__INIT;
	int64_t shape[1] = {3};
	uint8_t data[8] = {0};
	old.dtype = TILEATOM__DTYPE__INT32;
	old.n_shape = 1;
	old.shape = shape;
	old.data.len = 8;
	old.data.data = data;
	op.old = &old;
	r.body_case = TILEATOM__RESPONSE__BODY_OP;
	r.op = &op;
	ck_assert_int_eq(tac_check_response(&r, TILEATOM_REQ_INDEXED, &e), TILEATOM_E_PROTOCOL);
	shape[0] = 2;
	ck_assert_int_eq(tac_check_response(&r, TILEATOM_REQ_INDEXED, &e), TILEATOM_OK);
	/* Old values written into a shared buffer (no bytes): their rank is still checked. */
	int64_t shape5[5] = {1, 1, 1, 1, 2};
	old.data.len = 0;
	old.n_shape = 5;
	old.shape = shape5;
	ck_assert_int_eq(tac_check_response(&r, TILEATOM_REQ_INDEXED, &e), TILEATOM_E_PROTOCOL);
	ck_assert_str_eq(e.message, "old values: rank 5 in the response");
	old.n_shape = 4;
	ck_assert_int_eq(tac_check_response(&r, TILEATOM_REQ_INDEXED, &e), TILEATOM_OK);
	/* Tile info conversion. */
	Tileatom__TileInfo ti = TILEATOM__TILE_INFO__INIT;
	int64_t ts[2] = {5, 6};
	ti.name = "abc";
	ti.dtype = TILEATOM__DTYPE__UINT32;
	ti.n_shape = 2;
	ti.shape = ts;
	ti.bytes = 120;
	tileatom_tile_info info;
	ck_assert_int_eq(tac_tile_info_from_wire(&info, &ti, &e), 0);
	ck_assert_str_eq(info.name, "abc");
	ck_assert_int_eq(info.rank, 2);
	ck_assert_int_eq(info.shape[1], 6);
	ck_assert_uint_eq(info.bytes, 120);
	ti.n_shape = 0;
	ck_assert_int_eq(tac_tile_info_from_wire(&info, &ti, &e), TILEATOM_E_PROTOCOL);
	/* Callers size buffers from dtype and extents: a daemon's nonsense is refused. */
	ti.n_shape = 2;
	ti.dtype = TILEATOM__DTYPE__BOOL;
	ck_assert_int_eq(tac_tile_info_from_wire(&info, &ti, &e), TILEATOM_E_PROTOCOL);
	ti.dtype = TILEATOM__DTYPE__UINT32;
	ts[1] = 0;
	ck_assert_int_eq(tac_tile_info_from_wire(&info, &ti, &e), TILEATOM_E_PROTOCOL);
	ts[0] = INT64_C(1) << 40;
	ts[1] = INT64_C(1) << 40;
	ck_assert_int_eq(tac_tile_info_from_wire(&info, &ti, &e), TILEATOM_E_PROTOCOL);
}
END_TEST

/* ---- the fake daemon ------------------------------------------------------------------ */

/* How the fake daemon behaves after answering Hello. */
typedef enum fake_mode {
	FAKE_NORMAL,      /* answers every request properly */
	FAKE_BAD_VERSION, /* answers Hello with protocol version 2 */
	FAKE_BAD_ID,      /* answers the first request after Hello with a wrong id */
	FAKE_HANGUP,      /* closes the connection instead of answering */
	FAKE_GARBAGE,     /* answers with a frame that does not decode */
	FAKE_HUGE,        /* announces a 16 MiB frame */
	FAKE_SILENT,      /* never answers after Hello */
	FAKE_FLOOD,       /* answers with 8 KiB messages from a tiny send buffer */
	FAKE_GATED        /* after Hello reads nothing until gate bytes wait, then normal */
} fake_mode;

/* A fake daemon serving one connection on a thread. */
typedef struct fake {
	fake_mode mode;    /* behaviour */
	int listen_fd;     /* listening socket */
	char dir[64];      /* temporary directory (Unix) */
	char address[160]; /* what clients connect to */
	pthread_t thread;  /* serving thread */
	int requests;      /* requests answered after Hello */
	int conn_fd;       /* the accepted connection (-1 before; atomic access) */
	long gate;         /* FAKE_GATED: 0 closed, else bytes to await first (atomic access) */
	long seen_bytes;   /* FAKE_GATED: bytes waiting when the fake first looked */
} fake;

/* Reads exactly len bytes; false on EOF or error. */
static bool read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return false;
		}
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Writes all of buf; false on error. */
static bool write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return false;
		}
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Sends one Response frame. */
static bool send_response(int fd, Tileatom__Response *r)
{
	uint8_t *frame;
	size_t len;
	if (ta_frame_encode(&r->base, TA_FRAME_DEFAULT_MAX, &frame, &len) != 0)
		return false;
	bool ok = write_full(fd, frame, len);
	free(frame);
	return ok;
}

/* Bytes waiting to be read on fd (-1 on error). */
static long bytes_waiting(int fd)
{
	int n = 0;
	if (ioctl(fd, FIONREAD, &n) < 0)
		return -1;
	return n;
}

/* FAKE_GATED: waits (up to 20 s) until the test opens the gate and at least that many bytes
 * are waiting on fd, then records how many are. */
static void fake_gate_wait(fake *f, int fd)
{
	struct timespec ms = {0, 1000000};
	long want = 0;
	for (int k = 0; k < 20000; k++) {
		want = __atomic_load_n(&f->gate, __ATOMIC_ACQUIRE);
		if (want != 0 && bytes_waiting(fd) >= want)
			break;
		nanosleep(&ms, NULL);
	}
	f->seen_bytes = bytes_waiting(fd);
}

/* Serves one connection according to the mode. */
static void *fake_main(void *arg)
{
	fake *f = arg;
	int fd = accept(f->listen_fd, NULL, NULL);
	if (fd < 0)
		return NULL;
	__atomic_store_n(&f->conn_fd, fd, __ATOMIC_RELEASE);
	if (f->mode == FAKE_FLOOD) {
		int small = 4096;
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	}
	char *big = malloc(8192);
	memset(big, 'x', 8191);
	big[8191] = '\0';
	for (;;) {
		uint8_t hdr[4];
		if (!read_full(fd, hdr, 4))
			break;
		uint32_t len = ta_frame_get_header(hdr);
		uint8_t *payload = malloc(len ? len : 1);
		if (!payload || !read_full(fd, payload, len)) {
			free(payload);
			break;
		}
		Tileatom__Request *req = tileatom__request__unpack(NULL, len, payload);
		free(payload);
		if (!req)
			break;
		Tileatom__Response resp = TILEATOM__RESPONSE__INIT;
		Tileatom__HelloResponse hello = TILEATOM__HELLO_RESPONSE__INIT;
		Tileatom__PingResponse ping = TILEATOM__PING_RESPONSE__INIT;
		resp.id = req->id;
		bool is_hello = req->body_case == TILEATOM__REQUEST__BODY_HELLO;
		bool is_ping = req->body_case == TILEATOM__REQUEST__BODY_PING;
		tileatom__request__free_unpacked(req, NULL);
		bool ok = true;
		if (is_hello) {
			hello.protocol_version = f->mode == FAKE_BAD_VERSION ? 2 : 1;
			hello.server_version = "fake-0";
			hello.backend = "fake";
			resp.body_case = TILEATOM__RESPONSE__BODY_HELLO;
			resp.hello = &hello;
			ok = send_response(fd, &resp);
			if (f->mode == FAKE_GATED)
				fake_gate_wait(f, fd);
		} else {
			f->requests++;
			/* Pings get their body; the other kinds the fake sees (writes) none. */
			if (is_ping) {
				resp.body_case = TILEATOM__RESPONSE__BODY_PING;
				resp.ping = &ping;
			}
			switch (f->mode) {
			case FAKE_BAD_ID:
				resp.id += 7;
				ok = send_response(fd, &resp);
				break;
			case FAKE_HANGUP:
				ok = false;
				break;
			case FAKE_GARBAGE: {
				uint8_t g[4 + 8] = {8,    0,    0,    0,    0xff, 0xff,
				                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
				ok = write_full(fd, g, sizeof(g));
				break;
			}
			case FAKE_HUGE: {
				uint8_t h[8] = {0, 0, 0, 1, 1, 2, 3, 4};
				ok = write_full(fd, h, sizeof(h));
				break;
			}
			case FAKE_SILENT:
				break;
			case FAKE_FLOOD:
				resp.message = big;
				ok = send_response(fd, &resp);
				break;
			default:
				ok = send_response(fd, &resp);
				break;
			}
		}
		if (!ok)
			break;
	}
	free(big);
	close(fd);
	return NULL;
}

/* Starts a fake daemon on a Unix socket (tcp false) or on 127.0.0.1 (tcp true). */
static void fake_start(fake *f, fake_mode mode, bool tcp)
{
	memset(f, 0, sizeof(*f));
	f->mode = mode;
	f->conn_fd = -1;
	if (tcp) {
		f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(f->listen_fd, 0);
		struct sockaddr_in sin;
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ck_assert_int_eq(bind(f->listen_fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
		socklen_t sl = sizeof(sin);
		ck_assert_int_eq(getsockname(f->listen_fd, (struct sockaddr *)&sin, &sl), 0);
		snprintf(f->address, sizeof(f->address), "127.0.0.1:%u",
		         (unsigned)ntohs(sin.sin_port));
	} else {
		snprintf(f->dir, sizeof(f->dir), "/tmp/tac-fake-XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(f->dir));
		snprintf(f->address, sizeof(f->address), "%s/fake.sock", f->dir);
		f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(f->listen_fd, 0);
		struct sockaddr_un sun;
		memset(&sun, 0, sizeof(sun));
		sun.sun_family = AF_UNIX;
		ck_assert_uint_lt(strlen(f->address), sizeof(sun.sun_path));
		memcpy(sun.sun_path, f->address, strlen(f->address) + 1);
		ck_assert_int_eq(bind(f->listen_fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	}
	ck_assert_int_eq(listen(f->listen_fd, 4), 0);
	ck_assert_int_eq(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

/* Waits for the fake's thread (the client must have closed) and removes its files. */
static void fake_stop(fake *f)
{
	pthread_join(f->thread, NULL);
	close(f->listen_fd);
	if (f->dir[0]) {
		unlink(f->address);
		rmdir(f->dir);
	}
}

START_TEST(test_fake_handshake_and_tcp)
{
	for (int tcp = 0; tcp < 2; tcp++) {
		fake f;
		fake_start(&f, FAKE_NORMAL, tcp);
		tileatom_client *c = NULL;
		tileatom_error e = {0, ""};
		ck_assert_int_eq(tileatom_connect(f.address, 5000, &c, &e), TILEATOM_OK);
		ck_assert_str_eq(tileatom_server_version(c), "fake-0");
		ck_assert_str_eq(tileatom_server_backend(c), "fake");
		ck_assert_str_eq(tileatom_address(c), f.address);
		ck_assert_int_eq(tileatom_ping(c, &e), TILEATOM_OK);
		ck_assert_int_eq(tileatom_ping(c, &e), TILEATOM_OK);
		tileatom_close(c);
		fake_stop(&f);
		ck_assert_int_eq(f.requests, 2);
	}
}
END_TEST

/* Connects to a fresh fake in mode and pings once; returns the ping status. */
static int fake_ping(fake_mode mode, tileatom_error *e, int timeout_ms, uint32_t max_resp)
{
	fake f;
	fake_start(&f, mode, false);
	tileatom_client *c = NULL;
	ck_assert_int_eq(tileatom_connect(f.address, 5000, &c, e), TILEATOM_OK);
	if (timeout_ms)
		tileatom_set_timeout(c, timeout_ms);
	if (max_resp)
		tileatom_set_max_response(c, max_resp);
	int rc = tileatom_ping(c, e);
	/* Once broken, every later call reports the broken connection. */
	if (rc == TILEATOM_E_IO || rc == TILEATOM_E_PROTOCOL || rc == TILEATOM_E_TIMEOUT) {
		tileatom_error again = {0, ""};
		ck_assert_int_eq(tileatom_ping(c, &again), TILEATOM_E_IO);
		ck_assert_msg(strstr(again.message, "broken"), "message: %s", again.message);
		ck_assert_int_eq(tileatom_submit_ping(c, NULL, &again), TILEATOM_E_IO);
	}
	tileatom_close(c);
	fake_stop(&f);
	return rc;
}

START_TEST(test_fake_failures)
{
	tileatom_error e = {0, ""};
	ck_assert_int_eq(fake_ping(FAKE_BAD_ID, &e, 0, 0), TILEATOM_E_PROTOCOL);
	ck_assert_msg(strstr(e.message, "does not match"), "message: %s", e.message);
	ck_assert_int_eq(fake_ping(FAKE_HANGUP, &e, 0, 0), TILEATOM_E_IO);
	ck_assert_msg(strstr(e.message, "closed the connection"), "message: %s", e.message);
	ck_assert_int_eq(fake_ping(FAKE_GARBAGE, &e, 0, 0), TILEATOM_E_PROTOCOL);
	ck_assert_msg(strstr(e.message, "undecodable"), "message: %s", e.message);
	ck_assert_int_eq(fake_ping(FAKE_HUGE, &e, 0, 1u << 20), TILEATOM_E_PROTOCOL);
	ck_assert_msg(strstr(e.message, "exceeds the limit"), "message: %s", e.message);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(fake_ping(FAKE_SILENT, &e, 200, 0), TILEATOM_E_TIMEOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	/* the upper bound only catches a timeout that never fires (generous for a busy machine) */
	ck_assert_msg(ms >= 190 && ms < 15000, "timeout took %.0f ms", ms);
	ck_assert_msg(strstr(e.message, "timed out"), "message: %s", e.message);

	fake f;
	fake_start(&f, FAKE_BAD_VERSION, false);
	tileatom_client *c = (tileatom_client *)&e;
	ck_assert_int_eq(tileatom_connect(f.address, 5000, &c, &e), TILEATOM_E_PROTOCOL);
	ck_assert_ptr_null(c);
	ck_assert_msg(strstr(e.message, "protocol version 2"), "message: %s", e.message);
	fake_stop(&f);
}
END_TEST

/* Floods a FAKE_FLOOD fake with n requests before collecting any: pings (write_elems 0)
 * or writes of write_elems int32 each. The fake answers each with 8 KiB through a 4 KiB
 * buffer and blocks; the client's own send buffer is tiny too. */
static void flood_run(int n, int64_t write_elems)
{
	fake f;
	fake_start(&f, FAKE_FLOOD, false);
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	ck_assert_int_eq(tileatom_connect(f.address, 5000, &c, &e), TILEATOM_OK);
	int small = 4096;
	ck_assert_int_eq(setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	tileatom_set_timeout(c, 20000);
	int32_t *vals = calloc(write_elems > 0 ? (size_t)write_elems : 1, sizeof(int32_t));
	ck_assert_ptr_nonnull(vals);
	tileatom_array a = tileatom_vector(TILEATOM_INT32, write_elems, vals);
	uint64_t first = 0, id = 0;
	for (int k = 0; k < n; k++) {
		int rc = write_elems > 0 ? tileatom_submit_write(c, "w", NULL, &a, &id, &e)
		                         : tileatom_submit_ping(c, &id, &e);
		ck_assert_msg(rc == TILEATOM_OK, "submit %d: %s", k, e.message);
		if (k == 0)
			first = id;
		ck_assert_uint_eq(id, first + (uint64_t)k);
	}
	ck_assert_uint_eq(tileatom_pending(c), (size_t)n);
	for (int k = 0; k < n; k++) {
		tileatom_response r;
		ck_assert_msg(tileatom_collect(c, &r, &e) == TILEATOM_OK, "collect %d: %s", k,
		              e.message);
		ck_assert_uint_eq(r.id, first + (uint64_t)k);
		ck_assert_int_eq(r.kind, write_elems > 0 ? TILEATOM_REQ_WRITE : TILEATOM_REQ_PING);
	}
	ck_assert_uint_eq(tileatom_pending(c), 0);
	tileatom_close(c);
	fake_stop(&f);
	free(vals);
	ck_assert_int_eq(f.requests, n);
}

START_TEST(test_fake_flood_no_deadlock)
{
	/* 1500 pings (about 12 KB) stay buffered until the first collect, whose flush meets
	 * the stalled fake: it only completes because the flush drains responses while the
	 * socket is not writable. 1500 writes of 1 KiB pass the 64 KiB threshold every 64
	 * submits, so the same holds for the flushes inside tileatom_submit_*. */
	flood_run(1500, 0);
	flood_run(1500, 256);
}
END_TEST

/* The fake's accepted connection (valid once tileatom_connect has returned). */
static int fake_conn(fake *f)
{
	int fd = __atomic_load_n(&f->conn_fd, __ATOMIC_ACQUIRE);
	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_coalesce_until_collect)
{
	/* Submitted pings leave nothing on the socket; the fake (gated) answers only once the
	 * whole batch is waiting, so the first collect must write all of it before it waits;
	 * then every response comes back in order. */
	enum { N = 100 };
	fake f;
	fake_start(&f, FAKE_GATED, false);
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	ck_assert_int_eq(tileatom_connect(f.address, 5000, &c, &e), TILEATOM_OK);
	tileatom_set_timeout(c, 20000);
	int sfd = fake_conn(&f);
	uint64_t ids[N];
	for (int k = 0; k < N; k++) {
		ck_assert_int_eq(tileatom_submit_ping(c, &ids[k], &e), TILEATOM_OK);
		ck_assert_int_eq(bytes_waiting(sfd), 0);
	}
	ck_assert_uint_eq(tileatom_pending(c), N);
	size_t buffered = c->txbuf.len;
	ck_assert_uint_gt(buffered, (size_t)N * TA_FRAME_HEADER);
	__atomic_store_n(&f.gate, (long)buffered, __ATOMIC_RELEASE);
	for (int k = 0; k < N; k++) {
		tileatom_response r;
		ck_assert_msg(tileatom_collect(c, &r, &e) == TILEATOM_OK, "collect %d: %s", k,
		              e.message);
		ck_assert_uint_eq(r.id, ids[k]);
		ck_assert_int_eq(r.kind, TILEATOM_REQ_PING);
		ck_assert_uint_eq(c->txbuf.len, 0);
	}
	ck_assert_int_eq(tileatom_collect(c, &(tileatom_response){0}, &e), TILEATOM_E_STATE);
	/* A synchronous call goes out at once, as before. */
	ck_assert_int_eq(tileatom_ping(c, &e), TILEATOM_OK);
	tileatom_close(c);
	fake_stop(&f);
	ck_assert_int_eq(f.seen_bytes, (long)buffered);
	ck_assert_int_eq(f.requests, N + 1);
}
END_TEST

START_TEST(test_coalesce_threshold)
{
	/* Writes of 4 KB stay buffered until the one that brings the buffer to 64 KiB, which
	 * writes all of them at once; a frame of 64 KiB or more goes out at once, behind what
	 * is buffered. The gated fake reads nothing meanwhile. */
	fake f;
	fake_start(&f, FAKE_GATED, false);
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	ck_assert_int_eq(tileatom_connect(f.address, 5000, &c, &e), TILEATOM_OK);
	tileatom_set_timeout(c, 20000);
	int big = 1 << 20; /* room for all of it while the fake reads nothing */
	ck_assert_int_eq(setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big)), 0);
	int sfd = fake_conn(&f);
	int32_t *vals = calloc(20000, sizeof(int32_t));
	ck_assert_ptr_nonnull(vals);
	tileatom_array small = tileatom_vector(TILEATOM_INT32, 1000, vals);
	int writes = 0;
	long waiting = 0;
	while (waiting == 0) {
		ck_assert_int_lt(writes, 100);
		size_t before = c->txbuf.len;
		ck_assert_int_eq(tileatom_submit_write(c, "w", NULL, &small, NULL, &e),
		                 TILEATOM_OK);
		writes++;
		waiting = bytes_waiting(sfd);
		if (waiting == 0) {
			ck_assert_uint_gt(c->txbuf.len, before);
			ck_assert_uint_lt(c->txbuf.len, TAC_FLUSH_THRESHOLD);
			continue;
		}
		/* This submit wrote every buffered frame, its own included (all are the same
		 * size: ids 2..18 take one byte). */
		ck_assert_uint_eq(c->txbuf.len, 0);
		ck_assert_uint_lt(before, TAC_FLUSH_THRESHOLD);
		ck_assert_int_ge(waiting, TAC_FLUSH_THRESHOLD);
		ck_assert_int_eq(waiting, (waiting - (long)before) * writes);
		ck_assert_int_gt(waiting - (long)before, 4000);
	}
	ck_assert_int_eq(writes, (TAC_FLUSH_THRESHOLD + (int)waiting / writes - 1) /
	                             ((int)waiting / writes));
	/* A ping is buffered; a write of 80 KB goes out at once, with the ping before it. */
	ck_assert_int_eq(tileatom_submit_ping(c, NULL, &e), TILEATOM_OK);
	ck_assert_int_eq(bytes_waiting(sfd), waiting);
	size_t ping_len = c->txbuf.len;
	ck_assert_uint_gt(ping_len, 0);
	tileatom_array large = tileatom_vector(TILEATOM_INT32, 20000, vals);
	ck_assert_int_eq(tileatom_submit_write(c, "w", NULL, &large, NULL, &e), TILEATOM_OK);
	ck_assert_uint_eq(c->txbuf.len, 0);
	long large_len = bytes_waiting(sfd) - waiting - (long)ping_len;
	ck_assert_int_gt(large_len, 80000);
	ck_assert_int_lt(large_len, 80100);
	/* One more ping stays buffered until the collect. */
	ck_assert_int_eq(tileatom_submit_ping(c, NULL, &e), TILEATOM_OK);
	ck_assert_uint_gt(c->txbuf.len, 0);
	__atomic_store_n(&f.gate, 1L, __ATOMIC_RELEASE);
	int total = writes + 3;
	ck_assert_uint_eq(tileatom_pending(c), (size_t)total);
	for (int k = 0; k < total; k++) {
		tileatom_response r;
		ck_assert_msg(tileatom_collect(c, &r, &e) == TILEATOM_OK, "collect %d: %s", k,
		              e.message);
		bool ping = k == writes || k == writes + 2;
		ck_assert_int_eq(r.kind, ping ? TILEATOM_REQ_PING : TILEATOM_REQ_WRITE);
	}
	tileatom_close(c);
	fake_stop(&f);
	free(vals);
	ck_assert_int_eq(f.requests, total);
}
END_TEST

/* Polls the client (tileatom_poll) each time its socket is readable, until want responses
 * are ready or 10 s passed; returns the last ready count. */
static size_t poll_until_ready(tileatom_client *c, size_t want, int *status)
{
	size_t ready = 0;
	tileatom_error e = {0, ""};
	for (int round = 0; round < 1000; round++) {
		*status = tileatom_poll(c, &ready, &e);
		if (*status != TILEATOM_OK || ready >= want)
			break;
		struct pollfd pfd = {.fd = tileatom_fd(c), .events = POLLIN};
		poll(&pfd, 1, 10);
	}
	return ready;
}

START_TEST(test_poll_for_event_loops)
{
	/* tileatom_fd and tileatom_poll: nothing is ready before the daemon answers; after
	 * tileatom_flush and the answers, all five pings are, and each collect then returns
	 * without waiting (a 1 ms timeout would break the connection otherwise). */
	fake f;
	fake_start(&f, FAKE_GATED, false);
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	ck_assert_int_eq(tileatom_connect(f.address, 5000, &c, &e), TILEATOM_OK);
	ck_assert_int_ge(tileatom_fd(c), 0);
	ck_assert_int_eq(tileatom_fd(NULL), -1);
	size_t ready = 99;
	ck_assert_int_eq(tileatom_poll(NULL, &ready, &e), TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_poll(c, NULL, &e), TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_poll(c, &ready, &e), TILEATOM_OK);
	ck_assert_uint_eq(ready, 0); /* nothing pending */
	for (int k = 0; k < 5; k++)
		ck_assert_int_eq(tileatom_submit_ping(c, NULL, &e), TILEATOM_OK);
	ck_assert_int_eq(tileatom_poll(c, &ready, &e), TILEATOM_OK);
	ck_assert_uint_eq(ready, 0); /* buffered, not even sent */
	long buffered = (long)c->txbuf.len;
	ck_assert_int_eq(tileatom_flush(c, &e), TILEATOM_OK);
	__atomic_store_n(&f.gate, buffered, __ATOMIC_RELEASE);
	int st = -1;
	ck_assert_uint_eq(poll_until_ready(c, 5, &st), 5);
	ck_assert_int_eq(st, TILEATOM_OK);
	tileatom_set_timeout(c, 1);
	for (int k = 0; k < 5; k++) {
		tileatom_response r;
		ck_assert_int_eq(tileatom_collect(c, &r, &e), TILEATOM_OK);
		ck_assert_int_eq(r.kind, TILEATOM_REQ_PING);
		ck_assert_int_eq(tileatom_poll(c, &ready, &e), TILEATOM_OK);
		ck_assert_uint_eq(ready, (size_t)(4 - k));
	}
	ck_assert_uint_eq(tileatom_pending(c), 0);
	tileatom_close(c);
	fake_stop(&f);

	/* The daemon hangs up: the poll reports the broken connection and every pending
	 * request as ready (its collect returns the error at once). */
	fake_start(&f, FAKE_HANGUP, false);
	ck_assert_int_eq(tileatom_connect(f.address, 5000, &c, &e), TILEATOM_OK);
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(tileatom_submit_ping(c, NULL, &e), TILEATOM_OK);
	ck_assert_int_eq(tileatom_flush(c, &e), TILEATOM_OK);
	ck_assert_uint_eq(poll_until_ready(c, 3, &st), 3);
	ck_assert_int_eq(st, TILEATOM_E_IO);
	tileatom_response r;
	ck_assert_int_eq(tileatom_collect(c, &r, &e), TILEATOM_E_IO);
	tileatom_close(c);
	fake_stop(&f);
}
END_TEST

START_TEST(test_coalesce_close_and_errors)
{
	/* tileatom_flush writes what is buffered without waiting; tileatom_close does too:
	 * the (gated) fake finds every byte of the ten requests waiting after each. */
	fake f;
	fake_start(&f, FAKE_GATED, false);
	tileatom_client *c = NULL;
	tileatom_error e = {0, ""};
	ck_assert_int_eq(tileatom_connect(f.address, 5000, &c, &e), TILEATOM_OK);
	int sfd = fake_conn(&f);
	long buffered = 0;
	for (int round = 0; round < 2; round++) {
		for (int k = 0; k < 5; k++)
			ck_assert_int_eq(tileatom_submit_ping(c, NULL, &e), TILEATOM_OK);
		ck_assert_uint_gt(c->txbuf.len, 5 * TA_FRAME_HEADER);
		ck_assert_int_eq(bytes_waiting(sfd), buffered);
		buffered += (long)c->txbuf.len;
		if (round == 0) {
			ck_assert_int_eq(tileatom_flush(c, &e), TILEATOM_OK);
			ck_assert_uint_eq(c->txbuf.len, 0);
			ck_assert_int_eq(bytes_waiting(sfd), buffered);
			ck_assert_int_eq(tileatom_flush(c, &e), TILEATOM_OK);
		}
	}
	ck_assert_uint_eq(tileatom_pending(c), 10);
	__atomic_store_n(&f.gate, buffered, __ATOMIC_RELEASE);
	tileatom_close(c);
	fake_stop(&f);
	ck_assert_int_eq(f.seen_bytes, buffered);
	ck_assert_int_eq(tileatom_flush(NULL, &e), TILEATOM_E_INVALID_ARGUMENT);

	/* The daemon hangs up: the submits only buffer, so the collect that writes and waits
	 * reports the failure, and every later call remembers it. */
	fake_start(&f, FAKE_HANGUP, false);
	ck_assert_int_eq(tileatom_connect(f.address, 5000, &c, &e), TILEATOM_OK);
	tileatom_set_timeout(c, 20000);
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(tileatom_submit_ping(c, NULL, &e), TILEATOM_OK);
	tileatom_response r;
	ck_assert_int_eq(tileatom_collect(c, &r, &e), TILEATOM_E_IO);
	ck_assert_int_eq(r.status, TILEATOM_E_IO);
	tileatom_error again = {0, ""};
	ck_assert_int_eq(tileatom_submit_ping(c, NULL, &again), TILEATOM_E_IO);
	ck_assert_msg(strstr(again.message, "broken") && strstr(again.message, e.message),
	              "message: %s", again.message);
	ck_assert_int_eq(tileatom_collect(c, &r, &again), TILEATOM_E_IO);
	ck_assert_int_eq(tileatom_ping(c, &again), TILEATOM_E_IO);
	ck_assert_int_eq(tileatom_flush(c, &again), TILEATOM_E_IO);
	tileatom_close(c);
	fake_stop(&f);
}
END_TEST

START_TEST(test_connect_errors)
{
	tileatom_error e = {0, ""};
	tileatom_client *c = (tileatom_client *)&e;
	ck_assert_int_eq(tileatom_connect("/nonexistent/dir/x.sock", 1000, &c, &e), TILEATOM_E_IO);
	ck_assert_ptr_null(c);
	ck_assert_str_eq(e.message, "cannot connect to /nonexistent/dir/x.sock: No such file or "
	                            "directory (is tileatomd running?)");
	char longpath[200];
	memset(longpath, 'p', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	ck_assert_int_eq(tileatom_connect(longpath, 1000, &c, &e), TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_int_eq(tileatom_connect("/x", 1000, NULL, &e), TILEATOM_E_INVALID_ARGUMENT);
	/* A TCP port nobody listens on: one bound here but not listening (a connection to it
	 * is refused), kept bound until the connect is done so that no other process (e.g. a
	 * suite running beside this one under make -j check) can take the port meanwhile. */
	int s = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(s, 0);
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
	socklen_t sl = sizeof(sin);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&sin, &sl), 0);
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)ntohs(sin.sin_port));
	ck_assert_int_eq(tileatom_connect(addr, 1000, &c, &e), TILEATOM_E_IO);
	ck_assert_msg(strstr(e.message, "Connection refused"), "message: %s", e.message);
	close(s);
	/* Calls on a NULL handle. */
	ck_assert_int_eq(tileatom_ping(NULL, NULL), TILEATOM_E_INVALID_ARGUMENT);
	ck_assert_uint_eq(tileatom_pending(NULL), 0);
	tileatom_close(NULL);
}
END_TEST

static Suite *codec_suite(void)
{
	Suite *s = suite_create("client_codec");
	TCase *tc = tcase_create("codec");
	tcase_add_test(tc, test_strerror_and_names);
	tcase_add_test(tc, test_values);
	tcase_add_test(tc, test_parse_address);
	tcase_add_test(tc, test_default_socket);
	tcase_add_test(tc, test_build_elementwise);
	tcase_add_test(tc, test_build_indexed_scatter_atomic_at);
	tcase_add_test(tc, test_build_memory_and_tiles);
	tcase_add_test(tc, test_build_rejects);
	tcase_add_test(tc, test_check_response);
	suite_add_tcase(s, tc);
	TCase *conn = tcase_create("connection");
	tcase_set_timeout(conn, 120);
	tcase_add_test(conn, test_fake_handshake_and_tcp);
	tcase_add_test(conn, test_fake_failures);
	tcase_add_test(conn, test_fake_flood_no_deadlock);
	tcase_add_test(conn, test_coalesce_until_collect);
	tcase_add_test(conn, test_coalesce_threshold);
	tcase_add_test(conn, test_coalesce_close_and_errors);
	tcase_add_test(conn, test_poll_for_event_loops);
	tcase_add_test(conn, test_connect_errors);
	suite_add_tcase(s, conn);
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	SRunner *sr = srunner_create(codec_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* tac_util.c: the library's free functions: error helpers, status names, the default
 * socket path, and the dtype / op helpers exported for applications and the CLI (thin
 * wrappers over the core's tables, tacore/ta_types.c, linked into the library). Element
 * values (as text, as doubles) are in tac_text.c. */
#include "tac_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ta_types.h"
#include "ta_wire_enums.h"

/* The public header restates the core's enums (it is installed alone): every row of the
 * table is tied to its public name here, and the core to the wire in ta_wire_enums.h. */
#define TAC_PUBLIC_SAME(core, pub) _Static_assert((int)(core) == (int)(pub), #core " != " #pub)
#define TA_DTYPE(id, wire, ...)    TAC_PUBLIC_SAME(TA_DTYPE_##id, TILEATOM_##wire);
#define TAC_PUBLIC_OP_RMW(id)      TAC_PUBLIC_SAME(TA_OP_##id, TILEATOM_OP_##id);
#define TAC_PUBLIC_OP_LOAD(id)
#define TAC_PUBLIC_OP_STORE(id)
#define TA_OP(id, name, kind, ...) TAC_PUBLIC_OP_##kind(id)
#define TA_SEM(id, ...)            TAC_PUBLIC_SAME(TA_SEM_##id, TILEATOM_SEM_##id);
#define TA_SCOPE(id, ...)          TAC_PUBLIC_SAME(TA_SCOPE_##id, TILEATOM_SCOPE_##id);
#define TA_SPACE(id, ...)          TAC_PUBLIC_SAME(TA_SPACE_##id, TILEATOM_SPACE_##id);
#define TA_ADDR(id, ...)           TAC_PUBLIC_SAME(TA_ADDR_##id, TILEATOM_ADDR_##id);
#define TA_STATUS(id, pub)         TAC_PUBLIC_SAME(TA_##id, TILEATOM_##pub);
#define TA_REQUEST(id, ...)        TAC_PUBLIC_SAME(TA_REQ_##id, TILEATOM_REQ_##id);
#include "ta_ops.def" /* (each row kind only where its macro is defined) */
#undef TA_DTYPE
#undef TA_OP
#undef TA_SEM
#undef TA_SCOPE
#undef TA_SPACE
#undef TA_ADDR
#undef TA_STATUS
#undef TA_REQUEST
TAC_PUBLIC_SAME(TA_DTYPE_NONE, TILEATOM_DTYPE_NONE);
TAC_PUBLIC_SAME(TA_OP_NONE, TILEATOM_OP_NONE);
TAC_PUBLIC_SAME(TA_REQ_NONE, TILEATOM_REQ_NONE);
TAC_PUBLIC_SAME(TA_MAX_RANK, TILEATOM_MAX_RANK);
TAC_PUBLIC_SAME(TA_NAME_MAX, TILEATOM_NAME_MAX);
TAC_PUBLIC_SAME(TA_PROTOCOL_VERSION, TILEATOM_PROTOCOL_VERSION);
#undef TAC_PUBLIC_OP_RMW
#undef TAC_PUBLIC_OP_LOAD
#undef TAC_PUBLIC_OP_STORE
#undef TAC_PUBLIC_SAME

int tac_err(tileatom_error *err, int code, const char *fmt, ...)
{
	if (err) { /* formatted aside first: the arguments may include err->message */
		char text[sizeof(err->message)];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(text, sizeof(text), fmt, ap);
		va_end(ap);
		err->code = code;
		memcpy(err->message, text, sizeof(text));
	}
	return code;
}

const char *tileatom_strerror(int code)
{
	/* the client's codes (TILEATOM_E_IO..TILEATOM_E_STATE) in order */
	static const char *const client[] = {"IO", "TIMEOUT", "PROTOCOL", "NOMEM", "STATE"};
	if (code >= TILEATOM_OK && code <= TILEATOM_E_INTERNAL) /* the wire's: the core table */
		return ta_status_name((ta_status)code);
	if (code >= TILEATOM_E_IO && code <= TILEATOM_E_STATE)
		return client[code - TILEATOM_E_IO];
	return "UNKNOWN";
}

const char *tileatom_version(void)
{
	return TILEATOM_CLIENT_VERSION;
}

/* Copies s into buf (n bytes); -1 when it does not fit. */
static int copy_path(char *buf, size_t n, const char *s)
{
	return (size_t)snprintf(buf, n, "%s", s) < n ? 0 : -1;
}

int tileatom_default_socket(char *buf, size_t n)
{
	if (!buf || n == 0)
		return -1;
	const char *env = getenv("TILEATOM_SOCKET");
	if (env && *env)
		return copy_path(buf, n, env);
	/* Candidates: the per-user daemon ($XDG_RUNTIME_DIR) and the system daemon (/run).
	 * Root looks at the system one first. The first that exists wins; when none does,
	 * the first candidate is returned so that error messages name the expected path. */
	char user_path[PATH_MAX] = "";
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && *xdg &&
	    snprintf(user_path, sizeof(user_path), "%s/tileatom/tileatomd.sock", xdg) >=
	        (int)sizeof(user_path))
		user_path[0] = '\0';
	const char *system_path = "/run/tileatom/tileatomd.sock";
	bool root = geteuid() == 0;
	const char *cand[2] = {root ? system_path : user_path, root ? user_path : system_path};
	struct stat st; /* any file: a stale socket path still beats none */
	for (int i = 0; i < 2; i++)
		if (cand[i][0] && stat(cand[i], &st) == 0)
			return copy_path(buf, n, cand[i]);
	return copy_path(buf, n, cand[0][0] ? cand[0] : cand[1]);
}

size_t tileatom_dtype_size(tileatom_dtype dtype)
{
	return ta_dtype_size((ta_dtype)dtype);
}

const char *tileatom_dtype_name(tileatom_dtype dtype)
{
	return ta_dtype_name((ta_dtype)dtype);
}

tileatom_dtype tileatom_dtype_parse(const char *name)
{
	return name ? (tileatom_dtype)ta_dtype_parse(name) : TILEATOM_DTYPE_NONE;
}

bool tileatom_dtype_is_int(tileatom_dtype dtype)
{
	return ta_dtype_is_int((ta_dtype)dtype);
}

bool tileatom_dtype_is_float(tileatom_dtype dtype)
{
	return ta_dtype_is_float((ta_dtype)dtype);
}

const char *tileatom_op_name(tileatom_op op)
{
	return ta_op_is_rmw((ta_op)op) ? ta_op_name((ta_op)op) : "?";
}

tileatom_op tileatom_op_parse(const char *name)
{
	if (!name)
		return TILEATOM_OP_NONE;
	ta_op op = ta_op_parse(name);
	return ta_op_is_rmw(op) ? (tileatom_op)op : TILEATOM_OP_NONE;
}

const char *tileatom_sem_name(tileatom_sem sem)
{
	return ta_sem_name((ta_sem)sem);
}

const char *tileatom_scope_name(tileatom_scope scope)
{
	return ta_scope_name((ta_scope)scope);
}

const char *tileatom_space_name(tileatom_space space)
{
	return ta_space_name((ta_space)space);
}

int tileatom_sem_allowed(tileatom_request_kind kind, tileatom_op op, tileatom_sem sem)
{
	ta_family family = ta_req_family((ta_req_kind)kind);
	ta_op core_op = ta_req_op((ta_req_kind)kind);
	if (core_op == TA_OP_NONE)
		core_op = (ta_op)op;
	return family != TA_FAMILY_NONE && ta_op_in_family(core_op, family) &&
	       ta_op_sem_ok(core_op, (ta_sem)sem);
}

int tileatom_sem_parse(const char *name)
{
	return name ? ta_sem_parse(name) : -1;
}

int tileatom_scope_parse(const char *name)
{
	return name ? ta_scope_parse(name) : -1;
}

int tileatom_space_parse(const char *name)
{
	return name ? ta_space_parse(name) : -1;
}

void tileatom_op_options_init(tileatom_op_options *opts)
{
	const tileatom_op_options defaults = TILEATOM_OP_OPTIONS_INIT;
	if (opts)
		*opts = defaults;
}

/* tileatom_scalar and tileatom_vector use an initializer, not memset and stores (which
 * gcc read back with straddling loads: failed store forwarding on the submit path). */
tileatom_array tileatom_scalar(tileatom_dtype dtype, const void *value)
{
	return (tileatom_array){.dtype = dtype, .rank = 0, .data = value};
}

tileatom_array tileatom_vector(tileatom_dtype dtype, int64_t n, const void *data)
{
	return (tileatom_array){.dtype = dtype, .rank = 1, .shape = {n}, .data = data};
}

size_t tileatom_array_bytes(const tileatom_array *array)
{
	if (!array)
		return 0;
	size_t size = tileatom_dtype_size(array->dtype);
	if (size == 0 || array->rank < 0 || array->rank > TILEATOM_MAX_RANK)
		return 0;
	for (int a = 0; a < array->rank; a++) {
		if (array->shape[a] < 0)
			return 0;
		if (array->shape[a] > 0 && size > SIZE_MAX / (uint64_t)array->shape[a])
			return 0;
		size *= (size_t)array->shape[a];
	}
	return size;
}

void tileatom_free(void *ptr)
{
	free(ptr);
}

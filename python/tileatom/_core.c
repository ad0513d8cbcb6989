/* _core.c: tileatom._core, the CPython extension under the tileatom package. It wraps
 * libtileatom-client's public API (tileatom.h) and nothing else: a Conn object owns one
 * tileatom_client handle and exposes its synchronous and pipelined calls with arguments
 * already normalised by the Python layer (tileatom/__init__.py): numpy arrays (C-contiguous,
 * aligned, native byte order) or device-pointer tuples for operands, integer codes or names
 * for sem/scope/space, (origin, shape) tuples for regions. The one hot call, a single-element
 * op (Conn.at), also converts its Python scalar itself so that a pipelined small request
 * costs little Python; torch CUDA tensors are read by _torch.c, whose functions the module
 * adds. Every blocking library call runs with the GIL released under the
 * connection's own lock (a handle may be used by one thread at a time); the blocks that
 * release it are written out (PyEval_SaveThread/RestoreThread, as Py_BEGIN_ALLOW_THREADS
 * expands) so that clang-format lays them out as code. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "_torch.h"
#include "tileatom.h"

/* The classes the Python layer registers: code -> exception class, and the base class. */
static PyObject *error_classes; /* dict int -> class */
static PyObject *error_base;    /* tileatom.TileatomError */

/* The (applied, skipped) result type of an op without old values. */
static PyTypeObject OpResultType;
static PyStructSequence_Field opresult_fields[] = {
    {"applied", "elements applied (not masked off, not skipped)"},
    {"skipped", "elements skipped as out of range (check_bounds=True)"},
    {NULL, NULL}};
static PyStructSequence_Desc opresult_desc = {
    "tileatom.OpResult", "What an atomic op did when it returns no old values.", opresult_fields,
    2};

/* What a collected pipelined response turns into. */
enum result_kind {
	RESULT_NONE = 0,   /* None (write, ping, destroy) */
	RESULT_COUNTS = 1, /* OpResult(applied, skipped) */
	RESULT_OUT = 2,    /* the numpy array given at submit, filled from the response */
	RESULT_SCALAR = 3, /* one element of the response's dtype as a numpy scalar */
	RESULT_SINGLE = 16 /* flag: a single-element op, whose skipped element is an error */
};

/* One submitted request whose response is not collected yet. */
typedef struct pending_entry {
	int kind;       /* enum result_kind */
	PyObject *out;  /* RESULT_OUT: the array to fill (owned reference); else NULL */
	int64_t index;  /* RESULT_SINGLE: the flat index (for the error message) */
	PyObject *keep; /* the operands of a request with device memory, which the daemon reads
	                   after the submit returns: held until the response (owned); or NULL */
} pending_entry;

/* A connection (tileatom._core.Conn). */
typedef struct ConnObject {
	PyObject_HEAD tileatom_client *client; /* the handle; NULL once closed */
	pthread_mutex_t lock; /* serialises calls on the handle (a mutex: its uncontended
	                         trylock reads no clock, unlike PyThread_acquire_lock) */
	int lock_ready;       /* lock was initialised */
	int closing;          /* close() was called while shared buffers were alive */
	Py_ssize_t buffers;   /* live SharedBuffer objects over this connection */
	pending_entry *queue; /* submitted requests in order (a ring) */
	size_t qcap;          /* ring capacity (a power of two) */
	size_t qhead;         /* index of the oldest entry */
	size_t qlen;          /* entries in the ring */
	unsigned unflushed;   /* requests submitted since the last write-out */
	size_t device_min;    /* the smallest device array passed on this connection, in bytes
	                         (SIZE_MAX before one is): the library asks the driver about
	                         every operand of at least that size */
	PyObject *aside;      /* results collected ahead of collect(), which returns them
	                         first (a list), or NULL */
} ConnObject;

/* Pipelined requests after which a submit writes the buffered ones out (tileatom_flush), so
 * that the daemon works on them while Python queues more, instead of waiting for the
 * library's 64 KiB batch or the collect: one send() per this many small requests. */
#define TA_PY_FLUSH_EVERY 256

/* A registered shared buffer (tileatom._core.SharedBuffer); exposes its bytes through the
 * buffer protocol. */
typedef struct SharedBufferObject {
	PyObject_HEAD ConnObject *conn; /* the connection it is registered on (owned) */
	tileatom_buffer *buffer;        /* the library's buffer; NULL once freed */
	void *data;                     /* its memory in this process */
	size_t size;                    /* its size in bytes */
	Py_ssize_t exports;             /* buffer-protocol views alive */
} SharedBufferObject;

static PyTypeObject ConnType;
static PyTypeObject SharedBufferType;

/* ---- errors ------------------------------------------------------------------------------ */

/* Builds the exception instance for a status and message (a new reference). */
static PyObject *make_error(int code, const char *message)
{
	PyObject *cls = NULL;
	if (error_classes) {
		PyObject *key = PyLong_FromLong(code);
		if (!key)
			return NULL;
		cls = PyDict_GetItemWithError(error_classes, key);
		Py_DECREF(key);
		if (!cls && PyErr_Occurred())
			return NULL;
	}
	if (!cls)
		cls = error_base ? error_base : PyExc_RuntimeError;
	return PyObject_CallFunction(cls, "si",
	                             message && *message ? message : tileatom_strerror(code), code);
}

/* Raises the exception of a failed library call; returns NULL for the caller to return. */
static PyObject *raise_status(int code, const tileatom_error *err)
{
	PyObject *exc = make_error(code, err ? err->message : NULL);
	if (exc) {
		PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/* ---- the connection lock ----------------------------------------------------------------- */

/* Takes the connection's lock, waiting without the GIL when another thread holds it. */
static void conn_lock(ConnObject *self)
{
	if (pthread_mutex_trylock(&self->lock) != 0) {
		{
			PyThreadState *unlocked = PyEval_SaveThread();
			/* a default mutex taken by this thread's own code only: cannot fail */
			(void)pthread_mutex_lock(&self->lock);
			PyEval_RestoreThread(unlocked);
		}
	}
}

/* Takes the connection's lock and checks that the handle is open; returns 0, or -1 with an
 * exception set (lock not held). */
static int conn_enter(ConnObject *self)
{
	conn_lock(self);
	if (!self->client || self->closing) {
		pthread_mutex_unlock(&self->lock);
		tileatom_error err = {TILEATOM_E_STATE, "the connection is closed"};
		raise_status(TILEATOM_E_STATE, &err);
		return -1;
	}
	return 0;
}

/* After device arrays of bytes or more were passed (lock held): from now on the library asks
 * the CUDA driver about every operand of this connection of at least the smallest device
 * array's size (a smaller device array outside the allocations seen before would be read as
 * host memory), and about no smaller one: the host scalars beside large device keys cost no
 * driver call. */
static void conn_device_ptrs(ConnObject *self, size_t bytes)
{
	if (bytes < 1)
		bytes = 1;
	if (bytes < self->device_min) {
		tileatom_set_device_ptr_threshold(self->client, bytes);
		self->device_min = bytes;
	}
}

/* Releases the connection's lock. */
static void conn_leave(ConnObject *self)
{
	pthread_mutex_unlock(&self->lock);
}

/* ---- argument conversion ----------------------------------------------------------------- */

/* The tileatom dtype of a numpy type number (uint16 and int16 carry bfloat16 bits, uint8
 * and int8 mask bytes); TILEATOM_DTYPE_NONE when there is none. */
static tileatom_dtype dtype_of_typenum(int typenum)
{
	switch (typenum) {
	case NPY_INT32:
		return TILEATOM_INT32;
	case NPY_UINT32:
		return TILEATOM_UINT32;
	case NPY_INT64:
		return TILEATOM_INT64;
	case NPY_UINT64:
		return TILEATOM_UINT64;
	case NPY_FLOAT32:
		return TILEATOM_FLOAT32;
	case NPY_FLOAT64:
		return TILEATOM_FLOAT64;
	case NPY_HALF:
		return TILEATOM_FLOAT16;
	case NPY_UINT16:
	case NPY_INT16:
		return TILEATOM_BFLOAT16;
	case NPY_BOOL:
	case NPY_UINT8:
	case NPY_INT8:
		return TILEATOM_BOOL;
	default:
		/* long vs long long: the same C type under another number */
		if (typenum == NPY_LONG || typenum == NPY_LONGLONG)
			return TILEATOM_INT64;
		if (typenum == NPY_ULONG || typenum == NPY_ULONGLONG)
			return TILEATOM_UINT64;
		return TILEATOM_DTYPE_NONE;
	}
}

/* The numpy type number that holds elements of a tileatom dtype (bfloat16: uint16 bits). */
static int typenum_of_dtype(tileatom_dtype dtype)
{
	static const int map[] = {NPY_NOTYPE,  NPY_INT32,   NPY_UINT32, NPY_INT64,  NPY_UINT64,
	                          NPY_FLOAT32, NPY_FLOAT64, NPY_HALF,   NPY_UINT16, NPY_BOOL};
	return (unsigned)dtype < sizeof(map) / sizeof(map[0]) ? map[dtype] : NPY_NOTYPE;
}

/* Fills *out from an operand: a numpy array (C-contiguous, aligned, native order, rank <=
 * 4) or a device array (ptr, dtype code, shape tuple[, owner]). The array object must outlive the
 * use of *out. Returns 0 or -1 with an exception set; what names the operand in messages. */
static int to_array(PyObject *obj, tileatom_array *out, const char *what)
{
	memset(out, 0, sizeof(*out));
	if (PyArray_Check(obj)) {
		PyArrayObject *a = (PyArrayObject *)obj;
		int flags = PyArray_FLAGS(a);
		if (!(flags & NPY_ARRAY_C_CONTIGUOUS) || !(flags & NPY_ARRAY_ALIGNED) ||
		    !PyArray_ISNOTSWAPPED(a)) {
			PyErr_Format(
			    PyExc_ValueError,
			    "%s must be a C-contiguous, aligned array in native byte order", what);
			return -1;
		}
		if (PyArray_NDIM(a) > TILEATOM_MAX_RANK) {
			PyErr_Format(PyExc_ValueError, "%s has rank %d; tileatom allows at most %d",
			             what, PyArray_NDIM(a), TILEATOM_MAX_RANK);
			return -1;
		}
		out->dtype = dtype_of_typenum(PyArray_TYPE(a));
		if (out->dtype == TILEATOM_DTYPE_NONE) {
			PyErr_Format(PyExc_TypeError, "%s has a dtype tileatom does not have",
			             what);
			return -1;
		}
		out->rank = PyArray_NDIM(a);
		for (int i = 0; i < out->rank; i++)
			out->shape[i] = (int64_t)PyArray_DIM(a, i);
		out->data = PyArray_DATA(a);
		return 0;
	}
	if (PyTuple_Check(obj) && (PyTuple_GET_SIZE(obj) == 3 || PyTuple_GET_SIZE(obj) == 4)) {
		unsigned long long ptr = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(obj, 0));
		long code = PyLong_AsLong(PyTuple_GET_ITEM(obj, 1));
		PyObject *shape = PyTuple_GET_ITEM(obj, 2);
		if (PyErr_Occurred())
			return -1;
		if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > TILEATOM_MAX_RANK ||
		    tileatom_dtype_size((tileatom_dtype)code) == 0) {
			PyErr_Format(PyExc_ValueError, "%s: a bad device array description", what);
			return -1;
		}
		out->dtype = (tileatom_dtype)code;
		out->rank = (int)PyTuple_GET_SIZE(shape);
		for (int i = 0; i < out->rank; i++) {
			out->shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
			if (out->shape[i] < 0 && PyErr_Occurred())
				return -1;
		}
		out->data = (const void *)(uintptr_t)ptr;
		return 0;
	}
	PyErr_Format(PyExc_TypeError, "%s must be a numpy array (got %.100s)", what,
	             Py_TYPE(obj)->tp_name);
	return -1;
}

/* Whether obj is a device array tuple (ptr, code, shape[, owner]) or a tuple of index
 * arrays holding one. */
static int holds_device(PyObject *obj)
{
	if (!PyTuple_Check(obj))
		return 0;
	Py_ssize_t n = PyTuple_GET_SIZE(obj);
	if ((n == 3 || n == 4) && PyLong_Check(PyTuple_GET_ITEM(obj, 0)))
		return 1;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *item = PyTuple_GET_ITEM(obj, i);
		if (PyTuple_Check(item) && holds_device(item))
			return 1;
	}
	return 0;
}

/* min, lowered to the bytes of a when obj (its source) is a device array. */
static size_t device_bytes_min(PyObject *obj, const tileatom_array *a, size_t min)
{
	if (!holds_device(obj))
		return min;
	size_t bytes = tileatom_array_bytes(a);
	return bytes < min ? bytes : min;
}

/* Fills *out from an integer sequence of at most TILEATOM_MAX_RANK entries; returns the
 * count or -1 with an exception set. */
static int to_dims(PyObject *seq, int64_t *out, const char *what)
{
	PyObject *fast = PySequence_Fast(seq, what);
	if (!fast)
		return -1;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
	if (n > TILEATOM_MAX_RANK) {
		Py_DECREF(fast);
		PyErr_Format(PyExc_ValueError, "%s has %zd entries; at most %d", what, n,
		             TILEATOM_MAX_RANK);
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
		if (out[i] == -1 && PyErr_Occurred()) {
			Py_DECREF(fast);
			return -1;
		}
	}
	Py_DECREF(fast);
	return (int)n;
}

/* Fills *out from None (returns 0: no region) or (origin, shape) (returns 1); -1 on error. */
static int to_region(PyObject *obj, tileatom_region *out)
{
	if (obj == Py_None)
		return 0;
	if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2) {
		PyErr_SetString(PyExc_TypeError, "region must be None or (origin, shape)");
		return -1;
	}
	memset(out, 0, sizeof(*out));
	int r0 = to_dims(PyTuple_GET_ITEM(obj, 0), out->origin, "region origin");
	if (r0 < 0)
		return -1;
	int r1 = to_dims(PyTuple_GET_ITEM(obj, 1), out->shape, "region shape");
	if (r1 < 0)
		return -1;
	if (r0 != r1) {
		PyErr_SetString(PyExc_ValueError, "region origin and shape differ in rank");
		return -1;
	}
	out->rank = r0;
	return 1;
}

/* The interned default names ("relaxed", "gpu", "global": code 0 each), which the Python
 * layer's keyword defaults pass as these very objects. */
static PyObject *default_names[3];

/* Parses sem/scope/space given as an int code or a name; returns the code or -1. */
static int to_enum(PyObject *obj, int (*parse)(const char *), const char *what)
{
	for (int i = 0; i < 3; i++)
		if (obj == default_names[i])
			return 0;
	if (PyLong_Check(obj))
		return (int)PyLong_AsLong(obj);
	if (PyUnicode_Check(obj)) {
		const char *s = PyUnicode_AsUTF8(obj);
		if (!s)
			return -1;
		int v = parse(s);
		if (v < 0)
			PyErr_Format(PyExc_ValueError, "unknown %s '%s'", what, s);
		return v;
	}
	PyErr_Format(PyExc_TypeError, "%s must be a name or a code", what);
	return -1;
}

/* Fills opts from the common option arguments; returns 0 or -1 with an exception set. */
static int to_options(tileatom_op_options *opts, PyObject *sem, PyObject *scope, PyObject *space,
                      int check_bounds, int want_old)
{
	tileatom_op_options_init(opts);
	int s = to_enum(sem, tileatom_sem_parse, "sem");
	if (s < 0)
		return -1;
	int c = to_enum(scope, tileatom_scope_parse, "scope");
	if (c < 0)
		return -1;
	int p = to_enum(space, tileatom_space_parse, "space");
	if (p < 0)
		return -1;
	opts->sem = (tileatom_sem)s;
	opts->scope = (tileatom_scope)c;
	opts->space = (tileatom_space)p;
	opts->check_bounds = check_bounds != 0;
	opts->want_old = want_old != 0;
	return 0;
}

/* Rounds a double to bfloat16 bits (via binary32, nearest-even; NaN stays NaN). */
static uint16_t bfloat16_bits(double d)
{
	float f = (float)d;
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* Packs one Python scalar as an element of dtype into out (8 bytes of room). Integers go
 * to integer tiles with range checks; a float into an integer tile is a TypeError (torch's
 * rule: no silent truncation). Returns 0 or -1 with an exception set. */
static int pack_value(PyObject *v, tileatom_dtype dtype, unsigned char *out)
{
	if (tileatom_dtype_is_int(dtype)) {
		if (!PyLong_Check(v) && !PyIndex_Check(v)) {
			PyErr_Format(PyExc_TypeError, "a %s tile takes integer values, not %.100s",
			             tileatom_dtype_name(dtype), Py_TYPE(v)->tp_name);
			return -1;
		}
		PyObject *n = PyLong_CheckExact(v) ? Py_NewRef(v) : PyNumber_Index(v);
		if (!n)
			return -1;
		int overflow = 0;
		long long s = PyLong_AsLongLongAndOverflow(n, &overflow);
		unsigned long long u = 0;
		if (overflow > 0) {
			u = PyLong_AsUnsignedLongLong(n);
			if (u == (unsigned long long)-1 && PyErr_Occurred()) {
				PyErr_Clear();
				overflow = 2;
			}
		}
		Py_DECREF(n);
		if (s == -1 && PyErr_Occurred())
			return -1;
		int ok;
		switch (dtype) {
		case TILEATOM_INT32:
			ok = !overflow && s >= INT32_MIN && s <= INT32_MAX;
			if (ok) {
				int32_t x = (int32_t)s;
				memcpy(out, &x, 4);
			}
			break;
		case TILEATOM_UINT32:
			ok = !overflow && s >= 0 && s <= (long long)UINT32_MAX;
			if (ok) {
				uint32_t x = (uint32_t)s;
				memcpy(out, &x, 4);
			}
			break;
		case TILEATOM_INT64:
			ok = !overflow;
			if (ok)
				memcpy(out, &s, 8);
			break;
		default: /* UINT64 */
			ok = overflow == 1 || (!overflow && s >= 0);
			if (ok) {
				uint64_t x = overflow ? u : (uint64_t)s;
				memcpy(out, &x, 8);
			}
			break;
		}
		if (!ok) {
			PyErr_Format(PyExc_OverflowError, "value out of range for a %s tile",
			             tileatom_dtype_name(dtype));
			return -1;
		}
		return 0;
	}
	double d = PyFloat_AsDouble(v);
	if (d == -1.0 && PyErr_Occurred())
		return -1;
	switch (dtype) {
	case TILEATOM_FLOAT32: {
		float f = (float)d;
		memcpy(out, &f, 4);
		return 0;
	}
	case TILEATOM_FLOAT64:
		memcpy(out, &d, 8);
		return 0;
	case TILEATOM_FLOAT16:
		return PyFloat_Pack2(d, (char *)out, 1);
	case TILEATOM_BFLOAT16: {
		uint16_t b = bfloat16_bits(d);
		memcpy(out, &b, 2);
		return 0;
	}
	default:
		PyErr_Format(PyExc_ValueError, "bad tile dtype code %d", (int)dtype);
		return -1;
	}
}

/* One element of dtype at data as a numpy scalar (a new reference). */
static PyObject *scalar_of(tileatom_dtype dtype, const void *data)
{
	int typenum = typenum_of_dtype(dtype);
	if (typenum == NPY_NOTYPE) {
		PyErr_Format(PyExc_ValueError, "response of unknown dtype %d", (int)dtype);
		return NULL;
	}
	PyArray_Descr *descr = PyArray_DescrFromType(typenum);
	if (!descr)
		return NULL;
	PyObject *r = PyArray_Scalar((void *)data, descr, NULL);
	Py_DECREF(descr);
	return r;
}

/* An OpResult(applied, skipped). */
static PyObject *counts_of(uint64_t applied, uint64_t skipped)
{
	PyObject *r = PyStructSequence_New(&OpResultType);
	if (!r)
		return NULL;
	PyObject *a = PyLong_FromUnsignedLongLong(applied);
	PyObject *s = PyLong_FromUnsignedLongLong(skipped);
	if (!a || !s) {
		Py_XDECREF(a);
		Py_XDECREF(s);
		Py_DECREF(r);
		return NULL;
	}
	PyStructSequence_SET_ITEM(r, 0, a);
	PyStructSequence_SET_ITEM(r, 1, s);
	return r;
}

/* ---- the pending queue ------------------------------------------------------------------- */

/* Appends an entry (steals out); returns 0 or -1 with MemoryError set (out released). */
static int queue_push(ConnObject *self, int kind, PyObject *out)
{
	if (self->qlen == self->qcap) {
		size_t ncap = self->qcap ? self->qcap * 2 : 64;
		pending_entry *nq = PyMem_Malloc(ncap * sizeof(*nq));
		if (!nq) {
			Py_XDECREF(out);
			PyErr_NoMemory();
			return -1;
		}
		for (size_t i = 0; i < self->qlen; i++)
			nq[i] = self->queue[(self->qhead + i) & (self->qcap - 1)];
		PyMem_Free(self->queue);
		self->queue = nq;
		self->qcap = ncap;
		self->qhead = 0;
	}
	pending_entry *e = &self->queue[(self->qhead + self->qlen) & (self->qcap - 1)];
	e->kind = kind;
	e->out = out;
	e->index = 0;
	e->keep = NULL;
	self->qlen++;
	return 0;
}

/* Removes the oldest entry into *e (the caller owns e->out). */
static void queue_pop(ConnObject *self, pending_entry *e)
{
	*e = self->queue[self->qhead];
	self->qhead = (self->qhead + 1) & (self->qcap - 1);
	self->qlen--;
}

/* The newest entry (the one just pushed). */
static pending_entry *queue_newest(ConnObject *self)
{
	return &self->queue[(self->qhead + self->qlen - 1) & (self->qcap - 1)];
}

/* Drops the newest entry, whose submit the library refused (nothing of it was queued). */
static void queue_drop_newest(ConnObject *self)
{
	pending_entry *e = queue_newest(self);
	Py_XDECREF(e->out);
	Py_XDECREF(e->keep);
	self->qlen--;
}

static int set_aside_locked(ConnObject *self, Py_ssize_t n);

/* After a submit the library refused with status st (its entry dropped; lock and GIL held):
 * 1 when it is to be sent again, the older responses set aside first, which happens once
 * and only for TILEATOM_E_STATE while some are pending (a device allocation new to the
 * connection is registered by a synchronous call); 0 when not; -1 with an exception set. */
static int submit_again(ConnObject *self, int st, int retried, tileatom_error *err)
{
	if (st != TILEATOM_E_STATE || retried || self->qlen == 0)
		return 0;
	if (set_aside_locked(self, (Py_ssize_t)self->qlen) < 0)
		return -1;
	*err = (tileatom_error){0, ""};
	return 1;
}

/* Drops every entry (after the connection broke or closed). */
static void queue_clear(ConnObject *self)
{
	while (self->qlen) {
		pending_entry e;
		queue_pop(self, &e);
		Py_XDECREF(e.out);
		Py_XDECREF(e.keep);
	}
}

/* Counts one submitted request and writes the buffered ones out every TA_PY_FLUSH_EVERY;
 * call with the lock held and the GIL taken. Returns the library's status. */
static int conn_count_submit(ConnObject *self, tileatom_error *err)
{
	if (++self->unflushed < TA_PY_FLUSH_EVERY)
		return TILEATOM_OK;
	self->unflushed = 0;
	int st;
	{
		PyThreadState *unlocked = PyEval_SaveThread();
		st = tileatom_flush(self->client, err);
		PyEval_RestoreThread(unlocked);
	}
	return st;
}

/* ---- Conn: life cycle -------------------------------------------------------------------- */

static int Conn_init(ConnObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"address", "timeout_ms", "io_timeout_ms", "auth_file", NULL};
	const char *address = NULL, *auth_file = NULL;
	int timeout_ms = 0, io_timeout_ms = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "|ziiz", kwlist, &address, &timeout_ms,
	                                 &io_timeout_ms, &auth_file))
		return -1;
	if (self->client) {
		PyErr_SetString(PyExc_RuntimeError, "Conn is already connected");
		return -1;
	}
	tileatom_connect_options opts;
	tileatom_connect_options_init(&opts);
	opts.timeout_ms = timeout_ms;
	if (auth_file)
		opts.auth_file = auth_file;
	tileatom_error err = {0, ""};
	tileatom_client *client = NULL;
	int st;
	{
		PyThreadState *unlocked = PyEval_SaveThread();
		st = tileatom_connect_opts(address, &opts, &client, &err);
		PyEval_RestoreThread(unlocked);
	}
	if (st != TILEATOM_OK) {
		raise_status(st, &err);
		return -1;
	}
	tileatom_set_timeout(client, io_timeout_ms);
	self->client = client;
	return 0;
}

static PyObject *Conn_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
	(void)args;
	(void)kwds;
	ConnObject *self = (ConnObject *)type->tp_alloc(type, 0);
	if (!self)
		return NULL;
	int rc = pthread_mutex_init(&self->lock, NULL);
	if (rc != 0) {
		Py_DECREF(self);
		errno = rc;
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	self->lock_ready = 1;
	self->device_min = SIZE_MAX;
	return (PyObject *)self;
}

/* Closes the handle now (no shared buffer alive any more). */
static void conn_really_close(ConnObject *self)
{
	if (self->client) {
		tileatom_client *c = self->client;
		self->client = NULL;
		{
			PyThreadState *unlocked = PyEval_SaveThread();
			tileatom_close(c);
			PyEval_RestoreThread(unlocked);
		}
	}
	queue_clear(self);
	Py_CLEAR(self->aside);
}

static void Conn_dealloc(ConnObject *self)
{
	conn_really_close(self);
	PyMem_Free(self->queue);
	if (self->lock_ready)
		pthread_mutex_destroy(&self->lock);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(Conn_close_doc, "close()\n--\n\nCloses the connection (idempotent). Uncollected "
                             "responses are discarded. While shared arrays of this connection "
                             "are alive, the socket stays open until the last one is freed, "
                             "but no call is accepted any more.");
static PyObject *Conn_close(ConnObject *self, PyObject *unused)
{
	(void)unused;
	conn_lock(self);
	if (self->buffers > 0)
		self->closing = 1;
	else
		conn_really_close(self);
	pthread_mutex_unlock(&self->lock);
	Py_RETURN_NONE;
}

/* ---- Conn: properties -------------------------------------------------------------------- */

static PyObject *Conn_get_closed(ConnObject *self, void *closure)
{
	(void)closure;
	return PyBool_FromLong(!self->client || self->closing);
}

/* A string property of the handshake; raises when closed. */
static PyObject *conn_string(ConnObject *self, const char *(*get)(const tileatom_client *))
{
	if (conn_enter(self) < 0)
		return NULL;
	PyObject *r = PyUnicode_FromString(get(self->client));
	conn_leave(self);
	return r;
}

static PyObject *Conn_get_server_version(ConnObject *self, void *closure)
{
	(void)closure;
	return conn_string(self, tileatom_server_version);
}

static PyObject *Conn_get_backend(ConnObject *self, void *closure)
{
	(void)closure;
	return conn_string(self, tileatom_server_backend);
}

static PyObject *Conn_get_address(ConnObject *self, void *closure)
{
	(void)closure;
	return conn_string(self, tileatom_address);
}

static PyObject *Conn_get_max_frame(ConnObject *self, void *closure)
{
	(void)closure;
	if (conn_enter(self) < 0)
		return NULL;
	uint32_t v = tileatom_server_max_frame(self->client);
	conn_leave(self);
	return PyLong_FromUnsignedLong(v);
}

static PyObject *Conn_get_pending(ConnObject *self, void *closure)
{
	(void)closure;
	return PyLong_FromSize_t(self->qlen);
}

static PyObject *Conn_get_aside(ConnObject *self, void *closure)
{
	(void)closure;
	return PyLong_FromSsize_t(self->aside ? PyList_GET_SIZE(self->aside) : 0);
}

static PyGetSetDef Conn_getset[] = {
    {"closed", (getter)Conn_get_closed, NULL, "True once close() was called.", NULL},
    {"server_version", (getter)Conn_get_server_version, NULL, "The daemon's version.", NULL},
    {"backend", (getter)Conn_get_backend, NULL, "The daemon's backend: 'cpu' or 'cuda'.", NULL},
    {"address", (getter)Conn_get_address, NULL, "The address connected to.", NULL},
    {"max_frame", (getter)Conn_get_max_frame, NULL, "The daemon's frame limit in bytes.", NULL},
    {"pending", (getter)Conn_get_pending, NULL,
     "Submitted requests whose responses are not read yet.", NULL},
    {"aside", (getter)Conn_get_aside, NULL,
     "Results set aside (set_aside()) that collect() has not returned yet.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

/* ---- Conn: tiles ------------------------------------------------------------------------- */

/* (name, dtype code, shape tuple, bytes, private) of a tile. */
static PyObject *info_tuple(const tileatom_tile_info *info)
{
	PyObject *shape = PyTuple_New(info->rank);
	if (!shape)
		return NULL;
	for (int i = 0; i < info->rank; i++) {
		PyObject *d = PyLong_FromLongLong(info->shape[i]);
		if (!d) {
			Py_DECREF(shape);
			return NULL;
		}
		PyTuple_SET_ITEM(shape, i, d);
	}
	return Py_BuildValue("(siNKO)", info->name, (int)info->dtype, shape,
	                     (unsigned long long)info->bytes,
	                     info->private_tile ? Py_True : Py_False);
}

PyDoc_STRVAR(Conn_create_doc, "create(name, dtype_code, shape, fill, flags) -> info tuple");
static PyObject *Conn_create(ConnObject *self, PyObject *args)
{
	const char *name;
	int dtype, flags;
	PyObject *shape_obj, *fill_obj;
	if (!PyArg_ParseTuple(args, "siOOi", &name, &dtype, &shape_obj, &fill_obj, &flags))
		return NULL;
	int64_t shape[TILEATOM_MAX_RANK];
	int rank = to_dims(shape_obj, shape, "shape");
	if (rank < 0)
		return NULL;
	tileatom_array fill;
	if (fill_obj != Py_None && to_array(fill_obj, &fill, "fill") < 0)
		return NULL;
	if (conn_enter(self) < 0)
		return NULL;
	tileatom_tile_info info;
	tileatom_error err = {0, ""};
	int st;
	{
		PyThreadState *unlocked = PyEval_SaveThread();
		st = tileatom_create_ex(self->client, name, (tileatom_dtype)dtype, rank, shape,
		                        fill_obj == Py_None ? NULL : fill.data, (unsigned)flags,
		                        &info, &err);
		PyEval_RestoreThread(unlocked);
	}
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	return info_tuple(&info);
}

PyDoc_STRVAR(Conn_describe_doc, "describe(name) -> info tuple");
static PyObject *Conn_describe(ConnObject *self, PyObject *arg)
{
	const char *name = PyUnicode_AsUTF8(arg);
	if (!name)
		return NULL;
	if (conn_enter(self) < 0)
		return NULL;
	tileatom_tile_info info;
	tileatom_error err = {0, ""};
	int st;
	{
		PyThreadState *unlocked = PyEval_SaveThread();
		st = tileatom_describe(self->client, name, &info, &err);
		PyEval_RestoreThread(unlocked);
	}
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	return info_tuple(&info);
}

PyDoc_STRVAR(Conn_destroy_doc, "destroy(name)");
static PyObject *Conn_destroy(ConnObject *self, PyObject *arg)
{
	const char *name = PyUnicode_AsUTF8(arg);
	if (!name)
		return NULL;
	if (conn_enter(self) < 0)
		return NULL;
	tileatom_error err = {0, ""};
	int st;
	{
		PyThreadState *unlocked = PyEval_SaveThread();
		st = tileatom_destroy(self->client, name, &err);
		PyEval_RestoreThread(unlocked);
	}
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(Conn_list_doc, "list() -> list of info tuples");
static PyObject *Conn_list(ConnObject *self, PyObject *unused)
{
	(void)unused;
	if (conn_enter(self) < 0)
		return NULL;
	tileatom_tile_info *tiles = NULL;
	size_t n = 0;
	tileatom_error err = {0, ""};
	int st;
	{
		PyThreadState *unlocked = PyEval_SaveThread();
		st = tileatom_list(self->client, &tiles, &n, &err);
		PyEval_RestoreThread(unlocked);
	}
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	PyObject *list = PyList_New((Py_ssize_t)n);
	for (size_t i = 0; list && i < n; i++) {
		PyObject *t = info_tuple(&tiles[i]);
		if (!t) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, t);
	}
	tileatom_free(tiles);
	return list;
}

PyDoc_STRVAR(Conn_ping_doc, "ping()");
static PyObject *Conn_ping(ConnObject *self, PyObject *unused)
{
	(void)unused;
	if (conn_enter(self) < 0)
		return NULL;
	tileatom_error err = {0, ""};
	int st;
	{
		PyThreadState *unlocked = PyEval_SaveThread();
		st = tileatom_ping(self->client, &err);
		PyEval_RestoreThread(unlocked);
	}
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(Conn_stats_doc, "stats() -> dict");
static PyObject *Conn_stats(ConnObject *self, PyObject *unused)
{
	(void)unused;
	if (conn_enter(self) < 0)
		return NULL;
	tileatom_stats_info s;
	tileatom_error err = {0, ""};
	int st;
	{
		PyThreadState *unlocked = PyEval_SaveThread();
		st = tileatom_stats(self->client, &s, &err);
		PyEval_RestoreThread(unlocked);
	}
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	return Py_BuildValue(
	    "{s:s,s:s,s:K,s:s,s:I,s:K,s:K,s:K,s:I,s:K}", "backend", s.backend, "device", s.device,
	    "device_memory", (unsigned long long)s.device_memory, "compute_capability",
	    s.compute_capability, "tiles", (unsigned)s.tiles, "tile_bytes",
	    (unsigned long long)s.tile_bytes, "requests", (unsigned long long)s.requests, "errors",
	    (unsigned long long)s.errors, "connections", (unsigned)s.connections, "elements",
	    (unsigned long long)s.elements);
}

/* ---- Conn: data -------------------------------------------------------------------------- */

/* The writable bytes of an output array (host numpy array or device tuple); returns 0 or -1
 * with an exception set. */
static int out_bytes(PyObject *out, void **data, size_t *size, const char *what)
{
	tileatom_array a;
	if (to_array(out, &a, what) < 0)
		return -1;
	if (PyArray_Check(out) && !PyArray_ISWRITEABLE((PyArrayObject *)out)) {
		PyErr_Format(PyExc_ValueError, "%s is read-only", what);
		return -1;
	}
	*data = (void *)a.data;
	*size = PyArray_Check(out) ? (size_t)PyArray_NBYTES((PyArrayObject *)out)
	                           : tileatom_array_bytes(&a);
	return 0;
}

PyDoc_STRVAR(Conn_read_doc, "read(name, region, out, submit)");
static PyObject *Conn_read(ConnObject *self, PyObject *args)
{
	const char *name;
	PyObject *region_obj, *out;
	int submit;
	if (!PyArg_ParseTuple(args, "sOOp", &name, &region_obj, &out, &submit))
		return NULL;
	tileatom_region region;
	int has_region = to_region(region_obj, &region);
	if (has_region < 0)
		return NULL;
	void *data;
	size_t size;
	if (out_bytes(out, &data, &size, "out") < 0)
		return NULL;
	if (conn_enter(self) < 0)
		return NULL;
	tileatom_error err = {0, ""};
	int st;
	if (submit) {
		Py_INCREF(out);
		if (queue_push(self, RESULT_OUT, out) < 0) {
			conn_leave(self);
			return NULL;
		}
		{
			PyThreadState *unlocked = PyEval_SaveThread();
			st = tileatom_submit_read(self->client, name, has_region ? &region : NULL,
			                          NULL, &err);
			PyEval_RestoreThread(unlocked);
		}

	} else {
		size_t got = 0;
		{
			PyThreadState *unlocked = PyEval_SaveThread();
			st = tileatom_read(self->client, name, has_region ? &region : NULL, data,
			                   size, &got, &err);
			PyEval_RestoreThread(unlocked);
		}
		if (st == TILEATOM_OK && got != size) {
			st = err.code = TILEATOM_E_PROTOCOL;
			snprintf(err.message, sizeof err.message,
			         "read returned %zu bytes where %zu were expected", got, size);
		}
	}
	if (submit && st != TILEATOM_OK)
		queue_drop_newest(self);
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(Conn_write_doc, "write(name, region, values, submit)");
static PyObject *Conn_write(ConnObject *self, PyObject *args)
{
	const char *name;
	PyObject *region_obj, *values_obj;
	int submit;
	if (!PyArg_ParseTuple(args, "sOOp", &name, &region_obj, &values_obj, &submit))
		return NULL;
	tileatom_region region;
	int has_region = to_region(region_obj, &region);
	if (has_region < 0)
		return NULL;
	tileatom_array values;
	if (to_array(values_obj, &values, "values") < 0)
		return NULL;
	if (conn_enter(self) < 0)
		return NULL;
	int device = holds_device(values_obj);
	if (device)
		conn_device_ptrs(self, tileatom_array_bytes(&values));
	tileatom_error err = {0, ""};
	int st;
	if (submit) {
		/* as Conn.op: device values are read by the daemon after the submit returns (held
		 * until the response), and a submit refused with TILEATOM_E_STATE while older
		 * responses are pending is sent again once they are set aside */
		for (int retried = 0;; retried = 1) {
			if (queue_push(self, RESULT_NONE, NULL) < 0) {
				conn_leave(self);
				return NULL;
			}
			if (device)
				queue_newest(self)->keep = Py_NewRef(values_obj);
			{
				PyThreadState *unlocked = PyEval_SaveThread();
				st = tileatom_submit_write(self->client, name,
				                           has_region ? &region : NULL, &values,
				                           NULL, &err);
				PyEval_RestoreThread(unlocked);
			}
			if (st == TILEATOM_OK)
				break;
			queue_drop_newest(self);
			int again = submit_again(self, st, retried, &err);
			if (again < 0) {
				conn_leave(self);
				return NULL;
			}
			if (!again)
				break;
		}
		if (st == TILEATOM_OK)
			st = conn_count_submit(self, &err);
	} else {
		{
			PyThreadState *unlocked = PyEval_SaveThread();
			st = tileatom_write(self->client, name, has_region ? &region : NULL,
			                    &values, &err);
			PyEval_RestoreThread(unlocked);
		}
	}
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	Py_RETURN_NONE;
}

/* ---- Conn: ops --------------------------------------------------------------------------- */

/* One op request's arguments, converted (Conn.op). */
typedef struct op_call {
	int kind;                        /* the request kind (TILEATOM_REQ_...) */
	const char *name;                /* the tile */
	tileatom_op op;                  /* the atomic op */
	const tileatom_region *reg;      /* the region addressed, or NULL */
	const tileatom_region *window;   /* memory ops: the window (the region) */
	int dim;                         /* scatter: the axis */
	int n_index;                     /* index arrays in indices */
	const tileatom_array *indices;   /* the index arrays */
	int flat;                        /* one index array of flat offsets */
	const tileatom_array *vals;      /* the values, or NULL */
	const tileatom_array *cmp;       /* cas: the expected values, or NULL */
	const tileatom_array *pad;       /* gather: the padding, or NULL */
	const tileatom_addr *addr;       /* memory ops: the addressing */
	const tileatom_op_options *opts; /* sem, scope, space, mask, old values */
	void *out_data;                  /* synchronous memory ops: where values go */
	size_t out_size;                 /* its bytes */
} op_call;

/* Sends request a through the library: submitted (the response collected later) or
 * synchronous (*res filled). Called with the connection's lock held and without the GIL.
 * Returns the library's status. */
static int op_send(tileatom_client *c, const op_call *a, int submit, tileatom_op_result *res,
                   tileatom_error *err)
{
	const char *name = a->name;
	tileatom_op o = a->op;
	const tileatom_region *reg = a->reg, *window = a->window;
	const tileatom_array *indices = a->indices, *vals = a->vals, *cmp = a->cmp;
	const tileatom_op_options *opts = a->opts;
	switch (a->kind) {
	case TILEATOM_REQ_ELEMENTWISE:
		return submit ? tileatom_submit_elementwise(c, name, o, reg, vals, cmp, opts, NULL,
		                                            err)
		              : tileatom_elementwise(c, name, o, reg, vals, cmp, opts, res, err);
	case TILEATOM_REQ_SCATTER:
		return submit ? tileatom_submit_scatter(c, name, o, reg, a->dim, indices, vals,
		                                        opts, NULL, err)
		              : tileatom_scatter(c, name, o, reg, a->dim, indices, vals, opts, res,
		                                 err);
	case TILEATOM_REQ_INDEXED:
		return submit ? tileatom_submit_indexed(c, name, o, reg, a->n_index, indices,
		                                        a->flat != 0, vals, cmp, opts, NULL, err)
		              : tileatom_indexed(c, name, o, reg, a->n_index, indices, a->flat != 0,
		                                 vals, cmp, opts, res, err);
	case TILEATOM_REQ_GATHER:
		return submit ? tileatom_submit_gather(c, name, window, a->addr, a->pad, opts, NULL,
		                                       err)
		              : tileatom_gather(c, name, window, a->addr, a->pad, opts, a->out_data,
		                                a->out_size, res, err);
	case TILEATOM_REQ_SCATTER_STORE:
		return submit
		           ? tileatom_submit_scatter_store(c, name, window, a->addr, vals, opts,
		                                           NULL, err)
		           : tileatom_scatter_store(c, name, window, a->addr, vals, opts, res, err);
	case TILEATOM_REQ_ATOMIC_LOAD:
		return submit
		           ? tileatom_submit_atomic_load(c, name, window, a->addr, opts, NULL, err)
		           : tileatom_atomic_load(c, name, window, a->addr, opts, a->out_data,
		                                  a->out_size, res, err);
	case TILEATOM_REQ_ATOMIC_STORE:
		return submit
		           ? tileatom_submit_atomic_store(c, name, window, a->addr, vals, opts,
		                                          NULL, err)
		           : tileatom_atomic_store(c, name, window, a->addr, vals, opts, res, err);
	default:
		err->code = TILEATOM_E_INVALID_ARGUMENT;
		snprintf(err->message, sizeof err->message, "unknown request kind %d", a->kind);
		return TILEATOM_E_INVALID_ARGUMENT;
	}
}

PyDoc_STRVAR(Conn_op_doc,
             "op(kind, name, op, region, dim, indices, flat, values, compare, padding, mask, "
             "sem, scope, space, check_bounds, want_old, out, submit)\n--\n\n"
             "One atomic or memory request. kind is the request kind (10 elementwise, 11 "
             "scatter, 12 indexed, 13 gather, 14 scatter store, 15 atomic load, 16 atomic "
             "store); indices None (region addressing) or a tuple of index arrays; out the "
             "array receiving old/loaded values (or None). Synchronous: returns "
             "OpResult(applied, skipped). Submitted: returns None; the collected result is out "
             "when given, else the OpResult.");
static PyObject *Conn_op(ConnObject *self, PyObject *args)
{
	int kind, op, dim, flat, check_bounds, want_old, submit;
	const char *name;
	PyObject *region_obj, *indices_obj, *values_obj, *compare_obj, *padding_obj, *mask_obj;
	PyObject *sem, *scope, *space, *out;
	if (!PyArg_ParseTuple(args, "isiOiOpOOOOOOOppOp", &kind, &name, &op, &region_obj, &dim,
	                      &indices_obj, &flat, &values_obj, &compare_obj, &padding_obj,
	                      &mask_obj, &sem, &scope, &space, &check_bounds, &want_old, &out,
	                      &submit))
		return NULL;
	tileatom_region region;
	int has_region = to_region(region_obj, &region);
	if (has_region < 0)
		return NULL;
	tileatom_array indices[TILEATOM_MAX_RANK];
	int n_index = 0;
	if (indices_obj != Py_None) {
		if (!PyTuple_Check(indices_obj) || PyTuple_GET_SIZE(indices_obj) < 1 ||
		    PyTuple_GET_SIZE(indices_obj) > TILEATOM_MAX_RANK) {
			PyErr_SetString(PyExc_ValueError,
			                "indices must be a tuple of 1 to 4 arrays");
			return NULL;
		}
		n_index = (int)PyTuple_GET_SIZE(indices_obj);
		for (int i = 0; i < n_index; i++)
			if (to_array(PyTuple_GET_ITEM(indices_obj, i), &indices[i], "index") < 0)
				return NULL;
	}
	tileatom_array values, compare, padding, mask;
	if (values_obj != Py_None && to_array(values_obj, &values, "values") < 0)
		return NULL;
	if (compare_obj != Py_None && to_array(compare_obj, &compare, "expected") < 0)
		return NULL;
	if (padding_obj != Py_None && to_array(padding_obj, &padding, "padding") < 0)
		return NULL;
	if (mask_obj != Py_None && to_array(mask_obj, &mask, "mask") < 0)
		return NULL;
	tileatom_op_options opts;
	if (to_options(&opts, sem, scope, space, check_bounds, want_old) < 0)
		return NULL;
	if (mask_obj != Py_None)
		opts.mask = &mask;
	void *out_data = NULL;
	size_t out_size = 0;
	if (out != Py_None && out_bytes(out, &out_data, &out_size, "out") < 0)
		return NULL;
	opts.old_out = out_data;
	opts.old_out_size = out_size;
	const tileatom_region *reg = has_region ? &region : NULL;
	tileatom_addr addr = {TILEATOM_ADDR_REGION, reg, dim, n_index, indices};
	if (n_index > 0)
		addr.kind = dim >= 0 ? TILEATOM_ADDR_SCATTER
		                     : (flat ? TILEATOM_ADDR_FLAT : TILEATOM_ADDR_INDEXED);
	const tileatom_array *vals = values_obj == Py_None ? NULL : &values;
	const tileatom_array *cmp = compare_obj == Py_None ? NULL : &compare;
	const tileatom_array *pad = padding_obj == Py_None ? NULL : &padding;
	/* memory ops: the window is the region; the addressing carries indices only */
	const tileatom_region *window = reg;
	if (kind >= TILEATOM_REQ_GATHER)
		addr.region = NULL;

	int device = holds_device(indices_obj) || holds_device(values_obj) ||
	             holds_device(compare_obj) || holds_device(padding_obj) ||
	             holds_device(mask_obj) || holds_device(out);
	/* a pipelined request's device operands (and the objects that own their memory) must
	 * outlive the submit: the daemon reads them before it answers */
	PyObject *keep = NULL;
	if (submit && device &&
	    !(keep = PyTuple_Pack(4, indices_obj, values_obj, compare_obj, mask_obj)))
		return NULL;
	if (conn_enter(self) < 0) {
		Py_XDECREF(keep);
		return NULL;
	}
	if (device) {
		size_t dmin = SIZE_MAX;
		for (int i = 0; i < n_index; i++)
			dmin =
			    device_bytes_min(PyTuple_GET_ITEM(indices_obj, i), &indices[i], dmin);
		dmin = device_bytes_min(values_obj, &values, dmin);
		dmin = device_bytes_min(compare_obj, &compare, dmin);
		dmin = device_bytes_min(padding_obj, &padding, dmin);
		dmin = device_bytes_min(mask_obj, &mask, dmin);
		if (holds_device(out) && out_size < dmin)
			dmin = out_size;
		conn_device_ptrs(self, dmin);
	}
	tileatom_error err = {0, ""};
	tileatom_op_result res = {0};
	tileatom_client *c = self->client;
	const op_call call = {.kind = kind,
	                      .name = name,
	                      .op = (tileatom_op)op,
	                      .reg = reg,
	                      .window = window,
	                      .dim = dim,
	                      .n_index = n_index,
	                      .indices = indices,
	                      .flat = flat,
	                      .vals = vals,
	                      .cmp = cmp,
	                      .pad = pad,
	                      .addr = &addr,
	                      .opts = &opts,
	                      .out_data = out_data,
	                      .out_size = out_size};
	int st;
	/* a submit refused with TILEATOM_E_STATE while older responses are pending (a device
	 * allocation new to the connection is registered by a synchronous call) is sent again
	 * once those responses are set aside */
	for (int retried = 0;; retried = 1) {
		if (submit) {
			if (out != Py_None)
				Py_INCREF(out);
			if (queue_push(self, out != Py_None ? RESULT_OUT : RESULT_COUNTS,
			               out != Py_None ? out : NULL) < 0) {
				Py_XDECREF(keep);
				conn_leave(self);
				return NULL;
			}
			Py_XINCREF(keep);
			queue_newest(self)->keep = keep;
		}
		{
			PyThreadState *unlocked = PyEval_SaveThread();
			st = op_send(c, &call, submit, &res, &err);
			PyEval_RestoreThread(unlocked);
		}
		if (submit && st != TILEATOM_OK) {
			queue_drop_newest(self);
			int again = submit_again(self, st, retried, &err);
			if (again < 0) {
				Py_XDECREF(keep);
				conn_leave(self);
				return NULL;
			}
			if (again)
				continue;
		} else if (submit)
			st = conn_count_submit(self, &err);
		break;
	}
	Py_XDECREF(keep);
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	if (submit)
		Py_RETURN_NONE;
	if (out != Py_None && res.old_bytes != out_size &&
	    (want_old || kind == TILEATOM_REQ_GATHER || kind == TILEATOM_REQ_ATOMIC_LOAD)) {
		tileatom_error perr = {TILEATOM_E_PROTOCOL, ""};
		snprintf(perr.message, sizeof perr.message,
		         "the daemon returned %zu bytes of values where %zu were expected",
		         res.old_bytes, out_size);
		return raise_status(perr.code, &perr);
	}
	return counts_of(res.applied, res.skipped);
}

PyDoc_STRVAR(Conn_at_doc,
             "at(name, op, flat_index, dtype_code, value, compare, sem, scope, space, "
             "want_old, submit)\n--\n\n"
             "A single-element atomic at a row-major flat index, value and compare Python "
             "scalars. Synchronous: returns the old element as a numpy scalar when want_old "
             "(or for cas), else None. Submitted: returns None; the collected result is the "
             "old element (want_old or cas) or OpResult.");
/* The single-element op behind Conn.at and the Tile fast path: value and compare (NULL:
 * none) are Python scalars packed as dtype. */
static PyObject *conn_at_core(ConnObject *self, const char *name, int op, long long index,
                              int dtype, PyObject *value_obj, PyObject *compare_obj, PyObject *sem,
                              PyObject *scope, PyObject *space, int want_old, int submit)
{
	unsigned char value[8], compare[8];
	if (pack_value(value_obj, (tileatom_dtype)dtype, value) < 0)
		return NULL;
	int has_compare = compare_obj != NULL;
	if (has_compare && pack_value(compare_obj, (tileatom_dtype)dtype, compare) < 0)
		return NULL;
	want_old = want_old || op == TILEATOM_OP_CAS;
	tileatom_op_options opts;
	if (to_options(&opts, sem, scope, space, 1, 0) < 0)
		return NULL;
	if (conn_enter(self) < 0)
		return NULL;
	tileatom_error err = {0, ""};
	unsigned char old[8] = {0};
	int st;
	if (submit) {
		if (queue_push(self, RESULT_SINGLE | (want_old ? RESULT_SCALAR : RESULT_COUNTS),
		               NULL) < 0) {
			conn_leave(self);
			return NULL;
		}
		queue_newest(self)->index = index;
		/* a submit only encodes into the output buffer, unless that buffer is full: keep
		 * the GIL for the common case (dropping it costs as much as the encoding) */
		st = tileatom_submit_atomic_at(self->client, name, (tileatom_op)op, index,
		                               (tileatom_dtype)dtype, value,
		                               has_compare ? compare : NULL, &opts, NULL, &err);
		if (st != TILEATOM_OK)
			queue_drop_newest(self);
		else
			st = conn_count_submit(self, &err);
	} else {
		{
			PyThreadState *unlocked = PyEval_SaveThread();
			st = tileatom_atomic_at(self->client, name, (tileatom_op)op, index,
			                        (tileatom_dtype)dtype, value,
			                        has_compare ? compare : NULL, &opts, old, &err);
			PyEval_RestoreThread(unlocked);
		}
	}
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	if (submit)
		Py_RETURN_NONE;
	if (!want_old)
		return counts_of(1, 0);
	return scalar_of((tileatom_dtype)dtype, old);
}

static PyObject *Conn_at(ConnObject *self, PyObject *const *args, Py_ssize_t nargs)
{
	if (nargs != 11) {
		PyErr_SetString(PyExc_TypeError, "at() takes 11 arguments");
		return NULL;
	}
	const char *name = PyUnicode_AsUTF8(args[0]);
	if (!name)
		return NULL;
	int op = (int)PyLong_AsLong(args[1]);
	long long index = PyLong_AsLongLong(args[2]);
	int dtype = (int)PyLong_AsLong(args[3]);
	if (PyErr_Occurred())
		return NULL;
	int want_old = PyObject_IsTrue(args[9]);
	int submit = PyObject_IsTrue(args[10]);
	if (want_old < 0 || submit < 0)
		return NULL;
	return conn_at_core(self, name, op, index, dtype, args[4],
	                    args[5] == Py_None ? NULL : args[5], args[6], args[7], args[8],
	                    want_old, submit);
}

/* ---- Conn: pipelines --------------------------------------------------------------------- */

/* One response as read without the GIL, turned into a Python object afterwards. */
typedef struct raw_result {
	int status;              /* the library's status, or TILEATOM_E_PROTOCOL for a
	                            response that does not fit its request */
	uint64_t applied;        /* elements applied */
	uint64_t skipped;        /* elements skipped */
	tileatom_dtype dtype;    /* dtype of the data */
	unsigned char scalar[8]; /* RESULT_SCALAR: the old element */
	char *message;           /* on an error: malloc'd text (NULL: out of memory) */
	void *dst;               /* RESULT_OUT: where the data goes (host memory) */
	size_t dst_size;         /* RESULT_OUT: bytes expected there */
} raw_result;

/* Reads the response of entry e into *raw (without the GIL: no Python calls). Returns its
 * status. */
static int collect_raw(tileatom_client *client, const pending_entry *e, raw_result *raw)
{
	tileatom_response r;
	tileatom_error err = {0, ""};
	int st = tileatom_collect(client, &r, &err);
	raw->status = st;
	if (st == TILEATOM_OK) {
		raw->applied = r.applied;
		raw->skipped = r.skipped;
		raw->dtype = r.dtype;
		int kind = e->kind & ~RESULT_SINGLE;
		if ((e->kind & RESULT_SINGLE) && r.skipped) {
			/* as tileatom_atomic_at (synchronous) reports it */
			st = raw->status = err.code = TILEATOM_E_OUT_OF_RANGE;
			snprintf(err.message, sizeof err.message,
			         "flat index %lld is outside the tile", (long long)e->index);
		} else if (kind == RESULT_SCALAR) {
			size_t size = tileatom_dtype_size(r.dtype);
			if (size == 0 || size > sizeof raw->scalar || r.data_bytes < size ||
			    !r.data) {
				st = raw->status = err.code = TILEATOM_E_PROTOCOL;
				snprintf(err.message, sizeof err.message,
				         "a single-element response carried no old value");
			} else {
				memcpy(raw->scalar, r.data, size);
			}
		} else if (kind == RESULT_OUT) {
			if (r.data_bytes != raw->dst_size) {
				st = raw->status = err.code = TILEATOM_E_PROTOCOL;
				snprintf(err.message, sizeof err.message,
				         "the daemon returned %zu bytes of values where %zu were "
				         "expected",
				         r.data_bytes, raw->dst_size);
			} else if (raw->dst_size && r.data != raw->dst) {
				memcpy(raw->dst, r.data, raw->dst_size);
			}
		}
	}
	if (st != TILEATOM_OK)
		raw->message = strdup(err.message);
	return st;
}

/* The Python object of a raw result (a new reference; an exception instance for a failed
 * request), or NULL with an exception set. */
static PyObject *result_of(const pending_entry *e, const raw_result *raw)
{
	if (raw->status != TILEATOM_OK)
		return make_error(raw->status, raw->message ? raw->message : "");
	switch (e->kind & ~RESULT_SINGLE) {
	case RESULT_COUNTS:
		return counts_of(raw->applied, raw->skipped);
	case RESULT_SCALAR:
		return scalar_of(raw->dtype, raw->scalar);
	case RESULT_OUT:
		Py_INCREF(e->out);
		return e->out;
	default:
		Py_RETURN_NONE;
	}
}

/* Collects the n oldest pending responses (lock and GIL held; the GIL is released while
 * the library reads): a new list of their results (an exception instance for a failed
 * request; after a connection error the remaining entries all hold that error), or NULL
 * with an exception set. */
static PyObject *collect_locked(ConnObject *self, Py_ssize_t n)
{
	self->unflushed = 0; /* the first collect writes everything out */
	PyObject *list = PyList_New(n);
	pending_entry *ents = PyMem_Calloc((size_t)n + 1, sizeof *ents);
	raw_result *raws = PyMem_Calloc((size_t)n + 1, sizeof *raws);
	if (!list || !ents || !raws) {
		Py_XDECREF(list);
		PyMem_Free(ents);
		PyMem_Free(raws);
		return PyErr_NoMemory();
	}
	Py_ssize_t popped = 0, read = 0;
	int failed = 0;
	/* with the GIL: the entries and their output buffers */
	for (; popped < n; popped++) {
		queue_pop(self, &ents[popped]);
		if ((ents[popped].kind & ~RESULT_SINGLE) == RESULT_OUT &&
		    out_bytes(ents[popped].out, &raws[popped].dst, &raws[popped].dst_size, "out") <
		        0) {
			popped++;
			failed = 1;
			break;
		}
	}
	/* without it: every response, until the connection breaks */
	int broken = TILEATOM_OK;
	if (!failed) {
		PyThreadState *unlocked = PyEval_SaveThread();
		for (; read < n; read++) {
			int st = collect_raw(self->client, &ents[read], &raws[read]);
			if (st >= TILEATOM_E_IO) {
				broken = st;
				read++;
				break;
			}
		}
		PyEval_RestoreThread(unlocked);
	}
	/* with it again: the result objects */
	PyObject *broken_exc = NULL; /* the exception that broke the connection */
	for (Py_ssize_t i = 0; i < n && !failed; i++) {
		PyObject *item;
		if (i < read) {
			item = result_of(&ents[i], &raws[i]);
			if (item && broken && i == read - 1) {
				Py_INCREF(item);
				broken_exc = item;
			}
		} else {
			Py_XINCREF(broken_exc);
			item = broken_exc;
		}
		if (!item) {
			failed = 1;
			break;
		}
		PyList_SET_ITEM(list, i, item);
	}
	for (Py_ssize_t i = 0; i < n; i++)
		free(raws[i].message);
	for (Py_ssize_t i = 0; i < popped; i++) {
		Py_XDECREF(ents[i].out);
		Py_XDECREF(ents[i].keep);
	}
	PyMem_Free(ents);
	PyMem_Free(raws);
	Py_XDECREF(broken_exc);
	if (failed || broken)
		/* responses can no longer be matched to what is left: forget it */
		queue_clear(self);
	if (failed) {
		Py_DECREF(list);
		return NULL;
	}
	return list;
}

/* Collects the n oldest pending responses into self->aside, where the next collect()
 * returns them first (lock and GIL held): for a call that needs no response outstanding
 * in the middle of a pipeline. 0, or -1 with an exception set. */
static int set_aside_locked(ConnObject *self, Py_ssize_t n)
{
	PyObject *got = collect_locked(self, n);
	if (!got)
		return -1;
	if (!self->aside) {
		self->aside = got;
		return 0;
	}
	Py_ssize_t end = PyList_GET_SIZE(self->aside);
	int rc = PyList_SetSlice(self->aside, end, end, got);
	Py_DECREF(got);
	return rc;
}

PyDoc_STRVAR(Conn_set_aside_doc,
             "set_aside()\n--\n\nCollects every pending response now and keeps the "
             "results, which the next collect() returns first, in order: for a synchronous "
             "call in the middle of a pipeline.");
static PyObject *Conn_set_aside(ConnObject *self, PyObject *unused)
{
	(void)unused;
	if (conn_enter(self) < 0)
		return NULL;
	int rc = set_aside_locked(self, (Py_ssize_t)self->qlen);
	conn_leave(self);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

PyDoc_STRVAR(Conn_collect_doc,
             "collect(n=-1, raise_on_error=False) -> list\n--\n\n"
             "Collects the next n results (all when n < 0) in submission order: those set "
             "aside first, then the pending responses. Each entry is the request's result, "
             "or the exception instance of a failed one. After a connection error, the "
             "remaining entries all hold that error. raise_on_error=True raises the first "
             "failed request's exception instead, after collecting them all.");
static PyObject *Conn_collect(ConnObject *self, PyObject *args)
{
	Py_ssize_t n = -1;
	int raise_on_error = 0;
	if (!PyArg_ParseTuple(args, "|np", &n, &raise_on_error))
		return NULL;
	if (conn_enter(self) < 0)
		return NULL;
	/* the results set aside come first */
	Py_ssize_t aside = self->aside ? PyList_GET_SIZE(self->aside) : 0;
	Py_ssize_t total = aside + (Py_ssize_t)self->qlen;
	if (n < 0 || n > total)
		n = total;
	PyObject *list = NULL;
	if (aside > 0 && n <= aside) {
		list = PyList_GetSlice(self->aside, 0, n);
		if (list && PyList_SetSlice(self->aside, 0, n, NULL) < 0)
			Py_CLEAR(list);
	} else {
		list = collect_locked(self, n - aside);
		if (list && aside > 0) {
			/* the set-aside results, then the fresh ones */
			if (PyList_SetSlice(self->aside, aside, aside, list) < 0) {
				Py_CLEAR(list);
			} else {
				Py_SETREF(list, self->aside);
				self->aside = NULL;
			}
		}
	}
	conn_leave(self);
	if (!list)
		return NULL;
	if (raise_on_error) {
		for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
			PyObject *item = PyList_GET_ITEM(list, i);
			if (PyExceptionInstance_Check(item)) {
				PyErr_SetObject((PyObject *)Py_TYPE(item), item);
				Py_DECREF(list);
				return NULL;
			}
		}
	}
	return list;
}

PyDoc_STRVAR(Conn_flush_doc, "flush()\n--\n\nWrites out the submitted requests still "
                             "buffered without waiting for responses.");
static PyObject *Conn_flush(ConnObject *self, PyObject *unused)
{
	(void)unused;
	if (conn_enter(self) < 0)
		return NULL;
	tileatom_error err = {0, ""};
	int st;
	{
		PyThreadState *unlocked = PyEval_SaveThread();
		st = tileatom_flush(self->client, &err);
		PyEval_RestoreThread(unlocked);
	}
	conn_leave(self);
	if (st != TILEATOM_OK)
		return raise_status(st, &err);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(Conn_fileno_doc, "fileno() -> int\n--\n\nThe connection's socket, for an event "
                              "loop to wait on for readability (then call poll()); do not "
                              "read, write or close it.");
static PyObject *Conn_fileno(ConnObject *self, PyObject *unused)
{
	(void)unused;
	if (conn_enter(self) < 0)
		return NULL;
	int fd = tileatom_fd(self->client);
	conn_leave(self);
	return PyLong_FromLong(fd);
}

PyDoc_STRVAR(Conn_poll_doc,
             "poll() -> int\n--\n\nReads without blocking what the socket holds and returns "
             "how many of the pending requests, oldest first, collect() answers without "
             "waiting. After the connection broke, every pending request counts (collect() "
             "returns the error for each).");
static PyObject *Conn_poll(ConnObject *self, PyObject *unused)
{
	(void)unused;
	if (conn_enter(self) < 0)
		return NULL;
	size_t ready = 0;
	tileatom_error err = {0, ""};
	/* one non-blocking recv: kept under the GIL */
	(void)tileatom_poll(self->client, &ready, &err);
	conn_leave(self);
	return PyLong_FromSize_t(ready);
}

/* ---- shared buffers ---------------------------------------------------------------------- */

PyDoc_STRVAR(Conn_buffer_doc, "buffer(size) -> SharedBuffer\n--\n\nCreates and registers a "
                              "shared buffer of size bytes (zero-filled).");
static PyObject *Conn_buffer(ConnObject *self, PyObject *arg)
{
	Py_ssize_t size = PyLong_AsSsize_t(arg);
	if (size == -1 && PyErr_Occurred())
		return NULL;
	if (size <= 0) {
		PyErr_SetString(PyExc_ValueError, "a shared buffer needs a positive size");
		return NULL;
	}
	SharedBufferObject *b = PyObject_New(SharedBufferObject, &SharedBufferType);
	if (!b)
		return NULL;
	b->conn = NULL;
	b->buffer = NULL;
	b->exports = 0;
	if (conn_enter(self) < 0) {
		Py_DECREF(b);
		return NULL;
	}
	tileatom_error err = {0, ""};
	tileatom_buffer *buf = NULL;
	int st;
	{
		PyThreadState *unlocked = PyEval_SaveThread();
		st = tileatom_buffer_create(self->client, (size_t)size, &buf, &err);
		PyEval_RestoreThread(unlocked);
	}
	if (st == TILEATOM_OK)
		self->buffers++;
	conn_leave(self);
	if (st != TILEATOM_OK) {
		Py_DECREF(b);
		return raise_status(st, &err);
	}
	Py_INCREF(self);
	b->conn = self;
	b->buffer = buf;
	b->data = tileatom_buffer_data(buf);
	b->size = tileatom_buffer_size(buf);
	return (PyObject *)b;
}

static void SharedBuffer_dealloc(SharedBufferObject *self)
{
	ConnObject *conn = self->conn;
	if (conn && self->buffer) {
		conn_lock(conn);
		if (conn->client)
			tileatom_buffer_free(self->buffer);
		self->buffer = NULL;
		conn->buffers--;
		if (conn->closing && conn->buffers == 0)
			conn_really_close(conn);
		pthread_mutex_unlock(&conn->lock);
	}
	Py_XDECREF(conn);
	PyObject_Free(self);
}

static int SharedBuffer_getbuffer(SharedBufferObject *self, Py_buffer *view, int flags)
{
	if (!self->buffer) {
		PyErr_SetString(PyExc_ValueError, "the shared buffer is freed");
		return -1;
	}
	if (PyBuffer_FillInfo(view, (PyObject *)self, self->data, (Py_ssize_t)self->size, 0,
	                      flags) < 0)
		return -1;
	self->exports++;
	return 0;
}

static void SharedBuffer_releasebuffer(SharedBufferObject *self, Py_buffer *view)
{
	(void)view;
	self->exports--;
}

static PyBufferProcs SharedBuffer_as_buffer = {(getbufferproc)SharedBuffer_getbuffer,
                                               (releasebufferproc)SharedBuffer_releasebuffer};

static PyObject *SharedBuffer_get_size(SharedBufferObject *self, void *closure)
{
	(void)closure;
	return PyLong_FromSize_t(self->size);
}

static PyGetSetDef SharedBuffer_getset[] = {
    {"size", (getter)SharedBuffer_get_size, NULL, "Bytes of the buffer.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject SharedBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tileatom._core.SharedBuffer",
    .tp_basicsize = sizeof(SharedBufferObject),
    .tp_dealloc = (destructor)SharedBuffer_dealloc,
    .tp_as_buffer = &SharedBuffer_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("Memory shared with the daemon (registered on one connection); "
                        "numpy.frombuffer() views it without a copy."),
    .tp_getset = SharedBuffer_getset,
};

/* ---- TileBase: the C part of tileatom.Tile ----------------------------------------------
 * tileatom.Tile (Python) derives from it. It holds what the single-element fast path needs
 * and implements the read-modify-write ops: a call with an int `at`, a Python int/float
 * value (and expected), no mask, no out and no region goes straight to the library (a
 * pipelined small request then costs no Python frame); every other call goes to the Python
 * layer's Tile._rmw. */

/* The C fields of a tile. */
typedef struct TileBaseObject {
	PyObject_HEAD PyObject *conn; /* _conn: the Conn (ConnObject) */
	PyObject *name;               /* name: the tile's name (str) */
	PyObject *region;             /* _region: None or (origin, shape) */
	int code;                     /* _code: the tileatom dtype code */
	char submit;                  /* _submit: ops are queued on a pipeline */
} TileBaseObject;

static PyMemberDef TileBase_members[] = {
    {"_conn", T_OBJECT, offsetof(TileBaseObject, conn), 0, "the connection (internal)"},
    {"name", T_OBJECT, offsetof(TileBaseObject, name), 0, "the tile's name"},
    {"_region", T_OBJECT, offsetof(TileBaseObject, region), 0, "the box (internal)"},
    {"_code", T_INT, offsetof(TileBaseObject, code), 0, "the dtype code (internal)"},
    {"_submit", T_BOOL, offsetof(TileBaseObject, submit), 0, "pipelined (internal)"},
    {NULL, 0, 0, 0, NULL}};

static void TileBase_dealloc(TileBaseObject *self)
{
	Py_CLEAR(self->conn);
	Py_CLEAR(self->name);
	Py_CLEAR(self->region);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Keyword names of the ops, interned. */
enum {
	KW_VALUE,
	KW_AT,
	KW_MASK,
	KW_SEM,
	KW_SCOPE,
	KW_SPACE,
	KW_CHECK_BOUNDS,
	KW_RETURN_OLD,
	KW_OUT,
	KW_EXPECTED,
	KW_DESIRED,
	KW_COUNT
};
static const char *const kw_text[KW_COUNT] = {"value", "at",       "mask",         "sem",
                                              "scope", "space",    "check_bounds", "return_old",
                                              "out",   "expected", "desired"};
static PyObject *kw_names[KW_COUNT];
static PyObject *rmw_name; /* "_rmw" */

/* The index of a keyword name; -1 when unknown. */
static int kw_index(PyObject *key)
{
	for (int i = 0; i < KW_COUNT; i++)
		if (key == kw_names[i])
			return i;
	for (int i = 0; i < KW_COUNT; i++)
		if (PyUnicode_Compare(key, kw_names[i]) == 0)
			return i;
	return -1;
}

/* One read-modify-write op: parses (value, at=None, *, options) or, for cas, (at,
 * expected, desired, *, options), then takes the fast path or calls self._rmw. */
static PyObject *tile_rmw(TileBaseObject *self, int op, PyObject *const *args, size_t nargsf,
                          PyObject *kwnames)
{
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
	int cas = op == TILEATOM_OP_CAS;
	PyObject *v[KW_COUNT] = {NULL};
	/* positional: value, at (cas: at, expected, desired) */
	static const int pos_rmw[] = {KW_VALUE, KW_AT};
	static const int pos_cas[] = {KW_AT, KW_EXPECTED, KW_DESIRED};
	const int *pos = cas ? pos_cas : pos_rmw;
	Py_ssize_t npos = cas ? 3 : 2;
	if (nargs > npos) {
		PyErr_Format(PyExc_TypeError, "%s() takes at most %zd positional arguments",
		             tileatom_op_name((tileatom_op)op), npos);
		return NULL;
	}
	for (Py_ssize_t i = 0; i < nargs; i++)
		v[pos[i]] = args[i];
	Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
	for (Py_ssize_t i = 0; i < nkw; i++) {
		PyObject *key = PyTuple_GET_ITEM(kwnames, i);
		int k = kw_index(key);
		if (k < 0 || (cas && k == KW_VALUE) ||
		    (!cas && (k == KW_EXPECTED || k == KW_DESIRED))) {
			PyErr_Format(PyExc_TypeError,
			             "%s() got an unexpected keyword argument '%U'",
			             tileatom_op_name((tileatom_op)op), key);
			return NULL;
		}
		if (v[k]) {
			PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'",
			             tileatom_op_name((tileatom_op)op), key);
			return NULL;
		}
		v[k] = args[nargs + i];
	}
	PyObject *value = cas ? v[KW_DESIRED] : v[KW_VALUE];
	if (!value || (cas && (!v[KW_AT] || !v[KW_EXPECTED]))) {
		PyErr_Format(PyExc_TypeError, "%s() is missing a required argument (%s)",
		             tileatom_op_name((tileatom_op)op),
		             cas ? "at, expected and desired" : "value");
		return NULL;
	}
	PyObject *at = v[KW_AT] ? v[KW_AT] : Py_None;
	PyObject *sem = v[KW_SEM] ? v[KW_SEM] : default_names[0];
	PyObject *scope = v[KW_SCOPE] ? v[KW_SCOPE] : default_names[1];
	PyObject *space = v[KW_SPACE] ? v[KW_SPACE] : default_names[2];
	int return_old = cas;
	if (v[KW_RETURN_OLD] && (return_old = PyObject_IsTrue(v[KW_RETURN_OLD])) < 0)
		return NULL;
	int scalar_value = PyLong_CheckExact(value) || PyFloat_CheckExact(value);
	int scalar_expected =
	    !cas || PyLong_CheckExact(v[KW_EXPECTED]) || PyFloat_CheckExact(v[KW_EXPECTED]);
	if (PyLong_CheckExact(at) && scalar_value && scalar_expected &&
	    (!v[KW_MASK] || v[KW_MASK] == Py_None) && (!v[KW_OUT] || v[KW_OUT] == Py_None) &&
	    self->region == Py_None && self->conn && PyObject_TypeCheck(self->conn, &ConnType)) {
		long long index = PyLong_AsLongLong(at);
		if (index == -1 && PyErr_Occurred())
			return NULL;
		const char *name = PyUnicode_AsUTF8(self->name);
		if (!name)
			return NULL;
		return conn_at_core((ConnObject *)self->conn, name, op, index, self->code, value,
		                    cas ? v[KW_EXPECTED] : NULL, sem, scope, space, return_old,
		                    self->submit);
	}
	/* the general path: self._rmw(op, value, at, expected, mask, sem, scope, space,
	 * check_bounds, return_old, out) */
	PyObject *opnum = PyLong_FromLong(op);
	if (!opnum)
		return NULL;
	PyObject *callargs[12] = {(PyObject *)self,
	                          opnum,
	                          value,
	                          at,
	                          cas ? v[KW_EXPECTED] : Py_None,
	                          v[KW_MASK] ? v[KW_MASK] : Py_None,
	                          sem,
	                          scope,
	                          space,
	                          v[KW_CHECK_BOUNDS] ? v[KW_CHECK_BOUNDS] : Py_True,
	                          return_old ? Py_True : Py_False,
	                          v[KW_OUT] ? v[KW_OUT] : Py_None};
	PyObject *r = PyObject_VectorcallMethod(rmw_name, callargs,
	                                        12 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
	Py_DECREF(opnum);
	return r;
}

#define TA_RMW_OPTIONS                                                                             \
	"mask=None, sem='relaxed', scope='gpu', space='global', check_bounds=True, "               \
	"return_old=False, out=None)\n--\n\n"
#define TA_RMW_METHOD(fname, OPCODE, doc)                                                          \
	static PyObject *TileBase_##fname(TileBaseObject *self, PyObject *const *args,             \
	                                  size_t nargsf, PyObject *kwnames)                        \
	{                                                                                          \
		return tile_rmw(self, OPCODE, args, nargsf, kwnames);                              \
	}                                                                                          \
	PyDoc_STRVAR(TileBase_##fname##_doc,                                                       \
	             #fname "($self, /, value, at=None, *, " TA_RMW_OPTIONS doc);

TA_RMW_METHOD(add, TILEATOM_OP_ADD,
              "Atomically adds value (a scalar, or an array broadcast to the elements) at "
              "`at` (None: element-wise over the tile or box; an int or integer array: "
              "row-major flat offsets; a tuple of one integer array per axis: coordinates "
              "broadcast together; duplicates all apply). Returns OpResult(applied, "
              "skipped), or with return_old=True the old values (a numpy array of the "
              "elements' shape, filled into `out` when given; a numpy scalar for an int "
              "`at`). mask: a bool array broadcast to the elements. sem: relaxed, acquire, "
              "release, acq_rel. scope: gpu, cta, cluster, sys. space: global or shared. "
              "check_bounds=True skips and counts out-of-range elements, False fails the "
              "request (OutOfRange); one element given as an int `at` outside the tile "
              "always raises OutOfRange. In a pipeline: returns None, the result comes "
              "from execute().")
TA_RMW_METHOD(sub, TILEATOM_OP_SUB, "Atomically x -= value; arguments and result as add().")
TA_RMW_METHOD(min, TILEATOM_OP_MIN, "Atomically x = min(x, value); arguments and result as add().")
TA_RMW_METHOD(max, TILEATOM_OP_MAX, "Atomically x = max(x, value); arguments and result as add().")
TA_RMW_METHOD(exch, TILEATOM_OP_EXCH,
              "Atomically x = value (exchange); arguments and result as add().")
TA_RMW_METHOD(and_, TILEATOM_OP_AND,
              "Atomically x &= value (integer tiles); arguments and result as add().")
TA_RMW_METHOD(or_, TILEATOM_OP_OR,
              "Atomically x |= value (integer tiles); arguments and result as add().")
TA_RMW_METHOD(xor, TILEATOM_OP_XOR,
              "Atomically x ^= value (integer tiles); arguments and result as add().")

static PyObject *TileBase_cas(TileBaseObject *self, PyObject *const *args, size_t nargsf,
                              PyObject *kwnames)
{
	return tile_rmw(self, TILEATOM_OP_CAS, args, nargsf, kwnames);
}
PyDoc_STRVAR(TileBase_cas_doc,
             "cas($self, /, at, expected, desired, *, mask=None, sem='relaxed', scope='gpu', "
             "space='global', check_bounds=True, return_old=True, out=None)\n--\n\n"
             "Atomic compare-and-swap: where x == expected (bitwise), x = desired. Always "
             "returns the old values (the swap happened where old == expected; a numpy "
             "scalar for an int `at`); masked-off and skipped elements report expected. "
             "`at` and the options as add() (None: element-wise over the tile or box).");

#define TA_RMW_ENTRY(fname)                                                                        \
	{                                                                                          \
#fname, (PyCFunction)(void (*)(void))TileBase_##fname,                             \
		    METH_FASTCALL | METH_KEYWORDS, TileBase_##fname##_doc                          \
	}
static PyMethodDef TileBase_methods[] = {
    TA_RMW_ENTRY(add),  TA_RMW_ENTRY(sub),    TA_RMW_ENTRY(min), TA_RMW_ENTRY(max),
    TA_RMW_ENTRY(exch), TA_RMW_ENTRY(and_),   TA_RMW_ENTRY(or_), TA_RMW_ENTRY(xor),
    TA_RMW_ENTRY(cas),  {NULL, NULL, 0, NULL}};

static PyTypeObject TileBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tileatom._core.TileBase",
    .tp_basicsize = sizeof(TileBaseObject),
    .tp_dealloc = (destructor)TileBase_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = PyDoc_STR("The C part of tileatom.Tile: its read-modify-write ops."),
    .tp_methods = TileBase_methods,
    .tp_members = TileBase_members,
    .tp_new = PyType_GenericNew,
};

/* ---- PipelineBase: the C part of tileatom.Pipeline --------------------------------------
 * Pipeline.tile(name) is called once per queued request: a C method with one argument that
 * finds the pipeline's cached Tile view in a dict costs no Python frame; a name not seen
 * yet goes to the Python layer's Pipeline._new_tile(name), which describes the tile and
 * stores its view in _tiles. */

/* The C fields of a pipeline. */
typedef struct PipelineBaseObject {
	PyObject_HEAD PyObject *tiles; /* _tiles: dict name -> the pipelined Tile view */
} PipelineBaseObject;

static PyObject *new_tile_name; /* "_new_tile" */

static PyMemberDef PipelineBase_members[] = {{"_tiles", T_OBJECT,
                                              offsetof(PipelineBaseObject, tiles), 0,
                                              "the pipelined Tile views by name (internal)"},
                                             {NULL, 0, 0, 0, NULL}};

static void PipelineBase_dealloc(PipelineBaseObject *self)
{
	Py_CLEAR(self->tiles);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(PipelineBase_tile_doc,
             "tile($self, name, /)\n--\n\n"
             "The pipelined view of tile `name`: its operations are queued and answer None; "
             "their results come from execute(). The view is made once per name and "
             "pipeline (the first use of a name the client has not seen describes the tile: "
             "one round trip, after the responses queued so far are set aside for "
             "execute()).");
static PyObject *PipelineBase_tile(PipelineBaseObject *self, PyObject *name)
{
	if (self->tiles && PyDict_CheckExact(self->tiles)) {
		PyObject *t = PyDict_GetItemWithError(self->tiles, name);
		if (t)
			return Py_NewRef(t);
		if (PyErr_Occurred())
			return NULL;
	}
	return PyObject_CallMethodOneArg((PyObject *)self, new_tile_name, name);
}

static PyMethodDef PipelineBase_methods[] = {
    {"tile", (PyCFunction)PipelineBase_tile, METH_O, PipelineBase_tile_doc}, {NULL, NULL, 0, NULL}};

static PyTypeObject PipelineBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tileatom._core.PipelineBase",
    .tp_basicsize = sizeof(PipelineBaseObject),
    .tp_dealloc = (destructor)PipelineBase_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = PyDoc_STR("The C part of tileatom.Pipeline: its tile() lookup."),
    .tp_methods = PipelineBase_methods,
    .tp_members = PipelineBase_members,
    .tp_new = PyType_GenericNew,
};

/* ---- DLPack: objects offering only __dlpack__ -------------------------------------------
 * The DLPack Python protocol hands over a PyCapsule named "dltensor" holding a
 * DLManagedTensor. The consumer renames the capsule "used_dltensor" (so that the capsule's
 * own destructor leaves the tensor alone) and calls the tensor's deleter when done. The
 * structures below are DLPack's ABI (dlpack.h, unversioned: the layout every producer
 * exports without max_version), declared here because Debian ships no dlpack.h. A
 * DLPackView owns one consumed tensor: its fields describe it, its buffer protocol exposes
 * host memory (kDLCPU, kDLCUDAHost) to numpy, and freeing it calls the deleter. */

/* DLPack's device (DLDevice). */
typedef struct ta_dl_device {
	int32_t device_type; /* DLDeviceType: kDLCPU 1, kDLCUDA 2, kDLCUDAHost 3, ... */
	int32_t device_id;   /* the device's ordinal */
} ta_dl_device;

/* DLPack's element type (DLDataType). */
typedef struct ta_dl_dtype {
	uint8_t code;   /* kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6, ... */
	uint8_t bits;   /* bits per lane */
	uint16_t lanes; /* lanes per element (1 for scalars) */
} ta_dl_dtype;

/* DLPack's tensor (DLTensor). */
typedef struct ta_dl_tensor {
	void *data;           /* base address (device memory for device tensors) */
	ta_dl_device device;  /* where data lives */
	int32_t ndim;         /* rank */
	ta_dl_dtype dtype;    /* element type */
	int64_t *shape;       /* ndim extents */
	int64_t *strides;     /* ndim strides in elements, or NULL: C-contiguous */
	uint64_t byte_offset; /* bytes from data to the first element */
} ta_dl_tensor;

/* DLPack's managed tensor (DLManagedTensor). */
typedef struct ta_dl_managed {
	ta_dl_tensor dl_tensor;                      /* the tensor */
	void *manager_ctx;                           /* the producer's context */
	void (*deleter)(struct ta_dl_managed *self); /* frees it; may be NULL */
} ta_dl_managed;

/* The rank above which a DLPack tensor is refused (tileatom's arrays have rank <= 4; the
 * view itself takes any rank up to this bound). */
#define TA_DL_MAX_NDIM 32

/* A consumed DLPack tensor (tileatom._core.DLPackView). */
typedef struct DLPackViewObject {
	PyObject_HEAD ta_dl_managed *managed; /* the tensor; its deleter runs on dealloc */
	Py_ssize_t itemsize;                  /* bytes per element */
	char format[2];                       /* its struct format character for the buffer */
	Py_ssize_t shape[TA_DL_MAX_NDIM];     /* extents, for the buffer protocol */
	Py_ssize_t strides[TA_DL_MAX_NDIM];   /* strides in bytes */
	Py_ssize_t exports;                   /* buffer-protocol views alive */
} DLPackViewObject;

static PyTypeObject DLPackViewType;

/* The struct format character of a DLPack element type; 0 when the buffer protocol has none
 * (bfloat16 is exposed as its uint16 bits, as the rest of the package holds it). */
static char dl_format(ta_dl_dtype t)
{
	if (t.lanes != 1)
		return 0;
	switch (t.code) {
	case 0: /* kDLInt */
		return t.bits == 8    ? 'b'
		       : t.bits == 16 ? 'h'
		       : t.bits == 32 ? 'i'
		       : t.bits == 64 ? 'q'
		                      : 0;
	case 1: /* kDLUInt */
		return t.bits == 8    ? 'B'
		       : t.bits == 16 ? 'H'
		       : t.bits == 32 ? 'I'
		       : t.bits == 64 ? 'Q'
		                      : 0;
	case 2: /* kDLFloat */
		return t.bits == 16 ? 'e' : t.bits == 32 ? 'f' : t.bits == 64 ? 'd' : 0;
	case 4: /* kDLBfloat */
		return t.bits == 16 ? 'H' : 0;
	case 6: /* kDLBool */
		return t.bits == 8 ? '?' : 0;
	default:
		return 0;
	}
}

static void DLPackView_dealloc(DLPackViewObject *self)
{
	ta_dl_managed *m = self->managed;
	self->managed = NULL;
	if (m && m->deleter)
		m->deleter(m);
	PyObject_Free(self);
}

PyDoc_STRVAR(dlpack_view_doc,
             "dlpack_view(capsule, /) -> DLPackView\n--\n\n"
             "Consumes a DLPack capsule (named 'dltensor', as __dlpack__() returns it): "
             "renames it 'used_dltensor' and returns a DLPackView owning the tensor, whose "
             "deleter runs when the view is freed. Raises ValueError for a capsule already "
             "consumed, a rank above 32, or elements of more than one lane.");
static PyObject *mod_dlpack_view(PyObject *mod, PyObject *capsule)
{
	(void)mod;
	if (!PyCapsule_CheckExact(capsule)) {
		PyErr_Format(PyExc_TypeError, "__dlpack__() returned %.100s, not a capsule",
		             Py_TYPE(capsule)->tp_name);
		return NULL;
	}
	if (!PyCapsule_IsValid(capsule, "dltensor")) {
		const char *cname = PyCapsule_GetName(capsule);
		if (!cname && PyErr_Occurred())
			return NULL;
		PyErr_Format(PyExc_ValueError,
		             "a DLPack capsule named '%s' (a tensor is consumed once, from a "
		             "capsule named 'dltensor')",
		             cname ? cname : "");
		return NULL;
	}
	ta_dl_managed *m = PyCapsule_GetPointer(capsule, "dltensor");
	if (!m)
		return NULL;
	const ta_dl_tensor *t = &m->dl_tensor;
	/* checked before the capsule is taken: a refused one stays the producer's */
	if (t->ndim < 0 || t->ndim > TA_DL_MAX_NDIM || (t->ndim > 0 && !t->shape)) {
		PyErr_Format(PyExc_ValueError, "a DLPack tensor of rank %d (at most %d)",
		             (int)t->ndim, TA_DL_MAX_NDIM);
		return NULL;
	}
	if (t->dtype.lanes != 1 || t->dtype.bits == 0 || t->dtype.bits % 8 != 0) {
		PyErr_Format(PyExc_ValueError,
		             "a DLPack tensor of %u lanes of %u bits (tileatom takes one-lane "
		             "elements of whole bytes)",
		             (unsigned)t->dtype.lanes, (unsigned)t->dtype.bits);
		return NULL;
	}
	DLPackViewObject *v = PyObject_New(DLPackViewObject, &DLPackViewType);
	if (!v)
		return NULL;
	v->managed = NULL;
	v->exports = 0;
	v->itemsize = t->dtype.bits / 8;
	v->format[0] = dl_format(t->dtype);
	v->format[1] = 0;
	for (int i = 0; i < t->ndim; i++)
		v->shape[i] = (Py_ssize_t)t->shape[i];
	Py_ssize_t step = v->itemsize;
	for (int i = t->ndim - 1; i >= 0; i--) {
		v->strides[i] = t->strides ? (Py_ssize_t)t->strides[i] * v->itemsize : step;
		step *= v->shape[i];
	}
	if (PyCapsule_SetName(capsule, "used_dltensor") < 0) {
		Py_DECREF(v);
		return NULL;
	}
	v->managed = m;
	return (PyObject *)v;
}

static int DLPackView_getbuffer(DLPackViewObject *self, Py_buffer *view, int flags)
{
	const ta_dl_tensor *t = &self->managed->dl_tensor;
	if (t->device.device_type != 1 && t->device.device_type != 3) {
		PyErr_Format(PyExc_BufferError,
		             "a DLPack tensor on device type %d is not host memory",
		             (int)t->device.device_type);
		return -1;
	}
	if (!self->format[0]) {
		PyErr_SetString(PyExc_BufferError, "a DLPack element type with no buffer format");
		return -1;
	}
	Py_ssize_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= self->shape[i];
	view->buf = (char *)t->data + t->byte_offset;
	view->obj = Py_NewRef(self);
	view->len = n * self->itemsize;
	view->readonly = 0;
	view->itemsize = self->itemsize;
	view->format = (flags & PyBUF_FORMAT) ? self->format : NULL;
	view->ndim = t->ndim;
	view->shape = (flags & PyBUF_ND) == PyBUF_ND ? self->shape : NULL;
	view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
	view->suboffsets = NULL;
	view->internal = NULL;
	if (!view->strides && !PyBuffer_IsContiguous(view, 'C')) {
		Py_CLEAR(view->obj);
		PyErr_SetString(PyExc_BufferError, "a strided DLPack tensor asked for without "
		                                   "strides");
		return -1;
	}
	self->exports++;
	return 0;
}

static void DLPackView_releasebuffer(DLPackViewObject *self, Py_buffer *view)
{
	(void)view;
	self->exports--;
}

static PyBufferProcs DLPackView_as_buffer = {(getbufferproc)DLPackView_getbuffer,
                                             (releasebufferproc)DLPackView_releasebuffer};

/* A tuple of n int64 values. */
static PyObject *int64_tuple(const int64_t *vals, int n)
{
	PyObject *t = PyTuple_New(n);
	if (!t)
		return NULL;
	for (int i = 0; i < n; i++) {
		PyObject *x = PyLong_FromLongLong(vals[i]);
		if (!x) {
			Py_DECREF(t);
			return NULL;
		}
		PyTuple_SET_ITEM(t, i, x);
	}
	return t;
}

static PyObject *DLPackView_get_data(DLPackViewObject *self, void *closure)
{
	const ta_dl_tensor *t = &self->managed->dl_tensor;
	return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)t->data + t->byte_offset);
}

static PyObject *DLPackView_get_device(DLPackViewObject *self, void *closure)
{
	const ta_dl_tensor *t = &self->managed->dl_tensor;
	return Py_BuildValue("(ii)", (int)t->device.device_type, (int)t->device.device_id);
}

static PyObject *DLPackView_get_dtype(DLPackViewObject *self, void *closure)
{
	const ta_dl_dtype d = self->managed->dl_tensor.dtype;
	return Py_BuildValue("(iii)", (int)d.code, (int)d.bits, (int)d.lanes);
}

static PyObject *DLPackView_get_shape(DLPackViewObject *self, void *closure)
{
	const ta_dl_tensor *t = &self->managed->dl_tensor;
	return int64_tuple(t->shape, t->ndim);
}

static PyObject *DLPackView_get_strides(DLPackViewObject *self, void *closure)
{
	const ta_dl_tensor *t = &self->managed->dl_tensor;
	if (!t->strides)
		Py_RETURN_NONE;
	return int64_tuple(t->strides, t->ndim);
}

static PyObject *DLPackView_get_byte_offset(DLPackViewObject *self, void *closure)
{
	return PyLong_FromUnsignedLongLong(self->managed->dl_tensor.byte_offset);
}

static PyGetSetDef DLPackView_getset[] = {
    {"data", (getter)DLPackView_get_data, NULL,
     "The first element's address (the tensor's data plus byte_offset).", NULL},
    {"device", (getter)DLPackView_get_device, NULL,
     "(device type, device id): kDLCPU 1, kDLCUDA 2, kDLCUDAHost 3, ...", NULL},
    {"dtype", (getter)DLPackView_get_dtype, NULL,
     "(type code, bits, lanes): code kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, "
     "kDLBool 6.",
     NULL},
    {"shape", (getter)DLPackView_get_shape, NULL, "The extents.", NULL},
    {"strides", (getter)DLPackView_get_strides, NULL,
     "The strides in elements, or None (C-contiguous).", NULL},
    {"byte_offset", (getter)DLPackView_get_byte_offset, NULL,
     "Bytes from the tensor's data pointer to its first element.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject DLPackViewType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tileatom._core.DLPackView",
    .tp_basicsize = sizeof(DLPackViewObject),
    .tp_dealloc = (destructor)DLPackView_dealloc,
    .tp_as_buffer = &DLPackView_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("A DLPack tensor consumed from its capsule (dlpack_view()); its "
                        "deleter runs when this object is freed. Host tensors expose their "
                        "memory through the buffer protocol (numpy.asarray(view))."),
    .tp_getset = DLPackView_getset,
};

/* ---- type and module --------------------------------------------------------------------- */

static PyMethodDef Conn_methods[] = {
    {"close", (PyCFunction)Conn_close, METH_NOARGS, Conn_close_doc},
    {"create", (PyCFunction)Conn_create, METH_VARARGS, Conn_create_doc},
    {"describe", (PyCFunction)Conn_describe, METH_O, Conn_describe_doc},
    {"destroy", (PyCFunction)Conn_destroy, METH_O, Conn_destroy_doc},
    {"list", (PyCFunction)Conn_list, METH_NOARGS, Conn_list_doc},
    {"ping", (PyCFunction)Conn_ping, METH_NOARGS, Conn_ping_doc},
    {"stats", (PyCFunction)Conn_stats, METH_NOARGS, Conn_stats_doc},
    {"read", (PyCFunction)Conn_read, METH_VARARGS, Conn_read_doc},
    {"write", (PyCFunction)Conn_write, METH_VARARGS, Conn_write_doc},
    {"op", (PyCFunction)Conn_op, METH_VARARGS, Conn_op_doc},
    {"at", (PyCFunction)(void (*)(void))Conn_at, METH_FASTCALL, Conn_at_doc},
    {"collect", (PyCFunction)Conn_collect, METH_VARARGS, Conn_collect_doc},
    {"set_aside", (PyCFunction)Conn_set_aside, METH_NOARGS, Conn_set_aside_doc},
    {"flush", (PyCFunction)Conn_flush, METH_NOARGS, Conn_flush_doc},
    {"fileno", (PyCFunction)Conn_fileno, METH_NOARGS, Conn_fileno_doc},
    {"poll", (PyCFunction)Conn_poll, METH_NOARGS, Conn_poll_doc},
    {"buffer", (PyCFunction)Conn_buffer, METH_O, Conn_buffer_doc},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ConnType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tileatom._core.Conn",
    .tp_basicsize = sizeof(ConnObject),
    .tp_dealloc = (destructor)Conn_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("Conn(address=None, timeout_ms=0, io_timeout_ms=0, auth_file=None): "
                        "one connection to tileatomd (the low-level handle under "
                        "tileatom.Client)."),
    .tp_methods = Conn_methods,
    .tp_getset = Conn_getset,
    .tp_init = (initproc)Conn_init,
    .tp_new = Conn_new,
};

PyDoc_STRVAR(set_errors_doc, "set_errors(base, classes)\n--\n\nRegisters the exception base "
                             "class and the dict status code -> exception class.");
static PyObject *mod_set_errors(PyObject *mod, PyObject *args)
{
	(void)mod;
	PyObject *base, *classes;
	if (!PyArg_ParseTuple(args, "OO!", &base, &PyDict_Type, &classes))
		return NULL;
	Py_INCREF(base);
	Py_INCREF(classes);
	Py_XSETREF(error_base, base);
	Py_XSETREF(error_classes, classes);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(default_socket_doc, "default_socket() -> str\n--\n\nThe socket path connect() "
                                 "uses without an address ($TILEATOM_SOCKET, else the per-user "
                                 "or system daemon's).");
static PyObject *mod_default_socket(PyObject *mod, PyObject *unused)
{
	(void)mod;
	(void)unused;
	char path[4096];
	if (tileatom_default_socket(path, sizeof path) != 0) {
		PyErr_SetString(PyExc_OSError, "the default socket path is too long");
		return NULL;
	}
	return PyUnicode_DecodeFSDefault(path);
}

PyDoc_STRVAR(cuda_stream_sync_doc,
             "cuda_stream_sync(stream) -> bool\n--\n\nWaits for the work queued on the CUDA "
             "stream whose raw handle is the int stream (0: the legacy default stream of the "
             "thread's current context) with libtileatom-client's tileatom_cuda_stream_sync, "
             "the GIL released. False when it could not (no CUDA driver loaded, or the "
             "driver's error): the caller then waits its own way.");
static PyObject *mod_cuda_stream_sync(PyObject *mod, PyObject *arg)
{
	(void)mod;
	void *stream = PyLong_AsVoidPtr(arg);
	if (!stream && PyErr_Occurred())
		return NULL;
	tileatom_error err = {0, ""};
	PyThreadState *ts = PyEval_SaveThread(); /* it may wait for the GPU */
	int rc = tileatom_cuda_stream_sync(stream, &err);
	PyEval_RestoreThread(ts);
	return PyBool_FromLong(rc == TILEATOM_OK);
}

PyDoc_STRVAR(version_doc, "library_version() -> str\n--\n\nThe version of "
                          "libtileatom-client.");
static PyObject *mod_version(PyObject *mod, PyObject *unused)
{
	(void)mod;
	(void)unused;
	return PyUnicode_FromString(tileatom_version());
}

static PyMethodDef module_methods[] = {
    {"set_errors", mod_set_errors, METH_VARARGS, set_errors_doc},
    {"dlpack_view", mod_dlpack_view, METH_O, dlpack_view_doc},
    {"default_socket", mod_default_socket, METH_NOARGS, default_socket_doc},
    {"library_version", mod_version, METH_NOARGS, version_doc},
    {"cuda_stream_sync", mod_cuda_stream_sync, METH_O, cuda_stream_sync_doc},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    "tileatom._core",
    "The C extension under tileatom: libtileatom-client's calls (use the tileatom package).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL};

PyMODINIT_FUNC PyInit__core(void)
{
	import_array();
	static const char *const defaults[3] = {"relaxed", "gpu", "global"};
	for (int i = 0; i < 3; i++)
		if (!default_names[i] &&
		    !(default_names[i] = PyUnicode_InternFromString(defaults[i])))
			return NULL;
	if (PyType_Ready(&ConnType) < 0 || PyType_Ready(&SharedBufferType) < 0 ||
	    PyType_Ready(&TileBaseType) < 0 || PyType_Ready(&PipelineBaseType) < 0 ||
	    PyType_Ready(&DLPackViewType) < 0)
		return NULL;
	for (int i = 0; i < KW_COUNT; i++)
		if (!kw_names[i] && !(kw_names[i] = PyUnicode_InternFromString(kw_text[i])))
			return NULL;
	if (!rmw_name && !(rmw_name = PyUnicode_InternFromString("_rmw")))
		return NULL;
	if (!new_tile_name && !(new_tile_name = PyUnicode_InternFromString("_new_tile")))
		return NULL;
	if (!OpResultType.tp_name && PyStructSequence_InitType2(&OpResultType, &opresult_desc) < 0)
		return NULL;
	PyObject *m = PyModule_Create(&core_module);
	if (!m)
		return NULL;
	if (PyModule_AddObjectRef(m, "Conn", (PyObject *)&ConnType) < 0 ||
	    PyModule_AddObjectRef(m, "SharedBuffer", (PyObject *)&SharedBufferType) < 0 ||
	    PyModule_AddObjectRef(m, "TileBase", (PyObject *)&TileBaseType) < 0 ||
	    PyModule_AddObjectRef(m, "PipelineBase", (PyObject *)&PipelineBaseType) < 0 ||
	    PyModule_AddObjectRef(m, "DLPackView", (PyObject *)&DLPackViewType) < 0 ||
	    PyModule_AddObjectRef(m, "OpResult", (PyObject *)&OpResultType) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_RANK", TILEATOM_MAX_RANK) < 0 ||
	    PyModule_AddIntConstant(m, "NAME_MAX", TILEATOM_NAME_MAX) < 0 ||
	    PyModule_AddFunctions(m, ta_torch_methods) < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}

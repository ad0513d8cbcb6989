/* _torch.c: the extension's reader of torch CUDA tensors, the one way a torch tensor on a
 * CUDA device becomes a device operand tuple (pointer, dtype code, shape, tensor). Every
 * bulk request from a torch CUDA tensor pays this reading before it is sent, so it is done
 * here in C, in as few calls into torch as a tensor allows, with no Python frame between
 * them: the tensor's getters and methods (is_cuda, dtype, is_contiguous, get_device,
 * data_ptr, shape) and the wait for the work queued on the device's current stream. The
 * extension does not link torch: the Python layer binds what it needs (torch.Tensor, its
 * dtype -> code table, torch's raw current stream getter) once torch is imported, with two
 * Python callbacks for the rare cases: the checks that name what does not fit, and the
 * stream wait through torch when the CUDA driver cannot be asked directly. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "_torch.h"
#include "tileatom.h"

/* What the Python layer bound (all NULL until torch_bind). */
static struct {
	PyTypeObject *tensor;  /* torch.Tensor */
	PyObject *codes;       /* dict: torch dtype -> the extension's dtype code */
	PyObject *raw_stream;  /* device index -> raw cudaStream_t int (NULL: torch lacks it) */
	PyObject *current;     /* () -> the thread's current CUDA device index */
	PyObject *check;       /* (tensor, code, what): raises unless the tensor fits */
	PyObject *stream_wait; /* (device index): waits on its current stream through torch */
} bound;

/* Interned attribute and method names of a tensor. */
static PyObject *name_is_cuda, *name_dtype, *name_shape, *name_is_contiguous, *name_get_device,
    *name_data_ptr;

/* name interned once; 0, or -1 with an exception set. */
static int intern_once(PyObject **slot, const char *name)
{
	if (!*slot && !(*slot = PyUnicode_InternFromString(name)))
		return -1;
	return 0;
}

/* obj.name() without arguments (a new reference, or NULL with an exception set). */
static PyObject *call_method0(PyObject *obj, PyObject *name)
{
	return PyObject_VectorcallMethod(name, &obj, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* fn(arg), or fn() when arg is NULL, with fn held for the call: another thread binding
 * torch again meanwhile cannot free it. */
static PyObject *call_held(PyObject *fn, PyObject *arg)
{
	Py_INCREF(fn);
	PyObject *r = arg ? PyObject_CallOneArg(fn, arg) : PyObject_CallNoArgs(fn);
	Py_DECREF(fn);
	return r;
}

/* The integer value of new reference v (consumed); -1 with an exception set on failure. */
static long long take_long(PyObject *v)
{
	if (!v)
		return -1;
	long long n = PyLong_AsLongLong(v);
	Py_DECREF(v);
	return n;
}

PyDoc_STRVAR(torch_bind_doc,
             "torch_bind(tensor_type, codes, raw_stream, current_device, check, stream_wait)\n"
             "--\n\nBinds torch for torch_operand and torch_sync: torch.Tensor, the dict of "
             "torch dtype -> dtype code, torch's raw current stream getter of a device index "
             "(or None), its current device getter, the checker raising for a tensor that "
             "does not fit (tensor, code, what) and the wait through torch (device index).");
static PyObject *torch_bind(PyObject *mod, PyObject *args)
{
	(void)mod;
	PyObject *tensor, *codes, *raw, *current, *check, *wait;
	if (!PyArg_ParseTuple(args, "O!O!OOOO:torch_bind", &PyType_Type, &tensor, &PyDict_Type,
	                      &codes, &raw, &current, &check, &wait))
		return NULL;
	if ((raw != Py_None && !PyCallable_Check(raw)) || !PyCallable_Check(current) ||
	    !PyCallable_Check(check) || !PyCallable_Check(wait)) {
		PyErr_SetString(PyExc_TypeError, "torch_bind: the getters and callbacks must be "
		                                 "callable");
		return NULL;
	}
	if (intern_once(&name_is_cuda, "is_cuda") < 0 || intern_once(&name_dtype, "dtype") < 0 ||
	    intern_once(&name_shape, "shape") < 0 ||
	    intern_once(&name_is_contiguous, "is_contiguous") < 0 ||
	    intern_once(&name_get_device, "get_device") < 0 ||
	    intern_once(&name_data_ptr, "data_ptr") < 0)
		return NULL;
	Py_INCREF(tensor);
	Py_XSETREF(bound.tensor, (PyTypeObject *)tensor);
	Py_INCREF(codes);
	Py_XSETREF(bound.codes, codes);
	Py_XSETREF(bound.raw_stream, raw == Py_None ? NULL : Py_NewRef(raw));
	Py_XSETREF(bound.current, Py_NewRef(current));
	Py_XSETREF(bound.check, Py_NewRef(check));
	Py_XSETREF(bound.stream_wait, Py_NewRef(wait));
	Py_RETURN_NONE;
}

/* Waits for the work queued on CUDA device index's current torch stream: through the
 * driver (tileatom_cuda_stream_sync: a query, a synchronisation only when work is queued)
 * when torch gives the raw stream, else through torch. 0, or -1 with an exception set. */
static int sync_device(long long index)
{
	PyObject *index_obj = PyLong_FromLongLong(index);
	if (!index_obj)
		return -1;
	if (bound.raw_stream) {
		PyObject *raw_obj = call_held(bound.raw_stream, index_obj);
		void *raw = raw_obj ? PyLong_AsVoidPtr(raw_obj) : NULL;
		Py_XDECREF(raw_obj);
		if (!raw_obj || (!raw && PyErr_Occurred())) {
			Py_DECREF(index_obj);
			return -1;
		}
		/* the legacy default stream (0) only on the thread's current device: the driver
		 * takes it from the thread's current context */
		int ask_driver = raw != NULL;
		if (!ask_driver) {
			long long current = take_long(call_held(bound.current, NULL));
			if (current == -1 && PyErr_Occurred()) {
				Py_DECREF(index_obj);
				return -1;
			}
			ask_driver = current == index;
		}
		if (ask_driver) {
			tileatom_error err = {0, ""};
			PyThreadState *ts = PyEval_SaveThread(); /* it may wait for the GPU */
			int rc = tileatom_cuda_stream_sync(raw, &err);
			PyEval_RestoreThread(ts);
			if (rc == TILEATOM_OK) {
				Py_DECREF(index_obj);
				return 0;
			}
		}
	}
	/* no driver to ask (or it refused): torch's own wait */
	PyObject *done = call_held(bound.stream_wait, index_obj);
	Py_DECREF(index_obj);
	Py_XDECREF(done);
	return done ? 0 : -1;
}

PyDoc_STRVAR(torch_sync_doc, "torch_sync(device_index) -> None\n--\n\nWaits for the work "
                             "queued on the current torch stream of CUDA device "
                             "device_index (torch_bind first).");
static PyObject *torch_sync(PyObject *mod, PyObject *arg)
{
	(void)mod;
	if (!bound.tensor) {
		PyErr_SetString(PyExc_RuntimeError, "torch_sync: torch is not bound");
		return NULL;
	}
	long long index = PyLong_AsLongLong(arg);
	if (index == -1 && PyErr_Occurred())
		return NULL;
	if (sync_device(index) < 0)
		return NULL;
	Py_RETURN_NONE;
}

PyDoc_STRVAR(
    torch_operand_doc,
    "torch_operand(obj, code, what) -> tuple | None\n--\n\nobj as a device operand tuple "
    "(data pointer, dtype code, shape, obj) when it is a torch tensor on a CUDA device, "
    "after the work queued on its device's current stream is done; None for anything else "
    "(or before torch_bind). code is the dtype code the operand must have, or None for any "
    "tileatom dtype; a tensor of another dtype, or not contiguous, raises through the bound "
    "checker, whose message names what (the operand's role).");
static PyObject *torch_operand(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
	(void)mod;
	if (nargs != 3) {
		PyErr_SetString(PyExc_TypeError, "torch_operand takes (obj, code, what)");
		return NULL;
	}
	PyObject *obj = args[0], *want = args[1], *what = args[2];
	if (!bound.tensor || !PyObject_TypeCheck(obj, bound.tensor))
		Py_RETURN_NONE;
	PyObject *is_cuda = PyObject_GetAttr(obj, name_is_cuda);
	if (!is_cuda)
		return NULL;
	int cuda = PyObject_IsTrue(is_cuda);
	Py_DECREF(is_cuda);
	if (cuda <= 0)
		return cuda < 0 ? NULL : Py_NewRef(Py_None);
	PyObject *dtype = PyObject_GetAttr(obj, name_dtype);
	if (!dtype)
		return NULL;
	PyObject *code = PyDict_GetItemWithError(bound.codes, dtype);
	Py_DECREF(dtype);
	if (!code && PyErr_Occurred())
		return NULL;
	Py_XINCREF(code); /* held: the callbacks below run Python */
	PyObject *ptr = NULL, *shape = NULL, *out = NULL;
	int dtype_fits = 0, contiguous = 0;
	if (code) {
		dtype_fits = want == Py_None ? 1 : PyObject_RichCompareBool(code, want, Py_EQ);
		if (dtype_fits < 0)
			goto done;
	}
	if (dtype_fits) {
		PyObject *c = call_method0(obj, name_is_contiguous);
		if (!c)
			goto done;
		contiguous = PyObject_IsTrue(c);
		Py_DECREF(c);
		if (contiguous < 0)
			goto done;
	}
	if (!dtype_fits || !contiguous) {
		/* the checks with their messages: they raise, or find that it fits after all
		 * (one element, whatever its strides) */
		PyObject *check = Py_NewRef(bound.check); /* held, as call_held does */
		PyObject *ok = PyObject_CallFunctionObjArgs(check, obj, want, what, NULL);
		Py_DECREF(check);
		if (!ok)
			goto done;
		Py_DECREF(ok);
		if (!dtype_fits) {
			PyErr_Format(PyExc_TypeError,
			             "%S: a CUDA tensor of a dtype that does not fit", what);
			goto done;
		}
	}
	long long index = take_long(call_method0(obj, name_get_device));
	if ((index == -1 && PyErr_Occurred()) || sync_device(index) < 0)
		goto done;
	if (!(ptr = call_method0(obj, name_data_ptr)) ||
	    !(shape = PyObject_GetAttr(obj, name_shape)))
		goto done;
	out = PyTuple_Pack(4, ptr, code, shape, obj);
done:
	Py_XDECREF(code);
	Py_XDECREF(ptr);
	Py_XDECREF(shape);
	return out;
}

PyMethodDef ta_torch_methods[] = {
    {"torch_bind", torch_bind, METH_VARARGS, torch_bind_doc},
    {"torch_sync", torch_sync, METH_O, torch_sync_doc},
    {"torch_operand", (PyCFunction)(void (*)(void))torch_operand, METH_FASTCALL, torch_operand_doc},
    {NULL, NULL, 0, NULL}};

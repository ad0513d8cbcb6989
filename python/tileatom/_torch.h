/* _torch.h: what _torch.c (the reader of torch CUDA tensors) gives the module _core.c
 * builds: its functions, added to tileatom._core at import. */
#ifndef TILEATOM_PY_TORCH_H
#define TILEATOM_PY_TORCH_H

#include <Python.h>

/* torch_bind, torch_sync and torch_operand, ended by a NULL entry. */
extern PyMethodDef ta_torch_methods[];

#endif

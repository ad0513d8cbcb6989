# python/local.mk: the Python package tileatom (a CPython extension over libtileatom-client
# plus its pure-Python layer), its pytest suite run by `make check` (tests/check_python.sh,
# and against `pip install ./python`: tests/check_pip.sh) and its benchmark. Built only when configure found Python and numpy headers.
TILEATOM_PY_SOURCES = python/tileatom/__init__.py python/tileatom/_errors.py \
	python/tileatom/aio.py python/tileatom/__init__.pyi python/tileatom/aio.pyi \
	python/tileatom/_core.pyi python/tileatom/py.typed
EXTRA_DIST += $(TILEATOM_PY_SOURCES) python/tests/conftest.py \
	python/tests/test_ops.py python/tests/test_client.py python/tests/test_pipeline.py \
	python/tests/test_torch.py python/tests/test_torch_reader.py python/tests/test_dlpack.py \
	python/tests/gpu_multiproc.py \
	python/tests/gpu_percall.py \
	python/pytest.ini python/bench/bench_python.py python/pyproject.toml python/setup.py \
	docs/PYTHON.md tests/check_python.sh tests/check_pip.sh

if HAVE_PYTHON_EXT
tileatompydir = $(TILEATOM_PYTHONDIR)/tileatom
tileatompy_LTLIBRARIES = python/tileatom/_core.la
tileatompy_DATA = $(TILEATOM_PY_SOURCES)
python_tileatom__core_la_SOURCES = python/tileatom/_core.c python/tileatom/_torch.c \
	python/tileatom/_torch.h client/tileatom.h
python_tileatom__core_la_CPPFLAGS = -I$(top_srcdir)/client $(PYTHON_EXT_CPPFLAGS)
# Python's and numpy's headers declare what -Wstrict-prototypes and -Wshadow dislike.
python_tileatom__core_la_CFLAGS = -std=gnu11 -Wall -Wextra -Wno-unused-parameter \
	-Wno-missing-field-initializers $(SANITIZER_FLAGS) -fvisibility=hidden
python_tileatom__core_la_LDFLAGS = -module -avoid-version -shared $(SANITIZER_FLAGS)
python_tileatom__core_la_LIBADD = client/libtileatom-client.la

# The package as it runs from the build tree (tests, benchmarks): python/tileatom/ here
# holds the extension and, in a VPATH build, copies of the Python files.
all-local: python-package-stage
.PHONY: python-package-stage
python-package-stage: python/tileatom/_core.la
	@$(MKDIR_P) python/tileatom
	@cp -f python/tileatom/.libs/_core.so python/tileatom/_core.so
	@if test "$(srcdir)" != "."; then \
	  for f in $(TILEATOM_PY_SOURCES); do cp -f "$(srcdir)/$$f" "$$f"; chmod u+w "$$f"; done; \
	fi
CLEANFILES += python/tileatom/_core.so
clean-local: python-clean-stage
.PHONY: python-clean-stage
python-clean-stage:
	@if test "$(srcdir)" != "."; then rm -f $(TILEATOM_PY_SOURCES); fi
	rm -rf python/tileatom/__pycache__ python/tests/__pycache__ python/.pytest_cache

TESTS += tests/check_python.sh tests/check_pip.sh
endif

if HAVE_PYTHON_EXT
# Python imports _core.so alone: libtool's .la of the module is of no use once installed.
install-data-hook: python-remove-la
.PHONY: python-remove-la
python-remove-la:
	rm -f "$(DESTDIR)$(tileatompydir)/_core.la"
endif
if HAVE_PYTHON_EXT
# libtool finds the module's files to remove through its installed .la, which
# python-remove-la deleted: remove the module itself.
uninstall-local: python-uninstall-module
.PHONY: python-uninstall-module
python-uninstall-module:
	rm -f "$(DESTDIR)$(tileatompydir)/_core.so"
endif

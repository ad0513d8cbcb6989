#!/usr/bin/env bash
# tests/check_python.sh: runs the Python package's pytest suite (python/tests) against the
# build tree: the package staged in python/tileatom/ (make builds it), libtileatom-client
# from client/.libs, and tileatomd from daemon/ (the suite's fixture starts it on a private
# socket with the CPU backend). Skipped (77) when the interpreter lacks pytest. In a
# sanitizer build the extension and library need the ASan/UBSan runtimes loaded first.
# Run from the top build folder (as `make check` does); srcdir points at the sources.
set -u
srcdir=${srcdir:-$(dirname "$0")/..}
build=$(pwd)
py=${PYTHON:-$(sed -n 's/^PYTHON = //p' "$build/Makefile")}
py=${py:-/usr/bin/python3}
if ! "$py" -c 'import pytest, numpy' 2>/dev/null; then
	echo "check_python: $py lacks pytest or numpy (apt install python3-pytest python3-numpy)"
	exit 77
fi
[ -f "$build/python/tileatom/_core.so" ] || { echo "check_python: python/tileatom/_core.so is not built" >&2; exit 1; }
export PYTHONPATH="$build/python"
export LD_LIBRARY_PATH="$build/client/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TILEATOM_TEST_DAEMON="$build/daemon/tileatomd"
export PYTHONDONTWRITEBYTECODE=1
if grep -q -- '-fsanitize=address' "$build/Makefile" 2>/dev/null &&
	ldd "$build/client/.libs/libtileatom-client.so" 2>/dev/null | grep -q libasan; then
	cc=$(sed -n 's/^CC = //p' "$build/Makefile")
	cc=${cc##* }
	export LD_PRELOAD="$($cc -print-file-name=libasan.so):$($cc -print-file-name=libubsan.so)"
	# Python itself is not built for LeakSanitizer: its interned objects would be reported
	export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fi
# from the build folder, so that the sources' python/tileatom (no extension there in a VPATH
# build) is not the one imported
exec "$py" -m pytest -q -p no:cacheprovider -c "$srcdir/python/pytest.ini" \
	--rootdir="$srcdir/python" "$srcdir/python/tests"

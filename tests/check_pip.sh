#!/usr/bin/env bash
# tests/check_pip.sh: `pip install ./python` (python/pyproject.toml, python/setup.py) as a
# user would run it, then the package's pytest suite against what pip installed. pip builds
# in a virtual environment that sees the system's packages (numpy, pytest, setuptools:
# --no-build-isolation, so that nothing is downloaded) and compiles the extension against
# this build's libtileatom-client, described to pkg-config by a .pc file written here (as an
# installed one would be). Skipped (77) when the interpreter has no venv, pip, setuptools,
# pytest or numpy, or in a sanitizer build. Run from the top build folder (as `make check`
# does); srcdir points at the sources.
set -u
srcdir=$(cd "${srcdir:-$(dirname "$0")/..}" && pwd)
build=$(pwd)
py=${PYTHON:-$(sed -n 's/^PYTHON = //p' "$build/Makefile")}
py=${py:-/usr/bin/python3}
skip() {
	echo "check_pip: SKIP: $*"
	exit 77
}
"$py" -c 'import setuptools, venv, pip, numpy, pytest' 2>/dev/null ||
	skip "$py lacks venv, pip, setuptools, numpy or pytest (apt install python3-venv python3-pip python3-setuptools python3-numpy python3-pytest)"
command -v pkg-config >/dev/null 2>&1 || skip "no pkg-config"
[ -f "$build/client/.libs/libtileatom-client.so" ] || skip "no shared libtileatom-client in client/.libs"
ldd "$build/client/.libs/libtileatom-client.so" 2>/dev/null | grep -q libasan &&
	skip "a sanitizer build (an extension built by pip would need the runtimes preloaded)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tileatom-pip.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/pc" "$tmp/include"
cp "$srcdir/client/tileatom.h" "$tmp/include/"
version=$(sed -n 's/^Version: //p' "$build/client/tileatom-client.pc")
cat >"$tmp/pc/tileatom-client.pc" <<PC
Name: tileatom-client
Description: libtileatom-client of this build (tests/check_pip.sh)
Version: $version
Libs: -L$build/client/.libs -ltileatom-client
Cflags: -I$tmp/include
PC
# a copy of the sources, as pip builds in place (and the source tree stays clean)
cp -r "$srcdir/python" "$tmp/src"
rm -rf "$tmp/src/tileatom/__pycache__" "$tmp/src/tileatom/_core.so" "$tmp/src/build"
"$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/venv.log" 2>&1 ||
	skip "python3 -m venv failed: $(tail -1 "$tmp/venv.log")"
if ! PKG_CONFIG_PATH="$tmp/pc" "$tmp/venv/bin/python" -m pip install --no-build-isolation \
	--no-deps --no-index --no-cache-dir "$tmp/src" >"$tmp/pip.log" 2>&1; then
	echo "check_pip: pip install failed:"
	cat "$tmp/pip.log"
	exit 1
fi
# the installed package, not a copy in a source or build folder
cd "$tmp" || exit 1
where=$(env -u PYTHONPATH "$tmp/venv/bin/python" -c 'import tileatom, tileatom._core as c; print(tileatom.__version__, tileatom.library_version(), c.__file__)') || {
	echo "check_pip: the installed package does not import"
	exit 1
}
echo "check_pip: installed: $where"
case $where in
*"$tmp/venv/"*) ;;
*)
	echo "check_pip: tileatom was imported from outside the virtual environment"
	exit 1
	;;
esac
export TILEATOM_TEST_DAEMON="$build/daemon/tileatomd"
export PYTHONDONTWRITEBYTECODE=1
exec env -u PYTHONPATH "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider \
	-c "$srcdir/python/pytest.ini" --rootdir="$tmp" "$srcdir/python/tests"

#!/bin/sh
# scripts/gpu-python.sh: the Python client on the GPU machine. The extension must match the
# python3 that runs it (the GPU machine's is not Debian's), so the carry holds its source and
# a shared libtileatom-client built here, and the extension is compiled there.
#
#   scripts/gpu-python.sh pack [BUILD]   here, after `scripts/gpu-run.sh pack` (which makes
#                                        gpu-carry/ with tileatomd and tileatom-histbench of
#                                        the CUDA build): builds libtileatom-client.so in BUILD
#                                        (default build-gpu-py, configured --without-cuda: the
#                                        client library needs no CUDA) and copies into
#                                        gpu-carry/python/ the package's Python files, the
#                                        extension's source and header, and that library with
#                                        the shared libraries it needs (but OpenSSL's).
#   scripts/gpu-python.sh run [CARRY]    there, from the repository root: compiles
#                                        tileatom._core for that python3 (gcc, Python.h,
#                                        numpy's headers) under $OUT, starts
#                                        CARRY/tileatomd --backend cuda and runs
#                                        python/tests/gpu_multiproc.py against it with the C
#                                        peer CARRY/tileatom-histbench --from device. When
#                                        python3, numpy, torch with CUDA, gcc or Python.h is
#                                        missing it prints one "SKIP: ..." line naming it and
#                                        exits 0; otherwise it exits with the check's status.
#                                        GPU_PY_ARGS: more options of gpu_multiproc.py;
#                                        GPU_PY_DAEMON_ARGS: more options of the daemon.
set -u
mode=${1:-run}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1

if [ "$mode" = pack ]; then
	build=${2:-build-gpu-py}
	if [ ! -d gpu-carry ]; then
		echo "gpu-python.sh: no gpu-carry/: run scripts/gpu-run.sh pack first" >&2
		exit 1
	fi
	mkdir -p "$build"
	if [ ! -f "$build/Makefile" ]; then
		(cd "$build" && "$here/configure" --without-cuda >/dev/null) || exit 1
	fi
	(cd "$build" && make -j2 client/libtileatom-client.la) || exit 1
	lib="$build/client/.libs/libtileatom-client.so.0"
	if [ ! -f "$lib" ]; then
		echo "gpu-python.sh: $lib was not built (a --disable-shared build folder?)" >&2
		exit 1
	fi
	rm -rf gpu-carry/python
	mkdir -p gpu-carry/python/tileatom gpu-carry/python/include gpu-carry/python/lib || exit 1
	cp python/tileatom/*.py python/tileatom/*.pyi python/tileatom/py.typed \
		gpu-carry/python/tileatom/ || exit 1
	cp python/tileatom/_core.c python/tileatom/_torch.c python/tileatom/_torch.h \
		gpu-carry/python/ || exit 1
	cp client/tileatom.h gpu-carry/python/include/ || exit 1
	cp -L "$lib" gpu-carry/python/lib/ || exit 1
	# the libraries it needs beyond the C runtime and OpenSSL (protobuf-c), beside it: the
	# python3 there loads only these, not gpu-carry/rt's (Debian's libcrypto could shadow
	# the one its own modules were built against)
	ldd "$lib" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
		grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libcrypto|libssl|ld-linux[^/]*)\.so' |
		while read -r dep; do
			cp -L "$dep" gpu-carry/python/lib/ || exit 1
		done || exit 1
	du -sh gpu-carry
	exit 0
fi

carry=${2:-gpu-carry}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
# python3 loads the client library and its dependencies from CARRY/python/lib; the C
# programs of the carry (tileatomd, tileatom-histbench) run with CARRY/rt
export LD_LIBRARY_PATH="$here/$carry/python/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rt="$here/$carry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1

skip() {
	echo "SKIP: gpu-python.sh: $*"
	exit 0
}

echo "== the Python client on the GPU"
command -v python3 >/dev/null 2>&1 || skip "no python3"
python3 -c 'import numpy' 2>/dev/null || skip "python3 has no numpy"
python3 -c 'import torch' 2>/dev/null || skip "python3 has no torch"
python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' ||
	skip "torch sees no CUDA device"
command -v gcc >/dev/null 2>&1 || skip "no gcc to build the extension"
inc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$inc/Python.h" ] || skip "no Python.h in $inc (the python3 development headers)"
[ -f "$carry/python/_core.c" ] && [ -f "$carry/python/_torch.c" ] &&
	[ -f "$carry/python/lib/libtileatom-client.so.0" ] ||
	skip "no $carry/python: run scripts/gpu-run.sh pack and scripts/gpu-python.sh pack here first"
[ -x "$carry/tileatomd" ] || skip "no $carry/tileatomd: run scripts/gpu-run.sh pack first"
npinc=$(python3 -c 'import numpy; print(numpy.get_include())')
suffix=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX") or ".so")')

pkg="$OUT/pypkg/tileatom"
rm -rf "$OUT/pypkg"
mkdir -p "$pkg" || exit 1
cp "$carry"/python/tileatom/* "$pkg/" || exit 1
echo "building tileatom._core for $(python3 -c 'import sys; print(sys.version.split()[0])')" \
	"(numpy $(python3 -c 'import numpy; print(numpy.__version__)'))"
if ! gcc -shared -fPIC -O2 -std=gnu11 -fvisibility=hidden -I"$inc" -I"$npinc" \
	-I"$carry/python/include" "$carry/python/_core.c" "$carry/python/_torch.c" \
	"$here/$carry/python/lib/libtileatom-client.so.0" -Wl,-rpath,"$here/$carry/python/lib" \
	-o "$pkg/_core$suffix" \
	>"$OUT/python-ext-build.log" 2>&1; then
	echo "gpu-python.sh: the extension did not build:"
	tail -20 "$OUT/python-ext-build.log"
	exit 1
fi
export PYTHONPATH="$OUT/pypkg${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import tileatom; print("tileatom", tileatom.__version__, "over", tileatom.library_version())' ||
	exit 1

sock="$OUT/python-gpu.sock"
rm -f "$sock"
# shellcheck disable=SC2086 # GPU_PY_DAEMON_ARGS: more daemon options, split on spaces
LD_LIBRARY_PATH="$rt" "$carry/tileatomd" --socket "$sock" --backend cuda --log-level err \
	${GPU_PY_DAEMON_ARGS:-} 2>"$OUT/python-daemon.log" &
dpid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
if [ ! -S "$sock" ]; then
	echo "gpu-python.sh: tileatomd --backend cuda did not start:"
	tail -5 "$OUT/python-daemon.log"
	kill -TERM $dpid 2>/dev/null
	exit 1
fi
# the C peer, run by gpu_multiproc.py with the carry's libraries
printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$rt" "$here/$carry/tileatom-histbench" \
	>"$OUT/histbench.sh" && chmod +x "$OUT/histbench.sh" || exit 1
timeout 500 python3 python/tests/gpu_multiproc.py --socket "$sock" \
	--histbench "$OUT/histbench.sh" ${GPU_PY_ARGS:-} 2>&1 | tee "$OUT/gpu_multiproc.txt"
rc=$(sed -n 's/^gpu_multiproc: \(PASS\|FAIL\)$/\1/p' "$OUT/gpu_multiproc.txt")
kill -TERM $dpid
wait $dpid
echo "tileatomd exit $?"
case "$rc" in
PASS) exit 0 ;;
*) if grep -q '^SKIP:' "$OUT/gpu_multiproc.txt"; then exit 0; fi
	exit 1 ;;
esac

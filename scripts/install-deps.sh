#!/usr/bin/env bash
# scripts/install-deps.sh: installs the Debian 12 packages tileatom needs to build and test,
# skipping those already installed. Uses sudo when not run as root.
#   (no option)  what building, running and testing need: README's test command and .ci/run
#                (Check for make check; clang and libclang-rt for make check-fuzz's libFuzzer
#                target, about 500 MB together)
#   --demo   only what building and running tileatom need (scripts/demo.sh): no Check,
#            no clang, no Python headers; configure then builds no test suites and no
#            Python package, and make check-fuzz is unavailable
#   --bench  also installs what benchmarks/vs-redis and benchmarks/plot-throughput use
#            (redis-server, redis-tools, gnuplot-nox; redis is not started or enabled
#            as a service: vs-redis starts its own on a private socket) and what
#            benchmarks/hist-vs-numpy compares with (python3-numpy), and the Python
#            client's benchmark's peer (python3-redis, python3-hiredis).
#   --torch  also installs Debian's CPU build of torch (python3-torch, about 580 MB with
#            its libraries, 170 packages): the Python suite's torch tests skip without it.
# The Python package (python/) needs python3-dev and python3-numpy; its tests pytest and
# pytest-asyncio, and the `pip install ./python` test venv, pip and setuptools (all in the
# default set, none with --demo).
set -euo pipefail
# What the build and the daemon need (configure's required libraries and tools).
build_pkgs="build-essential autoconf automake libtool pkg-config libuv1-dev libprotobuf-c-dev
      protobuf-c-compiler libinih-dev libjson-c-dev libmicrohttpd-dev libssl-dev libxxhash-dev"
# What the tests add: Check (and its subunit library) for make check, clang and its
# runtime libraries (libFuzzer, the sanitizers) for make check-fuzz, and the Python
# package's build (configure skips it without them) and its tests.
test_pkgs="check libsubunit-dev clang libclang-rt-dev
      python3-dev python3-numpy python3-pytest python3-pytest-asyncio
      python3-venv python3-pip python3-setuptools"
usage="usage: install-deps.sh [--demo] [--bench] [--torch]"
bench=0
demo=0
torch=0
for arg in "$@"; do
	case "$arg" in
	--bench) bench=1 ;;
	--demo) demo=1 ;;
	--torch) torch=1 ;;
	-h | --help)
		echo "Usage: bash scripts/install-deps.sh [--demo] [--bench] [--torch]"
		echo "  (no option)  build, run and test (make check, make check-fuzz, make distcheck)"
		echo "  --demo       build and run only (scripts/demo.sh): no Check, clang or Python"
		echo "  --bench      also redis, gnuplot, numpy and the Python Redis clients for benchmarks/"
		echo "  --torch      also Debian's CPU build of torch (the Python suite's torch tests)"
		exit 0
		;;
	*)
		echo "install-deps: unknown option $arg ($usage)" >&2
		exit 2
		;;
	esac
done
pkgs="$build_pkgs"
[ "$demo" -eq 1 ] || pkgs="$pkgs $test_pkgs"
[ "$bench" -eq 1 ] && pkgs="$pkgs redis-server redis-tools gnuplot-nox python3-numpy python3-redis python3-hiredis"
[ "$torch" -eq 1 ] && pkgs="$pkgs python3-torch"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "install-deps: missing packages:$missing" >&2
		echo "install-deps: not running as root and sudo is not installed; run as root:" >&2
		echo "  apt-get install -y$missing" >&2
		exit 1
	fi
	SUDO="sudo"
fi
$SUDO apt-get update -qq
if [ "$bench" -eq 1 ]; then
	# Keep the redis-server package from starting (or enabling) its system service:
	# a policy-rc.d that refuses every service action, for the time of the install only.
	# Without an init system (containers) nothing would start anyway.
	policy=/usr/sbin/policy-rc.d
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
		$SUDO chmod 755 "$policy"
		trap '$SUDO rm -f "$policy"' EXIT
	fi
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
case " $missing " in
*" redis-server "*)
	# The package just installed enables its unit for the next boot; tileatom's
	# benchmarks do not want it (a redis-server installed before is left alone).
	if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
		$SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true
	fi
	;;
esac

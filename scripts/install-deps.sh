#!/usr/bin/env bash
# scripts/install-deps.sh: installs the Debian 12 packages tileatom needs to build and test,
# skipping those already installed. Uses sudo when not run as root.
#   --bench  also installs what benchmarks/vs-redis and benchmarks/plot-throughput use
#            (redis-server, redis-tools, gnuplot-nox; redis is not started or enabled
#            as a service: vs-redis starts its own on a private socket) and what
#            benchmarks/hist-vs-numpy compares with (python3-numpy), and the Python
#            client's benchmark's peer (python3-redis, python3-hiredis).
#   --torch  also installs Debian's CPU build of torch (python3-torch, about 580 MB with
#            its libraries, 170 packages): the Python suite's torch tests skip without it.
# The Python package (python/) needs python3-dev and python3-numpy; its tests pytest and
# pytest-asyncio.
set -euo pipefail
pkgs="build-essential autoconf automake libtool pkg-config libuv1-dev libprotobuf-c-dev
      protobuf-c-compiler check libsubunit-dev libinih-dev
      libjson-c-dev libmicrohttpd-dev libssl-dev libxxhash-dev
      clang libclang-rt-dev
      python3-dev python3-numpy python3-pytest python3-pytest-asyncio"
bench=0
torch=0
for arg in "$@"; do
	case "$arg" in
	--bench) bench=1 ;;
	--torch) torch=1 ;;
	-h | --help)
		echo "Usage: bash scripts/install-deps.sh [--bench] [--torch]"
		exit 0
		;;
	*)
		echo "install-deps: unknown option $arg (usage: install-deps.sh [--bench] [--torch])" >&2
		exit 2
		;;
	esac
done
[ "$bench" -eq 1 ] && pkgs="$pkgs redis-server redis-tools gnuplot-nox python3-redis python3-hiredis"
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

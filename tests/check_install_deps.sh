#!/usr/bin/env bash
# tests/check_install_deps.sh: scripts/install-deps.sh's package sets and its refusal without
# sudo. Runs the script with a PATH of stand-ins: dpkg-query reports nothing installed, id
# says uid 1000, and there is no sudo, so the script stops with exit status 1 and names the
# command to run as root (rather than "sudo: command not found"); apt-get must not be
# reached. That command's package list is what each option would install:
#   no option  the build packages and the test ones (Check, clang, libclang-rt-dev, the
#              Python package's headers and test tools);
#   --demo     the build packages only (what scripts/demo.sh needs; none of those);
#   --bench    adds redis-server and the other benchmark tools to either;
#   --torch    adds python3-torch.
# Also: an unknown option exits 2, and scripts/demo.sh asks for --demo.
set -u
srcdir=${srcdir:-$(dirname "$0")/..}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
printf '#!/bin/sh\nexit 1\n' >"$tmp/bin/dpkg-query"
printf '#!/bin/sh\necho 1000\n' >"$tmp/bin/id"
printf '#!/bin/sh\necho "apt-get reached" >&2\nexit 99\n' >"$tmp/bin/apt-get"
chmod +x "$tmp/bin/dpkg-query" "$tmp/bin/id" "$tmp/bin/apt-get"
for tool in grep cat; do
	ln -s "$(command -v "$tool")" "$tmp/bin/$tool"
done
bash=$(command -v bash)
fail=0

# run_deps NAME ARGS...: runs install-deps.sh with ARGS; its stderr goes to $tmp/NAME.err,
# the package list of the root command it prints to $tmp/NAME.pkgs (one a line).
run_deps() {
	local name=$1
	shift
	PATH="$tmp/bin" "$bash" "$srcdir/scripts/install-deps.sh" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	status=$?
	sed -n 's/^  apt-get install -y //p' "$tmp/$name.err" | tr ' ' '\n' | sed '/^$/d' >"$tmp/$name.pkgs"
}

# expect NAME yes|no PACKAGE...: each PACKAGE is (yes) or is not (no) in NAME's list.
expect() {
	local name=$1 want=$2 p
	shift 2
	for p in "$@"; do
		if grep -qx "$p" "$tmp/$name.pkgs"; then
			[ "$want" = yes ] || { echo "check_install_deps: $name installs $p" >&2; fail=1; }
		else
			[ "$want" = no ] || { echo "check_install_deps: $name does not install $p" >&2; fail=1; }
		fi
	done
}

build="build-essential autoconf automake libtool pkg-config libuv1-dev libprotobuf-c-dev
       protobuf-c-compiler libinih-dev libjson-c-dev libmicrohttpd-dev libssl-dev libxxhash-dev"
testing="check libsubunit-dev clang libclang-rt-dev python3-dev python3-numpy python3-pytest
         python3-pytest-asyncio"
testing_not_bench="check libsubunit-dev clang libclang-rt-dev python3-dev python3-pytest
         python3-pytest-asyncio"
bench="redis-server redis-tools gnuplot-nox python3-numpy python3-redis python3-hiredis"

for set in default demo bench demo_bench torch; do
	case $set in
	default) run_deps $set ;;
	demo) run_deps $set --demo ;;
	bench) run_deps $set --bench ;;
	demo_bench) run_deps $set --demo --bench ;;
	torch) run_deps $set --torch ;;
	esac
	[ "$status" -eq 1 ] || { echo "check_install_deps: $set: exit status $status, expected 1" >&2; fail=1; }
	grep -q "not running as root and sudo is not installed" "$tmp/$set.err" ||
		{ echo "check_install_deps: $set: no 'sudo is not installed' message" >&2; fail=1; }
	[ -s "$tmp/$set.pkgs" ] || { echo "check_install_deps: $set: the command to run as root is not shown" >&2; fail=1; }
	if grep -q "apt-get reached\|command not found" "$tmp/$set.err"; then
		echo "check_install_deps: $set: it went on without sudo" >&2
		fail=1
	fi
	# shellcheck disable=SC2086
	expect $set yes $build
done
# shellcheck disable=SC2086
{
	expect default yes $testing
	expect default no redis-server redis-tools gnuplot-nox python3-redis python3-hiredis python3-torch
	expect demo no $testing $bench python3-torch
	expect bench yes $testing $bench
	expect bench no python3-torch
	expect demo_bench no $testing_not_bench
	expect demo_bench yes $bench
	expect torch yes $testing python3-torch
}
n_build=$(echo "$build" | wc -w)
n_demo=$(wc -l <"$tmp/demo.pkgs")
[ "$n_demo" -eq "$n_build" ] ||
	{ echo "check_install_deps: --demo installs $n_demo packages, expected the $n_build build ones" >&2; fail=1; }

run_deps unknown --no-such-option
[ "$status" -eq 2 ] || { echo "check_install_deps: an unknown option exits $status, expected 2" >&2; fail=1; }
grep -q "unknown option --no-such-option" "$tmp/unknown.err" ||
	{ echo "check_install_deps: an unknown option is not named" >&2; fail=1; }

grep -q '^bash scripts/install-deps.sh --demo$' "$srcdir/scripts/demo.sh" ||
	{ echo "check_install_deps: scripts/demo.sh does not install with --demo" >&2; fail=1; }

if [ "$fail" -ne 0 ]; then
	for f in "$tmp"/*.err; do
		echo "--- $f" >&2
		cat "$f" >&2
	done
	exit 1
fi
echo "check_install_deps: each option's package set is right; a user without sudo is told what to run as root"

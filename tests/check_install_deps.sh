#!/usr/bin/env bash
# tests/check_install_deps.sh: scripts/install-deps.sh run by a user who is not root, on a
# machine without sudo, with packages missing, stops with exit status 1 and a message that
# says so and names the command to run as root (rather than "sudo: command not found").
# Runs the script with a PATH of stand-ins: dpkg-query reports nothing installed, id says
# uid 1000, and there is no sudo; apt-get must not be reached.
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
PATH="$tmp/bin" "$bash" "$srcdir/scripts/install-deps.sh" >"$tmp/out" 2>"$tmp/err"
status=$?
fail=0
[ "$status" -eq 1 ] || { echo "check_install_deps: exit status $status, expected 1" >&2; fail=1; }
grep -q "not running as root and sudo is not installed" "$tmp/err" ||
	{ echo "check_install_deps: no 'sudo is not installed' message" >&2; fail=1; }
grep -q "^  apt-get install -y .*libjson-c-dev" "$tmp/err" ||
	{ echo "check_install_deps: the command to run as root is not shown" >&2; fail=1; }
if grep -q "apt-get reached\|command not found" "$tmp/err"; then
	echo "check_install_deps: it went on without sudo" >&2
	fail=1
fi
[ "$fail" -eq 0 ] || { cat "$tmp/err" >&2; exit 1; }
echo "check_install_deps: a user without sudo is told what to run as root"

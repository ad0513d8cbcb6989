#!/usr/bin/env bash
# scripts/install-deps.sh: installs the Debian 12 packages tileatom needs to build and test,
# skipping those already installed. Uses sudo when not run as root.
set -euo pipefail
pkgs="build-essential autoconf automake libtool pkg-config libuv1-dev libprotobuf-c-dev
      protobuf-c-compiler check libsubunit-dev libinih-dev"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing

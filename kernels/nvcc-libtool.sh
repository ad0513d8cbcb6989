#!/bin/sh
# kernels/nvcc-libtool.sh: lets libtool's compile mode drive nvcc.
# libtool adds the host compiler's PIC flags (-fPIC, -fpic) to the command it runs; nvcc
# refuses them as its own options, so they are handed to the host compiler instead. Every
# other argument reaches nvcc unchanged. Usage: nvcc-libtool.sh NVCC [ARGS...]
set -eu
if [ "$#" -lt 1 ]; then
    echo "usage: $0 NVCC [ARGS...]" >&2
    exit 2
fi
nvcc=$1
shift
for arg in "$@"; do
    shift
    case $arg in
    -fPIC | -fpic) set -- "$@" "--compiler-options=$arg" ;;
    *) set -- "$@" "$arg" ;;
    esac
done
exec "$nvcc" "$@"

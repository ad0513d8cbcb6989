"""setup.py: the extension module of `pip install ./python` (pyproject.toml holds the rest).

tileatom._core is compiled from tileatom/_core.c and tileatom/_torch.c against an installed
libtileatom-client, whose compiler and linker flags come from `pkg-config tileatom-client`
(PKG_CONFIG_PATH finds one under another prefix); a library outside the linker's default
folders is found at run time through an rpath. The version is the package's own (tileatom/__init__.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
SYSTEM_LIBDIRS = {"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/lib/x86_64-linux-gnu",
                  "/usr/lib/aarch64-linux-gnu"}


def pkg_config(*args: str) -> list[str]:
    """`pkg-config ARGS tileatom-client`, split; a clear error when it cannot answer."""
    if shutil.which("pkg-config") is None:
        raise SystemExit("tileatom: pkg-config is missing (apt install pkg-config)")
    try:
        out = subprocess.run(["pkg-config", *args, "tileatom-client"], check=True,
                             capture_output=True, text=True).stdout
    except subprocess.CalledProcessError as exc:
        raise SystemExit("tileatom: pkg-config does not find tileatom-client: install "
                         "libtileatom-client first (make install in the source tree), or "
                         "set PKG_CONFIG_PATH to the folder holding tileatom-client.pc\n"
                         + exc.stderr) from exc
    return out.split()


def version() -> str:
    """The __version__ that tileatom/__init__.py states."""
    with open(os.path.join(HERE, "tileatom", "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise SystemExit("tileatom: no __version__ in tileatom/__init__.py")
    return m.group(1)


cflags = pkg_config("--cflags")
libs = pkg_config("--libs")
libdirs = [f[2:] for f in libs if f.startswith("-L")]
core = Extension(
    "tileatom._core",
    sources=["tileatom/_core.c", "tileatom/_torch.c"],
    depends=["tileatom/_torch.h"],
    include_dirs=[numpy.get_include()] + [f[2:] for f in cflags if f.startswith("-I")],
    library_dirs=libdirs,
    libraries=[f[2:] for f in libs if f.startswith("-l")],
    runtime_library_dirs=[d for d in libdirs if d not in SYSTEM_LIBDIRS],
    extra_compile_args=["-std=gnu11", "-fvisibility=hidden"],
)

setup(version=version(), ext_modules=[core])

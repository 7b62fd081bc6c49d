"""The public C headers: each compiles on its own (gcc and clang, C11, warnings as errors), and a
device plugin needs exactly one of them, openaccel/device_abi.h, and links nothing of libopenaccel."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from openaccel.paths import project_root, runtime_dir

INCLUDE = runtime_dir() / "include"
HEADERS = sorted(p.name for p in (INCLUDE / "openaccel").glob("*.h"))
STRICT = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wshadow", "-Wstrict-prototypes", "-Wvla"]
COMPILERS = [cc for cc in ("gcc", "clang") if shutil.which(cc)]
PLUGINS = sorted((project_root() / "examples" / "vendor_device").glob("*_device.c"))


def test_the_split_headers_exist() -> None:
    assert {"allocator.h", "device.h", "device_abi.h", "registry.h"} <= set(HEADERS)


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("header", HEADERS)
def test_header_compiles_alone(cc: str, header: str, tmp_path: Path) -> None:
    src = tmp_path / "one.c"
    src.write_text(f'#include "openaccel/{header}"\nint oa_test_unit(void);\nint oa_test_unit(void) {{ return 0; }}\n')
    r = subprocess.run([cc, *STRICT, f"-I{INCLUDE}", "-c", str(src), "-o", str(tmp_path / "one.o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_device_h_still_gives_old_code_everything() -> None:
    """Code written against the single device.h (vtable, registry, allocator) keeps compiling."""
    src = ('#include "openaccel/device.h"\n'
           "static oa_status_t props(oa_device_t *d, oa_device_properties_t *p) { (void)d; (void)p; return OA_OK; }\n"
           "int oa_test_unit(void);\n"
           "int oa_test_unit(void) {\n"
           "  static const oa_device_vtable_t vt = {.abi_version = OA_DEVICE_ABI_VERSION,\n"
           "      .struct_size = sizeof(oa_device_vtable_t), .get_properties = props};\n"
           "  oa_registry_t reg; oa_allocator_t a = oa_platform_allocator(); oa_registry_init(&reg, &a);\n"
           "  oa_memory_stats_t st; (void)st; (void)vt;\n"
           "  return (int)oa_device_count(&reg) + OA_REGISTRY_MAX_DEVICES;\n"
           "}\n")
    r = subprocess.run(["cc", *STRICT, f"-I{INCLUDE}", "-x", "c", "-fsyntax-only", "-"], input=src,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_plugins_include_only_the_abi_header(plugin: Path) -> None:
    includes = re.findall(r'#include\s+"(openaccel/[^"]+)"', plugin.read_text())
    assert includes == ["openaccel/device_abi.h"]


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_plugin_links_nothing_of_openaccel(cc: str, tmp_path: Path) -> None:
    """device_abi.h's helpers are header-only: a library using them links with --no-undefined
    and needs no oa_* symbol from anywhere."""
    src = tmp_path / "mini.c"
    src.write_text('#include "openaccel/device_abi.h"\n'
                   "static uint32_t count(const oa_device_factory_t *f) { (void)f; return 0; }\n"
                   "static oa_status_t create(const oa_device_factory_t *f, uint32_t i, const oa_allocator_t *a,\n"
                   "                          oa_device_t **out) {\n"
                   "  (void)f; (void)a; (void)out;\n"
                   "  return oa_abi_diag_fail(NULL, OA_ERR_NOT_FOUND, \"no device %u\", (unsigned)i);\n"
                   "}\n"
                   "static const oa_device_factory_t k_factory = {OA_DEVICE_ABI_VERSION, \"vendor.mini\", NULL,\n"
                   "                                             count, create};\n"
                   "OA_DEVICE_EXPORT const oa_device_factory_t *oa_device_factory(void);\n"
                   "OA_DEVICE_EXPORT const oa_device_factory_t *oa_device_factory(void) { return &k_factory; }\n")
    lib = tmp_path / "libmini.so"
    r = subprocess.run([cc, *STRICT, "-fPIC", "-shared", "-fvisibility=hidden", "-Wl,--no-undefined", f"-I{INCLUDE}",
                        str(src), "-o", str(lib)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    nm = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True, check=True).stdout
    oa_symbols = sorted(w[-1] for w in (line.split() for line in nm.splitlines()) if w and w[-1].startswith("oa_"))
    assert oa_symbols == ["oa_device_factory"], nm

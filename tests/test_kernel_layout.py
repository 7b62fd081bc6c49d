"""The CPU kernels' layout (runtime_c/src/cpu/kernels/) stays as documented in kernels.def and
isa.h, so it cannot rot:

- every op has one "ref" line and at most one "opt" line in kernels.def (registered once, the ISA
  is picked at prepare), and no other variant;
- an op's opt kernel lives in opt/<the file of its ref kernel>.c (ExecuTorch's portable/optimized
  same-name rule), and every opt/*.c that registers kernels has a ref/ twin;
- only arch/ files hold ISA intrinsics, and the ISA files are the only ones CMake builds with ISA
  flags;
- the SIMD family uses the one SIMD layer (simd/vec.h), templates end in .inc."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KDIR = ROOT / "runtime_c" / "src" / "cpu" / "kernels"
LINE = re.compile(r'^OA_KERNEL\("(\w+)", "(\w+)", [^,]+, (\w+), (\w+)\)$')


def _table() -> list[tuple[str, str, str, str]]:
    rows = []
    for line in (KDIR / "kernels.def").read_text().splitlines():
        if line.startswith("OA_KERNEL"):
            m = LINE.match(line)
            assert m, f"kernels.def: not one OA_KERNEL(op, variant, dtypes, prepare, run) line: {line}"
            rows.append((m.group(1), m.group(2), m.group(3), m.group(4)))
    return rows


def _defining_file(directory: Path, fn: str) -> list[str]:
    """Files of `directory` that define `fn`: written out, or made by a macro taking the op's name
    first (UNARY_KERNEL(neg, ...) in ref/, OA_OPT_SHARED / OA_OPT_SIMD in opt/)."""
    m = re.fullmatch(r"oa_(?:ref|opt)_(\w+)_(?:prepare|run)", fn)
    name = m.group(1) if m else fn
    found = []
    for p in sorted(directory.glob("*.c")):
        text = p.read_text()
        if re.search(rf"^oa_status_t {fn}\([^;{{]*\{{", text, re.M) or re.search(rf"^[A-Z_0-9]+\({name}\b", text, re.M):
            found.append(p.name)
    return found


def test_one_ref_and_at_most_one_opt_kernel_per_op() -> None:
    rows = _table()
    assert rows, "no kernels in kernels.def"
    variants: dict[str, list[str]] = {}
    for op, variant, _, _ in rows:
        variants.setdefault(op, []).append(variant)
    for op, vs in variants.items():
        assert vs.count("ref") == 1, f"{op}: {vs}"
        assert set(vs) <= {"ref", "opt"} and vs.count("opt") <= 1, f"{op}: one opt line per op, not per ISA: {vs}"
    for op, variant, prepare, run in rows:
        if variant == "opt":
            assert (prepare, run) == (f"oa_opt_{op}_prepare", f"oa_opt_{op}_run"), (op, prepare, run)


def test_opt_kernels_mirror_the_ref_file_names() -> None:
    ref_file: dict[str, str] = {}
    for op, variant, prepare, _ in _table():
        if variant == "ref":
            files = _defining_file(KDIR / "ref", prepare)
            assert len(files) == 1, f"{op}: {prepare} defined in ref/{files}"
            ref_file[op] = files[0]
    for op, variant, prepare, run in _table():
        if variant != "opt":
            continue
        for fn in (prepare, run):
            files = _defining_file(KDIR / "opt", fn)
            assert files == [ref_file[op]], (
                f"{op}: {fn} should be in opt/{ref_file[op]} (its reference kernel's file name), found in {files}")
    registers = re.compile(r"^OA_OPT_(SHARED|SIMD)\(|^oa_status_t oa_opt_\w+_prepare\([^;{]*\{", re.M)
    registering = {p.name for p in (KDIR / "opt").glob("*.c") if registers.search(p.read_text())}
    twins = {p.name for p in (KDIR / "ref").glob("*.c")}
    assert registering <= twins, f"opt/ files without a ref/ twin: {sorted(registering - twins)}"


def test_intrinsics_only_in_arch_and_the_simd_layer() -> None:
    allowed = {KDIR / "simd" / "vec.h"}
    for p in sorted(KDIR.rglob("*")):
        if p.suffix not in (".c", ".h", ".inc") or p in allowed or (KDIR / "arch") in p.parents:
            continue
        text = p.read_text()
        for pat in (r"#include <immintrin\.h>", r"#include <arm_neon\.h>", r"\b_mm256_\w+\(", r"\bvld1q_f32\(",
                    r"\b_mm512_\w+\("):
            assert not re.search(pat, text), f"{p.relative_to(ROOT)}: ISA code outside arch/ and simd/vec.h ({pat})"
    cmake = (ROOT / "runtime_c" / "CMakeLists.txt").read_text()
    flagged = re.findall(r"set_source_files_properties\(([^)]*)PROPERTIES COMPILE_OPTIONS", cmake)
    assert flagged and all("arch/x86/avx2" in f or "OA_AVX2_SOURCES" in f
                           or "arch/x86/avx512" in f or "OA_AVX512_SOURCES" in f
                           or "arch/x86/amx" in f or "OA_AMX_SOURCES" in f
                           or "arch/arm/neon/quant_i8mm.c" in f for f in flagged), flagged


def test_templates_are_named_inc_and_dwconv_uses_the_simd_layer() -> None:
    assert not list(KDIR.rglob("*_tmpl.inc")) and not list(KDIR.rglob("simd_impl*"))
    for name in ("dwconv.inc", "dwconv_nhwc.inc"):
        text = (KDIR / "opt" / name).read_text()
        assert not re.search(r"\b(VT|VLOADU|VSET1|VFMA|VSTOREU|VSTOREN|VACT)\b", text), name
    for p in sorted((KDIR / "arch").rglob("dwconv.c")):
        assert "kernels/simd/vec.h" in p.read_text(), p

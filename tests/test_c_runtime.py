"""The C runtime's own tests, built with AddressSanitizer + UndefinedBehaviorSanitizer, and a
bounded libFuzzer run of the loader/executor over a seed corpus of real and hand-built programs,
mutated by values of fields (dims, offsets, tensor indices, ops, arguments: fuzz/mutate_oab.c) as
well as by bytes. `make fuzz` runs it longer (OA_FUZZ_SECONDS, OA_FUZZ_CORPUS to keep the corpus).

The programs are the checked-in fixtures (runtime_c/tests/fixtures: tiny IR-built programs, the
hand-built edge cases of craft.py, a newer-format file; `make test-c` runs the C tests on those
alone, without Python) plus the torch exports below; the first test here keeps the checked-in ones
current (gen_fixtures.py --check)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import openaccel as oa
from openaccel import zoo
from openaccel.conformance import build_vendor_example
from openaccel.runtime.build import RuntimeBuild, build_runtime

ROOT = Path(__file__).resolve().parents[1]
CHECKED_IN = ROOT / "runtime_c" / "tests" / "fixtures"

FUZZ_SECONDS = int(os.environ.get("OA_FUZZ_SECONDS", "60"))
FUZZ_CORPUS = os.environ.get("OA_FUZZ_CORPUS", "")


class _ResBlock(torch.nn.Module):
    """conv-relu-conv + identity, relu: Winograd convolutions (F(2x2) and F(4x4)) with a fused
    residual add in the fuzz corpus"""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.c3 = torch.nn.Conv2d(8, 8, 3, padding=0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = torch.relu(self.c1(x))
        return self.c3(torch.relu(self.c2(r) + x))


class _MBBlock(torch.nn.Module):
    """stem conv, an inverted-residual block with a residual add: channels-last (permutes,
    conv2d_nhwc with packed weights, a fused mbconv_nhwc) in the fuzz corpus"""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.expand = torch.nn.Conv2d(8, 24, 1)
        self.dw = torch.nn.Conv2d(24, 24, 3, padding=1, groups=24)
        self.project = torch.nn.Conv2d(24, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.nn.functional.relu6(self.stem(x))
        e = torch.nn.functional.relu6(self.dw(torch.nn.functional.relu6(self.expand(s))))
        return s + self.project(e)


class _OpsMix(torch.nn.Module):
    """25 ops in one small program (norms, pooling, cat, permute, attention, indexing, reductions,
    where): the structured fuzzer mutates the dims and arguments of each"""

    def __init__(self) -> None:
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(4)
        self.gn = torch.nn.GroupNorm(2, 4)
        self.ln = torch.nn.LayerNorm(8)
        self.emb = torch.nn.Embedding(10, 8)
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1, groups=2)

    def forward(self, x: torch.Tensor, idx: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, ...]:
        f = torch.nn.functional
        a = self.bn(x)
        b = self.gn(self.conv(x))
        e = torch.cat([f.max_pool2d(a, 2), f.avg_pool2d(b, 2)], 1)
        g = self.ln(e.permute(0, 2, 3, 1))
        h = f.scaled_dot_product_attention(q, q, q, is_causal=True)
        j = g.reshape(9, 8).index_select(0, idx) + self.emb(idx)
        k = torch.softmax(j, -1).sum(0)
        return (k, h.select(2, 1).mean(-1), torch.cumsum(k, 0), torch.where(k > 0.1, k, -k),
                torch.gather(j, 1, idx.unsqueeze(1).clamp(max=7)), f.gelu(h[:, :, 1:3]).amax(-1))


def _fixture_models() -> dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    small_mlp = zoo.MLP((32, 16, 8))
    return {"mlp_small": (small_mlp.eval(), (torch.randn(2, 32),)),
            "resblock_winograd": (_ResBlock().eval(), (torch.randn(1, 8, 18, 18),)),
            "mbblock_nhwc": (_MBBlock().eval(), (torch.randn(1, 3, 14, 14),)),
            "ops_mix": (_OpsMix().eval(), (torch.randn(1, 4, 6, 6), torch.tensor([0, 3, 8, 2]),
                                           torch.randn(1, 2, 5, 8)))}


def test_checked_in_fixtures_are_current() -> None:
    """runtime_c/tests/fixtures/*.oab are what gen_fixtures.py writes today, byte for byte (a
    change to the serializer, the memory planner or craft.py shows up here: regenerate them)."""
    r = subprocess.run([sys.executable, str(CHECKED_IN / "gen_fixtures.py"), "--check"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "sdk")), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_make_test_c_needs_no_python() -> None:
    """`make test-c` runs the C tests and the fuzz smoke run from the checked-in fixtures: its
    recipe (scripts/test_c.sh) calls no Python, pytest or torch."""
    recipe = (ROOT / "scripts" / "test_c.sh").read_text()
    code = "\n".join(line for line in recipe.splitlines() if not line.lstrip().startswith("#"))
    assert not re.search(r"python|pytest|torch|\.venv|pip", code), code
    make = (ROOT / "Makefile").read_text()
    rule = re.search(r"^test-c:.*?(?=^\S|\Z)", make, re.M | re.S)
    assert rule and "setup" not in rule.group(0).split("\n")[0] and "scripts/test_c.sh" in rule.group(0)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checked-in fixtures (tiny programs, craft.py's edge cases: accepted ones load and pass,
    refused_* are refused, newer_version is refused as newer) and torch exports of the models above."""
    d = tmp_path_factory.mktemp("oab-fixtures")
    for f in CHECKED_IN.glob("*.oab"):
        shutil.copy(f, d / f.name)
    for name, (model, ex) in _fixture_models().items():
        prog = oa.export(model, ex)
        prog.save(d / f"{name}.oab")
    return d


def _sanitized_build() -> RuntimeBuild:
    return build_runtime("host", sanitize=True, shared=False, build_type="Debug", extra_cmake=("-DOA_BUILD_TESTS=ON",))


@pytest.mark.slow
def test_c_unit_tests_under_sanitizers(fixtures: Path) -> None:
    b = _sanitized_build()
    env = dict(os.environ, OA_FIXTURES=str(fixtures), ASAN_OPTIONS="detect_leaks=1:abort_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    r = subprocess.run(["ctest", "--test-dir", str(b.directory), "--output-on-failure", "--timeout", "900"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert "100% tests passed" in r.stdout


@pytest.mark.slow
def test_conformance_tool_under_sanitizers() -> None:
    """oa_conformance itself, built with ASan + UBSan, checks the CPU device, the vendor example and
    the skeleton cleanly (it once read past its 4 input names for the 7-input mbconv_nhwc cases)."""
    exe = _sanitized_build().directory / "oa_conformance"
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    sim = build_vendor_example()
    for args in ([], ["--device", str(sim)]):
        r = subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert r.stdout.strip().splitlines()[-1].endswith(" passed, 0 failed")
    # the skeleton device fails checks (every slot is unsupported): the failure paths are clean too
    r = subprocess.run([str(exe), "--device", str(sim.parent / "libopenaccel_vendor_skeleton.so")], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 1 and "Sanitizer" not in r.stderr and "runtime error" not in r.stderr, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1].endswith(" failed")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("clang") is None, reason="clang (Debian clang + libclang-rt-14-dev) not installed")
def test_fuzz_loader_and_executor(fixtures: Path, tmp_path: Path) -> None:
    b = build_runtime("host", shared=False, build_type="Debug",
                      extra_cmake=("-DOA_BUILD_FUZZ=ON", "-DOA_BUILD_TOOLS=OFF", "-DCMAKE_C_COMPILER=clang"))
    corpus = Path(FUZZ_CORPUS) if FUZZ_CORPUS else tmp_path / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for f in fixtures.glob("*.oab"):
        shutil.copy(f, corpus / f.name)
    artifacts = corpus.parent / "fuzz-artifacts" if FUZZ_CORPUS else tmp_path / "artifacts"  # (crashes, time-outs)
    artifacts.mkdir(exist_ok=True)
    before = set(artifacts.iterdir())
    r = subprocess.run([str(b.directory / "fuzz_program"), f"-max_total_time={FUZZ_SECONDS}", "-timeout=20",
                        "-rss_limit_mb=2048", "-max_len=4194304", "-print_final_stats=1",
                        f"-artifact_prefix={artifacts}/", str(corpus)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=FUZZ_SECONDS + 600)
    tail = r.stderr[-4000:]
    found = sorted(str(p) for p in set(artifacts.iterdir()) - before)
    assert r.returncode == 0 and not found, f"fuzzer found a failure ({found}):\n{tail}"
    assert "Done" in r.stderr or "stat::number_of_executed_units" in r.stderr, tail
    stats = dict(re.findall(r"stat::(\w+):\s+(\d+)", r.stderr))
    # structured mutations are applied (libFuzzer names them "Custom" in its log of new units)
    assert "Custom" in r.stderr, tail
    print(f"\nfuzz: {stats.get('number_of_executed_units')} runs in {FUZZ_SECONDS} s "
          f"({stats.get('average_exec_per_sec')}/s), {stats.get('new_units_added')} new units, corpus "
          f"{len(list(corpus.iterdir()))} files, slowest unit {stats.get('slowest_unit_time_sec')} s, peak RSS "
          f"{stats.get('peak_rss_mb')} MB; 0 crashes, 0 sanitizer reports, 0 timeouts, 0 leaks")

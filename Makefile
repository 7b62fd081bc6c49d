# openaccel: the two commands of the README are `make demo` and `make test`. Both install what is
# missing first (scripts/setup.sh: Debian packages and the .venv), and are quick when it is there.

PY        := .venv/bin/python
TARGET    ?= qemu-aarch64
PYTEST_J  ?= 2

.PHONY: setup demo test test-c test-fast lint schema docs opinfo bench bench-setup fuzz clean

setup:
	@scripts/setup.sh

demo: setup
	@$(PY) examples/demo.py --target $(TARGET)

test: setup
	@$(PY) -m ruff check sdk tests benchmarks examples
	@$(PY) -m mypy
	@scripts/gen_schema.sh --check
	@$(PY) -m pytest -q -n $(PYTEST_J) --dist loadgroup

# the C runtime alone, without Python or torch (no setup: cmake, gcc and clang are enough): its C
# tests on the checked-in fixtures (gcc -Werror, then ASan + UBSan) and a fuzz smoke run seeded
# with them; one to two minutes on two cores
FUZZ_SMOKE_SECONDS ?= 30
test-c:
	@FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS) scripts/test_c.sh

test-fast: setup
	@$(PY) -m pytest -q -n $(PYTEST_J) --dist loadgroup -m "not slow"

# the structured fuzzer (tests/test_c_runtime.py) for longer than make test's minute, under ASan and
# UBSan; the corpus grows in build/fuzz-corpus from one run to the next
FUZZ_SECONDS ?= 1200
fuzz: setup
	@OA_FUZZ_SECONDS=$(FUZZ_SECONDS) OA_FUZZ_CORPUS=$(CURDIR)/build/fuzz-corpus \
	  $(PY) -m pytest -q -s tests/test_c_runtime.py -k fuzz

lint: setup
	@$(PY) -m ruff check sdk tests benchmarks examples
	@$(PY) -m mypy

schema:
	@scripts/gen_schema.sh

# the op set, the core ATen coverage table (sdk/openaccel/coverage.py) and the OpInfo sweep's last figures
docs: setup
	@$(PY) -c "from openaccel.opset import render_markdown; open('docs/ops.md','w').write(render_markdown() + '\n')"

# PyTorch's OpInfo samples through export and the runtime (about 30 minutes on 2 cores); --record
# keeps the figures for docs/ops.md (then make docs)
opinfo: setup
	@$(PY) scripts/opinfo_sweep.py --jobs $(PYTEST_J) --json build/opinfo.json $(OPINFO_ARGS)

# onnx / onnxruntime are benchmark peers only, installed on demand
bench-setup: setup
	@$(PY) -c "import onnx, onnxscript, onnxruntime" 2>/dev/null || \
	  .venv/bin/pip install -q --disable-pip-version-check onnx onnxscript onnxruntime

bench: bench-setup
	@$(PY) benchmarks/run.py --micro $(BENCH_ARGS)

clean:
	rm -rf build out .pytest_cache

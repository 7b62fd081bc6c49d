#!/bin/sh
# Install what openaccel needs on a Debian/Ubuntu machine, idempotently and quickly when it is
# all there already: system packages (cross compilers, qemu-user, flatc, clang for the fuzzer,
# openssh-server for the ssh flashing test) and the .venv with the pinned Python dependencies.
set -eu
cd "$(dirname "$0")/.."

PACKAGES="cmake ninja-build gcc g++ python3-venv gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf gcc-riscv64-linux-gnu \
qemu-user flatbuffers-compiler clang libclang-rt-14-dev openssh-server openssh-client"

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else SUDO="none"; fi
  if [ "$SUDO" = none ]; then
    echo "openaccel needs these Debian packages:$missing" >&2
    echo "install them as root: apt-get install -y$missing" >&2
    exit 2
  fi
  echo "==> installing system packages:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

PY=${PYTHON:-python3}
STAMP=.venv/.openaccel-setup
# torch first, pinned to the CPU build, so nothing later pulls a CUDA build
WANT="torch==2.13.0 executorch==1.5.* $(sha256sum pyproject.toml | cut -c1-16)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x .venv/bin/openaccel ]; then
  exit 0
fi
# pip's complaints about this machine's extra index locations are noise; real errors still show
pip_install() {
  if ! out=$(.venv/bin/pip install -q --disable-pip-version-check "$@" 2>&1); then
    printf '%s\n' "$out" | grep -v "WARNING: Location" >&2
    echo "pip install $* failed" >&2
    exit 1
  fi
  printf '%s\n' "$out" | grep -v -e "WARNING: Location" -e '^$' || true
}
echo "==> setting up .venv (torch 2.13.0 CPU, executorch 1.5, the openaccel SDK)"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip_install "torch==2.13.0"
pip_install "executorch==1.5.*" flatbuffers numpy rich
pip_install -e ".[test]"
echo "$WANT" > "$STAMP"

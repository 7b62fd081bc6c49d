#!/bin/sh
# Regenerate the Python (flatc) and C (gen_schema_h.py) readers of runtime_c/schema/oab.fbs, and the C
# header of op argument indices and CPU tuning constants from sdk/openaccel/opset.py.
# With --check, fail if the committed copies differ from what the schema generates.
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flatc --python --gen-object-api -o "$tmp" runtime_c/schema/oab.fbs
python3 runtime_c/tools/gen_schema_h.py runtime_c/schema/oab.fbs "$tmp/oab_schema.h"
python3 runtime_c/tools/gen_schema_h.py --args sdk/openaccel/opset.py "$tmp/oab_args.h"
if [ "${1:-}" = "--check" ]; then
  diff -r -q -x __pycache__ "$tmp/openaccel/oab" sdk/openaccel/oab >/dev/null && cmp -s "$tmp/oab_schema.h" runtime_c/src/oab_schema.h \
    && cmp -s "$tmp/oab_args.h" runtime_c/src/oab_args.h || {
    echo "generated schema code is out of date: run scripts/gen_schema.sh" >&2; exit 1; }
  exit 0
fi
rm -rf sdk/openaccel/oab
cp -r "$tmp/openaccel/oab" sdk/openaccel/oab
cp "$tmp/oab_schema.h" runtime_c/src/oab_schema.h
cp "$tmp/oab_args.h" runtime_c/src/oab_args.h
echo "regenerated sdk/openaccel/oab, runtime_c/src/oab_schema.h and runtime_c/src/oab_args.h"

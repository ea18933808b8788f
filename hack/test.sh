#!/usr/bin/env bash
# The project's whole check: lint, format, types, dead code, tests. Creates .venv with the dev
# extras first if it is missing, so it works on a fresh clone. Exit code: the first failing tool's, or pytest's
# (5 = no tests collected).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv && .venv/bin/python -m pip install --quiet -e '.[dev]' || exit 1
fi
PY=.venv/bin/python
$PY -m ruff check . || exit 1
$PY -m ruff format --check . >/dev/null || { echo "ruff format --check failed: run '.venv/bin/ruff format .'" >&2; exit 1; }
$PY -m mypy || exit 1
# Dead code: paths and the allow-list of framework-called names are [tool.vulture] in pyproject.
$PY -m vulture || { echo "unused code above: remove it, or allow a framework name in pyproject" >&2; exit 1; }
# Tests in parallel, one worker per core (pytest-xdist; `-n 0` as an argument runs them in one
# process). A .venv made before xdist joined the dev extras runs them in one, and says so.
if $PY -c "import xdist" 2>/dev/null; then
  $PY -m pytest -n auto "$@"
else
  echo "pytest-xdist missing: tests run on one core ('.venv/bin/pip install -e .[dev]')" >&2
  $PY -m pytest "$@"
fi

#!/usr/bin/env bash
# The project's whole check: lint, format, types, dead code, the unit tests, then the end-to-end
# tier (tests/e2e, marker e2e) on a real Kubernetes control plane: $GPUFABRIC_E2E_K8S, else
# ../shared/tools/k8s beside the clone; where neither has up.sh/down.sh every e2e test is skipped,
# naming the paths looked at. Creates .venv with the dev extras first if it is missing, so it works
# on a fresh clone.
#   bash hack/test.sh [--unit] [PYTEST ARGS...]
#   --unit   the unit tests alone (no control plane needed, no e2e tier)
#   PYTEST ARGS go to the unit tests' pytest run.
# Exit code: the first failing tool's, or pytest's (5 = no tests collected).
set -uo pipefail
cd "$(dirname "$0")/.."
unit_only=
case "${1:-}" in
  --unit) unit_only=1; shift ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv && .venv/bin/python -m pip install --quiet -e '.[dev]' || exit 1
fi
PY=.venv/bin/python
$PY -m ruff check . || exit 1
$PY -m ruff format --check . >/dev/null || { echo "ruff format --check failed: run '.venv/bin/ruff format .'" >&2; exit 1; }
$PY -m mypy || exit 1
# Dead code: paths and the allow-list of framework-called names are [tool.vulture] in pyproject.
$PY -m vulture || { echo "unused code above: remove it, or allow a framework name in pyproject" >&2; exit 1; }
# Unit tests in parallel, one worker per core (pytest-xdist; `-n 0` as an argument runs them in one
# process). A .venv made before xdist joined the dev extras runs them in one, and says so.
if $PY -c "import xdist" 2>/dev/null; then
  $PY -m pytest -n auto -m "not e2e" "$@" || exit $?
else
  echo "pytest-xdist missing: tests run on one core ('.venv/bin/pip install -e .[dev]')" >&2
  $PY -m pytest -m "not e2e" "$@" || exit $?
fi
[ -n "$unit_only" ] && exit 0
# The e2e tier in one process: its clusters are shared by the session (one control plane each,
# not one per xdist worker).
$PY -m pytest -p no:xdist -m e2e tests/e2e

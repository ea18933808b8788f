"""Where the tests find reference data. What the repository may carry is copied under
tests/fixtures/ (each folder has a PROVENANCE.md); what it may not (GPL-licensed files, files
without a licence) is read from ../shared/reference beside the clone, which CI and the team's
checkouts have, and a test that needs it is skipped, with the reason, where it is absent. The
e2e tier's Kubernetes control plane comes from beside the clone too (../shared/tools/k8s)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Captured kube-apiserver 1.36 bytes, copied from ../shared/reference/k8s-wire.
WIRE = FIXTURES / "k8s-wire"
BESIDE = Path(__file__).resolve().parents[2] / "shared"
SHARED = BESIDE / "reference"
K8S_TOOLS = BESIDE / "tools" / "k8s"  # up.sh / down.sh (tests/e2e/cluster.py)


def shared(path: str, source: str) -> Path:
    """../shared/reference/PATH, or skip naming the file and SOURCE (its origin and licence)."""
    found = SHARED / path
    if not found.is_file():
        pytest.skip(
            f"needs ../shared/reference/{path} ({source}), which this Apache-2.0 repository may "
            "not carry; ../shared is not beside this clone"
        )
    return found

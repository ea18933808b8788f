"""Import boundaries: hardware and cluster libraries only in their backend modules; agent and
webhook independent; common imports neither. Checked on the source with ast."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("common", "agent", "webhook", "certs")
BACKENDS = {
    "pynvml": {"agent/nvml/pynvml_backend.py"},
    "pyudev": {"agent/udev.py"},
    "kubernetes": {
        "agent/kube.py",
        "webhook/kube.py",
        "webhook/groups/kube.py",
        "webhook/leader/kube.py",
        "certs/bootstrap.py",
        "common/kube.py",
    },
}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def sources() -> list[Path]:
    return [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]


@pytest.mark.parametrize("library", sorted(BACKENDS))
def test_library_is_imported_only_by_its_backend(library: str) -> None:
    users = {
        str(p.relative_to(ROOT))
        for p in sources()
        if any(m == library or m.startswith(library + ".") for m in imports(p))
    }
    assert users <= BACKENDS[library], users - BACKENDS[library]
    assert users, f"nothing imports {library}: the backend list is stale"


def test_agent_and_webhook_are_independent_and_common_is_a_leaf() -> None:
    for path in sources():
        top = path.relative_to(ROOT).parts[0]
        mods = {m.split(".")[0] for m in imports(path)}
        if top == "common":
            assert not mods & {"agent", "webhook", "certs"}, path
            if path.name != "kube.py":
                assert "kubernetes" not in mods, path
        if top == "agent":
            assert "webhook" not in mods, path
        if top == "webhook":
            assert "agent" not in mods, path


def test_import_packages_resolve_to_this_tree() -> None:
    for pkg in PACKAGES:
        spec = importlib.util.find_spec(pkg)
        assert spec is not None and spec.origin is not None
        assert Path(spec.origin).resolve().is_relative_to(ROOT), spec.origin

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
        "webhook/kube/client.py",
        "webhook/labeler/kube.py",
        "webhook/groups/placer/kube.py",
        "webhook/groups/extensions/imex/kube.py",
        "webhook/groups/framework/ownedkube.py",
        "webhook/leader/kube.py",
        "webhook/export/kube.py",
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


# webhook/ has one sub-package per flow (issue 16); imports run one way, down this list's layers:
# the process wiring, then transport and offline commands, admission, the leader-side flows, and
# the pieces every flow reaches down to.
WEBHOOK_LAYERS = {
    "__main__": 7,
    "serve": 6,
    "wiring": 5,
    "server": 4,
    "cli": 4,
    "admission": 3,
    "groups": 2,
    "labeler": 2,
    "export": 2,
    "fleet": 1,
    "fabric": 1,
    "leader": 1,
    "kube": 0,
}


def _room(path: Path) -> str:
    parts = path.relative_to(ROOT / "webhook").parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def test_webhook_rooms_import_one_way_and_only_public_names() -> None:
    wrong: list[str] = []
    for path in (ROOT / "webhook").rglob("*.py"):
        if path.name == "__init__.py" and path.parent.name == "webhook":
            continue
        room = _room(path)
        assert room in WEBHOOK_LAYERS, f"{path}: a new room needs a place in WEBHOOK_LAYERS"
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                continue
            parts = node.module.split(".")
            if parts[0] != "webhook" or len(parts) < 2 or parts[1] == room:
                continue
            if WEBHOOK_LAYERS[parts[1]] >= WEBHOOK_LAYERS[room]:
                wrong.append(f"{path.relative_to(ROOT)} imports {node.module} (up or sideways)")
            wrong += [
                f"{path.relative_to(ROOT)} imports {node.module}.{a.name} (private)"
                for a in node.names
                if a.name.startswith("_")
            ]
    assert not wrong, wrong


def test_every_webhook_room_says_what_flows_through_it() -> None:
    for init in (ROOT / "webhook").glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.strip().splitlines()) == 1, f"{init}: one line says what flows"

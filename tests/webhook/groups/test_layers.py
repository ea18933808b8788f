"""The rooms of webhook/groups/ (issue 39): imports run down the rooms in LAYERS, never into a
package above their own and never in a circle, and no folder holds more than MAX_MODULES modules.
Checked on the source with ast, like tests/test_boundaries.py does for webhook/'s own rooms."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GROUPS = Path(__file__).resolve().parents[3] / "webhook" / "groups"
# A module imports its own room and the rooms of a lower layer. Rooms of one layer do not import
# each other: every package in extensions/ is a room of its own (preempt, gang, imex), so an
# extension reaches another only through what they share below (framework/).
LAYERS = {
    "model": 0,  # names, and a Pod and a Node as placement reads them
    "decision": 1,  # which domain, which nodes, which ranks: pure over the capacity view
    "framework": 2,  # what the placer and its extensions build on
    "extensions": 3,  # extensions/<name>/: each its own room
    "admission": 4,  # the CREATE path
    "placer": 4,  # the placer's loop, its inputs, its I/O
}
MAX_MODULES = 15
# module (dotted, below webhook.groups; a package by its name) -> the modules it imports
Graph = dict[str, set[str]]


def _name(groups: Path, path: Path) -> str:
    parts = path.relative_to(groups).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def graph(groups: Path) -> Graph:
    """Which modules of the tree each module imports, by what the import names: a module, else
    the deepest package (``from P import m`` names module m of package P where m is one)."""
    base = ".".join(groups.parts[-2:])  # webhook.groups
    files = {_name(groups, p): p for p in groups.rglob("*.py")}
    found: Graph = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's own package upwards
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    origin = ".".join([base, *filter(None, up), *filter(None, [node.module])])
                else:
                    origin = node.module or ""
                names |= {origin} | {f"{origin}.{a.name}" for a in node.names}
        found[mod] = set()
        for n in names:
            if n != base and not n.startswith(base + "."):
                continue
            rel = n.removeprefix(base).removeprefix(".")
            while rel and rel not in files:
                rel = rel.rpartition(".")[0]
            if rel and rel != mod:
                found[mod].add(rel)
    return found


def room_of(mod: str) -> str:
    """model, decision, ... or extensions.<name>; "" for groups/ itself."""
    parts = mod.split(".")
    if parts[0] == "extensions" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0] if len(parts) > 1 or mod in LAYERS else ""


def layer(room: str) -> int:
    return LAYERS[room.partition(".")[0]]


def circles(g: Graph) -> list[list[str]]:
    """Every set of modules that import each other round (Tarjan's strongly connected parts)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, todo = work[-1]
            step = next(todo, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    work.append((step, iter(sorted(g.get(step, ())))))
                elif step in stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = stack[stack.index(node) :]
                del stack[stack.index(node) :]
                if len(part) > 1 or node in g.get(node, ()):
                    found.append(sorted(part))
    return found


def upward(g: Graph, packages: set[str]) -> list[str]:
    """Imports from a module inside a sub-package of a module (or the package) of a package
    above its own: e.g. extensions/imex/kube.py importing a module of groups/ or extensions/."""
    wrong = []
    for mod, targets in sorted(g.items()):
        own = mod if mod in packages else mod.rpartition(".")[0]
        for t in sorted(targets):
            above = t if t in packages else t.rpartition(".")[0]
            if own != above and (not above or own.startswith(above + ".")) and t != own:
                wrong.append(f"{mod} imports {t}, of a package above its own")
    return wrong


def against_layers(g: Graph) -> list[str]:
    """Imports of a room of the same or a higher layer (sideways or up), and modules in no room."""
    wrong = []
    for mod, targets in sorted(g.items()):
        room = room_of(mod)
        if not room:
            if mod and mod.count(".") == 0 and mod not in LAYERS:
                wrong.append(f"{mod} is in no room: put it in one of {', '.join(LAYERS)}")
            continue
        if room.partition(".")[0] not in LAYERS:
            wrong.append(f"{mod}: room {room} needs a place in LAYERS")
            continue
        for t in sorted(targets):
            there = room_of(t)
            known = there.partition(".")[0] in LAYERS
            if there and there != room and known and layer(there) >= layer(room):
                wrong.append(f"{mod} ({room}) imports {t} ({there}): up or sideways")
    return wrong


def crowded(groups: Path) -> list[str]:
    wrong = []
    for folder in sorted({p.parent for p in groups.rglob("*.py")}):
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > MAX_MODULES:
            wrong.append(f"{folder.relative_to(groups.parent)}: {len(modules)} modules")
    return wrong


def problems(groups: Path) -> list[str]:
    g = graph(groups)
    packages = {_name(groups, p.parent) for p in groups.rglob("__init__.py") if p.parent != groups}
    return [
        *(f"import circle: {' -> '.join(c)}" for c in circles(g)),
        *upward(g, packages),
        *against_layers(g),
        *crowded(groups),
    ]


def test_groups_imports_run_down_the_rooms() -> None:
    assert problems(GROUPS) == []


def test_groups_keeps_only_its_rooms() -> None:
    """groups/ itself: its __init__.py (which names the rooms) and one folder per room."""
    assert sorted(p.name for p in GROUPS.glob("*.py")) == ["__init__.py"]
    rooms = {p.parent.name for p in GROUPS.glob("*/__init__.py")}
    assert rooms == set(LAYERS), rooms ^ set(LAYERS)
    for init in GROUPS.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and doc.strip(), f"{init}: its docstring says what the room holds"


def _tree(root: Path, files: dict[str, str]) -> Path:
    groups = root / "webhook" / "groups"
    for rel, text in files.items():
        path = groups / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in {p.parent for p in groups.rglob("*.py")}:
        (folder / "__init__.py").touch()
    return groups


@pytest.mark.parametrize(
    ("files", "said"),
    [
        (  # a circle between two modules of one room
            {
                "model/a.py": "from webhook.groups.model import b\n",
                "model/b.py": "from webhook.groups.model.a import X\n",
            },
            "import circle: model.a -> model.b",
        ),
        (  # a lower room reads a higher one
            {
                "model/a.py": "import webhook.groups.admission.check\n",
                "admission/check.py": "",
            },
            "model.a (model) imports admission.check (admission): up or sideways",
        ),
        (  # one extension reads another
            {
                "extensions/gang/place.py": "from webhook.groups.extensions.preempt.state import S\n",
                "extensions/preempt/state.py": "",
            },
            "extensions.gang.place (extensions.gang) imports extensions.preempt.state",
        ),
        (  # a module of a sub-package reads a module of the package above, relatively too
            {
                "extensions/gang/kube.py": "from .. import shared\n",
                "extensions/shared.py": "",
            },
            "extensions.gang.kube imports extensions.shared, of a package above its own",
        ),
        (  # a flat module left in groups/
            {"loose.py": ""},
            "loose is in no room",
        ),
        (  # a folder past MAX_MODULES
            {f"decision/m{i}.py": "" for i in range(MAX_MODULES + 1)},
            f"groups/decision: {MAX_MODULES + 1} modules",
        ),
    ],
)
def test_the_check_names_what_breaks_the_rooms(
    tmp_path: Path, files: dict[str, str], said: str
) -> None:
    found = problems(_tree(tmp_path, files))
    assert any(p.startswith(said) for p in found), found

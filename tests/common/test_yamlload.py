"""YAML through libyaml's C parser where PyYAML has it, else the pure-Python one (issue 17: the
offline commands spent nearly all their time in the pure-Python parser). Both must give the same
objects and the same errors; the offline commands and the topology sources must use the C one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from common import yamlload
from tests import reference
from webhook.cli.documents import parse_documents
from webhook.fabric.model import SourceError
from webhook.fabric.sources.build import load_yaml

ROOT = Path(__file__).resolve().parents[2]
SHARED = reference.SHARED  # compared too when ../shared is beside the clone
FILES = sorted(
    p
    for top in (ROOT / "tests", ROOT / "samples", ROOT / "daemonset", SHARED)
    if top.is_dir()
    for p in top.rglob("*")
    if p.suffix in (".yaml", ".yml", ".json") and p.is_file()
)
needs_libyaml = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")


def _read(text: str, loader: yamlload.Loader) -> str:
    """repr of every document (repr tells 1 from 1.0 and True, and keeps order), or the line
    where the text stops being YAML (a JSON file with comments is not YAML to either)."""
    try:
        return repr(list(yamlload.load_all(text, loader)))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        return f"not YAML at line {mark.line if mark else None}"


def _both(text: str) -> tuple[str, str]:
    return _read(text, yaml.CSafeLoader), _read(text, yaml.SafeLoader)


@needs_libyaml
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_both_parsers_read_every_fixture_file_alike(path: Path) -> None:
    text = path.read_text()
    c, py = _both(text)
    assert c == py


@needs_libyaml
@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: 1.0\nc: true\nd: ~\ne: 0x10\nf: 010\ng: 2026-11-25\nh: '1'\ni: !!str 5\n",
        "- [1, 2, {x: y}]\n- ? k\n  : v\n---\nsecond: doc\n",
        "a: &x {k: v}\nb: *x\nc: {<<: *x, j: w}\nd: 1_000\ne: .inf\nf: -.NaN\n",
        '{"kind": "List", "items": [{"a": "\\u00e9"}]}',
        "",
    ],
)
def test_both_parsers_build_the_same_objects(text: str) -> None:
    c, py = _both(text)
    assert c == py


@needs_libyaml
@pytest.mark.parametrize("text", ["a: [1, 2\nb: 3\n", "a: 1\n b: 2\n", "- a\nb: c\n", "a: 'x\n"])
def test_both_parsers_refuse_the_same_text_at_the_same_line(text: str) -> None:
    lines = []
    for loader in (yaml.CSafeLoader, yaml.SafeLoader):
        with pytest.raises(yaml.YAMLError) as err:
            list(yamlload.load_all(text, loader))
        mark = getattr(err.value, "problem_mark", None)
        assert mark is not None
        lines.append(mark.line)
    assert lines[0] == lines[1]


@needs_libyaml
def test_offline_commands_and_topology_sources_use_the_c_parser(monkeypatch: Any) -> None:
    assert yamlload.SafeLoader is yaml.CSafeLoader

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the pure-Python parser was used")

    monkeypatch.setattr(yaml.SafeLoader, "__init__", refuse)
    assert parse_documents(b"kind: Pod\n---\nkind: Node\n", "f") == [
        {"kind": "Pod"},
        {"kind": "Node"},
    ]
    assert load_yaml("leaves: []\n") == {"leaves": []}


def test_without_libyaml_the_pure_python_parser_answers_alike(monkeypatch: Any) -> None:
    text = (ROOT / "tests" / "golden" / "hgx-h100.yaml").read_bytes()
    fast = parse_documents(text, "f")
    monkeypatch.setattr(yamlload, "SafeLoader", yaml.SafeLoader)
    assert parse_documents(text, "f") == fast
    with pytest.raises(SourceError, match="line 3: not YAML"):
        load_yaml("leaves:\n  - {name: [\n")
    with pytest.raises(SourceError, match="nested too deeply"):
        load_yaml("[" * 5000 + "]" * 5000)

"""README.md as a new user reads it: the Python it needs is said before the first command, the
day-one sections come first, every gpufabric command in README and docs/ runs from the clone after
the first line, and the benchmark commands docs/benchmarks.md lists reproduce the runs its numbers
quote (seed, size)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BENCH = (ROOT / "docs" / "benchmarks.md").read_text()
DOCS = sorted((ROOT / "docs").glob("*.md"))
FIRST = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && for o in table yaml; do "
    ".venv/bin/gpufabric-agent probe --from tests/fixtures/hosts/hgx-h100.tar.gz -o $o; done\n"
    "bash hack/test.sh\n"
)


def test_the_python_it_needs_comes_before_the_first_commands() -> None:
    needs = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert needs == ">=3.11"
    before, _, after = README.partition("```bash\n")
    assert "Python >= 3.11" in before
    assert after.startswith(FIRST)  # the two command lines themselves stay as they are


def bench_line(command: str) -> str:
    block = BENCH.split("```bash\n", 1)[1].split("```", 1)[0]
    # The first line that runs the command is the run the quoted figures come from; a later line
    # may run the same bench in another mode (webhook_fuzz.py --rss).
    line = next(x for x in block.splitlines() if f"bench/{command} " in x)
    return line.split("#", 1)[0]


def flag_value(command: str, flag: str) -> int:
    """The value the README's command line gives FLAG, else the bench's own default."""
    given = re.search(rf"{flag}[ =](\d+)", bench_line(command))
    if given:
        return int(given.group(1))
    source = (ROOT / "bench" / command.split()[0]).read_text()
    default = re.search(rf'"{flag}",[^)]*?default=([\d_]+)', source, re.S)
    assert default, (command, flag)
    return int(default.group(1).replace("_", ""))


@pytest.mark.parametrize(
    ("command", "flag", "quoted"),
    [
        ("webhook_fuzz.py", "--seed", r"fuzzed reviews.*\(seed (\d+)\)"),
        ("webhook_fuzz.py", "--reviews", r"\| ([\d,]+) fuzzed reviews"),
        ("group_sim.py sim", "--jobs", r"nodes x 8 GPUs; ([\d,]+) jobs"),
        ("agent_bench.py", "--runs", r"agent_bench\.py` as run above \(([\d,]+) in-process"),
        ("agent_bench.py", "--proc-runs", r"in-process\s+rounds, ([\d,]+) process\s+rounds"),
    ],
)
def test_bench_commands_reproduce_the_runs_quoted(command: str, flag: str, quoted: str) -> None:
    found = re.search(quoted, BENCH)
    assert found, quoted
    assert flag_value(command, flag) == int(found.group(1).replace(",", ""))


def test_what_it_is_and_the_layout_come_before_the_details() -> None:
    headings = [line for line in README.splitlines() if line.startswith("## ")]
    assert headings[:3] == ["## What gpufabric is", "## Layout", "## Documentation"]
    assert "## Group placement (multi-node jobs)" in headings
    assert max(map(len, README.splitlines())) <= 400  # the long tables live in docs/benchmarks.md


def _commands(text: str) -> list[str]:
    """The lines of fenced code blocks."""
    return [line for block in text.split("```")[1::2] for line in block.splitlines()[1:]]


@pytest.mark.parametrize("doc", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_command_runs_from_the_venv_as_printed(doc: Path) -> None:
    # A new user has `.venv/bin/` from README's first line, not gpufabric-webhook on PATH
    # (`kubectl exec POD -- gpufabric-agent ...` runs in the image, where it is).
    bare = re.compile(r"(^|[|;&]\s*)gpufabric-(webhook|agent) ")
    found = [line for line in _commands(doc.read_text()) if bare.search(line.strip())]
    assert not found, found


def test_docs_links_resolve() -> None:
    for doc in [ROOT / "README.md", *DOCS]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
            assert (doc.parent / target).exists(), (doc.name, target)

"""README.md as a new user reads it: the Python it needs is said before the first command, and the
benchmark commands it lists reproduce the runs its numbers quote (seed, size)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
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
    block = README[README.index("## Benchmarks") :].split("```bash\n", 1)[1].split("```", 1)[0]
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
    found = re.search(quoted, README)
    assert found, quoted
    assert flag_value(command, flag) == int(found.group(1).replace(",", ""))

"""Reading YAML: libyaml's C parser where PyYAML has it (`yaml.CSafeLoader`), else PyYAML's pure
Python `SafeLoader`. Both build the objects with the same safe constructor and resolver, so they
return the same objects (tests/common/test_yamlload.py); the C parser is ~10x faster, which is
most of what the offline commands spend on hundreds of status files (issue 17). Errors are
`yaml.YAMLError` either way, with `problem_mark` for the line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

Loader = type[yaml.SafeLoader] | type[yaml.CSafeLoader]
# PyYAML without libyaml (built from source with no libyaml headers) has no CSafeLoader.
SafeLoader: Loader = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


def load(text: str | bytes, loader: Loader | None = None) -> Any:
    """The one document in text (None when it is empty)."""
    return yaml.load(text, Loader=loader or SafeLoader)  # noqa: S506 - a safe loader either way


def load_all(text: str | bytes, loader: Loader | None = None) -> Iterator[Any]:
    """Every document in text, in order."""
    return yaml.load_all(text, Loader=loader or SafeLoader)

"""What a person reads when a command cannot do its job: one line, exit code 2, no traceback."""

from __future__ import annotations

import argparse
import os
import sys
from importlib import metadata

EXIT_BAD_INPUT = 2

# Optional dependencies and the extra that installs each (pyproject.toml).
EXTRAS = {
    "aiohttp": "webhook",
    "jsonpatch": "webhook",
    "cryptography": "webhook",
    "pynvml": "agent",
    "pyudev": "agent",
    "psutil": "agent",
}


class UsageError(Exception):
    """Bad input or environment, said in one line (name the file, the flag, the port)."""


def version() -> str:
    try:
        return metadata.version("gpufabric")
    except metadata.PackageNotFoundError:
        return "unknown (not installed as a package)"


def missing_module(err: ModuleNotFoundError) -> str:
    name = (err.name or "").split(".")[0]
    extra = EXTRAS.get(name)
    if extra is None:
        return f"Python module {name or err} is not installed"
    return f"Python module {name} is not installed: pip install 'gpufabric[{extra}]'"


def os_error(err: OSError) -> str:
    """An OSError with the file it is about (the ssl module and others leave filename empty)."""
    text = err.strerror or str(err)
    names = [str(n) for n in (err.filename, err.filename2) if n is not None]
    return f"{' -> '.join(names)}: {text}" if names else text


def add_kubeconfig(parser: argparse.ArgumentParser) -> None:
    """`--kubeconfig`, the same in every program (common.kube.load_api_client reads it)."""
    parser.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        metavar="FILE",
        help="kubeconfig file (default: $KUBECONFIG; else, in a pod, its service account; "
        "else ~/.kube/config)",
    )


def fail(prog: str, message: str) -> int:
    print(f"{prog}: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def reader_left() -> int:
    """`... | head` closed our stdout: not an error worth a line; keep exit's flush quiet too."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0

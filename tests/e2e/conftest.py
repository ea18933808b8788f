"""Fixtures of the end-to-end tier (marker `e2e`, given to every test here).

- `env`: a plain cluster shared by the session; `gang_env`: one with PodGroups served, started
  only when a test asks for it. Both: daemonset/base as installed, the webhook as its
  ServiceAccount, a kubelet stand-in.
- `ns`: a namespace of the test's own, deleted whole afterwards.
- `fleet`: nodes, statuses and topology the test makes, removed afterwards.
Without a control plane every test here skips, naming the paths looked at. A failing test's
report carries the webhook's log lines written while it ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import Tools, find_tools
from tests.e2e.env import Env, bring_up, tear_down
from tests.e2e.fleet import Fleet

_RUNNING: list[Env] = []  # the session's clusters: whose logs a failing test's report shows


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.failed and call.when != "teardown":
        for env in _RUNNING:
            log = env.webhook.log_since_mark()
            report.sections.append((f"webhook log ({env.webhook.log})", log or "(nothing)"))


@pytest.fixture(scope="session")
def k8s_tools() -> Path:
    tools: Tools = find_tools()
    if tools.path is None:
        pytest.skip(tools.reason)
    return tools.path


def _session_env(
    tools: Path, factory: pytest.TempPathFactory, name: str, *, gang: bool
) -> Iterator[Env]:
    env = bring_up(tools, factory.mktemp(name), gang=gang)
    _RUNNING.append(env)
    try:
        yield env
    finally:
        _RUNNING.remove(env)
        tear_down(env)


@pytest.fixture(scope="session")
def env(k8s_tools: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from _session_env(k8s_tools, tmp_path_factory, "plain", gang=False)


@pytest.fixture(scope="session")
def gang_env(k8s_tools: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from _session_env(k8s_tools, tmp_path_factory, "gang", gang=True)


@pytest.fixture
def cluster_env(request: pytest.FixtureRequest) -> Iterator[Env]:
    """`env`, or `gang_env` where the test is parametrized indirectly with "gang"
    (`@pytest.mark.parametrize("cluster_env", ["plain", "gang"], indirect=True)`). Afterwards the
    webhook's log of the test holds no traceback: whatever a test provokes, serve never crashes
    a thread or a request."""
    name = "gang_env" if getattr(request, "param", "plain") == "gang" else "env"
    chosen: Env = request.getfixturevalue(name)
    chosen.webhook.mark()
    yield chosen
    log = chosen.webhook.log_since_mark(limit=10**7)
    assert "Traceback" not in log, (
        f"the webhook logged a traceback:\n{log[max(0, log.index('Traceback') - 2000) :]}"
    )


@pytest.fixture
def ns(cluster_env: Env, request: pytest.FixtureRequest) -> Iterator[str]:
    name = cluster_env.new_namespace(request.node.name)
    try:
        yield name
    finally:
        cluster_env.drop_namespace(name)


@pytest.fixture
def fleet(cluster_env: Env, tmp_path: Path) -> Iterator[Fleet]:
    made = Fleet(cluster_env.cluster, tmp_path)
    try:
        yield made
    finally:
        made.cleanup()

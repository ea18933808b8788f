"""PodDisruptionBudgets as a plan counts them (webhook/groups/framework/evictions.py): the policy/v1
selector rules, disruptedPods, a pod two budgets select, and the ledger a plan spends."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.groups.framework.evictions import Budgets, Ledger, Use, budget_of
from webhook.groups.model.pods import labels_of


def pdb(
    name: str, selector: dict[str, Any] | None, allowed: Any = 1, **status: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"selector": selector},
        "status": {"disruptionsAllowed": allowed, **status},
    }


def budgets(*objs: dict[str, Any]) -> Budgets:
    b = Budgets()
    b.reset(x for o in objs if (x := budget_of(o)) is not None)
    return b


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        (None, {"app": "a"}, False),  # a null selector selects nothing
        ({}, {"app": "a"}, True),  # an empty one every pod of its namespace
        ({}, {}, True),
        ({"matchLabels": {"app": "a"}}, {"app": "a", "x": "y"}, True),
        ({"matchLabels": {"app": "a"}}, {"app": "b"}, False),
        (
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
            {"app": "b"},
            True,
        ),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"x": "1"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"x": "1"}, True),
        (
            {"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "t", "operator": "Exists"}]},
            {"app": "a"},
            False,
        ),
    ],
    ids=[
        "null",
        "empty-selects-all",
        "empty-no-labels",
        "match-labels",
        "match-labels-other",
        "in",
        "notin-absent",
        "exists-absent",
        "doesnotexist",
        "labels-and-expressions",
    ],
)
def test_selector_rules_of_policy_v1(
    selector: dict[str, Any] | None, labels: dict[str, str], selected: bool
) -> None:
    b = budgets(pdb("x", selector))
    assert bool(b.covering("ns", labels_of(labels))) is selected
    assert b.covering("other", labels_of(labels)) == ()  # its own namespace only


def test_a_budget_not_yet_counted_by_the_controller_allows_nothing() -> None:
    b = budget_of(pdb("x", {}, allowed=None))
    assert b is not None and b.allowed == 0
    assert budget_of({"metadata": {}}) is None


def pods(*names: str, labels: dict[str, str]) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    return [("ns", n, labels_of(labels)) for n in names]


def test_the_ledger_counts_a_budget_across_all_victims_of_the_plan() -> None:
    ledger = Ledger(budgets(pdb("web", {"matchLabels": {"app": "web"}}, allowed=2)))
    assert ledger.take(pods("a", labels={"app": "web"}))
    assert ledger.take(pods("b", labels={"app": "web"}))
    assert not ledger.take(pods("c", labels={"app": "web"}))  # a third would break it
    assert ledger.take(pods("d", labels={"app": "other"}))
    assert ledger.uses() == (Use("ns", "web", 2, 2),)
    assert ledger.blocking() == (Use("ns", "web", 2, 3),)
    ledger.give_back(pods("b", labels={"app": "web"}))
    assert ledger.uses() == (Use("ns", "web", 2, 1),)


def test_a_unit_goes_whole_or_not_at_all() -> None:
    ledger = Ledger(budgets(pdb("web", {"matchLabels": {"app": "web"}}, allowed=1)))
    assert not ledger.take(pods("a", "b", labels={"app": "web"}))  # a gang of two under it
    assert ledger.uses() == ()  # nothing spent by the refused unit
    assert ledger.take(pods("c", labels={"app": "web"}))


def test_pods_the_api_server_counted_already_spend_nothing_again() -> None:
    obj = pdb("web", {"matchLabels": {"app": "web"}}, allowed=0, disruptedPods={"a": "t"})
    ledger = Ledger(budgets(obj))
    assert ledger.take(pods("a", labels={"app": "web"}))
    assert not ledger.take(pods("b", labels={"app": "web"}))


def test_a_pod_two_budgets_select_cannot_be_evicted() -> None:
    ledger = Ledger(
        budgets(
            pdb("web", {"matchLabels": {"app": "web"}}, allowed=9),
            pdb("all", {}, allowed=9),
        )
    )
    assert not ledger.take(pods("a", labels={"app": "web"}))
    assert [u.words() for u in ledger.blocking()] == [
        "ns/all (a victim under more than one budget: the Eviction API refuses it)",
        "ns/web (a victim under more than one budget: the Eviction API refuses it)",
    ]


def test_budgets_follow_the_watch_and_the_evictions_made() -> None:
    b = budgets(pdb("web", {"matchLabels": {"app": "web", "tier": "f"}}, allowed=1))
    web = labels_of({"app": "web", "tier": "f"})
    generation = b.generation
    b.spent(("ns", "web"), "a")
    assert b.covering("ns", web)[0].allowed == 0 and b.generation > generation
    b.spent(("ns", "web"), "a")  # the same pod again: no double count
    assert b.covering("ns", web)[0].allowed == 0
    b.put(budget_of(pdb("web", {"matchLabels": {"app": "other"}}, allowed=1)))  # type: ignore[arg-type]
    assert b.covering("ns", web) == ()  # re-anchored: the old matchLabels pair is gone
    b.remove("ns", "web")
    assert len(b) == 0 and b.by_namespace == {}


def test_pods_with_the_same_labels_share_one_tuple() -> None:
    assert labels_of({"b": "2", "a": "1"}) is labels_of({"a": "1", "b": "2"})
    assert labels_of(None) == () and labels_of("x") == ()


def test_a_budget_whose_status_lags_its_spec_allows_nothing() -> None:
    obj = pdb("x", {}, allowed=3, observedGeneration=1)
    obj["metadata"]["generation"] = 2  # its spec changed; the controller has not counted it yet
    b = budget_of(obj)
    assert b is not None and b.allowed == 0
    obj["status"]["observedGeneration"] = 2
    b = budget_of(obj)
    assert b is not None and b.allowed == 3

"""Natural order: digit runs compare as numbers (`leaf2` < `leaf10`), text as text, and the name
itself breaks ties. natural_sorted sorts by one string per name; it must give exactly the order
of the tuple key below, which it stands for."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from agent.summary import usable_hcas
from common.model import Hca, HcaPort
from common.natural import natural_ranks, natural_sorted


def natural_key(name: str) -> tuple[str | int, ...]:
    """The order natural_sorted stands for, as plainly as it can be said: the text between digit
    runs (lower-cased, maybe empty at either end) alternating with the runs' values, so text
    always meets text and a number a number."""
    parts: list[str | int] = list(re.split(r"(\d+)", name.lower()))
    parts[1::2] = map(int, parts[1::2])
    return tuple(parts)


NAMES = st.lists(st.text(alphabet="ab-_.Z0129x", max_size=10), max_size=40)


@given(NAMES)
def test_natural_sorted_is_the_order_of_the_natural_key(names: list[str]) -> None:
    assert natural_sorted(names) == sorted(names, key=lambda n: (natural_key(n), n))


@given(NAMES)
def test_natural_sorted_takes_any_iterable(names: list[str]) -> None:
    assert natural_sorted(iter(names)) == natural_sorted(names)


def test_numbers_compare_as_numbers_and_leading_zeros_break_ties_by_name() -> None:
    names = ["leaf10", "leaf2", "leaf-1", "leaf", "Leaf02", "leaf002", "1leaf", "leaf2b"]
    # "leaf-1" after "leaf10": the text "leaf" sorts before "leaf-", as a shorter text does.
    assert natural_sorted(names) == [
        "1leaf",
        "leaf",
        "Leaf02",
        "leaf002",
        "leaf2",
        "leaf2b",
        "leaf10",
        "leaf-1",
    ]


@given(st.lists(st.text(alphabet="ab-_.Z0129x", max_size=10), min_size=0, max_size=200))
def test_natural_ranks_all_at_once_give_the_same_order(names: list[str]) -> None:
    ranks = natural_ranks(names)
    assert sorted(set(names), key=ranks.__getitem__) == natural_sorted(set(names))


def test_natural_ranks_of_names_outside_ascii_are_still_natural() -> None:
    names = ["nœud10", "nœud9", "n\u00e9ud1", "leaf00120", "leaf120", "leaf0"]
    ranks = natural_ranks(names)
    assert sorted(names, key=ranks.__getitem__) == natural_sorted(names)


def test_the_agent_orders_hcas_as_the_webhook_orders_names() -> None:
    """One natural order on both sides: the agent's usable HCAs come in natural_sorted's order,
    case folded (a case-sensitive key would put `Mlx5_3` before `mlx5_2`)."""
    names = ["mlx5_10", "Mlx5_3", "mlx5_2", "mlx5_1"]
    up = (HcaPort(port=1, state="ACTIVE", phys_state="LinkUp", rate_gbps=400, link_layer="IB"),)
    hcas = [Hca(name=n, gdr_capable=True, ports=up, compute_fabric=True) for n in names]
    assert usable_hcas(hcas) == natural_sorted(names) == ["mlx5_1", "mlx5_2", "Mlx5_3", "mlx5_10"]

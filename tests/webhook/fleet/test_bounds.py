"""The fleet's tables of pod-shaped keys (views per query, pins per preferred-HCA list) and its
status string table stay within their caps and keep no pod-sized key (issue 17)."""

from __future__ import annotations

import copy

from tests.webhook.admission.test_hca_pin import MOST, _cache
from tests.webhook.helpers import golden_cache
from webhook.fleet import ingest
from webhook.fleet.layouts import MAX_PINS, MAX_VIEWS, PIN_NAMES, VIEW_VALUES, Fleet


def test_views_never_exceed_their_cap_and_keep_no_long_query() -> None:
    fleet = Fleet.of_groups(golden_cache().groups().groups())
    for i in range(MAX_VIEWS + 50):
        fleet.candidates(((("gpufabric.io/hca-profile", "In", (f"p{i}",)),),))
    assert len(fleet._views) <= MAX_VIEWS
    wide = tuple(f"v{i}" for i in range(VIEW_VALUES + 1))
    everyone = fleet.candidates(((),)).nodes
    assert fleet.candidates(((("gpufabric.io/hca-profile", "NotIn", wide),),)).nodes == everyone
    assert all(sum(len(c[2]) for t in q for c in t) <= VIEW_VALUES for q in fleet._views)


def test_pins_never_exceed_their_cap_and_keep_no_long_list() -> None:
    cache = _cache()
    fleet = cache.groups()
    query = ((),)
    for i in range(MAX_PINS + 10):
        fleet.pin(query, (MOST[0], f"extra{i}"))
    view = fleet._view(query)
    assert 0 < len(view.pins) <= MAX_PINS
    long = (*MOST, *(f"extra{i}" for i in range(PIN_NAMES)))
    pin = fleet.pin(query, long)
    assert pin is not None and pin.hcas == tuple(MOST)  # answered as before
    assert all(len(key) <= PIN_NAMES for key in view.pins)


def test_interned_status_strings_never_exceed_their_cap() -> None:
    kept = copy.copy(ingest._STRINGS)
    try:
        for i in range(ingest.STRINGS_KEPT + 10):
            assert ingest._one(f"value-{i}") == f"value-{i}"
            assert len(ingest._STRINGS) <= ingest.STRINGS_KEPT
    finally:
        ingest._STRINGS.clear()
        ingest._STRINGS.update(kept)

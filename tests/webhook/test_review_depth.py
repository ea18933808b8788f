"""The nesting bound read from the review's text (webhook.review.text_too_deep) agrees with the
walk of the decoded value (too_deep) on any JSON, strings full of quotes, backslashes and
brackets included, and a deep fabric review is a 400 in every encoding json.loads accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook import review as rv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "admission"
BASE: dict[str, Any] = json.loads((FIXTURES / "pod-create.review.json").read_bytes())
TRICKY = st.text(alphabet='"\\[]{}/ab\n\u00e9\u2028', max_size=8)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY, inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(value=JSON, limit=st.integers(1, 8), ascii_only=st.booleans())
def test_text_bound_agrees_with_the_walk(value: Any, limit: int, ascii_only: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert rv.text_too_deep(body, limit) == rv.too_deep(value, limit)


def _nested(depth: int) -> Any:
    value: Any = '"]}\\'
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-be", "utf-32"])
def test_deep_fabric_review_is_400_in_any_encoding(encoding: str) -> None:
    doc = json.loads(json.dumps(BASE))
    doc["request"]["object"]["metadata"]["annotations"]["gpufabric.io/topology"] = "nvlink"
    doc["request"]["object"]["spec"]["containers"][0]["args"] = [_nested(rv.MAX_DEPTH)]
    with pytest.raises(rv.BadReview, match="nests deeper"):
        rv.parse(json.dumps(doc).encode(encoding))
    doc["request"]["object"]["spec"]["containers"][0]["args"] = [_nested(rv.MAX_DEPTH - 10)]
    assert rv.parse(json.dumps(doc).encode(encoding))["uid"] == BASE["request"]["uid"]

"""One rule for every enumerated annotation (issue 17 item 8): surrounding whitespace ignored, any
case, read as the accepted spelling; the same rule for the fabric and the group annotations."""

from __future__ import annotations

import pytest

from tests.webhook.helpers import golden_cache, pod, review
from webhook.admission.admit import admit
from webhook.admission.placement import Settings
from webhook.admission.requirements import requirements
from webhook.groups.admission.admit import admit_group
from webhook.groups.model.pods import parse_group

GROUP = {"gpufabric.io/group": "g", "gpufabric.io/group-size": "2"}


@pytest.mark.parametrize(
    ("key", "value", "field", "want"),
    [
        ("gpufabric.io/rdma", "REQUIRED", "rdma", "required"),
        ("gpufabric.io/rdma", " Preferred ", "rdma", "preferred"),
        ("gpufabric.io/cufile", "Required", "cufile", "required"),
        ("gpufabric.io/topology", "NVLink", "topology", "nvlink"),
        ("gpufabric.io/topology", "Same-Socket", "topology", "same-socket"),
    ],
)
def test_fabric_annotations_take_any_case(key: str, value: str, field: str, want: str) -> None:
    p = pod({key: value})
    assert getattr(requirements(p, "team-a", golden_cache().claim), field) == want


@pytest.mark.parametrize(
    ("key", "value", "want"),
    [
        ("gpufabric.io/group-level", "Leaf", ("level", "leaf")),
        ("gpufabric.io/group-level", " LEAF-PAIR", ("level", "leaf-pair")),
        ("gpufabric.io/group-level", "Auto", ("level", "auto")),
        ("gpufabric.io/group-locality", "Preferred", ("locality", "preferred")),
        ("gpufabric.io/group-locality", "REQUIRED ", ("locality", "required")),
    ],
)
def test_group_annotations_take_any_case(key: str, value: str, want: tuple[str, str]) -> None:
    spec, problems = parse_group({**GROUP, key: value})
    assert problems == [] and spec is not None
    assert getattr(spec, want[0]) == want[1]
    answer = admit(review(pod({**GROUP, key: value}))["request"], golden_cache(), Settings())
    assert answer.response["allowed"] is True


def test_a_wrong_value_is_still_denied_in_any_case() -> None:
    got = admit_group(pod({**GROUP, "gpufabric.io/group-level": "Rack"}), "CREATE")
    (problem,) = got.problems
    assert problem.startswith("gpufabric.io/group-level: 'Rack' is not valid; accepted values: ")


def test_a_group_size_beyond_int64_is_out_of_range_not_a_non_integer() -> None:
    _, problems = parse_group({**GROUP, "gpufabric.io/group-size": "1" + "0" * 20})
    assert problems == [
        "gpufabric.io/group-size: 100000000000000000000 is out of range; accepted values: "
        "integers from 1 to 9223372036854775807"
    ]

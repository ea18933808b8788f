"""The opt-in `monitoring` component and the Grafana dashboard: the Prometheus Operator objects render
and find the pods and ports that serve /metrics, every alert expression names only series the agent
and the webhook export (with their labels), docs/metrics.md lists exactly the alerts the rule has,
the dashboard has the group-placement and watch-staleness rows, and the dashboard and docs/metrics.md
name only metrics the code exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import generate_latest
from prometheus_client.metrics import MetricWrapperBase

from agent.metrics import AgentMetrics
from tests.manifests import DAEMONSET, ROOT, find, kustomize, render, selects
from webhook.server.metrics import WebhookMetrics

# Labels Prometheus adds to every series of a ServiceMonitor/PodMonitor target.
TARGET_LABELS = {"namespace", "pod", "instance", "job", "container", "service", "endpoint"}
FUNCTIONS = {
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "rate",
    "irate",
    "increase",
    "histogram_quantile",
    "time",
    "absent",
    "max_over_time",
    "min_over_time",
}
KEYWORDS = {"and", "or", "unless", "bool"}
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
}


def exported() -> dict[str, set[str]]:
    """Every series name the two programs export, with its label names."""
    series: dict[str, set[str]] = {}
    agent, hook = AgentMetrics(), WebhookMetrics()
    hook.admissions.count("mutated", 0.001)  # a plain collector: its series exist once counted
    for owner in (agent, hook):
        for family in owner.registry.collect():
            for sample in family.samples:
                series.setdefault(sample.name, set()).update(sample.labels)
        for metric in vars(owner).values():  # labelled metrics export nothing until first used
            if isinstance(metric, MetricWrapperBase):
                (family,) = metric.describe()
                labels = set(metric._labelnames)
                for suffix in SUFFIXES.get(family.type, ("",)):
                    extra = {"le"} if suffix == "_bucket" else set()
                    series.setdefault(family.name + suffix, set()).update(labels | extra)
    return series


def parse(expr: str) -> tuple[dict[str, set[str]], set[str], set[str]]:
    """(metric -> label names it is matched on, labels aggregated by, other identifiers) of a
    PromQL expression."""
    assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), expr
    rest = re.sub(r'"[^"]*"', '""', expr)
    grouped: set[str] = set()
    for m in re.finditer(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", rest):
        grouped |= {x.strip() for x in m.group(1).split(",") if x.strip()}
    rest = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", " ", rest)
    metrics: dict[str, set[str]] = {}
    for m in re.finditer(r"([A-Za-z_:][\w:]*)\s*\{([^}]*)\}", rest):
        matchers = {x.split("=")[0].strip(" !~") for x in m.group(2).split(",") if x.strip()}
        metrics.setdefault(m.group(1), set()).update(matchers)
    rest = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", rest)
    other: set[str] = set()
    for m in re.finditer(r"([A-Za-z_:][\w:]*)(\s*\()?", rest):
        name, call = m.group(1), m.group(2)
        if call:
            other.add(name)
        elif name.startswith("gpufabric_"):
            metrics.setdefault(name, set())
        elif not re.fullmatch(r"\d\w*", name):
            other.add(name)
    return metrics, grouped, other


def rules() -> list[dict[str, Any]]:
    rule = find(render("monitoring"), "PrometheusRule", "gpufabric")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def check_expr(expr: str, series: dict[str, set[str]]) -> set[str]:
    """Asserts EXPR names only exported series and labels; returns the labels its result has."""
    metrics, grouped, other = parse(expr)
    assert metrics, expr
    assert other <= FUNCTIONS | KEYWORDS, (expr, other - FUNCTIONS - KEYWORDS)
    known = set(TARGET_LABELS)
    for name, matched in metrics.items():
        assert name in series, (expr, name)
        assert matched <= series[name], (expr, name, matched - series[name])
        known |= series[name]
    assert grouped <= known, (expr, grouped - known)
    return grouped or known


def test_the_component_is_opt_in_and_finds_what_serves_metrics() -> None:
    kinds = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    assert not kinds & {d["kind"] for d in render()}
    docs = render("monitoring")
    assert {d["kind"] for d in docs if d["apiVersion"] == "monitoring.coreos.com/v1"} == kinds
    # ServiceMonitor -> the webhook Service -> its metrics port -> the webhook container's port.
    monitor = find(docs, "ServiceMonitor", "gpufabric-webhook")["spec"]
    service = find(docs, "Service", "gpufabric-webhook")
    assert selects(monitor["selector"], service["metadata"]["labels"])
    (endpoint,) = monitor["endpoints"]
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    pod = find(docs, "Deployment", "gpufabric-webhook")["spec"]["template"]
    assert selects({"matchLabels": service["spec"]["selector"]}, pod["metadata"]["labels"])
    ports = {p["name"]: p for p in pod["spec"]["containers"][0]["ports"]}
    assert port["targetPort"] in ports and endpoint["path"] == "/metrics"
    # PodMonitor -> the agent pods (hostNetwork: no Service) -> their metrics port.
    pods = find(docs, "PodMonitor", "gpufabric-agent")["spec"]
    agent = find(docs, "DaemonSet", "gpufabric-agent")["spec"]["template"]
    assert selects(pods["selector"], agent["metadata"]["labels"])
    (endpoint,) = pods["podMetricsEndpoints"]
    assert endpoint["port"] in {p["name"] for p in agent["spec"]["containers"][0]["ports"]}
    # Every object lands in the install namespace, wherever that is.
    moved = kustomize_with(["../daemonset/components/monitoring"], {"namespace": "gpu-ops"})
    for d in moved:
        if d["apiVersion"] == "monitoring.coreos.com/v1":
            assert d["metadata"]["namespace"] == "gpu-ops"
            assert "gpufabric-system" not in yaml.safe_dump(d)


def kustomize_with(components: list[str], extra: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(DAEMONSET, Path(tmp) / "daemonset")
        mine = Path(tmp) / "mine"
        mine.mkdir()
        body = {"resources": ["../daemonset/base"], "components": components, **extra}
        (mine / "kustomization.yaml").write_text(yaml.safe_dump(body))
        return kustomize(mine)


def test_alert_expressions_name_only_what_the_code_exports() -> None:
    series = exported()
    alerts = rules()
    assert len(alerts) >= 8
    for rule in alerts:
        assert re.fullmatch(r"Gpufabric[A-Za-z]+", rule["alert"])
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        result = check_expr(rule["expr"], series)
        text = " ".join(rule["annotations"].values())
        assert rule["annotations"]["summary"]
        used = set(re.findall(r"\$labels\.(\w+)", text))
        assert used <= result, (rule["alert"], used - result)
    # The checker itself tells a wrong name or label apart.
    for wrong in (
        "gpufabric_webhook_watch_stale > 60",
        'gpufabric_webhook_admissions_total{result="error"} > 0',
        "max by (node) (gpufabric_group_waiting) > 0",
        "avg_over_tim(gpufabric_group_waiting[5m]) > 0",
    ):
        try:
            check_expr(wrong, series)
        except AssertionError:
            continue
        raise AssertionError(f"accepted: {wrong}")


def test_metrics_doc_lists_exactly_the_alerts_of_the_rule() -> None:
    doc = (ROOT / "docs" / "metrics.md").read_text()
    section = doc[doc.index("## Alerts") :]
    documented = re.findall(r"^\| `(Gpufabric\w+)` \|", section, re.M)
    assert sorted(documented) == sorted(r["alert"] for r in rules())
    # The staleness alert the text recommends is the one the rule has.
    (stale,) = [r for r in rules() if r["alert"] == "GpufabricWebhookWatchStale"]
    assert "gpufabric_webhook_watch_stale_seconds) > 60" in stale["expr"]
    assert "`gpufabric_webhook_watch_stale_seconds > 60`" in doc


def test_the_install_doc_label_patch_reaches_the_three_objects() -> None:
    doc = (ROOT / "docs" / "install.md").read_text()
    section = doc[doc.index("**monitoring**") :]
    (patches,) = re.findall(r"```yaml\n(.*?)```", section, re.S)[:1]
    docs = kustomize_with(["../daemonset/components/monitoring"], yaml.safe_load(patches))
    labelled = {d["kind"] for d in docs if d["metadata"].get("labels", {}).get("release")}
    assert labelled == {"ServiceMonitor", "PodMonitor", "PrometheusRule"}


def test_the_dashboard_has_the_group_placement_and_staleness_rows() -> None:
    series = exported()
    dash = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    rows: dict[str, list[str]] = {}
    current = None
    for panel in sorted(dash["panels"], key=lambda p: (p["gridPos"]["y"], p["gridPos"]["x"])):
        if panel["type"] == "row":
            current = rows.setdefault(panel["title"], [])
            continue
        for target in panel["targets"]:
            check_expr(target["expr"], series)
            if current is not None:
                current.append(target["expr"])
    placement = " ".join(rows["Group placement"])
    for name in (
        "gpufabric_group_waiting",
        "gpufabric_group_decision_duration_seconds_bucket",
        "gpufabric_group_fragmentation_ratio",
    ):
        assert name in placement, name
    stale = " ".join(
        e for title, exprs in rows.items() if "staleness" in title.lower() for e in exprs
    )
    assert "gpufabric_webhook_watch_stale_seconds" in stale
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])


def test_dashboard_and_docs_name_only_metrics_the_code_exports() -> None:
    agent, hook = AgentMetrics(), WebhookMetrics()
    agent.condition.labels(type="FabricHealthy").set(1)
    agent.applies.labels(outcome="applied").inc()
    hook.admissions.count("mutated", 0.001)
    hook.labeler_applies.labels(outcome="applied").inc()
    hook.reader_fallbacks.labels(reason="declined").inc()
    hook.watch_stale.labels(watch="nodes").set(0)
    hook.leader.labels(lease="gpufabric-labeler").set(1)
    hook.decided("leaf", "placed", 0.001)
    hook.group_free_gpus.labels(level="leaf").set(8)
    hook.group_fragmentation.labels(level="leaf").set(0.5)
    hook.group_waiting_priority.labels(priority="100").set(1)
    hook.domain_made(1, 1)
    hook.all_bound(1.0)
    hook.refused("pods/patch", 422)
    exported = (generate_latest(agent.registry) + generate_latest(hook.registry)).decode()
    names = set(
        re.findall(
            r"^(gpufabric_[a-z_]+?)(?:_bucket|_count|_sum|_total|_created)?[{ ]", exported, re.M
        )
    )
    names |= {n + "_total" for n in names} | {n + "_bucket" for n in names}
    dash = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    used = {
        m
        for p in dash["panels"]
        for t in p.get("targets", [])  # rows have none
        for m in re.findall(r"gpufabric_[a-z_]+", t["expr"])
    }
    assert used and used <= names, used - names
    documented = set(
        re.findall(r"`(gpufabric_[a-z_]+)", (ROOT / "docs" / "metrics.md").read_text())
    )
    assert documented <= names, documented - names

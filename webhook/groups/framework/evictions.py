"""Evictions and the PodDisruptionBudgets they must count, before the first eviction: a
preemption plan's (preempt/) and a partly bound gang's release (gang/place.py); the eviction
itself goes through an `Evictor` (groups/placer/kube.py: the Eviction API).

The rules are the Eviction API's (kube-apiserver pkg/registry/core/pod/storage/eviction.go) and
kube-scheduler's (defaultpreemption `filterPodsWithPDBViolation`):
- a budget selects pods of its own namespace by `spec.selector`; a null selector selects none,
  an empty one (`{}`) every pod of the namespace (policy/v1);
- each eviction of a pod it selects spends one of `status.disruptionsAllowed`; a pod already in
  `status.disruptedPods` was counted by the API server and spends nothing again;
- a budget whose status lags its spec (`status.observedGeneration` < `metadata.generation`)
  allows nothing until the disruption controller has counted it again;
- a pod that two or more budgets select cannot be evicted at all (the API answers 500: "This pod
  has more than one PodDisruptionBudget, which the eviction subresource does not support").
kube-scheduler deletes past a budget when it finds no other victims; a plan here never does:
a domain is chosen only where every victim may go (victims.py asks a Ledger). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from webhook.groups.model.pods import Labels
from webhook.kube.nodeselector import requirement

BudgetKey = tuple[str, str]  # (namespace, name)
Outcome = Literal["evicted", "gone", "blocked"]


class Evictor(Protocol):
    """How an eviction is made: the Eviction API (groups/placer/kube.py), so PodDisruptionBudgets
    hold."""

    def evict_pod(
        self, namespace: str, name: str, dry_run: bool = False, uid: str = ""
    ) -> tuple[Outcome, str]:
        """("evicted", ""), ("gone", "") for a pod already deleted (404), or ("blocked", the
        API server's message) when it refuses (429: a PodDisruptionBudget). `dry_run`: only ask
        (the Eviction's deleteOptions.dryRun ["All"]), nothing is evicted; `uid`: only the pod
        of that UID (another of the name now is "gone")."""
        ...


@dataclass(frozen=True, slots=True)
class Budget:
    namespace: str
    name: str
    labels: Mapping[str, str] | None  # matchLabels; None with no expressions: selects nothing
    expressions: tuple[Mapping[str, Any], ...]
    allowed: int  # status.disruptionsAllowed
    disrupted: frozenset[str]  # status.disruptedPods: names the API server counted already

    @property
    def key(self) -> BudgetKey:
        return self.namespace, self.name

    def selects(self, labels: Labels) -> bool:
        if self.labels is None:
            return False
        have = dict(labels)
        if any(have.get(k) != v for k, v in self.labels.items()):
            return False
        return all(requirement(e, have).ok for e in self.expressions)


def budget_of(obj: Mapping[str, Any]) -> Budget | None:
    """A policy/v1 PodDisruptionBudget as the plan counts it; None without a name."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    status = obj.get("status") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    selector = spec.get("selector")
    labels: Mapping[str, str] | None = None
    expressions: tuple[Mapping[str, Any], ...] = ()
    if isinstance(selector, Mapping):
        match = selector.get("matchLabels") or {}
        labels = {str(k): str(v) for k, v in match.items()} if isinstance(match, Mapping) else {}
        raw = selector.get("matchExpressions") or []
        expressions = (
            tuple(e for e in raw if isinstance(e, Mapping)) if isinstance(raw, list) else ()
        )
    allowed = status.get("disruptionsAllowed")
    observed, generation = status.get("observedGeneration"), meta.get("generation")
    if isinstance(observed, int) and isinstance(generation, int) and observed < generation:
        allowed = 0  # the Eviction API refuses while the controller has not caught up (429)
    disrupted = status.get("disruptedPods") or {}
    return Budget(
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        labels=labels,
        expressions=expressions,
        # a budget the disruption controller has not counted yet allows nothing (its default)
        allowed=allowed if isinstance(allowed, int) and not isinstance(allowed, bool) else 0,
        disrupted=frozenset(disrupted) if isinstance(disrupted, Mapping) else frozenset(),
    )


class Budgets:
    """The cluster's budgets per namespace, kept up to date from a PodDisruptionBudget watch.

    Indexed by one matchLabels pair of each budget (its anchor), so finding the budgets of a pod
    reads its own labels, not every budget of its namespace: one namespace may hold thousands."""

    def __init__(self) -> None:
        self.by_namespace: dict[str, dict[str, Budget]] = {}
        self._anchored: dict[tuple[str, str, str], dict[str, Budget]] = {}  # (ns, key, value)
        self._scan: dict[str, dict[str, Budget]] = {}  # ns -> budgets without matchLabels
        self.generation = 0  # moves with every change: refusals counted before are stale

    def reset(self, items: Iterable[Budget] = ()) -> None:
        self.by_namespace, self._anchored, self._scan = {}, {}, {}
        for b in items:
            self._add(b)
        self.generation += 1

    def put(self, b: Budget) -> None:
        self._drop(b.namespace, b.name)
        self._add(b)
        self.generation += 1

    def remove(self, namespace: str, name: str) -> None:
        if self._drop(namespace, name):
            self.generation += 1

    def _slot(self, b: Budget) -> dict[str, Budget]:
        if b.labels:
            k, v = next(iter(sorted(b.labels.items())))
            return self._anchored.setdefault((b.namespace, k, v), {})
        return self._scan.setdefault(b.namespace, {})

    def _add(self, b: Budget) -> None:
        self.by_namespace.setdefault(b.namespace, {})[b.name] = b
        self._slot(b)[b.name] = b

    def _drop(self, namespace: str, name: str) -> bool:
        per = self.by_namespace.get(namespace, {})
        b = per.pop(name, None)
        if b is None:
            return False
        if not per:
            del self.by_namespace[namespace]
        slot = self._slot(b)
        slot.pop(name, None)
        if not slot:
            if b.labels:
                k, v = next(iter(sorted(b.labels.items())))
                del self._anchored[(namespace, k, v)]
            else:
                del self._scan[namespace]
        return True

    def spent(self, key: BudgetKey, pod: str) -> None:
        """An eviction of `pod` under this budget went through: count it until the watch says."""
        b = self.by_namespace.get(key[0], {}).get(key[1])
        if b is not None and pod not in b.disrupted:
            self.put(
                Budget(
                    b.namespace,
                    b.name,
                    b.labels,
                    b.expressions,
                    b.allowed - 1,
                    b.disrupted | {pod},
                )
            )

    def covering(self, namespace: str, labels: Labels) -> tuple[Budget, ...]:
        if namespace not in self.by_namespace:
            return ()
        found = [b for b in self._scan.get(namespace, {}).values() if b.selects(labels)]
        for k, v in labels:
            slot = self._anchored.get((namespace, k, v))
            if slot:
                found += [b for b in slot.values() if b.selects(labels)]
        return tuple(found)

    def __len__(self) -> int:
        return sum(len(per) for per in self.by_namespace.values())


@dataclass(frozen=True, slots=True)
class Use:
    """One budget against a plan: what it allows and how many of the plan's victims it selects."""

    namespace: str
    name: str
    allowed: int
    wanted: int
    shared: bool = False  # it selects a victim another budget selects too

    @property
    def blocks(self) -> bool:
        return self.shared or self.wanted > self.allowed

    def words(self) -> str:
        if self.shared:
            return (
                f"{self.namespace}/{self.name} (a victim under more than one budget: the "
                "Eviction API refuses it)"
            )
        return f"{self.namespace}/{self.name} (allowed {self.allowed}, wanted {self.wanted})"


class Ledger:
    """The budgets a plan in one domain spends, victim unit by unit: a unit goes only when every
    budget selecting one of its pods still allows it. What refused units wanted is kept, to name
    the budgets that block the domain."""

    def __init__(self, budgets: Budgets | None) -> None:
        self.budgets = budgets
        self.wanted: dict[BudgetKey, int] = {}  # victims of the plan each budget selects
        self.refused: dict[BudgetKey, int] = {}  # victims it kept from the plan
        self.seen: dict[BudgetKey, Budget] = {}
        self.shared: set[BudgetKey] = set()

    def _keys(self, namespace: str, name: str, labels: Labels) -> tuple[list[BudgetKey], bool]:
        """The budgets evicting one pod spends, and whether the Eviction API lets it go at all."""
        if self.budgets is None or not self.budgets.by_namespace:
            return [], True
        over = self.budgets.covering(namespace, labels)
        for b in over:
            self.seen.setdefault(b.key, b)
        if len(over) > 1:
            self.shared.update(b.key for b in over)
            return [b.key for b in over], False
        return [b.key for b in over if name not in b.disrupted], True

    def take(self, pods: Iterable[tuple[str, str, Labels]]) -> bool:
        """Spend for a unit of (namespace, name, labels); False, spending nothing, when a budget
        does not allow it."""
        spend: dict[BudgetKey, int] = {}
        stuck: set[BudgetKey] = set()
        for namespace, name, labels in pods:
            keys, ok = self._keys(namespace, name, labels)
            if not ok:
                stuck.update(keys)
                continue
            for k in keys:
                spend[k] = spend.get(k, 0) + 1
        stuck.update(
            k for k, n in spend.items() if self.wanted.get(k, 0) + n > self.seen[k].allowed
        )
        if stuck:
            for k in stuck:
                self.refused[k] = self.refused.get(k, 0) + max(spend.get(k, 0), 1)
            return False
        for k, n in spend.items():
            self.wanted[k] = self.wanted.get(k, 0) + n
        return True

    def give_back(self, pods: Iterable[tuple[str, str, Labels]]) -> None:
        """A unit taken before is spared after all (the plan's reprieve)."""
        for namespace, name, labels in pods:
            keys, ok = self._keys(namespace, name, labels)
            for k in keys if ok else ():
                self.wanted[k] -= 1

    def uses(self) -> tuple[Use, ...]:
        """Every budget that selects a victim of the plan, with what it allows and is wanted."""
        return tuple(
            Use(k[0], k[1], self.seen[k].allowed, n) for k, n in sorted(self.wanted.items()) if n
        )

    def blocking(self) -> tuple[Use, ...]:
        """The budgets that kept victims the domain needed: allowed, and wanted with them."""
        return tuple(
            Use(k[0], k[1], self.seen[k].allowed, self.wanted.get(k, 0) + n, k in self.shared)
            for k, n in sorted(self.refused.items())
        )

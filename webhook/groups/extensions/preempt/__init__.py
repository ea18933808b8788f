"""Preemption for groups: which lower-priority pods to evict so a waiting group fits one domain
(victims.py, pure), the running pods per domain and priority (index.py), and the plans, holds and
evictions of waiting groups (state.py; the Eviction API call itself is in groups/placer/kube.py)."""

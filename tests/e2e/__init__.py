"""The end-to-end tier: gpufabric as installed, on a real Kubernetes control plane.

Run: `bash hack/test.sh` (after the unit tests), or `.venv/bin/pytest -p no:xdist -m e2e tests/e2e`.
Pieces, each usable on its own (bench/ imports them too):
- cluster.py  find_tools(), start(tools, Flags(gates=..., controllers=..., api_args=...)) / stop():
              a control plane on free ports (PLAIN, or GANG: PodGroups served); Cluster.client(token),
              token(account, ns, node=...), write_kubeconfig()
- install.py  daemonset/base as shipped minus the workloads, webhooks called on 127.0.0.1
- webhook.py  `gpufabric-webhook serve --labeler --placer` as ServiceAccount gpufabric-webhook
              (program=: another build's)
- env.py      installed(cluster, workdir): install.py's install and webhook.py's serve together;
              bring_up(tools, workdir, gang=...) / tear_down(): all of the above plus the kubelet
              stand-in (kubelet.py); namespaces per test
- fleet.py    Nodes, their statuses written by the agent's own code with node-bound tokens, the
              topology ConfigMap; cleanup() removes them
- pods.py, groupcheck.py, waits.py: pods as users write them, what a placed group must show,
              waits that say what they waited for
Fixtures (conftest.py): cluster_env (plain; indirect "gang" for PodGroups), ns, fleet.
"""

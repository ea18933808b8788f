"""Peak memory of `serve`'s first sync (issue 22): N GpuNodeStatus and N Nodes listed, to /readyz.

A fake API server on 127.0.0.1 (this process) serves N copies of the HGX H100 golden status
(tests/golden; each with its own name, GPU UUIDs and HCA GUIDs, and the managedFields server-side
apply gives it: ~27 KB of JSON each, as issue 22 measured) in pages with limit + continue as the
API server pages them, N Nodes (metadata with labels as GPU Operator and the labeler leave them),
Leases (so the labeler and placer lead) and empty lists for the rest. `serve` runs with the
Deployment's flags (--labeler --placer; `--flags ''`: the admission cache alone) in its own
process; its peak RSS (VmHWM) is read once it is ready and every list has been asked for, against a
bare baseline in the same run: a process that imports what `serve` imports (the kubernetes client,
aiohttp, prometheus-client) and nothing else.

    .venv/bin/python bench/webhook_sync_bench.py [--sizes 4096,16384,65536] [--bar 256] [--src DIR]
        [--flags '--labeler --placer']

`--src DIR` runs `serve` from another checkout (e.g. the code before issue 22) for a before/after
pair; the fake API server and the baseline stay this checkout's.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import api  # noqa: E402
from webhook.labeler.nodes import wanted_labels  # noqa: E402

GOLDEN = yaml.safe_load((ROOT / "tests" / "golden" / "hgx-h100.yaml").read_text())["status"]
KEYS = ("index", "name", "type", "port")  # how the status's lists are keyed (the CRD's map keys)
BARE = "import kubernetes.client, aiohttp.web, prometheus_client, yaml; import webhook.serve"


def fields_v1(value: Any) -> Any:
    """The managedFields tree server-side apply records for `value` (f: keys, k: list entries)."""
    if isinstance(value, dict):
        return {f"f:{k}": fields_v1(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        key = next((k for k in KEYS if all(k in v for v in value)), None)
        if key is not None:
            return {
                f"k:{json.dumps({key: v[key]}, separators=(',', ':'))}": {".": {}, **fields_v1(v)}
                for v in value
            }
    return {}


def status_template() -> str:
    meta = {
        "name": "@NAME@",
        "uid": "00000000-0000-4000-8000-@UID@",
        "resourceVersion": "900",
        "generation": 1,
        "creationTimestamp": "2026-11-22T14:21:34Z",
        "managedFields": [
            {
                "apiVersion": f"{api.GROUP}/{api.VERSION}",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": fields_v1(GOLDEN)},
                "manager": api.AGENT_FIELD_MANAGER,
                "operation": "Apply",
                "subresource": "status",
                "time": "2026-11-22T14:21:34Z",
            }
        ],
    }
    obj = {"apiVersion": f"{api.GROUP}/{api.VERSION}", "kind": "GpuNodeStatus", "metadata": meta}
    text = json.dumps({**obj, "status": GOLDEN}, separators=(",", ":"))
    # Per node: the GPU UUIDs' fourth group and the GUIDs' second group carry the node's number.
    text = re.sub(r"(GPU-\w{8}-\w{4}-\w{4}-)\w{4}", r"\1@N@", text)
    return re.sub(r"([0-9a-f]{4}:)[0-9a-f]{4}(:[0-9a-f]{4}:[0-9a-f]{4})", r"\1@N@\2", text)


def node_template() -> str:
    ours = wanted_labels(GOLDEN)  # what the labeler wants: it finds nothing to write
    labels = {
        "kubernetes.io/hostname": "@NAME@",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": "us-east-1a",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.machine": "HGX-H100",
        "nvidia.com/cuda.driver.major": "535",
        "nvidia.com/cuda.driver.minor": "161",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/gpu.deploy.driver": "true",
        **ours,
    }
    managed = [
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in ours}}},
            "manager": api.LABELER_FIELD_MANAGER,
            "operation": "Apply",
            "time": "2026-11-22T14:21:34Z",
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {f"f:{k}": {} for k in labels if k not in ours}}
            },
            "manager": "kubelet",
            "operation": "Update",
            "time": "2026-11-22T14:21:34Z",
        },
    ]
    meta = {
        "name": "@NAME@",
        "uid": "00000000-0000-4000-9000-@UID@",
        "resourceVersion": "901",
        "labels": labels,
        "managedFields": managed,
    }
    obj = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    return json.dumps(obj, separators=(",", ":"))


class FakeApi:
    """What `serve --labeler --placer` asks of the API server, for `n` nodes."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.status, self.node = status_template(), node_template()
        self.leases: dict[str, dict[str, Any]] = {}
        self.watching: dict[str, int] = {}  # watches started per path: their lists are done
        self.writes: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def one(self, template: str, i: int) -> str:
        return (
            template.replace("@NAME@", f"gpu-{i:05d}")
            .replace("@UID@", f"{i:012x}")
            .replace("@N@", f"{i:04x}")
        )

    def page(self, template: str, kind: str, query: dict[str, list[str]]) -> bytes:
        limit = int(query.get("limit", ["500"])[0])
        start = int(query.get("continue", ["0"])[0])
        end = min(self.n, start + limit)
        meta = {"resourceVersion": "1000", **({"continue": str(end)} if end < self.n else {})}
        items = ",".join(self.one(template, i) for i in range(start, end))
        head = f'{{"apiVersion":"v1","kind":"{kind}","items":['
        return (head + items + '],"metadata":' + json.dumps(meta) + "}").encode()


def handler(fake: FakeApi) -> type[BaseHTTPRequestHandler]:
    empty = b'{"apiVersion":"v1","kind":"List","items":[],"metadata":{"resourceVersion":"1000"}}'

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def send(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def hold_watch(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            fake.stop.wait(300)
            self.wfile.write(b"0\r\n\r\n")

        def do_GET(self) -> None:
            url = urlparse(self.path)
            q = parse_qs(url.query)
            if q.get("watch") == ["true"]:
                with fake.lock:
                    fake.watching[url.path] = fake.watching.get(url.path, 0) + 1
                self.hold_watch()
                return
            if url.path.endswith("/gpunodestatuses"):
                self.send(200, fake.page(fake.status, "GpuNodeStatusList", q))
            elif url.path == "/api/v1/nodes":
                self.send(200, fake.page(fake.node, "PartialObjectMetadataList", q))
            elif "/leases/" in url.path:
                lease = fake.leases.get(url.path)
                if lease is None:
                    self.send(404, json.dumps({"kind": "Status", "code": 404}).encode())
                else:
                    self.send(200, json.dumps(lease).encode())
            else:
                self.send(200, empty)

        def write(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = urlparse(self.path).path
            if "/leases" in path:
                lease = json.loads(body)
                lease.setdefault("metadata", {})["resourceVersion"] = str(time.monotonic_ns())
                name = lease["metadata"]["name"]
                key = path if path.endswith(f"/{name}") else f"{path}/{name}"
                fake.leases[key] = lease
                self.send(201 if self.command == "POST" else 200, json.dumps(lease).encode())
                return
            with fake.lock:
                fake.writes.append(f"{self.command} {path}")
            self.send(201 if self.command == "POST" else 200, body or b"{}")

        def do_POST(self) -> None:
            self.write()

        def do_PUT(self) -> None:
            self.write()

        def do_PATCH(self) -> None:
            self.write()

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_mb(pid: int) -> tuple[float, float]:
    """(VmHWM, VmRSS) of a process, MB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            values[line.split(":")[0]] = int(line.split()[1]) / 1024
    return values["VmHWM"], values["VmRSS"]


def bare_mb() -> float:
    code = f"{BARE}; import pathlib; print(pathlib.Path('/proc/self/status').read_text())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def files(tmp: Path, api_port: int) -> list[str]:
    import datetime as dt

    from certs.pki import make_ca, make_serving

    now = dt.datetime.now(dt.UTC)
    serving = make_serving(make_ca("bench", now), ["localhost"], now)
    (tmp / "tls.crt").write_bytes(serving.cert_pem)
    (tmp / "tls.key").write_bytes(serving.key_pem)
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{api_port}"}}],
        "users": [{"name": "u", "user": {"token": "bench"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    return [
        "--tls-cert",
        str(tmp / "tls.crt"),
        "--tls-key",
        str(tmp / "tls.key"),
        "--kubeconfig",
        str(tmp / "kubeconfig"),
    ]


LISTS = {  # every watch `serve --labeler --placer` starts once its list is done (Nodes: twice)
    f"/apis/{api.GROUP}/{api.VERSION}/{api.NODE_STATUS_PLURAL}": 1,
    f"/apis/{api.GROUP}/{api.VERSION}/{api.CLAIM_PLURAL}": 1,
    "/api/v1/nodes": 2,
    "/api/v1/pods": 1,
}


def sync(n: int, timeout: float, src: Path = ROOT, flags: tuple[str, ...] = ()) -> dict[str, Any]:
    fake = FakeApi(n)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler(fake))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    tmp = Path(tempfile.mkdtemp())
    metrics = free_port()
    argv = [sys.executable, "-m", "webhook", "serve", "--port", "0", "--metrics-port", str(metrics)]
    argv += [*files(tmp, httpd.server_address[1]), *flags]
    lists = dict(LISTS)
    if "--placer" not in flags:  # the placer's own Node list and its Pod list
        lists["/api/v1/nodes"], lists["/api/v1/pods"] = 1, 0
    log = (tmp / "serve.log").open("w")
    proc = subprocess.Popen(argv, cwd=src, stdout=log, stderr=subprocess.STDOUT)
    started = time.monotonic()
    ready_s = None
    try:
        while time.monotonic() - started < timeout:
            if proc.poll() is not None:
                raise SystemExit(f"serve exited {proc.returncode}; see {tmp / 'serve.log'}")
            if ready_s is None:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/readyz") as r:
                        if r.status == 200:
                            ready_s = time.monotonic() - started
                except OSError:
                    pass
            with fake.lock:
                listed = all(fake.watching.get(p, 0) >= k for p, k in lists.items())
            if ready_s is not None and listed:
                time.sleep(2.0)  # what follows the lists: the labeler's and placer's first pass
                hwm, rss = peak_mb(proc.pid)
                return {
                    "n": n,
                    "ready_s": ready_s,
                    "peak_mb": hwm,
                    "rss_mb": rss,
                    "writes": fake.writes,
                }
            time.sleep(0.2)
        raise SystemExit(f"{n}: not synced within {timeout:.0f} s; see {tmp / 'serve.log'}")
    finally:
        proc.kill()
        proc.wait()
        fake.stop.set()
        httpd.shutdown()
        httpd.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,16384,65536", help="nodes, comma-separated")
    parser.add_argument("--bar", type=float, default=256.0, help="peak MiB allowed (default 256)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per size")
    parser.add_argument("--src", default="", help="run serve from this checkout (before/after)")
    parser.add_argument(
        "--flags",
        default="--labeler --placer",
        help="serve's flags (default: the Deployment's, --labeler --placer; '' = cache only)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        f"serve {args.flags or '(cache only)'}; status JSON {len(status_template())} B, "
        f"Node metadata JSON {len(node_template())} B"
    )
    worst = 0.0
    for n in sizes:
        bare = bare_mb()
        src = Path(args.src).resolve() if args.src else ROOT
        out = sync(n, args.timeout, src, tuple(args.flags.split()))
        worst = max(worst, out["peak_mb"])
        print(
            f"{n:6d} nodes: ready in {out['ready_s']:5.1f} s, peak RSS {out['peak_mb']:6.1f} MiB "
            f"(RSS after sync {out['rss_mb']:6.1f} MiB); bare imports {bare:5.1f} MiB "
            f"(x{out['peak_mb'] / bare:.2f}, +{out['peak_mb'] - bare:.1f} MiB); "
            f"writes {len(out['writes'])}",
            flush=True,
        )
    print(
        f"largest peak {worst:.1f} MiB; bar {args.bar:.0f} MiB: {'ok' if worst <= args.bar else 'OVER'}"
    )


if __name__ == "__main__":
    main()

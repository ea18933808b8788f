#!/usr/bin/env python3
"""Make tests/fixtures/fabric/ibnetdiscover/psmn-x5-spine-hosts.topofile from the real PSMN X5 dump.

    python hack/spine_hosts_dump.py [--check]

Two edits to psmn-x5.topofile (issue 24 item 3: a preview without statuses must not turn spines
that hold a few management hosts into leaf domains):
1. Each CA that psmn-x5.map names gets the NodeDescription `<host> HCA-1` (the real dump carries
   the firmware default, so a preview would name no host; the map is the operator's own join).
2. Ten management hosts `mgmt01`..`mgmt10` (NodeDescription `mgmtNN mlx5_0`, made-up GUIDs
   0x0000aa00000000NN) hang off the two spine switches S-0008f10500108098 and
   S-0008f10500108530 (five each, on their first free ports), each cable printed from both ends
   as ibnetdiscover prints it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DUMPS = ROOT / "tests" / "fixtures" / "fabric" / "ibnetdiscover"
OUT = DUMPS / "psmn-x5-spine-hosts.topofile"
SPINES = ("S-0008f10500108098", "S-0008f10500108530")
HOSTS_PER_SPINE = 5


def make() -> str:
    text = (DUMPS / "psmn-x5.topofile").read_text()
    names = {}
    for line in (DUMPS / "psmn-x5.map").read_text().splitlines():
        if line.startswith("H-"):
            guid, host = line.split()
            names["H-" + guid[2:].lower()] = host
    text = re.sub(
        r'^(Ca\s+\d+\s+"(H-[0-9a-f]{16})"\s+# )"[^"]*"',
        lambda m: f'{m.group(1)}"{names[m.group(2)]} HCA-1"' if m.group(2) in names else m.group(0),
        text,
        flags=re.MULTILINE,
    )
    text = re.sub(
        r'("(H-[0-9a-f]{16})"\[\d+\](?:\([0-9a-f]+\))?\s+# )"[^"]*"',
        lambda m: f'{m.group(1)}"{names[m.group(2)]} HCA-1"' if m.group(2) in names else m.group(0),
        text,
    )
    lines = text.splitlines()
    cas = []
    n = 0
    for spine in SPINES:
        start = next(
            i for i, ln in enumerate(lines) if f'"{spine}"' in ln and ln.startswith("Switch")
        )
        end = next(
            i for i in range(start + 1, len(lines) + 1) if i == len(lines) or not lines[i].strip()
        )
        used = {int(re.match(r"\[(\d+)\]", ln).group(1)) for ln in lines[start + 1 : end]}  # type: ignore[union-attr]
        free = [p for p in range(1, 37) if p not in used][:HOSTS_PER_SPINE]
        desc = re.search(r'# "([^"]*)"', lines[start]).group(1)  # type: ignore[union-attr]
        added = []
        for port in free:
            n += 1
            guid = f"0000aa00000000{n:02x}"
            host = f"mgmt{n:02d}"
            added.append(
                f'[{port}]\t"H-{guid}"[1]({guid[4:]}) \t\t# "{host} mlx5_0" lid {900 + n} 4xQDR'
            )
            cas += [
                "vendid=0x2c9",
                "devid=0x1003",
                f"caguid=0x{guid[4:]}",
                f'Ca\t1 "H-{guid}"\t\t# "{host} mlx5_0"',
                f'[1]({guid[4:]}) \t"{spine}"[{port}]\t\t# lid {900 + n} lmc 0 "{desc}" lid 1 4xQDR',
                "",
            ]
        lines[end:end] = added
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join([*lines, "", *cas[:-1]]) + "\n"


def main() -> int:
    text = make()
    if "--check" in sys.argv[1:]:
        if OUT.read_text() != text:
            print(f"{OUT} is stale: run hack/spine_hosts_dump.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

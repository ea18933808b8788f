"""A scanned dump's node ids, descriptions and GUIDs kept as arrays and one buffer, made into
strings on demand (the Dump's NodeTexts)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from webhook.fabric.sources.ib.dump import Column

I64 = NDArray[np.int64]
U64 = NDArray[np.uint64]
U8 = NDArray[np.uint8]
Words = tuple[U64, U64]  # GUIDs as printed: their 16 hex characters as two 8-byte words


class PackedTexts:
    """Node ids and descriptions kept as arrays and one buffer, made into strings on demand:
    the labeler reads a few thousand switch names, not half a million HCAs' descriptions."""

    def __init__(self, kinds: U8, text: Words, descs: bytes, desc_sizes: I64, guids: U64) -> None:
        self.kinds, self.text, self.buffer, self.guids = kinds, text, descs, guids
        self.starts = np.concatenate(([0], np.cumsum(desc_sizes + 1)))

    def ids(self) -> list[str]:
        rows = np.empty((len(self.kinds), 19), np.uint8)  # "S-" + 16 characters + newline
        rows[:, 0] = self.kinds
        rows[:, 1] = ord("-")
        rows[:, 2:10] = self.text[0].view(np.uint8).reshape(-1, 8)
        rows[:, 10:18] = self.text[1].view(np.uint8).reshape(-1, 8)
        rows[:, 18] = ord("\n")
        got: list[str] = rows.tobytes().decode("ascii").split("\n")[:-1]
        return got

    def descs(self) -> list[str]:
        got: list[str] = self.buffer.decode("ascii").split("\n")[:-1]
        return got

    def guids_of(self, numbers: Column) -> U64:
        return self.guids[np.asarray(numbers, np.int64)]

    def ids_of(self, numbers: list[int]) -> list[str]:
        return PackedTexts(
            self.kinds[numbers],
            (self.text[0][numbers], self.text[1][numbers]),
            b"",
            np.zeros(0, np.int64),
            self.guids[numbers],
        ).ids()

    def descs_of(self, numbers: list[int]) -> list[str]:
        starts, buffer = self.starts.tolist(), self.buffer
        return [buffer[starts[n] : starts[n + 1] - 1].decode("ascii") for n in numbers]

    def id_of(self, number: int) -> str:
        chars = (
            self.text[0][number : number + 1].tobytes()
            + self.text[1][number : number + 1].tobytes()
        )
        return f"{chr(self.kinds[number])}-{chars.decode('ascii')}"

    def desc_of(self, number: int) -> str:
        start, end = self.starts[number], self.starts[number + 1] - 1
        return self.buffer[start:end].decode("ascii")

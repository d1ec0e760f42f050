"""The PNG of ``python -m benchmarks``: every ratio against its target.

One horizontal bar per ratio, numbered as in the Markdown table, on a
logarithmic axis (1x in the middle); its target is a black tick, the bar is
green when the verdict is PASS, red for MISS and grey without a target.
matplotlib draws it when installed (an optional dependency: the project does
not require it); without it a small writer below draws the same bars with
the standard library only (zlib), labelled by row number.
"""

from __future__ import annotations

import math
import struct
import zlib
from typing import Any, Dict, List, Sequence, Tuple

Rgb = Tuple[int, int, int]
COLOURS: Dict[str, Rgb] = {"PASS": (46, 160, 67), "MISS": (214, 39, 40)}
GREY: Rgb = (150, 150, 150)
SPAN = 8.0  # the axis runs from 1/SPAN to SPAN


def _position(ratio: float) -> float:
    """Where ``ratio`` sits on the axis, 0..1, clamped."""
    clamped = min(max(ratio, 1 / SPAN), SPAN)
    return 0.5 + math.log(clamped) / (2 * math.log(SPAN))


def write_png(path: str, entries: Sequence[Dict[str, Any]], title: str) -> str:
    """Draws the plot; returns which renderer drew it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _write_plain_png(path, entries)
        return "standard library (matplotlib is not installed)"
    height = max(2.0, 0.28 * len(entries) + 1.0)
    fig, ax = plt.subplots(figsize=(10, height))
    for y, entry in enumerate(entries):
        ratio = entry["ratio"]
        if ratio is None or ratio <= 0:
            continue
        colour = [c / 255 for c in COLOURS.get(entry["verdict"], GREY)]
        ax.barh(y, math.log10(ratio), left=0, color=colour)
        spread = entry.get("spread")
        if spread and min(spread) > 0:
            ax.plot([math.log10(spread[0]), math.log10(spread[1])], [y, y], color="black", linewidth=0.8)
        if entry["target"] is not None:
            ax.plot([math.log10(entry["target"])] * 2, [y - 0.4, y + 0.4], color="black")
    ax.set_yticks(range(len(entries)))
    ax.set_yticklabels([f"{n}. {e['script']}: {e['what']}"[:70] for n, e in enumerate(entries, 1)], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="grey", linewidth=0.5)
    ax.set_xlabel("log10(ratio); tick: target; line: quartiles of a per-repetition ratio")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return "matplotlib"


# -------------------------------------------------- standard-library PNG --

# 3x5 digits, one string of 15 bits per digit, row by row.
DIGITS = (
    "111101101101111",
    "010110010010111",
    "111001111100111",
    "111001111001111",
    "101101111001001",
    "111100111001111",
    "111100111101111",
    "111001001001001",
    "111101111101111",
    "111101111001111",
)
ROW_H, LABEL_W, PLOT_W, MARGIN, SCALE = 14, 40, 600, 10, 2


def _write_plain_png(path: str, entries: Sequence[Dict[str, Any]]) -> None:
    width = LABEL_W + PLOT_W + 2 * MARGIN
    height = ROW_H * max(len(entries), 1) + 2 * MARGIN
    pixels: List[bytearray] = [bytearray(b"\xff" * (3 * width)) for _ in range(height)]

    def fill(x0: int, y0: int, x1: int, y1: int, colour: Rgb) -> None:
        for y in range(max(y0, 0), min(y1, height)):
            row = pixels[y]
            for x in range(max(x0, 0), min(x1, width)):
                row[3 * x : 3 * x + 3] = bytes(colour)

    def number(value: int, x: int, y: int) -> None:
        for digit in str(value):
            bits = DIGITS[int(digit)]
            for i, bit in enumerate(bits):
                if bit == "1":
                    px, py = x + (i % 3) * SCALE, y + (i // 3) * SCALE
                    fill(px, py, px + SCALE, py + SCALE, (0, 0, 0))
            x += 4 * SCALE

    left = MARGIN + LABEL_W
    one = left + int(PLOT_W * _position(1.0))
    for index, entry in enumerate(entries):
        top = MARGIN + index * ROW_H
        number(index + 1, MARGIN, top + 2)
        ratio = entry["ratio"]
        if ratio is not None and ratio > 0:
            end = left + int(PLOT_W * _position(ratio))
            colour = COLOURS.get(entry["verdict"], GREY)
            fill(min(one, end), top + 3, max(one, end) + 1, top + ROW_H - 3, colour)
        if entry["target"] is not None:
            tick = left + int(PLOT_W * _position(entry["target"]))
            fill(tick - 1, top + 1, tick + 1, top + ROW_H - 1, (0, 0, 0))
    fill(one, MARGIN, one + 1, height - MARGIN, (90, 90, 90))  # the 1x line
    for decade in (1 / SPAN, SPAN):  # the axis ends
        x = left + int(PLOT_W * _position(decade))
        fill(x, MARGIN, x + 1, height - MARGIN, (200, 200, 200))

    raw = b"".join(b"\x00" + bytes(row) for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n")
        handle.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        handle.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        handle.write(chunk(b"IEND", b""))

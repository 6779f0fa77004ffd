#!/usr/bin/env python3
"""shot_check.py SCREENSHOT.png DOM.html — does a screenshot of bench.sh's index.html show every plot?

DOM.html is the same page as Chromium rendered it (--dump-dom, same window size): its script has
put each plot's place on the page into the img's data-rect ("left,top,width,height"). For each
plot the screenshot must hold, inside that rectangle, a white plot area and gnuplot's drawn
series: pixels of the first line colour (#9400d3), not a blank or a broken-image icon.
Prints one line per plot; exits 1 when one is missing. Standard library only (zlib)."""
import re
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise SystemExit(f"{path}: unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def main():
    shot, dom = sys.argv[1], open(sys.argv[2], encoding="utf-8").read()
    w, h, bpp, rows = read_png(shot)
    plots = re.findall(r'<img class="plot" src="([^"]+)"[^>]*data-rect="(\d+),(\d+),(\d+),(\d+)"', dom)
    total = re.search(r'id="plots"[^>]*data-total="(\d+)"', dom)
    if not total or int(total.group(1)) != len(plots) or not plots:
        print(f"the page lists {total.group(1) if total else '?'} plot(s); {len(plots)} have a place on it")
        return 1
    bad = 0
    for src, *rect in plots:
        x0, y0, rw, rh = map(int, rect)
        if x0 + rw > w or y0 + rh > h:
            print(f"{src}: at {x0},{y0} {rw}x{rh}, outside the {w}x{h} screenshot")
            bad += 1
            continue
        white = purple = 0
        for y in range(y0 + 2, y0 + rh - 2):
            row = rows[y]
            for x in range(x0 + 2, x0 + rw - 2):
                r, g, b = row[x * bpp], row[x * bpp + 1], row[x * bpp + 2]
                if r > 245 and g > 245 and b > 245:
                    white += 1
                elif abs(r - 148) < 40 and g < 60 and abs(b - 211) < 40:
                    purple += 1
        area = (rw - 4) * (rh - 4)
        ok = white > area // 2 and purple >= 50
        print(f"{src}: {rw}x{rh} at {x0},{y0}: {100 * white // area}% white, {purple} pixels of the first series' colour: {'shown' if ok else 'NOT SHOWN'}")
        bad += not ok
    print(f"{len(plots) - bad} of {len(plots)} plot(s) shown in {shot} ({w}x{h})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

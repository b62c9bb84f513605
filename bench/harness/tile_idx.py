#!/usr/bin/env python3
"""Writes a plain IDX file of ROWS images by repeating the images of SRC (IDX, plain or .gz) in
order, the last copy cut short: a large data set of real images for throughput runs (the MNIST
test set tiled to 10^6 images is 784 MB).

    usage: tile_idx.py SRC ROWS OUT
"""
import gzip
import os
import struct
import sys


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] or data[1] or data[2] != 8:
        sys.exit(f"{path}: not a uint8 IDX file")
    ndim = data[3]
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    body = data[4 + 4 * ndim:]
    width = 1
    for d in dims[1:]:
        width *= d
    if len(body) != dims[0] * width:
        sys.exit(f"{path}: {len(body)} bytes after the header, not {dims[0]} x {width}")
    return dims, body, width


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    src, rows, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if not 0 < rows < 2**32:
        sys.exit("ROWS must be in [1, 2^32)")
    dims, body, width = read_idx(src)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(bytes([0, 0, 8, len(dims)]) + struct.pack(f">{len(dims)}I", rows, *dims[1:]))
        left = rows
        while left:
            take = min(left, dims[0])
            f.write(body[:take * width])
            left -= take
    os.replace(tmp, out)


if __name__ == "__main__":
    main()

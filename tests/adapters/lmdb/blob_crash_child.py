"""Uploads into a `FileBlobStore` without end, for `test_blobs` to kill with SIGKILL.

    python -m tests.adapters.lmdb.blob_crash_child ROOT SEED

`WRITERS` threads each store blobs of random sizes (some repeated, some given up, some over
their limit) in chunks of random sizes. A line `finished <sha256> <size>` goes to stdout only
after `finish()` returned, in one write(2) to the pipe (shorter than PIPE_BUF, so whole), so
after a SIGKILL the parent holds exactly the blobs a caller could have been told were durable.
"""

from __future__ import annotations

import os
import random
import sys
import threading

from amc.adapters.lmdb.blobs import FileBlobStore
from amc.service import BlobTooLarge

WRITERS = 3
MIB = 1024 * 1024


def write_forever(store: FileBlobStore, rng: random.Random) -> None:
    seen: list[bytes] = []
    while True:
        if seen and rng.random() < 0.2:
            data = rng.choice(seen)  # identical bytes again: the dedup path
        else:
            data = rng.randbytes(rng.choice((0, rng.randint(1, 4096), rng.randint(1, 3 * MIB))))
            seen = (seen + [data])[-4:]
        roll = rng.random()
        limit = len(data) - 1 if roll < 0.1 and data else None
        with store.begin(limit) as writer:
            try:
                at = 0
                while at < len(data):
                    step = rng.randint(1, 300_000)
                    writer.write(data[at : at + step])
                    at += step
            except BlobTooLarge:
                continue
            if roll > 0.95:
                continue  # given up: the context manager aborts
            blob = writer.finish()
        os.write(1, f"finished {blob.sha256} {blob.size}\n".encode())


def main(root: str, seed: int) -> None:
    store = FileBlobStore(root)
    os.write(1, b"ready\n")
    threads = [
        threading.Thread(target=write_forever, args=(store, random.Random(seed * 100 + n)), daemon=True)
        for n in range(WRITERS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))

"""Which numba kernels a first run compiles, and the CPU seconds each takes, with an empty cache.

Runs one exactmem command in this process with ``NUMBA_CACHE_DIR`` pointed at a fresh temporary
folder and listens to numba's compile events: each kernel the command calls from Python is a
row, charged the CPU time (``time.process_time``) of its own compilation and of everything
compiled inside it (the helpers it calls and numba's library code); "helpers" counts those.
Prints a Markdown table, the largest first, and the whole command's CPU time.

    python benchmarks/first_run_kernels.py verify --quiet --construction ks25-next-token \\
        --data d10000.exm m10000.exm
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Any


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit(__doc__)
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="exactmem-first-run-")
    from exactmem.runtime import jit

    numba = jit._load()  # imported before the clock starts, as a warm run imports it too
    event = numba.core.event
    rows: list[tuple[str, float, int]] = []
    stack: list[list[Any]] = []  # [CPU at start, compiles inside]

    class Listener(event.Listener):
        def on_start(self, ev: Any) -> None:
            stack.append([time.process_time(), 0])

        def on_end(self, ev: Any) -> None:
            started, inside = stack.pop()
            if stack:
                stack[-1][1] += inside + 1
                return
            func = ev.data["dispatcher"].py_func
            name = f"{func.__module__.rsplit('.', 1)[-1]}.{func.__qualname__}"
            rows.append((name, time.process_time() - started, inside))

    event.register("numba:compile", Listener())
    from exactmem.commands.main import main as cli

    started = time.process_time()
    try:
        cli(argv)
    except SystemExit:
        pass
    total = time.process_time() - started
    print("| kernel | CPU s | helpers |")
    print("|---|---|---|")
    for name, seconds, inside in sorted(rows, key=lambda r: -r[1]):
        print(f"| {name} | {seconds:.2f} | {inside} |")
    compiling = sum(r[1] for r in rows)
    print(f"| all {len(rows)} | {compiling:.2f} | {sum(r[2] for r in rows)} |")
    print(f"\ncommand: {total:.2f} s CPU in this process, of which compiling {compiling:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:])

"""``exactmem warmup``: compile every numba kernel up front, into the per-user cache
(:mod:`exactmem.runtime.jit`), so that no later run compiles — a run loads a cached kernel in
milliseconds, whatever its size."""

from __future__ import annotations

import argparse
import time

from exactmem.commands import emit_json
from exactmem.core.errors import EXIT_VERIFIED
from exactmem.runtime.progress import Progress


def run(args: argparse.Namespace) -> int:
    from exactmem.runtime import jit

    progress = Progress(not args.quiet)
    progress(f"compiling or loading every kernel (cache: {jit.cache_dir()})", force=True)
    start = time.perf_counter()
    from exactmem.constructions import witness_kernel
    from exactmem.evaluate.fast import kernels

    kernels.warm()
    witness_kernel.warm()
    seconds = time.perf_counter() - start
    if args.json:
        emit_json(
            {
                "cache_dir": str(jit.cache_dir()),
                "seconds": round(seconds, 3),
                "compiled": [{"kernel": k, "seconds": round(s, 3)} for k, s in jit.compiled],
            }
        )
    else:
        print(
            f"kernels ready in {jit.cache_dir()}: {len(jit.compiled)} compiled now, {seconds:.1f} s"
        )
    return EXIT_VERIFIED

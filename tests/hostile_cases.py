"""Hostile files of issues 16 and 27, written byte by byte, and a way to run the command line on
each with its time and peak memory measured.

Shared by the regression suite (tests/test_hostile_inputs.py: each case exits 2 within its
bounds) and the benchmark (benchmarks/hostile_inputs.py: the measured time and memory). The
writers encode the formats as docs/files.md and the safetensors specification state them, not
through exactmem's own writers, so a hostile file can break any rule of the format.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAGIC = b"EXMB\r\n\x1a\n"


# --------------------------------------------------------------------------- writers


def container(header: dict, arrays: dict[str, tuple[str, list, bytes]]) -> bytes:
    """A binary container (docs/files.md): ``header`` (without ``arrays``) and each array as
    (dtype, shape, payload bytes), laid out one after another at 8-byte boundaries."""
    metas = {
        name: {"dtype": dtype, "shape": shape, "offset": 0, "bytes": len(payload)}
        for name, (dtype, shape, payload) in arrays.items()
    }
    for name, (_, _, payload) in arrays.items():
        metas[name]["sha256"] = hashlib.sha256(payload).hexdigest()
    while True:  # the offsets' digits change the header's length: iterate to the fixed point
        text = json.dumps({**header, "arrays": metas}, separators=(",", ":")).encode()
        at = -(-(24 + len(text)) // 8) * 8
        changed = False
        for name, (_, _, payload) in arrays.items():
            if metas[name]["offset"] != at:
                metas[name]["offset"], changed = at, True
            at = -(-(at + len(payload)) // 8) * 8
        if not changed:
            break
    out = bytearray(struct.pack("<8sIIQ", MAGIC, 1, 0, len(text)) + text)
    for meta, (_, _, payload) in zip(metas.values(), arrays.values(), strict=True):
        out += bytes(meta["offset"] - len(out)) + payload
    return bytes(out)


def container_arrays(path: Path) -> tuple[dict, dict[str, tuple[str, list, bytes]]]:
    """(header without ``arrays``, arrays as :func:`container` takes them) of a container."""
    raw = path.read_bytes()
    (length,) = struct.unpack_from("<Q", raw, 16)
    header = json.loads(raw[24 : 24 + length])
    arrays = {
        name: (m["dtype"], m["shape"], raw[m["offset"] : m["offset"] + m["bytes"]])
        for name, m in header.pop("arrays").items()
    }
    return header, arrays


def safetensors(tensors: dict[str, tuple[str, list, bytes]], metadata: dict | None = None):
    """A safetensors file: each tensor as (dtype, shape, bytes), in order, and ``metadata``."""
    header: dict = {} if metadata is None else {"__metadata__": metadata}
    at = 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        at += len(data)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(d for _, _, d in tensors.values())


def gzip_bomb(size: int) -> bytes:
    """A gzip file that expands about 1000-fold to ``size`` bytes of spaces."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b" " * (1 << 20)
    return b"".join([z.compress(chunk) for _ in range(size >> 20)] + [z.flush()])


# --------------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    """One hostile input: the command line run on it and what its error must name."""

    name: str
    args: tuple[str, ...]
    message: str
    issue: str  # where it was found: "16", "27.2", …


def _tiny_model(folder: Path) -> tuple[Path, Path, Path]:
    """A VYS model on 4 points, as JSON and as a container, and its dataset."""
    from exactmem.constructions import vys
    from exactmem.datasets.dataset import random_points
    from exactmem.files.dataset_files import save_dataset
    from exactmem.files.model_files import save_model

    data = folder / "data.json"
    ds = random_points(4, 2, 2, seed=1)
    save_dataset(ds, data)
    model = vys.build(ds, {"seed": 0})[0]
    save_model(model, folder / "model.json")
    save_model(model, folder / "model.exm")
    return folder / "model.json", folder / "model.exm", data


def _fifo(path: Path) -> Path:
    """A FIFO nobody writes to: opening it to read waits for a writer."""
    if not path.exists():
        os.mkfifo(path)
    return path


def _points_with(coordinate: str) -> str:
    return (
        '{"format": "exactmem.dataset/1", "task": "points", "points": [['
        + coordinate
        + ', "1"]], "labels": [1]}'
    )


def _f32(values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def _mahdavi_empty(d: int) -> bytes:
    """A mahdavi24 checkpoint of about 200 bytes whose query has shape [0, d]."""
    return safetensors(
        {
            "attn.0.query.weight": ("F32", [0, d], b""),
            "attn.0.key.weight": ("F32", [0, d], b""),
            "attn.0.value.weight": ("F32", [1, 1], _f32([1.0])),
            "attn.0.output.weight": ("F32", [1, 1], _f32([1.0])),
        }
    )


def inflating_checkpoint(rows: int = 16, cols: int = 512) -> bytes:
    """A float64 mahdavi24 checkpoint whose query alternates the smallest subnormal and a huge
    value: the exact map's common denominator 2^1074 widens every weight to ~2100 bits."""
    import numpy as np

    q = np.where(np.arange(rows * cols) % 2, 2.0**1000, 5e-324).astype("<f8")
    ones = np.ones(2 * cols, "<f8")
    return safetensors(
        {
            "attn.0.query.weight": ("F64", [rows, cols], q.tobytes()),
            "attn.0.key.weight": ("F64", [rows, cols], np.ones(rows * cols, "<f8").tobytes()),
            "attn.0.value.weight": ("F64", [2, cols], ones.tobytes()),
            "attn.0.output.weight": ("F64", [2, 2], np.ones(4, "<f8").tobytes()),
        }
    )


CLAIM = (
    'paper = "p"\nstatement = "s"\nconstruction = "vys"\nexpect = "verified"\n'
    '[[instance]]\ngenerator = "random_points"\nN = {N}\nd = {d}\nC = 2\nseed = 1\n'
)


def cases(folder: Path) -> list[Case]:
    """Every hostile case, its files written into ``folder``."""
    model_json, model_exm, data = _tiny_model(folder)
    out: list[Case] = []

    def write(name: str, content: bytes | str) -> Path:
        p = folder / name
        p.write_bytes(content.encode() if isinstance(content, str) else content)
        return p

    def verify_model(name: str, path: Path, message: str, issue: str) -> None:
        out.append(Case(name, ("verify", str(path), "--data", str(data)), message, issue))

    def verify_data(name: str, path: Path, message: str, issue: str) -> None:
        out.append(Case(name, ("verify", str(model_json), "--data", str(path)), message, issue))

    # issue 27.2: zero-length dimensions, declared sizes
    header, arrays = container_arrays(model_exm)
    for label, entries in (("5e7", 5 * 10**7), ("1e18", 10**18)):
        packed = dict(arrays)
        starts = list(struct.unpack(f"<{len(arrays['entry_start'][2])}B", arrays["entry_start"][2]))
        starts[-1] = entries
        packed["entry_start"] = ("<i8", [len(starts)], struct.pack(f"<{len(starts)}q", *starts))
        packed["col"] = ("<u1", [entries, 0], b"")
        packed["value"] = ("<i2", [entries, 0], b"")
        path = write(f"empty-{label}.exm", container(header, packed))
        verify_model(f".exm col/value of shape [{label}, 0]", path, "header.arrays.col", "27.2")
    for label, d in (("1e12", 10**12), ("3e7", 3 * 10**7)):
        path = write(f"query-{label}.safetensors", _mahdavi_empty(d))
        out.append(
            Case(
                f"safetensors mahdavi24 query [0, {label}]",
                ("import", str(path), "--arch", "mahdavi24", "--out", str(folder / "q.json")),
                "attn.0.query.weight",
                "27.2",
            )
        )
    claims = folder / "claims"
    claims.mkdir(exist_ok=True)
    (claims / "big.toml").write_text(CLAIM.format(N=10**8, d=10**4))
    out.append(
        Case("claim N = 10^8, d = 10^4", ("check", "--proofs", str(claims)), "instance[0]", "27.2")
    )

    # last round's hostile claims: code in a formula, a huge power, a huge integer literal
    instance = CLAIM.format(N=6, d=2)
    payload = "sqrt.__globals__['__builtins__']['__import__']('os').system('touch pwned') + 100"
    for label, text, message in (
        (
            "claim with code in a formula",
            instance + f"[bounds]\nwidth = {json.dumps(payload)}\n",
            "bounds.width",
        ),
        ("claim bound 10**10**10", instance + '[bounds]\ndepth = "10**10**10"\n', "exponent"),
        ("claim N of 60000 digits", CLAIM.format(N="9" * 60000, d=2), "instance[0].N"),
    ):
        claim_dir = folder / f"claims-{len(out)}"
        claim_dir.mkdir(exist_ok=True)
        (claim_dir / "hostile.toml").write_text(text)
        out.append(Case(label, ("check", "--proofs", str(claim_dir)), message, "16"))

    # issue 27.3: checkpoint metadata
    for label, meta, message in (
        ("ln_eps = 1e-999999999", {"ln_eps": "1e-999999999", "n_head": "1"}, "ln_eps"),
        ("ln_eps of 200001 digits", {"ln_eps": "0." + "0" * 200_000 + "1"}, "ln_eps"),
        ("n_head = ²", {"n_head": "\u00b2"}, "n_head"),
    ):
        path = write(f"gpt-{len(out)}.safetensors", safetensors({}, meta))
        args = ("import", str(path), "--arch", "gpt", "--out", str(folder / "g.json"))
        out.append(Case(f"gpt {label}", args, message, "27.3"))
    path = write("inflate.safetensors", inflating_checkpoint())
    args = ("import", str(path), "--arch", "mahdavi24", "--out", str(folder / "i.json"))
    out.append(Case("F64 inflation ~80×", (*args, "--max-bytes", "1000000"), "--max-bytes", "27.3"))

    # issue 27.4: shapes exactly as the format says
    packed = dict(arrays)
    dtype, (entries,), payload = arrays["col"]
    packed["col"] = (dtype, [entries, 1], payload)
    verify_model(".exm 2-D col", write("col-2d.exm", container(header, packed)), "col", "27.4")
    packed = dict(arrays)
    dtype, (rows,), payload = arrays["bias"]
    packed["bias"] = (dtype, [rows, 2], payload + payload)
    path = write("bias-2d.exm", container(header, packed))
    verify_model(".exm bias of shape [R, 2]", path, "header.arrays.bias", "27.4")

    # issue 27.5: devices and pipes
    verify_model("/dev/zero as the model", Path("/dev/zero"), "not a regular file", "27.5")
    verify_data("/dev/zero as the dataset", Path("/dev/zero"), "not a regular file", "27.5")
    fifo = _fifo(folder / "fifo.json")
    verify_data("a FIFO as the dataset (no writer)", fifo, "not a regular file", "27.5")
    fifo_exm = _fifo(folder / "fifo.exm")
    verify_model("a FIFO as a container", fifo_exm, "not a regular file", "27.5")
    fifo_st = _fifo(folder / "fifo.safetensors")
    args = ("import", str(fifo_st), "--arch", "gpt", "--out", str(folder / "f.json"))
    out.append(Case("a FIFO as a checkpoint", args, "not a regular file", "27.5"))
    fifo_claims = folder / "fifo-claims"
    fifo_claims.mkdir(exist_ok=True)
    _fifo(fifo_claims / "claim.toml")
    args = ("check", "--proofs", str(fifo_claims))
    out.append(Case("a FIFO as a claim file", args, "not a regular file", "27.5"))
    args = ("generate", "text", "--file", "/dev/zero", "--window", "3", "--out", str(data) + "x")
    out.append(Case("/dev/zero as a text", args, "not a regular file", "27.5"))
    out.append(Case("/dev/zero as a certificate", ("show", "/dev/zero"), "/dev/zero", "27.5"))

    # issue 16: numbers, nesting and gzip
    big = "7" * 10**7
    deep = b"[" * 10**6 + b"]" * 10**6
    for name, content, message in (
        ("exponent 1e100000000", _points_with('"1e100000000"'), "exponent"),
        ("exponent 1e-99999999", _points_with('"1e-99999999"'), "exponent"),
        ("10^7-digit string", _points_with(f'"{big}"'), "digits"),
        ("10^7-digit rational", _points_with(f'"1/{big}"'), "digits"),
        ("10^7-digit JSON integer", _points_with(big), "digits"),
        (
            "10^7-digit label",
            _points_with('"1"').replace('"labels": [1]', f'"labels": [{big}]'),
            "digits",
        ),
        ("10^6-deep JSON", deep, "nested deeper"),
    ):
        verify_data(name, write(f"i16-{len(out)}.json", content), message, "16")
    verify_data(
        "10^6-deep JSON, gzip", write("deep.json.gz", gzip.compress(deep)), "nested deeper", "16"
    )
    verify_data("gzip bomb", write("bomb.json.gz", gzip_bomb(40 << 20)), "expands beyond", "16")
    return out


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Run:
    code: int  # the exit code; -9 when killed at a cap
    seconds: float
    peak_mb: float  # peak resident memory of the process (ru_maxrss)
    stderr: str
    capped: str = ""  # why it was killed, if it was


# The command is started by a small process of its own (the standard library only): Linux
# counts in a process's ru_maxrss the memory of the process it was forked from, up to its exec,
# so a command forked from the test runner (hundreds of MB) would report the runner's peak.
SPAWNER = """
import json, os, signal, sys, time
from hostile_cases import _rss_mb
args, timeout, cap_mb, err_path = json.loads(sys.argv[1])
with open(err_path, "wb") as err:
    start = time.monotonic()
    pid = os.posix_spawn(sys.executable, [sys.executable, "-m", "exactmem", *args], os.environ,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                                       (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                                       (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
    capped = ""
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if not capped and time.monotonic() - start > timeout:
            capped = f"killed after {timeout:.0f} s"
        elif not capped and _rss_mb(pid) > cap_mb:
            capped = f"killed at {cap_mb:.0f} MB resident"
        if capped:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
print(json.dumps([os.waitstatus_to_exitcode(status), time.monotonic() - start,
                  usage.ru_maxrss / 1024, capped]))
"""


def run_cli(
    args: tuple[str, ...],
    *,
    timeout: float = 60.0,
    cap_mb: float = 3000.0,
    pythonpath: Path = ROOT,
) -> Run:
    """``python -m exactmem ARGS`` in a new process, its own peak memory read by ``wait4``;
    killed past ``timeout`` seconds or ``cap_mb`` resident, so a case that hangs or explodes
    cannot take the machine."""
    here = Path(__file__).resolve().parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(pythonpath), str(here)]),
        "EXACTMEM_DEBUG": "",
    }
    handle, name = tempfile.mkstemp(prefix="exactmem-hostile-", suffix=".err")
    os.close(handle)
    err_path = Path(name)
    spec = json.dumps([list(args), timeout, cap_mb, str(err_path)])
    out = subprocess.run(
        [sys.executable, "-c", SPAWNER, spec],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),  # not the checkout: no file of a case lands there
        timeout=timeout + 60,
    )
    if out.returncode:
        raise RuntimeError(f"the spawner failed: {out.stderr}")
    code, seconds, peak_mb, capped = json.loads(out.stdout)
    stderr = err_path.read_text(errors="replace")
    err_path.unlink()
    return Run(code, seconds, peak_mb, stderr, capped)


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0

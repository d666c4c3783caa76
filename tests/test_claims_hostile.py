"""Claim files are hostile input: every field is checked as data, formulas never run as code,
and `check` runs the shipped claims unless told otherwise."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import exactmem
from exactmem.claims.proofs import (
    MAX_CLAIM_BYTES,
    Claim,
    find_proofs_dir,
    load_claim,
    load_claims,
    shipped_proofs_dir,
)
from exactmem.commands.main import main
from exactmem.core.errors import InputError

ROOT = Path(exactmem.__file__).resolve().parent.parent
PAYLOAD = "sqrt.__globals__['__builtins__']['__import__']('os').system('touch pwned') + 100"

HEAD = 'paper = "p"\nstatement = "s"\nconstruction = "vys"\nexpect = "verified"\n'
INSTANCE = '[[instance]]\ngenerator = "random_points"\nN = 6\nd = 2\nC = 2\nseed = 1\n'


def claim_file(tmp_path: Path, text: str, name: str = "hostile.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "exactmem", "check", "--quiet", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang, not a speed assertion
    )


def test_the_payload_runs_nothing_and_exits_2(tmp_path):
    claims = tmp_path / "claims"
    claims.mkdir()
    claim_file(claims, HEAD + f"[bounds]\nwidth = {json.dumps(PAYLOAD)}\n" + INSTANCE)
    out = run_cli(tmp_path, "--proofs", "claims")
    assert out.returncode == 2, out.stderr
    assert "hostile.toml" in out.stderr and "bounds.width" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "pwned").exists()


def test_a_huge_power_exits_2(tmp_path):
    claims = tmp_path / "claims"
    claims.mkdir()
    claim_file(claims, HEAD + '[bounds]\ndepth = "10**10**10"\n' + INSTANCE)
    out = run_cli(tmp_path, "--proofs", "claims")
    assert out.returncode == 2, out.stderr
    assert "hostile.toml: bounds.depth" in out.stderr and "exponent" in out.stderr


def test_check_ignores_proofs_of_the_current_folder(tmp_path):
    """A hostile ./proofs is never read: the shipped claims run (here none match -k, exit 5;
    had ./proofs been loaded, its payload would have exited 2)."""
    (tmp_path / "proofs").mkdir()
    claim_file(tmp_path / "proofs", HEAD + f'[bounds]\nwidth = "{PAYLOAD}"\n' + INSTANCE)
    out = run_cli(tmp_path, "-k", "hostile")
    assert out.returncode == 5, out.stderr
    assert not (tmp_path / "pwned").exists()


def test_the_shipped_claims_are_found_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shipped = shipped_proofs_dir()
    assert shipped == (ROOT / "proofs") or shipped == (ROOT / "exactmem" / "proofs")
    assert find_proofs_dir(None) == shipped
    assert len(load_claims(shipped)) >= 10
    assert find_proofs_dir(str(tmp_path)) == tmp_path
    with pytest.raises(InputError, match="--proofs nowhere: not a directory"):
        find_proofs_dir("nowhere")


def test_shipped_claims_in_both_layouts(tmp_path, monkeypatch):
    """A wheel puts the claims in exactmem/claims/shipped/ next to proofs.py; an editable install
    or a checkout keeps them in proofs/ beside the package. Nothing else is searched."""
    import exactmem.claims.proofs as module

    wheel = tmp_path / "site" / "exactmem" / "claims"
    (wheel / "shipped").mkdir(parents=True)
    monkeypatch.setattr(module, "__file__", str(wheel / "proofs.py"))
    assert shipped_proofs_dir() == (wheel / "shipped").resolve()
    checkout = tmp_path / "checkout"
    (checkout / "exactmem" / "claims").mkdir(parents=True)
    (checkout / "proofs").mkdir()
    (checkout / "pyproject.toml").write_text("")
    monkeypatch.setattr(module, "__file__", str(checkout / "exactmem" / "claims" / "proofs.py"))
    assert shipped_proofs_dir() == (checkout / "proofs").resolve()
    (checkout / "pyproject.toml").unlink()  # a proofs/ beside a package that is no checkout
    monkeypatch.chdir(checkout)
    with pytest.raises(InputError, match="no claim files shipped with the package"):
        find_proofs_dir(None)


def test_help_says_where_the_claims_come_from(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "claims shipped with the package" in text and "--proofs DIR" in text


def test_every_shipped_claim_loads():
    for claim in load_claims(shipped_proofs_dir()):
        assert isinstance(claim, Claim) and claim.instances
        assert claim.name == claim.path.stem  # no shipped claim sets a name
        assert all(isinstance(check, str) for check in claim.refuted_by)


WRONG = [
    # (claim text, the key path the message must name)
    (HEAD.replace('"vys"', "5") + INSTANCE, "construction: must be a string"),
    (HEAD + "options = 5\n" + INSTANCE, "options: must be a table"),
    (HEAD + 'instance = ["a"]\n', "instance[0]: must be a table"),
    (HEAD + "instance = []\n", "instance: no instances"),
    (HEAD + 'refuted_by = "labels"\n' + INSTANCE, "refuted_by: must be an array"),
    (HEAD + "refuted_by = [1]\n" + INSTANCE, "refuted_by[0]: must be a string"),
    (HEAD + "colour = 1\n" + INSTANCE, "unknown key 'colour'"),
    (HEAD + 'name = "a\\u001b[2J"\n' + INSTANCE, "name: must be letters, digits"),
    (HEAD + 'name = ""\n' + INSTANCE, "name: must be letters, digits"),
    (HEAD.replace('paper = "p"\n', ""), "missing key 'paper'"),
    (HEAD.replace('"verified"', '"maybe"') + INSTANCE, "expect: must be 'verified' or 'refuted'"),
    (HEAD.replace('"verified"', '"refuted"') + INSTANCE, "must name the checks in refuted_by"),
    (HEAD + "[bounds]\nwidth = 12\n" + INSTANCE, "bounds.width: must be a string"),
    (HEAD + '[bounds]\nspeed = "1"\n' + INSTANCE, "bounds.speed: bound on unknown metric"),
    (HEAD + '[bounds]\nwidth = "N + q"\n' + INSTANCE, "bounds.width: unknown names q"),
    (HEAD + '[define]\nsqrt = "2"\n' + INSTANCE, "define.sqrt: 'sqrt' is a variable"),
    (HEAD + '[define]\nN = "2"\n' + INSTANCE, "define.N: 'N' is a variable"),
    (HEAD + '[define]\nK = ["2"]\n' + INSTANCE, "define.K: must be a string"),
    (HEAD + '[define]\nK = "L"\nL = "1"\n' + INSTANCE, "define.K: unknown names L"),
    (HEAD + '[define]\n"a b" = "1"\n' + INSTANCE, "define.a b: a define's name"),
    (HEAD + '[options]\ngadget = "nope"\n' + INSTANCE, "options.gadget = 'nope': expected one"),
    (HEAD + "[options]\ngadget = 1\n" + INSTANCE, "options.gadget = 1: expected one of"),
    (HEAD + '[options]\ngroup_size = "3"\n' + INSTANCE, "options.group_size: must be an integer"),
    (HEAD + "[options]\ngroup_size = 0\n" + INSTANCE, "options.group_size = 0: expected a pos"),
    (HEAD + "[options]\ngroup_size = 1.5\n" + INSTANCE, "options.group_size: must be a string,"),
    (HEAD + "[options]\ncolour = 1\n" + INSTANCE, "options.colour: unknown option"),
    (HEAD + INSTANCE.replace("N = 6", 'N = "3"'), "instance[0].N: must be an integer"),
    (HEAD + INSTANCE.replace("N = 6", "N = true"), "instance[0].N: must be an integer"),
    (HEAD + INSTANCE.replace("N = 6", "N = 0"), "instance[0].N: must be an integer in [1,"),
    (HEAD + INSTANCE.replace("seed = 1", "seed = -1"), "instance[0].seed: must be an integer"),
    (HEAD + INSTANCE.replace("N = 6\n", ""), "instance[0]: missing key 'N'"),
    (HEAD + INSTANCE + "colour = 1\n", "instance[0].colour: unknown key"),
    (HEAD + INSTANCE + 'tier = "slow"\n', "instance[0].tier: must be 'quick' or 'full'"),
    (HEAD + INSTANCE + "tier = 1\n", "instance[0].tier: must be a string"),
    (HEAD + INSTANCE + "options = 5\n", "instance[0].options: must be a table"),
    (HEAD + INSTANCE + "options = { colour = 1 }\n", "instance[0].options.colour: unknown"),
    (HEAD + INSTANCE.replace("random_points", "nope"), "instance[0].generator: must be one"),
    (
        HEAD + INSTANCE.replace("random_points", "random_sequences") + 'n = 2\nfamily = "x"\n',
        "instance[0].family: must be one of",
    ),
    (HEAD + "[[instance]]\nN = 1\n", "instance[0]: missing key 'generator'"),
    (HEAD + INSTANCE + "[instance.options]\nheads = 3\n", "instance[0].options.heads: unknown"),
    ("paper = \n", "not valid TOML"),
    ('paper = "p"\npaper = "q"\n', "not valid TOML"),
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", "not valid TOML"),
]


@pytest.mark.parametrize("text, message", WRONG)
def test_wrong_fields_name_the_file_and_the_key(tmp_path, text, message):
    path = claim_file(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_claim(path)
    assert str(info.value).startswith(f"claim file {path}")
    assert message in str(info.value)


def test_mahdavi_options_are_typed(tmp_path):
    head = HEAD.replace('"vys"', '"mahdavi24"')
    inst = '[[instance]]\ngenerator = "attention"\nT = 5\nn = 3\nd = 2\nC = 2\n'
    for options, message in [
        ('heads = "3"', "options.heads: must be an integer"),
        ('temperature = "-1"', "options.temperature = '-1'"),
        ("over_capacity = 1", "options.over_capacity: must be a boolean, got an integer"),
    ]:
        path = claim_file(tmp_path, head + f"[options]\n{options}\n" + inst)
        with pytest.raises(InputError) as info:
            load_claim(path)
        assert message in str(info.value)
    claim = load_claim(
        claim_file(tmp_path, head + '[options]\nheads = 2\nscore = "softmax"\n' + inst)
    )
    assert claim.options == {"heads": 2, "score": "softmax"}


def test_too_large_or_not_utf8_or_unreadable(tmp_path):
    big = claim_file(tmp_path, HEAD + "#" * MAX_CLAIM_BYTES + "\n" + INSTANCE, "big.toml")
    with pytest.raises(InputError, match=f"big.toml: larger than {MAX_CLAIM_BYTES} bytes"):
        load_claim(big)
    raw = tmp_path / "latin.toml"
    raw.write_bytes(b'paper = "\xe9"\n')
    with pytest.raises(InputError, match="latin.toml: not UTF-8"):
        load_claim(raw)
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    with pytest.raises(InputError, match="folder.toml: cannot read"):
        load_claim(folder)


def test_a_huge_integer_literal_is_refused(tmp_path):
    path = claim_file(tmp_path, HEAD + INSTANCE.replace("N = 6", "N = " + "9" * 60000))
    # refused by Python's digit limit, or (the CLI lifts it) by the range of N
    with pytest.raises(InputError, match=r"hostile.toml: (not valid TOML|instance\[0\].N: must)"):
        load_claim(path)
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(InputError, match=r"instance\[0\].N: must be an integer in"):
            load_claim(path)
    finally:
        sys.set_int_max_str_digits(old)


@pytest.mark.parametrize(
    "text, message",
    [
        (HEAD + 'refuted_by = "labels"\n' + INSTANCE, "refuted_by: must be an array"),
        (HEAD + INSTANCE.replace("N = 6", 'N = "3"'), "instance[0].N: must be an integer"),
        (HEAD + "options = 5\n" + INSTANCE, "options: must be a table"),
        (HEAD + 'instance = ["a"]\n', "instance[0]: must be a table"),
    ],
)
def test_wrong_fields_exit_2_through_the_cli(tmp_path, capsys, text, message):
    """The fields that exited 3 before (a TypeError deep in the run) exit 2 at load."""
    claim_file(tmp_path, text)
    assert main(["check", "--proofs", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"hostile.toml: {message}" in err and "internal error" not in err


def test_a_good_claim_with_formulas_runs(tmp_path, capsys):
    text = HEAD + '[define]\nK = "Max(1, ceiling(sqrt(N)))"\n[bounds]\nwidth = "12"\n'
    text += 'depth = "100*K + 10**3 − 2 × 5 ÷ 5"\n' + INSTANCE
    claim_file(tmp_path, text)
    code = main(["check", "--proofs", str(tmp_path), "--quiet", "--evaluator", "reference"])
    assert code == 0, capsys.readouterr()


# --------------------------------------------------------------------------- fuzz

GOOD_NAMES = ["N", "d", "C", "r", "delta", "n", "pi", "E"]
NAMES = [*GOOD_NAMES, "K", "q", "__import__", "os", "sqrt"]
JUNK = [".", "[", "]", "'", '"', "1e5", "١", "_", ";", "lambda", "**", "^", "0x1f", "\\", "::"]


def grammar(names: list[str], functions: list[str], leaves: int):
    """Formula strings of the grammar over ``names`` and ``functions``."""
    atoms = st.one_of(
        st.integers(0, 1000).map(str),
        st.sampled_from(["0.5", "1.25", "10**10**10", "2**1024", "9" * 120]),
        st.sampled_from(names),
    )

    def combine(inner):
        operators = st.sampled_from(["+", "-", "*", "/", "**", "^", "−", "×", "÷"])
        binary = st.tuples(inner, operators, inner)
        calls = st.tuples(st.sampled_from(functions), st.lists(inner, min_size=1, max_size=3))
        return st.one_of(
            binary.map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
            inner.map(lambda s: f"({s})"),
            inner.map(lambda s: f"-{s}"),
            calls.map(lambda t: f"{t[0]}({', '.join(t[1])})"),
        )

    return st.recursive(atoms, combine, max_leaves=leaves)


good_formulas = grammar(GOOD_NAMES, ["sqrt", "log", "ceiling", "floor", "Max", "Min"], 10)
formulas = st.one_of(
    good_formulas,
    good_formulas,
    grammar(NAMES, ["sqrt", "log", "ceiling", "Max", "Min", "eval", "open", "exp"], 10),
    st.tuples(good_formulas, st.sampled_from(JUNK), st.integers(0, 40)).map(
        lambda t: t[0][: t[2]] + t[1] + t[0][t[2] :]
    ),
    st.text(max_size=30),
)
scalars = st.one_of(
    st.integers(-5, 50),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["vys", "verified", "refuted", "random_points", "quick", "labels", "peel"]),
    formulas,
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)
    ),
    max_leaves=6,
)


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string (or invalid TOML: an error to report)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


TOP = ["paper", "statement", "construction", "expect", "refuted_by", "options", "colour"]
INSTANCE_KEYS = ["generator", "tier", "N", "d", "C", "seed", "options", "n", "family"]


@st.composite
def claim_texts(draw) -> str:
    """A valid small claim, then random keys replaced or added, random formulas, and now and
    then a byte of junk anywhere."""
    top = {"paper": "p", "statement": "s", "construction": "vys", "expect": "verified"}
    for key in draw(st.lists(st.sampled_from(TOP), max_size=2)) if draw(st.booleans()) else ():
        top[key] = draw(values)
    instance = {"generator": "random_points", "N": 6, "d": 2, "C": 2, "seed": 1}
    mutated = draw(st.lists(st.sampled_from(INSTANCE_KEYS), max_size=2))
    for key in mutated if draw(st.booleans()) else ():
        instance[key] = draw(values)
    lines = [f"{k} = {toml_value(v)}" for k, v in top.items()]
    defines = draw(
        st.dictionaries(st.sampled_from(["K", "L", "N", "sqrt", "x"]), formulas, max_size=2)
    )
    if defines:
        lines.append("[define]")
        lines += [f"{k} = {toml_value(v)}" for k, v in defines.items()]
    bounds = draw(
        st.dictionaries(st.sampled_from(["width", "depth", "speed"]), formulas, max_size=2)
    )
    if bounds:
        lines.append("[bounds]")
        lines += [f"{k} = {toml_value(v)}" for k, v in bounds.items()]
    lines.append("[[instance]]")
    lines += [f"{k} = {toml_value(v)}" for k, v in instance.items()]
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(JUNK + ["\n", "=", "[[", "\x00"])) + text[at:]
    return text


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=claim_texts())
def test_fuzz_claims_load_or_raise_input_error(tmp_path, text):
    path = tmp_path / "fuzz.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        claim = load_claim(path)
    except InputError as exc:
        assert str(exc).startswith(f"claim file {path}")
    else:
        assert isinstance(claim, Claim)
    assert not Path("pwned").exists() and not (tmp_path / "pwned").exists()


@settings(max_examples=300, deadline=None)
@given(text=formulas)
def test_fuzz_formulas_parse_and_decide_or_raise_input_error(text):
    import sympy

    from exactmem.core.bounds import decide_le
    from exactmem.core.formula import parse_formula

    names = {
        "N": sympy.Integer(6),
        "d": sympy.Integer(2),
        "C": sympy.Integer(2),
        "r": sympy.sqrt(sympy.Rational(5, 2)),
        "delta": sympy.sqrt(sympy.Rational(1, 3)),
        "n": sympy.Integer(3),
        "K": sympy.Integer(4),
    }
    try:
        expr = parse_formula(text, names, "fuzz: bounds.depth")
    except InputError as exc:
        assert str(exc).startswith("fuzz: bounds.depth")
        return
    result = decide_le(7, expr)
    assert result.holds in (True, False, None)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=claim_texts())
def test_fuzz_check_exits_2_or_runs(tmp_path_factory, text):
    folder = tmp_path_factory.mktemp("claims")
    (folder / "fuzz.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
    code = main(["check", "--proofs", str(folder), "--quiet", "--evaluator", "reference"])
    assert code in (0, 1, 2, 4)

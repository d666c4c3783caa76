"""``exactmem verify``: evaluate a model exactly on a dataset and certify it against the
criteria the user gives (docs/trust.md); :func:`print_certificate` is the verdict table that
``show`` prints too."""

from __future__ import annotations

import argparse
import json
import sys

from exactmem.commands import emit_json
from exactmem.commands.suggest import wrong_task
from exactmem.core.errors import (
    EXIT_INCONCLUSIVE,
    EXIT_REFUTED,
    EXIT_USAGE,
    EXIT_VERIFIED,
    InputError,
)
from exactmem.core.wording import plural
from exactmem.runtime.progress import Progress

EXIT_CODES = {"verified": EXIT_VERIFIED, "refuted": EXIT_REFUTED, "inconclusive": EXIT_INCONCLUSIVE}
"""The exit code of each verdict: 0, 1, 4."""


def status(check: dict) -> str:
    """``ok``, ``FAIL`` or ``undecided`` (the tri-state of
    :class:`exactmem.checks.certificate.Check`)."""
    if check.get("passed"):
        return "ok"
    return "undecided" if check.get("undecided") else "FAIL"


def print_certificate(cert: dict) -> None:
    """The verdict table of a certificate's content
    (:func:`exactmem.checks.certify.certificate_json`,
    the ``certificate`` field of a certificate file)."""
    res, data, subject = cert["resources"], cert["data"], cert["subject"]
    print(f"verdict: {cert['verdict'].upper()}")
    if "tokens" in data:
        aware = ", position-aware" if data.get("position_aware") else ""
        what = (
            f"{plural(data['N'], 'sequence')} of n = {data.get('n')} tokens in Q^{data['d']} "
            f"({data['tokens']} distinct tokens, {data.get('distinct_multisets')} distinct "
            f"multisets{aware})"
        )
    else:
        what = f"{plural(data['N'], 'point')} in Q^{data['d']}"
    print(f"dataset: {what}, C = {data['C']}, r² = {data.get('r2')}, δ² = {data.get('delta2')}")
    said = subject.get("model_says", {})
    named = said.get("construction") if isinstance(said, dict) else None
    says = (
        f"its file says construction {_printable(named)}"
        if named is not None
        else "its file names no construction"
    )
    print(
        f"model: sha256 {subject['model_sha256'][:16]}… ({says}; a label only, never a criterion)"
    )
    crit = subject["criteria"]
    print(f"criteria: {crit['checklist']}")
    tol = crit["tolerance"]
    print(
        f"  readout {crit['readout']}"
        + (f", within --tolerance {tol}" if tol is not None else ", exact")
        + f"; inputs: {crit['inputs']}"
    )
    unjudged = crit.get("options_not_judged")
    if unjudged:  # (a file's: printed as it says, whatever it names)
        options = crit.get("options") if isinstance(crit.get("options"), dict) else {}
        stated = ", ".join(f"{k}={options.get(k, '?')}" for k in unjudged)
        print(f"  stated, not judged: {stated} (no check or bound of this checklist reads them)")
    print(
        f"resources: width {res['width']}, depth {res['depth']}, {res['dense_parameters']} "
        f"dense / {res['nonzero_parameters']} non-zero parameters, max {res['max_bits']} bits "
        f"per parameter, {res['total_bits']} bits in all"
    )
    # the status column is as wide as its widest entry: "undecided" does not push its row's
    # name and detail out of line with the rest
    wide = max([4, *(len(status(c)) for c in cert["checks"])])
    for c in cert["checks"]:
        name, detail = _printable(c["name"]), _printable(c["detail"])  # labels come from the file
        print(f"  {status(c):<{wide}} {name:<28} {detail}")
        _print_margins(c)
    act = cert["activation"]
    print(
        f"activation: {plural(act['relu_layers'], 'ReLU layer')}, smallest non-zero "
        f"|pre-activation| "
        f"{act['min_nonzero_preactivation']}, {act['zero_preactivations']} of "
        f"{act['preactivations']} pre-activations exactly 0"
    )


def run(args: argparse.Namespace) -> int:
    from exactmem.checks.certify import certificate_json, certify
    from exactmem.core.outputs import OutputError, check_output
    from exactmem.files.dataset_files import load_dataset
    from exactmem.files.model_files import load_model, save_certificate

    tolerance = None  # the criteria are checked before any work, like the output path
    if args.tolerance is not None:
        from exactmem.core.exact import parse_rational

        tolerance = parse_rational(args.tolerance, "--tolerance")
        if tolerance < 0:
            raise InputError(f"--tolerance {args.tolerance}: must be ≥ 0")
    reference_tolerance = None
    if args.reference_tolerance is not None:
        from exactmem.core.exact import parse_rational

        reference_tolerance = parse_rational(args.reference_tolerance, "--reference-tolerance")
        if reference_tolerance <= 0 or args.reference_logits is None:
            raise InputError(
                f"--reference-tolerance {args.reference_tolerance}: must be > 0, with "
                "--reference-logits"
            )
    if args.construction is not None:
        from exactmem.checks.certify import checklist_of
        from exactmem.commands.build import require_construction

        require_construction(args.construction)
        checklist_of(args.construction)  # one that registers no checklist: exit 2 now
    options = {}
    if args.set:  # the user's statement of the build options: criteria, checked before any work
        if args.construction is None:
            raise InputError(
                "--set states the options a construction was built with; give --construction"
            )
        from exactmem.checks.build_options import parse_options

        options = parse_options(args.construction, args.set)
    if args.certificate:
        check_output(args.certificate, "--certificate", [args.model, args.data])
    _cluster(args, start=False)  # usage errors and a missing extra before any work
    progress = Progress(not args.quiet)
    with progress.phase(f"reading {args.model} and {args.data}"):
        model, _ = load_model(args.model)
        dataset = load_dataset(args.data, allow_floats=args.allow_floats)
        reference = None
        if args.reference_logits is not None:
            from exactmem.checks.certify import output_width
            from exactmem.checks.reference_logits import read_reference_logits

            reference = read_reference_logits(args.reference_logits, dataset, output_width(model))
    if options:  # what the build would refuse on this dataset cannot have been built
        from exactmem.checks.build_options import check_option_limits

        check_option_limits(options, dataset)
    if args.construction is not None:  # the checklist's tasks, with those that fit the data
        mismatch = wrong_task(args.construction, dataset.task, "certifies")
        if mismatch is not None:
            raise InputError(mismatch)
    # printed once the work reports: the checks certify opens with come first
    inputs = plural(dataset.size, "input")
    progress.later(f"verifying on {inputs} with the {args.evaluator} evaluator")
    cluster = _cluster(args)
    try:
        with progress.phase(f"verifying {dataset.size} inputs", outer=True):
            cert = certify(
                model,
                dataset,
                construction=args.construction,
                tolerance=tolerance,
                progress=progress,
                jobs=1 if cluster is not None else args.jobs,
                evaluator=args.evaluator,
                max_precision=args.max_precision,
                cluster=cluster,
                reference=reference,
                reference_tolerance=reference_tolerance,
                options=options,
            )
        progress.flush()  # a run that reported nothing on the way still says what it did
    finally:
        progress.close()
        if cluster is not None:
            cluster.close()
    content = certificate_json(cert)
    unwritten = None
    if args.certificate:  # before stdout, which may be a pipe closed early
        try:
            save_certificate(content, args.certificate)
            progress(f"certificate written to {args.certificate}", force=True)
        except OutputError as exc:  # the verdict is still printed: the work is not lost
            unwritten = exc
    args.pending_exit = EXIT_CODES[cert.verdict]
    if unwritten is not None:
        args.pending_exit = EXIT_USAGE
    if args.json:
        emit_json(content)
    else:
        print_certificate(content)
    if unwritten is not None:
        sys.stdout.flush()
        print(f"error: {unwritten} (the verdict above was not saved)", file=sys.stderr)
    return args.pending_exit


def _cluster(args: argparse.Namespace, start: bool = True):
    """The Dask cluster ``--processes`` or ``--scheduler`` asks for, else None (``start``
    False: only the checks)."""
    processes, scheduler = getattr(args, "processes", False), getattr(args, "scheduler", None)
    if not processes and scheduler is None:
        return None
    if args.evaluator != "fast":
        raise InputError(
            "--processes and --scheduler shard the fast evaluator; the reference evaluator "
            "runs its token-wise sub-layers in --jobs processes of its own"
        )
    from exactmem.checks.distributed import Cluster, require_dask

    require_dask()
    if not start:
        return None
    return Cluster.start(workers=args.jobs if processes else None, scheduler=scheduler)


def _print_margins(check: dict) -> None:
    """Per-example margins and the float evaluation beside them (exactmem.checks.margins)."""
    margins, floats = check.get("margins"), check.get("float")
    if isinstance(margins, dict) and margins.get("smallest") is not None:
        spread = ", ".join(f"{k} {_printable(v)}" for k, v in margins.items() if k.startswith("q"))
        print(
            f"       margins (certified lower bounds): smallest {_printable(margins['smallest'])}"
            f" at {_printable(margins.get('smallest_at'))}; quantiles {spread}"
            + (f"; {_printable(margins['tight'])}" if margins.get("tight") else "")
        )
    if isinstance(floats, dict):
        print(
            f"       float64 (not a verdict): {_printable(floats.get('accuracy'))} correct, "
            f"smallest float margin {_printable(floats.get('smallest_margin'))}, "
            f"{_printable(floats.get('disagreements'))} disagreement(s) with the certified labels"
        )
        listed = floats.get("disagreements_listed") or []
        for line in listed[:20]:
            print(f"         {_printable(line)}")
        if len(listed) > 20:
            print(f"         … and {len(listed) - 20} more (every one is in the certificate)")


def _printable(value: object) -> str:
    """The file's own text as printable text: control characters escaped (a model's meta must
    not move the terminal's cursor over the verdict line)."""
    text = str(value)
    return text if text.isprintable() else json.dumps(text)

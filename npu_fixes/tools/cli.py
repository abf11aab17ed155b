"""The ``npu-fixes`` command: ``list``, ``status``, ``audit``, ``autoload``, ``accuracy`` and ``sweep``."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from ..shim import autoload as _autoload
from ..shim import versions
from . import prerequisites

EXIT_OK, EXIT_BROKEN, EXIT_USAGE, EXIT_UPGRADE = 0, 1, 2, 3


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None) -> str:
    """Aligned columns; with ``width``, each line's last column is cut to fit (ending in "…")."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]
    out = []
    for line in (headers, *rows):
        text = "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        out.append(text if width is None or len(text) <= width else text[: width - 1] + "…")
    return "\n".join(out)


def _import_stack(modules: Sequence[str]) -> tuple[list[str], list[str]]:
    """Import torch, torch_npu and the fixes' target ``modules`` so that the hooks fire.

    Returns one line per import that failed (a broken torch_npu is reported, never
    raised) and the names of the modules that could not be imported.
    """
    problems: list[str] = []
    missing: list[str] = []
    for name in dict.fromkeys(["torch", "torch_npu", *modules]):
        parent = "torch_npu" if name.startswith("torch_npu.") else "torch"
        if name != "torch" and parent in missing:  # cannot import below a missing parent
            missing.append(name)
            continue
        try:
            importlib.import_module(name)
            continue
        except ModuleNotFoundError as exc:
            absent = bool(exc.name) and (name == exc.name or name.startswith(f"{exc.name}."))
            reason = "not installed" if absent else f"import failed: {exc}"
        except Exception as exc:  # noqa: BLE001 - report, never a traceback
            reason = f"import failed: {type(exc).__name__}: {exc}"
        problems.append(f"{name}: {reason}")
        missing.append(name)
    return problems, missing


def cmd_list(args: argparse.Namespace) -> int:
    from . import catalogue

    if args.json:
        print(json.dumps(catalogue.entries(), indent=2))
    elif args.markdown:
        print(catalogue.summary_table(), end="")
    else:
        width = shutil.get_terminal_size((120, 24)).columns
        rows = [(e["name"], e["kind"], e["fixed_in"], e["symptom"]) for e in catalogue.entries()]
        print(_table(("fix", "kind", "fixed upstream in", "what users see"), rows, width))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    import npu_fixes

    registry = npu_fixes.registry()
    problems, missing = _import_stack([fix.module for fix in registry.fixes.values()])
    for name in missing:
        registry.mark_absent(name, f"module {name} cannot be imported here")
    records = npu_fixes.status()
    seen = versions.seen()
    notes = versions.notes(seen["torch"], seen["torch-npu"],
                           versions.declared_torch(versions.installed_torch_npu_requirements()))
    if args.json:
        print(json.dumps({"versions": seen, "notes": notes, "imports": problems,
                          "fixes": [r.as_dict() for r in records]}, indent=2))
        return EXIT_OK
    print(_versions_line(seen))
    for line in (*problems, *notes):
        print(f"note: {line}")
    rows = [(r.name, r.state.value, r.target, r.detail) for r in records]
    print(_table(("fix", "state", "target", "detail"), rows))
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from . import host
    from .audit import audit

    try:
        report = audit(args.torch_npu)
    except (host.NotTorchNpu, host.RealTorchNpuLoaded) as exc:
        print(f"npu-fixes audit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(f"torch_npu {report.version or 'unknown version'} at {report.path}")
        print(_versions_line(report.versions))
        for line in report.notes:
            print(f"note: {line}")
        for line in report.errors:
            print(f"error: {line}")
        width = shutil.get_terminal_size((120, 24)).columns
        rows = [(f.name, f.before, f.after, f.detail) for f in report.fixes]
        print(_table(("fix", "before", "after", "detail"), rows, width))
        print(f"summary: {report.summary()}")
    if not report.ok:
        return EXIT_BROKEN
    return EXIT_UPGRADE if report.upgrade_needed else EXIT_OK


def _versions_line(seen: dict[str, str | None]) -> str:
    return "versions: " + ", ".join(f"{name} {version or 'not installed'}" for name, version in seen.items())


def _not_site_dir(directory: str) -> str:
    dirs = ", ".join(map(str, _autoload.site_dirs()))
    return (f"{directory} is not a site directory of this interpreter ({sys.executable}), "
            f"which reads .pth files only from: {dirs}")


def cmd_autoload(args: argparse.Namespace) -> int:
    path = _autoload.pth_path(args.site_dir)
    read_here, removed = _autoload.is_site_dir(path.parent), False
    try:
        if args.action == "enable":
            _autoload.enable(args.site_dir)
        elif args.action == "disable":
            removed = _autoload.disable(args.site_dir)
    except OSError as exc:
        where = "" if exc.filename is None or str(exc.filename) == str(path) else f"{exc.filename}: "
        verb = "write" if args.action == "enable" else "remove"
        print(f"npu-fixes autoload: cannot {verb} {path}: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "enable":
        if read_here:
            print(f"autoload enabled: {path}")
        else:
            print(f"autoload NOT enabled for this interpreter: wrote {path}")
            print(f"npu-fixes autoload: warning: {_not_site_dir(str(path.parent))}", file=sys.stderr)
    elif args.action == "disable":
        print(f"autoload disabled: {'removed ' if removed else 'there was no '}{path}")
    elif not _autoload.is_enabled(args.site_dir):
        if path.exists():
            print(f"autoload NOT enabled: {path} does not hold this npu-fixes' autoload line "
                  "(`npu-fixes autoload enable` rewrites it, `disable` removes it)")
        else:
            print(f"autoload disabled: {path}")
    elif read_here:
        print(f"autoload enabled: {path}")
    else:
        print(f"autoload inactive: {path} exists, but {_not_site_dir(str(path.parent))}")
    return EXIT_OK


def cmd_accuracy(args: argparse.Namespace) -> int:
    from . import accuracy
    from .accuracy_models import MODELS

    names = list(MODELS) if args.models == "all" else [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown or not names:
        print(f"npu-fixes accuracy: unknown model(s) {', '.join(unknown) or '(none given)'}; "
              f"choose from {', '.join(MODELS)}", file=sys.stderr)
        return EXIT_USAGE
    if args.iterations < 1:
        print("npu-fixes accuracy: --iterations must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    conflict = _interpret_conflict(args)
    if conflict:
        print(f"npu-fixes accuracy: {conflict}", file=sys.stderr)
        return EXIT_USAGE
    mode = None if args.mode == "default" else args.mode
    fixes = None
    try:
        if args.interpret:
            location = args.torch_npu or _installed_torch_npu("--interpret: ")
            results, fixes = accuracy.run_interpreted(names, location, args.iterations, args.seed,
                                                      not args.without_fixes, args.shuffle)
        else:
            results = accuracy.run(names, args.device, args.iterations, args.seed, args.backend, mode,
                                   args.npu_backend)
    except accuracy.SetupError as exc:  # not an accuracy result: bad input for this machine
        print(f"npu-fixes accuracy: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        records = [accuracy.result_dict(r) for r in results]
        run = {"device": args.device, "backend": args.backend, "mode": args.mode,
               "iterations": args.iterations, "tolerance": accuracy.TOLERANCE}
        if args.interpret:
            run |= {"torch_npu": str(location), "interpret": True, "with_fixes": not args.without_fixes,
                    "shuffle": args.shuffle}
            for record in records:
                record["fixes"] = fixes
        print(json.dumps(run | {"models": records}, indent=2, allow_nan=False))
    else:
        on_npu = args.interpret or args.device.startswith("npu")
        for r in results:
            capture = accuracy.capture_text(r) if on_npu else ""
            print(f"{r.name}: {r.status}{accuracy.failure_text(r)}{capture}")
        print()
        rows = [(r.name, r.status, str(r.iterations), f"{r.max_error:.3g}", f"{r.seconds:.1f}")
                for r in results]
        print(_table(("model", "result", "iterations", "max abs error", "seconds"), rows))
    return EXIT_OK if all(r.passed for r in results) else EXIT_BROKEN


def cmd_sweep(args: argparse.Namespace) -> int:
    from . import accuracy, corpus, host, sweep

    if args.show:
        try:
            location = args.torch_npu or _installed_torch_npu()
            host.locate(location)  # a torch_npu there, or a clear error now
            program = sweep.show(str(Path(location).resolve()), args.show)
        except (accuracy.SetupError, ValueError, host.NotTorchNpu) as exc:
            print(f"npu-fixes sweep: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(program, end="")
        return EXIT_OK
    problems = [f"{flag} must be at least {low}" for flag, value, low in
                (("--jobs", args.jobs, 1), ("--timeout", args.timeout, 1), ("--per-op", args.per_op, 0),
                 ("--programs", args.programs, 0)) if value is not None and value < low]
    if problems:
        print(f"npu-fixes sweep: {'; '.join(problems)}", file=sys.stderr)
        return EXIT_USAGE
    base = corpus.CI if args.corpus == "ci" else corpus.FULL
    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip()) if args.dtypes else base.dtypes
    unknown = [d for d in dtypes if d not in corpus.DTYPES]
    if unknown or not dtypes:
        print(f"npu-fixes sweep: --dtypes {args.dtypes}: choose from {', '.join(corpus.DTYPES)}",
              file=sys.stderr)
        return EXIT_USAGE
    selection = dataclasses.replace(
        base, **{k: v for k, v in (("per_op", args.per_op), ("programs", args.programs)) if v is not None},
        ops=tuple(o.strip() for o in args.ops.split(",") if o.strip()) if args.ops else base.ops,
        dtypes=dtypes, backward=base.backward and not args.forward_only,
        dynamic=base.dynamic and not args.static_only)
    try:
        location = args.torch_npu or _installed_torch_npu()
        if args.samples:
            ids = list(dict.fromkeys(i.strip() for i in args.samples.split(",") if i.strip()))
            for sample_id in ids:
                corpus.sample(sample_id)
        else:
            unknown_ops = sorted(set(selection.ops) - corpus.op_names())
            if unknown_ops:
                raise ValueError(f"--ops: no OpInfo op named {', '.join(unknown_ops)}")
            ids = corpus.ids(selection)
        if not ids:
            raise ValueError("the selection holds no sample")
        root = host.locate(location)  # a wheel is extracted once, here, not in every worker
        if not host.backend_dir(root).is_dir():
            raise ValueError(f"{Path(location).resolve()}: this torch_npu has no triton_experimental "
                             "backend, nothing to sweep")
        journal = sweep.Journal(args.journal, sweep.fingerprint(str(root))) if args.journal else None
    except (accuracy.SetupError, ValueError, host.NotTorchNpu, OSError) as exc:
        print(f"npu-fixes sweep: {exc}", file=sys.stderr)
        return EXIT_USAGE
    bar = accuracy.Progress(len(ids) * len(sweep.CONFIGS))
    bar.label = f"{len(ids)} samples x as built, with npu_fixes"

    def progress(done: int, total: int) -> None:
        bar.done = done
        bar.draw()

    label = f"the samples given ({len(ids)})" if args.samples else selection.label()
    try:
        report = sweep.sweep(str(location), ids, label, args.jobs or os.cpu_count() or 1, args.timeout,
                             root=str(root), progress=progress, journal=journal)
    except (sweep.WorkerFailed, sweep.JournalError) as exc:  # the journal is read before any sample runs
        bar.close()
        print(f"npu-fixes sweep: {exc}", file=sys.stderr)
        return EXIT_USAGE
    bar.close()
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(sweep.summary(report))
    return EXIT_BROKEN if report.silent() or report.regressions() else EXIT_OK


def _interpret_conflict(args: argparse.Namespace) -> str | None:
    """Why the accuracy arguments do not go together, or None."""
    if not args.interpret:
        given = [flag for flag, value in (("--torch-npu", args.torch_npu),
                                          ("--without-fixes", args.without_fixes),
                                          ("--shuffle", args.shuffle is not None)) if value]
        return f"{' and '.join(given)} {'need' if len(given) > 1 else 'needs'} --interpret" if given else None
    clashes = [flag for flag, value in (("--device", args.device != "cpu"),
                                        ("--backend", args.backend != "inductor"),
                                        ("--mode", args.mode != "default"),
                                        ("--npu-backend", args.npu_backend)) if value]
    if clashes:
        return f"--interpret runs on CPU through the given backend: drop {', '.join(clashes)}"
    return None


def _installed_torch_npu(flag: str = "") -> str:
    """The installed torch_npu's directory; :class:`~.accuracy.SetupError` where there is none
    (``flag``: the option of the command that needs it, named in the message)."""
    from . import accuracy, host

    found = host.installed_location()
    if found is None:
        raise accuracy.SetupError(f"{flag}no torch_npu is installed here; pass --torch-npu PATH")
    return str(found)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="npu-fixes", description="Run-time repairs for torch_npu's triton_experimental backend."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="the catalogue of fixes: symptom, states, upstream fix, workaround")
    form = listing.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print JSON: every field of every fix")
    form.add_argument("--markdown", action="store_true", help="print the summary table in Markdown")
    listing.set_defaults(func=cmd_list)
    status = sub.add_parser("status", help="what npu_fixes did in this interpreter")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=cmd_status)
    audit = sub.add_parser("audit", help="which known defects a torch_npu install, tree or wheel has")
    audit.add_argument("--torch-npu", metavar="PATH", help="install dir, source tree or .whl "
                       "(default: the installed torch_npu)")
    audit.add_argument("--json", action="store_true", help="print JSON")
    audit.set_defaults(func=cmd_audit)
    autoload = sub.add_parser("autoload", help="load npu_fixes at every interpreter start (.pth)")
    autoload.add_argument("action", choices=("enable", "disable", "status"))
    autoload.add_argument("--site-dir", metavar="DIR",
                          help="site-packages to use (default: this environment's)")
    autoload.set_defaults(func=cmd_autoload)
    acc = sub.add_parser("accuracy", help="compiled vs eager training accuracy of small BERT-class models")
    acc.add_argument("--models", default="all", help="comma-separated model names, or 'all'")
    acc.add_argument("--iterations", type=int, default=5)
    acc.add_argument("--device", choices=("cpu", "cuda", "npu"), default="cpu")
    acc.add_argument("--backend", default="inductor", help="torch.compile backend")
    acc.add_argument("--npu-backend", help="sets TORCHINDUCTOR_NPU_BACKEND (e.g. triton_experimental)")
    acc.add_argument("--mode", choices=("default", "reduce-overhead"), default="default")
    acc.add_argument("--seed", type=int, default=0)
    acc.add_argument("--json", action="store_true", help="print JSON")
    acc.add_argument("--interpret", action="store_true",
                     help="run on CPU through the backend of --torch-npu, kernels in Triton's interpreter")
    acc.add_argument("--torch-npu", metavar="PATH", help="with --interpret: install dir, source tree or .whl "
                     "(default: the installed torch_npu)")
    acc.add_argument("--without-fixes", action="store_true", help="with --interpret: npu_fixes off")
    acc.add_argument("--shuffle", type=int, metavar="SEED",
                     help="with --interpret: run each launch's programs in an order drawn from SEED")
    acc.set_defaults(func=cmd_accuracy)
    swp = sub.add_parser("sweep", help="compile a corpus of ops and programs through a torch_npu's backend "
                         "on CPU and compare with eager, as built and with npu_fixes")
    swp.add_argument("--torch-npu", metavar="PATH", help="install dir, source tree or .whl "
                     "(default: the installed torch_npu)")
    swp.add_argument("--corpus", choices=("full", "ci"), default="full",
                     help="the whole corpus, or the part CI runs (default: full)")
    swp.add_argument("--per-op", type=int, metavar="N", help="OpInfo samples per op and dtype")
    swp.add_argument("--programs", type=int, metavar="N", help="how many generated programs")
    swp.add_argument("--ops", metavar="NAMES", help="only these OpInfo ops (comma-separated)")
    swp.add_argument("--dtypes", metavar="NAMES", help="only these OpInfo dtypes (comma-separated; "
                     "default: float32, bfloat16, int64, bool)")
    swp.add_argument("--forward-only", action="store_true", help="no backward OpInfo samples")
    swp.add_argument("--static-only", action="store_true", help="no dynamic-shape OpInfo samples")
    swp.add_argument("--samples", metavar="IDS", help="only these sample ids (comma-separated; "
                     "the options that choose a part of the corpus are then not used)")
    swp.add_argument("--show", metavar="ID",
                     help="print sample ID as a program that compares compiled and eager")
    swp.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: one per core)")
    swp.add_argument("--timeout", type=float, default=300.0, metavar="S",
                     help="seconds a worker may go without a result, its start included (default 300)")
    swp.add_argument("--json", action="store_true", help="print JSON: counts and every sample's record")
    swp.add_argument("--journal", metavar="FILE", help="add each finished sample to FILE (JSON lines) and "
                     "take the samples it holds from it: a sweep stopped part way goes on where it stopped "
                     "(FILE must come from the same torch_npu, npu_fixes, torch and Triton)")
    swp.set_defaults(func=cmd_sweep)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    needs = f"{args.command} --interpret" if getattr(args, "interpret", False) else args.command
    why = prerequisites.missing(needs) if needs in prerequisites.NEEDS else None
    if why:
        print(f"npu-fixes {args.command}: {why}", file=sys.stderr)
        return EXIT_USAGE
    # host-loaded, never imported for real
    if args.command in ("audit", "sweep") or getattr(args, "interpret", False):
        os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())

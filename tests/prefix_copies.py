#!/usr/bin/env python3
"""Build a "pre-fix" copy of a torch_npu install, for testing npu_fixes (a test helper).

The published torch-npu 2.13.0 and 2.14.0 wheels already carry upstream's fixes
for the five ``triton_experimental`` defects that npu_fixes repairs (see the
fixes table in README.md).  To prove that a probe detects a defect, and that the patched
target then behaves like upstream's fix, tests need the broken code too.  This
script rebuilds it: it copies the Python files of a torch_npu install and
re-introduces each defect with one small, documented textual edit.

Every edit is anchored on exact text of the published 2.13.0/2.14.0 wheels.  An
anchor that is missing, or present more than once, raises ``PrefixEditError``
naming the defect and the file, so the script can never silently hand back an
unmodified copy.  Every changed region carries a ``npu_fixes pre-fix (<name>)``
comment, so a diff (``--diff``) shows at a glance what was done.

Usage::

    python -m tests.prefix_copies SOURCE OUTDIR [--defect NAME ...]

SOURCE is a ``.whl``, an installed ``torch_npu`` package directory, or a
directory containing ``torch_npu/`` (a source tree, or site-packages).  OUTDIR
receives ``OUTDIR/torch_npu/...``: ``__init__.py``, ``version.py`` and every
``.py`` file under ``_inductor/``, plus ``OUTDIR/npu_fixes_prefix.json``
recording the source and the defects introduced.  Without ``--defect`` all five
defects are introduced.

Only the standard library is used; nothing is imported from torch or torch_npu.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shutil
import sys
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = [
    "DEFECTS",
    "Defect",
    "PrefixEditError",
    "apply_defect",
    "build_prefix_copy",
    "locate_package",
]

# Paths are relative to the torch_npu package root.
_TE = "_inductor/triton_experimental"
_TRITON_PY = f"{_TE}/codegen/triton.py"
_HEURISTICS_PY = f"{_TE}/npu_triton_heuristics.py"
_LOWERING_PY = f"{_TE}/lowering.py"

_MARK = "npu_fixes pre-fix"


class PrefixEditError(RuntimeError):
    """An edit could not be applied exactly as written (anchor missing or ambiguous)."""


# --------------------------------------------------------------------------- edits


@dataclass(frozen=True)
class _Replace:
    """Replace one exact snippet.  ``variants`` holds (old, new) pairs, one per known
    spelling of the target across torch_npu versions; across all variants the old
    text must occur exactly once in the file."""

    what: str
    variants: tuple[tuple[str, str], ...]

    def apply(self, text: str, defect: str, relpath: str) -> str:
        hits = [(old, new) for old, new in self.variants if old in text]
        counts = {old: text.count(old) for old, _ in hits}
        total = sum(counts.values())
        if total != 1:
            raise PrefixEditError(
                f"[{defect}] {relpath}: anchor for {self.what} found {total} times "
                f"(expected exactly once); this torch_npu is not a layout this script knows"
            )
        old, new = hits[0]
        return text.replace(old, new, 1)


@dataclass(frozen=True)
class _DeleteSpan:
    """Replace the text from ``start`` (inclusive) up to ``end`` with ``replacement``.
    ``end`` is included when ``include_end`` is true, otherwise kept.  Both anchors
    must occur exactly once, ``end`` after ``start``."""

    what: str
    start: str
    end: str
    replacement: str
    include_end: bool

    def apply(self, text: str, defect: str, relpath: str) -> str:
        for label, anchor in (("start", self.start), ("end", self.end)):
            n = text.count(anchor)
            if n != 1:
                raise PrefixEditError(
                    f"[{defect}] {relpath}: {label} anchor for {self.what} found {n} times "
                    f"(expected exactly once): {anchor.strip()[:60]!r}"
                )
        i = text.index(self.start)
        j = text.index(self.end)
        if j <= i:
            raise PrefixEditError(
                f"[{defect}] {relpath}: anchors for {self.what} are out of order"
            )
        if self.include_end:
            j += len(self.end)
        return text[:i] + self.replacement + text[j:]


_Edit = _Replace | _DeleteSpan


class Defect(str):
    """Name of one defect (compares equal to the plain string), with the file it
    edits (``relpath``, relative to the torch_npu package) and its edits.  The
    docstring of each instance describes the edit."""

    relpath: str
    edits: tuple

    def __new__(cls, name: str, relpath: str, edits: Sequence[_Edit], doc: str) -> Defect:
        self = super().__new__(cls, name)
        self.relpath = relpath
        self.edits = tuple(edits)
        self.__doc__ = doc
        return self

    @property
    def name(self) -> str:
        return str(self)


_RSPLIT_OUTER = Defect(
    "rsplit-outer",
    _TRITON_PY,
    [
        _Replace(
            "the unique-output check in _npu_rsplit_outer_applicable",
            (
                (
                    "    if _npu_rsplit_out_binding(kernel) is None:\n"
                    "        return False\n",
                    f"    # {_MARK} (rsplit-outer): no unique live-output check\n",
                ),
            ),
        ),
    ],
    """rsplit-outer - codegen/triton.py::_npu_rsplit_outer_applicable(kernel).

    Deletes the two lines ``if _npu_rsplit_out_binding(kernel) is None: return
    False``.  That helper returns the single live output binding of the kernel
    (``kernel.args.output_buffers`` plus ``inplace_buffers``, skipping
    ``RemovedArg``/``REMOVED*`` entries) or None when there is not exactly one;
    it is the guard that rejects the hf_Bert kernel (a 2048x768 pointwise store
    next to the 1x768 reduction store).  Without it the predicate is left with
    the reduction kind/type checks, the x-size and the reduction-size tests.

    Note: the code in the 2.13.0/2.14.0 wheels has no reduction-tree-shape test
    inside the predicate (nested-loop codegen is skipped elsewhere, for the INNER
    hint only: an OUTER kernel with nested loops is still split wrongly, the
    defect of rsplit-nested-range), so this is the only line removed.""",
)

_DUALVIEW_FOLD = Defect(
    "dualview-fold",
    _TRITON_PY,
    [
        _Replace(
            "the inner-symbol fallback in NPUTritonKernel._fold_dualview_reduction_index",
            (
                (
                    "            inner_sym = free_by_name.get(inner.name, inner.symbol())\n",
                    "            inner_sym = free_by_name.get(inner.name, sympy.Symbol(inner.name))"
                    f"  # {_MARK} (dualview-fold)\n",
                ),
            ),
        ),
    ],
    """dualview-fold - codegen/triton.py::NPUTritonKernel._fold_dualview_reduction_index.

    When the flat alias symbol is not already in the index, the fixed code falls
    back to ``inner.symbol()`` (the range-tree entry's registered symbol, with its
    integer/nonnegative assumptions).  The edit changes that fallback, on one
    line, to a fresh plain ``sympy.Symbol(inner.name)``: same printed name, but
    not equal to the key registered in ``range_tree_nodes``, which later gives
    ``AssertionError: Unregistered range symbol: r0_1``.""",
)

_LAUNCH_GRID = Defect(
    "launch-grid",
    _HEURISTICS_PY,
    [
        _DeleteSpan(
            "the module helper _can_clamp_1d_grid",
            start="def _can_clamp_1d_grid(inductor_meta, def_args, arg_names):\n",
            end="class NPUTritonCompileResult(TritonCompileResult):\n",
            replacement=f"# {_MARK} (launch-grid): no grid-clamp helper; the rule is inline.\n\n\n",
            include_end=False,
        ),
        _Replace(
            "the is_simple_1d rule in NPUTritonCompileResult.make_launcher",
            (
                (
                    "        is_simple_1d = _can_clamp_1d_grid(\n"
                    "            self.inductor_meta, def_args, fn.arg_names\n"
                    "        )\n",
                    f"        # {_MARK} (launch-grid): clamp only one-free-node kernels\n"
                    "        is_simple_1d = (\n"
                    "            npu_num_x_nodes == 1\n"
                    '            and grid_type == "Grid1D"\n'
                    '            and "xnumel" in def_args\n'
                    '            and "R0_BLOCK" not in set(fn.arg_names)\n'
                    "        )\n",
                ),
            ),
        ),
    ],
    """launch-grid - npu_triton_heuristics.NPUTritonCompileResult.make_launcher.

    Removes the module function ``_can_clamp_1d_grid`` (which accepts
    ``npu_num_x_nodes in (0, 1)``) and writes the rule inline in make_launcher
    as ``npu_num_x_nodes == 1 and grid_type == "Grid1D" and "xnumel" in
    def_args and "R0_BLOCK" not in set(fn.arg_names)``, using the locals
    ``npu_num_x_nodes``/``grid_type`` that make_launcher already computes.  A
    zero-node scalar Grid1D kernel then falls through to the generic branch,
    ``grid_0 = NPU_CU_COUNT`` (every vector core).""",
)

_BOUNDARY_DOWNCAST = Defect(
    "boundary-downcast",
    _HEURISTICS_PY,
    [
        _Replace(
            "the output-temporary cache ahead of _wrap_launcher_with_downcast",
            (
                (
                    "def _wrap_launcher_with_downcast(launcher, downcast_args, mutated_arg_names):\n",
                    f"# {_MARK} (boundary-downcast): output temporaries live in a module cache,\n"
                    "# filled on every call, also while a graph is being captured.\n"
                    "_npu_prefix_downcast_out_cache: dict = {}\n"
                    "\n"
                    "\n"
                    "def _npu_prefix_downcast_out_tmp(name, a, dst_dtype):\n"
                    "    key = (name, tuple(a.shape), tuple(a.stride()), a.device, dst_dtype)\n"
                    "    tmp = _npu_prefix_downcast_out_cache.get(key)\n"
                    "    if tmp is None:\n"
                    "        tmp = torch.empty_like(a, dtype=dst_dtype)\n"
                    "        _npu_prefix_downcast_out_cache[key] = tmp\n"
                    "    return tmp\n"
                    "\n"
                    "\n"
                    "def _wrap_launcher_with_downcast(launcher, downcast_args, mutated_arg_names):\n",
                ),
            ),
        ),
        _Replace(
            "the output temporary in _wrap_launcher_with_downcast",
            (
                (
                    "                tmp = (\n"
                    "                    a.to(dst_dtype)\n"
                    "                    if preserve_input\n"
                    "                    else torch.empty_like(a, dtype=dst_dtype)\n"
                    "                )\n",
                    f"                # {_MARK} (boundary-downcast): uninitialised for every\n"
                    "                # out/in_out/mutated arg; preserve_input is ignored.\n"
                    "                tmp = _npu_prefix_downcast_out_tmp(name, a, dst_dtype)\n",
                ),
            ),
        ),
    ],
    """boundary-downcast - npu_triton_heuristics._wrap_launcher_with_downcast.

    The fixed wrapper gives a pure output (``out_ptr*``) an empty temporary but
    casts in/out and mutated args with ``a.to(dst_dtype)`` so their contents
    survive, and it allocates output temporaries afresh on every call (no cache).
    The edit (a) makes every output-like arg (``out_ptr*``, ``in_out_ptr*``,
    mutated) take an uninitialised ``torch.empty_like(a, dtype=dst_dtype)``, and
    (b) takes it from a new module dict ``_npu_prefix_downcast_out_cache`` keyed by
    (arg name, shape, stride, device, dtype), filled unconditionally - also during
    graph capture.  Write-back to the original buffer after the launch and the
    input-only memo (``_memoized_downcast``) are left as they are.""",
)

_RNG_CAPTURE_GATE = Defect(
    "rng-capture-gate",
    _LOWERING_PY,
    [
        _DeleteSpan(
            "the Bernoulli NPUGraph gate in _register_npu_inductor_fallbacks",
            start="    # Bernoulli's NPU op-api still consumes host-side seed/offset values via\n",
            end="        lowerings[op] = lowering_without_npugraph\n",
            replacement=f"    # {_MARK} (rng-capture-gate): Bernoulli fallbacks are not gated\n",
            include_end=True,
        ),
    ],
    """rng-capture-gate - lowering._register_npu_inductor_fallbacks.

    Deletes the tail of the function that wraps the lowerings of
    ``aten.bernoulli.default/.out/.p`` and ``aten.bernoulli_.Tensor/.float`` so
    that they set ``V.graph.disable_cudagraphs_reason`` (when unset) before
    delegating.  The Bernoulli ops are then left with the plain fallbacks that
    the generic ``make_fallback`` loop above registers, and a graph containing
    them stays eligible for NPUGraph capture.""",
)

#: The five defects, in the order of npu_fixes' catalogue.
DEFECTS: tuple[Defect, ...] = (
    _RSPLIT_OUTER,
    _DUALVIEW_FOLD,
    _LAUNCH_GRID,
    _BOUNDARY_DOWNCAST,
    _RNG_CAPTURE_GATE,
)
_BY_NAME = {d.name: d for d in DEFECTS}


def _resolve(defects: Iterable[str]) -> list[Defect]:
    wanted = []
    for name in defects:
        if name not in _BY_NAME:
            raise ValueError(f"unknown defect {name!r}; known: {', '.join(_BY_NAME)}")
        if _BY_NAME[name] not in wanted:
            wanted.append(_BY_NAME[name])
    # Always apply in catalogue order, whatever order was asked for.
    return [d for d in DEFECTS if d in wanted]


def apply_defect(text: str, defect: str) -> str:
    """Return ``text`` (the content of ``defect.relpath``) with ``defect`` re-introduced.

    Raises PrefixEditError when an anchor is not found exactly once, and also
    when the edit would leave the text unchanged."""
    d = _resolve([defect])[0]
    out = text
    for edit in d.edits:
        out = edit.apply(out, d.name, d.relpath)
    if out == text:  # cannot happen with the edits above; guard anyway
        raise PrefixEditError(f"[{d.name}] {d.relpath}: edit changed nothing")
    return out


# --------------------------------------------------------------------------- copying


def _wanted(rel: PurePosixPath) -> bool:
    """Package-relative paths that the pre-fix copy keeps."""
    if rel.suffix != ".py":
        return False
    if rel.parts in (("__init__.py",), ("version.py",)):
        return True
    return len(rel.parts) > 1 and rel.parts[0] == "_inductor"


def locate_package(source: Path) -> Path:
    """For a directory SOURCE, return the torch_npu package directory it names."""
    source = source.resolve()
    if (source / "torch_npu" / "_inductor").is_dir():
        return source / "torch_npu"
    if (source / "_inductor").is_dir() and (source / "__init__.py").is_file():
        return source
    raise PrefixEditError(
        f"{source}: neither a torch_npu package directory nor a directory containing torch_npu/"
    )


def _copy_from_wheel(wheel: Path, dest_pkg: Path) -> list[str]:
    copied = []
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            p = PurePosixPath(member)
            if len(p.parts) < 2 or p.parts[0] != "torch_npu":
                continue
            rel = PurePosixPath(*p.parts[1:])
            if ".." in rel.parts or not _wanted(rel):
                continue
            target = dest_pkg.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(member))
            copied.append(rel.as_posix())
    return copied


def _copy_from_dir(pkg: Path, dest_pkg: Path) -> list[str]:
    copied = []
    for path in sorted(pkg.rglob("*.py")):
        rel = PurePosixPath(path.relative_to(pkg).as_posix())
        if "__pycache__" in rel.parts or not _wanted(rel):
            continue
        target = dest_pkg.joinpath(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        copied.append(rel.as_posix())
    return copied


def _read_version(dest_pkg: Path) -> str | None:
    vfile = dest_pkg / "version.py"
    if not vfile.is_file():
        return None
    for line in vfile.read_text(encoding="utf-8").splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("'\"")
    return None


def build_prefix_copy(
    source: str | Path,
    outdir: str | Path,
    defects: Iterable[str] = DEFECTS,
    *,
    overwrite: bool = False,
) -> Path:
    """Copy torch_npu's Python files from SOURCE into OUTDIR/torch_npu and re-introduce
    ``defects`` (default: all five).  Returns the new ``OUTDIR/torch_npu`` directory.

    Raises PrefixEditError if SOURCE has no ``_inductor/triton_experimental`` or any
    edit's anchor is not found exactly once; OUTDIR/torch_npu is then removed so no
    half-edited tree is left behind.  An existing OUTDIR/torch_npu is refused unless
    ``overwrite`` is true.
    """
    source = Path(source)
    outdir = Path(outdir)
    chosen = _resolve(defects)
    dest_pkg = outdir / "torch_npu"
    if dest_pkg.exists():
        if not overwrite:
            raise FileExistsError(f"{dest_pkg} already exists (pass overwrite=True / --force)")
        shutil.rmtree(dest_pkg)
    dest_pkg.mkdir(parents=True)
    try:
        if source.is_file() and source.suffix == ".whl":
            copied = _copy_from_wheel(source, dest_pkg)
        elif source.is_dir():
            copied = _copy_from_dir(locate_package(source), dest_pkg)
        else:
            raise PrefixEditError(f"{source}: not a .whl file or a directory")
        if not (dest_pkg / _TE / "__init__.py").is_file():
            raise PrefixEditError(
                f"{source}: has no torch_npu/{_TE}/ (torch_npu < 2.13 has no such backend)"
            )
        for required in ("__init__.py", "version.py"):
            if not (dest_pkg / required).is_file():
                print(f"prefix_copies: warning: {source} has no torch_npu/{required}",
                      file=sys.stderr)

        for d in chosen:
            path = dest_pkg / d.relpath
            if not path.is_file():
                raise PrefixEditError(f"[{d.name}] {d.relpath}: file not found in {source}")
            with open(path, encoding="utf-8", newline="") as fh:
                text = fh.read()
            text = apply_defect(text, d)
            with open(path, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
    except BaseException:
        shutil.rmtree(dest_pkg, ignore_errors=True)
        raise

    record = {
        "source": str(source.resolve()),
        "torch_npu_version": _read_version(dest_pkg),
        "defects": [d.name for d in chosen],
        "files_copied": len(copied),
    }
    (outdir / "npu_fixes_prefix.json").write_text(json.dumps(record, indent=2) + "\n")
    return dest_pkg


# --------------------------------------------------------------------------- CLI


def _original_text(source: Path, relpath: str) -> str:
    if source.is_file():
        with zipfile.ZipFile(source) as zf:
            return zf.read(f"torch_npu/{relpath}").decode("utf-8")
    with open(locate_package(source) / relpath, encoding="utf-8", newline="") as fh:
        return fh.read()


def _print_diffs(source: Path, dest_pkg: Path, chosen: Sequence[Defect]) -> None:
    for relpath in dict.fromkeys(d.relpath for d in chosen):
        before = _original_text(source, relpath).splitlines(keepends=True)
        after = (dest_pkg / relpath).read_text(encoding="utf-8").splitlines(keepends=True)
        sys.stdout.writelines(
            difflib.unified_diff(before, after, f"a/torch_npu/{relpath}", f"b/torch_npu/{relpath}")
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Copy a torch_npu install and re-introduce the pre-fix triton_experimental defects.",
    )
    parser.add_argument("source", nargs="?", type=Path,
                        help=".whl, torch_npu package dir, or dir containing torch_npu/")
    parser.add_argument("outdir", nargs="?", type=Path, help="receives OUTDIR/torch_npu/...")
    parser.add_argument("--defect", action="append", choices=[d.name for d in DEFECTS],
                        help="defect to introduce (repeatable; default: all five)")
    parser.add_argument("--force", action="store_true", help="replace an existing OUTDIR/torch_npu")
    parser.add_argument("--diff", action="store_true", help="print the unified diff of every edited file")
    parser.add_argument("--list", action="store_true", help="describe the defects and exit")
    args = parser.parse_args(argv)

    if args.list:
        for d in DEFECTS:
            print(f"{d.name}  ({d.relpath})\n    {d.__doc__}\n")
        return 0
    if args.source is None or args.outdir is None:
        parser.error("SOURCE and OUTDIR are required")
    chosen = _resolve(args.defect or [d.name for d in DEFECTS])
    try:
        dest_pkg = build_prefix_copy(args.source, args.outdir, chosen, overwrite=args.force)
    except (PrefixEditError, FileExistsError) as exc:
        print(f"prefix_copies: error: {exc}", file=sys.stderr)
        return 2
    if args.diff:
        _print_diffs(args.source, dest_pkg, chosen)
    print(f"prefix_copies: {dest_pkg} ({', '.join(d.name for d in chosen)})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

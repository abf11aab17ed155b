"""Programs of tests/gpu/test_runtime_defects_cpu.py."""

from __future__ import annotations

from tests.programs import main


def scalar_races() -> list[dict]:
    """``scalar_race`` of the QA and sum kernels, each with the old rule's programs and
    the fixed rule's, two launches on CPU."""
    import dataclasses

    from tests.gpu import runtime_defects as rd

    out = []
    for kernel in ("qa", "sum"):
        for programs in (rd.OLD_RULE_PROGRAMS, rd.fixed_rule_programs()):
            out.append(dataclasses.asdict(rd.scalar_race(programs, 2, "cpu", kernel)))
    return out


def downcast_rows() -> dict[str, dict]:
    """Each downcast check's row on CPU, by name."""
    import dataclasses

    from tests.gpu import runtime_defects as rd

    return {c.__name__: dataclasses.asdict(c("cpu")) for c in rd.DOWNCAST_CHECKS}


def capture_run() -> dict:
    """``capture_run`` on CPU, 4 iterations, gate on."""
    import dataclasses

    from tests.gpu import runtime_defects as rd

    return dataclasses.asdict(rd.capture_run("cpu", 4, gate=True))


if __name__ == "__main__":
    main(globals())

"""Same end state whichever comes first: npu_fixes, torch, host-loaded backend, activation,
or the autoload .pth; fixed installs are left identical, pre-fix ones repaired."""

from __future__ import annotations

import pytest

from npu_fixes.shim import autoload as _autoload
from tests import genuine_states
from tests.conftest import (
    FIXED_UPSTREAM,
    STANDALONE_HOST,
    backend_targets_code,
    last_json,
    run_python,
    wheel_path,
)

REPORT = """
import inspect, json, wrapt
import npu_fixes
from npu_fixes.shim.fix import resolve_owner
from npu_fixes.fixes import all_fixes
root = str(loaded.root)
pristine = {}
for fix in (f for f in all_fixes() if f.module.startswith("torch_npu.")):
    obj = inspect.getattr_static(*resolve_owner(sys.modules[fix.module], fix.targets[0]))
    pristine[fix.name] = (not isinstance(obj, wrapt.FunctionWrapper)
                          and obj.__code__.co_filename.startswith(root))
print(json.dumps({"states": {r.name: r.state.value for r in npu_fixes.status() if r.name in pristine},
                  "pristine": pristine, "same_objects": same_objects}))
"""

# ``triton_experimental._activate()`` runs the registration. Here it fills a private copy of
# Inductor's lowering table (stock Inductor on CPU rejects some of the NPU fallbacks next to
# its decompositions), and the module keeps that state: FALLBACK_LIST filled, table in place.
ACTIVATE = """
low = loaded.modules["lowering"]
low.lowerings = dict(low.lowerings)
low.make_fallback = lambda *a, **k: None
low._register_npu_inductor_fallbacks()
assert low.FALLBACK_LIST
"""

SNAPSHOT = backend_targets_code() + """
before = backend_targets()
import npu_fixes
same_objects = {name: obj is before[name] for name, obj in backend_targets().items()}
"""

ORDERS = {
    "npu_fixes-first": "import npu_fixes\n{load}\nsame_objects = None\n",
    "torch-first": "import torch\nimport npu_fixes\n{load}\nsame_objects = None\n",
    "after-load": "{load}\n" + SNAPSHOT,
    "after-activation": "{load}\n" + ACTIVATE + SNAPSHOT,
    "autoload-pth": "import site\nsite.addsitedir({site!r})\nimport torch\n{load}\nsame_objects = None\n",
}


def run_order(order: str, location, tmp_path) -> dict:
    if order == "autoload-pth":
        _autoload.enable(tmp_path)
    load = f"loaded = host.load({str(location)!r})"
    body = ORDERS[order].replace("{load}", load).replace("{site!r}", repr(str(tmp_path)))
    return last_json(run_python("import sys\n" + STANDALONE_HOST + body + REPORT))


@pytest.mark.parametrize("version", FIXED_UPSTREAM)
def test_fixed_upstream_same_state_every_order(version, tmp_path):
    results = {order: run_order(order, wheel_path(version), tmp_path) for order in ORDERS}
    for order, res in results.items():
        assert set(res["states"].values()) == {"not-needed"}, (order, res)
        assert all(res["pristine"].values()), (order, res)
        if res["same_objects"] is not None:
            assert all(res["same_objects"].values()), (order, res)


def test_prefix_copy_same_state_every_order(prefix_copy, tmp_path):
    location, needed = prefix_copy("all"), frozenset(genuine_states.FIVE)
    for order in ORDERS:
        res = run_order(order, location, tmp_path)
        assert res["states"] == {n: genuine_states.expected_state(n, needed) for n in res["states"]}, (order, res)
        assert res["pristine"] == genuine_states.untouched(needed), (order, res)


@pytest.mark.parametrize("state", genuine_states.COMMITS)
def test_genuine_state_same_state_every_order(genuine, state, tmp_path):
    """A self-build of each genuine state: exactly its defects applied, the rest untouched."""
    location, needed = genuine(state), genuine_states.needed_at(state)
    untouched = genuine_states.untouched(needed)
    for order in ORDERS:
        res = run_order(order, location, tmp_path)
        assert res["states"] == {n: genuine_states.expected_state(n, needed) for n in res["states"]}, (order, res)
        assert res["pristine"] == untouched, (order, res)
        if res["same_objects"] is not None:
            assert res["same_objects"] == untouched, (order, res)


def test_backend_reload_gets_the_repairs_again(genuine):
    """``importlib.reload`` of the launcher module of a pre-fix state: the fresh code is
    repaired again at once, and status() says so only because the probes agree."""
    res = last_json(run_python("import sys\n" + STANDALONE_HOST + f"""
import importlib, json
loaded = host.load({str(genuine("8bfbb9ed1"))!r})
import npu_fixes
from npu_fixes.fixes import boundary_downcast, launch_grid
m = loaded.modules["npu_triton_heuristics"]
before = m.NPUTritonCompileResult
fresh = importlib.reload(m)
states = {{r.name: r.state.value for r in npu_fixes.status()}}
print(json.dumps({{"new_class": fresh.NPUTritonCompileResult is not before,
                   "launch-grid": [states["launch-grid"], launch_grid.probe(fresh).defective],
                   "boundary-downcast": [states["boundary-downcast"], boundary_downcast.probe(fresh).defective],
                   "undone": npu_fixes.undo(),
                   "grid_after_undo": launch_grid.probe(fresh).defective}}))
"""))
    assert res["new_class"] is True
    assert res["launch-grid"] == ["applied", False] and res["boundary-downcast"] == ["applied", False]
    assert res["undone"] >= 2 and res["grid_after_undo"] is True  # undo reaches the reloaded code

"""The engine's outputs on fixed cases equal those recorded in tests/golden (CPU, same seed).

The golden files were written before the engine was restructured into named stages, so this
checks that the restructuring changed no weight, delta or trust number. Regenerate them with
``python tests/golden_cases.py`` only when an output is meant to change, and say why.

The cases run in a fresh Python process, as they were recorded: inside the whole suite's process,
an earlier test that ran a model under CPU bf16 autocast with channels_last leaves oneDNN in a
state where the demo model's fp32 outputs differ in the 7th digit, and "identical" would then
measure the test order, not the engine.

Everything but the floating-point numbers must be identical (ids, counts, samples used, model
passes, verdicts, names). The numbers must agree to 1e-6: float32 rounding is not the same on
every CPU (the goldens were recorded on an AMD EPYC; on an Intel Xeon the demo model's outputs
differ by one float32 ulp, up to 3e-7 here), while a change of behaviour moves them by far more.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from golden_cases import CASES, GOLDEN

TESTS = Path(__file__).resolve().parents[1]  # tests/, where golden_cases.py and golden/ are
# A fresh interpreter and every case: about 30 s, so outside the fast inner loop (run this file
# alone when an engine change should leave the numbers as they were).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def outputs() -> dict:
    run = subprocess.run(
        [sys.executable, str(TESTS / "golden_cases.py"), "--print"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=TESTS.parent,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


#: How far a recorded float may move: a float32 ulp or two of the model's outputs, not more.
TOLERANCE = 1e-6


def differences(got, want, path: str = "") -> list[str]:
    """Where ``got`` differs from ``want``: exactly, except floats (within TOLERANCE)."""
    if isinstance(want, dict) and isinstance(got, dict):
        if set(got) != set(want):
            return [f"{path}: keys {sorted(set(got) ^ set(want))}"]
        return [d for k in want for d in differences(got[k], want[k], f"{path}.{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{path}: {len(got)} items, recorded {len(want)}"]
        pairs = enumerate(zip(got, want, strict=True))
        return [d for i, (g, w) in pairs for d in differences(g, w, f"{path}[{i}]")]
    if isinstance(want, float) or isinstance(got, float):
        both = not isinstance(got, bool) and not isinstance(want, bool)
        if both and isinstance(got, (int, float)) and isinstance(want, (int, float)):
            if math.isclose(got, want, rel_tol=TOLERANCE, abs_tol=TOLERANCE):
                return []
        return [f"{path}: {got!r}, recorded {want!r}"]
    return (
        [] if got == want and type(got) is type(want) else [f"{path}: {got!r}, recorded {want!r}"]
    )


def test_the_comparison_is_exact_but_for_float_rounding():
    assert differences({"a": [1, 0.5]}, {"a": [1, 0.5 + 3e-7]}) == []
    assert differences({"a": 0.5}, {"a": 0.5 + 1e-4}) == [".a: 0.5, recorded 0.5001"]
    assert differences({"n": 200}, {"n": 201}) == [".n: 200, recorded 201"]
    assert differences({"v": "stable"}, {"v": "borderline"}) != []
    assert differences({"k": [1, 2]}, {"k": [1, 2, 3]}) == [".k: 2 items, recorded 3"]
    assert differences({"x": True}, {"x": 1.0}) != []


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_equal_the_recorded_ones(outputs, name):
    expected = json.loads((GOLDEN / f"{name}.json").read_text())
    assert differences(outputs[name], expected) == []

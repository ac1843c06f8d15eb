"""The engine's outputs on fixed cases equal those recorded in tests/golden (CPU, same seed).

The golden files were written before the engine was restructured into named stages, so this
checks that the restructuring changed no weight, delta or trust number. Regenerate them with
``python tests/golden_cases.py`` only when an output is meant to change, and say why.

The cases run in a fresh Python process, as they were recorded: inside the whole suite's process,
an earlier test that ran a model under CPU bf16 autocast with channels_last leaves oneDNN in a
state where the demo model's fp32 outputs differ in the 7th digit, and "identical" would then
measure the test order, not the engine.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from golden_cases import CASES, GOLDEN

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def outputs() -> dict:
    run = subprocess.run(
        [sys.executable, str(HERE / "golden_cases.py"), "--print"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=HERE.parent,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_equal_the_recorded_ones(outputs, name):
    expected = json.loads((GOLDEN / f"{name}.json").read_text())
    assert outputs[name] == expected

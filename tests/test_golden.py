"""The engine's outputs on fixed cases equal those recorded in tests/golden (CPU, same seed).

The golden files were written before the engine was restructured into named stages, so this
checks that the restructuring changed no weight, delta or trust number. Regenerate them with
``python tests/golden_cases.py`` only when an output is meant to change, and say why.
"""

import json

import pytest
from golden_cases import CASES, GOLDEN, numbers


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_equal_the_recorded_ones(name):
    expected = json.loads((GOLDEN / f"{name}.json").read_text())
    got = json.loads(json.dumps(numbers(CASES[name]())))
    assert got == expected

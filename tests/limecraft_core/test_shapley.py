"""Shapley values over regions (issue 52): the exact table on known games, its limit, and the
Shapley kernel's draws and constrained regression."""

from __future__ import annotations

import math

import numpy as np
import pytest

from limecraft_core import LimecraftError
from limecraft_core.shapley import (
    SHAPLEY_MAX_K,
    all_coalitions,
    check_exact_size,
    exact_shapley,
    kernel_coalitions,
    kernel_shap,
    shapley_interactions,
)


def test_exact_shapley_of_a_known_game():
    """v(S) = |S|^2 over 3 players: symmetric, so each gets v(all)/3 = 3; the interaction of
    any pair is 2 (v's second difference)."""
    k = 3
    v = all_coalitions(k).sum(1).astype(float) ** 2
    np.testing.assert_allclose(exact_shapley(v, k), [3.0, 3.0, 3.0])
    i = shapley_interactions(v, k)
    np.testing.assert_allclose(i, 2.0 * (1 - np.eye(k)))


def test_an_additive_game_has_its_terms_as_values_and_no_interaction():
    k = 5
    terms = np.array([1.0, -2.0, 0.5, 3.0, 0.0])
    v = 7.0 + all_coalitions(k) @ terms
    np.testing.assert_allclose(exact_shapley(v, k), terms, atol=1e-12)
    np.testing.assert_allclose(shapley_interactions(v, k), 0.0, atol=1e-12)
    # KernelSHAP on every coalition of sizes 1..K-1, weighted by the kernel, is exact too
    z = all_coalitions(k)[1:-1]
    s = z.sum(1)
    w = (k - 1) / (s * (k - s) * np.array([math.comb(k, int(x)) for x in s]))
    np.testing.assert_allclose(kernel_shap(z, v[1:-1], v[-1], v[0], w), terms, atol=1e-10)


def test_the_exact_table_has_a_stated_limit_and_says_what_more_would_cost():
    assert check_exact_size(SHAPLEY_MAX_K) == SHAPLEY_MAX_K
    with pytest.raises(LimecraftError, match=r"2\^11 = 2,048 model passes.*use kernelshap"):
        check_exact_size(SHAPLEY_MAX_K + 1)
    with pytest.raises(LimecraftError, match="has 8 values"):
        exact_shapley(np.zeros(7), 3)


def test_kernel_coalitions_follow_the_shapley_kernel():
    z = kernel_coalitions(6, 20_000, rng=1)
    sizes = np.bincount(z.sum(1), minlength=7)[1:6] / len(z)
    s = np.arange(1, 6)
    p = 5 / (s * (6 - s))
    np.testing.assert_allclose(sizes, p / p.sum(), atol=0.01)
    assert kernel_coalitions(1, 5).shape == (0, 1)
    np.testing.assert_allclose(kernel_shap(np.zeros((0, 1), bool), np.zeros(0), 3.0, 1.0), [2.0])

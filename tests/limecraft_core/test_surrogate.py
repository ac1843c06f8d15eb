import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.metrics import pairwise_distances

from limecraft_core import (
    LimecraftError,
    cosine_distance,
    exponential_kernel,
    fit_ridge,
    make_kernel,
    sample_masks,
)


def test_cosine_distance_matches_scikit_learn():
    z = sample_masks(15, 300, rng=0).masks
    z[5] = False  # the empty mask: sklearn gives distance 1
    ref = pairwise_distances(z.astype(float), np.ones((1, 15)), metric="cosine").ravel()
    assert np.allclose(cosine_distance(z), ref)


def test_exponential_kernel_is_limes():
    d = np.linspace(0, 1, 11)
    assert np.allclose(exponential_kernel(0.25)(d), np.sqrt(np.exp(-(d**2) / 0.25**2)))
    assert np.allclose(make_kernel("uniform")(d), 1.0)
    with pytest.raises(LimecraftError, match="kernel_width"):
        make_kernel(0)
    with pytest.raises(LimecraftError, match="uniform"):
        make_kernel("wide")


@pytest.mark.parametrize("alpha", [0.0, 0.01, 1.0, 10.0])
def test_ridge_matches_scikit_learn_for_all_classes_at_once(alpha):
    rng = np.random.default_rng(0)
    z = sample_masks(12, 400, rng=1).masks
    y = z @ rng.normal(size=(12, 3)) + rng.normal(scale=0.3, size=(400, 3))
    w = exponential_kernel(0.25)(cosine_distance(z))
    fit = fit_ridge(z, y, w, alpha=alpha)
    for c in range(3):
        ref = Ridge(alpha=alpha).fit(z.astype(float), y[:, c], sample_weight=w)
        assert np.allclose(fit.coef[c], ref.coef_, atol=1e-8)
        assert np.isclose(fit.intercept[c], ref.intercept_, atol=1e-8)
        assert np.isclose(fit.score[c], ref.score(z.astype(float), y[:, c], sample_weight=w))
        assert np.isclose(fit.local_prediction[c], ref.predict(np.ones((1, 12)))[0])


def test_ridge_rejects_bad_shapes_and_weights():
    z = np.ones((5, 3), bool)
    with pytest.raises(LimecraftError, match="same number of rows"):
        fit_ridge(z, np.zeros((4, 1)), np.ones(5))
    with pytest.raises(LimecraftError, match="all sample weights are zero"):
        fit_ridge(z, np.zeros((5, 1)), np.zeros(5))
    with pytest.raises(LimecraftError, match="ridge_alpha"):
        fit_ridge(z, np.zeros((5, 1)), np.ones(5), alpha=-1)

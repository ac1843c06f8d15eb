"""Shared fixtures: tiny seeded images and toy models whose true attributions are known."""

import os

# Before torch is imported anywhere: see limecraft_core/__main__.py for why.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Never try to download weights from a test.
os.environ["LIMECRAFT_OFFLINE"] = "1"

import numpy as np
import pytest


@pytest.fixture
def quadrants() -> np.ndarray:
    """A 32x32 uint8 image of four flat coloured quadrants plus seeded noise."""
    rng = np.random.default_rng(0)
    img = np.zeros((32, 32, 3), np.uint8)
    img[:16, :16] = (200, 30, 30)
    img[:16, 16:] = (30, 200, 30)
    img[16:, :16] = (30, 30, 200)
    img[16:, 16:] = (220, 220, 40)
    noise = rng.integers(-20, 21, img.shape)
    return np.clip(img.astype(int) + noise, 0, 255).astype(np.uint8)


@pytest.fixture
def photo() -> np.ndarray:
    """scikit-image's chelsea at 96x128 (ships with scikit-image; no download)."""
    from skimage import data, transform

    return (transform.resize(data.chelsea(), (96, 128), anti_aliasing=True) * 255).astype(np.uint8)

"""A finding proved by removal and insertion against a same-area null (audit/proof.py), on the
generated sets of test_grouping.py whose truth is known."""

import numpy as np
import pytest
import torch

from limecraft_core import Classifier, LimecraftError
from limecraft_core.audit.proof import REMOVAL_MARGIN, hide_mean, prove
from tests.limecraft_core.audit.test_grouping import SIZE, RedOrObject, _box, make_set


def _mask(cell: int) -> np.ndarray:
    m = np.zeros((SIZE, SIZE), bool)
    m[_box(cell)] = True
    return m


def _predict():
    clf = Classifier(RedOrObject(), labels=["red", "object"], device="cpu")
    return lambda image: torch.softmax(torch.from_numpy(clf.predict(image)), -1).numpy()


def _cells(image: np.ndarray, colour) -> list[int]:
    return [c for c in range(36) if np.abs(image[_box(c)] / 255 - colour).max() < 0.01]


def test_the_patch_is_confirmed_both_ways_and_the_object_is_not():
    images, patched = make_set("look", seed=1)
    keys = [f"im{i:02d}" for i in range(len(images))]
    red = [i for i, k in enumerate(keys) if k in patched]
    rest = [i for i, k in enumerate(keys) if k not in patched]
    masks = [_mask(_cells(images[i], (0.9, 0.1, 0.1))[0]) for i in red]
    predict = _predict()
    proof = prove([images[i] for i in red], masks, 0, [images[i] for i in rest[:4]], predict, 0)
    assert proof.removal.mean() > 0.2 and abs(proof.removal_null.mean()) < 0.05
    assert proof.removal_margin >= REMOVAL_MARGIN and proof.insertion.finding == "causes"
    assert proof.confirmed and "confirmed" in proof.sentence("red")
    # a false finding: each object (not red) as the region of class 'red' in the patched images
    objects = [_mask(_objects(images[i])) for i in red]
    fake = prove([images[i] for i in red], objects, 0, [images[i] for i in rest[:4]], predict, 0)
    assert not fake.confirmed and abs(fake.removal_margin) < REMOVAL_MARGIN
    assert fake.insertion.finding == "none" and "not confirmed" in fake.sentence("red")


def _objects(image: np.ndarray) -> int:
    gray = _cells(image, 0.45 * np.ones(3))
    red = _cells(image, (0.9, 0.1, 0.1))
    return next(c for c in range(36) if c not in gray and c not in red)


def test_hide_and_bad_input():
    image = np.zeros((4, 4, 3), np.uint8)
    image[0, 0] = 255
    mask = np.zeros((4, 4), bool)
    mask[0, 0] = True
    out = hide_mean(image, mask)
    assert out[0, 0].tolist() == [0, 0, 0] and image[0, 0, 0] == 255  # the input is not changed
    with pytest.raises(LimecraftError, match="one region mask for each"):
        prove([image], [], 0, [image], lambda x: np.ones(2), 0)
    with pytest.raises(LimecraftError, match="clean images"):
        prove([image], [mask], 0, [], lambda x: np.ones(2), 0)

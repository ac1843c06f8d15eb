import numpy as np
import pytest

from limecraft_core import LimecraftError, merge_by_keys, regions_from_labels, segment
from limecraft_core.regions import mask_from_canvas, region_at, toggle


def test_a_closed_freehand_loop_becomes_a_filled_region():
    data = np.zeros((50, 100, 4), np.uint8)
    ring = np.zeros((50, 100), bool)
    ring[10:40, 20:22] = ring[10:40, 60:62] = ring[10:12, 20:62] = ring[38:40, 20:62] = True
    data[ring] = (255, 0, 0, 128)
    mask = mask_from_canvas(data, (100, 200))
    assert mask.shape == (100, 200)
    assert mask[50, 80]  # inside the loop, at image scale (x2)
    assert not mask[5, 5] and not mask[90, 190]
    open_mask = mask_from_canvas(data, (100, 200), fill_holes=False)
    assert not open_mask[50, 80]


def test_nothing_drawn_is_an_empty_mask():
    assert not mask_from_canvas(None, (10, 20)).any()
    assert not mask_from_canvas(np.zeros((5, 10, 4), np.uint8), (10, 20)).any()
    with pytest.raises(LimecraftError, match="RGBA"):
        mask_from_canvas(np.zeros((5, 10, 3), np.uint8), (10, 20))


def test_click_maps_displayed_pixels_to_the_region():
    labels = np.kron(np.arange(4).reshape(2, 2), np.ones((50, 100), int))  # 100 x 200
    assert region_at(labels, 10, 10, 400, 200) == 0
    assert region_at(labels, 390, 10, 400, 200) == 1
    assert region_at(labels, 10, 190, 400, 200) == 2
    assert region_at(labels, 9999, 9999, 400, 200) == 3  # clamped to the image


def test_toggle_and_merge_by_keys(photo):
    regions = regions_from_labels(segment(photo, "grid", n_segments=6))
    sel = toggle(toggle(toggle(frozenset(), "auto:1"), "auto:4"), "auto:2")
    sel = toggle(sel, "auto:2")
    assert sel == {"auto:1", "auto:4"}
    merged = merge_by_keys(regions, sel, name="both")
    assert merged.n_regions == 5 and "both" in merged.names
    # replaying with vanished keys is harmless
    assert merge_by_keys(merged, ["auto:1", "auto:4"]) is merged

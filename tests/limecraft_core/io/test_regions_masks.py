"""The analyst's own regions masks and proposers in an audit (issue 50): each image's digest
takes its regions mask's bytes, the settings key takes the proposers and the masks folder, and
an audit without them keeps the keys that audits made before."""

from __future__ import annotations

import numpy as np
from PIL import Image

from limecraft_core.config import ExplainConfig
from limecraft_core.io.audit_folder import settings_key
from limecraft_core.io.dataset import audit_items, file_digest, match_masks
from limecraft_core.io.masks_folder import read_regions_mask


def _write(path, array) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def test_the_settings_key_changes_with_the_proposers_and_the_regions_masks():
    cfg, model = ExplainConfig(), {"name": "demo"}
    plain = settings_key(cfg, model, 5)
    assert plain == settings_key(cfg, model, 5, proposers=(), regions_masks=False)
    keys = {
        plain,
        settings_key(cfg, model, 5, proposers=["text"]),
        settings_key(cfg, model, 5, proposers=["text", "watermark"]),
        settings_key(cfg, model, 5, regions_masks=True),
        settings_key(cfg, model, 5, proposers=["text"], regions_masks=True),
    }
    assert len(keys) == 5


def test_the_digest_takes_the_regions_masks_bytes(tmp_path):
    image, own = tmp_path / "a.png", tmp_path / "own" / "a.png"
    _write(image, np.zeros((20, 20, 3), np.uint8))
    mask = np.zeros((20, 20), np.uint8)
    mask[:5, :5] = 1
    _write(own, mask)
    before = file_digest(image)
    with_own = file_digest(image, None, own)
    assert with_own != before and file_digest(image, None) == before
    mask[10:, 10:] = 2
    _write(own, mask)
    assert file_digest(image, None, own) != with_own


def test_an_audit_item_loads_its_own_regions_and_proposals(tmp_path):
    _write(tmp_path / "images" / "cat.png", np.full((224, 224, 3), 90, np.uint8))
    own = np.zeros((224, 224), np.uint8)
    own[:40, :40] = 5
    _write(tmp_path / "own" / "cat.png", own)
    files = [("cat.png", tmp_path / "images" / "cat.png")]
    regions = match_masks(files, tmp_path / "own", "--regions-masks")
    (item,) = audit_items(files, regions_masks=regions, proposers=["watermark"])
    loaded = item.load()
    assert loaded.region_names == ("hand 1", "watermark")
    assert np.array_equal(loaded.regions[0], own == 5)
    assert item.digest != audit_items(files)[0].digest
    assert audit_items(files)[0].load().regions == ()


def test_one_images_regions_mask_is_found_by_its_name(tmp_path):
    own = np.zeros((8, 8), np.uint8)
    own[2:4, 2:4] = 9
    _write(tmp_path / "sub" / "cat.png", own)
    assert np.array_equal(read_regions_mask(tmp_path, "sub/cat.jpg") == 9, own == 9)
    assert read_regions_mask(tmp_path, "dog.png") is None

"""The generated sets of test_grouping.py, audited once for the tests of this folder."""

import pytest


@pytest.fixture(scope="session")
def audited():
    """{kind: (rows, the patched images' keys, {key: (image, label map)})} for the sets
    "place", "look" and "clean"."""
    from tests.limecraft_core.audit.test_grouping import audit, make_set

    out = {}
    for kind in ("place", "look", "clean"):
        images, patched = make_set(kind)
        keep: dict = {}
        out[kind] = (audit(images, keep), patched, keep)
    return out


@pytest.fixture(scope="session")
def sets(audited):
    return {kind: (rows, patched) for kind, (rows, patched, _) in audited.items()}

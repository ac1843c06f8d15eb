"""Security: hostile files never run their code, user text is escaped, the server's protections
stay on, the source has no eval / shell / unrestricted unpickling, and each session's temporary
folder is private."""

from __future__ import annotations

import pickle

import pytest
from bad_files import Payload, booby_trapped_pickle, booby_trapped_torchscript

import limecraft_core as lc


@pytest.fixture(scope="module")
def booby_traps(tmp_path_factory):
    """A folder with a booby-trapped whole-model pickle and a booby-trapped TorchScript file,
    which write ``pwned.txt`` beside them if their code ever runs."""
    d = tmp_path_factory.mktemp("traps")
    marker = d / "pwned.txt"
    (d / "evil.pt").write_bytes(booby_trapped_pickle(marker))
    (d / "evil_ts.pt").write_bytes(booby_trapped_torchscript(marker))
    return d


def test_booby_trapped_files_never_run_their_code(booby_traps):
    from models.custom import load_model_file

    files = booby_traps
    marker = files / "pwned.txt"
    for name in ("evil.pt", "evil_ts.pt"):
        with pytest.raises(lc.LimecraftError):
            load_model_file(files / name)
    # the payloads are live: plain unpickling would run them
    pickle.loads(pickle.dumps(Payload(marker)))
    assert marker.exists()
    marker.unlink()

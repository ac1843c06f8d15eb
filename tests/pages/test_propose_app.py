"""Craft regions' proposals (AppTest): propose, accept or reject each or all, undo, explain, and
the analysis file keeps where each accepted region came from."""

from __future__ import annotations

import numpy as np
import pytest
from test_analysis import CRAFT, EXPORT, button, explain, run_app

import limecraft_core as lc
from limecraft_core import proposers as P
from pages.lib import analysis_file as AF


@pytest.fixture(autouse=True)
def _own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMECRAFT_STORE_DIR", str(tmp_path / "store"))


def _squares(image: np.ndarray, given=None) -> P.Proposed:
    """A toy proposer: the top-left and the bottom-right eighth of the image."""
    h, w = image.shape[:2]
    a = np.zeros((h, w), bool)
    a[: h // 4, : w // 4] = True
    b = np.zeros((h, w), bool)
    b[-h // 4 :, -w // 4 :] = True
    return P.Proposed(
        (P.Proposal("square a", a, 0.9, "squares"), P.Proposal("square b", b, 0.5, "squares"))
    )


@pytest.fixture
def toy(monkeypatch):
    """The toy proposer, plugged in through the table alone."""
    monkeypatch.setitem(
        P.PROPOSERS, "squares", P.Proposer("squares", "two squares in the corners", _squares)
    )


def _session(at):
    return at.session_state["limecraft_session"]


def _propose(at, name: str = "squares"):
    at.switch_page(CRAFT).run()
    at.selectbox(key="propose_with").set_value(name).run()
    button(at, "Propose regions").click().run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_accept_one_reject_one_then_explain_and_restore(toy):
    at = _propose(run_app())
    text = " ".join(m.value for m in at.markdown)
    assert "square a" in text and "square b" in text  # each proposal is listed by name
    at.button(key="prop_ok_0").click().run()
    s = _session(at).app
    assert [h.name for h in s.hand] == ["square a"]
    assert s.hand[0].origin == "proposed:squares"
    # the accepted one left the waiting list; the other waits, first now
    at.button(key="prop_no_0").click().run()
    assert _session(at).proposals.proposals == []
    assert any("No squares proposals are waiting" in c.value for c in at.caption)
    ex = explain(at)
    assert ex.region_names[0] == "square a"
    assert ex.region_origins[0] == "proposed:squares"
    # the analysis file keeps the origin
    other = run_app()
    other.switch_page(EXPORT).run()
    other.file_uploader(key="restore_upload").set_value(
        ("a.json", AF.to_json(s).encode(), "application/json")
    ).run()
    assert not other.exception, other.exception
    back = _session(other).app
    assert [(h.name, h.origin) for h in back.hand] == [("square a", "proposed:squares")]


@pytest.mark.slow
def test_accept_all_then_undo_with_delete_and_propose_again(toy):
    at = _propose(run_app())
    button(at, "Accept all").click().run()
    s = _session(at).app
    assert [h.name for h in s.hand] == ["square a", "square b"]
    # undo: a proposal is a region like any other, deleted with its button
    at.button(key=f"hdel-{s.hand[1].uid}").click().run()
    assert [h.name for h in _session(at).app.hand] == ["square a"]
    # proposing again offers only what is not a region already, and says so
    button(at, "Propose regions").click().run()
    p = _session(at).proposals
    assert [q.name for q in p.proposals] == ["square b"]
    assert any("1 of them is a region already" in c.value for c in at.caption)
    button(at, "Reject all").click().run()
    assert _session(at).proposals.proposals == []


def test_a_proposer_error_is_a_sentence_and_nothing_is_lost(toy, monkeypatch):
    def broken(image, given=None):
        raise lc.LimecraftError("the detector is not installed: pip install rapidocr-onnxruntime")

    monkeypatch.setitem(P.PROPOSERS, "broken", P.Proposer("broken", "fails", broken))
    at = _propose(run_app())
    button(at, "Accept all").click().run()
    at.selectbox(key="propose_with").set_value("broken").run()
    button(at, "Propose regions").click().run()
    assert not at.exception
    assert any("pip install rapidocr-onnxruntime" in e.value for e in at.error)
    assert [h.name for h in _session(at).app.hand] == ["square a", "square b"]


def test_the_proposals_wait_for_their_own_analysis_only(toy):
    at = _propose(run_app())
    assert _session(at).proposals is not None
    _session(at).proposals.analysis = "another analysis"
    at.run()
    assert not any(b.key == "prop_ok_0" for b in at.button)

"""Each trust check in words, once (limecraft_core.trust.words): one battery over the table."""

from types import SimpleNamespace

import pytest

from limecraft_core.trust import words as W

# Each worded check in both of its states, as the fields its words read.
CASES = {
    "stability": [
        SimpleNamespace(
            runs="3 repeats",
            verdict="stable",
            reason="stable: the conclusion holds: region 0 is first in all 3 repeats; the order "
            "of the 2 other regions that matter is settled",
        ),
        SimpleNamespace(runs="40 resamples", verdict="unstable", reason=""),
    ],
    "convergence": [
        SimpleNamespace(needed=60, sizes=[30, 60]),
        SimpleNamespace(needed=None, sizes=[30, 60]),
    ],
    "kernel_sweep": [SimpleNamespace(sensitive=[]), SimpleNamespace(sensitive=[3, 5])],
    "faithfulness": [SimpleNamespace(beats_random=True), SimpleNamespace(beats_random=False)],
    "fills": [SimpleNamespace(agree=True), SimpleNamespace(agree=False)],
}


def test_every_worded_check_has_cases():
    assert set(CASES) == set(W.WORDS)


@pytest.mark.parametrize("name", list(W.WORDS))
def test_each_check_says_its_two_states_apart_in_plain_clauses(name):
    said = [W.WORDS[name](case) for case in CASES[name]]
    assert said[0].verdict != said[1].verdict and said[0].tone != said[1].tone
    for w in said:
        assert isinstance(w, W.CheckWords) and w.tone in {"good", "warn", "bad", "info"}
        # the CLI prints a clause as it is: no comma, no capital, no full stop
        for clause in (w.headline, w.detail):
            assert "," not in clause and not clause.endswith("."), clause
            assert not clause[:1].isupper(), clause


def test_the_stability_verdict_parts_in_conclusion_and_detail():
    w = W.stability_words(CASES["stability"][0])
    assert w.name == "Stability over 3 repeats" and w.tone == "good"
    assert w.headline == "stable: the conclusion holds: region 0 is first in all 3 repeats"
    assert W.detail_line(w.detail) == (
        "The detail: the order of the 2 other regions that matter is settled."
    )
    assert W.detail_line("") == ""


def test_the_conclusion_line_says_how_often_it_held_and_its_lead():
    st = SimpleNamespace(
        conclusion=[0, 3],
        conclusion_signs=[1, -1],
        conclusion_agreement=0.8,
        conclusion_lead=None,
        runs="5 repeats",
        detail_settled=None,
    )
    assert W.conclusion_line(st) == (
        "the conclusion (region 0 and region 3 for and against the class) holds in 80% of the "
        "5 repeats"
    )
    one = SimpleNamespace(**{**vars(st), "conclusion": [2], "conclusion_signs": [1]})
    one.conclusion_lead, one.conclusion_agreement, one.runs = 1.0, 1.0, "40 resamples"
    one.conclusion_firm = False
    assert W.conclusion_line(one, lambda i: f"tag ({i})") == (
        "the conclusion (tag (2) for the class) holds in 100% of the 40 resamples and leads the "
        f"next region by 1.0 sd over them (not firm: {W.CONCLUSION_LEAD:g} sd or more)"
    )
    assert W.conclusion_line(SimpleNamespace(conclusion=[], conclusion_agreement=None)) == ""
    assert W.detail_state(st).endswith("is not judged")


def test_sentence_capitalises_and_ends_a_clause():
    assert W.sentence("every fill puts the same region first") == (
        "Every fill puts the same region first."
    )
    assert W.sentence("done.") == "Done." and W.sentence("") == ""


def test_check_words_keeps_the_checks_that_ran_in_table_order():
    trust = SimpleNamespace(
        stability=None,
        convergence=CASES["convergence"][1],
        kernel_sweep=None,
        faithfulness=CASES["faithfulness"][0],
        fills=None,
    )
    said = W.check_words(trust)
    assert list(said) == ["convergence", "faithfulness"]
    assert said["convergence"].headline == "not stable within 60 samples: use more"

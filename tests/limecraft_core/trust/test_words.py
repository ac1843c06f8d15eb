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
    "localisation": [
        SimpleNamespace(
            expected=1,
            positive_mass=2.0,
            pointing_game=True,
            relevance_mass=0.9,
            mask_coverage=1.0,
            top=0,
            top_inside=1.0,
        ),
        SimpleNamespace(
            expected=1,
            positive_mass=2.0,
            pointing_game=False,
            relevance_mass=0.05,
            mask_coverage=None,
            top=3,
            top_inside=None,
        ),
    ],
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
        localisation=None,
    )
    said = W.check_words(trust)
    assert list(said) == ["convergence", "faithfulness"]
    assert said["convergence"].headline == "not stable within 60 samples: use more"


def _loc(**kw):
    """A localisation's fields, the top region (0) expected with most of the weight by default."""
    base = dict(vars(CASES["localisation"][0]))
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize(
    ("loc", "verdict", "tone", "headline"),
    [
        (
            _loc(),
            "the top region is expected",
            "good",
            "the top region is inside the expected area and carries most of the positive "
            "weight: relevance mass 0.90",
        ),
        (
            _loc(relevance_mass=0.3),
            "the top region is expected but carries little weight",
            "warn",
            "the top region is inside the expected area and carries only a small part of the "
            "positive weight: relevance mass 0.30",
        ),
        (
            _loc(pointing_game=False, relevance_mass=0.1, top=4, top_inside=0.25),
            "the top region is not expected",
            "bad",
            "the model's top region (region 4) is outside the area you expected (25% of its "
            "pixels are inside): relevance mass 0.10",
        ),
        (
            _loc(pointing_game=False, relevance_mass=0.0, top=4, top_inside=0.0),
            "the top region is not expected",
            "bad",
            "the model's top region (region 4) is outside the area you expected: relevance "
            "mass 0.00",
        ),
        (
            _loc(expected=0, pointing_game=False, relevance_mass=0.0, mask_coverage=0.0),
            "nothing to measure",
            "warn",
            "no region lies at least half inside the expected area so nothing can be measured",
        ),
        (
            _loc(positive_mass=0.0, relevance_mass=0.0),
            "no positive weight",
            "info",
            "no region has a positive weight so none of it falls inside the expected area",
        ),
    ],
    ids=["most-weight", "little-weight", "not-expected", "not-expected-apart", "nothing", "none"],
)
def test_each_localisation_outcome_in_words(loc, verdict, tone, headline):
    w = W.localisation_words(loc)
    assert (w.name, w.verdict, w.tone, w.headline) == ("Localisation", verdict, tone, headline)
    assert "," not in w.headline
    assert W.localisation_words(loc, "do this").headline.startswith(headline)  # advice last


def test_localisation_says_low_coverage_once_with_the_surfaces_advice():
    """One threshold on every surface: under LOW_COVERAGE of the area, the coverage clause,
    then the surface's advice (where the regions miss the area, and only there)."""
    low = _loc(mask_coverage=W.LOW_COVERAGE - 0.1)
    said = W.localisation_words(low, "draw the area as a region with --regions-mask").headline
    assert said == (
        "the top region is inside the expected area and carries most of the positive weight: "
        "relevance mass 0.90; the expected regions cover only 40% of the area: draw the area "
        "as a region with --regions-mask"
    )
    assert W.localisation_words(low).headline == said.split(": draw")[0]
    enough = _loc(mask_coverage=W.LOW_COVERAGE)
    assert "cover" not in W.localisation_words(enough, "do this").headline
    nothing = _loc(expected=0, pointing_game=False, relevance_mass=0.0, mask_coverage=0.0)
    assert W.localisation_words(nothing, "do this").headline == (
        "no region lies at least half inside the expected area so nothing can be measured: do this"
    )
    unsaved = _loc(pointing_game=False, top=None, top_inside=None)  # saved before top was kept
    assert W.localisation_words(unsaved).headline.startswith(
        "the model's top region is outside the area you expected: "
    )

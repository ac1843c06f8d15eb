"""Charts of region weights, as Altair specs (the page shows them with ``st.altair_chart``).

Every bar is labelled with its region's id and name, green for the class and red against it
(the colours of the overlays), and a bar is never shorter than ``MIN_SHARE`` of the longest,
so a small weight stays visible; the true value is in its label and its tooltip. The regions
not drawn are summed in words under the chart (:func:`others_line`), never as a bar: their sum
can outgrow every named bar although each of them is weaker than the weakest bar.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd

from limecraft_core import render

MIN_SHARE = 0.03  # the shortest bar drawn, as a share of the longest
ROW_PX = 26  # height of one bar's row: every label fits, none is skipped
MAX_DECIMALS = 6  # a weight below half of 1e-6 reads as ±0.000000


def _hex(rgb: np.ndarray) -> str:
    return "#" + "".join(f"{round(float(c) * 255):02x}" for c in rgb)


FOR, AGAINST = _hex(render.POSITIVE), _hex(render.NEGATIVE)


def region_label(region: int, name: str | None) -> str:
    """How a region is called everywhere in the app: its id, then its name when it has one."""
    return f"{region} {name}".strip() if name else str(region)


def value(v: float) -> str:
    """A weight as a label, in fixed notation: 3 decimals, or as many as two significant
    digits need (at most ``MAX_DECIMALS``) when 3 would show 0: -0.000113 is "-0.00011"."""
    if v == 0 or not math.isfinite(v) or abs(v) >= 0.0005:
        return f"{v:+.3f}"
    decimals = min(MAX_DECIMALS, 1 - math.floor(math.log10(abs(v))))
    return f"{v:+.{decimals}f}"


def _shown(values: np.ndarray) -> np.ndarray:
    """Values as drawn: at least MIN_SHARE of the largest |value| long, sign kept."""
    top = float(np.max(np.abs(values))) if values.size else 0.0
    if top == 0:
        return values
    return np.sign(values) * np.maximum(np.abs(values), MIN_SHARE * top)


def _top(w: np.ndarray, k: int) -> list[int]:
    """The top ``k`` regions for the class and the top ``k`` against it, by weight."""
    order = np.argsort(-w, kind="stable")
    pos = [int(i) for i in order[:k] if w[i] > 0]
    neg = [int(i) for i in order[::-1][:k] if w[i] < 0]
    return sorted(pos + neg, key=lambda i: -w[i])


def weights_frame(weights: np.ndarray, names: Sequence[str | None], k: int) -> pd.DataFrame:
    """The rows of the weights chart: the top ``k`` regions for the class and the top ``k``
    against it (by weight); the others are :func:`others_line`'s.

    Parameters
    ----------
    weights : (K,) float ndarray
    names : K region names (None or "" when a region has none)
    k : int >= 1, regions shown on each side

    Returns
    -------
    DataFrame with columns region, weight (the true value), shown (the drawn length), effect.
    """
    w = np.asarray(weights, np.float64)
    rows = [
        {
            "region": region_label(i, names[i]),
            "weight": float(w[i]),
            "effect": "for the class" if w[i] > 0 else "against",
        }
        for i in _top(w, k)
    ]
    df = pd.DataFrame(rows, columns=["region", "weight", "effect"])
    df["shown"] = _shown(df["weight"].to_numpy(np.float64)) if len(df) else []
    df["region"] = [f"{r}  ({value(v)})" for r, v in zip(df["region"], df["weight"], strict=True)]
    return df


def others_line(weights: np.ndarray, k: int) -> str:
    """The regions the chart does not draw, in words: how many, and their sum (for and against
    apart), e.g. "Not drawn: the 37 other regions, none stronger than the weakest bar of its
    colour; together +0.209 (+0.250 for the class, -0.041 against)". Empty when every region
    is drawn.

    Parameters
    ----------
    weights : (K,) float ndarray
    k : int >= 1, regions drawn on each side (as in :func:`weights_frame`)
    """
    w = np.asarray(weights, np.float64)
    rest = np.setdiff1d(np.arange(w.size), _top(w, k))
    if rest.size == 0:
        return ""
    r = w[rest]
    if not np.any(r):
        return f"Not drawn: {rest.size} other region{'s' if rest.size > 1 else ''}, weight 0."
    if rest.size == 1:
        return (
            f"Not drawn: 1 other region, {value(float(r[0]))}, no stronger than the weakest bar "
            "of its colour."
        )
    parts = [f"{value(float(r[r > 0].sum()))} for the class"] if np.any(r > 0) else []
    parts += [f"{value(float(r[r < 0].sum()))} against"] if np.any(r < 0) else []
    split = f" ({', '.join(parts)})" if len(parts) == 2 else ""
    return (
        f"Not drawn: the {rest.size} other regions, none stronger than the weakest bar of its "
        f"colour; together {value(float(r.sum()))}{split}."
    )


_LABELS = alt.Axis(labelLimit=260, labelOverlap=False, labelFontSize=13)
CAPTION = ":green[■] for the class · :red[■] against it"


def _bars(df: pd.DataFrame, x: str, title: str) -> alt.Chart:
    y = alt.Y("region:N", sort=None, title=None, axis=_LABELS)
    colour = alt.Color(
        "effect:N",
        scale=alt.Scale(domain=["for the class", "against"], range=[FOR, AGAINST]),
        legend=None,  # the page's caption says it: green for, red against
    )
    bars = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=y,
            x=alt.X(
                f"{x}:Q",
                title=title,
                axis=alt.Axis(labelFontSize=12, titleFontSize=12, format="~g"),
            ),
            color=colour,
            tooltip=["region", alt.Tooltip("weight:Q", format="+.6f")],
        )
    )
    return bars.properties(height=max(80, ROW_PX * len(df)))


def weights_chart(weights: np.ndarray, names: Sequence[str | None], k: int) -> alt.Chart:
    """Horizontal bars of the top ``k`` regions for and against (the others: :func:`others_line`)."""
    return _bars(weights_frame(weights, names, k), "shown", "weight (bars at least 3% long)")


def interval_chart(
    mean: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    names: Sequence[str | None],
    n: int = 15,
) -> alt.LayerChart:
    """Mean weight over repeats with its interval, the ``n`` regions of largest |mean|, each
    labelled; the colours of the weights chart."""
    mean = np.asarray(mean, np.float64)
    order = np.argsort(-np.abs(mean), kind="stable")[:n]
    df = pd.DataFrame(
        {
            "region": [region_label(int(i), names[i]) for i in order],
            "weight": mean[order],
            "low": np.asarray(low, np.float64)[order],
            "high": np.asarray(high, np.float64)[order],
            "effect": ["for the class" if mean[i] > 0 else "against" for i in order],
        }
    )
    df["shown"] = _shown(df["weight"].to_numpy(np.float64))
    df["region"] = [f"{r}  ({value(v)})" for r, v in zip(df["region"], df["weight"], strict=True)]
    y = alt.Y("region:N", sort=None, title=None, axis=_LABELS)
    rule = alt.Chart(df).mark_rule(color="black", strokeWidth=2).encode(y=y, x="low:Q", x2="high:Q")
    return alt.layer(_bars(df, "shown", "mean weight, with its 95% interval"), rule).properties(
        height=max(80, ROW_PX * len(df))
    )

"""Exports of an explanation: a self-contained one-page HTML report, and the regions as CSV.

Pure functions returning text; the caller writes or serves it. Every piece of user text (region
names, file names, class labels, settings) is HTML-escaped.
"""

from __future__ import annotations

import base64
import csv
import html
import io
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .explain import Explanation
from .io import encode_png

__all__ = ["html_report", "regions_csv"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;
color:#222;line-height:1.4}
h1{margin:0 0 4px}h2{margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.muted{color:#666;font-size:90%}
.pics{display:flex;flex-wrap:wrap;gap:16px}.pics figure{margin:0}
.pics img{max-width:340px;max-height:340px;border:1px solid #ccc;image-rendering:auto}
figcaption{font-size:90%;color:#444;text-align:center}
table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.pos{color:#1b7d2a}.neg{color:#b3261e}
.badge{display:inline-block;padding:2px 8px;border-radius:10px;background:#eee;font-size:90%}
"""


def _img(a: np.ndarray, alt: str) -> str:
    data = base64.b64encode(encode_png(a)).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _e(v: Any) -> str:
    return html.escape(str(v))


def _num(v: float, digits: int = 4) -> str:
    if v is None or not np.isfinite(v):
        return "–"
    cls = "pos" if v > 0 else "neg" if v < 0 else ""
    return f'<span class="{cls}">{v:+.{digits}f}</span>'


def _plain(v: float) -> str:
    return f"{v:.4f}" if np.isfinite(v) else "–"


def regions_csv(explanation: Explanation, cls: int | None = None) -> str:
    """The regions table for class ``cls`` (default: the target) as CSV text."""
    rows = explanation.regions_table(cls)
    buf = io.StringIO()
    w = csv.DictWriter(
        buf, fieldnames=["id", "key", "name", "pixels", "weight", "delta", "kept_alone"]
    )
    w.writeheader()
    for r in rows:
        # A leading =, +, - or @ would make a spreadsheet run a formula: quote it as text.
        name = r["name"]
        if name[:1] in ("=", "+", "-", "@"):
            name = "'" + name
        w.writerow({**r, "name": name})
    return buf.getvalue()


def html_report(
    *,
    image: np.ndarray,
    explanation: Explanation,
    pictures: Mapping[str, np.ndarray] | None = None,
    edits: Sequence[str] = (),
    prediction_changes: Sequence[Mapping[str, Any]] = (),
    source: str = "",
    notes: Sequence[str] = (),
    generated: datetime | None = None,
) -> str:
    """A one-page, self-contained HTML report (images inlined as data URLs).

    Parameters
    ----------
    image : (H, W, 3) uint8 ndarray, the explained image
    explanation : Explanation
    pictures : mapping of caption -> (h, w, 3) uint8 ndarray, e.g. the overlays
    edits : descriptions of the edits applied in the inspection, in order
    prediction_changes : rows ``{label, original, edited}`` comparing predictions
    source : where the image came from (a file name), shown escaped
    notes : sentences shown under the title (e.g. the R^2 note, a stability verdict)
    generated : timestamp to print (default: now, UTC)

    Returns
    -------
    str, the HTML document.
    """
    ex = explanation
    when = (generated or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    target = f"{ex.class_labels[0]} (class {ex.target})"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>LIMEcraft report: {_e(target)}</title><style>{_CSS}</style></head><body>",
        "<h1>LIMEcraft report</h1>",
        f"<div class='muted'>{_e(source or 'image')} · {image.shape[1]}×{image.shape[0]} px · "
        f"model {_e(ex.settings.get('model', '?'))} · generated {_e(when)}</div>",
        f"<p>Explained class: <b>{_e(target)}</b>, model output {ex.predictions[0]:.4f} "
        f"({_e(ex.settings.get('output_space', ''))}). Surrogate fidelity (weighted R²): "
        f"<span class='badge'>{ex.score:.3f}</span> over {ex.n_regions} regions and "
        f"{_e(ex.settings.get('samples', '?'))} samples.</p>",
    ]
    for n in notes:
        parts.append(f"<p>{_e(n)}</p>")
    parts.append("<h2>Image and explanation</h2><div class='pics'>")
    parts.append(f"<figure>{_img(image, 'image')}<figcaption>image</figcaption></figure>")
    for caption, pic in (pictures or {}).items():
        parts.append(f"<figure>{_img(pic, caption)}<figcaption>{_e(caption)}</figcaption></figure>")
    parts.append("</div>")

    parts.append(
        "<h2>Model's top predictions</h2><table><tr><th class='l'>class</th><th>score</th></tr>"
    )
    for idx, label, score in ex.top_predictions:
        parts.append(f"<tr><td class='l'>{_e(label)} ({idx})</td><td>{score:.4f}</td></tr>")
    parts.append("</table>")

    parts.append(
        "<h2>Regions</h2><p class='muted'>weight: the surrogate's coefficient; Δ hidden: output "
        "drop when only this region is hidden; kept alone: output when only this region is kept."
        "</p><table><tr><th>id</th><th class='l'>name</th><th>pixels</th><th>weight</th>"
        "<th>Δ hidden</th><th>kept alone</th></tr>"
    )
    order = np.argsort(-np.abs(ex.weights))
    for k in order:
        name = ex.region_names[k] or ""
        parts.append(
            f"<tr><td>{k}</td><td class='l'>{_e(name)}</td><td>{int(ex.region_pixels[k])}</td>"
            f"<td>{_num(ex.weights[k])}</td><td>{_num(ex.deltas[0, k])}</td>"
            f"<td>{_plain(ex.kept_alone[0, k])}</td></tr>"
        )
    parts.append("</table>")

    if edits or prediction_changes:
        parts.append("<h2>Inspection: edits and prediction changes</h2>")
        if edits:
            parts.append("<ol>" + "".join(f"<li>{_e(e)}</li>" for e in edits) + "</ol>")
        if prediction_changes:
            parts.append(
                "<table><tr><th class='l'>class</th><th>original</th><th>edited</th><th>change</th></tr>"
            )
            for row in prediction_changes:
                o, n = float(row["original"]), float(row["edited"])
                parts.append(
                    f"<tr><td class='l'>{_e(row['label'])}</td><td>{o:.4f}</td><td>{n:.4f}</td>"
                    f"<td>{_num(n - o)}</td></tr>"
                )
            parts.append("</table>")

    parts.append("<h2>Settings</h2><table>")
    for key, value in sorted(ex.settings.items()):
        parts.append(f"<tr><td class='l'>{_e(key)}</td><td class='l'>{_e(value)}</td></tr>")
    parts.append("</table><h2>Timings and versions</h2><table>")
    for key, value in ex.timings.items():
        parts.append(f"<tr><td class='l'>{_e(key)}</td><td>{value:.3f} s</td></tr>")
    for key, value in ex.versions.items():
        parts.append(f"<tr><td class='l'>{_e(key)}</td><td class='l'>{_e(value)}</td></tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)

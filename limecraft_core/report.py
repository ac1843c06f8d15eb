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

from .io import encode_png
from .result import Explanation
from .trust import fidelity

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


def _segmentation(ex: Explanation) -> str:
    seg = ex.config.segmentation
    what = "a given label map" if seg.method == "given" else f"{seg.method} superpixels"
    return f"{what}, {ex.run.handcrafted} handcrafted, {ex.run.merged} merged"


def _trust_section(ex: Explanation) -> list[str]:
    """The trust checks that ran, as their verdicts (computed in limecraft_core.trust)."""
    t = ex.trust
    rows = []
    if t.stability is not None:
        s = t.stability
        rows.append(
            f"<li>Stability over {s.repeats} repeats: <b>{_e(s.verdict)}</b> (Kendall's W "
            f"{s.kendall_w:.3f}, top-5 overlap {s.jaccard_top5:.2f}, top-10 sign flips "
            f"{s.sign_flips_top10:.0%})</li>"
        )
    if t.early_stop is not None:
        e = t.early_stop
        rows.append(
            f"<li>Early stop: {e.samples_used} of {e.samples_requested} samples "
            f"({'stopped: the two halves agreed' if e.stopped else 'ran to the end'})</li>"
        )
    if t.convergence is not None:
        c = t.convergence
        rows.append(
            "<li>Convergence: "
            + (
                f"stable from {c.needed} samples"
                if c.needed
                else f"not stable by {c.sizes[-1]} samples"
            )
            + "</li>"
        )
    if t.kernel_sweep is not None:
        k = t.kernel_sweep
        rows.append(
            f"<li>Kernel widths {_e(k.widths)}: width-sensitive regions {_e(k.sensitive or 'none')}</li>"
        )
    if t.faithfulness is not None:
        f = t.faithfulness
        rows.append(
            f"<li>Faithfulness: deletion AUC {f.deletion_auc:.3f} (random {f.random_deletion_auc:.3f}), "
            f"insertion AUC {f.insertion_auc:.3f} (random {f.random_insertion_auc:.3f}): "
            f"<b>{'beats random orders' if f.beats_random else 'does not beat random orders'}</b></li>"
        )
    if t.fills is not None:
        rows.append(
            f"<li>Fills {_e(', '.join(t.fills.fills))}: "
            f"<b>{'the same top region' if t.fills.agree else 'the top region depends on the fill'}</b></li>"
        )
    return ["<h2>Trust</h2><ul>", *rows, "</ul>"] if rows else []


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
        f"model {_e(ex.run.model)} · generated {_e(when)}</div>",
        f"<p>Explained class: <b>{_e(target)}</b>, model output {ex.predictions[0]:.4f} "
        f"({_e(ex.config.targets.output_space)}). Surrogate fidelity (weighted R²): "
        f"<span class='badge'>{ex.score:.3f} {_e(fidelity(ex.score))}</span> over {ex.n_regions} "
        f"regions ({_e(_segmentation(ex))}) and {ex.run.samples_used} samples.</p>",
        *_trust_section(ex),
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
    for group, values in ex.config.to_dict().items():
        for key, value in values.items():
            parts.append(
                f"<tr><td class='l'>{_e(group)}</td><td class='l'>{_e(key)}</td>"
                f"<td class='l'>{_e(value)}</td></tr>"
            )
    for key, value in ex.run.to_dict().items():
        parts.append(
            f"<tr><td class='l'>run</td><td class='l'>{_e(key)}</td><td class='l'>{_e(value)}</td></tr>"
        )
    parts.append("</table><h2>Timings and versions</h2><table>")
    for key, value in ex.timings.items():
        parts.append(f"<tr><td class='l'>{_e(key)}</td><td>{value:.3f} s</td></tr>")
    for key, value in ex.versions.items():
        parts.append(f"<tr><td class='l'>{_e(key)}</td><td class='l'>{_e(value)}</td></tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)

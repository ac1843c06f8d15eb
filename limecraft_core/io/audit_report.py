"""An audit's findings as text: the rows as CSV, and a self-contained HTML page.

Pure functions returning text; :mod:`limecraft_core.io.audit_folder` writes them. The page is rendered
from ``templates/audit.html.j2`` with autoescaping on (file names, class labels and region names
are user text), its pictures are data URLs and its CSS and sorting script are inline: it fetches
nothing. It leads with the findings across images (each with its sentence, risk and rule,
prevalence, interventions against the null and exemplars), the plain sentences, then the location map, the per-class aggregates and
a sortable table of every image (flagged first) with its thumbnail and overlay.
"""

from __future__ import annotations

import base64
import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from functools import cache
from typing import Any

import jinja2
import numpy as np
from PIL import Image

from .. import render
from .._validate import LimecraftError
from ..audit import DEPENDENCE, FLAG_TEXT, REMOVAL_MARGIN, AuditRow, Findings, RegionDescriptor
from ..audit.findings import RISK_RULE
from ..config import ExplainConfig
from ..config import fields as setting_fields
from ..edits.transplant import CAUSE_MARGIN
from ..result import Explanation
from .images import encode_png

__all__ = [
    "CSV_COLUMNS",
    "THUMB_SIDE",
    "audit_csv",
    "audit_html",
    "carrier_pictures",
    "data_url",
    "exemplar_pictures",
    "jpeg_picture",
    "thumbnails",
]

#: The report's and the app's small pictures: at most this many px on the long side.
THUMB_SIDE = 160

#: The colour of a finding's region outlined in its exemplars.
EXEMPLAR_COLOUR = (255, 200, 0)

#: The columns of audit.csv: every row field, then whether it is flagged and why. The strongest
#: regions are their ids there ("4;17;2"); their descriptors are in audit.json.
CSV_COLUMNS: tuple[str, ...] = (*(f.name for f in fields(AuditRow)), "flagged", "reason")


def _cell(v: Any) -> Any:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "" if not math.isfinite(v) else f"{v:.6g}"
    if isinstance(v, tuple):
        return ";".join(str(x.region) if isinstance(x, RegionDescriptor) else x for x in v)
    if v is None:
        return ""
    if isinstance(v, str) and v[:1] in ("=", "+", "-", "@"):
        return "'" + v  # a spreadsheet would run it as a formula
    return v


def audit_csv(rows: Sequence[AuditRow]) -> str:
    """The rows as CSV text, one image a line, columns :data:`CSV_COLUMNS`."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    for r in rows:
        values = [getattr(r, c) for c in CSV_COLUMNS[:-2]] + [r.flagged, r.reason]
        w.writerow([_cell(v) for v in values])
    return buf.getvalue()


def thumbnails(
    image: np.ndarray, ex: Explanation, expected: np.ndarray | None
) -> tuple[bytes, bytes]:
    """The image and its overlay (top 3 regions for and against, the expected region outlined
    in blue) as small JPEGs."""
    over = render.weight_overlay(
        image, ex.segments, ex.weights, k=3, ids=False, max_alpha=0.45, outline=1
    )
    if expected is not None:
        over = render.outline_masks(over, [expected], [(40, 110, 255)], 0.0)
    return jpeg_picture(image), jpeg_picture(over)


def data_url(data: bytes | None, mime: str) -> str | None:
    """``data`` as a ``data:`` URL (None for no data)."""
    if not data:
        return None
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def _num(v: Any, fmt: str = ".2f") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return format(v, fmt)


def jpeg_picture(image: np.ndarray, side: int = THUMB_SIDE) -> bytes:
    """An (H, W, 3) uint8 image as a JPEG at most ``side`` px on its long side (a small one
    enlarged, blocky, so that its regions show)."""
    im = Image.fromarray(image)
    scale = side / max(im.size)
    if scale < 1:
        im = im.resize(
            (max(1, round(im.width * scale)), max(1, round(im.height * scale))),
            Image.Resampling.LANCZOS,
        )
    elif scale > 1:  # small images are enlarged, blocky, so that their regions show
        im = im.resize(
            (max(1, round(im.width * scale)), max(1, round(im.height * scale))),
            Image.Resampling.NEAREST,
        )
    buf = io.BytesIO()
    im.convert("RGB").save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def exemplar_pictures(
    found: Findings, load: Callable[[str], tuple[np.ndarray, np.ndarray]]
) -> dict[int, list[tuple[str, str]]]:
    """{finding index: [(image key, JPEG data URL)]}: each finding's exemplars (up to 5, the
    medoid first) with its region outlined; one whose files cannot be read is left out.

    Parameters
    ----------
    found : Findings
    load : callable(key) -> ((H, W, 3) uint8 image, (H, W) int label map)
    """
    return {
        i: pics
        for i, f in enumerate(found.discovered)
        if (pics := _outlined([(k, dict(f.regions).get(k, -1)) for k in f.exemplars], load))
    }


def carrier_pictures(
    found: Findings, load: Callable[[str], tuple[np.ndarray, np.ndarray]], most: int = 5
) -> dict[int, list[tuple[str, str]]]:
    """{finding index: [(image key, JPEG data URL)]}: up to ``most`` of each finding's carriers
    beyond its own images (``Finding.carriers``), the most alike first, region outlined."""
    out = {}
    for i, f in enumerate(found.discovered):
        like = dict(f.membership)
        more = sorted(f.more_carriers, key=lambda c: -like.get(c[0], 0))
        if pics := _outlined(more[:most], load):
            out[i] = pics
    return out


def _outlined(
    pairs: Sequence[tuple[str, int]], load: Callable[[str], tuple[np.ndarray, np.ndarray]]
) -> list[tuple[str, str]]:
    """Each (image key, region id) as a JPEG data URL with the region outlined; one whose files
    cannot be read, or whose region is not in its label map, is left out."""
    out = []
    for key, region in pairs:
        try:
            image, segments = load(key)
        except LimecraftError:
            continue
        mask = segments == region
        if mask.shape != image.shape[:2] or not mask.any():
            continue
        pic = render.outline_masks(image, [mask], [EXEMPLAR_COLOUR], 0.2)
        out.append((key, data_url(jpeg_picture(pic), "image/jpeg") or ""))
    return out


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("limecraft_core.io", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    return env.get_template("audit.html.j2")


def audit_html(
    found: Findings,
    rows: Sequence[AuditRow],
    pictures: Mapping[str, tuple[bytes | None, bytes | None]],
    *,
    model: str,
    config: ExplainConfig,
    complete: bool = True,
    created: str = "",
    exemplars: Mapping[int, Sequence[tuple[str, str]]] | None = None,
    carriers: Mapping[int, Sequence[tuple[str, str]]] | None = None,
) -> str:
    """The audit as one self-contained HTML page.

    Parameters
    ----------
    found : Findings of the rows
    rows : the rows in the order the table starts in (flagged first: ``audit.sort_rows``)
    pictures : {row key: (thumbnail JPEG, overlay JPEG)}
    model : the model's name
    config : the settings the audit ran with (those that differ from the defaults are listed)
    complete : False for an interrupted audit (the page says so)
    created : when it was written (ISO 8601)
    exemplars : {finding index: [(image key, picture data URL with its region outlined)]}
    carriers : the same for a few of each finding's carriers beyond its own images
    """
    location = None
    if found.location is not None:
        hm = render.location_map(found.location, side=320)
        location = {
            "src": data_url(encode_png(hm.image), "image/png"),
            "bar": data_url(encode_png(hm.colorbar), "image/png"),
            "vmax": hm.vmax,
        }
    defaults = ExplainConfig().flat()
    changed = [
        {"name": s.name, "value": str(config.flat()[s.name]), "help": s.help}
        for s in setting_fields()
        if config.flat()[s.name] != defaults[s.name]
    ]
    table = []
    for r in rows:
        thumb, over = pictures.get(r.key, (None, None))
        table.append(
            {
                "row": r,
                "thumb": data_url(thumb, "image/jpeg"),
                "overlay": data_url(over, "image/jpeg"),
                "top": r.top_words if r.ok else "",
                "reason": r.reason,
            }
        )
    masked = found.with_masks > 0
    files = {r.key: r.file for r in rows}
    cards = [
        {
            "f": f,
            "exemplars": [(files.get(k, k), src) for k, src in (exemplars or {}).get(i, [])],
            "more": [files.get(k, k) for k, _ in f.more_carriers],
            "carried": [(files.get(k, k), src) for k, src in (carriers or {}).get(i, [])],
        }
        for i, f in enumerate(found.discovered)
    ]
    return _template().render(
        cards=cards,
        risk_rule=RISK_RULE,
        removal_margin=REMOVAL_MARGIN,
        cause_margin=CAUSE_MARGIN,
        found=found,
        table=table,
        location=location,
        model=model,
        changed=changed,
        complete=complete,
        created=created,
        masked=masked,
        dependence=DEPENDENCE,
        flag_text=FLAG_TEXT,
    )

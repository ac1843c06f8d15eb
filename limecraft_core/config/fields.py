"""One setting's description (``FieldSpec``: its help, kind, page, choices and range).

The kinds of value, and how each is checked, are ``kinds.KINDS``, one floor up: a kind's check
reads the setting it checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..limits import LIMITS

OUTPUT_SPACES = ("probability", "raw")


#: The audit's settings unless given (the rest are explain's defaults):
#:
#: - its regions are the app's, SLIC with about 40: lime's quickshift parameters (explain's
#:   default) give 10-20 large regions on a 128 px image, which mix a small marker with its
#:   background, so hiding the region no longer hides the marker;
#: - a hidden region is inpainted from the pixels kept around it (``inpaint``, as Inspect's
#:   remove edit does): a marker of flat colour split over two superpixels keeps its colour under
#:   the mean fill (the mean of a flat region is the region), so hiding it changes nothing. On 60
#:   fresh demo images (bench/bench_audit.py's set) the mean fill missed 3 of the 30 images whose
#:   prediction follows the tag; inpaint and blur missed none, with no false alarm.
AUDIT_DEFAULTS: dict[str, Any] = {"segmentation": "slic", "n_segments": 40, "fill": "inpaint"}


#: Images an audit explains at once by default: their chunks share the scorer (see
#: :func:`limecraft_core.audit.run_audit`).
IN_FLIGHT = 4


DEVICES = ("auto", "cpu", "cuda")


PRECISIONS = ("auto", "fp32", "bf16", "fp16")


@dataclass(frozen=True)
class FieldSpec:
    """One setting, as every front end sees it."""

    name: str  # the flat name: explain()'s keyword, the CLI flag (--name-with-dashes), JSON key
    group: str
    attr: str  # the attribute in its group
    kind: str  # a key of kinds.KINDS: how the value is checked, read from text and shown
    help: str
    default: Any
    optional: bool  # None is allowed (and means "the default behaviour")
    choices: tuple[str, ...] = ()
    page: str = "explain"  # where the app shows it: explain, trust, craft

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def limit(self):
        return LIMITS.get(self.name)

"""LIMEcraft's engine: LIME over regions that mean something to a person.

Pure, typed functions on arrays and tensors; no UI. File reading lives in
``limecraft_core.io`` and the command line in ``python -m limecraft``.

The public names below are imported on first use (PEP 562), so that ``import limecraft_core``
and the settings schema (``limecraft_core.config``) need neither torch nor scikit-image: the
command line's ``--help`` answers at once. ``from limecraft_core import explain`` and
``limecraft_core.explain(...)`` work as they always did.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"

#: Each public name, by the submodule that defines it.
_PUBLIC: dict[str, tuple[str, ...]] = {
    "._validate": (
        "MAX_PIXELS",
        "MIN_SIDE",
        "Cancelled",
        "LimecraftError",
        "ModelError",
    ),
    ".limits": (
        "SEGMENTERS",
        "SCHEMES",
    ),
    ".classifier": (
        "Classifier",
        "resolve_device",
    ),
    ".config": ("ExplainConfig",),
    ".edits": (
        "EDIT_FILLS",
        "EDIT_KINDS",
        "Edit",
        "EditResult",
        "apply_edit",
        "apply_edits",
        "transform_mask",
        "Watermark",
        "add_watermark",
        "watermark_mask",
        "Insertion",
        "Transplant",
        "insertion_test",
        "transplant",
    ),
    ".explain": (
        "OUTPUT_SPACES",
        "as_scorer",
        "explain",
    ),
    ".fill_table": (
        "FILLS",
        "Fill",
    ),
    ".perturb": (
        "MaskCache",
        "MaskSample",
        "compose_batch",
        "inpaint",
        "make_fill",
        "perturbed_images",
        "sample_masks",
    ),
    ".render": (
        "Heatmap",
        "TintedRegions",
        "boundaries",
        "colorbar",
        "delta_map",
        "heatmap",
        "overlay_legend",
        "region_map",
        "stack_vertically",
        "tinted_regions",
        "top_regions",
        "weight_overlay",
    ),
    ".result": (
        "Explanation",
        "RunInfo",
    ),
    ".scorer": ("Scorer",),
    ".regions": (
        "Regions",
        "compose_regions",
        "masks_from_label_image",
        "merge_by_keys",
        "merge_regions",
        "regions_from_labels",
        "relabel",
        "segment",
        "segment_regions",
        "split_region",
    ),
    "._stages": (
        "Partial",
        "prepare_regions",
    ),
    ".surrogate": (
        "SurrogateFit",
        "cosine_distance",
        "exponential_kernel",
        "fit_ridge",
        "make_kernel",
        "uniform_kernel",
    ),
    ".trust": ("TrustResults",),
}
_WHERE = {name: module for module, names in _PUBLIC.items() for name in names}

__all__ = [
    "EDIT_FILLS",
    "EDIT_KINDS",
    "FILLS",
    "MAX_PIXELS",
    "MIN_SIDE",
    "OUTPUT_SPACES",
    "SCHEMES",
    "SEGMENTERS",
    "Cancelled",
    "Classifier",
    "Edit",
    "EditResult",
    "ExplainConfig",
    "Explanation",
    "Heatmap",
    "Insertion",
    "LimecraftError",
    "MaskCache",
    "MaskSample",
    "ModelError",
    "Partial",
    "Regions",
    "RunInfo",
    "Scorer",
    "SurrogateFit",
    "TintedRegions",
    "Transplant",
    "TrustResults",
    "Watermark",
    "__version__",
    "add_watermark",
    "apply_edit",
    "apply_edits",
    "as_scorer",
    "boundaries",
    "colorbar",
    "compose_batch",
    "compose_regions",
    "cosine_distance",
    "delta_map",
    "explain",
    "exponential_kernel",
    "fit_ridge",
    "heatmap",
    "inpaint",
    "insertion_test",
    "make_fill",
    "make_kernel",
    "masks_from_label_image",
    "merge_by_keys",
    "merge_regions",
    "overlay_legend",
    "perturbed_images",
    "prepare_regions",
    "region_map",
    "regions_from_labels",
    "relabel",
    "resolve_device",
    "sample_masks",
    "segment",
    "segment_regions",
    "split_region",
    "stack_vertically",
    "tinted_regions",
    "top_regions",
    "transform_mask",
    "transplant",
    "uniform_kernel",
    "watermark_mask",
    "weight_overlay",
]


def __getattr__(name: str) -> Any:
    """A public name (imported from its submodule on first use), or a submodule by its name
    (``limecraft_core.render``)."""
    module = _WHERE.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """The package's own module type, for one name. Importing the submodule
    ``limecraft_core.explain`` binds it on the package by its name; the package's ``explain``
    stays that submodule's function, as ``from .explain import explain`` kept it before."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "explain" and isinstance(value, types.ModuleType):
            value = value.explain
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

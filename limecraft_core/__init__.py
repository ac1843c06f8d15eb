"""LIMEcraft's engine: LIME over regions that mean something to a person.

Pure, typed functions on arrays and tensors; no UI. File reading lives in
``limecraft_core.io`` and the command line in ``python -m limecraft``.
"""

__version__ = "0.1.0"

from ._validate import MAX_PIXELS, MIN_SIDE, Cancelled, LimecraftError
from .classifier import Classifier, ModelError, resolve_device
from .config import ExplainConfig
from .edits import (
    EDIT_FILLS,
    EDIT_KINDS,
    Edit,
    EditResult,
    apply_edit,
    apply_edits,
    transform_mask,
)
from .explain import OUTPUT_SPACES, as_scorer, explain
from .perturbation import (
    FILLS,
    SCHEMES,
    MaskCache,
    MaskSample,
    compose_batch,
    inpaint,
    make_fill,
    perturbed_images,
    sample_masks,
)
from .render import (
    Heatmap,
    TintedRegions,
    boundaries,
    colorbar,
    delta_map,
    heatmap,
    overlay_legend,
    region_map,
    stack_vertically,
    tinted_regions,
    top_regions,
    weight_overlay,
)
from .result import Explanation, RunInfo
from .scorer import Scorer
from .segmentation import (
    METHODS,
    Regions,
    compose_regions,
    masks_from_label_image,
    merge_by_keys,
    merge_regions,
    regions_from_labels,
    relabel,
    segment,
    segment_regions,
    split_region,
)
from .stages import Partial
from .surrogate import (
    SurrogateFit,
    cosine_distance,
    exponential_kernel,
    fit_ridge,
    make_kernel,
    uniform_kernel,
)
from .trust import TrustResults

__all__ = [
    "EDIT_FILLS",
    "EDIT_KINDS",
    "FILLS",
    "MAX_PIXELS",
    "METHODS",
    "MIN_SIDE",
    "OUTPUT_SPACES",
    "SCHEMES",
    "Cancelled",
    "Classifier",
    "Edit",
    "EditResult",
    "ExplainConfig",
    "Explanation",
    "Heatmap",
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
    "TrustResults",
    "__version__",
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
    "make_fill",
    "make_kernel",
    "masks_from_label_image",
    "merge_by_keys",
    "merge_regions",
    "overlay_legend",
    "perturbed_images",
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
    "uniform_kernel",
    "weight_overlay",
]

"""LIMEcraft's public face: each name that ``limecraft_core`` offers, and where it is defined.

The one list of the public names. IDEs and type checkers read it, and so does
``lazy_loader.attach_stub`` in ``__init__.py``, which imports each name on its first use.
``name as name`` is how a stub re-exports a name.
"""

from . import audit as audit
from . import codecs as codecs
from . import config as config
from . import edits as edits
from . import io as io
from . import perturb as perturb
from . import regions as regions
from . import render as render
from . import trust as trust
from ._stages import Partial as Partial
from ._stages import prepare_regions as prepare_regions
from ._validate import MAX_PIXELS as MAX_PIXELS
from ._validate import MIN_SIDE as MIN_SIDE
from ._validate import Cancelled as Cancelled
from ._validate import LimecraftError as LimecraftError
from ._validate import ModelError as ModelError
from .agreement import Agreement as Agreement
from .classifier import Classifier as Classifier
from .classifier import resolve_device as resolve_device
from .compare import Comparison as Comparison
from .compare import compare_explainers as compare_explainers
from .config import ExplainConfig as ExplainConfig
from .edits import EDIT_FILLS as EDIT_FILLS
from .edits import EDIT_KINDS as EDIT_KINDS
from .edits import Edit as Edit
from .edits import EditResult as EditResult
from .edits import Insertion as Insertion
from .edits import Transplant as Transplant
from .edits import Watermark as Watermark
from .edits import add_watermark as add_watermark
from .edits import apply_edit as apply_edit
from .edits import apply_edits as apply_edits
from .edits import insertion_test as insertion_test
from .edits import transform_mask as transform_mask
from .edits import transplant as transplant
from .edits import watermark_mask as watermark_mask
from .explain import OUTPUT_SPACES as OUTPUT_SPACES
from .explain import as_scorer as as_scorer
from .explain import explain as explain
from .explainer_table import EXPLAINERS as EXPLAINERS
from .explainer_table import Attribution as Attribution
from .explainer_table import Explainer as Explainer
from .explainer_table import Scored as Scored
from .fill_table import FILLS as FILLS
from .fill_table import Fill as Fill
from .limits import SCHEMES as SCHEMES
from .limits import SEGMENTERS as SEGMENTERS
from .perturb import MaskCache as MaskCache
from .perturb import MaskSample as MaskSample
from .perturb import compose_batch as compose_batch
from .perturb import inpaint as inpaint
from .perturb import make_fill as make_fill
from .perturb import perturbed_images as perturbed_images
from .perturb import sample_masks as sample_masks
from .regions import Regions as Regions
from .regions import compose_regions as compose_regions
from .regions import masks_from_label_image as masks_from_label_image
from .regions import merge_by_keys as merge_by_keys
from .regions import merge_regions as merge_regions
from .regions import regions_from_labels as regions_from_labels
from .regions import relabel as relabel
from .regions import segment as segment
from .regions import segment_regions as segment_regions
from .regions import split_region as split_region
from .render import Heatmap as Heatmap
from .render import TintedRegions as TintedRegions
from .render import boundaries as boundaries
from .render import colorbar as colorbar
from .render import delta_map as delta_map
from .render import heatmap as heatmap
from .render import overlay_legend as overlay_legend
from .render import region_map as region_map
from .render import stack_vertically as stack_vertically
from .render import tinted_regions as tinted_regions
from .render import top_regions as top_regions
from .render import weight_overlay as weight_overlay
from .result import Explanation as Explanation
from .result import RunInfo as RunInfo
from .scorer import Scorer as Scorer
from .shapley import SHAPLEY_MAX_K as SHAPLEY_MAX_K
from .shapley import shapley_interactions as shapley_interactions
from .surrogate import SurrogateFit as SurrogateFit
from .surrogate import cosine_distance as cosine_distance
from .surrogate import exponential_kernel as exponential_kernel
from .surrogate import fit_ridge as fit_ridge
from .surrogate import make_kernel as make_kernel
from .surrogate import uniform_kernel as uniform_kernel
from .trust import TrustResults as TrustResults

__version__: str

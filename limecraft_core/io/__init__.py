"""Files at the engine's edge: the only part of the engine that reads or writes them.

- :mod:`.images`: images, masks, label maps and class-name files in, PNG out, every failure a
  ``LimecraftError`` that says what was wrong (its names are this package's public face:
  ``from limecraft_core.io import read_image``);
- :mod:`.report`: the self-contained HTML report of one explanation, and its regions' CSV;
- :mod:`.audit_folder`: a dataset audit's folder, as the command line and the app both write
  and read it (``AuditFolder``, ``load_audit``, ``list_images``, ``unpack_zip``);
- :mod:`.audit_report`: the audit's HTML page and CSV.

The bytes and text these files hold are decoded and checked below them, in
:mod:`limecraft_core.codecs` (``.npz`` arrays, the JSON schemas).

The HTML templates are in ``templates/``. Only :mod:`.images` is imported with the package: the
reports and the audit folder import the engine's heavier parts, so they load when named.
"""

from __future__ import annotations

from .images import (
    IMAGE_BACKGROUND,
    decode_image,
    decode_mask,
    encode_png,
    expected_area,
    read_image,
    read_label_map,
    read_labels,
    read_mask,
)

__all__ = [
    "IMAGE_BACKGROUND",
    "decode_image",
    "decode_mask",
    "encode_png",
    "expected_area",
    "read_image",
    "read_label_map",
    "read_labels",
    "read_mask",
]

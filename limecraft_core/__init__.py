"""LIMEcraft's engine: LIME over regions that mean something to a person.

Pure, typed functions on arrays and tensors; no UI. File reading lives in
``limecraft_core.io`` and the command line in ``python -m limecraft``.

The public names are listed once, in ``__init__.pyi``, which IDEs and type checkers read.
``lazy_loader`` reads the same file and imports each name on its first use, so that
``import limecraft_core`` and the settings schema (``limecraft_core.config``) need neither torch
nor scikit-image: the command line's ``--help`` answers at once. ``from limecraft_core import
explain`` and ``limecraft_core.explain(...)`` give the function, even once the submodule
``limecraft_core.explain`` is imported.
"""

import lazy_loader as lazy

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)

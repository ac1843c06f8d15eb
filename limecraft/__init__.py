"""LIMEcraft's command line, ``python -m limecraft``: explain an image, audit a model over a
folder of images, list models, make demo data (:mod:`limecraft.cli`, whose ``main(argv)`` runs
it in-process).

It sits at the edge, beside the app: it may import the engine (``limecraft_core``), ``models``
and ``serving``; none of them imports it. Importing this package imports nothing else, so that
``python -m limecraft`` sets ``OMP_WAIT_POLICY`` before torch loads.
"""

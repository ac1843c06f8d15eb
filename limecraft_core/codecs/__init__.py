"""Bytes and text decoded and checked: the ground that the result, the audit and the edges share.

- :mod:`.npz`: arrays as ``.npz`` bytes and back, the one decoder for arrays that someone else
  wrote (an explanation's label map, the app's saved masks, Ray Serve's wire): headers first,
  no pickles;
- :mod:`.schema`: the one validation layer for untrusted JSON (analysis files, explanation
  files, audit rows, ``audit.json``): one parse and pydantic schemas whose checks keep each
  file's own messages.

Neither touches a file: each takes the bytes or the text that its caller read. Nothing is
imported with the package, so a reader of arrays does not load pydantic.
"""

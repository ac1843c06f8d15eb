"""The saved-analysis store: each analysis as one file, bounded in count, size and age.

An analysis is saved under an unguessable id (``secrets.token_urlsafe(24)``: 192 random bits)
with the account that made it; :meth:`Store.load` gives it back only to that account. The store
evicts the oldest analyses beyond ``max_analyses`` and forgets those not saved for ``max_age_s``.
Writes are atomic (a temporary file, then ``os.replace``). While an Explain runs, a small marker
file beside the analysis says so (:meth:`Store.mark_running`), so that the page reloaded in the
middle of it can say the run was interrupted. Settings come from the environment:

=================================  ============================================  ==============
``LIMECRAFT_STORE_DIR``            folder of the saved analyses                  a private temp
                                                                                  (removed at exit)
``LIMECRAFT_STORE_MAX_ANALYSES``   analyses kept, all accounts together          500
``LIMECRAFT_STORE_MAX_AGE_H``      hours an analysis is kept after its last save 168 (7 days)
``LIMECRAFT_STORE_MAX_MB``         largest saved analysis (a bigger one is       100
                                   kept in the session only)
=================================  ============================================  ==============
"""

from __future__ import annotations

import atexit
import json
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Store", "StoreConfig", "new_id"]

ID_BYTES = 24  # 192 random bits; at least 128 are needed to be unguessable
_ID = re.compile(r"^[A-Za-z0-9_-]{22,64}$")


def new_id() -> str:
    """A fresh analysis id, URL-safe, from the OS's secure random source."""
    return secrets.token_urlsafe(ID_BYTES)


def valid_id(aid: object) -> bool:
    """Whether ``aid`` could be an id (and is safe as a file name)."""
    return isinstance(aid, str) and bool(_ID.match(aid))


_DEFAULT_DIR: list[str] = []
_DEFAULT_LOCK = threading.Lock()


def _default_dir() -> str:
    """A private folder made for this process (an unpredictable name under the system's temp
    folder, mode 0700), removed with what it holds when the process exits: its analyses (the
    users' images among them) are not kept across restarts, so they are not left behind either.
    Set ``LIMECRAFT_STORE_DIR`` to keep analyses across restarts (that folder is never removed)."""
    with _DEFAULT_LOCK:
        if not _DEFAULT_DIR:
            folder = tempfile.mkdtemp(prefix="limecraft-analyses-")
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            _DEFAULT_DIR.append(folder)
        return _DEFAULT_DIR[0]


def _positive(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        v = float(raw)
    except ValueError:
        v = -1
    if not v > 0:
        from limecraft_core import LimecraftError

        raise LimecraftError(f"{name} must be a positive number, not {raw!r}")
    return v


@dataclass(frozen=True)
class StoreConfig:
    """The store's limits (see the module docstring for the environment variables)."""

    folder: str
    max_analyses: int = 500
    max_age_s: float = 168 * 3600.0
    max_bytes: int = 100 * 2**20

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StoreConfig:
        env = os.environ if environ is None else environ
        return cls(
            folder=env.get("LIMECRAFT_STORE_DIR", "").strip() or _default_dir(),
            max_analyses=int(_positive(env, "LIMECRAFT_STORE_MAX_ANALYSES", 500)),
            max_age_s=_positive(env, "LIMECRAFT_STORE_MAX_AGE_H", 168) * 3600.0,
            max_bytes=int(_positive(env, "LIMECRAFT_STORE_MAX_MB", 100) * 2**20),
        )


class Store:
    """Saved analyses, one JSON file each: ``{"owner", "saved_at", "recent", "analysis"}``.

    ``recent`` is the session's recent list as it was when the analysis was last saved, so
    that a reload of the analysis' address (``?a=``) brings the list back on any page.

    Thread-safe within one process; several processes may share the folder (writes are atomic,
    and a file that vanishes under a reader is simply not found).
    """

    def __init__(self, config: StoreConfig, clock=time.time) -> None:
        self.config, self.clock = config, clock
        self.folder = Path(config.folder)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st_ = self.folder.stat()
        if hasattr(os, "getuid") and (st_.st_uid != os.getuid() or st_.st_mode & 0o022):
            from limecraft_core import LimecraftError

            raise LimecraftError(
                f"LIMECRAFT_STORE_DIR={config.folder!r} must be a folder of this user that "
                "others cannot write to"
            )
        self._lock = threading.Lock()

    def _path(self, aid: str) -> Path:
        if not valid_id(aid):
            raise ValueError("not an analysis id")
        return self.folder / f"{aid}.json"

    def save(self, aid: str, owner: str, analysis: str, recent: Sequence[Mapping] = ()) -> bool:
        """Save (or replace) analysis ``aid`` for ``owner``, with the recent list beside it
        (small JSON-able entries); False if it is over ``max_bytes`` or ``aid`` already
        belongs to another account."""
        if len(analysis) > self.config.max_bytes:
            return False
        path = self._path(aid)
        head = self._owner(path)
        if head is not None and head != owner:
            return False
        now = self.clock()
        head_ = {"owner": owner, "saved_at": now, "recent": list(recent)}
        body = json.dumps(head_, separators=(",", ":"))
        text = body[:-1] + ',"analysis":' + analysis + "}"
        with self._lock:
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
                os.utime(tmp, (now, now))  # the age counts from the last save
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            self._evict()
        return True

    def _owner(self, path: Path) -> str | None:
        """The owner written at the start of a saved file (read without parsing the rest)."""
        try:
            with open(path, encoding="utf-8") as f:
                head = f.read(4096)
        except OSError:
            return None
        m = re.match(r'\{"owner":("(?:[^"\\]|\\.)*")', head)
        return json.loads(m.group(1)) if m else None

    def load(self, aid: str, owner: str) -> dict | None:
        """The analysis saved as ``aid`` (its JSON, parsed), or None: unknown, expired, or
        another account's."""
        doc = self._doc(aid, owner)
        return None if doc is None else doc.get("analysis")

    def load_with_recent(self, aid: str, owner: str) -> tuple[dict, list] | None:
        """The analysis saved as ``aid`` and the recent list saved with it (a list of what
        :meth:`save` was given; empty for a file saved without one), or None as for
        :meth:`load`."""
        doc = self._doc(aid, owner)
        if doc is None or doc.get("analysis") is None:
            return None
        recent = doc.get("recent")
        return doc["analysis"], recent if isinstance(recent, list) else []

    def _doc(self, aid: str, owner: str) -> dict | None:
        if not valid_id(aid):
            return None
        path = self._path(aid)
        try:
            if self.clock() - path.stat().st_mtime > self.config.max_age_s:
                path.unlink(missing_ok=True)
                return None
        except OSError:
            return None
        if self._owner(path) != owner:
            return None
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("owner") != owner:
            return None
        return doc

    def exists_for_other(self, aid: str, owner: str) -> bool:
        """Whether ``aid`` is saved but belongs to another account (for a plain message)."""
        if not valid_id(aid):
            return False
        got = self._owner(self._path(aid))
        return got is not None and got != owner

    def delete(self, aid: str) -> None:
        if valid_id(aid):
            self._path(aid).unlink(missing_ok=True)
            self._path(aid).with_suffix(".running").unlink(missing_ok=True)

    def mark_running(self, aid: str, owner: str, what: str | None) -> None:
        """Note that a run (``what``, e.g. "Explaining") of analysis ``aid`` has started, or,
        with None, that it is over. A page reloaded while the marker is there finds it with
        :meth:`take_running`."""
        if not valid_id(aid):
            return
        path = self._path(aid).with_suffix(".running")
        if what is None:
            path.unlink(missing_ok=True)
            return
        with self._lock:
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.folder)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"owner": owner, "what": what}, f)
            os.replace(tmp, path)

    def take_running(self, aid: str, owner: str) -> str | None:
        """The run that was under way when analysis ``aid`` was last seen (what
        :meth:`mark_running` noted), or None; the marker is removed."""
        if not valid_id(aid):
            return None
        path = self._path(aid).with_suffix(".running")
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("owner") != owner:
            return None  # another account's: left for its owner
        path.unlink(missing_ok=True)
        what = doc.get("what")
        return what if isinstance(what, str) else None

    def ids(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.json") if valid_id(p.stem))

    def _evict(self) -> None:
        """Forget expired analyses, then the oldest beyond ``max_analyses``."""
        now = self.clock()
        entries = []
        for p in self.folder.glob("*.json"):
            try:
                mtime = p.stat().st_mtime
            except OSError:
                continue
            if now - mtime > self.config.max_age_s:
                p.unlink(missing_ok=True)
            else:
                entries.append((mtime, p))
        entries.sort()
        for _, p in entries[: max(0, len(entries) - self.config.max_analyses)]:
            p.unlink(missing_ok=True)
        for p in self.folder.glob("*.running"):  # the marker of an analysis that is gone
            if not p.with_suffix(".json").exists():
                p.unlink(missing_ok=True)

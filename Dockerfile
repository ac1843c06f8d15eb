# LIMEcraft's web app in a container, after Streamlit's own deployment template.
# See docs/deployment.md:
#   docker build -t limecraft .                                          # CPU-only torch (default)
#   docker build -t limecraft:cuda --build-arg TORCH_FLAVOR=cuda .        # CUDA torch
#   docker build -t limecraft --build-arg LIMECRAFT_WEIGHTS="resnet50 resnet18" .  # offline zoo
#   docker run -p 8501:8501 limecraft
FROM python:3.12-slim

# cpu: torch and torchvision from PyTorch's CPU-only index (a much smaller image);
# cuda: PyPI's builds, which bundle CUDA (they also run on a CPU).
ARG TORCH_FLAVOR=cpu
# A matching pair inside requirements.txt's ranges (torch>=2.4,<2.15, torchvision>=0.19,<0.30).
ARG TORCH_VERSION=2.14.1
ARG TORCHVISION_VERSION=0.29.1
# Zoo weights to bake in: models/zoo.py names, comma or space separated, or "all" (none: "").
ARG LIMECRAFT_WEIGHTS=""

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TORCH_HOME=/opt/torch \
    OMP_WAIT_POLICY=PASSIVE \
    STREAMLIT_SERVER_HEADLESS=true \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false \
    STREAMLIT_CLIENT_TOOLBAR_MODE=viewer

WORKDIR /app

# The libraries opencv-python (the text detector's, rapidocr-onnxruntime) loads and a slim image
# lacks: libGL and GLib. Pinned to the base image's Debian 13 (trixie) versions. Debian keeps only
# a suite's newest version, so a security update or a point release removes a pinned one and the
# build stops with "Version ... was not found": `python docker/check_apt_pins.py` says which pin
# is gone and the --build-arg to pass (e.g. --build-arg GLIB_VERSION=...); update the default.
ARG LIBGL_VERSION=1.7.0-1+b2
ARG GLIB_VERSION=2.84.4-3~deb13u5
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        "libgl1=${LIBGL_VERSION}" "libglib2.0-0t64=${GLIB_VERSION}" \
    && rm -rf /var/lib/apt/lists/*

# The non-root user the app runs as (numeric below, so that runAsNonRoot-style checks can see it).
RUN groupadd --gid 1000 limecraft \
    && useradd --create-home --uid 1000 --gid 1000 limecraft \
    && mkdir -p "${TORCH_HOME}/hub/checkpoints" \
    && chown -R limecraft:limecraft "${TORCH_HOME}"

# torch first, from the chosen index, so that requirements.txt finds it already satisfied.
RUN case "${TORCH_FLAVOR}" in \
        cpu) index=https://download.pytorch.org/whl/cpu ;; \
        cuda) index=https://pypi.org/simple ;; \
        *) echo "TORCH_FLAVOR must be cpu or cuda, not ${TORCH_FLAVOR}" >&2; exit 1 ;; \
    esac \
    && pip install --no-cache-dir --index-url "${index}" \
        "torch==${TORCH_VERSION}" "torchvision==${TORCHVISION_VERSION}"

# Baked weights sit in their own layer, which changes only with torch or the list.
COPY docker/bake_weights.py /usr/local/lib/limecraft/bake_weights.py
USER 1000:1000
RUN python /usr/local/lib/limecraft/bake_weights.py "${LIMECRAFT_WEIGHTS}"
USER 0

# The README's install command for running the app: requirements.txt, the runtime only (the test
# tools and reference implementations are in requirements-dev.txt, which the image never installs).
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
# The text detector loads here, or the build stops (opencv-python without libGL fails to import).
RUN python -c "import cv2, rapidocr_onnxruntime"

USER 1000:1000
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; p = os.environ.get('STREAMLIT_SERVER_PORT', '8501'); b = os.environ.get('STREAMLIT_SERVER_BASE_URL_PATH', '').strip('/'); r = u.urlopen('http://127.0.0.1:' + p + '/' + (b + '/' if b else '') + '_stcore/health', timeout=4); raise SystemExit(r.read() != b'ok')"]
ENTRYPOINT ["streamlit", "run", "app.py", "--server.address=0.0.0.0"]

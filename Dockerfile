# phrasal translation service on a CUDA GPU (falls back to the CPU when the container sees none).
#
#   docker build -t phrasal .
#   docker run --gpus all -p 127.0.0.1:8000:8000 phrasal
#
# The install steps are the Makefile's: torch first, pinned (here the CUDA build, from the
# PyTorch index), then the project with its extras (here `gpu`: onnxruntime-gpu). CI runs the
# Makefile's steps; tests/service/test_deploy.py keeps the two in step.
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04
FROM ${CUDA_IMAGE}

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# gcc and libc6-dev: the CPU decoding kernels (model/cpu_kernels) are compiled on first use for the
# CPU the container runs on; without a compiler the CPU fallback decodes eagerly (docs/operations.md).
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv \
    && python -m pip install --upgrade pip

# Step 1 (Makefile: `pip install torch==2.13.0`): torch, pinned, the CUDA build. A layer of its
# own, so that code changes do not re-download it.
RUN python -m pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"

# Step 2 (Makefile: `pip install -e '.[onnx,ct2,align,dev]'`): the project and the serving extra.
WORKDIR /app
COPY pyproject.toml README.md ./
COPY model ./model
COPY training ./training
COPY export ./export
COPY service ./service
RUN python -m pip install ".[gpu]"

# The bundled model (a few MB); mount others and point PHRASAL_MODEL_DIRS at them.
COPY models ./models
COPY memories ./memories

# What the server keeps, stored glossaries and documents being translated (SQLite), lives in
# /var/lib/phrasal, the one directory it writes: mount a volume there to keep them across restarts.
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin phrasal \
    && mkdir -p /var/lib/phrasal && chown phrasal /var/lib/phrasal
USER phrasal

ENV PHRASAL_MODEL_DIRS='["/app/models/en-de-align2", "/app/models/en-de-software", "/app/models/de-en-align", "/app/models/de-en-software", "/app/models/en-fr"]' \
    PHRASAL_MEMORIES='["/app/memories/cldr-names.tmx", "/app/memories/debian-terms.tmx"]' \
    PHRASAL_GLOSSARY_DB=/var/lib/phrasal/glossaries.sqlite3 \
    PHRASAL_DOCUMENT_DB=/var/lib/phrasal/documents.sqlite3 \
    PHRASAL_DEVICE=auto
EXPOSE 8000

# Ready = loaded, warm, not draining. A container that failed to load stays up (the reason is
# in its log and in this endpoint's body) and is reported unhealthy.
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/health/ready', timeout=2).status != 200)"]

# SIGTERM drains: /health/ready turns 503, requests in flight get PHRASAL_DRAIN_TIMEOUT_S
# (default 30 s) to finish, then the process exits 0. Give `docker stop -t` / compose
# stop_grace_period / Kubernetes terminationGracePeriodSeconds more than that.
STOPSIGNAL SIGTERM
CMD ["python", "-m", "service", "--host", "0.0.0.0", "--port", "8000"]

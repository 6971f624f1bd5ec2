# Attention Explorer, hosted (e.g. for a workshop). The same commands as the README:
#   sh scripts/setup.sh && streamlit run explorer/app.py
#
#   docker build -t attention-explorer:0.1.0 .
#   docker build --build-arg FETCH="minilm smollm2 gemma3" -t attention-explorer:0.1.0 .   # + the real models
#   docker run --rm -p 8501:8501 --read-only --tmpfs /tmp --tmpfs /home/explorer:uid=10001,gid=10001 \
#       --tmpfs /state:uid=10001,gid=10001,mode=0700 \
#       --cap-drop ALL --security-opt no-new-privileges -e ATTENTION_EXPLORER_ACCESS_CODE=... \
#       attention-explorer:0.1.0                                                            # http://localhost:8501
# The tag is the version in pyproject.toml (tests/test_deploy.py checks the deployments use it).
# Written, not run: the machine this was written on has no Docker engine.
FROM python:3.11-slim-bookworm

LABEL org.opencontainers.image.title="Attention Explorer" \
      org.opencontainers.image.version="0.1.0"

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ATTENTION_EXPLORER_HOSTED=1 \
    STREAMLIT_RUNNER_FAST_RERUNS=false \
    ATTENTION_EXPLORER_CACHE=/models

# glibc malloc for a threaded server (one thread per session): two arenas, big blocks kept for
# reuse. Measured by `python -m bench`: the server's memory stays flat over 1000 reruns (+4.6%
# instead of +22%) and keeping a run's hook tensors costs nothing (run_with_cache/run 0.98
# instead of 1.18 on SmolLM2). The app applies the same settings itself when it starts
# (explorer/memory.py); setting them here also covers the imports before that.
ENV MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=1073741824 \
    MALLOC_TRIM_THRESHOLD_=1073741824

WORKDIR /app
COPY . .

# torch's CPU wheel first (requirements.txt pins torch==2.13.0; the plain PyPI wheel would pull CUDA)
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
 && sh scripts/setup.sh \
 && rm -rf /var/lib/apt/lists/*

# The weights, and the float32 conversion a GGUF gets on its first load, are written here while
# building: at run time the cache folder is only read (the root filesystem can be read-only).
ARG FETCH=""
RUN mkdir -p /models && if [ -n "$FETCH" ]; then \
      python -m model.fetch $FETCH \
      && python -c "import sys, model; [model.load(n) for n in sys.argv[1:]]" $FETCH; \
    fi

# the app's own modules compiled now: the server writes nothing under /app
RUN python -m compileall -q /app

# the server runs as an unprivileged user (numeric, so Kubernetes can check runAsNonRoot); it may
# write only /tmp (chromium's profile for figure export, torch's scratch folder), $HOME (chromium's
# crash-report and dconf folders) and /state (the wrong-code counts the replicas share,
# explorer/store.py): the deployments mount those and keep the rest read-only
RUN groupadd --gid 10001 explorer && useradd --create-home --uid 10001 --gid 10001 explorer \
 && mkdir -p /state && chown 10001:10001 /state && chmod 0700 /state
ENV HOME=/home/explorer \
    ATTENTION_EXPLORER_STATE_DIR=/state \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001

EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"
CMD ["streamlit", "run", "explorer/app.py", "--server.address=0.0.0.0", "--server.port=8501"]

# Written by hpcjax 0.2.0 (hpcjax container recipe). Build: docker build -f THIS_FILE .
FROM nvcr.io/nvidia/jax:24.04-py3

COPY . /opt/hpcjax-src

RUN python3 -m pip install --no-cache-dir /opt/hpcjax-src

ENV PYTHONUNBUFFERED=1

LABEL org.hpcjax.base=nvcr.io/nvidia/jax:24.04-py3 \
    org.hpcjax.jax=none \
    org.hpcjax.version=0.2.0

RUN hpcjax env && \
    hpcjax check devices

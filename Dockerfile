# Tributary's image: the `tributary` CLI runs brokers, controllers and tools.
#
#   docker build -t tributary .                       # brokers and controllers (stage runtime)
#   docker build -t tributary-analytics --target analytics .   # + Java and PySpark
#
# docker-compose.yml builds both. The processes run as the unprivileged user `tributary`;
# broker data lives under /var/lib/tributary (a volume per broker in the compose file;
# docker-compose.secure.yml keeps the CA and passwords in /var/lib/tributary/security).

FROM python:3.11-slim AS runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system --gid 1000 tributary \
 && useradd --system --uid 1000 --gid tributary --home-dir /var/lib/tributary \
        --shell /usr/sbin/nologin tributary \
 && mkdir -p /var/lib/tributary/data /var/lib/tributary/controller /var/lib/tributary/security \
 && chown -R tributary:tributary /var/lib/tributary

WORKDIR /opt/tributary
# The project metadata first, then the packages setuptools installs (see pyproject.toml:
# broker*, controller*, client*, server_common*, tools*, spark*). Tests, scripts and the .venv stay out.
COPY pyproject.toml README.md ./
COPY broker ./broker
COPY client ./client
COPY controller ./controller
COPY server_common ./server_common
COPY tools ./tools
COPY spark ./spark
RUN pip install . \
 && tributary --version

USER tributary
WORKDIR /var/lib/tributary
# 9092: client listener, 19092: inter-broker listener, 9090: controller, 9191: metrics.
EXPOSE 9092 19092 9090 9191
ENTRYPOINT ["tributary"]
CMD ["--help"]


# The analytics job: PySpark needs a Java runtime (Debian bookworm's is 17).
FROM runtime AS analytics
USER root
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        default-jre-headless procps \
 && rm -rf /var/lib/apt/lists/* \
 && pip install "/opt/tributary[spark]"
USER tributary


# The default target (`docker build .`) is the small runtime image.
FROM runtime

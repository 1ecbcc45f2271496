# syntax=docker/dockerfile:1
#
# The omnistage image: `docker build -t omnistage .` (see deploy/README.md).
#
# The build stage compiles omnistage with cgo against the Debian packages
# scripts/install-deps.sh installs for a build; the runtime stage carries only
# the shared libraries the binary links against (apt adds what those need),
# PocketSphinx's acoustic model, ffmpeg (which the aac response format runs;
# the largest part of the image, so drop it if you serve no aac) and CA
# certificates, and runs as a numeric non-root user.
# deploy/dockerfile_test.go checks both package lists against install-deps.sh,
# against what `ldd` reports for a freshly built binary and against the
# commands the server runs.

FROM golang:1.26-bookworm AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential pkg-config \
      flite1-dev libpocketsphinx-dev libsphinxbase-dev \
      libmp3lame-dev libopusenc-dev libflac-dev \
      libopencv-imgproc-dev libpolyclipping-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/omnistage ./cmd/omnistage

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates \
      libflite1 libpocketsphinx3 libsphinxbase3 \
      libasound2 libblas3 liblapack3 libgfortran5 libquadmath0 \
      libmp3lame0 libopusenc0 libopus0 libflac12 libogg0 \
      libopencv-imgproc406 libopencv-core406 libpolyclipping22 \
      pocketsphinx-en-us \
      ffmpeg \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/omnistage /usr/local/bin/omnistage
# 65532 is the conventional "nonroot" id; nothing in the image needs a name
# for it, and Kubernetes' runAsNonRoot can verify a numeric user.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["omnistage"]
CMD ["serve", "--addr", "0.0.0.0:8080"]

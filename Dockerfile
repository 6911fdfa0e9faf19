# barista in a container: a static binary, run as a non-root user.
#
#   docker build -t barista .                       # the server image
#   docker build --target worker -t barista-worker . # a worker image (has a shell for jobs)
#
# The entrypoint is barista itself: docker run barista server --help.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/barista ./cmd/barista

# Workers run their jobs as child processes: build your job image FROM
# this one (or copy /usr/local/bin/barista into yours) so the jobs find
# their tools next to the agent.
FROM debian:bookworm-slim AS worker
RUN useradd --system --uid 65532 --home-dir /var/lib/barista --create-home barista
COPY --from=build /out/barista /usr/local/bin/barista
USER 65532:65532
WORKDIR /var/lib/barista
ENTRYPOINT ["/usr/local/bin/barista"]
CMD ["worker", "--help"]

# The server: nothing but the binary.
FROM gcr.io/distroless/static-debian12:nonroot AS server
COPY --from=build /out/barista /usr/local/bin/barista
USER 65532:65532
EXPOSE 7400 7440 7480
ENTRYPOINT ["/usr/local/bin/barista"]
CMD ["server", "--help"]

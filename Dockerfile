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
#
# Each job gets a cgroup v2 of its own with its size's limits (memory,
# processes; docs/workers.md, "Cgroups") when the container has a
# writable cgroup namespace: a cgroup v2 host, --cgroupns=private (the
# default there), and /sys/fs/cgroup writable, which Docker allows only
# to --privileged containers. Without it the worker says so at start and
# runs each job as a process tree: CPU from /proc, killed by signals, the
# container's own limits (docker run --memory, --pids-limit) bounding the
# worker and its job together. Add --require-cgroup to refuse that.
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

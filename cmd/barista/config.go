package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/connlimit"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/rpc"
	"github.com/baristahq/barista/sfq"
	"github.com/baristahq/barista/web"
)

// serverConfig is a server's whole configuration: defaults, then the
// configuration file, then the command line, merged by one loop over
// serverConfig.settings and checked by validate.
type serverConfig struct {
	Node        raftnode.Config // identity, addresses, Raft tuning, the scheduler seed
	Join        []string
	LogLevel    string
	LogJSON     bool
	InsecureDev bool
	UnsafeDebug bool
	// ForwardSingly plays a build before batched forwarding (tests only).
	ForwardSingly bool
	Pprof         bool
	TLS           raftnode.TLSFiles
	Tokens        []auth.Token
	// InsecureRaft allows a non-loopback Raft address without TLS.
	InsecureRaft bool
	// InsecureHTTP allows a non-loopback HTTP address without TLS while
	// tokens are configured; InsecureGRPC a gRPC one; InsecureListeners
	// both.
	InsecureHTTP      bool
	InsecureGRPC      bool
	InsecureListeners bool
	// MetricsAuth makes /metrics need an admin or metrics token.
	MetricsAuth bool
	// BootstrapNode names the node that creates the cluster (see
	// --bootstrap-node).
	BootstrapNode string
	BootstrapWait time.Duration
	// GRPCReflection serves gRPC server reflection (always with
	// --insecure-dev and no tokens).
	GRPCReflection bool
	// MetricsMaxTenants bounds the tenants with their own /metrics series
	// (0: only tenants marked export_metrics).
	MetricsMaxTenants uint32
	// Webhooks are this server's webhook delivery settings (webhook.go).
	Webhooks webhookConfig
	// Limits and WebLimits bound what callers can make this server's
	// gRPC and HTTP sides hold (docs/security.md, "Limits"); Conns the
	// connections of its gRPC and HTTP listeners.
	Limits    rpc.Limits
	WebLimits web.Limits
	Conns     connlimit.Config
}

func defaultServerConfig() serverConfig {
	n := raftnode.DefaultConfig()
	n.RaftAddr, n.GRPCAddr, n.HTTPAddr = "127.0.0.1:7440", "127.0.0.1:7400", "127.0.0.1:7480"
	return serverConfig{Node: n, LogLevel: "info", BootstrapWait: 30 * time.Second, TLS: raftnode.TLSFiles{Cluster: raftnode.DefaultClusterName},
		MetricsMaxTenants: rpc.DefaultMetricsMaxTenants, Webhooks: defaultWebhookConfig(), Limits: rpc.DefaultLimits(), WebLimits: web.DefaultLimits(),
		Conns: connlimit.Config{Max: 4096, PerAddress: 256, Reserve: 64, PerIdentity: 512, UnauthenticatedCalls: 256, FirstRequest: 5 * time.Second, UnauthenticatedIdle: 30 * time.Second, AcceptRate: 256}}
}

// setting is one server setting, declared once: its configuration file
// key ("" for a flag only), its flag ("" for a file key only), its help,
// and its typed, bounded value bound to the serverConfig field it fills;
// the field's value in defaultServerConfig is the default. field names
// the raftnode.Config field it fills, so that a refusal of
// raftnode.Config.Validate names the flag or key that set it.
type setting struct {
	key, flag, usage string
	val              value
	field            string
}

// settings lists every setting of c, bound to c's fields. Adding a
// setting is one line here (and its field); flags, file keys, defaults,
// --help and docs/configuration.md follow from it.
func (c *serverConfig) settings() []setting {
	n, s := &c.Node, &c.Node.Seed
	const year = 365 * 24 * time.Hour
	list := []setting{
		{key: "node.id", flag: "node-id", usage: "this node's unique `ID` (required)", val: &stringVal{&n.ID}, field: "ID"},
		{key: "node.data_dir", flag: "data-dir", usage: "`DIR` for the Raft log, snapshots and records (required)", val: &stringVal{&n.DataDir}, field: "DataDir"},
		{key: "node.raft_addr", flag: "raft-addr", usage: "Raft transport `HOST:PORT`", val: &stringVal{&n.RaftAddr}, field: "RaftAddr"},
		{key: "node.grpc_addr", flag: "grpc-addr", usage: "gRPC `HOST:PORT` for clients, workers and operators", val: &stringVal{&n.GRPCAddr}},
		{key: "node.raft_advertise", flag: "raft-advertise", usage: "Raft `HOST:PORT` other members reach this node at (default: --raft-addr; needed when that binds 0.0.0.0)", val: &stringVal{&n.RaftAdvertise}, field: "RaftAdvertise"},
		{key: "node.grpc_advertise", flag: "grpc-advertise", usage: "gRPC `HOST:PORT` members and clients reach this node at (default: --grpc-addr)", val: &stringVal{&n.GRPCAdvertise}, field: "GRPCAdvertise"},
		{key: "node.http_addr", flag: "http-addr", usage: "HTTP `HOST:PORT` for health, metrics, the web console and the HTTP/JSON API (empty: none)", val: &stringVal{&n.HTTPAddr}},
		{key: "node.bootstrap", flag: "bootstrap", usage: "bootstrap a new one-node cluster if the data dir is empty", val: &boolVal{&n.Bootstrap}},
		{key: "node.bootstrap_node", flag: "bootstrap-node", usage: "the node `ID` that creates the cluster: with that ID and an empty data dir, a node first tries to --join for 30s, then bootstraps; other nodes only join (one command line for every node, e.g. a StatefulSet)", val: &stringVal{&c.BootstrapNode}},
		{key: "node.bootstrap_wait", flag: "bootstrap-wait", usage: "how long the --bootstrap-node tries to join before it bootstraps",
			val: durationVal(&c.BootstrapWait, time.Second, time.Hour)},
		{key: "node.join", flag: "join", usage: "join the cluster through a member's gRPC `ADDR[,ADDR...]`", val: &listVal{&c.Join}},
		{key: "node.prune_interval", flag: "prune-interval", usage: "how often the leader checks for prunable jobs, events and keys",
			val: durationVal(&n.PruneInterval, raftnode.MinPruneInterval, raftnode.MaxPruneInterval), field: "PruneInterval"},
		{key: "node.grpc_reflection", flag: "grpc-reflection", usage: "serve gRPC server reflection (grpcurl); any token may read it; always on for an --insecure-dev server without tokens", val: &boolVal{&c.GRPCReflection}},
		{key: "node.pprof", flag: "pprof", usage: "serve /debug/pprof/ on --http-addr (profiling; an admin token once tokens are configured)", val: &boolVal{&c.Pprof}},

		{key: "raft.heartbeat_timeout", flag: "raft-heartbeat-timeout", usage: "Raft heartbeat timeout",
			val: durationVal(&n.HeartbeatTimeout, raftnode.MinTimeout, raftnode.MaxTimeout), field: "HeartbeatTimeout"},
		{key: "raft.election_timeout", flag: "raft-election-timeout", usage: "Raft election timeout (at least the heartbeat timeout)",
			val: durationVal(&n.ElectionTimeout, raftnode.MinTimeout, raftnode.MaxTimeout), field: "ElectionTimeout"},
		{key: "raft.leader_lease_timeout", flag: "raft-leader-lease-timeout", usage: "Raft leader lease (at most the heartbeat timeout)",
			val: durationVal(&n.LeaderLeaseTimeout, raftnode.MinTimeout, raftnode.MaxTimeout).orZero("250ms or the heartbeat timeout if shorter"), field: "LeaderLeaseTimeout"},
		{key: "raft.commit_timeout", flag: "raft-commit-timeout", usage: "Raft commit timeout",
			val: durationVal(&n.CommitTimeout, raftnode.MinCommitTimeout, raftnode.MaxCommitTimeout), field: "CommitTimeout"},
		{key: "raft.entries_in_flight", flag: "raft-entries-in-flight", usage: "log entries of coalesced proposals the leader has outstanding at once (more may help replicas on machines of their own)",
			val: &intVal[uint64]{&n.EntriesInFlight, 1, raftnode.MaxEntriesInFlight}, field: "EntriesInFlight"},
		{key: "raft.snapshot_threshold", flag: "snapshot-threshold", usage: "log entries between snapshots",
			val: &intVal[uint64]{&n.SnapshotThreshold, 1, raftnode.MaxLogEntries}, field: "SnapshotThreshold"},
		{key: "raft.snapshot_interval", flag: "snapshot-interval", usage: "how often to check the snapshot threshold",
			val: durationVal(&n.SnapshotInterval, raftnode.MinTimeout, raftnode.MaxSnapshotInterval), field: "SnapshotInterval"},
		{key: "raft.trailing_logs", flag: "trailing-logs", usage: "log entries kept after a snapshot",
			val: &intVal[uint64]{&n.TrailingLogs, 1, raftnode.MaxLogEntries}, field: "TrailingLogs"},
		{key: "raft.insecure", flag: "insecure-raft", usage: "allow a non-loopback --raft-addr without TLS (anyone who reaches it can rewrite the log)", val: &boolVal{&c.InsecureRaft}},
		{key: "raft.ready_max_lag_entries", flag: "ready-max-lag-entries", usage: "not ready (/readyz, gRPC health) when more entries behind the leader's commit index",
			val: &intVal[uint64]{&n.MaxLagEntries, 1, raftnode.MaxLogEntries}, field: "MaxLagEntries"},
		{key: "raft.ready_max_lag", flag: "ready-max-lag", usage: "not ready when the leader committed an entry not applied here this long ago, or was silent this long",
			val: durationVal(&n.MaxLag, raftnode.MinTimeout, raftnode.MaxLagLimit), field: "MaxLag"},

		{key: "log.level", flag: "log-level", usage: "log `LEVEL`", val: logLevelVal(&c.LogLevel)},
		{key: "log.json", flag: "log-json", usage: "log JSON lines", val: &boolVal{&c.LogJSON}},

		{key: "auth.insecure_dev", flag: "insecure-dev", usage: "with no tokens configured, serve every call without authentication (development only)", val: &boolVal{&c.InsecureDev}},
		{key: "auth.tokens", usage: "bearer tokens: [[auth.tokens]] tables with role, tenant (client tokens), worker_id (worker tokens) and token", val: &tokensVal{&c.Tokens}},

		{key: "grpc.insecure", flag: "insecure-grpc", usage: "with tokens configured, allow a non-loopback --grpc-addr without TLS (tokens, payloads and job output then cross the network in clear)", val: &boolVal{&c.InsecureGRPC}},
		{flag: "insecure-listeners", usage: "--insecure-grpc and --insecure-http together (not --insecure-raft)", val: &boolVal{&c.InsecureListeners}},
		{key: "http.insecure", flag: "insecure-http", usage: "with tokens configured, allow a non-loopback --http-addr without TLS (tokens then cross the network in clear)", val: &boolVal{&c.InsecureHTTP}},
		{key: "http.metrics_require_token", flag: "metrics-require-token", usage: "/metrics needs an admin or metrics token (it shows tenant names)", val: &boolVal{&c.MetricsAuth}},
		{key: "metrics.max_tenants", flag: "metrics-max-tenants", usage: "/metrics has per-tenant series for every tenant while there are at most `N`, beyond that only for tenants marked --export-metrics (0: only those)",
			val: &intVal[uint32]{&c.MetricsMaxTenants, 0, 10_000_000}},

		{key: "webhooks.key", usage: "the cluster's webhook `KEY`, the hex or base64 of at least 32 random bytes and the same on every server, from which endpoint secrets are derived (or webhooks.key_file, or $BARISTA_WEBHOOK_KEY)", val: &secretVal{&c.Webhooks.Key}},
		{key: "webhooks.key_file", flag: "webhook-key-file", usage: "a `FILE` holding the webhook key (mode 0600, 0400 or 0440; barista tls init writes one), instead of webhooks.key", val: &stringVal{&c.Webhooks.KeyFile}},
		{key: "limits.max_message_bytes", flag: "max-message-bytes", usage: "largest gRPC message and HTTP/JSON request body this server accepts, in `BYTES` (the same on every server)",
			val: &intVal[int]{&c.Limits.MaxMessageBytes, rpc.MinMessageBytes, fsm.MaxMessageBytes}},
		{key: "limits.http_unauthenticated", flag: "http-max-unauthenticated", usage: "HTTP requests without a valid token or session served at once (/healthz and /readyz not counted); more are answered 503",
			val: &intVal[int]{&c.WebLimits.HTTPUnauthenticated, 1, 100_000}},
		{key: "limits.sessions", flag: "max-sessions", usage: "web console sessions on this server", val: &intVal[int]{&c.WebLimits.Sessions, 2, 1_000_000}},
		{key: "limits.sessions_per_identity", flag: "max-sessions-per-identity", usage: "web console sessions of one identity (a client token's tenant, the admin); its next login signs its oldest out; identities other than the admin hold at most max-sessions minus this together",
			val: &intVal[int]{&c.WebLimits.SessionsPerIdentity, 1, 500_000}},
		{key: "limits.watch_streams", flag: "max-watch-streams", usage: "watch streams this server serves; more are refused RESOURCE_EXHAUSTED",
			val: &intVal[int]{&c.Limits.WatchStreams, 1, 10_000_000}},
		{key: "limits.watch_streams_per_identity", flag: "max-watch-streams-per-identity", usage: "watch streams of one identity (a client token's tenant, the admin) on this server; more are refused RESOURCE_EXHAUSTED",
			val: &intVal[int]{&c.Limits.WatchStreamsPerIdentity, 1, 10_000_000}},
		{key: "limits.watch_stall_timeout", flag: "watch-stall-timeout", usage: "a watch whose client takes no event this long while more wait is ended RESOURCE_EXHAUSTED (it resumes from its cursor); an HTTP client that reads nothing of an answer this long is disconnected",
			val: durationVal(&c.Limits.WatchStall, 100*time.Millisecond, 10*time.Minute)},
		{key: "limits.connections", flag: "max-connections", usage: "connections of the gRPC and HTTP listeners together (lowered at start to leave 128 of the open-files limit to Raft and files)",
			val: &intVal[int]{&c.Conns.Max, 16, 10_000_000}},
		{key: "limits.connections_per_address", flag: "max-connections-per-address", usage: "connections from one source network: a /24 of IPv4, a /48 of IPv6 (raise it for clients behind a proxy or NAT)",
			val: &intVal[int]{&c.Conns.PerAddress, 1, 10_000_000}},
		{key: "limits.connections_unauthenticated", flag: "max-connections-unauthenticated", usage: "of max-connections, those that have made no call with a token yet (0: half); past it a new connection from a network holding none of them takes the place of the oldest such one of the network holding the most (one from a network holding some is closed before its handshake), and the rest stays for callers with a token",
			val: &intVal[int]{&c.Conns.Unauthenticated, 0, 10_000_000}},
		{key: "limits.connections_per_identity", flag: "max-connections-per-identity", usage: "connections whose first call with a token is a client token's (one tenant's) on this server; the first call of one more is refused RESOURCE_EXHAUSTED (0: no bound)",
			val: &intVal[int]{&c.Conns.PerIdentity, 0, 10_000_000}},
		{key: "limits.unauthenticated_calls", flag: "max-unauthenticated-calls", usage: "calls without a token (health checks and watches) in progress at once, a sixteenth of them (at least 4) from one source network; more are refused RESOURCE_EXHAUSTED (0: no bound)",
			val: &intVal[int]{&c.Conns.UnauthenticatedCalls, 0, 10_000_000}},
		{key: "limits.unauthenticated_accept_rate", flag: "unauthenticated-accept-rate", usage: "new connections a second from source networks that hold no connection which has made a call with a token, a sixteenth of them (at least 4) from one network, each with a burst of a second's worth; more are closed as accepted, before any handshake (a network holding a connection with a token's call, and loopback, are not bounded so; 0: no bound)",
			val: &intVal[int]{&c.Conns.AcceptRate, 0, 10_000_000}},
		{key: "limits.connections_reserve", flag: "connections-reserve", usage: "the last places of max-connections on a listener, kept for addresses without a connection to it (health probes, new clients)",
			val: &intVal[int]{&c.Conns.Reserve, 0, 10_000_000}},
		{key: "limits.first_request_timeout", flag: "first-request-timeout", usage: "a connection that has not sent its first request this long after it was accepted (TLS and HTTP/2 handshakes included) is closed",
			val: durationVal(&c.Conns.FirstRequest, 100*time.Millisecond, 2*time.Minute)},
		{key: "limits.unauthenticated_idle", flag: "unauthenticated-idle", usage: "a connection that has made no call with a token (health checks only, say) is closed this long after its last call began or ended, whatever streams it holds; a call without a token lasts at most this long",
			val: durationVal(&c.Conns.UnauthenticatedIdle, 100*time.Millisecond, time.Hour)},
		{key: "limits.connection_idle", flag: "connection-idle", usage: "a gRPC connection with no call in progress this long is closed (its client reconnects when it calls again)",
			val: durationVal(&c.Limits.ConnectionIdle, time.Second, 24*time.Hour)},
		{key: "limits.streams_per_connection", flag: "max-streams-per-connection", usage: "calls and streams one gRPC connection has open at once (above max-watch-streams: the HTTP/JSON API's calls share one connection)",
			val: &intVal[int]{&c.Limits.StreamsPerConnection, 16, 1_000_000}},
		{key: "limits.request_bytes", flag: "max-request-bytes", usage: "bytes of gRPC requests this server holds while it reads them; a unary call reserves max-message-bytes until its request is in, and one over the bound is refused UNAVAILABLE, unread",
			val: &intVal[int64]{&c.Limits.RequestBytes, rpc.MinMessageBytes, 1 << 40}},
		{key: "limits.request_bytes_per_identity", flag: "max-request-bytes-per-identity", usage: "of max-request-bytes, what one caller (a token's role, tenant and worker binding) may hold; over it RESOURCE_EXHAUSTED, unread",
			val: &intVal[int64]{&c.Limits.RequestBytesPerIdentity, rpc.MinMessageBytes, 1 << 40}},
		{key: "limits.body_bytes", flag: "max-body-bytes", usage: "bytes of HTTP/JSON request bodies this server holds while it reads and serves them (a body reserves its Content-Length before it is read); over it 503, unread",
			val: &intVal[int64]{&c.WebLimits.BodyBytes, rpc.MinMessageBytes, 1 << 40}},
		{key: "limits.body_bytes_per_identity", flag: "max-body-bytes-per-identity", usage: "of max-body-bytes, what one caller may hold; over it 429 with Retry-After, unread",
			val: &intVal[int64]{&c.WebLimits.BodyBytesPerIdentity, rpc.MinMessageBytes, 1 << 40}},
		{key: "limits.write_rate", flag: "write-rate", usage: "write calls (not submits, which scheduler.submit_rate holds, nor worker reports) one caller (a token's role, tenant and worker binding) may make: off, or N/PERIOD, held by the leader; RESOURCE_EXHAUSTED with a retry delay beyond it",
			val: &rateVal{&c.Limits.WriteRate}},
		{key: "limits.write_burst", flag: "write-burst", usage: "write calls a caller may make at once under write_rate (0: N)", val: &intVal[uint32]{&c.Limits.WriteRate.Burst, 0, sfq.MaxRateBurst}},
		{key: "limits.request_read_timeout", flag: "request-read-timeout", usage: "a gRPC request not read this long after its call began closes its connection",
			val: durationVal(&c.Limits.RequestReadTimeout, 100*time.Millisecond, time.Hour)},
		{key: "limits.http_requests_per_identity", flag: "http-max-requests-per-identity", usage: "HTTP/JSON requests (watches aside) of one caller in progress on this server, held reads included; more are answered 429 at once",
			val: &intVal[int]{&c.WebLimits.HTTPRequestsPerIdentity, 1, 1_000_000}},
		{key: "limits.http_requests", flag: "http-max-requests", usage: "HTTP/JSON requests (watches aside) in progress on this server (keep it and max-watch-streams below max-streams-per-connection: they share the gateway's one connection); more are answered 503 at once",
			val: &intVal[int]{&c.WebLimits.HTTPRequests, 1, 1_000_000}},
		{key: "limits.http_held_reads_per_identity", flag: "http-max-held-reads-per-identity", usage: "HTTP/JSON reads of one caller held until this server has applied the index they name (X-Barista-Min-Index); more are answered 429 at once",
			val: &intVal[int]{&c.WebLimits.HTTPHeldReadsPerIdentity, 1, 1_000_000}},
		{key: "limits.worker_records_per_binding", flag: "max-worker-records-per-binding", usage: "worker records the leader lets a worker token bound to a prefix of IDs (\"gpu-*\") make: past it, a session or a drain of a new ID of the binding is refused RESOURCE_EXHAUSTED",
			val: &intVal[int]{&c.Limits.WorkerRecordsPerBinding, 1, 100_000_000}},
		{key: "limits.worker_records_unbound", flag: "max-worker-records-unbound", usage: "worker records in all past which the leader lets a worker token bound to no ID make no new one: a session of a new worker ID with such a token is refused RESOURCE_EXHAUSTED while the cluster holds this many records",
			val: &intVal[int]{&c.Limits.WorkerRecordsUnbound, 1, 100_000_000}},
		{key: "limits.calls_per_identity", flag: "max-calls-per-identity", usage: "unary gRPC calls of one caller (a token's role, tenant and worker binding) in progress on this server; more are refused RESOURCE_EXHAUSTED",
			val: &intVal[int]{&c.Limits.CallsPerIdentity, 1, 10_000_000}},
		{key: "limits.held_reads_per_identity", flag: "max-held-reads-per-identity", usage: "reads of one caller this server holds until it has applied the caller's last write (a stale read or a watch naming an index); more are refused RESOURCE_EXHAUSTED at once",
			val: &intVal[int]{&c.Limits.HeldReadsPerIdentity, 1, 10_000_000}},
		{key: "limits.held_reads", flag: "max-held-reads", usage: "reads this server holds until it has applied their callers' last writes, in all; more are refused UNAVAILABLE at once",
			val: &intVal[int]{&c.Limits.HeldReads, 1, 10_000_000}},

		{key: "webhooks.key", usage: "the cluster's webhook `KEY`, at least 32 bytes and the same on every server, from which endpoint secrets are derived (or $BARISTA_WEBHOOK_KEY)", val: &secretVal{&c.Webhooks.Key}},
		{key: "webhooks.allow_cidrs", flag: "webhook-allow-cidr", usage: "a `CIDR` webhook endpoints may reach although loopback, private or link-local (repeatable)", val: &cidrListVal{&c.Webhooks.Allow}},
		{key: "webhooks.timeout", flag: "webhook-timeout", usage: "bound of each webhook request", val: durationVal(&c.Webhooks.Timeout, 100*time.Millisecond, time.Minute)},
		{key: "webhooks.workers", flag: "webhook-workers", usage: "webhook requests in flight at most, over every endpoint (one per endpoint)", val: &intVal[uint32]{&c.Webhooks.Workers, 2, 1024}},
		{key: "webhooks.slow_workers", flag: "webhook-slow-workers", usage: "of webhooks.workers, how many may go to slow endpoints (the others only to prompt ones, so a slow endpoint delays only itself; 0: half)",
			val: &intVal[uint32]{&c.Webhooks.SlowWorkers, 0, 1023}},
		{key: "webhooks.slow_after", flag: "webhook-slow-after", usage: "an endpoint whose request has been out this long (or timed out) is slow until one is answered sooner",
			val: durationVal(&c.Webhooks.SlowAfter, 10*time.Millisecond, time.Minute)},
		{key: "webhooks.commit_interval", flag: "webhook-commit-interval", usage: "how often at most the leader proposes the delivered webhook cursors (one command for every endpoint)", val: durationVal(&c.Webhooks.CommitInterval, 10*time.Millisecond, time.Minute)},
		{key: "webhooks.max_batch", flag: "webhook-max-batch", usage: "events per webhook request at most", val: &intVal[uint32]{&c.Webhooks.MaxBatch, 1, 1000}},

		{key: "tls.cert", flag: "tls-cert", usage: "PEM certificate `FILE` for gRPC and Raft TLS", val: &stringVal{&c.TLS.Cert}},
		{key: "tls.key", flag: "tls-key", usage: "PEM private key `FILE` of --tls-cert", val: &stringVal{&c.TLS.Key}},
		{key: "tls.ca", flag: "tls-ca", usage: "PEM `FILE` of the CA that signed every member's certificate", val: &stringVal{&c.TLS.CA}},
		{key: "tls.cluster_name", flag: "cluster-name", usage: "cluster `NAME`: members' certificates carry server.NAME.barista", val: &stringVal{&c.TLS.Cluster}},

		{flag: "unsafe-debug", usage: "allow raw envelopes of other versions through Apply (tests only)", val: &boolVal{&c.UnsafeDebug}},
		{flag: "test-clock-offset", usage: "shift this node's wall clock (tests only)",
			val: durationVal(&n.ClockOffset, -raftnode.MaxClockOffset, raftnode.MaxClockOffset), field: "ClockOffset"},
		{flag: "test-forward-singly", usage: "forward each single submit to the leader alone and refuse batches of them as UNIMPLEMENTED, as builds before batched forwarding do (compatibility tests only)",
			val: &boolVal{&c.ForwardSingly}},
		{flag: "test-feature-level", usage: "report this highest feature level instead of the build's, to play an older build (upgrade tests only; 0: the build's)",
			val: &intVal[uint32]{&n.FeatureLevel, 0, fsm.MaxFeatureLevel}, field: "FeatureLevel"},

		{key: "scheduler.policy", usage: "size stealing: prefer-fit, or reserve:DURATION (a margin in virtual time)",
			val: &parsedVal[sfq.StealPolicy]{&s.Sched.Policy, sfq.ParsePolicy, sfq.StealPolicy.String, "prefer-fit or reserve:DURATION"}},
		{key: "scheduler.clamp", usage: "clamp mode: activation or dispatch",
			val: &parsedVal[sfq.ClampMode]{&s.Sched.Clamp, sfq.ParseClamp, sfq.ClampMode.String, "activation or dispatch"}},
		{key: "scheduler.decay", usage: "usage decay: off, or half_life:DURATION,norm:DURATION",
			val: &parsedVal[*sfq.Decay]{&s.Sched.Decay, sfq.ParseDecay, (*sfq.Decay).String, "off or half_life:DURATION,norm:DURATION"}},
		{key: "scheduler.ack_timeout", usage: "Assign to Started", val: msVal(&s.Sched.AckTimeoutMs, time.Millisecond, sfq.MaxTimeoutMs*time.Millisecond)},
		{key: "scheduler.lease_timeout", usage: "a running job's lease without a heartbeat", val: msVal(&s.Sched.LeaseTimeoutMs, time.Millisecond, sfq.MaxTimeoutMs*time.Millisecond)},
		{key: "scheduler.heartbeat_interval", usage: "worker heartbeats (below self_kill_after)", val: msVal(&s.HeartbeatIntervalMs, time.Millisecond, year)},
		{key: "scheduler.self_kill_after", usage: "a worker with no acknowledged heartbeat kills its job (below lease_timeout)", val: msVal(&s.SelfKillAfterMs, time.Millisecond, year)},
		{key: "scheduler.cancel_grace", usage: "SIGTERM to SIGKILL", val: msVal(&s.CancelGraceMs, time.Millisecond, year)},
		{key: "scheduler.max_attempts", usage: "default for submits that do not set it", val: &intVal[uint32]{&s.Sched.DefaultMaxAttempts, 1, sfq.MaxMaxAttempts}},
		{key: "scheduler.job_retention", usage: "terminal jobs are kept this long (0: until the next prune)", val: msVal(&s.JobRetentionMs, 0, year)},
		{key: "scheduler.event_retention", usage: "events are kept this long ...", val: msVal(&s.EventRetentionMs, 0, year)},
		{key: "scheduler.event_retention_count", usage: "... and at most this many", val: &intVal[uint64]{&s.EventRetentionCount, 0, 1 << 40}},
		{key: "scheduler.dedupe_window", usage: "idempotency keys are remembered this long (0: not at all)", val: msVal(&s.DedupeWindowMs, 0, year)},
		{key: "scheduler.max_payload_bytes", usage: "largest job payload", val: &intVal[uint32]{&s.MaxPayloadBytes, 1, fsm.MaxPayloadLimit}},
		{key: "scheduler.dead_letter_retention", usage: "jobs that ended failed, timed_out, expired or cancelled are kept this long (feature level 5)", val: msVal(&s.DeadLetterRetentionMs, time.Millisecond, year)},
		{key: "scheduler.dead_letter_max_jobs", usage: "each tenant keeps at most this many of them, the oldest go first (feature level 5)", val: &intVal[uint64]{&s.DeadLetterMaxJobs, 1, 1 << 40}},
		{key: "scheduler.dead_letter_max_bytes", usage: "... holding at most this many payload bytes (feature level 5)", val: &intVal[uint64]{&s.DeadLetterMaxBytes, 1, 1 << 50}},
		{key: "scheduler.default_max_queued", usage: "a tenant without a max_queued of its own holds at most this many scheduled and queued jobs; 0 = no bound (feature level 6)", val: &intVal[uint32]{&s.DefaultMaxQueued, 0, 1<<32 - 1}},
		{key: "scheduler.max_queued_bytes", usage: "every tenant holds at most this many payload bytes in its unfinished jobs; 0 = no bound (feature level 6)", val: &intVal[uint64]{&s.MaxQueuedBytes, 0, 1 << 50}},
		{key: "scheduler.max_total_queued_bytes", usage: "all tenants together hold at most this many payload bytes in their unfinished jobs; 0 = no bound (feature level 7)", val: &intVal[uint64]{&s.MaxTotalQueuedBytes, 0, 1 << 50}},
		{key: "scheduler.event_retention_per_tenant", usage: "of each tenant's events younger than event_retention, the newest this many are kept when event_retention_count prunes them, so that no tenant's volume prunes another's recent history (all tenants' kept ones together at most event_retention_count); 0 = none (feature level 8)",
			val: &intVal[uint64]{&s.EventRetentionPerTenant, 0, 1 << 40}},
		{key: "scheduler.max_worker_records", usage: "a drain of a worker the cluster holds no record of is refused once it holds this many worker records; 0 = no bound (feature level 8)",
			val: &intVal[uint64]{&s.MaxWorkerRecords, 0, 1 << 40}},
		{key: "scheduler.max_schedules", usage: "the schedules one tenant may have (another value than 100 needs feature level 8)",
			val: &intVal[uint32]{&s.MaxSchedules, 1, fsm.MaxMaxSchedules}},
		{key: "scheduler.estimate", usage: "where a job's est_cost comes from: submitted (each submit states it), or auto (its type's moving average once 3 runs completed, else the stated cost, else default_cost)",
			val: &parsedVal[sfq.EstimateMode]{&s.Sched.Estimate, sfq.ParseEstimateMode, sfq.EstimateMode.String, "submitted or auto"}},
		{key: "scheduler.default_cost", usage: "est_cost under estimate=auto of a submit without one whose type has fewer than 3 completed runs",
			val: msVal(&s.Sched.DefaultCostMs, time.Millisecond, sfq.MaxEstCostMs*time.Millisecond)},
		{key: "scheduler.submit_rate", usage: "submits each tenant may make: off, or N/PERIOD (e.g. 100/1s), held by the leader; RESOURCE_EXHAUSTED with a retry delay beyond it (feature level 5)",
			val: &rateVal{&s.SubmitRate}},
		{key: "scheduler.submit_burst", usage: "submits a tenant may make at once under submit_rate (0: N)", val: &intVal[uint32]{&s.SubmitRate.Burst, 0, sfq.MaxRateBurst}},
		{key: "scheduler.retry_backoff", usage: "a failed run waits this long before its retry, doubling per failure (0: requeued at once; a cluster below feature level 5 keeps 0)",
			val: msVal(&s.Sched.RetryBackoffMs, 0, sfq.MaxRetryBackoffMs*time.Millisecond)},
		{key: "scheduler.retry_backoff_max", usage: "the longest a failed run's retry waits",
			val: msVal(&s.Sched.RetryBackoffMaxMs, 0, sfq.MaxRetryBackoffMs*time.Millisecond)},
		{key: "scheduler.max_snoozes", usage: "a job whose runs snooze this many times in a row ends failed, reason snoozed_too_often (another value than 100 needs feature level 7)",
			val: &intVal[uint16]{&s.Sched.MaxSnoozes, 1, sfq.MaxMaxSnoozes}},
		{key: "scheduler.resource_reserve_after", usage: "a job blocked only by a resource this long may take the resource's reservation (docs/resources.md; another value than 1m needs feature level 8)",
			val: msVal(&s.Sched.ResourceReserveAfterMs, 0, sfq.MaxResourceReserveAfterMs*time.Millisecond)},
		{key: "scheduler.max_resources", usage: "the resources the cluster may declare; 0 = the default, 256 (another value needs feature level 8)",
			val: &intVal[uint32]{&s.Sched.MaxResources, 0, sfq.MaxMaxResources}},
		{key: "scheduler.max_pools", usage: "pools at most, the pool default included; 0 = the default, 64 (feature level 6)",
			val: &intVal[uint32]{&s.Pools.MaxPools, 0, sfq.MaxPoolSlots}},
		{key: "scheduler.implicit_tenants", usage: "a submit for an unknown tenant: off (NOT_FOUND), or a TIER: the tenant is made with that tier and no caps (feature level 6)",
			val: &implicitTenantsVal{&s.Pools}},
		{key: "scheduler.clock_tick", usage: "the leader commits an empty entry whenever none was committed for this long, so that a crash of the leader loses at most this much cluster time (another value than 1s needs feature level 7)",
			val: msVal(&s.ClockTickMs, fsm.MinClockTickMs*time.Millisecond, fsm.MaxClockTickMs*time.Millisecond)},
		{key: "scheduler.default_tenant", usage: "the tenant of an admin's submit that names none: none, or a tenant NAME (a client token's submit is always its own tenant's; feature level 6)",
			val: defaultTenantVal(&s.Pools.DefaultTenant)},
	}
	for t := range sfq.Tier(sfq.NumTiers) {
		list = append(list, setting{key: "scheduler.weights." + t.String(), usage: "weight of tier " + t.String(),
			val: &intVal[uint32]{&s.Sched.TierWeights[t], 1, sfq.MaxTierWeight}})
	}
	return list
}

func logLevelVal(p *string) value {
	return &parsedVal[string]{p: p, want: "trace, debug, info, warn or error", format: func(s string) string { return s },
		parse: func(s string) (string, error) {
			if !validLogLevel(s) {
				return "", fmt.Errorf("unknown level %q (want trace, debug, info, warn or error)", s)
			}
			return s, nil
		}}
}

func validLogLevel(l string) bool {
	switch l {
	case "trace", "debug", "info", "warn", "error":
		return true
	}
	return false
}

// tokensVal is the list of bearer tokens: [[auth.tokens]] tables in the
// file, ROLE[:TENANT]=SECRET,... as text ($BARISTA_TOKENS). Its String
// never shows a secret.
type tokensVal struct{ p *[]auth.Token }

// tokenKeys are the keys of an [[auth.tokens]] table.
var tokenKeys = map[string]func(t *auth.Token, s string) error{
	"role":      func(t *auth.Token, s string) (err error) { t.Role, err = auth.ParseRole(s); return err },
	"tenant":    func(t *auth.Token, s string) error { t.Tenant = s; return nil },
	"worker_id": func(t *auth.Token, s string) error { t.Worker = s; return nil },
	"token":     func(t *auth.Token, s string) error { t.Secret = s; return nil },
}

func (v *tokensVal) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return fmt.Sprintf("%d tokens", len(*v.p))
}
func (v *tokensVal) allowed() string { return "" }

func (v *tokensVal) Set(s string) error {
	ts, err := auth.ParseTokens(s)
	if err != nil {
		return err
	}
	*v.p = append(*v.p, ts...)
	return nil
}

func (v *tokensVal) setTOML(x any) error {
	var tables []map[string]any
	switch x := x.(type) {
	case []map[string]any:
		tables = x
	case []any:
		for i, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				return &subkeyError{sub: fmt.Sprintf("[%d]", i), err: wrongType("a table", e)}
			}
			tables = append(tables, m)
		}
	default:
		return wrongType("an array of tables ([[auth.tokens]])", x)
	}
	out := make([]auth.Token, 0, len(tables))
	for i, m := range tables {
		var t auth.Token
		for _, k := range slices.Sorted(maps.Keys(m)) {
			sub := fmt.Sprintf("[%d].%s", i, k)
			set, ok := tokenKeys[k]
			if !ok {
				return &subkeyError{sub: sub, err: errors.New("unknown key")}
			}
			s, ok := m[k].(string)
			if !ok {
				return &subkeyError{sub: sub, err: wrongType("a string", m[k])}
			}
			if err := set(&t, s); err != nil {
				return &subkeyError{sub: sub, err: err}
			}
		}
		if err := t.Validate(); err != nil {
			return &subkeyError{sub: fmt.Sprintf("[%d]", i), err: err}
		}
		out = append(out, t)
	}
	*v.p = out
	return nil
}

// configFile is a parsed configuration file: the TOML value of each key
// it sets, every one already checked.
type configFile struct {
	path   string
	values map[string]any
}

// loadConfigFile reads and checks a configuration file.
func loadConfigFile(path string) (*configFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseConfigFile(path, data)
}

// parseConfigFile decodes a configuration file and checks it: an unknown
// key, a value of the wrong type or out of range, and a [scheduler]
// section the scheduler refuses are errors naming the key. Each value is
// applied to a scratch configuration, so one the command line overrides
// is checked too.
func parseConfigFile(path string, data []byte) (*configFile, error) {
	var tree map[string]any
	if _, err := toml.Decode(string(data), &tree); err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			where := fmt.Sprintf("line %d, column %d", perr.Position.Line, perr.Position.Col)
			if perr.LastKey != "" {
				where += " (key " + perr.LastKey + ")"
			}
			return nil, fmt.Errorf("%s: %s: %s", path, where, perr.Message)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	scratch := defaultServerConfig()
	byKey, sections := map[string]setting{}, map[string]bool{}
	for _, s := range scratch.settings() {
		if s.key == "" {
			continue
		}
		byKey[s.key] = s
		parts := strings.Split(s.key, ".")
		for i := 1; i < len(parts); i++ {
			sections[strings.Join(parts[:i], ".")] = true
		}
	}
	f := &configFile{path: path, values: map[string]any{}}
	var unknown []string
	var walk func(prefix string, m map[string]any) error
	walk = func(prefix string, m map[string]any) error {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			key := prefix + k
			if k == "" || strings.Contains(k, ".") {
				unknown = append(unknown, fmt.Sprintf("%q", key))
				continue
			}
			if s, ok := byKey[key]; ok {
				if err := s.val.setTOML(m[k]); err != nil {
					return named(key, err)
				}
				f.values[key] = m[k]
				continue
			}
			if sub, ok := m[k].(map[string]any); ok && sections[key] {
				if err := walk(key+".", sub); err != nil {
					return err
				}
				continue
			}
			unknown = append(unknown, key)
		}
		return nil
	}
	if err := walk("", tree); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("%s: unknown key %s", path, strings.Join(unknown, ", "))
	}
	// The scheduler keys have no flags: the file's seed is final.
	if err := scratch.Node.Seed.Validate(); err != nil {
		return nil, fmt.Errorf("%s: scheduler: %w", path, err)
	}
	return f, nil
}

// source is where a setting's value came from.
type source uint8

const (
	fromDefault source = iota
	fromFile
	fromFlag
)

// mergeConfig lays the file (may be nil) under the command-line flags
// already parsed into c through list (set names the flags given), adds
// the tokens of $BARISTA_TOKENS (env), and validates the result.
func mergeConfig(c *serverConfig, list []setting, set map[string]bool, file *configFile, env string) error {
	sources := make([]source, len(list))
	for i, s := range list {
		switch {
		case s.flag != "" && set[s.flag]:
			sources[i] = fromFlag
		case file != nil && s.key != "":
			v, ok := file.values[s.key]
			if !ok {
				continue
			}
			if err := s.val.setTOML(v); err != nil {
				return fmt.Errorf("%s: %w", file.path, named(s.key, err))
			}
			sources[i] = fromFile
		}
	}
	if env != "" {
		more, err := auth.ParseTokens(env)
		if err != nil {
			return fmt.Errorf("BARISTA_TOKENS: %w", err)
		}
		c.Tokens = append(c.Tokens, more...)
	}
	// name renders a setting, found by its raftnode.Config field or its
	// key, as the flag or key that set it.
	name := func(fieldOrKey string) string {
		for i, s := range list {
			if s.field != fieldOrKey && s.key != fieldOrKey {
				continue
			}
			switch {
			case sources[i] == fromFlag || s.key == "":
				return "--" + s.flag
			case sources[i] == fromFile || s.flag == "":
				return s.key
			}
			return "--" + s.flag + " (or " + s.key + " in --config)"
		}
		return fieldOrKey
	}
	return c.validate(name)
}

// validate checks the merged configuration; name renders a setting, by
// its raftnode.Config field or its key, as the flag or key that set it.
func (c *serverConfig) validate(name func(fieldOrKey string) string) error {
	if c.Node.Bootstrap && len(c.Join) > 0 {
		return fmt.Errorf("%s and %s exclude each other", name("node.bootstrap"), name("node.join"))
	}
	if c.Node.Bootstrap && c.BootstrapNode != "" {
		return fmt.Errorf("%s and %s exclude each other", name("node.bootstrap"), name("node.bootstrap_node"))
	}
	if err := c.Node.Seed.Validate(); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	if err := c.Node.Validate(); err != nil {
		var ce *raftnode.ConfigError
		if errors.As(err, &ce) {
			return errors.New(ce.Format(name))
		}
		return err
	}
	if _, err := rpc.NewAuth(c.Tokens, c.InsecureDev); err != nil {
		return err
	}
	if err := raftnode.ValidateClusterName(c.TLS.Cluster); err != nil {
		return fmt.Errorf("%s: %w", name("tls.cluster_name"), err)
	}
	if w := c.Webhooks; w.SlowWorkers >= w.Workers {
		return fmt.Errorf("%s: %d must be below %s (%d): the others are for prompt endpoints", name("webhooks.slow_workers"), w.SlowWorkers, name("webhooks.workers"), w.Workers)
	}
	if c.Conns.Reserve >= c.Conns.Max {
		return fmt.Errorf("%s: %d must be below %s (%d)", name("limits.connections_reserve"), c.Conns.Reserve, name("limits.connections"), c.Conns.Max)
	}
	if per, all := c.WebLimits.SessionsPerIdentity, c.WebLimits.Sessions; 2*per > all {
		return fmt.Errorf("%s: %d is more than half of %s (%d): the admin's sessions are kept out of the others'",
			name("limits.sessions_per_identity"), per, name("limits.sessions"), all)
	}
	return nil
}

// registerServerFlags defines a flag for every setting that has one.
func registerServerFlags(fs *flag.FlagSet, list []setting) {
	for _, s := range list {
		if s.flag != "" {
			defineFlag(fs, s.flag, s.usage, s.val)
		}
	}
}

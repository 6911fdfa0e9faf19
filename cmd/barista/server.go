package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"barista/fsm"
	pb "barista/proto"
	"barista/raftnode"
	"barista/rpc"
)

type serverOpts struct {
	fs          *flag.FlagSet
	configFile  string
	id          string
	dataDir     string
	raftAddr    string
	grpcAddr    string
	httpAddr    string
	bootstrap   bool
	join        string
	logLevel    string
	logJSON     bool
	hbTimeout   time.Duration
	elTimeout   time.Duration
	snapThresh  uint64
	snapIntvl   time.Duration
	trailing    uint64
	pruneIntvl  time.Duration
	maxLagN     uint64
	maxLag      time.Duration
	unsafeDebug bool
	clockOffset time.Duration
	insecureDev bool
	plainRaft   bool
	pprof       bool
	insecureWeb bool
	metricsAuth bool
	maxTenants  int
	tls         raftnode.TLSFiles

	tokens []rpc.Token // resolved from the file and BARISTA_TOKENS
}

func init() {
	register("server", &command{
		synopsis: "Run a barista server (one Raft node)",
		usage:    "--node-id ID --data-dir DIR [--bootstrap | --join ADDR] [flags]",
		help: `Runs one node of a barista cluster: the Raft member, the replicated
state machine, and the gRPC services on --grpc-addr.

Start the first node of a new cluster with --bootstrap; start the others
with --join ADDR (the gRPC address of any member; joining is idempotent, so
the same command works on first boot and on restart). A restarted node
needs neither: its data directory holds its state.

--config FILE reads a TOML file (docs/configuration.md); flags given on
the command line override it. The file's [scheduler] section only seeds
the replicated configuration when a new cluster is first configured.

Authentication: bearer tokens with roles client (pinned to one tenant),
worker and admin, from [[auth.tokens]] in --config and from $BARISTA_TOKENS
(ROLE[:SCOPE]=SECRET,...: a client token's tenant, a worker token's worker
ID or ID prefix such as gpu-*). Every member needs the same tokens. With no
token configured the server refuses to start unless --insecure-dev is
given, which serves every call unauthenticated (barista dev uses it).

TLS: --tls-cert, --tls-key and --tls-ca serve gRPC over TLS and run Raft
over mutual TLS. Only a certificate of that CA that carries the member name
server.CLUSTER.barista (--cluster-name, default "default") may speak Raft
or join; "barista tls init --names" issues such node certificates, and
"--clients" issues client certificates that cannot.

Anyone who reaches a Raft port without TLS can rewrite the replicated log.
The server refuses to start with a --raft-addr that is not a loopback
address and no TLS, unless --insecure-raft is given (then it warns at
start and every hour). See "Threat model" in docs/operations.md.

SIGINT or SIGTERM shuts the node down cleanly: a leader hands leadership
over first, and the applied index and state hash are recorded in the data
directory (see barista replay --data-dir).`,
		flags: func(fs *flag.FlagSet) any {
			d := raftnode.DefaultConfig()
			o := &serverOpts{fs: fs}
			fs.StringVar(&o.configFile, "config", "", "TOML configuration `FILE`")
			fs.StringVar(&o.id, "node-id", "", "this node's unique `ID`")
			fs.StringVar(&o.dataDir, "data-dir", "", "`DIR` for the Raft log, snapshots and records")
			fs.StringVar(&o.raftAddr, "raft-addr", "127.0.0.1:7440", "Raft transport `HOST:PORT`")
			fs.StringVar(&o.grpcAddr, "grpc-addr", "127.0.0.1:7400", "gRPC `HOST:PORT` for clients, workers and operators")
			fs.StringVar(&o.httpAddr, "http-addr", "127.0.0.1:7480", "HTTP `HOST:PORT` for health and metrics")
			fs.BoolVar(&o.bootstrap, "bootstrap", false, "bootstrap a new one-node cluster if the data dir is empty")
			fs.StringVar(&o.join, "join", "", "join the cluster through a member's gRPC `ADDR[,ADDR...]`")
			fs.StringVar(&o.logLevel, "log-level", "info", "log `LEVEL`: trace, debug, info, warn, error")
			fs.BoolVar(&o.logJSON, "log-json", false, "log JSON lines")
			fs.DurationVar(&o.hbTimeout, "raft-heartbeat-timeout", d.HeartbeatTimeout, "Raft heartbeat timeout")
			fs.DurationVar(&o.elTimeout, "raft-election-timeout", d.ElectionTimeout, "Raft election timeout")
			fs.Uint64Var(&o.snapThresh, "snapshot-threshold", d.SnapshotThreshold, "log entries between snapshots")
			fs.DurationVar(&o.snapIntvl, "snapshot-interval", d.SnapshotInterval, "how often to check the snapshot threshold")
			fs.Uint64Var(&o.trailing, "trailing-logs", d.TrailingLogs, "log entries kept after a snapshot")
			fs.DurationVar(&o.pruneIntvl, "prune-interval", d.PruneInterval, "how often the leader checks for prunable state")
			fs.Uint64Var(&o.maxLagN, "ready-max-lag-entries", d.MaxLagEntries, "not ready (/readyz, gRPC health) when more entries behind the leader's commit index")
			fs.DurationVar(&o.maxLag, "ready-max-lag", d.MaxLag, "not ready when the leader committed an entry not applied here this long ago, or was silent this long")
			fs.BoolVar(&o.unsafeDebug, "unsafe-debug", false, "allow raw envelopes of other versions through Apply (tests only)")
			fs.DurationVar(&o.clockOffset, "test-clock-offset", 0, "shift this node's wall clock (tests only)")
			fs.BoolVar(&o.pprof, "pprof", false, "serve /debug/pprof/ on --http-addr (profiling; admin token once tokens are configured)")
			fs.BoolVar(&o.insecureWeb, "insecure-http", false, "with tokens configured, allow a non-loopback --http-addr without TLS (tokens then cross the network in clear)")
			fs.BoolVar(&o.metricsAuth, "metrics-require-token", false, "/metrics needs an admin or metrics token (it shows tenant names)")
			fs.IntVar(&o.maxTenants, "metrics-max-tenants", rpc.DefaultMetricsMaxTenants, "/metrics has per-tenant series for every tenant while there are at most `N`, beyond that only for tenants marked --export-metrics")
			fs.BoolVar(&o.insecureDev, "insecure-dev", false, "with no tokens configured, serve every call without authentication (development only)")
			fs.StringVar(&o.tls.Cert, "tls-cert", "", "PEM certificate `FILE` for gRPC and Raft TLS")
			fs.StringVar(&o.tls.Key, "tls-key", "", "PEM private key `FILE` of --tls-cert")
			fs.StringVar(&o.tls.CA, "tls-ca", "", "PEM `FILE` of the CA that signed every member's certificate")
			fs.StringVar(&o.tls.Cluster, "cluster-name", raftnode.DefaultClusterName, "cluster `NAME`: members' certificates carry server.NAME.barista")
			fs.BoolVar(&o.plainRaft, "insecure-raft", false, "allow a non-loopback --raft-addr without TLS (anyone who reaches it can rewrite the log)")
			return o
		},
		run: runServer,
	})
}

// resolve merges the config file under the flags given on the command line.
func (o *serverOpts) resolve() (raftnode.Config, []string, error) {
	set := map[string]bool{}
	o.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg := raftnode.DefaultConfig()
	var join []string
	if o.configFile != "" {
		fc, err := loadConfigFile(o.configFile)
		if err != nil {
			return cfg, nil, err
		}
		pick := func(flagName string, dst *string, fileVal string) {
			if !set[flagName] && fileVal != "" {
				*dst = fileVal
			}
		}
		pick("node-id", &o.id, fc.Node.ID)
		pick("data-dir", &o.dataDir, fc.Node.DataDir)
		pick("raft-addr", &o.raftAddr, fc.Node.RaftAddr)
		pick("grpc-addr", &o.grpcAddr, fc.Node.GRPCAddr)
		pick("http-addr", &o.httpAddr, fc.Node.HTTPAddr)
		pick("log-level", &o.logLevel, fc.Log.Level)
		if !set["bootstrap"] {
			o.bootstrap = fc.Node.Bootstrap
		}
		if !set["log-json"] {
			o.logJSON = fc.Log.JSON
		}
		if !set["join"] {
			join = fc.Node.Join
		}
		durs := []struct {
			flag string
			dst  *time.Duration
			v    *duration
		}{
			{"raft-heartbeat-timeout", &o.hbTimeout, fc.Raft.HeartbeatTimeout},
			{"raft-election-timeout", &o.elTimeout, fc.Raft.ElectionTimeout},
			{"snapshot-interval", &o.snapIntvl, fc.Raft.SnapshotInterval},
		}
		for _, d := range durs {
			if !set[d.flag] && d.v != nil {
				*d.dst = d.v.Duration
			}
		}
		if fc.Raft.LeaderLeaseTimeout != nil {
			cfg.LeaderLeaseTimeout = fc.Raft.LeaderLeaseTimeout.Duration
		}
		if fc.Raft.CommitTimeout != nil {
			cfg.CommitTimeout = fc.Raft.CommitTimeout.Duration
		}
		if !set["snapshot-threshold"] && fc.Raft.SnapshotThreshold != nil {
			o.snapThresh = uint64(*fc.Raft.SnapshotThreshold)
		}
		if !set["trailing-logs"] && fc.Raft.TrailingLogs != nil {
			o.trailing = uint64(*fc.Raft.TrailingLogs)
		}
		if !set["ready-max-lag-entries"] && fc.Raft.ReadyMaxLagEntries != nil {
			o.maxLagN = uint64(*fc.Raft.ReadyMaxLagEntries)
		}
		if !set["ready-max-lag"] && fc.Raft.ReadyMaxLag != nil {
			o.maxLag = fc.Raft.ReadyMaxLag.Duration
		}
		if cfg.Seed, err = fc.Scheduler.apply(fsm.DefaultConfig()); err != nil {
			return cfg, nil, err
		}
		if o.tokens, err = fc.Auth.tokens(); err != nil {
			return cfg, nil, err
		}
		if !set["insecure-dev"] {
			o.insecureDev = fc.Auth.InsecureDev
		}
		if !set["insecure-http"] {
			o.insecureWeb = fc.HTTP.Insecure
		}
		if !set["metrics-require-token"] {
			o.metricsAuth = fc.HTTP.MetricsRequireToken
		}
		if !set["metrics-max-tenants"] && fc.Metrics.MaxTenants != nil {
			o.maxTenants = int(*fc.Metrics.MaxTenants)
		}
		pick("tls-cert", &o.tls.Cert, fc.TLS.Cert)
		pick("tls-key", &o.tls.Key, fc.TLS.Key)
		pick("tls-ca", &o.tls.CA, fc.TLS.CA)
		pick("cluster-name", &o.tls.Cluster, fc.TLS.ClusterName)
		if !set["insecure-raft"] {
			o.plainRaft = fc.Raft.Insecure
		}
	}
	if env := os.Getenv("BARISTA_TOKENS"); env != "" {
		more, err := rpc.ParseTokens(env)
		if err != nil {
			return cfg, nil, fmt.Errorf("BARISTA_TOKENS: %w", err)
		}
		o.tokens = append(o.tokens, more...)
	}
	if o.join != "" {
		join = strings.Split(o.join, ",")
	}
	switch {
	case o.id == "":
		return cfg, nil, usageError("server needs --node-id (or node.id in --config)")
	case o.dataDir == "":
		return cfg, nil, usageError("server needs --data-dir (or node.data_dir in --config)")
	case o.bootstrap && len(join) > 0:
		return cfg, nil, usageError("--bootstrap and --join exclude each other")
	case !validLogLevel(o.logLevel):
		return cfg, nil, usageError("unknown --log-level %q", o.logLevel)
	case o.maxTenants < 0:
		return cfg, nil, usageError("--metrics-max-tenants: %d is negative (want 0 or more; 0: only tenants marked --export-metrics)", o.maxTenants)
	}
	cfg.ID, cfg.DataDir, cfg.RaftAddr, cfg.GRPCAddr, cfg.HTTPAddr = o.id, o.dataDir, o.raftAddr, o.grpcAddr, o.httpAddr
	cfg.Bootstrap = o.bootstrap
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = o.hbTimeout, o.elTimeout
	if cfg.LeaderLeaseTimeout > cfg.HeartbeatTimeout {
		cfg.LeaderLeaseTimeout = cfg.HeartbeatTimeout
	}
	cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.TrailingLogs = o.snapThresh, o.snapIntvl, o.trailing
	cfg.PruneInterval = o.pruneIntvl
	cfg.MaxLagEntries, cfg.MaxLag = o.maxLagN, o.maxLag
	cfg.ClockOffset = o.clockOffset
	return cfg, join, nil
}

// metricsMaxTenants converts --metrics-max-tenants to rpc.Options, where 0
// means the default.
func metricsMaxTenants(n int) int {
	if n == 0 {
		return rpc.MetricsOnlyMarked
	}
	return n
}

func newLogger(level string, json bool) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "barista", Level: hclog.LevelFromString(level), JSONFormat: json, Output: os.Stderr})
}

func runServer(env *cmdEnv, o any, args []string) error {
	opts := o.(*serverOpts)
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	cfg, join, err := opts.resolve()
	if err != nil {
		return err
	}
	if err := checkRaftSecurity(cfg.RaftAddr, opts.tls, opts.plainRaft); err != nil {
		return err
	}
	log := newLogger(opts.logLevel, opts.logJSON)
	cfg.Logger = log
	auth, err := rpc.NewAuth(opts.tokens, opts.insecureDev)
	if err != nil {
		return err
	}
	if auth.Open() {
		log.Warn("--insecure-dev: no tokens configured; every call is served without authentication")
	}
	if exposed, err := checkHTTPExposure(cfg.HTTPAddr, !auth.Open(), opts.tls.Enabled(), opts.insecureWeb); err != nil {
		return err
	} else if exposed {
		log.Warn("--insecure-http: the web console and HTTP API take tokens over plain HTTP on a non-loopback address", "http_addr", cfg.HTTPAddr)
	}
	if opts.unsafeDebug {
		log.Warn("--unsafe-debug is on: Apply accepts envelopes of any version; never use this in production")
	}
	var grpcTLS, peerTLS *tls.Config
	if opts.tls.Enabled() {
		raftServer, raftClient, err := opts.tls.MutualTLS()
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		if grpcTLS, err = opts.tls.GRPCServerTLS(); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		peerTLS = raftClient
		if cfg.StreamLayer, err = raftnode.NewTLSStreamLayer(cfg.RaftAddr, raftServer, raftClient); err != nil {
			return err
		}
	}
	lis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("listening on --grpc-addr %s: %w", cfg.GRPCAddr, err)
	}
	node, err := raftnode.New(cfg)
	if err != nil {
		lis.Close()
		if cfg.StreamLayer != nil {
			cfg.StreamLayer.Close()
		}
		return fmt.Errorf("starting node %s: %w", cfg.ID, err)
	}
	srv := rpc.NewServer(node, rpc.Options{Logger: log.Named("rpc"), Auth: auth, TLS: grpcTLS, PeerTLS: peerTLS, UnsafeDebug: opts.unsafeDebug,
		MetricsMaxTenants: metricsMaxTenants(opts.maxTenants)})
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(lis) }()
	var web *http.Server
	if cfg.HTTPAddr != "" {
		hl, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			srv.Stop(0)
			node.Shutdown()
			return fmt.Errorf("listening on --http-addr %s: %w", cfg.HTTPAddr, err)
		}
		if grpcTLS != nil {
			// Tokens cross this listener (the console, the API): it
			// serves TLS with the node's certificate.
			hl = tls.NewListener(hl, grpcTLS.Clone())
		}
		web = &http.Server{Handler: srv.HTTPHandler(rpc.HTTPOptions{Pprof: opts.pprof, MetricsAuth: opts.metricsAuth}),
			ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
		go func() {
			if err := web.Serve(hl); err != nil && err != http.ErrServerClosed {
				serveErr <- err
			}
		}()
		defer web.Close()
	}
	log.Info("barista server started", "id", cfg.ID, "raft_addr", cfg.RaftAddr, "grpc_addr", cfg.GRPCAddr, "http_addr", cfg.HTTPAddr, "data_dir", cfg.DataDir, "tls", grpcTLS != nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if opts.plainRaft {
		warnInsecureRaft(ctx, log, cfg.RaftAddr, opts.tls, time.Hour)
	}
	if len(join) > 0 {
		go joinLoop(ctx, log, cfg, join, auth.AdminToken(), peerTLS)
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case sig := <-sigs:
		log.Info("shutting down", "signal", sig.String())
		// Leadership first: workers and clients move to the next leader
		// while this node drains its streams.
		node.StepDown()
		cancel()
		srv.Stop(5 * time.Second)
		if err := node.Shutdown(); err != nil {
			log.Error("raft shutdown", "error", err)
		}
		log.Info("stopped")
		return nil
	case <-node.Fatal():
		ferr := node.FSM.FatalErr()
		log.Error("stopping: the replicated log holds an entry this node cannot apply", "error", ferr)
		cancel()
		srv.Stop(0)
		node.Shutdown()
		return &exitError{code: 3, err: fmt.Errorf("barista server: %w", ferr)}
	case err := <-serveErr:
		node.Shutdown()
		return fmt.Errorf("grpc server: %w", err)
	}
}

// joinLoop asks the given members to add this node as a voter until one
// accepts. Joining is idempotent.
func joinLoop(ctx context.Context, log hclog.Logger, cfg raftnode.Config, addrs []string, token string, peerTLS *tls.Config) {
	req := &pb.JoinRequest{Id: cfg.ID, RaftAddr: cfg.RaftAddr, GrpcAddr: cfg.GRPCAddr, HttpAddr: cfg.HTTPAddr}
	backoff := 200 * time.Millisecond
	for {
		for _, addr := range addrs {
			err := tryJoin(ctx, addr, req, token, peerTLS)
			if err == nil {
				log.Info("joined the cluster", "via", addr)
				return
			}
			log.Warn("join attempt failed", "via", addr, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func tryJoin(ctx context.Context, addr string, req *pb.JoinRequest, token string, peerTLS *tls.Config) error {
	creds := insecure.NewCredentials()
	if peerTLS != nil {
		creds = credentials.NewTLS(peerTLS)
	}
	cc, err := grpc.NewClient(strings.TrimSpace(addr), grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	_, err = pb.NewNodeClient(cc).Join(cctx, req, rpc.Bearer(token, false))
	return err
}

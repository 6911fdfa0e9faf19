package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	stdlog "log"
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

	"github.com/baristahq/barista/internal/connlimit"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/rpc"
	"github.com/baristahq/barista/web"
	"github.com/baristahq/barista/webhook"
)

type serverOpts struct {
	fs         *flag.FlagSet
	configFile string
	cfg        serverConfig // the flags write here; resolve merges the file under them
	settings   []setting    // bound to cfg
}

func init() {
	register("server", typed(&spec[serverOpts]{
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
(ROLE[:TENANT]=SECRET,...). Every member needs the same tokens. With no
token configured the server refuses to start unless --insecure-dev is
given, which serves every call unauthenticated (barista dev uses it).

Webhooks (docs/webhooks.md): the leader delivers each tenant's events to
its registered endpoint, signed with a secret derived from the cluster's
webhook key: a file (--webhook-key-file, webhooks.key_file; "barista tls
init" writes one), [webhooks] key in --config, or $BARISTA_WEBHOOK_KEY:
the hex (or padded base64) of at least 32 random bytes, the same on every
server. A shorter key, one made by hand, and the example keys of the
documentation are refused. Endpoints may reach only public addresses
unless --webhook-allow-cidr allows a range.

TLS: --tls-cert, --tls-key and --tls-ca serve gRPC over TLS and run Raft
over mutual TLS (a member whose certificate another CA signed cannot
connect). "barista tls init" makes a local CA and certificates. Without
TLS the server refuses a non-loopback --raft-addr unless --insecure-raft,
and, with tokens configured, a non-loopback --grpc-addr or --http-addr
unless --insecure-grpc or --insecure-http (--insecure-listeners: both):
tokens would cross the network in clear.

SIGINT or SIGTERM shuts the node down cleanly: a leader hands leadership
over first, and the applied index and state hash are recorded in the data
directory (see barista replay --data-dir).`,
		flags: func(fs *flag.FlagSet, o *serverOpts) {
			*o = serverOpts{fs: fs, cfg: defaultServerConfig()}
			o.settings = o.cfg.settings()
			fs.StringVar(&o.configFile, "config", "", "TOML configuration `FILE` (docs/configuration.md)")
			registerServerFlags(fs, o.settings)
		},
		run: runServer,
	}))
}

// resolve merges the defaults, the config file and the flags given on
// the command line, and validates the result.
func (o *serverOpts) resolve() (*serverConfig, error) {
	set := map[string]bool{}
	o.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var file *configFile
	if o.configFile != "" {
		var err error
		if file, err = loadConfigFile(o.configFile); err != nil {
			return nil, err
		}
	}
	if err := mergeConfig(&o.cfg, o.settings, set, file, os.Getenv("BARISTA_TOKENS")); err != nil {
		return nil, usageError("%v", err)
	}
	if _, err := o.cfg.Webhooks.resolveKey(os.Getenv(webhookKeyEnv)); err != nil {
		return nil, usageError("%v", err)
	}
	return &o.cfg, nil
}

func newLogger(level string, json bool) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "barista", Level: hclog.LevelFromString(level), JSONFormat: json, Output: os.Stderr})
}

func runServer(env *cmdEnv, opts *serverOpts, args []string) error {
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	sc, err := opts.resolve()
	if err != nil {
		return err
	}
	cfg, join := sc.Node, sc.Join
	if err := checkRaftSecurity(cfg.RaftAddr, sc.TLS, sc.InsecureRaft); err != nil {
		return err
	}
	auth, err := rpc.NewAuth(sc.Tokens, sc.InsecureDev)
	if err != nil {
		return err
	}
	grpcExposed, err := checkExposure(grpcListener, cfg.GRPCAddr, !auth.Open(), sc.TLS.Enabled(), sc.InsecureGRPC || sc.InsecureListeners)
	if err != nil {
		return err
	}
	httpExposed, err := checkExposure(httpListener, cfg.HTTPAddr, !auth.Open(), sc.TLS.Enabled(), sc.InsecureHTTP || sc.InsecureListeners)
	if err != nil {
		return err
	}
	var grpcTLS, peerTLS, raftServer *tls.Config
	if sc.TLS.Enabled() {
		var raftClient *tls.Config
		if raftServer, raftClient, err = sc.TLS.MutualTLS(); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		if grpcTLS, err = sc.TLS.GRPCServerTLS(); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		peerTLS = raftClient
	}
	// Every listener is bound before anything is logged or started: a
	// port in use ends the server at once with one line naming its flag.
	ls, err := bindListeners(cfg)
	if err != nil {
		return err
	}
	defer ls.close()
	if raftServer != nil {
		cfg.StreamLayer = raftnode.TLSStreamLayerOn(ls.raft, raftServer, peerTLS)
	} else {
		cfg.RaftListener = ls.raft
	}
	ls.raft = nil // the transport owns it now

	log := newLogger(sc.LogLevel, sc.LogJSON)
	cfg.Logger = log
	if auth.Open() {
		log.Warn("--insecure-dev: no tokens configured; every call is served without authentication")
	}
	if grpcExposed {
		log.Warn("--insecure-grpc: gRPC takes tokens, payloads and job output in clear on a non-loopback address", "grpc_addr", cfg.GRPCAddr)
	}
	if httpExposed {
		log.Warn("--insecure-http: the web console and HTTP API take tokens over plain HTTP on a non-loopback address", "http_addr", cfg.HTTPAddr)
	}
	if sc.UnsafeDebug {
		log.Warn("--unsafe-debug is on: Apply accepts envelopes of any version; never use this in production")
	}
	node, err := raftnode.New(cfg)
	if err != nil {
		if cfg.StreamLayer != nil {
			cfg.StreamLayer.Close()
		} else {
			cfg.RaftListener.Close()
		}
		return fmt.Errorf("starting node %s: %w", cfg.ID, err)
	}
	wopt := sc.Webhooks.options()
	wopt.Logger = log.Named("webhook")
	hooks := webhook.OnNode(node, wopt)
	if wopt.Key == nil && node.FSM.HasWebhooks() {
		log.Error("webhook endpoints are registered but this server has no webhook key: it delivers nothing while it leads; set [webhooks] key or $BARISTA_WEBHOOK_KEY, the same on every server")
	}
	connCfg, lowered := connlimit.Fit(sc.Conns, connlimit.DescriptorLimit())
	if lowered {
		log.Warn("limits.connections lowered to fit the open-files limit (raise it with ulimit -n or LimitNOFILE=)",
			"configured", sc.Conns.Max, "now", connCfg.Max, "open_files", connlimit.DescriptorLimit(), "kept_for_raft_and_files", connlimit.DescriptorReserve)
	}
	connCfg.Registerer = node.Metrics.Registry
	conns := connlimit.New(connCfg)
	srv := rpc.NewServer(node, rpc.Options{Conns: conns, Webhooks: hooks, Logger: log.Named("rpc"), Auth: auth, TLS: grpcTLS, PeerTLS: peerTLS, UnsafeDebug: sc.UnsafeDebug, ForwardSingly: sc.ForwardSingly,
		MetricsMaxTenants: metricsMaxTenants(sc.MetricsMaxTenants), Reflection: sc.GRPCReflection || auth.Open(), Limits: sc.Limits})
	serveErr := make(chan error, 2)
	grpcLis := conns.Listen("grpc", ls.grpc)
	ls.grpc = nil
	go func() { serveErr <- srv.Serve(grpcLis) }()
	if hl := ls.http; hl != nil {
		ls.http = nil
		hl = conns.Listen("http", hl)
		if grpcTLS != nil {
			// Tokens cross this listener (the console, the API): it
			// serves TLS with the node's certificate.
			hl = tls.NewListener(hl, grpcTLS.Clone())
		}
		hs := &http.Server{Handler: web.New(srv, web.Options{Pprof: sc.Pprof, MetricsAuth: sc.MetricsAuth, Limits: sc.WebLimits}),
			ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
			ConnState: conns.ConnState, ConnContext: conns.ConnContext, ErrorLog: httpErrorLog(log)}
		go func() {
			if err := hs.Serve(hl); err != nil && err != http.ErrServerClosed {
				serveErr <- err
			}
		}()
		defer hs.Close()
	}
	log.Info("barista server started", "id", cfg.ID, "raft_addr", cfg.AdvertisedRaft(), "grpc_addr", cfg.AdvertisedGRPC(), "http_addr", cfg.HTTPAddr, "data_dir", cfg.DataDir, "tls", grpcTLS != nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	switch {
	case sc.BootstrapNode != "" && sc.BootstrapNode == cfg.ID && len(join) == 0:
		if _, err := node.BootstrapIfNew(); err != nil {
			log.Error("bootstrap", "error", err)
		}
	case sc.BootstrapNode != "" && sc.BootstrapNode == cfg.ID:
		// The bootstrap node first looks for a cluster to join: after its
		// data was lost it must rejoin, never found a second cluster.
		go joinLoop(ctx, log, cfg, join, auth.AdminToken(), peerTLS, sc.BootstrapWait, func() bool {
			done, err := node.BootstrapIfNew()
			if err != nil {
				log.Error("bootstrap", "error", err)
			}
			return done
		})
	case len(join) > 0:
		go joinLoop(ctx, log, cfg, join, auth.AdminToken(), peerTLS, 0, nil)
	case !cfg.Bootstrap:
		go sayWaitingToBeJoined(ctx, log, node, cfg, joinWaitNotice)
	}
	if sc.InsecureRaft {
		warnInsecureRaft(ctx, log, cfg.RaftAddr, sc.TLS, time.Hour)
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

// metricsMaxTenants converts --metrics-max-tenants to rpc.Options, where
// 0 would mean the default.
func metricsMaxTenants(n uint32) int {
	if n == 0 {
		return rpc.MetricsOnlyMarked
	}
	return int(n)
}

// listeners are a server's three listeners, bound before anything starts.
type listeners struct{ raft, grpc, http net.Listener }

// bindListeners binds --raft-addr, --grpc-addr and --http-addr (if set);
// the first that fails ends the server with one line naming its flag.
func bindListeners(cfg raftnode.Config) (*listeners, error) {
	ls := &listeners{}
	for _, l := range []struct {
		flag, addr string
		dst        *net.Listener
	}{{"--raft-addr", cfg.RaftAddr, &ls.raft}, {"--grpc-addr", cfg.GRPCAddr, &ls.grpc}, {"--http-addr", cfg.HTTPAddr, &ls.http}} {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			ls.close()
			return nil, fmt.Errorf("cannot listen on %s %s: %w", l.flag, l.addr, errors.Unwrap(err))
		}
		*l.dst = ln
	}
	return ls, nil
}

// close closes the listeners not yet handed over.
func (ls *listeners) close() {
	for _, l := range []net.Listener{ls.raft, ls.grpc, ls.http} {
		if l != nil {
			l.Close()
		}
	}
}

// joinLoop asks the given members to add this node as a voter until one
// accepts. Joining is idempotent. With fallback set, once wait has passed without a member accepting, it calls fallback (which
// bootstraps a new cluster if this node has no state) and stops if that
// bootstrapped.
func joinLoop(ctx context.Context, log hclog.Logger, cfg raftnode.Config, addrs []string, token string, peerTLS *tls.Config, wait time.Duration, fallback func() bool) {
	req := &clusterpb.JoinRequest{Id: cfg.ID, RaftAddr: cfg.AdvertisedRaft(), GrpcAddr: cfg.AdvertisedGRPC(), HttpAddr: cfg.HTTPAddr}
	backoff := 200 * time.Millisecond
	start := time.Now()
	for {
		if fallback != nil && time.Since(start) > wait {
			if fallback() {
				return
			}
			fallback = nil
		}
		for _, addr := range addrs {
			if addr = strings.TrimSpace(addr); addr == cfg.AdvertisedGRPC() || addr == cfg.GRPCAddr {
				continue // one command line for every node lists this one too
			}
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

func tryJoin(ctx context.Context, addr string, req *clusterpb.JoinRequest, token string, peerTLS *tls.Config) error {
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
	_, err = clusterpb.NewNodeClient(cc).Join(cctx, req, rpc.Bearer(token, false))
	return err
}

// joinWaitNotice is how long a server started with neither --bootstrap
// nor --join stays out of any cluster before it says how to join it.
const joinWaitNotice = 5 * time.Second

// sayWaitingToBeJoined logs, once, after wait, that the node is in no
// cluster and how it gets into one — unless it was joined meanwhile (a
// node that already belongs to a cluster restarts without flags).
func sayWaitingToBeJoined(ctx context.Context, log hclog.Logger, node *raftnode.Node, cfg raftnode.Config, wait time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(wait):
	}
	if node.InCluster() {
		return
	}
	http := ""
	if cfg.HTTPAddr != "" {
		http = " --http-addr " + cfg.HTTPAddr
	}
	log.Warn(fmt.Sprintf("this node is in no cluster yet and waits to be joined: from a member, run barista join --node-id %s --raft-addr %s --grpc-addr %s%s --server MEMBER_GRPC_ADDR; or start it with --join MEMBER_GRPC_ADDR (or --bootstrap, to make it a new cluster of its own)",
		cfg.ID, cfg.AdvertisedRaft(), cfg.AdvertisedGRPC(), http))
}

// httpErrorLog is the HTTP server's error log: the server's logger, but
// for failed TLS handshakes (a client that went away, a scanner, a
// flood of connections), which the connection limits count
// (barista_connections_*) rather than each a line of the log.
func httpErrorLog(log hclog.Logger) *stdlog.Logger {
	return stdlog.New(handshakeFilter{log.Named("http")}, "", 0)
}

type handshakeFilter struct{ log hclog.Logger }

func (f handshakeFilter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("TLS handshake error")) {
		f.log.Warn(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

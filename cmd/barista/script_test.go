package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/baristahq/barista/internal/proc"
	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/rpc"
	"github.com/baristahq/barista/web"
	"github.com/baristahq/barista/webhook"
)

// The command-line tests: every script under testdata/script runs the
// barista binary's Run (as a child process of the test binary, so exit
// codes and output are real) against a one-node cluster started in this
// process for the script, on loopback ports chosen at run time:
// $BARISTA_ADDR is its gRPC address, $HTTP_ADDR its HTTP address. A
// script may start more processes of its own (a worker, in the
// background).
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"barista": func() { os.Exit(Run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

var updateScripts = flag.Bool("update-scripts", false, "rewrite the expected outputs (cmp files) of testdata/script from what the commands print")

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup:               startScriptNode,
		UpdateScripts:       *updateScripts,
		Cmds:                map[string]func(ts *testscript.TestScript, neg bool, args []string){"eventually": eventually, "bigjob": bigJob},
	})
}

// bigJob appends to FILE a line of --from-file whose job has a payload of
// BYTES bytes (too many to write in a script): bigjob FILE BYTES
func bigJob(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: bigjob FILE BYTES")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("bigjob: %v", err)
	}
	f, err := os.OpenFile(ts.MkAbs(args[0]), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	ts.Check(err)
	_, err = fmt.Fprintf(f, "{\"tenant\": \"acme\", \"size\": \"sm\", \"cost\": \"1s\", \"payload\": %q}\n", strings.Repeat("x", n))
	ts.Check(err)
	ts.Check(f.Close())
}

// eventually runs a command until it succeeds, and its output matches
// REGEX if one is given, for up to 30 s (a server started in the
// background needs a moment): eventually ['REGEX'] exec PROGRAM [ARGS...]
func eventually(ts *testscript.TestScript, neg bool, args []string) {
	var re *regexp.Regexp
	if len(args) > 0 && args[0] != "exec" {
		re = regexp.MustCompile("(?m)" + args[0])
		args = args[1:]
	}
	if neg || len(args) < 2 || args[0] != "exec" {
		ts.Fatalf("usage: eventually ['REGEX'] exec PROGRAM [ARGS...]")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ts.Exec(args[1], args[2:]...)
		if err == nil && (re == nil || re.MatchString(ts.ReadFile("stdout"))) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s: still failing or not matching after 30s (%v)", strings.Join(args[1:], " "), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startScriptNode starts a one-node cluster in open mode for a script.
func startScriptNode(env *testscript.Env) error {
	raftLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		raftLis.Close()
		return err
	}
	httpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		raftLis.Close()
		grpcLis.Close()
		return err
	}
	cfg := raftnode.DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.Bootstrap = "n1", filepath.Join(env.WorkDir, ".node"), true
	cfg.RaftListener, cfg.RaftAddr = raftLis, raftLis.Addr().String()
	cfg.GRPCAddr, cfg.HTTPAddr = grpcLis.Addr().String(), httpLis.Addr().String()
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	cfg.Seed.HeartbeatIntervalMs, cfg.Seed.SelfKillAfterMs, cfg.Seed.Sched.LeaseTimeoutMs = 200, 2000, 4000
	node, err := raftnode.New(cfg)
	if err != nil {
		grpcLis.Close()
		httpLis.Close()
		return err
	}
	auth, err := rpc.NewAuth(nil, true)
	if err != nil {
		return err
	}
	// A webhook key, and endpoints allowed on loopback (the scripts' own
	// receivers), as barista dev does.
	hooks := webhook.OnNode(node, webhook.Options{Key: webhook.Key(strings.Repeat("k", webhook.MinKeyBytes)),
		Guard: webhook.NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})})
	srv := rpc.NewServer(node, rpc.Options{Auth: auth, Webhooks: hooks})
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(grpcLis) }()
	hs := &http.Server{Handler: web.New(srv, web.Options{}), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(httpLis)
	env.Defer(func() {
		hs.Close()
		srv.Stop(5 * time.Second)
		<-served
		node.Shutdown()
	})
	deadline := time.Now().Add(20 * time.Second)
	for !(node.IsLeader() && node.FSM.Configured()) {
		if time.Now().After(deadline) {
			return os.ErrDeadlineExceeded
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A race-enabled command sleeps a second at exit (the race
	// detector's atexit_sleep_ms) unless told not to: a script runs dozens.
	env.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	env.Setenv("BARISTA_ADDR", cfg.GRPCAddr)
	env.Setenv("HTTP_ADDR", cfg.HTTPAddr)
	// Three more free addresses, for a second server a script starts.
	free, err := proc.FreeAddrs(3)
	if err != nil {
		return err
	}
	env.Setenv("FREE_RAFT", free[0])
	env.Setenv("FREE_GRPC", free[1])
	env.Setenv("FREE_HTTP", free[2])
	return nil
}

package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baristahq/barista/test/cluster"
)

// TestGRPCExposure: with tokens, a non-loopback gRPC address without TLS
// is refused at start, naming --insecure-grpc, as the HTTP listener is
// (TestHTTPExposure): tokens, payloads and job output would cross the
// network in clear. --insecure-grpc starts it with a warning, and
// --insecure-listeners allows the gRPC and the HTTP listener together.
func TestGRPCExposure(t *testing.T) {
	c := cluster.New(t, "--config", tokenConfig(t, ""))
	n := c.Add("n1")
	port := n.GRPCAddr[strings.LastIndexByte(n.GRPCAddr, ':')+1:]
	n.GRPCAddr = "0.0.0.0:" + port
	n.Args = []string{"--grpc-advertise", "127.0.0.1:" + port}
	n.Start("--bootstrap")
	err, exited := n.Wait(20 * time.Second)
	want := fmt.Sprintf("--grpc-addr %s is not a loopback address and TLS is off: tokens would cross the network in clear; "+
		"configure TLS (--tls-cert/--tls-key/--tls-ca), bind 127.0.0.1, or accept the risk with --insecure-grpc (or --insecure-listeners for gRPC and HTTP)", n.GRPCAddr)
	if !exited || exitCode(err) != 2 {
		t.Fatalf("a non-loopback gRPC address without TLS started (exited %v, err %v)", exited, err)
	}
	if !strings.Contains(n.Log(), want) {
		t.Fatalf("the refusal does not say:\n%s\nlog:\n%s", want, n.Log())
	}

	c.Token = adminToken
	n.Start("--bootstrap", "--insecure-grpc")
	c.WaitLeader(20 * time.Second)
	if warning := "--insecure-grpc: gRPC takes tokens, payloads and job output in clear on a non-loopback address: grpc_addr=" + n.GRPCAddr; !strings.Contains(n.Log(), warning) {
		t.Fatalf("no warning %q in the log:\n%s", warning, n.Log())
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}

	// Both listeners exposed: --insecure-grpc alone leaves the HTTP
	// refusal; --insecure-listeners allows both.
	n.HTTPAddr = fmt.Sprintf("0.0.0.0:%d", cluster.FreePort(t))
	mark := len(n.Log())
	n.Start("--insecure-grpc")
	if err, exited := n.Wait(20 * time.Second); !exited || exitCode(err) != 2 || !strings.Contains(n.Log()[mark:], "--http-addr "+n.HTTPAddr+" is not a loopback address") {
		t.Fatalf("--insecure-grpc with an exposed HTTP address: exited %v, %v\n%s", exited, err, n.Log()[mark:])
	}
	mark = len(n.Log())
	n.Start("--insecure-listeners")
	c.WaitLeader(20 * time.Second)
	for _, w := range []string{"--insecure-grpc: gRPC takes tokens", "--insecure-http: the web console and HTTP API take tokens over plain HTTP"} {
		if !strings.Contains(n.Log()[mark:], w) {
			t.Fatalf("--insecure-listeners: no warning %q:\n%s", w, n.Log()[mark:])
		}
	}
}

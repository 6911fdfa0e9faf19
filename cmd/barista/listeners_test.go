package main

import (
	"fmt"
	"testing"
)

// TestTokenListenerExposure: with tokens and without TLS, a gRPC or HTTP
// address others can reach is refused, naming its flag and the flag that
// allows it; loopback, TLS, no tokens, or the flag let it start.
func TestTokenListenerExposure(t *testing.T) {
	const refusal = "%s %s is not a loopback address and TLS is off: tokens would cross the network in clear; " +
		"configure TLS (--tls-cert/--tls-key/--tls-ca), bind 127.0.0.1, or accept the risk with %s (or --insecure-listeners for gRPC and HTTP)"
	cases := []struct {
		l                     tokenListener
		addr                  string
		tokens, tls, insecure bool
		exposed               bool
		want                  string
	}{
		{grpcListener, "127.0.0.1:7400", true, false, false, false, ""},
		{grpcListener, "localhost:7400", true, false, false, false, ""},
		{grpcListener, "0.0.0.0:7400", true, false, false, true, fmt.Sprintf(refusal, "--grpc-addr", "0.0.0.0:7400", "--insecure-grpc")},
		{grpcListener, ":7400", true, false, false, true, fmt.Sprintf(refusal, "--grpc-addr", ":7400", "--insecure-grpc")},
		{grpcListener, "10.0.0.1:7400", true, false, false, true, fmt.Sprintf(refusal, "--grpc-addr", "10.0.0.1:7400", "--insecure-grpc")},
		{grpcListener, "10.0.0.1:7400", true, false, true, true, ""},
		{grpcListener, "10.0.0.1:7400", true, true, false, false, ""},
		{grpcListener, "10.0.0.1:7400", false, false, false, false, ""},
		{httpListener, "10.0.0.1:7480", true, false, false, true, fmt.Sprintf(refusal, "--http-addr", "10.0.0.1:7480", "--insecure-http")},
		{httpListener, "", true, false, false, false, ""},
		{grpcListener, "10.0.0.1", true, false, false, false, `--grpc-addr "10.0.0.1": address 10.0.0.1: missing port in address`},
	}
	for _, c := range cases {
		exposed, err := checkExposure(c.l, c.addr, c.tokens, c.tls, c.insecure)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want || exposed != c.exposed {
			t.Errorf("%s %q (tokens %v, tls %v, insecure %v): exposed %v, %q\nwant exposed %v, %q", c.l.addrFlag, c.addr, c.tokens, c.tls, c.insecure, exposed, got, c.exposed, c.want)
		}
	}
}

// TestInsecureListenerSettings: grpc.insecure in the file, --insecure-grpc
// over it, and --insecure-listeners.
func TestInsecureListenerSettings(t *testing.T) {
	p := writeConfig(t, "[grpc]\ninsecure = true\n")
	base := []string{"--node-id", "n1", "--data-dir", t.TempDir()}
	if o := serverFlags(t, append(base, "--config", p)...); !o.InsecureGRPC || o.InsecureHTTP || o.InsecureListeners {
		t.Fatalf("from the file: grpc %v http %v listeners %v", o.InsecureGRPC, o.InsecureHTTP, o.InsecureListeners)
	}
	if o := serverFlags(t, append(base, "--config", p, "--insecure-grpc=false")...); o.InsecureGRPC {
		t.Fatal("--insecure-grpc=false did not override the file")
	}
	if o := serverFlags(t, append(base, "--insecure-listeners")...); !o.InsecureListeners || o.InsecureGRPC || o.InsecureHTTP {
		t.Fatalf("--insecure-listeners: grpc %v http %v listeners %v", o.InsecureGRPC, o.InsecureHTTP, o.InsecureListeners)
	}
}

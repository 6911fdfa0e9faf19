package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// TestTokenInClearRefused: with a token and no TLS, New refuses a node
// that is not on this machine, naming it and the switch; a loopback
// node, TLS, no token, or InsecureGRPC let it through.
func TestTokenInClearRefused(t *testing.T) {
	const token = "s3cr3t-client-0001"
	for _, c := range []struct {
		addrs   []string
		opts    Options
		refused string
	}{
		{[]string{"127.0.0.1:7400"}, Options{Token: token}, ""},
		{[]string{"[::1]:7400", "localhost:7400", "unix:///run/barista.sock"}, Options{Token: token}, ""},
		{[]string{"127.0.0.1:7400", "10.0.0.2:7400"}, Options{Token: token}, "10.0.0.2:7400"},
		{[]string{"barista.internal:7400"}, Options{Token: token}, "barista.internal:7400"},
		{[]string{"dns:///barista.internal:7400"}, Options{Token: token}, "dns:///barista.internal:7400"},
		{[]string{"10.0.0.2:7400"}, Options{}, ""},
		{[]string{"10.0.0.2:7400"}, Options{Token: token, TLS: &tls.Config{}}, ""},
		{[]string{"10.0.0.2:7400"}, Options{Token: token, InsecureGRPC: true}, ""},
	} {
		cl, err := New(c.addrs, c.opts)
		if c.refused == "" {
			if err != nil {
				t.Errorf("New(%v, %v): %v", c.addrs, c.opts, err)
			} else {
				cl.Close()
			}
			continue
		}
		if !errors.Is(err, ErrTokenInClear) || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "InsecureGRPC") {
			t.Errorf("New(%v, %v): %v; want ErrTokenInClear naming %s and Options.InsecureGRPC", c.addrs, c.opts, err, c.refused)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("the refusal shows the token: %v", err)
		}
	}
}

// TestTokenNeverPrinted: a Client, its Options and its dial options
// print without the token, whatever the verb.
func TestTokenNeverPrinted(t *testing.T) {
	const token = "s3cr3t-client-0002"
	opts := Options{Token: token, InsecureGRPC: true}
	cl, err := New([]string{"10.0.0.2:7400"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var printed []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		printed = append(printed, fmt.Sprintf(verb, cl), fmt.Sprintf(verb, opts), fmt.Sprintf(verb, &opts),
			fmt.Sprintf(verb, bearer{token: token}), fmt.Sprintf(verb, DialOptions(token, nil)), fmt.Sprintf(verb, []grpc.DialOption{grpc.WithPerRPCCredentials(bearer{token: token})}))
	}
	for _, p := range printed {
		if strings.Contains(p, token) {
			t.Errorf("printed: %s", p)
		}
	}
	if got := fmt.Sprintf("%+v", cl); got != "barista client of 10.0.0.2:7400" {
		t.Errorf("%%+v of a client: %q", got)
	}
}

// TestDialOptionsRefuseClear: a connection made with DialOptions and no
// TLS fails its calls to a node that is not on this machine (the token
// is never sent); InsecureDialOptions sends it; on loopback both do.
func TestDialOptionsRefuseClear(t *testing.T) {
	var ip string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			ip = n.IP.String()
			break
		}
	}
	if ip == "" {
		t.Skip("no non-loopback IPv4 address on this machine")
	}
	const token = "s3cr3t-client-0005"
	var got atomic.Int64 // calls that carried the token
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("authorization")) > 0 {
			got.Add(1)
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	for _, host := range []string{ip, "127.0.0.1"} {
		ln, err := net.Listen("tcp", host+":0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		for _, c := range []struct {
			name string
			opts []grpc.DialOption
			ok   bool
		}{
			{"DialOptions", DialOptions(token, nil), host != ip},
			{"InsecureDialOptions", InsecureDialOptions(token), true},
		} {
			cc, err := grpc.NewClient(ln.Addr().String(), c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
			cancel()
			cc.Close()
			if c.ok != (err == nil) || (err != nil && (!strings.Contains(err.Error(), ErrTokenInClear.Error()) || strings.Contains(err.Error(), token))) {
				t.Errorf("%s to %s: %v; want ok %v (or a refusal naming the cause, not the token)", c.name, host, err, c.ok)
			}
		}
	}
	srv.Stop()
	if got.Load() != 3 {
		t.Errorf("%d calls carried the token; want 3 (none to the non-loopback node in clear but with InsecureDialOptions)", got.Load())
	}
}

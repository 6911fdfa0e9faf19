package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
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
			fmt.Sprintf(verb, bearer(token)), fmt.Sprintf(verb, DialOptions(token, nil)), fmt.Sprintf(verb, []grpc.DialOption{grpc.WithPerRPCCredentials(bearer(token))}))
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

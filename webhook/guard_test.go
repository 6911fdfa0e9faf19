package webhook

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestGuardRefuses: loopback, private, link-local, metadata and other
// special addresses are refused, IPv4-mapped forms included, unless an
// allowed prefix holds them.
func TestGuardRefuses(t *testing.T) {
	allow, err := ParsePrefixes([]string{"127.0.0.0/8", "10.20.0.0/16", "fd00::1"})
	if err != nil {
		t.Fatal(err)
	}
	open, allowing := NewGuard(nil), NewGuard(allow)
	for _, c := range []struct {
		addr    string
		why     string // refused by the open guard ("": allowed)
		allowed bool   // by the allowing guard
	}{
		{"127.0.0.1", "a loopback address", true},
		{"127.9.9.9", "a loopback address", true},
		{"::1", "a loopback address", false},
		{"::ffff:127.0.0.1", "a loopback address", true},
		{"10.1.2.3", "a private address", false},
		{"10.20.3.4", "a private address", true},
		{"172.16.0.1", "a private address", false},
		{"192.168.1.1", "a private address", false},
		{"169.254.169.254", "a cloud metadata address", false},
		{"fd00:ec2::254", "a cloud metadata address", false},
		{"169.254.1.1", "a link-local address", false},
		{"fe80::1", "a link-local address", false},
		{"fd00::1", "a private address", true},
		{"fd00::2", "a private address", false},
		{"0.0.0.0", "an unspecified address", false},
		{"0.1.2.3", "a \"this network\" address", false},
		{"::", "an unspecified address", false},
		{"100.64.0.1", "a shared (carrier-grade NAT) address", false},
		{"239.1.1.1", "a multicast address", false},
		{"224.0.0.1", "a link-local address", false},
		{"255.255.255.255", "the broadcast address", false},
		{"64:ff9b::a00:1", "a NAT64 address", false},
		{"2002:a00:1::", "a 6to4 address", false},
		{"93.184.216.34", "", true},
		{"2606:2800:220:1:248:1893:25c8:1946", "", true},
	} {
		a := netip.MustParseAddr(c.addr)
		err := open.Check(a)
		switch {
		case c.why == "" && err != nil:
			t.Errorf("%s refused: %v", c.addr, err)
		case c.why != "" && (err == nil || err.(*AddrError).Why != c.why):
			t.Errorf("%s: %v, want %s", c.addr, err, c.why)
		}
		if err := allowing.Check(a); (err == nil) != c.allowed {
			t.Errorf("%s with allow_cidrs: %v", c.addr, err)
		}
	}
	if err := open.Check(netip.MustParseAddr("127.0.0.1")); err.Error() !=
		"127.0.0.1 is a loopback address, refused (a server's [webhooks] allow_cidrs or --webhook-allow-cidr may allow it)" {
		t.Fatalf("message: %v", err)
	}
	if _, err := ParsePrefixes([]string{"10.0.0.0/33"}); err == nil || err.Error() != `"10.0.0.0/33" is not a CIDR (like 10.1.0.0/16) or an address` {
		t.Fatalf("bad CIDR: %v", err)
	}
	for host, refused := range map[string]bool{"localhost": true, "a.localhost": true, "[::1]": false, "::1": true, "hooks.example.com": false, "10.0.0.1": true} {
		if err := open.CheckHost(host); (err != nil) != refused {
			t.Errorf("CheckHost(%q): %v", host, err)
		}
	}
}

// TestClientChecksAtDial: the client's dialer refuses a loopback server,
// whether the URL names an address or a name that resolves to one (the
// check runs after DNS resolution), and the allowing guard reaches it.
func TestClientChecksAtDial(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	client := NewGuard(nil).NewClient(ClientOptions{Timeout: 5 * time.Second})
	for _, u := range []string{srv.URL, "http://localhost" + port} {
		resp, err := client.Post(u, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: reached", u)
		}
		if ae, ok := refusedAddr(err); !ok || ae.Why != "a loopback address" {
			t.Fatalf("%s: %v", u, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("%d requests reached the server", hits.Load())
	}
	allowed := NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).NewClient(ClientOptions{Timeout: 5 * time.Second})
	resp, err := allowed.Post(srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Fatalf("hits %d", hits.Load())
	}
}

// TestRedirectNotFollowed: a 3xx is the answer; its target is never
// requested.
func TestRedirectNotFollowed(t *testing.T) {
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer target.Close()
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	client := NewGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).NewClient(ClientOptions{Timeout: 5 * time.Second})
	resp, err := client.Post(redirect.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || hits.Load() != 0 {
		t.Fatalf("status %d, %d requests followed", resp.StatusCode, hits.Load())
	}
	if got := describe(resp.StatusCode, nil, time.Second); got != "HTTP 307 (redirects are not followed)" {
		t.Fatalf("described as %q", got)
	}
}

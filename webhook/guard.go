package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Guard decides which addresses a webhook request may connect to. An
// endpoint URL is tenant-facing configuration: without a guard it would
// let whoever sets one probe the servers' own network. Loopback, private,
// link-local (cloud metadata services among them), shared, multicast and
// other special addresses are refused unless an allowed prefix holds
// them. The check runs on the address being dialled, after DNS
// resolution, so a name that resolves (or later rebinds) to a refused
// address is refused too.
type Guard struct {
	allow []netip.Prefix
}

// NewGuard returns a guard that also lets through the given prefixes.
func NewGuard(allow []netip.Prefix) *Guard {
	g := &Guard{}
	for _, p := range allow {
		g.allow = append(g.allow, p.Masked())
	}
	return g
}

// ParsePrefixes reads CIDRs ("10.0.0.0/8", "fd00::/8"); a bare address
// is its own /32 or /128.
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR (like 10.1.0.0/16) or an address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Special ranges beyond what netip.Addr's predicates name.
var refusedPrefixes = []struct {
	p   netip.Prefix
	why string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
}

// AddrError is a refused address.
type AddrError struct {
	Addr netip.Addr
	Why  string
}

func (e *AddrError) Error() string {
	return fmt.Sprintf("%s is %s, refused (a server's [webhooks] allow_cidrs or --webhook-allow-cidr may allow it)", e.Addr, e.Why)
}

// Check returns an *AddrError if a request may not connect to a.
func (g *Guard) Check(a netip.Addr) error {
	a = a.Unmap()
	for _, p := range g.allow {
		if p.Contains(a) {
			return nil
		}
	}
	why := ""
	switch {
	case !a.IsValid():
		why = "not an address"
	case a.IsLoopback():
		why = "a loopback address"
	case a == netip.MustParseAddr("169.254.169.254") || a == netip.MustParseAddr("fd00:ec2::254"):
		why = "a cloud metadata address"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		why = "a link-local address"
	case a.IsPrivate():
		why = "a private address"
	case a.IsUnspecified():
		why = "an unspecified address"
	case a.IsMulticast() || a.IsInterfaceLocalMulticast():
		why = "a multicast address"
	case a.Is4() && a == netip.MustParseAddr("255.255.255.255"):
		why = "the broadcast address"
	}
	if why == "" {
		for _, r := range refusedPrefixes {
			if r.p.Contains(a) {
				why = r.why
				break
			}
		}
	}
	if why == "" {
		return nil
	}
	return &AddrError{Addr: a, Why: why}
}

// CheckHost refuses a URL host that is an address the guard refuses, or
// "localhost", before anything is dialled (an early, clear answer to the
// admin; names are checked again, resolved, when dialled).
func (g *Guard) CheckHost(host string) error {
	if a, err := netip.ParseAddr(host); err == nil {
		return g.Check(a)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return g.Check(netip.MustParseAddr("127.0.0.1"))
	}
	return nil
}

// control is the dialer's Control: it sees the resolved address of every
// connection attempt.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &AddrError{Why: "not an address: " + address}
	}
	return g.Check(ap.Addr())
}

// ClientOptions bound a delivery client.
type ClientOptions struct {
	// Timeout bounds a whole request, connection and response included.
	Timeout time.Duration
	// DialTimeout bounds a connection (default min(Timeout, 5 s)).
	DialTimeout time.Duration
}

// NewClient returns the HTTP client deliveries use: every connection goes
// through the guard, no proxy is used (it would dial for us, unchecked),
// redirects are never followed (the 3xx is the answer), and every request
// is bounded by the timeout.
func (g *Guard) NewClient(o ClientOptions) *http.Client {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = min(o.Timeout, 5*time.Second)
	}
	d := &net.Dialer{Timeout: o.DialTimeout, Control: g.control, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		TLSHandshakeTimeout:    o.DialTimeout,
		ResponseHeaderTimeout:  o.Timeout,
		MaxResponseHeaderBytes: 16 << 10,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        90 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// refusedAddr returns the guard's refusal inside a request error.
func refusedAddr(err error) (*AddrError, bool) {
	var ae *AddrError
	ok := errors.As(err, &ae)
	return ae, ok
}

// errTimeout reports whether a request error is a timeout.
func errTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

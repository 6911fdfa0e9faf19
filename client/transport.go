package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc/credentials"
)

// A token never crosses a network in clear by accident. A Client with a
// token and no TLS refuses, in New, a node address that is not on this
// machine (a loopback IP address, "localhost", a Unix socket) unless
// Options.InsecureGRPC says to send it anyway — the switch named like
// the servers' --insecure-grpc. Nor is a token ever printed: a Client,
// its Options and its credentials print without it (%v, %+v, %#v).

// ErrTokenInClear is the refusal of New: the token would go in clear to
// a node that is not on this machine.
var ErrTokenInClear = errors.New("the token would cross the network in clear")

// TokenInClear returns the first of addrs a token would reach in clear
// over a network ("" if none): with a token and no TLS, the first
// address not on this machine. Host names other than "localhost" are
// not resolved: they count as the network's.
func TokenInClear(addrs []string, token string, tlsCfg *tls.Config) string {
	if token == "" || tlsCfg != nil {
		return ""
	}
	for _, a := range addrs {
		if a = strings.TrimSpace(a); a != "" && !onThisMachine(a) {
			return a
		}
	}
	return ""
}

// onThisMachine reports whether a gRPC target is this machine's: a Unix
// socket, or a host that is a loopback IP address or "localhost".
func onThisMachine(target string) bool {
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return true
	}
	for _, scheme := range []string{"dns:///", "passthrough:///", "dns:"} {
		target = strings.TrimPrefix(target, scheme)
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = target
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// secured reports whether a call's connection has TLS (privacy and
// integrity).
func secured(ctx context.Context) bool {
	ri, ok := credentials.RequestInfoFromContext(ctx)
	if !ok || ri.AuthInfo == nil {
		return false
	}
	ai, ok := ri.AuthInfo.(interface {
		GetCommonAuthInfo() credentials.CommonAuthInfo
	})
	return ok && ai.GetCommonAuthInfo().SecurityLevel >= credentials.PrivacyAndIntegrity
}

// authority is the host:port of a call's audience URI ("https://host:port/service").
func authority(uri string) string {
	if _, rest, ok := strings.Cut(uri, "://"); ok {
		uri = rest
	}
	host, _, _ := strings.Cut(uri, "/")
	return host
}

// String describes the client by its nodes, never its token.
func (c *Client) String() string {
	return fmt.Sprintf("barista client of %s", strings.Join(c.addrs, ","))
}

// GoString is String: %#v shows no token either.
func (c *Client) GoString() string { return c.String() }

// String shows the options with the token redacted.
func (o Options) String() string {
	token := ""
	if o.Token != "" {
		token = "[redacted]"
	}
	return fmt.Sprintf("{Token:%s TLS:%t InsecureGRPC:%t CallTimeout:%s ConnectTimeout:%s}", token, o.TLS != nil, o.InsecureGRPC, o.CallTimeout, o.ConnectTimeout)
}

// GoString is String: %#v shows no token either.
func (o Options) GoString() string { return "client.Options" + o.String() }

// String never shows the token.
func (bearer) String() string { return "Bearer [redacted]" }

// GoString is String.
func (b bearer) GoString() string { return b.String() }

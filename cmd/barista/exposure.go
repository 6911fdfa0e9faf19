package main

import (
	"net"
	"strings"
)

// isLoopback reports whether a listen address binds only the loopback
// interface. An empty host (all interfaces) and names other than
// localhost are not loopback.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkHTTPExposure refuses to serve tokens in clear to the network: with
// tokens configured, a non-loopback --http-addr needs TLS, unless the
// operator accepts the risk with --insecure-http.
func checkHTTPExposure(addr string, tokens, tlsOn, insecure bool) error {
	if addr == "" || !tokens || tlsOn || insecure || isLoopback(addr) {
		return nil
	}
	return usageError("--http-addr %s is not a loopback address and TLS is off: tokens would cross the network in clear; "+
		"configure TLS (--tls-cert/--tls-key/--tls-ca), bind 127.0.0.1, or accept the risk with --insecure-http", addr)
}


package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baristahq/barista/raftnode"
)

// loopbackOnly reports whether a listen address binds only loopback: an
// empty host or 0.0.0.0 listens on every interface; a host name counts as
// loopback only if it resolves to loopback addresses only.
func loopbackOnly(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "" {
		return false, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return false, err
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// raftExposed reports whether Raft would run without TLS on an address
// that is not loopback: anyone who reaches it can append entries to the
// replicated log.
func raftExposed(addr string, files raftnode.TLSFiles) (bool, error) {
	if files.Enabled() {
		return false, nil
	}
	loop, err := loopbackOnly(addr)
	if err != nil {
		return false, fmt.Errorf("--raft-addr %q: %w", addr, err)
	}
	return !loop, nil
}

// tokenListener is a listener that takes tokens: the flag of its address
// and the flag that accepts serving it without TLS on a non-loopback
// address.
type tokenListener struct{ addrFlag, allowFlag string }

var (
	grpcListener = tokenListener{addrFlag: "--grpc-addr", allowFlag: "--insecure-grpc"}
	httpListener = tokenListener{addrFlag: "--http-addr", allowFlag: "--insecure-http"}
)

// checkExposure refuses to serve tokens in clear to the network: with
// tokens configured, a non-loopback address of l needs TLS, unless the
// operator accepts the risk with l's flag (or --insecure-listeners, which
// insecure then reflects). It reports whether the listener is exposed
// that way (to warn about it).
func checkExposure(l tokenListener, addr string, tokens, tlsOn, insecure bool) (exposed bool, err error) {
	if addr == "" || !tokens || tlsOn {
		return false, nil
	}
	loop, err := loopbackOnly(addr)
	if err != nil {
		return false, fmt.Errorf("%s %q: %w", l.addrFlag, addr, err)
	}
	if loop {
		return false, nil
	}
	if !insecure {
		return true, usageError("%s %s is not a loopback address and TLS is off: tokens would cross the network in clear; "+
			"configure TLS (--tls-cert/--tls-key/--tls-ca), bind 127.0.0.1, or accept the risk with %s (or --insecure-listeners for gRPC and HTTP)", l.addrFlag, addr, l.allowFlag)
	}
	return true, nil
}

// checkRaftSecurity refuses to start a server whose Raft port would be
// open to the network without TLS, unless the operator allowed it with
// --insecure-raft; and checks the cluster name.
func checkRaftSecurity(addr string, files raftnode.TLSFiles, allowPlain bool) error {
	if files.Cluster != "" {
		if err := raftnode.ValidateClusterName(files.Cluster); err != nil {
			return fmt.Errorf("--cluster-name (tls.cluster_name): %w", err)
		}
	}
	exposed, err := raftExposed(addr, files)
	if err != nil || !exposed || allowPlain {
		return err
	}
	return fmt.Errorf("refusing to start: --raft-addr %s is not a loopback address and TLS is off, so anyone who reaches it could rewrite the replicated log; set --tls-cert, --tls-key and --tls-ca, or pass --insecure-raft (raft.insecure = true) to accept the risk", addr)
}

// warnInsecureRaft logs, when --insecure-raft lets Raft run without TLS on
// a non-loopback address, a warning at once and then every interval until
// ctx ends. The returned channel is closed when its goroutine has ended
// (nil if there is none).
func warnInsecureRaft(ctx context.Context, log hclog.Logger, addr string, files raftnode.TLSFiles, every time.Duration) <-chan struct{} {
	if exposed, err := raftExposed(addr, files); err != nil || !exposed {
		return nil
	}
	warn := func() {
		log.Warn("--insecure-raft: Raft runs without TLS on a non-loopback address; anyone who reaches it can rewrite the replicated log and stop every node", "raft_addr", addr)
	}
	warn()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				warn()
			}
		}
	}()
	return done
}

package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// TLSConfig returns a TLS configuration that verifies the nodes with the
// CA certificates in caFile (PEM) and, if certFile and keyFile are given,
// presents that client certificate (for nodes that ask for one). The
// errors name the file that is wrong.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file: %s holds no PEM certificate", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// probeTimeout bounds the handshake diagnose tries on a node it could
// not connect to.
const probeTimeout = time.Second

// diagnose tells why a node that accepts TCP connections gave no gRPC
// connection, when it is a matter of TLS the caller can fix: a plaintext
// client and a TLS server, a TLS client and a plaintext server, or a
// certificate the client does not trust. It returns "" when the node does
// not answer at all (it is down, or slow): that is for retries.
func diagnose(ctx context.Context, addr string, cfg *tls.Config) string {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return ""
	}
	defer raw.Close()
	if d, ok := ctx.Deadline(); ok {
		raw.SetDeadline(d)
	}
	probe := cfg
	if cfg == nil {
		// Only to learn whether the server speaks TLS: nothing is sent
		// over this connection.
		probe = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	} else {
		probe = cfg.Clone()
		if probe.ServerName == "" {
			probe.ServerName, _, _ = net.SplitHostPort(addr)
		}
	}
	herr := tls.Client(raw, probe).HandshakeContext(ctx)
	var rec tls.RecordHeaderError
	switch {
	case cfg == nil && herr == nil:
		return fmt.Sprintf("the server at %s speaks TLS and this client does not: pass --tls-ca FILE (BARISTA_TLS_CA; the Go client: Options.TLS)", addr)
	case cfg != nil && errors.As(herr, &rec):
		return fmt.Sprintf("the server at %s does not speak TLS (it answers in plaintext): leave out --tls-ca, or start the server with TLS", addr)
	case cfg != nil && herr != nil && !errors.Is(herr, context.DeadlineExceeded) && !isTimeout(herr):
		return fmt.Sprintf("TLS with the server at %s failed: %v", addr, herr)
	}
	return ""
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

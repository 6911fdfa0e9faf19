package raftnode

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/raft"
)

// TLSFiles names a PEM certificate, its key, and the CA that signed every
// member's certificate.
type TLSFiles struct {
	Cert, Key, CA string
}

// Enabled reports whether any file is set.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

func (f TLSFiles) load() (tls.Certificate, *x509.CertPool, error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return tls.Certificate{}, nil, errors.New("TLS needs a certificate, its key and the CA certificate")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("loading %s / %s: %w", f.Cert, f.Key, err)
	}
	pool, err := LoadCAPool(f.CA)
	return cert, pool, err
}

// LoadCAPool reads a PEM CA bundle.
func LoadCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// MutualTLS returns the server and client configurations a member uses
// with its peers: both sides present a certificate signed by the CA and
// verify the other's.
func (f TLSFiles) MutualTLS() (server, client *tls.Config, err error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, nil, err
	}
	server = &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS12,
	}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client, nil
}

// GRPCServerTLS returns the gRPC server configuration: clients verify the
// server's certificate; a client certificate is checked against the CA if
// one is presented (tokens do the authorization).
func (f TLSFiles) GRPCServerTLS() (*tls.Config, error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}, nil
}

// tlsLayer is a raft.StreamLayer over mutual TLS.
type tlsLayer struct {
	net.Listener
	advertise net.Addr
	client    *tls.Config
}

// NewTLSStreamLayer listens on bind for Raft traffic over mutual TLS: a
// peer whose certificate another CA signed cannot connect, in either
// direction.
func NewTLSStreamLayer(bind string, server, client *tls.Config) (raft.StreamLayer, error) {
	addr, err := net.ResolveTCPAddr("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft address %q: %w", bind, err)
	}
	ln, err := tls.Listen("tcp", bind, server)
	if err != nil {
		return nil, fmt.Errorf("raft TLS listener on %s: %w", bind, err)
	}
	return &tlsLayer{Listener: ln, advertise: addr, client: client}, nil
}

// Accept completes the handshake before handing the connection to Raft,
// so that a peer of another CA is refused at once.
func (l *tlsLayer) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := c.(*tls.Conn)
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			c.Close()
			continue
		}
		tc.SetDeadline(time.Time{})
		return tc, nil
	}
}

func (l *tlsLayer) Addr() net.Addr { return l.advertise }

func (l *tlsLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(address), l.client)
}

package raftnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// DefaultClusterName is the cluster name when none is configured.
const DefaultClusterName = "default"

// TLSFiles names a PEM certificate, its key, and the CA that signed every
// member's certificate, and the cluster whose member name the certificates
// of members carry.
type TLSFiles struct {
	Cert, Key, CA string
	// Cluster is the cluster name (DefaultClusterName if empty).
	Cluster string
}

// Enabled reports whether any file is set.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// MemberName is the DNS name every member's certificate carries and that
// only members' certificates carry: server.CLUSTER.barista. A certificate
// of the same CA without it (a client's, a worker's) is never a member.
func (f TLSFiles) MemberName() string { return MemberName(f.Cluster) }

// MemberName returns the member name of a cluster (DefaultClusterName if
// cluster is empty).
func MemberName(cluster string) string {
	if cluster == "" {
		cluster = DefaultClusterName
	}
	return "server." + cluster + ".barista"
}

// ValidateClusterName checks that a cluster name is one DNS label.
func ValidateClusterName(name string) error {
	ok := len(name) >= 1 && len(name) <= 63 && name[0] != '-' && name[len(name)-1] != '-'
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("cluster name %q: want 1 to 63 lowercase letters, digits or '-', not starting or ending with '-'", name)
	}
	return nil
}

func (f TLSFiles) load() (tls.Certificate, *x509.CertPool, error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return tls.Certificate{}, nil, errors.New("TLS needs a certificate, its key and the CA certificate")
	}
	if f.Cluster != "" {
		if err := ValidateClusterName(f.Cluster); err != nil {
			return tls.Certificate{}, nil, err
		}
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
// with its peers (Raft, and its gRPC calls to other members): both sides
// present a certificate signed by the CA, and each accepts the other only
// if the other's verified certificate carries the member name. The
// member's own certificate must carry it too.
func (f TLSFiles) MutualTLS() (server, client *tls.Config, err error) {
	cert, pool, err := f.load()
	if err != nil {
		return nil, nil, err
	}
	name := f.MemberName()
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f.Cert, err)
		}
	}
	if !slices.Contains(leaf.DNSNames, name) {
		return nil, nil, fmt.Errorf("%s is not a member certificate of cluster %q: it lacks the DNS name %s (issue one with barista tls init --names)", f.Cert, clusterOf(f.Cluster), name)
	}
	verify := requireMemberName(name)
	server = &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS12, VerifyConnection: verify,
	}
	client = &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: name,
		MinVersion: tls.VersionTLS12, VerifyConnection: verify,
	}
	return server, client, nil
}

func clusterOf(c string) string {
	if c == "" {
		return DefaultClusterName
	}
	return c
}

// requireMemberName accepts a connection only if the peer's verified
// certificate names exactly the member name (no wildcard).
func requireMemberName(name string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
			return errors.New("the peer presented no verified certificate")
		}
		leaf := cs.VerifiedChains[0][0]
		if !slices.Contains(leaf.DNSNames, name) {
			return fmt.Errorf("certificate %q is not a member's: it lacks the DNS name %s", leaf.Subject.CommonName, name)
		}
		return nil
	}
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

// maxHandshakes bounds the handshakes in progress; a connection beyond it
// is closed at once.
const maxHandshakes = 64

// handshakeTimeout bounds a Raft connection's TLS handshake (members
// complete theirs in milliseconds). A variable for tests.
var handshakeTimeout = 2 * time.Second

// tlsLayer is a raft.StreamLayer over mutual TLS. Handshakes run off the
// accept loop, each in its own goroutine under a short deadline, so a
// connection that never speaks delays no other; Accept hands Raft only
// connections whose handshake succeeded.
type tlsLayer struct {
	ln        net.Listener
	advertise net.Addr
	server    *tls.Config
	client    *tls.Config
	timeout   time.Duration // of a handshake

	conns  chan net.Conn // completed handshakes
	sem    chan struct{} // one token per handshake in progress
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

// NewTLSStreamLayer listens on bind for Raft traffic over mutual TLS: a
// peer whose certificate another CA signed, or that lacks the member name
// (see MutualTLS), cannot connect, in either direction.
func NewTLSStreamLayer(bind string, server, client *tls.Config) (raft.StreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft TLS listener on %s: %w", bind, err)
	}
	return TLSStreamLayerOn(ln, server, client), nil
}

// TLSStreamLayerOn is NewTLSStreamLayer over a listener already bound
// (the server binds every listener before it starts anything).
func TLSStreamLayerOn(ln net.Listener, server, client *tls.Config) raft.StreamLayer {
	ctx, cancel := context.WithCancel(context.Background())
	l := &tlsLayer{
		ln: ln, advertise: ln.Addr(), server: server, client: client, timeout: handshakeTimeout,
		conns: make(chan net.Conn), sem: make(chan struct{}, maxHandshakes), ctx: ctx, cancel: cancel,
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

// acceptLoop accepts TCP connections and starts a handshake for each,
// until Close.
func (l *tlsLayer) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or similar: wait a little, as
			// net/http does, rather than spin.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-l.ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		select {
		case l.sem <- struct{}{}:
		default:
			c.Close() // too many handshakes in progress
			continue
		}
		l.wg.Add(1)
		go l.handshake(c)
	}
}

// handshake completes one connection's handshake and hands it to Accept.
func (l *tlsLayer) handshake(c net.Conn) {
	defer l.wg.Done()
	defer func() { <-l.sem }()
	tc := tls.Server(c, l.server)
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		tc.Close()
		return
	}
	select {
	case l.conns <- tc:
	case <-l.ctx.Done():
		tc.Close()
	}
}

// Accept returns the next connection whose handshake succeeded.
func (l *tlsLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close stops accepting, ends every handshake in progress and waits for
// their goroutines.
func (l *tlsLayer) Close() error {
	l.once.Do(func() {
		l.cancel()
		l.err = l.ln.Close()
		l.wg.Wait()
	})
	return l.err
}

func (l *tlsLayer) Addr() net.Addr { return l.advertise }

func (l *tlsLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(address), l.client)
}

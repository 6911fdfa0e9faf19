package raftnode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testCA is a throw-away CA that issues node and client certificates into
// a temporary directory.
type testCA struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &testCA{t: t, dir: t.TempDir(), cert: cert, key: key}
	ca.write("ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *testCA) write(name, typ string, der []byte) string {
	ca.t.Helper()
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

// issue writes NAME.pem and NAME-key.pem with the given DNS names and
// extended key usages, valid for 127.0.0.1, and returns their files.
func (ca *testCA) issue(name string, dns []string, usage ...x509.ExtKeyUsage) TLSFiles {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
		DNSNames: dns, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return TLSFiles{
		Cert: ca.write(name+".pem", "CERTIFICATE", der),
		Key:  ca.write(name+"-key.pem", "EC PRIVATE KEY", kb),
		CA:   filepath.Join(ca.dir, "ca.pem"),
	}
}

var bothUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}

// node issues a member certificate of cluster "default".
func (ca *testCA) node(name string) TLSFiles {
	return ca.issue(name, []string{name, "server.default.barista"}, bothUsages...)
}

// freeAddr returns a 127.0.0.1 address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// newLayer starts a TLS stream layer with files' certificate on a fresh
// address; it is closed when the test ends.
func newLayer(t *testing.T, files TLSFiles) (raft.StreamLayer, string) {
	t.Helper()
	server, client, err := files.MutualTLS()
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	l, err := NewTLSStreamLayer(addr, server, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, addr
}

// acceptOne runs Accept in the background and hands over its result.
func acceptOne(l raft.StreamLayer) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	return ch
}

// silent opens n TCP connections to addr that never send a byte.
func silent(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var out []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		out = append(out, c)
	}
	return out
}

// TestTLSAcceptNotDelayedBySilentConnections: twenty connections that
// never speak do not delay a member's connection. Handshakes used to run
// one at a time on the accept loop with a 10 s deadline each.
func TestTLSAcceptNotDelayedBySilentConnections(t *testing.T) {
	ca := newTestCA(t)
	layer, addr := newLayer(t, ca.node("n1"))
	peer, _ := newLayer(t, ca.node("n2"))
	silent(t, addr, 20)
	accepted := acceptOne(layer)

	start := time.Now()
	c, err := peer.Dial(raft.ServerAddress(addr), 5*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	select {
	case got := <-accepted:
		elapsed := time.Since(start)
		if got == nil {
			t.Fatal("Accept failed")
		}
		defer got.Close()
		if elapsed >= 100*time.Millisecond {
			t.Fatalf("the member's connection was accepted after %v behind 20 silent ones (want < 100ms)", elapsed)
		}
		if cn := got.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "n2" {
			t.Fatalf("accepted the connection of %q, want n2", cn)
		}
		t.Logf("accepted after %v behind 20 silent connections", elapsed)
	case <-time.After(5 * time.Second):
		t.Fatal("the member's connection was not accepted within 5s behind 20 silent connections")
	}
}

// TestTLSHandshakeDeadline: a connection that never completes its
// handshake is closed by the server within the handshake deadline (2 s).
func TestTLSHandshakeDeadline(t *testing.T) {
	ca := newTestCA(t)
	_, addr := newLayer(t, ca.node("n1"))
	c := silent(t, addr, 1)[0]
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	elapsed := time.Since(start)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read on a silent connection: %v, want EOF (closed by the server)", err)
	}
	if elapsed > 3*time.Second || elapsed < handshakeTimeout-100*time.Millisecond {
		t.Fatalf("a silent connection was closed after %v, want about %v", elapsed, handshakeTimeout)
	}
}

// TestTLSHandshakesBounded: beyond maxHandshakes handshakes in progress, a
// new connection is closed at once instead of costing a goroutine.
func TestTLSHandshakesBounded(t *testing.T) {
	// Handshakes that outlast the test: no slot frees up by itself.
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = time.Minute
	ca := newTestCA(t)
	layer, addr := newLayer(t, ca.node("n1"))
	tl := layer.(*tlsLayer)
	silent(t, addr, maxHandshakes)
	deadline := time.Now().Add(10 * time.Second)
	for len(tl.sem) < maxHandshakes {
		if time.Now().After(deadline) {
			t.Fatalf("%d handshakes in progress, want %d", len(tl.sem), maxHandshakes)
		}
		time.Sleep(time.Millisecond)
	}
	extra := silent(t, addr, 1)[0]
	start := time.Now()
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := extra.Read(make([]byte, 1))
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read on the connection beyond the bound: %v, want EOF", err)
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Fatalf("the connection beyond the bound was closed after %v, want at once", elapsed)
	}
}

// layerGoroutines counts the goroutines running the stream layer's code.
func layerGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "raftnode.(*tlsLayer)") {
			n++
		}
	}
	return n
}

// TestTLSLayerCloseStopsEverything: Close ends the accept loop and every
// handshake in progress, closes their connections, and makes Accept fail.
func TestTLSLayerCloseStopsEverything(t *testing.T) {
	ca := newTestCA(t)
	server, client, err := ca.node("n1").MutualTLS()
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	layer, err := NewTLSStreamLayer(addr, server, client)
	if err != nil {
		t.Fatal(err)
	}
	conns := silent(t, addr, 10)
	accepted := acceptOne(layer)
	deadline := time.Now().Add(time.Second)
	for layerGoroutines() < 11 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := layer.Close(); err != nil {
		t.Fatal(err)
	}
	if c, ok := <-accepted; ok {
		t.Fatalf("Accept after Close returned a connection from %v", c.RemoteAddr())
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("silent connection %d after Close: %v, want EOF", i, err)
		}
	}
	// Close waited for its own goroutines; a goroutine that called
	// Accept (acceptOne) may still be returning.
	for deadline := time.Now().Add(time.Second); layerGoroutines() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := layerGoroutines(); n != 0 {
		t.Fatalf("%d goroutines of the stream layer outlive Close", n)
	}
	if err := layer.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestTLSMemberNameRequired: a certificate of the same CA is a member only
// if it carries server.CLUSTER.barista, exactly. A client certificate (no member
// name, no server usage) can neither connect to a member nor be dialed as
// one; nor can a member of another cluster name under the same CA.
func TestTLSMemberNameRequired(t *testing.T) {
	ca := newTestCA(t)
	layer, addr := newLayer(t, ca.node("n1"))
	clientFiles := ca.issue("client", nil, x509.ExtKeyUsageClientAuth)
	// A client certificate that also claims server usage, but no member name.
	dualFiles := ca.issue("dual", []string{"dual"}, bothUsages...)
	otherFiles := ca.issue("o1", []string{"o1", "server.other.barista"}, bothUsages...)
	// A wildcard matches the member name by the rules of host names, but a
	// member's certificate names it exactly.
	wildFiles := ca.issue("wild", []string{"*.default.barista"}, bothUsages...)

	// Inbound: the accepting member refuses each non-member certificate;
	// Raft's Accept never sees one.
	accepted := acceptOne(layer)
	for _, f := range []TLSFiles{clientFiles, dualFiles, otherFiles, wildFiles} {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		d := &net.Dialer{Timeout: 5 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true})
		if err == nil {
			// TLS 1.3: the client finishes first and reads the refusal.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "bad certificate") {
			t.Fatalf("%s: connecting with a non-member certificate: %v, want a bad certificate alert", f.Cert, err)
		}
	}
	// Nothing reached Raft: the next Accept returns the member that follows.
	peer, _ := newLayer(t, ca.node("n2"))
	c, err := peer.Dial(raft.ServerAddress(addr), 5*time.Second)
	if err != nil {
		t.Fatalf("a member's dial: %v", err)
	}
	defer c.Close()
	select {
	case got := <-accepted:
		if got == nil {
			t.Fatal("Accept failed")
		}
		defer got.Close()
		if cn := got.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "n2" {
			t.Fatalf("Accept returned the connection of %q, want n2", cn)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the member's connection was not accepted")
	}

	// Outbound: a member does not dial a listener whose certificate is not
	// a member's.
	for _, f := range []TLSFiles{clientFiles, dualFiles, otherFiles, wildFiles} {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		pool, _ := LoadCAPool(f.CA)
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAnyClientCert})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.(*tls.Conn).Handshake()
				c.Close()
			}
		}()
		_, err = layer.Dial(raft.ServerAddress(ln.Addr().String()), 5*time.Second)
		ln.Close()
		if err == nil || !strings.Contains(err.Error(), "server.default.barista") {
			t.Fatalf("%s: dialing a non-member: %v, want an error naming server.default.barista", f.Cert, err)
		}
	}
}

// TestMutualTLSRefusesNonMemberCertificate: a node started with a client
// certificate (or one of another cluster name) refuses at once, naming the
// file and the missing name.
func TestMutualTLSRefusesNonMemberCertificate(t *testing.T) {
	ca := newTestCA(t)
	client := ca.issue("client", nil, x509.ExtKeyUsageClientAuth)
	_, _, err := client.MutualTLS()
	want := client.Cert + ` is not a member certificate of cluster "default": it lacks the DNS name server.default.barista (issue one with barista tls init --names)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	n1 := ca.node("n1")
	n1.Cluster = "prod"
	if _, _, err := n1.MutualTLS(); err == nil || !strings.Contains(err.Error(), "lacks the DNS name server.prod.barista") {
		t.Fatalf("a default member certificate in cluster prod: %v", err)
	}
	n1.Cluster = "Prod!"
	if _, _, err := n1.MutualTLS(); err == nil || err.Error() != `cluster name "Prod!": want 1 to 63 lowercase letters, digits or '-', not starting or ending with '-'` {
		t.Fatalf("a bad cluster name: %v", err)
	}
}

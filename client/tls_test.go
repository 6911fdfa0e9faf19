package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/baristahq/barista/proto"
)

// testCA writes a CA certificate to dir/ca.pem and returns a server
// certificate for 127.0.0.1 signed by it.
func testCA(t *testing.T, dir string) tls.Certificate {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// requireToken refuses calls without "authorization: Bearer s3cret".
func requireToken(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer s3cret" {
		return nil, status.Error(codes.Unauthenticated, "missing bearer token (authorization: Bearer TOKEN)")
	}
	return handler(ctx, req)
}

// TestTLSAndToken: a node serving TLS with a token check is reached with
// TLSConfig's configuration and the token; without the token the call is
// UNAUTHENTICATED; in plaintext it cannot connect.
func TestTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	cert := testCA(t, dir)
	f := serve(t, &fakeNode{get: func(_ int, req *pb.GetJobRequest) (*pb.Job, error) { return &pb.Job{JobId: req.JobId}, nil }},
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})),
		grpc.UnaryInterceptor(requireToken))
	cfg, err := TLSConfig(filepath.Join(dir, "ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Options{TLS: cfg, Token: "s3cret"}, f.addr)
	if j, err := c.GetJob(context.Background(), &pb.GetJobRequest{JobId: 7}); err != nil || j.JobId != 7 {
		t.Fatalf("with TLS and token: %v %v", j, err)
	}
	anon := newClient(t, Options{TLS: cfg}, f.addr)
	_, err = anon.GetJob(context.Background(), &pb.GetJobRequest{JobId: 7})
	if !errors.Is(err, ErrUnauthenticated) || err.Error() != "UNAUTHENTICATED: missing bearer token (authorization: Bearer TOKEN)" {
		t.Errorf("without token: %v", err)
	}
	plain := newClient(t, Options{Token: "s3cret", CallTimeout: 300 * time.Millisecond}, f.addr)
	if _, err := plain.GetJob(context.Background(), &pb.GetJobRequest{JobId: 7}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("plaintext to a TLS node: %v", err)
	}
	if n := count(f, &f.gets); n != 1 {
		t.Errorf("%d calls served, want 1", n)
	}
}

// TestTLSMismatchSaidAtOnce: a plaintext client against a TLS node, and a
// TLS client against a plaintext node, fail within a few seconds (not at
// the end of their call timeout) with an error that says what to change;
// a TLS client that does not trust the node's certificate says why.
func TestTLSMismatchSaidAtOnce(t *testing.T) {
	dir := t.TempDir()
	cert := testCA(t, dir)
	get := func(_ int, req *pb.GetJobRequest) (*pb.Job, error) { return &pb.Job{JobId: req.JobId}, nil }
	tlsNode := serve(t, &fakeNode{get: get}, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	plainNode := serve(t, &fakeNode{get: get})
	cfg, err := TLSConfig(filepath.Join(dir, "ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	testCA(t, other) // a CA that did not sign the node's certificate
	untrusting, err := TLSConfig(filepath.Join(other, "ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, addr, want string
		tls              *tls.Config
	}{
		{"plaintext client, TLS node", tlsNode.addr, "UNAVAILABLE: the server at " + tlsNode.addr + " speaks TLS and this client does not: pass --tls-ca FILE", nil},
		{"TLS client, plaintext node", plainNode.addr, "UNAVAILABLE: the server at " + plainNode.addr + " does not speak TLS (it answers in plaintext): leave out --tls-ca", cfg},
		{"TLS client, another CA", tlsNode.addr, "UNAVAILABLE: TLS with the server at " + tlsNode.addr + " failed: tls: failed to verify certificate: x509: certificate signed by unknown authority", untrusting},
	} {
		c := newClient(t, Options{TLS: tc.tls, CallTimeout: 15 * time.Second}, tc.addr)
		start := time.Now()
		_, err := c.GetJob(context.Background(), &pb.GetJobRequest{JobId: 7})
		if took := time.Since(start); err == nil || !strings.HasPrefix(err.Error(), tc.want) || took > 5*time.Second {
			t.Errorf("%s: after %s: %v\nwant %s...", tc.name, took, err, tc.want)
		}
	}
}

// TestTLSConfigErrors: a wrong file is named.
func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	testCA(t, dir)
	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o600)
	for _, tc := range []struct{ ca, cert, key, want string }{
		{filepath.Join(dir, "missing.pem"), "", "", "CA file: open " + filepath.Join(dir, "missing.pem") + ": no such file or directory"},
		{junk, "", "", "CA file: " + junk + " holds no PEM certificate"},
		{filepath.Join(dir, "ca.pem"), junk, "", "client certificate: open : no such file or directory"},
		{filepath.Join(dir, "ca.pem"), junk, junk, "client certificate: tls: failed to find any PEM data in certificate input"},
	} {
		_, err := TLSConfig(tc.ca, tc.cert, tc.key)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc, err, tc.want)
		}
	}
	cfg, err := TLSConfig(filepath.Join(dir, "ca.pem"), "", "")
	if err != nil || cfg.MinVersion != tls.VersionTLS12 || len(cfg.Certificates) != 0 || cfg.RootCAs == nil {
		t.Errorf("%v %v", cfg, err)
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/baristahq/barista/raftnode"
)

const exposedMsg = "refusing to start: --raft-addr %s is not a loopback address and TLS is off, so anyone who reaches it could rewrite the replicated log; set --tls-cert, --tls-key and --tls-ca, or pass --insecure-raft (raft.insecure = true) to accept the risk"

// TestRaftSecurityCheck: a Raft address others can reach needs TLS or an
// explicit --insecure-raft.
func TestRaftSecurityCheck(t *testing.T) {
	tlsOn := raftnode.TLSFiles{Cert: "n1.pem", Key: "n1-key.pem", CA: "ca.pem", Cluster: "default"}
	cases := []struct {
		addr  string
		files raftnode.TLSFiles
		allow bool
		want  string // "" for accepted; %s is the address
	}{
		{"127.0.0.1:7440", raftnode.TLSFiles{}, false, ""},
		{"127.0.0.2:7440", raftnode.TLSFiles{}, false, ""},
		{"[::1]:7440", raftnode.TLSFiles{}, false, ""},
		{"localhost:7440", raftnode.TLSFiles{}, false, ""},
		{"0.0.0.0:7440", raftnode.TLSFiles{}, false, exposedMsg},
		{":7440", raftnode.TLSFiles{}, false, exposedMsg},
		{"[::]:7440", raftnode.TLSFiles{}, false, exposedMsg},
		{"10.0.0.1:7440", raftnode.TLSFiles{}, false, exposedMsg},
		{"192.0.2.7:7440", raftnode.TLSFiles{}, false, exposedMsg},
		{"10.0.0.1:7440", raftnode.TLSFiles{}, true, ""},
		{"10.0.0.1:7440", tlsOn, false, ""},
		{"10.0.0.1:7440", raftnode.TLSFiles{Cluster: "Bad Name"}, true, `--cluster-name (tls.cluster_name): cluster name "Bad Name": want 1 to 63 lowercase letters, digits or '-', not starting or ending with '-'`},
		{"10.0.0.1", raftnode.TLSFiles{}, false, `--raft-addr "10.0.0.1": address 10.0.0.1: missing port in address`},
	}
	for _, c := range cases {
		err := checkRaftSecurity(c.addr, c.files, c.allow)
		want := strings.ReplaceAll(c.want, "%s", c.addr)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s (tls %v, allow %v): refused: %v", c.addr, c.files.Enabled(), c.allow, err)
		case want != "" && (err == nil || err.Error() != want):
			t.Errorf("%s (tls %v, allow %v):\n got %v\nwant %s", c.addr, c.files.Enabled(), c.allow, err, want)
		}
	}
}

// TestServerRefusesExposedRaft: the refusal is the only line the server
// prints, before it opens anything.
func TestServerRefusesExposedRaft(t *testing.T) {
	var out, errb strings.Builder
	dir := t.TempDir()
	code := Run([]string{"server", "--node-id", "n1", "--data-dir", dir, "--raft-addr", "0.0.0.0:7440", "--insecure-dev"}, &out, &errb)
	if want := strings.ReplaceAll(exposedMsg, "%s", "0.0.0.0:7440") + "\n"; code != 1 || errb.String() != want || out.String() != "" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant exit 1 and stderr:\n%s", code, out.String(), errb.String(), want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the refused server wrote %d files in its data directory", len(entries))
	}
}

// serverFlags parses a server command line and resolves it.
func serverFlags(t *testing.T, args ...string) *serverConfig {
	t.Helper()
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	o := commands["server"].flags(fs).(*serverOpts)
	if err := fs.Parse(append(args, "--insecure-dev")); err != nil {
		t.Fatal(err)
	}
	sc, err := o.resolve()
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestRaftSecurityConfigKeys: raft.insecure and tls.cluster_name in the
// file, overridden by --insecure-raft=false and --cluster-name.
func TestRaftSecurityConfigKeys(t *testing.T) {
	p := writeConfig(t, "[raft]\ninsecure = true\n[tls]\ncluster_name = \"prod\"\n")
	base := []string{"--node-id", "n1", "--data-dir", t.TempDir(), "--config", p}
	if o := serverFlags(t, base...); !o.InsecureRaft || o.TLS.Cluster != "prod" {
		t.Fatalf("from the file: insecure %v, cluster %q", o.InsecureRaft, o.TLS.Cluster)
	}
	if o := serverFlags(t, append(base, "--insecure-raft=false", "--cluster-name", "east")...); o.InsecureRaft || o.TLS.Cluster != "east" {
		t.Fatalf("flags over the file: insecure %v, cluster %q", o.InsecureRaft, o.TLS.Cluster)
	}
	if o := serverFlags(t, "--node-id", "n1", "--data-dir", t.TempDir()); o.InsecureRaft || o.TLS.Cluster != "default" {
		t.Fatalf("defaults: insecure %v, cluster %q", o.InsecureRaft, o.TLS.Cluster)
	}
}

// syncBuffer is a log sink the warning goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// TestInsecureRaftWarning: with --insecure-raft on an exposed address the
// server warns at once and then every interval, until it stops; on
// loopback or with TLS it has nothing to warn about.
func TestInsecureRaftWarning(t *testing.T) {
	var buf syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf})
	const warning = "--insecure-raft: Raft runs without TLS on a non-loopback address; anyone who reaches it can rewrite the replicated log and stop every node: raft_addr=10.0.0.1:7440"
	ctx, cancel := context.WithCancel(context.Background())
	done := warnInsecureRaft(ctx, log, "10.0.0.1:7440", raftnode.TLSFiles{}, 20*time.Millisecond)
	if n := buf.count(warning); n != 1 {
		t.Fatalf("%d warnings at start, want 1:\n%s", n, buf.b.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for buf.count(warning) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no repeated warning:\n%s", buf.b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	after := buf.count(warning)
	time.Sleep(60 * time.Millisecond) // three intervals: none may come
	if n := buf.count(warning); n != after {
		t.Fatalf("%d warnings after the server stopped", n-after)
	}
	for _, c := range []struct {
		addr  string
		files raftnode.TLSFiles
	}{{"127.0.0.1:7440", raftnode.TLSFiles{}}, {"10.0.0.1:7440", raftnode.TLSFiles{Cert: "a", Key: "b", CA: "c"}}} {
		if done := warnInsecureRaft(context.Background(), log, c.addr, c.files, time.Millisecond); done != nil {
			t.Fatalf("%s (tls %v): a warning loop started", c.addr, c.files.Enabled())
		}
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTLSInitRoles: node certificates carry the member name and both
// usages; client certificates carry neither the name nor server usage,
// and a node refuses to run with one.
func TestTLSInitRoles(t *testing.T) {
	dir := t.TempDir()
	var out, errb strings.Builder
	if code := Run([]string{"tls", "init", "--dir", dir, "--names", "n1,n2", "--clients", "client,worker", "--cluster-name", "prod"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := "wrote " + filepath.Join(dir, "ca.pem") + " (the CA)\n" +
		"wrote " + filepath.Join(dir+"-ca", "ca-key.pem") + " (the CA's private key, apart: keep it offline; no server, worker or Secret needs it)\n" +
		"wrote " + filepath.Join(dir, "n1.pem") + " (node, member name server.prod.barista)\n" +
		"wrote " + filepath.Join(dir, "n2.pem") + " (node, member name server.prod.barista)\n" +
		"wrote " + filepath.Join(dir, "client.pem") + " (client)\n" +
		"wrote " + filepath.Join(dir, "worker.pem") + " (client)\n" +
		"wrote " + filepath.Join(dir, "webhook.key") + " (the cluster's webhook key, mode 0600: the same on every server, webhooks.key_file)\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	// The CA key is not among the files to copy: it is apart, private.
	if _, err := os.Stat(filepath.Join(dir, "ca-key.pem")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("tls init wrote the CA key into --dir: %v", err)
	}
	for path, mode := range map[string]fs.FileMode{dir + "-ca": fs.ModeDir | 0o700, filepath.Join(dir+"-ca", "ca-key.pem"): 0o600} {
		if st, err := os.Stat(path); err != nil || st.Mode() != mode {
			t.Fatalf("%s: %v, mode %v, want %v", path, err, st.Mode(), mode)
		}
	}
	n1 := readCert(t, filepath.Join(dir, "n1.pem"))
	if !slices.Equal(n1.DNSNames, []string{"n1", "server.prod.barista", "localhost"}) ||
		!slices.Equal(n1.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) || len(n1.IPAddresses) != 2 {
		t.Fatalf("node certificate: DNS %v, IPs %v, usages %v", n1.DNSNames, n1.IPAddresses, n1.ExtKeyUsage)
	}
	for _, name := range []string{"client", "worker"} {
		c := readCert(t, filepath.Join(dir, name+".pem"))
		if len(c.DNSNames) != 0 || len(c.IPAddresses) != 0 || !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || c.Subject.CommonName != name {
			t.Fatalf("%s certificate: CN %q, DNS %v, IPs %v, usages %v", name, c.Subject.CommonName, c.DNSNames, c.IPAddresses, c.ExtKeyUsage)
		}
	}
	files := func(name, cluster string) raftnode.TLSFiles {
		return raftnode.TLSFiles{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: filepath.Join(dir, "ca.pem"), Cluster: cluster}
	}
	if _, _, err := files("n1", "prod").MutualTLS(); err != nil {
		t.Fatalf("a node certificate as a member: %v", err)
	}
	for _, f := range []raftnode.TLSFiles{files("client", "prod"), files("n1", "default")} {
		if _, _, err := f.MutualTLS(); err == nil || !strings.Contains(err.Error(), "is not a member certificate") {
			t.Fatalf("%s in cluster %s as a member: %v", f.Cert, f.Cluster, err)
		}
	}
	// More certificates from the same CA.
	out.Reset()
	if code := Run([]string{"tls", "init", "--dir", dir, "--ca", dir, "--names", "n3", "--clients", "", "--cluster-name", "prod"}, &out, &errb); code != 0 {
		t.Fatalf("--ca: exit %d: %s", code, errb.String())
	}
	if _, _, err := files("n3", "prod").MutualTLS(); err != nil {
		t.Fatalf("n3 from the same CA: %v", err)
	}
}

// TestTLSInitUsage: a client name among the nodes (the command line of
// earlier versions), a name in both lists, and names that are not plain
// file names are usage errors naming the flag.
func TestTLSInitUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--names", "n1,n2,n3,client"}, "--names client: --names issues node certificates, which may speak Raft; give client and worker certificates with --clients"},
		{[]string{"--names", "n1", "--clients", "n1"}, `"n1" is in both --names and --clients`},
		{[]string{"--names", "../n1"}, `--names: "../n1" is not a certificate name (want up to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-')`},
		{[]string{"--clients", "a/b"}, `--clients: "a/b" is not a certificate name`},
		{[]string{"--cluster-name", "Prod"}, `--cluster-name: cluster name "Prod": want 1 to 63 lowercase letters`},
		{[]string{"--names", "", "--clients", ""}, "tls init needs at least one name in --names or --clients"},
		{[]string{"--ca-key-dir", "DIR/private"}, "--ca-key-dir DIR/private is inside --dir DIR: the CA key would go wherever the certificates go"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		var out, errb strings.Builder
		args := slices.Clone(c.args)
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "DIR", dir)
		}
		code := Run(append([]string{"tls", "init", "--dir", dir}, args...), &out, &errb)
		if want := strings.ReplaceAll(c.want, "DIR", dir); code != 2 || !strings.HasPrefix(errb.String(), want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit 2 and %q", c.args, code, errb.String(), c.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%v: wrote %d files", c.args, len(entries))
		}
	}
}

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/baristahq/barista/raftnode"
	"github.com/baristahq/barista/webhook"
)

type tlsInitOpts struct {
	dir      string
	names    string
	clients  string
	cluster  string
	hosts    string
	days     int
	ca       string
	caKeyDir string
}

func init() {
	register("tls init", typed(&spec[tlsInitOpts]{
		synopsis: "Create a local CA and certificates for nodes and clients",
		usage:    "--dir DIR [--ca-key-dir DIR-ca] [--names n1,n2,n3] [--clients client] [--cluster-name NAME] [--hosts 127.0.0.1,localhost]",
		help: `Writes DIR/ca.pem (a new ECDSA P-256 CA) and the CA's private key
apart from it, in DIR-ca/ca-key.pem (--ca-key-dir; a directory of mode
0700, never inside DIR), so that copying DIR to the servers or making a
Kubernetes Secret of it never takes the key that could issue a member's
certificate. Then it writes a certificate DIR/NAME.pem and its key
DIR/NAME-key.pem for each name, signed by that CA. With --ca DIR2 it
signs with the existing CA of DIR2 (DIR2/ca.pem, its key in DIR2-ca/ or,
as earlier versions wrote it, DIR2/ca-key.pem) instead of creating one.
Keep the CA key offline.

--names issues node certificates: valid for the hosts given (IP addresses
and DNS names), usable as server and client certificates, and carrying the
member name server.CLUSTER.barista (--cluster-name, default "default").
Only a certificate with that name may speak Raft or join; give every
server of the cluster the same --cluster-name.

--clients issues client certificates (for barista commands and workers
that present one): client usage only, no member name, no hosts. They can
never act as a node.

It also writes DIR/webhook.key (mode 0600) unless it exists: a new
webhook key, the hex of 32 random bytes. Give every server the same one
(webhooks.key_file, --webhook-key-file); it is kept when tls init runs
again in DIR, since a new key would invalidate every endpoint's secret.

Start a server with --tls-cert DIR/n1.pem --tls-key DIR/n1-key.pem
--tls-ca DIR/ca.pem; clients pass --tls-ca DIR/ca.pem (and may present
--tls-cert DIR/client.pem --tls-key DIR/client-key.pem).`,
		flags: func(fs *flag.FlagSet, o *tlsInitOpts) {
			fs.StringVar(&o.dir, "dir", "", "output `DIR`")
			fs.StringVar(&o.names, "names", "n1,n2,n3", "comma-separated `NAMES` of node certificates")
			fs.StringVar(&o.clients, "clients", "client", "comma-separated `NAMES` of client certificates")
			fs.StringVar(&o.cluster, "cluster-name", raftnode.DefaultClusterName, "cluster `NAME` in the nodes' member name server.NAME.barista")
			fs.StringVar(&o.hosts, "hosts", "127.0.0.1,::1,localhost", "comma-separated `HOSTS` the node certificates are valid for")
			numFlag(fs, &o.days, "days", 825, 1, 36500, "validity in `DAYS`")
			fs.StringVar(&o.ca, "ca", "", "sign with the CA of this `DIR` (ca.pem; its key in DIR-ca/ca-key.pem or DIR/ca-key.pem) instead of a new one")
			fs.StringVar(&o.caKeyDir, "ca-key-dir", "", "write a new CA's private key, ca-key.pem, in this `DIR` (default: the --dir with \"-ca\" added; not inside --dir)")
		},
		run: runTLSInit,
	}))
}

// certNames splits a --names or --clients list, checking that each name
// makes a plain file name.
func certNames(flagName, list string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		ok := len(name) <= 64 && name[0] != '.' && name[0] != '-'
		for _, r := range name {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
				ok = false
			}
		}
		if !ok {
			return nil, usageError("--%s: %q is not a certificate name (want up to 64 letters, digits, '.', '_' or '-', not starting with '.' or '-')", flagName, name)
		}
		out = append(out, name)
	}
	return out, nil
}

func runTLSInit(env *cmdEnv, opts *tlsInitOpts, args []string) error {
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	if opts.dir == "" {
		return usageError("tls init needs --dir")
	}
	if err := raftnode.ValidateClusterName(opts.cluster); err != nil {
		return usageError("--cluster-name: %v", err)
	}
	nodes, err := certNames("names", opts.names)
	if err != nil {
		return err
	}
	clients, err := certNames("clients", opts.clients)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if n == "client" || n == "worker" {
			// The command line of earlier versions listed the client
			// among the nodes; it would now make a member certificate.
			return usageError("--names %s: --names issues node certificates, which may speak Raft; give client and worker certificates with --clients", n)
		}
		seen[n] = true
	}
	for _, n := range clients {
		if seen[n] {
			return usageError("%q is in both --names and --clients", n)
		}
		seen[n] = true
	}
	if len(seen) == 0 {
		return usageError("tls init needs at least one name in --names or --clients")
	}
	keyDir := opts.caKeyDir
	if keyDir == "" {
		keyDir = filepath.Clean(opts.dir) + "-ca"
	}
	if opts.ca == "" {
		if rel, err := filepath.Rel(filepath.Clean(opts.dir), filepath.Clean(keyDir)); err == nil && !strings.HasPrefix(rel, "..") {
			return usageError("--ca-key-dir %s is inside --dir %s: the CA key would go wherever the certificates go", keyDir, opts.dir)
		}
	}
	if err := os.MkdirAll(opts.dir, 0o755); err != nil {
		return err
	}
	var caCert *x509.Certificate
	var caKey *ecdsa.PrivateKey
	if opts.ca != "" {
		caCert, caKey, err = loadCA(opts.ca)
	} else {
		caCert, caKey, err = newCA(opts.dir, keyDir, opts.days)
		if err == nil {
			fmt.Fprintf(env.stdout, "wrote %s (the CA)\nwrote %s (the CA's private key, apart: keep it offline; no server, worker or Secret needs it)\n",
				filepath.Join(opts.dir, "ca.pem"), filepath.Join(keyDir, "ca-key.pem"))
		}
	}
	if err != nil {
		return err
	}
	var ips []net.IP
	var dns []string
	for _, h := range strings.Split(opts.hosts, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	member := raftnode.MemberName(opts.cluster)
	for _, name := range nodes {
		tmpl := certTemplate(name, opts.days)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = ips
		tmpl.DNSNames = append([]string{name, member}, dns...)
		if err := issueCert(opts.dir, name, tmpl, caCert, caKey); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "wrote %s (node, member name %s)\n", filepath.Join(opts.dir, name+".pem"), member)
	}
	for _, name := range clients {
		tmpl := certTemplate(name, opts.days)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		if err := issueCert(opts.dir, name, tmpl, caCert, caKey); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "wrote %s (client)\n", filepath.Join(opts.dir, name+".pem"))
	}
	path, made, err := writeWebhookKey(opts.dir)
	if err != nil {
		return err
	}
	if made {
		fmt.Fprintf(env.stdout, "wrote %s (the cluster's webhook key, mode 0600: the same on every server, webhooks.key_file)\n", path)
	} else {
		fmt.Fprintf(env.stdout, "kept %s (the cluster's webhook key: a new one would invalidate every endpoint's secret)\n", path)
	}
	return nil
}

// writeWebhookKey writes a new webhook key to DIR/webhook.key, mode 0600,
// unless the file exists; it reports whether it wrote one.
func writeWebhookKey(dir string) (string, bool, error) {
	path := filepath.Join(dir, "webhook.key")
	key, err := webhook.NewKey()
	if err != nil {
		return path, false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return path, false, nil
	}
	if err != nil {
		return path, false, err
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return path, false, err
	}
	return path, true, f.Close()
}

func certTemplate(name string, days int) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"barista"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(0, 0, days),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// issueCert signs tmpl with a new key and writes DIR/NAME.pem and
// DIR/NAME-key.pem.
func issueCert(dir, name string, tmpl, caCert *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, name+".pem"), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", kb, 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// newCA makes a CA: its certificate in dir/ca.pem, its private key in
// keyDir/ca-key.pem (keyDir made mode 0700).
func newCA(dir, keyDir string, days int) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "barista local CA", Organization: []string{"barista"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(0, 0, days),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(dir, "ca.pem"), "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		return nil, nil, err
	}
	return cert, key, writePEM(filepath.Join(keyDir, "ca-key.pem"), "EC PRIVATE KEY", kb, 0o600)
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, nil, err
	}
	// The key apart (DIR-ca/), or beside the certificate as earlier
	// versions wrote it.
	kb, err := os.ReadFile(filepath.Join(filepath.Clean(dir)+"-ca", "ca-key.pem"))
	if errors.Is(err, fs.ErrNotExist) {
		kb, err = os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("the CA key of %s (looked for in %s and %s): %w", dir, filepath.Join(filepath.Clean(dir)+"-ca", "ca-key.pem"), filepath.Join(dir, "ca-key.pem"), err)
	}
	cblock, _ := pem.Decode(cb)
	kblock, _ := pem.Decode(kb)
	if cblock == nil || kblock == nil {
		return nil, nil, fmt.Errorf("%s: ca.pem or ca-key.pem is not PEM", dir)
	}
	cert, err := x509.ParseCertificate(cblock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kblock.Bytes)
	return cert, key, err
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type tlsInitOpts struct {
	dir   string
	names string
	hosts string
	days  int
	ca    string
}

func init() {
	register("tls init", &command{
		synopsis: "Create a local CA and certificates for nodes and clients",
		usage:    "--dir DIR [--names n1,n2,n3,client] [--hosts 127.0.0.1,localhost]",
		help: `Writes DIR/ca.pem and DIR/ca-key.pem (a new ECDSA P-256 CA), then for
each name DIR/NAME.pem and DIR/NAME-key.pem, signed by that CA, valid for
the hosts given (IP addresses and DNS names) and usable both as a server
and as a client certificate (nodes use mutual TLS with each other). With
--ca DIR2 it signs with the existing CA in DIR2 instead of creating one.

Start a server with --tls-cert DIR/n1.pem --tls-key DIR/n1-key.pem
--tls-ca DIR/ca.pem; clients pass --tls-ca DIR/ca.pem.`,
		flags: func(fs *flag.FlagSet) any {
			o := &tlsInitOpts{}
			fs.StringVar(&o.dir, "dir", "", "output `DIR`")
			fs.StringVar(&o.names, "names", "n1,n2,n3,client", "comma-separated certificate `NAMES`")
			fs.StringVar(&o.hosts, "hosts", "127.0.0.1,::1,localhost", "comma-separated `HOSTS` the certificates are valid for")
			numFlag(fs, &o.days, "days", 825, 1, 36500, "validity in `DAYS`")
			fs.StringVar(&o.ca, "ca", "", "sign with the CA in this `DIR` (ca.pem, ca-key.pem) instead of a new one")
			return o
		},
		run: runTLSInit,
	})
}

func runTLSInit(env *cmdEnv, o any, args []string) error {
	opts := o.(*tlsInitOpts)
	if opts.dir == "" {
		return usageError("tls init needs --dir")
	}
	if err := os.MkdirAll(opts.dir, 0o755); err != nil {
		return err
	}
	var caCert *x509.Certificate
	var caKey *ecdsa.PrivateKey
	var err error
	if opts.ca != "" {
		caCert, caKey, err = loadCA(opts.ca)
	} else {
		caCert, caKey, err = newCA(opts.dir, opts.days)
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
	for _, name := range strings.Split(opts.names, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: name, Organization: []string{"barista"}},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().AddDate(0, 0, opts.days),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses:  ips,
			DNSNames:     append([]string{name}, dns...),
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(opts.dir, name+".pem"), "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(opts.dir, name+"-key.pem"), "EC PRIVATE KEY", kb, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "wrote %s\n", filepath.Join(opts.dir, name+".pem"))
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func newCA(dir string, days int) (*x509.Certificate, *ecdsa.PrivateKey, error) {
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
	return cert, key, writePEM(filepath.Join(dir, "ca-key.pem"), "EC PRIVATE KEY", kb, 0o600)
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		return nil, nil, err
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

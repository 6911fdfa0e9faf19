package client

import (
	"context"
	"fmt"

	"github.com/baristahq/barista/internal/evidence"
	pb "github.com/baristahq/barista/proto"
)

// The evidence of fairness (docs/fairness.md): a tenant's usage
// statement, its certificate of fairness, and the certificate's verifier,
// which needs no cluster: anyone holding a certificate can check it.

// Statement is a tenant's usage statement over a window of the log.
type Statement = evidence.Statement

// Certificate is a tenant's certificate of fairness over a window of the
// log; CertificateReport is what VerifyCertificate found.
type (
	Certificate       = evidence.Certificate
	CertificateReport = evidence.Report
	CertificateLine   = evidence.Line
	CertificateKey    = evidence.Key
)

// UsageStatement asks a node for a statement, in req.Format ("json" or
// "csv"): the answering node's own replay of the window. It is a read:
// retried on another node when one fails (an open window may then end
// elsewhere; give window.to_index for the same bytes from every node).
func (c *Client) UsageStatement(ctx context.Context, req *pb.UsageStatementRequest) (*pb.UsageStatementResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.UsageStatement)
}

// Statement returns tenant's statement over window (nil: everything the
// node can replay), parsed.
func (c *Client) Statement(ctx context.Context, tenant string, window *pb.EvidenceWindow) (*Statement, error) {
	resp, err := c.UsageStatement(ctx, &pb.UsageStatementRequest{Tenant: tenant, Window: window})
	if err != nil {
		return nil, err
	}
	return ParseStatement([]byte(resp.Document))
}

// FairnessCertificate asks a node for a certificate (its JSON document).
func (c *Client) FairnessCertificate(ctx context.Context, req *pb.FairnessCertificateRequest) (*pb.FairnessCertificateResponse, error) {
	return unary(ctx, c, req, pb.ClientClient.FairnessCertificate)
}

// Certificate returns tenant's certificate over window, parsed.
func (c *Client) Certificate(ctx context.Context, tenant string, window *pb.EvidenceWindow) (*Certificate, error) {
	resp, err := c.FairnessCertificate(ctx, &pb.FairnessCertificateRequest{Tenant: tenant, Window: window})
	if err != nil {
		return nil, err
	}
	return ParseCertificate([]byte(resp.Document))
}

// ParseStatement reads a statement's JSON document.
func ParseStatement(b []byte) (*Statement, error) {
	s, err := evidence.ParseStatement(b)
	if err != nil {
		return nil, fmt.Errorf("not a usage statement: %w", err)
	}
	return s, nil
}

// ParseCertificate reads a certificate's JSON document.
func ParseCertificate(b []byte) (*Certificate, error) { return evidence.ParseCertificate(b) }

// VerifyCertificate checks a certificate (docs/fairness.md, "Checking a
// certificate"): its digest, its lines' order, and that every dispatch in
// it went to a job with a lower key or one a rule of the order puts first.
func VerifyCertificate(cert *Certificate) *CertificateReport { return evidence.Verify(cert) }

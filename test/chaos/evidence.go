package chaos

import (
	"fmt"
	"strconv"

	"github.com/baristahq/barista/client"
)

// CertificateCheck is what a certificate of fairness issued from the
// run's log said (docs/fairness.md): one fairness tenant's, over the
// middle half of the log.
type CertificateCheck struct {
	Tenant           string
	From, To         uint64
	Lines, Checked   int
	Failures         []string
	Digest, EndHash  string
	OtherTenantsSeen int
}

// certify issues, with barista replay on the stopped node's data
// directory dir, the certificate of each fairness tenant over the middle
// half of the log up to index, and verifies it: every dispatch of the
// run, through its failovers, must have kept the order.
func (r *Run) certify(dir string, index uint64) ([]CertificateCheck, []Violation) {
	var checks []CertificateCheck
	var bad []Violation
	tenants := append(append([]string(nil), r.fair...), r.gpuFair...)
	from, to := max(index/4, 1), max(3*index/4, 1)
	for _, tn := range tenants {
		out, errOut, err := r.c.Run("replay", "--data-dir", dir, "--certificate", tn, "--from-index", strconv.FormatUint(from, 10), "--to-index", strconv.FormatUint(to, 10))
		if err != nil {
			bad = append(bad, Violation{Rule: 6, Msg: fmt.Sprintf("certificate of %s: replay: %v %s", tn, err, errOut)})
			continue
		}
		cert, err := client.ParseCertificate([]byte(out))
		if err != nil {
			bad = append(bad, Violation{Rule: 6, Msg: fmt.Sprintf("certificate of %s: %v", tn, err)})
			continue
		}
		rep := client.VerifyCertificate(cert)
		c := CertificateCheck{Tenant: tn, From: cert.Window.FromIndex, To: cert.Window.ToIndex, Lines: rep.Lines, Checked: rep.Candidates,
			Digest: cert.Digest, EndHash: cert.Window.EndHash}
		others := map[string]bool{}
		for _, l := range cert.Lines {
			others[l.Chosen.Tenant] = true
		}
		c.OtherTenantsSeen = len(others)
		for _, f := range rep.Failures {
			c.Failures = append(c.Failures, f.Why)
			bad = append(bad, Violation{Rule: 6, Msg: fmt.Sprintf("certificate of %s, line %d (log index %d): %s", tn, f.Line+1, f.Index, f.Why)})
		}
		checks = append(checks, c)
	}
	return checks, bad
}

// certificateReport is the report's line on the certificates.
func certificateReport(checks []CertificateCheck) string {
	s := "certificates of fairness (log indexes"
	for i, c := range checks {
		if i == 0 {
			s += fmt.Sprintf(" %d..%d):", c.From, c.To)
		}
		verdict := "verified"
		if len(c.Failures) > 0 {
			verdict = fmt.Sprintf("%d FAILURES", len(c.Failures))
		}
		s += fmt.Sprintf(" %s %d dispatches, %d candidates, %s;", c.Tenant, c.Lines, c.Checked, verdict)
	}
	return s + "\n"
}

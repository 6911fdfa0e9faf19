package web

import (
	"net/http"
	"strings"
	"testing"

	"github.com/baristahq/barista/internal/evidence"
)

// TestConsoleEvidence: a tenant's statement page and its downloads — a
// client token its own tenant's only — and a certificate that verifies.
func TestConsoleEvidence(t *testing.T) {
	_, ts := consoleNode(t)
	for _, c := range []struct {
		name, path, token string
		status            int
		want              string
	}{
		{"acme: its statement", "/tenants/acme/statement", gwAcme, 200, `<h1>Usage statement of <a href="/tenants/acme">acme</a></h1>`},
		{"acme: beta's statement", "/tenants/beta/statement", gwAcme, 403, "a client token of tenant acme may not see another tenant&#39;s statement"},
		{"acme: beta's certificate", "/tenants/beta/evidence/certificate.json", gwAcme, 403, "a client token of tenant acme may not see another tenant&#39;s statement"},
		{"admin: beta's statement by index", "/tenants/beta/statement?from_index=1", gwAdmin, 200, `id="statement-window">Log indexes 1..`},
		{"a bad window", "/tenants/acme/statement?last=soon", gwAdmin, 400, "last: &#34;soon&#34; is not a window&#39;s last"},
		{"a download there is none of", "/tenants/acme/evidence/passwords.txt", gwAdmin, 404, "no download passwords.txt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cdo(t, ts, "GET", c.path, c.token, "")
			if r.status != c.status {
				t.Fatalf("GET %s: %d, want %d\n%s", c.path, r.status, c.status, r.body)
			}
			if c.status != 200 {
				if got := errorText(r.body); got != c.want {
					t.Errorf("error %q, want %q", got, c.want)
				}
			} else if !strings.Contains(r.body, c.want) {
				t.Errorf("no %q in\n%s", c.want, r.body)
			}
		})
	}
	r := cdo(t, ts, "GET", "/tenants/acme/evidence/statement.csv?from_index=1", gwAcme, "")
	if r.status != 200 || r.header.Get("Content-Type") != "text/csv; charset=utf-8" || r.header.Get("Content-Disposition") != `attachment; filename="statement.csv"` ||
		!strings.HasPrefix(r.body, "section,pool,size,class,metric,value\ntenant,,,,name,acme\n") {
		t.Errorf("statement.csv: %d %v\n%s", r.status, r.header, r.body)
	}
	r = cdo(t, ts, "GET", "/tenants/acme/evidence/certificate.json", gwAcme, "")
	cert, err := evidence.ParseCertificate([]byte(r.body))
	if r.status != http.StatusOK || err != nil || !evidence.Verify(cert).OK() || cert.Tenant != "acme" {
		t.Errorf("certificate: %d %v\n%s", r.status, err, r.body)
	}
	// The tenant page links to it; the overview says each pool's
	// fairness error.
	if body := cdo(t, ts, "GET", "/tenants/acme", gwAcme, "").body; !strings.Contains(body, `<a href="/tenants/acme/statement">`) {
		t.Errorf("the tenant page has no link to the statement:\n%s", body)
	}
	if body := cdo(t, ts, "GET", "/", gwAdmin, "").body; !strings.Contains(body, `<p id="fairness-error">fairness error`) || !strings.Contains(body, "<b>default</b>") {
		t.Errorf("the overview says no fairness error:\n%s", body)
	}
}

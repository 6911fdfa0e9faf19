package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/baristahq/barista/internal/evidence"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/sfq"
)

// The console's evidence of fairness (docs/fairness.md): a tenant's usage
// statement as a page, and the statement (JSON, CSV) and the certificate
// as downloads, issued by this node's client service in process, so
// that a client token gets its own tenant's only.

// statementPage shows a tenant's usage statement over a window.
type statementPage struct {
	frame
	Name      string
	Statement *evidence.Statement
	// Query is the window's query string, for the download links;
	// FromIndex, ToIndex and Last echo the form.
	Query              string
	FromIndex, ToIndex string
	Last               string
}

// evidenceWindowOf reads a window from a console query: from_index and
// to_index, or last (a duration of cluster time up to now); none: the
// last hour.
func (s *Server) evidenceWindowOf(r *http.Request) (*pb.EvidenceWindow, string, error) {
	q := r.URL.Query()
	from, to, last := q.Get("from_index"), q.Get("to_index"), q.Get("last")
	if from != "" || to != "" {
		var w pb.EvidenceWindow
		var err error
		if from != "" {
			if w.FromIndex, err = strconv.ParseUint(from, 10, 64); err != nil {
				return nil, "", errBadWindow("from_index", from)
			}
		}
		if to != "" {
			if w.ToIndex, err = strconv.ParseUint(to, 10, 64); err != nil {
				return nil, "", errBadWindow("to_index", to)
			}
		}
		return &w, "from_index=" + from + "&to_index=" + to, nil
	}
	if last == "" {
		last = "1h"
	}
	d, err := time.ParseDuration(last)
	if err != nil || d <= 0 {
		return nil, "", errBadWindow("last", last)
	}
	clock, _ := s.node.FSM.Clock()
	return &pb.EvidenceWindow{ByTime: true, FromMs: max(int64(clock)-d.Milliseconds(), 0)}, "last=" + last, nil
}

type badWindow struct{ field, value string }

func (e badWindow) Error() string {
	return e.field + ": " + strconv.Quote(e.value) + " is not a window's " + e.field
}

func errBadWindow(field, value string) error { return badWindow{field, value} }

// tenantEvidence checks the tenant of a statement or certificate route.
func (s *Server) tenantEvidence(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if err := sfq.ValidateName("tenant", name); err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return "", false
	}
	if id := requestIdentity(r); !mayOpenTenant(id, name) {
		s.fail(w, r, http.StatusForbidden, "a client token of tenant "+id.Tenant+" may not see another tenant's statement")
		return "", false
	}
	return name, true
}

func (s *Server) statementPage(w http.ResponseWriter, r *http.Request) {
	name, ok := s.tenantEvidence(w, r)
	if !ok {
		return
	}
	win, query, err := s.evidenceWindowOf(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	resp, err := s.client.UsageStatement(ctx, &pb.UsageStatementRequest{Tenant: name, Window: win})
	if err != nil {
		s.failCall(w, r, err)
		return
	}
	st, err := evidence.ParseStatement([]byte(resp.Document))
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	q := r.URL.Query()
	p := statementPage{frame: s.frame(w, r, "statement of "+name, "tenant"), Name: name, Statement: st, Query: query,
		FromIndex: q.Get("from_index"), ToIndex: q.Get("to_index"), Last: q.Get("last")}
	s.render(w, "statement", 0, p)
}

// evidenceDownload serves a statement (JSON or CSV) or a certificate as
// a file.
func (s *Server) evidenceDownload(w http.ResponseWriter, r *http.Request) {
	name, ok := s.tenantEvidence(w, r)
	if !ok {
		return
	}
	win, _, err := s.evidenceWindowOf(r)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := callCtx(r)
	defer cancel()
	var doc, file, ctype string
	switch kind := r.PathValue("file"); kind {
	case "statement.json", "statement.csv":
		format, ct := "json", "application/json"
		if kind == "statement.csv" {
			format, ct = "csv", "text/csv; charset=utf-8"
		}
		resp, err := s.client.UsageStatement(ctx, &pb.UsageStatementRequest{Tenant: name, Window: win, Format: format})
		if err != nil {
			s.failCall(w, r, err)
			return
		}
		doc, file, ctype = resp.Document, "statement."+format, ct
	case "certificate.json":
		resp, err := s.client.FairnessCertificate(ctx, &pb.FairnessCertificateRequest{Tenant: name, Window: win})
		if err != nil {
			s.failCall(w, r, err)
			return
		}
		doc, file, ctype = resp.Document, "certificate.json", "application/json"
	default:
		s.fail(w, r, http.StatusNotFound, "no download "+kind)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	// The file's name is fixed (never the tenant's): nothing the tenant
	// wrote goes into a header.
	h.Set("Content-Disposition", `attachment; filename="`+file+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.Write([]byte(doc))
}

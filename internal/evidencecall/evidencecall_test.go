package evidencecall

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestLimit: a caller holds at most one statement or certificate
// being issued, a node two; beyond, RESOURCE_EXHAUSTED at once, counted
// by limit; a release gives the place back.
func TestLimit(t *testing.T) {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"limit"})
	l := &Limit{Refused: refused}
	a, err := l.Acquire("client/acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire("client/acme"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("acme's second: %v", err)
	}
	b, err := l.Acquire("client/beta")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire("admin/"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a third caller: %v", err)
	}
	if c, n := testutil.ToFloat64(refused.WithLabelValues("caller")), testutil.ToFloat64(refused.WithLabelValues("node")); c != 1 || n != 1 {
		t.Errorf("refused: caller %v node %v", c, n)
	}
	a()
	c, err := l.Acquire("admin/")
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	b()
	c()
	if l.n != 0 || len(l.caller) != 0 {
		t.Errorf("left %d held, callers %v", l.n, l.caller)
	}
}

package web

import (
	"strings"
	"testing"

	"github.com/baristahq/barista/internal/version"
)

// TestBuildVersionShown: /metrics carries barista_build_info with the
// build's release as its version label, at 1, and every console page
// names the release in its header.
func TestBuildVersionShown(t *testing.T) {
	n := startTestNode(t, nil, nil)
	r := gwDo(t, n.serve(), "GET", "/metrics", "", "")
	if r.status != 200 {
		t.Fatalf("/metrics: %d %s", r.status, r.body)
	}
	var line string
	for _, l := range strings.Split(r.body, "\n") {
		if strings.HasPrefix(l, "barista_build_info{") {
			line = l
		}
	}
	if !strings.Contains(line, `version="`+version.Version+`"`) || !strings.HasSuffix(line, "} 1") || !strings.Contains(line, `goversion="go`) {
		t.Errorf("barista_build_info: %q", line)
	}

	_, ts := consoleNode(t)
	page := cdo(t, ts, "GET", "/", gwAdmin, "")
	if page.status != 200 || !strings.Contains(page.body, "· barista "+version.Version+"</div>") {
		t.Errorf("overview: %d, no version in:\n%s", page.status, page.body)
	}
}

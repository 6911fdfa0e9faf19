package web

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestAPIDocsListEveryRoute: every route of the OpenAPI document (each
// path with each of its methods) has a row in docs/api.md's table of
// HTTP routes, so a route never ships undocumented.
func TestAPIDocsListEveryRoute(t *testing.T) {
	raw, err := os.ReadFile("../proto/barista.swagger.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	// A row's first cell: "`GET`, `PUT`, `DELETE /v1/admin/tenants/{name}`".
	row := regexp.MustCompile("(?m)^\\| ((?:`[A-Z]+`, )*`[A-Z]+ /v1/[^`]*`) \\|")
	documented := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(md), -1) {
		cell := strings.ReplaceAll(m[1], "`", "")
		i := strings.LastIndex(cell, " /v1/")
		path := cell[i+1:]
		for _, method := range strings.Split(cell[:i], ", ") {
			documented[method+" "+path] = true
		}
	}
	n := 0
	for path, methods := range doc.Paths {
		for method := range methods {
			n++
			if route := strings.ToUpper(method) + " " + path; !documented[route] {
				t.Errorf("docs/api.md has no row for %s", route)
			}
		}
	}
	if n < 30 {
		t.Fatalf("read only %d routes from the OpenAPI document", n)
	}
}

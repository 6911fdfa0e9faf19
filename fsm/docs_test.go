package fsm

import (
	"os"
	"strings"
	"testing"
)

// TestWebhookDocsNameEveryEventKind: docs/webhooks.md names every event
// kind an endpoint may get and --kinds accepts, both where it lists what
// --kinds takes and in the table of an event's fields.
func TestWebhookDocsNameEveryEventKind(t *testing.T) {
	raw, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	_, kindsPara, _ := strings.Cut(doc, "`--kinds` limits delivery to some kinds")
	kindsPara, _, _ = strings.Cut(kindsPara, "\n\n")
	_, row, _ := strings.Cut(doc, "| `kind` |")
	row, _, _ = strings.Cut(row, "\n")
	for k := EvQueued; k < numEventKinds; k++ {
		name := "`" + k.String() + "`"
		if !strings.Contains(kindsPara, name) {
			t.Errorf("docs/webhooks.md: the --kinds paragraph does not name %s", name)
		}
		if !strings.Contains(row, name) {
			t.Errorf("docs/webhooks.md: the table's kind row does not name %s", name)
		}
	}
}

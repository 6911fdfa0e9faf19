package webhook

import (
	"testing"

	"github.com/baristahq/barista/fsm"
)

// TestTenantLevelEventPayload: paused and resumed are tenant-level events:
// job_id 0, the group they name in "group" (none: the whole tenant), no
// worker.
func TestTenantLevelEventPayload(t *testing.T) {
	ev := fsm.Event{Seq: 9}
	ev.Kind, ev.Worker, ev.At = fsm.EvPaused, "eu", 5000
	p := Payload{Events: []Event{eventOf(&ev, "acme")}}
	b, err := p.Marshal()
	if want := `{"events":[{"seq":9,"job_id":0,"tenant":"acme","kind":"paused","attempt":0,"at_ms":5000,"wall_ms":5000,"group":"eu"}]}`; err != nil || string(b) != want {
		t.Errorf("paused: %s %v\nwant %s", b, err, want)
	}
	ev.Kind, ev.Worker = fsm.EvResumed, ""
	b, _ = (&Payload{Events: []Event{eventOf(&ev, "acme")}}).Marshal()
	if want := `{"events":[{"seq":9,"job_id":0,"tenant":"acme","kind":"resumed","attempt":0,"at_ms":5000,"wall_ms":5000}]}`; string(b) != want {
		t.Errorf("resumed: %s\nwant %s", b, want)
	}
}

// TestJobEventPayloadPool: a job's event names its job's pool, "default"
// for the pool default; a tenant-level event names none (above).
func TestJobEventPayloadPool(t *testing.T) {
	ev := fsm.Event{Seq: 3, PoolName: "gpu"}
	ev.Job, ev.Kind, ev.Attempt, ev.At, ev.Worker = 7, fsm.EvAssigned, 1, 5000, "w1"
	b, err := (&Payload{Events: []Event{eventOf(&ev, "acme")}}).Marshal()
	if want := `{"events":[{"seq":3,"job_id":7,"tenant":"acme","pool":"gpu","kind":"assigned","attempt":1,"at_ms":5000,"wall_ms":5000,"worker_id":"w1"}]}`; err != nil || string(b) != want {
		t.Errorf("gpu: %s %v\nwant %s", b, err, want)
	}
	ev.PoolName = ""
	b, _ = (&Payload{Events: []Event{eventOf(&ev, "acme")}}).Marshal()
	if want := `{"events":[{"seq":3,"job_id":7,"tenant":"acme","pool":"default","kind":"assigned","attempt":1,"at_ms":5000,"wall_ms":5000,"worker_id":"w1"}]}`; string(b) != want {
		t.Errorf("default: %s\nwant %s", b, want)
	}
}

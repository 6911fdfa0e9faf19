package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

func webhookSet(tenant, url string, rotate bool, graceMs int64, keyID uint64, kinds ...string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_WebhookSet{WebhookSet: &clusterpb.WebhookSet{Tenant: tenant, Url: url, Kinds: kinds, Rotate: rotate, GraceMs: graceMs, KeyId: keyID}}}
}

func webhookAck(cursors ...*clusterpb.WebhookCursor) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_WebhookAck{WebhookAck: &clusterpb.WebhookAck{Cursors: cursors}}}
}

func webhookReplay(tenant string, from uint64) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_WebhookReplay{WebhookReplay: &clusterpb.WebhookReplay{Tenant: tenant, FromSeq: from}}}
}

func webhookDelete(tenant string) *clusterpb.Command {
	return &clusterpb.Command{Cmd: &clusterpb.Command_WebhookDelete{WebhookDelete: &clusterpb.WebhookDelete{Tenant: tenant}}}
}

func (h *harness) webhook(tenant string) Webhook {
	h.t.Helper()
	w, ok := h.f.WebhookOf(tenant)
	if !ok {
		h.t.Fatalf("tenant %q has no webhook", tenant)
	}
	return w
}

// TestWebhookSetRotateReplayDelete: the endpoint record after each admin
// command, field by field.
func TestWebhookSetRotateReplayDelete(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	h.one(submit("acme", "", 1000, "x")) // event 1
	if r := h.one(webhookSet("acme", "https://hooks.example.com/b", false, 0, 77, "completed", "failed", "completed")); r.Code != OK || !r.Created {
		t.Fatalf("set: %+v", r)
	}
	want := Webhook{Tenant: 0, URL: "https://hooks.example.com/b", Kinds: 1<<EvCompleted | 1<<EvFailed, KeyID: 77, Version: 1, Epoch: 1, Cursor: 1, Name: "acme"}
	if got := h.webhook("acme"); got != want {
		t.Fatalf("after set:\n got %+v\nwant %+v", got, want)
	}
	// An update keeps the secret version.
	all := strings.Split("queued assigned started requeued completed failed cancel_requested cancelled timed_out", " ")
	if r := h.one(webhookSet("acme", "https://hooks.example.com/c", false, 0, 77, all...)); r.Code != OK || r.Created {
		t.Fatalf("update: %+v", r)
	}
	want.URL, want.Kinds, want.Epoch = "https://hooks.example.com/c", 1<<(EvTimedOut+1)-2, 2
	if got := h.webhook("acme"); got != want {
		t.Fatalf("after update:\n got %+v\nwant %+v", got, want)
	}
	// An update under another key is refused: its secret could not be
	// derived; a rotation under it keeps no previous secret.
	if r := h.one(webhookSet("acme", "https://hooks.example.com/c", false, 0, 78)); r.Code != FailedPrecondition ||
		r.Msg != `the webhook secret of tenant "acme" was derived from another webhook key than the leader's: rotate it to issue one from this key` {
		t.Fatalf("other key: %+v", r)
	}
	h.now = 5_000
	h.one(webhookSet("acme", "https://hooks.example.com/c", true, 60_000, 77))
	// The rotation names no kinds: it keeps them (level 7).
	want.Version, want.PrevVersion, want.PrevUntil, want.Epoch = 3, 1, 65_000, 3
	if got := h.webhook("acme"); got != want {
		t.Fatalf("after rotate:\n got %+v\nwant %+v", got, want)
	}
	if !want.PreviousValid(64_999) || want.PreviousValid(65_000) {
		t.Fatal("the previous secret's grace ends at PrevUntil")
	}
	h.one(webhookSet("acme", "https://hooks.example.com/c", true, 60_000, 78))
	want.Version, want.PrevVersion, want.PrevUntil, want.Epoch, want.KeyID = 4, 0, 0, 4, 78
	if got := h.webhook("acme"); got != want {
		t.Fatalf("after rotate under another key:\n got %+v\nwant %+v", got, want)
	}
	// Replay.
	h.one(submit("acme", "", 1000, "y")) // event 2
	for _, c := range []struct {
		from uint64
		code Code
		msg  string
	}{
		{0, Invalid, "from_seq: must be at least 1"},
		{4, Invalid, "from_seq: 4 is past the next event (3)"},
		{1, OK, ""},
	} {
		if r := h.one(webhookReplay("acme", c.from)); r.Code != c.code || r.Msg != c.msg {
			t.Fatalf("replay from %d: %+v", c.from, r)
		}
	}
	want.Cursor, want.Epoch = 0, 5
	if got := h.webhook("acme"); got != want {
		t.Fatalf("after replay:\n got %+v\nwant %+v", got, want)
	}
	// Delete; a new endpoint never reuses a version.
	if r := h.one(webhookDelete("acme")); r.Code != OK {
		t.Fatalf("delete: %+v", r)
	}
	if r := h.one(webhookDelete("acme")); r.Code != NotFound || r.Msg != `tenant "acme" has no webhook` {
		t.Fatalf("delete again: %+v", r)
	}
	h.one(webhookSet("acme", "http://hooks.example.com/", false, 0, 78))
	if got := h.webhook("acme"); got.Version != 6 || got.Cursor != 2 {
		t.Fatalf("set again: %+v", got)
	}
	// Deleting the tenant deletes its endpoint.
	h.one(deleteTenant("acme"))
	if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "acme", Job: 1}}}); r.Code != OK {
		t.Fatalf("cancel: %+v", r)
	}
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Cancel{Cancel: &clusterpb.CancelJob{Tenant: "acme", Job: 2}}})
	if r := h.one(deleteTenant("acme")); r.Code != OK {
		t.Fatalf("delete tenant: %+v", r)
	}
	if ws := h.f.Webhooks(); len(ws) != 0 {
		t.Fatalf("endpoints of a deleted tenant: %+v", ws)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestWebhookSetValidation: Apply refuses what the edge refuses.
func TestWebhookSetValidation(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("acme", pb.Tier_GOLD))
	for _, c := range []struct {
		cmd  *clusterpb.Command
		code Code
		msg  string
	}{
		{webhookSet("nope", "https://x.example/", false, 0, 1), NotFound, `unknown tenant "nope"`},
		{webhookSet("acme", "", false, 0, 1), Invalid, `url: required to create the webhook of tenant "acme"`},
		{webhookSet("acme", "ftp://x.example/", false, 0, 1), Invalid, `url: scheme "ftp", want http or https`},
		{webhookSet("acme", "https://user:pw@x.example/", false, 0, 1), Invalid, "url: must not carry a user or password"},
		{webhookSet("acme", "https://x.example/#frag", false, 0, 1), Invalid, "url: must not have a fragment"},
		{webhookSet("acme", "https:///path", false, 0, 1), Invalid, "url: no host"},
		{webhookSet("acme", "https://x.example/a b", false, 0, 1), Invalid, "url: contains a space or control character"},
		{webhookSet("acme", "/relative", false, 0, 1), Invalid, `url: scheme "", want http or https`},
		{webhookSet("acme", "https://x.example/"+strings.Repeat("a", MaxWebhookURLLen), false, 0, 1), Invalid, "url: 2066 bytes (max 2048)"},
		{webhookSet("acme", "https://x.example/", false, 0, 1, "queued", "gap"), Invalid,
			`kinds: unknown event kind "gap" (want queued, assigned, started, requeued, completed, failed, cancel_requested, cancelled, timed_out, scheduled, released, expired, paused, resumed, redriven, schedule_fired, schedule_refused, schedule_missed, or all alone)`},
		{webhookSet("acme", "https://x.example/", true, -1, 1), Invalid, "grace_ms: -1, want 0..2592000000 (30 days)"},
		{webhookSet("acme", "https://x.example/", false, 0, 0), Invalid, "key_id: required (the leader sets it)"},
		{webhookReplay("acme", 1), NotFound, `tenant "acme" has no webhook`},
		{webhookDelete("nope"), NotFound, `unknown tenant "nope"`},
	} {
		if r := h.one(c.cmd); r.Code != c.code || r.Msg != c.msg {
			t.Errorf("want %v %q, got %v %q", c.code, c.msg, r.Code, r.Msg)
		}
	}
	if h.f.HasWebhooks() {
		t.Fatal("a refused set stored an endpoint")
	}
}

// TestWebhookAckFencing: a cursor moves forward only, within the log, in
// the endpoint's epoch; one command moves many.
func TestWebhookAckFencing(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(tenant("b", pb.Tier_GOLD))
	h.one(webhookSet("a", "https://a.example/", false, 0, 1)) // serial 1
	h.one(webhookSet("b", "https://b.example/", false, 0, 1)) // serial 2
	for range 5 {
		h.one(submit("a", "", 1000, "x"))
	}
	h.now = 2_000
	r := h.one(webhookAck(
		&clusterpb.WebhookCursor{Tenant: "a", Epoch: 1, Seq: 3},
		&clusterpb.WebhookCursor{Tenant: "b", Epoch: 2, Seq: 5},
		&clusterpb.WebhookCursor{Tenant: "b", Epoch: 1, Seq: 4}, // another epoch
		&clusterpb.WebhookCursor{Tenant: "nope", Epoch: 1, Seq: 4},
	))
	if r.Code != OK || r.Count != 2 {
		t.Fatalf("ack: %+v", r)
	}
	r = h.one(webhookAck(
		&clusterpb.WebhookCursor{Tenant: "a", Epoch: 1, Seq: 2}, // behind
		&clusterpb.WebhookCursor{Tenant: "a", Epoch: 1, Seq: 3}, // repeated
		&clusterpb.WebhookCursor{Tenant: "b", Epoch: 2, Seq: 6}, // past the newest event
	))
	if r.Count != 0 {
		t.Fatalf("stale acks moved %d cursors", r.Count)
	}
	if a, b := h.webhook("a"), h.webhook("b"); a.Cursor != 3 || a.AckedAt != 2_000 || b.Cursor != 5 || b.AckedAt != 2_000 {
		t.Fatalf("cursors a %+v b %+v", a, b)
	}
	// A replay changes the epoch: an ack sent before it changes nothing.
	h.one(webhookReplay("a", 2))
	if r := h.one(webhookAck(&clusterpb.WebhookCursor{Tenant: "a", Epoch: 1, Seq: 5})); r.Count != 0 || h.webhook("a").Cursor != 1 {
		t.Fatalf("ack across a replay: %+v, cursor %d", r, h.webhook("a").Cursor)
	}
}

// TestWebhookGapOnPrune: events of the tenant, of the endpoint's kinds,
// pruned past its cursor form its gap; other tenants' events and other
// kinds do not; an ack past the gap clears it.
func TestWebhookGapOnPrune(t *testing.T) {
	h := newHarness(t)
	cfg := DefaultConfig()
	cfg.EventRetentionCount = 2
	cfg.EventRetentionPerTenant = 0 // no tenant keeps its events (eventkeep_test.go)
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}})
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(tenant("b", pb.Tier_GOLD))
	h.one(webhookSet("a", "https://a.example/", false, 0, 1, "queued", "cancelled"))
	h.one(submit("a", "", 1000, "x")) // 1 a queued
	h.one(submit("b", "", 1000, "x")) // 2 b queued
	h.one(submit("a", "", 1000, "x")) // 3 a queued
	h.one(dispatch("w1", 1))          // 4 a assigned (not a kind of the endpoint)
	h.one(submit("b", "", 1000, "x")) // 5 b queued
	h.one(cancelJob("a", 3))          // 6 a cancelled
	h.one(webhookAck(&clusterpb.WebhookCursor{Tenant: "a", Epoch: 1, Seq: 1}))
	if r := h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}}); r.Count != 4 {
		t.Fatalf("pruned %d", r.Count)
	}
	var seqs []string
	h.f.Events(0, func(ev *Event) bool { seqs = append(seqs, fmt.Sprint(ev.Seq, ev.Kind)); return true })
	if fmt.Sprint(seqs) != "[5 queued 6 cancelled]" {
		t.Fatalf("retained %v", seqs)
	}
	if w := h.webhook("a"); w.GapFrom != 3 || w.GapTo != 3 {
		t.Fatalf("gap %d..%d, want 3..3", w.GapFrom, w.GapTo)
	}
	// A later prune extends it.
	h.one(submit("b", "", 1000, "x")) // 7
	h.one(submit("b", "", 1000, "x")) // 8
	h.one(&clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{}}})
	if w := h.webhook("a"); w.GapFrom != 3 || w.GapTo != 6 {
		t.Fatalf("gap %d..%d, want 3..6", w.GapFrom, w.GapTo)
	}
	// A replay refuses pruned seqs; an ack short of the gap's end keeps
	// it, one past it clears it.
	if r := h.one(webhookReplay("a", 6)); r.Code != FailedPrecondition || r.Msg != "from_seq: events before 7 were pruned (the oldest retained is 7)" {
		t.Fatalf("replay of pruned events: %+v", r)
	}
	h.one(webhookAck(&clusterpb.WebhookCursor{Tenant: "a", Epoch: 1, Seq: 5}))
	if w := h.webhook("a"); w.GapTo != 6 {
		t.Fatalf("gap cleared by an ack short of it: %+v", w)
	}
	h.one(webhookAck(&clusterpb.WebhookCursor{Tenant: "a", Epoch: 1, Seq: 7}))
	if w := h.webhook("a"); w.GapFrom != 0 || w.GapTo != 0 || w.Cursor != 7 {
		t.Fatalf("after an ack past the gap: %+v", w)
	}
	if err := h.f.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestWebhooksNeedLevel3: below feature level 3 every webhook command is
// refused, naming the command and both levels (a build of level 2 does
// not know them), and the state is written as version 4, what builds of
// level 2 write and hash. From level 3 the state is version 5, with the
// webhook section even while it is empty; it reads back at level 3, and
// once an endpoint was set the section keeps the serial (versions are
// never reused), deleted or not.
func TestWebhooksNeedLevel3(t *testing.T) {
	h := &harness{t: t, f: New(), now: 1_000}
	h.one(setLevelCmd(Level2))
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(submit("a", "", 1000, "x"))
	first := func() byte {
		v, err := h.f.Freeze()
		if err != nil {
			t.Fatal(err)
		}
		return encodeFSM(v)[0]
	}
	msg := func(what string) string {
		return "FAILED_PRECONDITION: " + what + " needs cluster feature level 3; the cluster is at level 2 until every voter runs a build that understands level 3 (docs/operations.md, \"Upgrades\")"
	}
	for _, c := range []struct {
		cmd  *clusterpb.Command
		what string
	}{
		{webhookSet("a", "https://a.example/", false, 0, 1), "webhook set"},
		{webhookDelete("a"), "webhook delete"},
		{webhookAck(&clusterpb.WebhookCursor{Tenant: "a", Epoch: 1, Seq: 1}), "webhook ack"},
		{webhookReplay("a", 1), "webhook replay"},
	} {
		if r := h.one(c.cmd); r.Code != FailedPrecondition || r.Err().Error() != msg(c.what) {
			t.Errorf("%s at level 2: %v", c.what, r.Err())
		}
		if err := CheckLevel(c.cmd, Level2); err == nil || err.(*Refusal).Line() != msg(c.what) {
			t.Errorf("CheckLevel of %s: %v", c.what, err)
		}
	}
	if got := first(); got != stateVersionLevel2 || h.f.HasWebhooks() {
		t.Fatalf("level 2: state version %d, webhooks %t", got, h.f.HasWebhooks())
	}
	level2, _ := h.f.Hash()

	if r := h.one(setLevelCmd(Level3)); r.Code != OK || h.f.Level() != Level3 {
		t.Fatalf("raise to 3: %+v", r)
	}
	if got := first(); got != stateVersionWebhooks {
		t.Fatalf("level 3: state version %d, want %d", got, stateVersionWebhooks)
	}
	if h3, _ := h.f.Hash(); h3 == level2 {
		t.Fatal("the level is not in the hash")
	}
	roundTrip(t, h.f)
	v, _ := h.f.Freeze()
	back, err := DecodeState(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), v.Index)
	if err != nil || back.Level() != Level3 {
		t.Fatalf("read back at level %d: %v", back.Level(), err)
	}
	before, _ := h.f.Hash()
	if r := h.one(webhookSet("a", "https://a.example/", false, 0, 1)); r.Code != OK {
		t.Fatalf("set at level 3: %v", r.Err())
	}
	roundTrip(t, h.f)
	h.one(webhookDelete("a"))
	roundTrip(t, h.f)
	if after, _ := h.f.Hash(); after == before {
		t.Fatal("the serial is not in the hash")
	}
	// With the metrics section too.
	h.one(markedTenant("a", pb.Tier_GOLD, true))
	roundTrip(t, h.f)
}

// TestWebhooksBelowLevel3AreCorrupt: a state of level 2 that holds
// webhooks cannot be (a build of level 2 would drop them): Verify says so.
func TestWebhooksBelowLevel3AreCorrupt(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(webhookSet("a", "https://a.example/", false, 0, 1))
	h.f.setLevel(Level2)
	if err := h.f.Verify(); !errors.Is(err, sfq.ErrVerify) || !strings.Contains(err.Error(), "at feature level 2 the state holds webhooks") {
		t.Fatalf("verify: %v", err)
	}
}

// TestWebhookDecodeRefusesMalformed: endpoints out of order, or with a
// version not below the serial, are corrupt.
func TestWebhookDecodeRefusesMalformed(t *testing.T) {
	h := newHarness(t)
	h.one(tenant("a", pb.Tier_GOLD))
	h.one(tenant("b", pb.Tier_GOLD))
	h.one(webhookSet("a", "https://a.example/", false, 0, 1))
	h.one(webhookSet("b", "https://b.example/", false, 0, 1))
	for _, c := range []struct {
		name   string
		mangle func(v *View)
		want   string
	}{
		{"order", func(v *View) { v.webhooks[0], v.webhooks[1] = v.webhooks[1], v.webhooks[0] }, "webhook 1 (tenant 0) is out of order"},
		{"version", func(v *View) { v.webhooks[1].Version = 3 }, "webhook 1 (tenant 1) has versions out of range"},
		{"gap", func(v *View) { v.webhooks[0].GapTo = 1 }, "webhook 0 (tenant 0) has a malformed gap"},
		{"tenant", func(v *View) { v.webhooks[1].Tenant = 7 }, "a webhook belongs to tenant 7, not a live tenant"},
	} {
		v, _ := h.f.Freeze()
		v.webhooks = append([]Webhook(nil), v.webhooks...)
		c.mangle(v)
		_, err := DecodeState(sfq.NewDecoder(bufio.NewReader(bytes.NewReader(encodeFSM(v)))), 1)
		if err == nil || !strings.Contains(err.Error(), c.want) || !(errors.Is(err, sfq.ErrCorrupt) || errors.Is(err, sfq.ErrVerify)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// randomWebhookCommand draws a webhook command, or any other.
func randomWebhookCommand(t *rapid.T, jobs uint64, next uint64) *clusterpb.Command {
	tenants := []string{"a", "b", "c"}
	name := rapid.SampledFrom(tenants).Draw(t, "wtenant")
	switch rapid.IntRange(0, 9).Draw(t, "wkind") {
	case 0:
		kinds := rapid.SliceOfN(rapid.SampledFrom([]string{"queued", "assigned", "completed", "cancelled"}), 0, 2).Draw(t, "kinds")
		return webhookSet(name, "https://"+name+".example/", rapid.Bool().Draw(t, "rotate"), rapid.Int64Range(0, 50_000).Draw(t, "grace"),
			rapid.Uint64Range(1, 2).Draw(t, "key"), kinds...)
	case 1:
		return webhookAck(&clusterpb.WebhookCursor{Tenant: name, Epoch: rapid.Uint64Range(1, 10).Draw(t, "epoch"), Seq: rapid.Uint64Range(0, next).Draw(t, "seq")})
	case 2:
		return webhookReplay(name, rapid.Uint64Range(0, next).Draw(t, "from"))
	case 3:
		if rapid.IntRange(0, 3).Draw(t, "del") == 0 {
			return webhookDelete(name)
		}
		return &clusterpb.Command{Cmd: &clusterpb.Command_Prune{Prune: &clusterpb.Prune{Limit: 5}}}
	}
	return randomCommand(t, jobs)
}

// TestWebhookSnapshotRoundTrip: random streams with webhook commands and
// prunes (a small event retention); at every step the state verifies and
// round-trips through its encoding, and a state restored at a random
// point and fed the rest ends with the same hash.
func TestWebhookSnapshotRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := New()
		cfg := DefaultConfig()
		cfg.EventRetentionCount = uint64(rapid.IntRange(1, 8).Draw(t, "retention"))
		cfg.JobRetentionMs = 0
		n := rapid.IntRange(2, 120).Draw(t, "n")
		cut := rapid.IntRange(1, n).Draw(t, "cut")
		now := int64(1000)
		var log []*clusterpb.Envelope
		var snap []byte
		for i := 0; i < n; i++ {
			if i == cut {
				v, err := a.Freeze()
				if err != nil {
					t.Fatal(err)
				}
				snap = encodeFSM(v)
			}
			now += rapid.Int64Range(0, 20_000).Draw(t, "dt")
			cmds := []*clusterpb.Command{{Cmd: &clusterpb.Command_SetConfig{SetConfig: &clusterpb.SetConfig{Config: ConfigToPB(cfg)}}},
				tenant("a", pb.Tier_GOLD), tenant("b", pb.Tier_FREE), tenant("c", pb.Tier_SILVER)}
			if i > 0 {
				jobs, _ := a.Counts()
				_, next := a.Events(^uint64(0), func(*Event) bool { return false })
				cmds = []*clusterpb.Command{randomWebhookCommand(t, uint64(jobs)+1, next)}
			}
			env := &clusterpb.Envelope{Version: Version, StampMs: now, Commands: cmds}
			log = append(log, env)
			if _, err := a.ApplyEnvelope(uint64(i+1), env); err != nil {
				t.Fatal(err)
			}
			if err := a.Verify(); err != nil {
				t.Fatal(err)
			}
		}
		if snap == nil {
			return
		}
		checkRestored(t, a, snap, cut, log)
	})
}

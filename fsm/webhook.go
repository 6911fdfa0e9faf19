package fsm

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/baristahq/barista/proto/clusterpb"
	"github.com/baristahq/barista/sfq"
)

// Webhooks (docs/webhooks.md): a tenant's registered endpoint, to which
// the leader delivers the tenant's events in order, at least once. The
// replicated state holds what every leader needs to go on where the last
// one stopped — the URL, the event kinds, the secret's version (never the
// secret: every server derives it from the cluster's webhook key), and the
// delivered cursor — and nothing a leader learns on its own (errors,
// retry times). The webhook commands need feature level 3 (level.go); the
// section is in the state encoding from version 5, the version of that
// level, so a cluster below it keeps its encoding and state hashes.

// Limits of a webhook endpoint.
const (
	MaxWebhookURLLen  = 2048
	MaxWebhookGraceMs = 30 * 24 * 3600 * 1000
)

// Webhook is a tenant's endpoint as the replicated state holds it.
type Webhook struct {
	// Tenant is the tenant's index: its incarnation (a tenant deleted and
	// created again under the same name has another index).
	Tenant uint32
	URL    string
	// Kinds has bit k set when events of kind k are delivered; 0: every
	// kind.
	Kinds uint32
	// KeyID names the cluster webhook key the secrets were derived with
	// (a fingerprint, not the key).
	KeyID uint64
	// Version is the secret's version. PrevVersion (0: none) is the
	// previous one, still accepted until PrevUntil (cluster time).
	Version     uint64
	PrevVersion uint64
	PrevUntil   sfq.Time
	// Epoch changes with every admin change of the endpoint: a cursor
	// advance of an older epoch changes nothing.
	Epoch uint64
	// Cursor: every event of the tenant up to this seq was delivered (or
	// was not of the endpoint's kinds, or is reported by the gap).
	Cursor uint64
	// GapFrom..GapTo (both 0: none) are the seqs of the tenant's events
	// pruned before delivery, reported by a gap event in their place.
	GapFrom, GapTo uint64
	// AckedAt is the cluster time the cursor last advanced (0: never).
	AckedAt sfq.Time

	// Name is the tenant's name, filled by reads (not part of the state).
	Name string
}

// Delivers reports whether events of kind k go to the endpoint.
func (w *Webhook) Delivers(k EventKind) bool {
	return w.Kinds == 0 || w.Kinds&(1<<k) != 0
}

// PreviousValid reports whether the previous secret is still accepted at
// cluster time now.
func (w *Webhook) PreviousValid(now sfq.Time) bool {
	return w.PrevVersion != 0 && now < w.PrevUntil
}

// allKinds is the mask of every event kind.
const allKinds = uint32(1)<<numEventKinds - 2

// ParseWebhookKinds reads event kind names into a mask (none: 0, every
// kind, including kinds a later version adds). A name may repeat. The
// mask is what was named, whatever this build's kinds: builds that know
// more kinds store the same mask.
func ParseWebhookKinds(names []string) (uint32, error) {
	var m uint32
	if len(names) == 1 && names[0] == WebhookAllKinds {
		return 0, nil
	}
	for _, n := range names {
		k, ok := ParseEventKind(n)
		if !ok {
			return 0, fmt.Errorf("kinds: unknown event kind %q (want %s, or %s alone)", n, strings.Join(eventKindNames[1:], ", "), WebhookAllKinds)
		}
		m |= 1 << k
	}
	return m, nil
}

// WebhookAllKinds, as a webhook set's only kind, delivers every kind: an
// update that leaves kinds out keeps them (feature level 7), so going
// back to every kind is said.
const WebhookAllKinds = "all"

// WebhookKindNames lists the kinds of a mask in kind order (none: every
// kind).
func WebhookKindNames(mask uint32) []string {
	var out []string
	for k := EvQueued; k < numEventKinds; k++ {
		if mask&(1<<k) != 0 {
			out = append(out, k.String())
		}
	}
	return out
}

// ValidateWebhookURL checks an endpoint URL: absolute http or https, a
// host, no user or password (the state is readable by every admin and in
// every snapshot), no fragment, printable, at most MaxWebhookURLLen
// bytes. Which addresses it may reach is the servers' configuration, and
// is checked when it is dialled.
func ValidateWebhookURL(s string) error {
	if s == "" {
		return fmt.Errorf("url: required")
	}
	if len(s) > MaxWebhookURLLen {
		return fmt.Errorf("url: %d bytes (max %d)", len(s), MaxWebhookURLLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("url: not valid UTF-8")
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("url: contains a space or control character")
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("url: %v", err.(*url.Error).Err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("url: scheme %q, want http or https", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("url: no host")
	case u.User != nil:
		return fmt.Errorf("url: must not carry a user or password")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("url: must not have a fragment")
	}
	return nil
}

// webhookAt finds the endpoint of the tenant at index ti.
func (f *FSM) webhookAt(ti uint32) (int, bool) {
	return slices.BinarySearchFunc(f.webhooks, ti, func(w Webhook, ti uint32) int { return cmpU32(w.Tenant, ti) })
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// takeSerial returns the next webhook serial: secret versions and epochs
// are never reused, so a deleted endpoint's secret never comes back.
func (f *FSM) takeSerial() uint64 {
	if f.whSerial == 0 {
		f.whSerial = 1
	}
	s := f.whSerial
	f.whSerial++
	return s
}

// putWebhook stores w at position i (found: replacing), copying the table:
// views may hold the old one.
func (f *FSM) putWebhook(i int, found bool, w Webhook) {
	w.Name = ""
	ws := slices.Clone(f.webhooks)
	if found {
		ws[i] = w
	} else {
		ws = slices.Insert(ws, i, w)
	}
	f.webhooks = ws
}

func (f *FSM) applyWebhookSet(c *clusterpb.WebhookSet) Result {
	kinds, r := f.checkWebhookSet(c)
	if r.Refused() {
		return r
	}
	ti, _ := f.sched.TenantIndex(c.Tenant)
	i, found := f.webhookAt(ti)
	if !found {
		s := f.takeSerial()
		f.putWebhook(i, false, Webhook{Tenant: ti, URL: c.Url, Kinds: kinds, KeyID: c.KeyId, Version: s, Epoch: s, Cursor: f.nextEvent - 1})
		return Result{Created: true, Tenant: c.Tenant}
	}
	w := f.webhooks[i]
	s := f.takeSerial()
	if c.Url != "" { // from Level7 a set without one keeps it (checkWebhookSet)
		w.URL = c.Url
	}
	w.Kinds, w.Epoch = kinds, s
	if c.Rotate {
		w.PrevVersion, w.PrevUntil = 0, 0
		if w.KeyID == c.KeyId && c.GraceMs > 0 {
			w.PrevVersion, w.PrevUntil = w.Version, f.clock+sfq.Time(c.GraceMs)
		}
		w.Version, w.KeyID = s, c.KeyId
	}
	f.putWebhook(i, true, w)
	return Result{Tenant: c.Tenant}
}

// tenantWebhook finds the webhook of a tenant; NOT_FOUND names the tenant
// or says it has none.
func (f *FSM) tenantWebhook(tenant string) (int, Result) {
	ti, ok := f.sched.TenantIndex(tenant)
	if !ok {
		return 0, refusef(NotFound, "", "unknown tenant %q", tenant)
	}
	i, found := f.webhookAt(ti)
	if !found {
		return 0, refusef(NotFound, "", "tenant %q has no webhook", tenant)
	}
	return i, Result{}
}

func (f *FSM) applyWebhookDelete(c *clusterpb.WebhookDelete) Result {
	i, r := f.tenantWebhook(c.Tenant)
	if r.Code != OK {
		return r
	}
	f.webhooks = slices.Delete(slices.Clone(f.webhooks), i, i+1)
	return Result{Tenant: c.Tenant}
}

// applyWebhookAck advances cursors; an entry of another epoch, behind the
// cursor or past the newest event changes nothing (a stale or repeated
// ack). Count is the number of cursors moved.
func (f *FSM) applyWebhookAck(c *clusterpb.WebhookAck) Result {
	var n uint64
	var ws []Webhook
	for _, a := range c.Cursors {
		ti, ok := f.sched.TenantIndex(a.Tenant)
		if !ok {
			continue
		}
		i, found := f.webhookAt(ti)
		if !found {
			continue
		}
		w := &f.webhooks[i]
		if w.Epoch != a.Epoch || a.Seq <= w.Cursor || a.Seq >= f.nextEvent {
			continue
		}
		if ws == nil {
			ws = slices.Clone(f.webhooks)
			f.webhooks = ws
			w = &ws[i]
		}
		w.Cursor, w.AckedAt = a.Seq, f.clock
		if w.GapTo != 0 && a.Seq >= w.GapTo {
			w.GapFrom, w.GapTo = 0, 0
		}
		n++
	}
	return Result{Count: n}
}

func (f *FSM) applyWebhookReplay(c *clusterpb.WebhookReplay) Result {
	i, r := f.tenantWebhook(c.Tenant)
	if r.Code != OK {
		return r
	}
	first := f.nextEvent - uint64(f.events.Len())
	switch {
	case c.FromSeq == 0:
		return refusef(Invalid, "from_seq", "must be at least 1")
	case c.FromSeq > f.nextEvent:
		return refusef(Invalid, "from_seq", "%d is past the next event (%d)", c.FromSeq, f.nextEvent)
	case c.FromSeq < first:
		return refusef(FailedPrecondition, "from_seq", "events before %d were pruned (the oldest retained is %d)", first, first)
	}
	w := f.webhooks[i]
	w.Cursor, w.GapFrom, w.GapTo, w.Epoch = c.FromSeq-1, 0, 0, f.takeSerial()
	f.putWebhook(i, true, w)
	return Result{Tenant: c.Tenant}
}

// webhookPruner returns what Prune calls for each event it removes: an
// event of a tenant with an endpoint, of a kind it delivers, past its
// cursor, joins the endpoint's gap. The table is copied at most once.
func (f *FSM) webhookPruner() func(seq uint64, ev *eventRecord) {
	copied := false
	return func(seq uint64, ev *eventRecord) {
		if len(f.webhooks) == 0 {
			return
		}
		i, found := f.webhookAt(f.sched.Owner(ev.Tenant)) // the log keeps the lane
		if !found {
			return
		}
		if w := &f.webhooks[i]; seq <= w.Cursor || !w.Delivers(ev.Kind) {
			return
		}
		if !copied {
			f.webhooks = slices.Clone(f.webhooks)
			copied = true
		}
		w := &f.webhooks[i]
		if w.GapFrom == 0 {
			w.GapFrom = seq
		}
		w.GapTo = seq
	}
}

// dropTenantWebhook removes the endpoint of a deleted tenant.
func (f *FSM) dropTenantWebhook(ti uint32) {
	if i, found := f.webhookAt(ti); found {
		f.webhooks = slices.Delete(slices.Clone(f.webhooks), i, i+1)
	}
}

func (v *View) encodeWebhooks(e *sfq.Encoder) {
	e.Uvarint(v.whSerial)
	e.Uvarint(uint64(len(v.webhooks)))
	for i := range v.webhooks {
		w := &v.webhooks[i]
		e.Uvarint(uint64(w.Tenant))
		e.String(w.URL)
		e.Uvarint(uint64(w.Kinds))
		e.Uvarint(w.KeyID)
		e.Uvarint(w.Version)
		e.Uvarint(w.PrevVersion)
		e.Varint(int64(w.PrevUntil))
		e.Uvarint(w.Epoch)
		e.Uvarint(w.Cursor)
		e.Uvarint(w.GapFrom)
		e.Uvarint(w.GapTo)
		e.Varint(int64(w.AckedAt))
	}
}

func (f *FSM) decodeWebhooks(d *sfq.Decoder) {
	f.whSerial = d.Uvarint()
	if d.Err() == nil && f.whSerial > sfq.MaxID {
		d.Fail("webhook serial %d is out of range", f.whSerial)
		return
	}
	n := d.Uvarint()
	for k := uint64(0); k < n && d.Err() == nil; k++ {
		w := Webhook{Tenant: d.Uint32(), URL: d.String(), Kinds: d.Uint32(), KeyID: d.Uvarint(), Version: d.Uvarint(),
			PrevVersion: d.Uvarint(), PrevUntil: sfq.Time(d.Varint()), Epoch: d.Uvarint(), Cursor: d.Uvarint(),
			GapFrom: d.Uvarint(), GapTo: d.Uvarint(), AckedAt: sfq.Time(d.Varint())}
		if d.Err() != nil {
			return
		}
		switch {
		case len(f.webhooks) > 0 && w.Tenant <= f.webhooks[len(f.webhooks)-1].Tenant:
			d.Fail("webhook %d (tenant %d) is out of order", k, w.Tenant)
		case w.Version == 0 || w.Version >= f.whSerial || w.Epoch == 0 || w.Epoch >= f.whSerial || w.PrevVersion >= w.Version:
			d.Fail("webhook %d (tenant %d) has versions out of range", k, w.Tenant)
		case (w.GapFrom == 0) != (w.GapTo == 0) || w.GapFrom > w.GapTo:
			d.Fail("webhook %d (tenant %d) has a malformed gap", k, w.Tenant)
		case w.Kinds&^allKinds != 0 || w.KeyID == 0:
			d.Fail("webhook %d (tenant %d) is malformed", k, w.Tenant)
		}
		f.webhooks = append(f.webhooks, w)
	}
}

// verifyWebhooks checks that every endpoint belongs to a live tenant, has
// a valid URL, and a cursor before the next event.
func (f *FSM) verifyWebhooks() error {
	for _, w := range f.webhooks {
		if t, ok := f.sched.TenantAt(w.Tenant); !ok || t.Deleted {
			return fmt.Errorf("%w: a webhook belongs to tenant %d, not a live tenant", sfq.ErrVerify, w.Tenant)
		}
		if err := ValidateWebhookURL(w.URL); err != nil {
			return fmt.Errorf("%w: webhook of tenant %d: %v", sfq.ErrVerify, w.Tenant, err)
		}
		if w.Cursor >= f.nextEvent || w.GapTo >= f.nextEvent {
			return fmt.Errorf("%w: webhook of tenant %d: cursor %d or gap end %d is not before the next event %d", sfq.ErrVerify, w.Tenant, w.Cursor, w.GapTo, f.nextEvent)
		}
	}
	return nil
}

// Webhooks returns every endpoint, with its tenant's name, in tenant
// index order.
func (f *FSM) Webhooks() []Webhook {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := slices.Clone(f.webhooks)
	for i := range out {
		out[i].Name = f.sched.TenantName(out[i].Tenant)
	}
	return out
}

// WebhookOf returns the endpoint of a live tenant.
func (f *FSM) WebhookOf(tenant string) (Webhook, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ti, ok := f.sched.TenantIndex(tenant)
	if !ok {
		return Webhook{}, false
	}
	i, found := f.webhookAt(ti)
	if !found {
		return Webhook{}, false
	}
	w := f.webhooks[i]
	w.Name = tenant
	return w, true
}

// HasWebhooks reports whether any endpoint is registered.
func (f *FSM) HasWebhooks() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.webhooks) > 0
}

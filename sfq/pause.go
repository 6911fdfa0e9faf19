package sfq

// Pauses and rate limits (SPEC §3 "Delays, expiry, pause and rate limits";
// feature level 5).

// usesPauses reports whether the state holds a pause (of all dispatch, a
// tenant or a group) or a rate limit.
func (v *View) usesPauses() bool { return false }

func encodeTenantPauses(e *Encoder, t *Tenant) {}

func decodeTenantPauses(d *Decoder, t *Tenant) {}

func encodeGroupPauses(e *Encoder, g *Group) {}

func decodeGroupPauses(d *Decoder, g *Group) {}

func (v *View) encodePauses(e *Encoder) {}

func (s *Scheduler) decodePauses(d *Decoder) {}

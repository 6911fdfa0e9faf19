package sfq

// Version 5 of the state encoding holds what feature level 5 adds: delayed
// and backing-off jobs (state scheduled, their due time), expiry, the retry
// backoff settings, pauses (of all dispatch, a tenant, a group) and rate
// limits (of a tenant, a group). Each part writes its fields through the
// hooks below, in this order: the configuration's, then each tenant's, each
// job's, each group's, and last the scheduler-wide section.

// usesLevers reports whether the state holds anything the encodings before
// version 5 cannot carry.
func (v *View) usesLevers() bool { return v.usesDelays() || v.usesPauses() }

func encodeConfigLevers(e *Encoder, c *Config) { encodeConfigDelays(e, c) }

func decodeConfigLevers(d *Decoder, c *Config) { decodeConfigDelays(d, c) }

func encodeTenantLevers(e *Encoder, t *Tenant) { encodeTenantPauses(e, t) }

func decodeTenantLevers(d *Decoder, t *Tenant) { decodeTenantPauses(d, t) }

func encodeJobLevers(e *Encoder, j *Job) { encodeJobDelays(e, j) }

func decodeJobLevers(d *Decoder, j *Job) { decodeJobDelays(d, j) }

func encodeGroupLevers(e *Encoder, g *Group) { encodeGroupPauses(e, g) }

func decodeGroupLevers(d *Decoder, g *Group) { decodeGroupPauses(d, g) }

func (v *View) encodeLevers(e *Encoder) { v.encodePauses(e) }

func (s *Scheduler) decodeLevers(d *Decoder) { s.decodePauses(d) }

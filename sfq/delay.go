package sfq

// Delays, expiry and retry backoff (SPEC §3 "Delays, expiry, pause and rate
// limits"; feature level 5).

// usesDelays reports whether the state holds a scheduled or expired job, a
// job's delay or expiry, or a retry backoff setting.
func (v *View) usesDelays() bool { return false }

func encodeConfigDelays(e *Encoder, c *Config) {}

func decodeConfigDelays(d *Decoder, c *Config) {}

func encodeJobDelays(e *Encoder, j *Job) {}

func decodeJobDelays(d *Decoder, j *Job) {}

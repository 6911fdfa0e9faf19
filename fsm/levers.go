package fsm

import "github.com/baristahq/barista/sfq"

// The FSM's part of feature level 5 (dead-letter retention and the submit
// rate, beside the core's levers): configuration fields written after the
// others in a configuration of core version 5 or later.

func encodeConfigLevers(e *sfq.Encoder, c *Config) {
	encodeSubmitRate(e, c.SubmitRate)
}

func decodeConfigLevers(d *sfq.Decoder, c *Config) {
	c.SubmitRate = decodeSubmitRate(d)
}

// usesLevers reports whether the configuration holds a setting of feature
// level 5.
func (c *Config) usesLevers() bool { return c.SubmitRate != SubmitRate{} }

// Package webhook delivers each tenant's events to its registered HTTP
// endpoint (docs/webhooks.md): in order, at least once, signed, from the
// leader only. The replicated state (package fsm) holds the endpoints and
// their delivered cursors; this package holds what a leader does on its
// own: reading the event log, the HTTP requests and their retries, and
// the batched cursor commits. It reaches the cluster through Node, so
// that its logic runs in one process against an in-memory state machine.
//
// Secrets are derived, never stored: HMAC-SHA256 of the cluster's webhook
// key (the servers' configuration, the same on every server) over the
// tenant's incarnation and the secret's version.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MinKeyLen is the shortest webhook key a server accepts.
const MinKeyLen = 32

// Key is the cluster's webhook key.
type Key []byte

// ParseKey checks a configured key.
func ParseKey(s string) (Key, error) {
	if len(s) < MinKeyLen {
		return nil, fmt.Errorf("the webhook key is %d bytes, want at least %d (e.g. openssl rand -hex 32)", len(s), MinKeyLen)
	}
	return Key(s), nil
}

func (k Key) mac(domain string) []byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	return m.Sum(nil)
}

// ID is the key's fingerprint, recorded with an endpoint so that a leader
// holding another key says so instead of signing with secrets the
// receiver does not know. It reveals nothing of a key of MinKeyLen bytes.
func (k Key) ID() uint64 {
	id := binary.BigEndian.Uint64(k.mac("barista webhook key id"))
	if id == 0 {
		id = 1
	}
	return id
}

// SecretPrefix starts every secret.
const SecretPrefix = "whsec_"

// Secret derives the secret of an endpoint: the tenant at index tenant
// (its incarnation) named name, at secret version version. Receivers use
// the whole string, prefix included, as the HMAC key.
func (k Key) Secret(tenant uint32, name string, version uint64) string {
	m := hmac.New(sha256.New, k)
	m.Write([]byte("barista webhook secret v1\x00"))
	var b [12]byte
	binary.BigEndian.PutUint32(b[:4], tenant)
	binary.BigEndian.PutUint64(b[4:], version)
	m.Write(b[:])
	m.Write([]byte(name))
	return SecretPrefix + hex.EncodeToString(m.Sum(nil))
}

// SignatureHeader is the request header that carries the signature.
const SignatureHeader = "Barista-Signature"

// Sign returns HEX(HMAC_SHA256(secret, t + "." + body)), t in Unix
// milliseconds.
func Sign(secret string, t int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(t, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Header builds the signature header's value, "t=UNIX_MS,v1=HEX", with
// one v1 per secret (the current one first; during a rotation's grace,
// the previous one too).
func Header(t int64, body []byte, secrets ...string) string {
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(strconv.FormatInt(t, 10))
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(Sign(s, t, body))
	}
	return b.String()
}

// Errors of Verify.
var (
	ErrBadHeader   = errors.New("malformed signature header")
	ErrNoSignature = errors.New("no signature matches")
	ErrStale       = errors.New("signature timestamp outside the tolerance")
)

// DefaultTolerance is how far a request's timestamp may be from the
// receiver's clock.
const DefaultTolerance = 5 * time.Minute

// Verify checks a request: one of the header's v1 signatures is the body's
// under secret, and its timestamp is within tolerance of now (either way:
// a receiver refuses replays of old requests). It is what a receiver does
// (docs/webhooks.md has the same in a standalone example).
func Verify(header string, body []byte, secret string, now time.Time, tolerance time.Duration) error {
	var t int64 = -1
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrBadHeader
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return ErrBadHeader
			}
			t = n
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if t < 0 || len(sigs) == 0 {
		return ErrBadHeader
	}
	if d := now.Sub(time.UnixMilli(t)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	want := []byte(Sign(secret, t, body))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), want) {
			return nil
		}
	}
	return ErrNoSignature
}

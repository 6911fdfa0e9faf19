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
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MinKeyBytes is how many random bytes a webhook key must hold at least.
const MinKeyBytes = 32

// minDistinctBytes is how many different values the bytes of a key must
// take at least: 32 random bytes take about 30, and fewer than 16 with a
// chance under 10^-12; a key made by hand ("0123...", "aaaa...") takes
// far fewer.
const minDistinctBytes = 16

// documentedKeys are the example keys barista's documentation has
// printed: whoever copied one has a key the world knows.
var documentedKeys = []string{
	"5f0c6b0e1d9a4c27b3e8a1f4d6c2e9b7a0f3d5c8e1b4a7d0c3f6e9b2a5d8c1f4",
}

// keyAdvice ends every refusal of a key.
const keyAdvice = "barista tls init writes one, or: openssl rand -hex 32"

// Key is the cluster's webhook key.
type Key []byte

// ParseKey checks a configured key: the hex text (openssl rand -hex 32)
// or the padded standard base64 (openssl rand -base64 32) of at least
// MinKeyBytes random bytes, and not an example printed in barista's
// documentation. Other text is refused, since words and phrases decode as
// base64 too. The key is the text itself, as configured: secrets derive
// from its bytes.
func ParseKey(s string) (Key, error) {
	for _, doc := range documentedKeys {
		if strings.EqualFold(s, doc) {
			return nil, fmt.Errorf("the webhook key is the example printed in barista's documentation, known to everyone: make your own (%s)", keyAdvice)
		}
	}
	raw, ok := decodeKey(s)
	if !ok {
		return nil, fmt.Errorf("the webhook key is neither hex nor padded base64 text: want the text of at least %d random bytes (%s)", MinKeyBytes, keyAdvice)
	}
	if len(raw) < MinKeyBytes {
		return nil, fmt.Errorf("the webhook key holds %d bytes, want at least %d random bytes (%s)", len(raw), MinKeyBytes, keyAdvice)
	}
	var seen [256]bool
	distinct := 0
	for _, b := range raw {
		if !seen[b] {
			seen[b] = true
			distinct++
		}
	}
	if distinct < minDistinctBytes {
		return nil, fmt.Errorf("the webhook key is not random: its %d bytes take only %d different values (%s)", len(raw), distinct, keyAdvice)
	}
	return Key(s), nil
}

// decodeKey decodes the text of a key: hex (an even number of hex
// digits), else padded standard base64.
func decodeKey(s string) ([]byte, bool) {
	if b, err := hex.DecodeString(s); err == nil {
		return b, true
	}
	if b, err := base64.StdEncoding.Strict().DecodeString(s); err == nil && strings.HasSuffix(s, "=") {
		return b, true
	}
	return nil, false
}

// NewKey returns a new random key: the hex of MinKeyBytes random bytes.
func NewKey() (string, error) {
	b := make([]byte, MinKeyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("a new webhook key: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func (k Key) mac(domain string) []byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	return m.Sum(nil)
}

// ID is the key's fingerprint, recorded with an endpoint so that a leader
// holding another key says so instead of signing with secrets the
// receiver does not know. It reveals nothing of a key of MinKeyBytes
// random bytes.
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

package webhook

import (
	"errors"
	"testing"
	"time"
)

const testKey = "0123456789abcdef0123456789abcdef"

// TestSignaturePinned: a fixed key, tenant, version, time and body give
// these values (computed independently with openssl dgst -sha256 -hmac).
func TestSignaturePinned(t *testing.T) {
	k, err := ParseKey(testKey)
	if err != nil {
		t.Fatal(err)
	}
	secret := k.Secret(0, "acme", 1)
	if secret != "whsec_2f6ddd3f9b7332e014c0d5193c27e601119f0f42f3eb507fbaa008ce293cde0b" {
		t.Fatalf("secret %s", secret)
	}
	if id := k.ID(); id != 0xe87651b686e9d5d3 {
		t.Fatalf("key id %016x", id)
	}
	body := []byte(`{"events":[{"seq":7,"job_id":3,"tenant":"acme","kind":"completed","attempt":1,"at_ms":1699999999000,"wall_ms":1699999999012,"cpu_ms":420}]}`)
	const want = "t=1700000000000,v1=b93b4f70e6da9282faf9e27f069e88c02129c0808d34408cbe6b6496f2ce3f74"
	if got := Header(1700000000000, body, secret); got != want {
		t.Fatalf("header\n got %s\nwant %s", got, want)
	}
	// The payload encoding of that event is the body above.
	p := Payload{Events: []Event{{Seq: 7, JobID: 3, Tenant: "acme", Kind: "completed", Attempt: 1, AtMs: 1699999999000, WallMs: 1699999999012, CPUMs: 420}}}
	if b, _ := p.Marshal(); string(b) != string(body) {
		t.Fatalf("payload %s", b)
	}
	// Another version, tenant index or name: another secret.
	for _, s := range []string{k.Secret(0, "acme", 2), k.Secret(1, "acme", 1), k.Secret(0, "acmf", 1)} {
		if s == secret {
			t.Fatal("a secret repeats across versions or incarnations")
		}
	}
	if _, err := ParseKey(testKey[:31]); err == nil || err.Error() != "the webhook key is 31 bytes, want at least 32 (e.g. openssl rand -hex 32)" {
		t.Fatalf("short key: %v", err)
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"events":[]}`)
	now := time.UnixMilli(1700000000000)
	at := now.UnixMilli()
	good := Header(at, body, "whsec_new", "whsec_old")
	for _, c := range []struct {
		name   string
		header string
		body   string
		secret string
		now    time.Time
		want   error
	}{
		{"current secret", good, string(body), "whsec_new", now, nil},
		{"previous secret", good, string(body), "whsec_old", now, nil},
		{"another secret", good, string(body), "whsec_x", now, ErrNoSignature},
		{"tampered body", good, `{"events":[1]}`, "whsec_new", now, ErrNoSignature},
		{"five minutes old", good, string(body), "whsec_new", now.Add(5 * time.Minute), nil},
		{"older", good, string(body), "whsec_new", now.Add(5*time.Minute + time.Millisecond), ErrStale},
		{"from the future", good, string(body), "whsec_new", now.Add(-6 * time.Minute), ErrStale},
		{"no timestamp", "v1=" + Sign("whsec_new", at, body), string(body), "whsec_new", now, ErrBadHeader},
		{"no signature", "t=1700000000000", string(body), "whsec_new", now, ErrBadHeader},
		{"garbage", "hello", string(body), "whsec_new", now, ErrBadHeader},
		{"other timestamp", "t=1700000000001,v1=" + Sign("whsec_new", at, body), string(body), "whsec_new", now, ErrNoSignature},
	} {
		if err := Verify(c.header, []byte(c.body), c.secret, c.now, DefaultTolerance); !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

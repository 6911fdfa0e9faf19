package webhook

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const testKey = "0123456789abcdef0123456789abcdef"

// TestSignaturePinned: a fixed key, tenant, version, time and body give
// these values (computed independently with openssl dgst -sha256 -hmac).
func TestSignaturePinned(t *testing.T) {
	k := Key(testKey)
	secret := k.Secret(0, "acme", 1)
	if secret != "whsec_2f6ddd3f9b7332e014c0d5193c27e601119f0f42f3eb507fbaa008ce293cde0b" {
		t.Fatalf("secret %s", secret)
	}
	if id := k.ID(); id != 0xe87651b686e9d5d3 {
		t.Fatalf("key id %016x", id)
	}
	body := []byte(`{"events":[{"seq":7,"job_id":3,"tenant":"acme","pool":"default","kind":"completed","attempt":1,"at_ms":1699999999000,"wall_ms":1699999999012,"cpu_ms":420}]}`)
	const want = "t=1700000000000,v1=208b3b1cc608355444c5bff8413af729ef14c7d8a75314d2d9d3eff368e9c059"
	if got := Header(1700000000000, body, secret); got != want {
		t.Fatalf("header\n got %s\nwant %s", got, want)
	}
	// The payload encoding of that event is the body above.
	p := Payload{Events: []Event{{Seq: 7, JobID: 3, Tenant: "acme", Pool: "default", Kind: "completed", Attempt: 1, AtMs: 1699999999000, WallMs: 1699999999012, CPUMs: 420}}}
	if b, _ := p.Marshal(); string(b) != string(body) {
		t.Fatalf("payload %s", b)
	}
	// Another version, tenant index or name: another secret.
	for _, s := range []string{k.Secret(0, "acme", 2), k.Secret(1, "acme", 1), k.Secret(0, "acmf", 1)} {
		if s == secret {
			t.Fatal("a secret repeats across versions or incarnations")
		}
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

// TestParseKey: a key is the hex or padded base64 text of 32 random
// bytes or more; shorter ones, ones made by hand, other text (words
// decode as unpadded base64), and the keys the documentation printed are
// refused; NewKey makes keys it accepts.
func TestParseKey(t *testing.T) {
	const advice = " (barista tls init writes one, or: openssl rand -hex 32)"
	for _, good := range []string{
		"f71372008812dcf4269efa3ed98200aa4eef3d5168f489714d8dec8c7ced51de",
		"F71372008812DCF4269EFA3ED98200AA4EEF3D5168F489714D8DEC8C7CED51DE",
		"xmFZ6IwZqVabLxz+BaxcszMwAhTfgrjFScSAmbtdq1Q=", // openssl rand -base64 32
	} {
		if k, err := ParseKey(good); err != nil || string(k) != good {
			t.Errorf("ParseKey(%q) = %q, %v", good, k, err)
		}
	}
	for _, tc := range []struct{ key, want string }{
		{"5f0c6b0e1d9a4c27b3e8a1f4d6c2e9b7a0f3d5c8e1b4a7d0c3f6e9b2a5d8c1f4", "the webhook key is the example printed in barista's documentation, known to everyone: make your own" + advice},
		{"7d41c09e2b58f3a6e1d0c4b7a9f2e835", "the webhook key holds 16 bytes, want at least 32 random bytes" + advice},
		{testKey, "the webhook key holds 16 bytes, want at least 32 random bytes" + advice},
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "the webhook key is not random: its 32 bytes take only 8 different values" + advice},
		{"0000000000000000000000000000000000000000000000000000000000000000", "the webhook key is not random: its 32 bytes take only 1 different values" + advice},
		{"a-webhook-key-of-the-multi-process-test-0001", "the webhook key is neither hex nor padded base64 text: want the text of at least 32 random bytes" + advice},
		{"aWebhookKeyOfTheMultiProcessTestWrittenByHand", "the webhook key is neither hex nor padded base64 text: want the text of at least 32 random bytes" + advice},
		{"xmFZ6IwZqVabLxz-BaxcszMwAhTfgrjFScSAmbtdq1Q", "the webhook key is neither hex nor padded base64 text: want the text of at least 32 random bytes" + advice},
		{"q3Vd0xYp9fK2LmA7cR1sNw==", "the webhook key holds 16 bytes, want at least 32 random bytes" + advice},
		{"", "the webhook key holds 0 bytes, want at least 32 random bytes" + advice},
	} {
		if _, err := ParseKey(tc.key); err == nil || err.Error() != tc.want {
			t.Errorf("ParseKey(%q): %v, want %s", tc.key, err, tc.want)
		}
	}
	for range 100 {
		k, err := NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseKey(k); err != nil || len(k) != 64 {
			t.Fatalf("NewKey() = %q, refused: %v", k, err)
		}
	}
}

// TestDocumentedWebhookKeysRefused: every webhook key written out in the
// documentation and the deploy examples (a key = "..." line, or
// BARISTA_WEBHOOK_KEY=...) is refused, and so is every key the docs
// printed once.
func TestDocumentedWebhookKeysRefused(t *testing.T) {
	files, _ := filepath.Glob("../docs/*.md")
	more, _ := filepath.Glob("../deploy/*/*")
	files = append(append(files, more...), "../README.md")
	keyLine := regexp.MustCompile(`(?:^\s*key\s*=\s*"([^"]*)"|BARISTA_WEBHOOK_KEY=([^\s'"` + "`" + `]+))`)
	found := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			m := keyLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			found++
			key := m[1] + m[2]
			if _, err := ParseKey(key); err == nil {
				t.Errorf("%s:%d: the server accepts the webhook key %q printed here", f, i+1, key)
			}
		}
	}
	t.Logf("%d webhook keys written out in the docs, every one refused", found)
	for _, k := range documentedKeys {
		if _, err := ParseKey(k); err == nil {
			t.Errorf("the documented key %s is accepted", k)
		}
	}
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const goodWebhookKey = "f313b9a03518be872d8ab656aac1c2582f4d48e763cbf74494fd93e31ce2b442"

// TestWebhookSettings: the [webhooks] keys and flags, the key from the
// file or $BARISTA_WEBHOOK_KEY, and their refusals, each naming its
// source.
func TestWebhookSettings(t *testing.T) {
	base := []string{"--data-dir", t.TempDir(), "--node-id", "n1", "--insecure-dev"}
	resolve := func(envKey string, args ...string) (*serverConfig, error) {
		t.Helper()
		t.Setenv(webhookKeyEnv, envKey)
		return resolveServer(t, "", append(append([]string{}, base...), args...)...)
	}
	// Defaults: no key, nothing allowed.
	c, err := resolve("")
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Webhooks; w.key != nil || len(w.Allow) != 0 || w.Timeout != 10*time.Second || w.Workers != 64 || w.SlowWorkers != 0 ||
		w.SlowAfter != time.Second || w.CommitInterval != 500*time.Millisecond || w.MaxBatch != 100 {
		t.Fatalf("defaults %+v", w)
	}
	// The file sets everything; a repeated flag adds ranges and replaces
	// the file's list.
	file := writeConfig(t, fmt.Sprintf(`[webhooks]
key = %q
allow_cidrs = ["10.20.0.0/16", "fd00::1"]
timeout = "2s"
workers = 4
slow_workers = 1
slow_after = "300ms"
commit_interval = "50ms"
max_batch = 10
`, goodWebhookKey))
	c, err = resolve("", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00::1/128")}
	if w := c.Webhooks; string(w.key) != goodWebhookKey || fmt.Sprint(w.Allow) != fmt.Sprint(want) || w.Timeout != 2*time.Second ||
		w.Workers != 4 || w.SlowWorkers != 1 || w.SlowAfter != 300*time.Millisecond || w.CommitInterval != 50*time.Millisecond || w.MaxBatch != 10 {
		t.Fatalf("from the file %+v", w)
	}
	c, err = resolve(goodWebhookKey, "--config", file, "--webhook-allow-cidr", "127.0.0.0/8", "--webhook-allow-cidr", "192.168.1.0/24,10.9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Webhooks.Allow); got != "[127.0.0.0/8 192.168.1.0/24 10.9.9.9/32]" {
		t.Fatalf("flags: %s", got)
	}
	// The key from the environment alone.
	if c, err = resolve(goodWebhookKey); err != nil || string(c.Webhooks.key) != goodWebhookKey {
		t.Fatalf("env key: %v", err)
	}
	for _, tc := range []struct {
		env  string
		file string
		args []string
		want string
	}{
		{"short", "", nil, "$BARISTA_WEBHOOK_KEY: the webhook key is neither hex nor padded base64 text: want the text of at least 32 random bytes (barista tls init writes one, or: openssl rand -hex 32)"},
		{"", "[webhooks]\nkey = \"short\"\n", nil, "webhooks.key: the webhook key is neither hex nor padded base64 text: want the text of at least 32 random bytes (barista tls init writes one, or: openssl rand -hex 32)"},
		{goodWebhookKey + "x", fmt.Sprintf("[webhooks]\nkey = %q\n", goodWebhookKey), nil, "webhooks.key and $BARISTA_WEBHOOK_KEY differ: set the webhook key in one place"},
		{"", "", []string{"--webhook-allow-cidr", "10.0.0.0/33"}, `--webhook-allow-cidr: "10.0.0.0/33" is not a CIDR (like 10.1.0.0/16) or an address`},
		{"", "[webhooks]\nallow_cidrs = [\"10.0.0.0/8\", \"nope\"]\n", nil, `webhooks.allow_cidrs[1]: "nope" is not a CIDR (like 10.1.0.0/16) or an address`},
		{"", "", []string{"--webhook-timeout", "0s"}, "--webhook-timeout: 0s is out of range (100ms..1m)"},
		{"", "", []string{"--webhook-workers", "1"}, "--webhook-workers: 1 is out of range (2..1024)"},
		{"", "", []string{"--webhook-max-batch", "1001"}, "--webhook-max-batch: 1001 is out of range (1..1000)"},
		{"", "", []string{"--webhook-commit-interval", "1ms"}, "--webhook-commit-interval: 1ms is out of range (10ms..1m)"},
	} {
		args := tc.args
		if tc.file != "" {
			args = append(args, "--config", writeConfig(t, tc.file))
		}
		_, err := resolve(tc.env, args...)
		got := ""
		if err != nil {
			got = err.Error()
			if i := strings.Index(got, ".toml: "); i >= 0 {
				got = got[i+len(".toml: "):]
			}
		}
		if got != tc.want {
			t.Errorf("env %q file %q args %v:\n got %s\nwant %s", tc.env, tc.file, tc.args, got, tc.want)
		}
	}
}

// TestWebhookKeyNeverShown: the key shows in neither --help nor the
// settings table.
func TestWebhookKeyNeverShown(t *testing.T) {
	c := defaultServerConfig()
	c.Webhooks.Key = goodWebhookKey
	for _, s := range c.settings() {
		if strings.Contains(s.val.String(), goodWebhookKey) {
			t.Fatalf("%s shows the key", s.key)
		}
		if s.key == "webhooks.key" && (s.val.String() != "(set)" || s.flag != "") {
			t.Fatalf("webhooks.key: %q, flag %q", s.val.String(), s.flag)
		}
	}
}

// TestWebhookCLIUsage: the commands refuse bad usage before any call.
func TestWebhookCLIUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"webhook", "set", "--url", "https://x.example/"}, "--tenant is required"},
		{[]string{"webhook", "set", "acme"}, `unexpected argument "acme" (the tenant is --tenant)`},
		{[]string{"webhook", "set", "--tenant", "acme", "--grace", "1h"}, "--grace needs --rotate"},
		{[]string{"webhook", "set", "--tenant", "acme", "--rotate", "--grace", "800h"}, "--grace: 800h is out of range (0s..720h)"},
		{[]string{"webhook", "status"}, "--tenant is required"},
		{[]string{"webhook", "replay", "--tenant", "acme"}, "--from is required"},
		{[]string{"webhook", "replay", "--tenant", "acme", "--from", "0"}, "--from: 0 is out of range (1..1099511627776)"},
	} {
		var out, errOut bytes.Buffer
		code := Run(append(tc.args, "--server", "127.0.0.1:1"), &out, &errOut)
		if code != 2 || !strings.HasPrefix(errOut.String(), tc.want+"\n") && !strings.Contains(errOut.String(), ": "+tc.want+"\n") {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

// The key docs/configuration.md and docs/webhooks.md printed, and keys
// too short or made by hand.
const (
	documentedWebhookKey = "5f0c6b0e1d9a4c27b3e8a1f4d6c2e9b7a0f3d5c8e1b4a7d0c3f6e9b2a5d8c1f4"
	shortWebhookKey      = "7d41c09e2b58f3a6e1d0c4b7a9f2e835" // openssl rand -hex 16
	handMadeWebhookKey   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// TestServerRefusesKnownWebhookKeys: a server does not start with the
// webhook key barista's documentation printed (from the file, a key file
// or the environment), with a key of fewer than 32 random bytes, or with
// one made by hand; each refusal names where the key came from and how
// to make one.
func TestServerRefusesKnownWebhookKeys(t *testing.T) {
	const advice = " (barista tls init writes one, or: openssl rand -hex 32)"
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "webhook.key")
	if err := os.WriteFile(keyFile, []byte(documentedWebhookKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	openFile := filepath.Join(dir, "open.key")
	if err := os.WriteFile(openFile, []byte(goodWebhookKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(openFile, 0o644); err != nil {
		t.Fatal(err)
	}
	documented := "the webhook key is the example printed in barista's documentation, known to everyone: make your own" + advice
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{documentedWebhookKey, nil, "$BARISTA_WEBHOOK_KEY: " + documented},
		{strings.ToUpper(documentedWebhookKey), nil, "$BARISTA_WEBHOOK_KEY: " + documented},
		{"", []string{"--config", writeConfig(t, "[webhooks]\nkey = \""+documentedWebhookKey+"\"\n")}, "webhooks.key: " + documented},
		{"", []string{"--webhook-key-file", keyFile}, "webhooks.key_file " + keyFile + ": " + documented},
		{shortWebhookKey, nil, "$BARISTA_WEBHOOK_KEY: the webhook key holds 16 bytes, want at least 32 random bytes" + advice},
		{handMadeWebhookKey, nil, "$BARISTA_WEBHOOK_KEY: the webhook key is not random: its 32 bytes take only 8 different values" + advice},
		{"", []string{"--webhook-key-file", openFile}, "webhooks.key_file: " + openFile + " has mode 0644: other users may read it; want 0600, 0400 or 0440 (chmod 600 " + openFile + ")"},
		{goodWebhookKey, []string{"--webhook-key-file", keyFile}, "webhooks.key_file " + keyFile + " and $BARISTA_WEBHOOK_KEY differ: set the webhook key in one place"},
	} {
		t.Setenv(webhookKeyEnv, tc.env)
		_, err := resolveServer(t, "", append([]string{"--node-id", "n1", "--data-dir", filepath.Join(dir, "data"), "--insecure-dev"}, tc.args...)...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 || ee.Error() != tc.want {
			t.Errorf("env %q args %v: %v\nwant a usage error %q", tc.env, tc.args, err, tc.want)
		}
	}
	// The command itself: the server stops there, with exit code 2,
	// before it opens anything.
	t.Setenv(webhookKeyEnv, documentedWebhookKey)
	var out, errb bytes.Buffer
	data := filepath.Join(dir, "data")
	if code := Run([]string{"server", "--node-id", "n1", "--data-dir", data, "--insecure-dev"}, &out, &errb); code != 2 ||
		!strings.HasPrefix(errb.String(), "$BARISTA_WEBHOOK_KEY: "+documented+"\n") {
		t.Errorf("barista server: exit %d, stderr %q", code, errb.String())
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("a refused server made its data directory: %v", err)
	}
}

// TestTLSInitWritesWebhookKey: tls init writes a webhook key of 32 random
// bytes (64 hex digits) to DIR/webhook.key, mode 0600, and says where; a
// server takes it (--webhook-key-file); tls init run again keeps it.
func TestTLSInitWritesWebhookKey(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := Run([]string{"tls", "init", "--dir", dir, "--names", "n1", "--clients", ""}, &out, &errb); code != 0 {
		t.Fatalf("tls init: exit %d: %s", code, errb.String())
	}
	path := filepath.Join(dir, "webhook.key")
	if want := "wrote " + path + " (the cluster's webhook key, mode 0600: the same on every server, webhooks.key_file)\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("tls init says:\n%s\nwant it to end with %q", out.String(), want)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("webhook.key: %v, %v; want mode 0600", st, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSuffix(string(b), "\n")
	if len(key) != 64 || strings.Trim(key, "0123456789abcdef") != "" {
		t.Fatalf("webhook.key holds %q, want 64 hex digits and a newline", b)
	}
	t.Setenv(webhookKeyEnv, "")
	c, err := resolveServer(t, "", "--node-id", "n1", "--data-dir", t.TempDir(), "--insecure-dev", "--webhook-key-file", path)
	if err != nil || string(c.Webhooks.key) != key {
		t.Fatalf("a server with the key file: %v", err)
	}
	// The same key given in two places is one key.
	t.Setenv(webhookKeyEnv, key)
	if c, err := resolveServer(t, "", "--node-id", "n1", "--data-dir", t.TempDir(), "--insecure-dev", "--webhook-key-file", path); err != nil || string(c.Webhooks.key) != key {
		t.Fatalf("the key file and the same key in the environment: %v", err)
	}
	out.Reset()
	if code := Run([]string{"tls", "init", "--dir", dir, "--ca", dir, "--names", "n2", "--clients", ""}, &out, &errb); code != 0 {
		t.Fatalf("tls init again: exit %d: %s", code, errb.String())
	}
	if want := "kept " + path + " (the cluster's webhook key: a new one would invalidate every endpoint's secret)\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("tls init again says:\n%s\nwant it to end with %q", out.String(), want)
	}
	if again, _ := os.ReadFile(path); string(again) != string(b) {
		t.Errorf("tls init again replaced the key: %q, was %q", again, b)
	}
}

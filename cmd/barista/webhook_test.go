package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

const goodWebhookKey = "0123456789abcdef0123456789abcdef-key"

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
		{"short", "", nil, "$BARISTA_WEBHOOK_KEY: the webhook key is 5 bytes, want at least 32 (e.g. openssl rand -hex 32)"},
		{"", "[webhooks]\nkey = \"short\"\n", nil, "webhooks.key: the webhook key is 5 bytes, want at least 32 (e.g. openssl rand -hex 32)"},
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

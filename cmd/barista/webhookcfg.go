package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/baristahq/barista/webhook"
)

// webhookConfig is a server's webhook delivery settings.
type webhookConfig struct {
	Key            string
	KeyFile        string      // a file holding the key instead
	key            webhook.Key // the key of Key, KeyFile or the environment, checked by resolveKey
	Allow          []netip.Prefix
	Timeout        time.Duration
	Workers        uint32
	SlowWorkers    uint32
	SlowAfter      time.Duration
	CommitInterval time.Duration
	MaxBatch       uint32
}

func defaultWebhookConfig() webhookConfig {
	return webhookConfig{Timeout: webhook.DefaultTimeout, Workers: webhook.DefaultWorkers, SlowAfter: webhook.DefaultSlowAfter,
		CommitInterval: webhook.DefaultCommitInterval, MaxBatch: webhook.DefaultMaxBatch}
}

// webhookKeyEnv names the environment variable that may hold the key.
const webhookKeyEnv = "BARISTA_WEBHOOK_KEY"

// resolveKey finds the key in webhooks.key, the file webhooks.key_file
// names and $BARISTA_WEBHOOK_KEY (env), and checks it: given in more than
// one place, it must be the same in each.
func (w *webhookConfig) resolveKey(env string) (webhook.Key, error) {
	type source struct{ name, key string }
	var sources []source
	if w.Key != "" {
		sources = append(sources, source{"webhooks.key", w.Key})
	}
	if w.KeyFile != "" {
		k, err := readSecretFile(w.KeyFile, true)
		if err != nil {
			return nil, fmt.Errorf("webhooks.key_file: %w", err)
		}
		sources = append(sources, source{"webhooks.key_file " + w.KeyFile, k})
	}
	if env != "" {
		sources = append(sources, source{"$" + webhookKeyEnv, env})
	}
	if len(sources) == 0 {
		return nil, nil
	}
	for _, s := range sources[1:] {
		if s.key != sources[0].key {
			return nil, fmt.Errorf("%s and %s differ: set the webhook key in one place", sources[0].name, s.name)
		}
	}
	last := sources[len(sources)-1]
	k, err := webhook.ParseKey(last.key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", last.name, err)
	}
	w.key = k
	return k, nil
}

// options builds the deliverer's options.
func (w *webhookConfig) options() webhook.Options {
	return webhook.Options{Key: w.key, Guard: webhook.NewGuard(w.Allow), Timeout: w.Timeout, Workers: int(w.Workers),
		SlowWorkers: int(w.SlowWorkers), SlowAfter: w.SlowAfter, CommitInterval: w.CommitInterval, MaxBatch: int(w.MaxBatch)}
}

// secretVal is a secret string: its String never shows it.
type secretVal struct{ p *string }

func (v *secretVal) String() string {
	if v == nil || v.p == nil || *v.p == "" {
		return ""
	}
	return "(set)"
}
func (v *secretVal) allowed() string    { return "" }
func (v *secretVal) Set(s string) error { *v.p = s; return nil }
func (v *secretVal) setTOML(x any) error {
	s, ok := x.(string)
	if !ok {
		return wrongType("a string", x)
	}
	*v.p = s
	return nil
}

// cidrListVal is a list of CIDRs: a repeatable flag (each adds one, or a
// comma-separated few), an array of strings in TOML.
type cidrListVal struct{ p *[]netip.Prefix }

func (v *cidrListVal) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	s := make([]string, len(*v.p))
	for i, p := range *v.p {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
func (v *cidrListVal) allowed() string { return "" }
func (v *cidrListVal) Set(s string) error {
	var list []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			list = append(list, e)
		}
	}
	ps, err := webhook.ParsePrefixes(list)
	if err != nil {
		return err
	}
	*v.p = append(*v.p, ps...)
	return nil
}
func (v *cidrListVal) setTOML(x any) error {
	arr, ok := x.([]any)
	if !ok {
		return wrongType("an array of strings", x)
	}
	out := make([]netip.Prefix, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return &subkeyError{sub: fmt.Sprintf("[%d]", i), err: wrongType("a string", e)}
		}
		ps, err := webhook.ParsePrefixes([]string{s})
		if err != nil {
			return &subkeyError{sub: fmt.Sprintf("[%d]", i), err: err}
		}
		out = append(out, ps...)
	}
	*v.p = out
	return nil
}

// devWebhookConfig returns a configuration file under dir holding a
// webhook key, made once (a kept --data-dir keeps its key, and so its
// endpoints' secrets): barista dev's servers read it.
func devWebhookConfig(dir string) (string, error) {
	path := filepath.Join(dir, "webhooks.toml")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	key, err := webhook.NewKey()
	if err != nil {
		return "", err
	}
	body := fmt.Sprintf("# The webhook key of this barista dev cluster (docs/webhooks.md).\n[webhooks]\nkey = %q\n", key)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/fsm"
	pb "github.com/baristahq/barista/proto"
)

// webhookFlags are the flags every webhook command shares.
type webhookFlags struct {
	clientFlags
	tenant string
}

func (w *webhookFlags) register(fs *flag.FlagSet) {
	w.clientFlags.register(fs)
	fs.StringVar(&w.tenant, "tenant", "", "the `TENANT` whose endpoint this is (required)")
}

func (w *webhookFlags) need() error {
	if w.tenant == "" {
		return usageError("--tenant is required")
	}
	return nil
}

type webhookSetOpts struct {
	webhookFlags
	fs     *flag.FlagSet
	url    string
	kinds  string
	rotate bool
	grace  time.Duration
}

type webhookReplayOpts struct {
	webhookFlags
	from uint64
}

// webhookJSON renders an endpoint with its times in milliseconds.
func webhookJSON(w *pb.Webhook) map[string]any {
	kinds := w.Kinds
	if kinds == nil {
		kinds = []string{}
	}
	m := map[string]any{"tenant": w.Tenant, "url": w.Url, "kinds": kinds, "secret_version": w.SecretVersion, "cursor": w.Cursor,
		"acked_at_ms": w.AckedAtMs}
	if w.PreviousSecretVersion != 0 {
		m["previous_secret_version"], m["previous_secret_until_ms"] = w.PreviousSecretVersion, w.PreviousSecretUntilMs
	}
	if w.GapToSeq != 0 {
		m["gap_from_seq"], m["gap_to_seq"] = w.GapFromSeq, w.GapToSeq
	}
	return m
}

func webhookRows(w *pb.Webhook) [][2]string {
	kinds := "all"
	if len(w.Kinds) > 0 {
		kinds = strings.Join(w.Kinds, ",")
	}
	rows := [][2]string{{"tenant", w.Tenant}, {"url", w.Url}, {"kinds", kinds}, {"secret_version", fmt.Sprint(w.SecretVersion)}}
	if w.PreviousSecretVersion != 0 {
		rows = append(rows, [2]string{"previous_secret", fmt.Sprintf("version %d, accepted until %s", w.PreviousSecretVersion, clusterWall(w.Now, w.PreviousSecretUntilMs))})
	}
	acked := "never"
	if w.AckedAtMs != 0 {
		acked = clusterWall(w.Now, w.AckedAtMs)
	}
	rows = append(rows, [2]string{"cursor", fmt.Sprintf("%d (advanced %s)", w.Cursor, acked)})
	if w.GapToSeq != 0 {
		rows = append(rows, [2]string{"gap", fmt.Sprintf("events %d..%d pruned before delivery (reported next)", w.GapFromSeq, w.GapToSeq)})
	}
	return rows
}

func init() {
	register("webhook set", typed(&spec[webhookSetOpts]{
		synopsis: "Register or change a tenant's webhook endpoint (prints a new secret once)",
		usage:    "--tenant TENANT --url URL [--kinds KIND,...] [--rotate [--grace DURATION]] [--json]",
		help: `The leader delivers the tenant's events to the endpoint: POST requests with
a JSON body {"events": [...]}, in order, at least once, each signed with
the endpoint's secret in the Barista-Signature header (docs/webhooks.md).
Delivery starts with the events after this command.

The secret is shown when the endpoint is created, and when --rotate
issues a new one; it is never stored, and never shown again: keep it. The
previous secret stays valid for --grace after a rotation (requests carry
a signature under each). A change without --rotate keeps the secret;
flags not given keep their values.

--kinds limits delivery to some event kinds (queued, assigned, started,
requeued, completed, failed, cancel_requested, cancelled, timed_out);
--kinds "" delivers every kind again. Gap events are always delivered.

The URL must be http or https; loopback, private and link-local
addresses are refused unless the servers allow them
(--webhook-allow-cidr). Admin token.`,
		flags: func(fs *flag.FlagSet, o *webhookSetOpts) {
			*o = webhookSetOpts{fs: fs}
			o.register(fs)
			fs.StringVar(&o.url, "url", "", "the endpoint's `URL` (required for a new endpoint)")
			fs.StringVar(&o.kinds, "kinds", "", "deliver only these event `KINDS` (comma-separated; default every kind)")
			fs.BoolVar(&o.rotate, "rotate", false, "issue a new secret (printed once)")
			durFlag(fs, &o.grace, "grace", 24*time.Hour, 0, time.Duration(fsm.MaxWebhookGraceMs)*time.Millisecond, "",
				"after --rotate, the previous secret stays valid this `DURATION` (0: not at all)")
		},
		run: runWebhookSet,
	}))
	register("webhook get", typed(&spec[webhookFlags]{
		synopsis: "Show a tenant's webhook endpoint (never its secret)",
		usage:    "--tenant TENANT [--json]",
		run: func(env *cmdEnv, opts *webhookFlags, args []string) error {
			if err := noArgs(args, opts); err != nil {
				return err
			}
			w, err := ask(opts.call, pb.NewAdminClient, pb.AdminClient.WebhookGet, &pb.WebhookGetRequest{Tenant: opts.tenant})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, webhookJSON(w))
			}
			printTable(env.stdout, webhookRows(w))
			return nil
		},
	}))
	register("webhook delete", typed(&spec[webhookFlags]{
		synopsis: "Remove a tenant's webhook endpoint",
		usage:    "--tenant TENANT",
		run: func(env *cmdEnv, opts *webhookFlags, args []string) error {
			if err := noArgs(args, opts); err != nil {
				return err
			}
			_, err := ask(opts.call, pb.NewAdminClient, pb.AdminClient.WebhookDelete, &pb.WebhookDeleteRequest{Tenant: opts.tenant})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, map[string]any{"tenant": opts.tenant, "deleted": true})
			}
			fmt.Fprintf(env.stdout, "webhook of tenant %s deleted\n", opts.tenant)
			return nil
		},
	}))
	register("webhook status", typed(&spec[webhookFlags]{
		synopsis: "Show a webhook's backlog, last success, last error and next retry",
		usage:    "--tenant TENANT [--json]",
		help: `Asks the leader, which delivers: the replicated endpoint and cursor, the
backlog (the tenant's events after the cursor that the endpoint gets), and
what the leader knows of its own deliveries since it leads — the last
success, the last error (a status code or a cause, never a response
body), the consecutive failures and the next retry.`,
		run: func(env *cmdEnv, opts *webhookFlags, args []string) error {
			if err := noArgs(args, opts); err != nil {
				return err
			}
			st, err := ask(opts.call, pb.NewAdminClient, pb.AdminClient.WebhookStatus, &pb.WebhookStatusRequest{Tenant: opts.tenant})
			if err != nil {
				return err
			}
			if opts.json {
				m := webhookJSON(st.Webhook)
				for k, v := range map[string]any{"backlog": st.Backlog, "leader_id": st.LeaderId, "delivered_seq": st.DeliveredSeq,
					"last_success_ms": st.LastSuccessMs, "last_error": st.LastError, "last_error_ms": st.LastErrorMs,
					"next_retry_ms": st.NextRetryMs, "failures": st.Failures} {
					m[k] = v
				}
				return printJSON(env.stdout, m)
			}
			rows := webhookRows(st.Webhook)
			never := func(ms int64) string {
				if ms == 0 {
					return "none"
				}
				return msTime(ms)
			}
			lastErr := "none"
			if st.LastError != "" {
				lastErr = fmt.Sprintf("%s (%s)", st.LastError, msTime(st.LastErrorMs))
			}
			rows = append(rows, [2]string{"backlog", fmt.Sprintf("%d events", st.Backlog)},
				[2]string{"delivered", fmt.Sprintf("up to seq %d (leader %s)", st.DeliveredSeq, st.LeaderId)},
				[2]string{"last_success", never(st.LastSuccessMs)}, [2]string{"last_error", lastErr},
				[2]string{"failures", fmt.Sprint(st.Failures)}, [2]string{"next_retry", never(st.NextRetryMs)})
			printTable(env.stdout, rows)
			return nil
		},
	}))
	register("webhook replay", typed(&spec[webhookReplayOpts]{
		synopsis: "Deliver a tenant's events again from a sequence number",
		usage:    "--tenant TENANT --from SEQ",
		help: `Moves the endpoint's cursor so that delivery starts again at event SEQ
(still retained: older events were pruned, OUT_OF_RANGE names the oldest).
A SEQ past the cursor skips the events between.`,
		flags: func(fs *flag.FlagSet, o *webhookReplayOpts) {
			o.register(fs)
			numFlag(fs, &o.from, "from", 0, 1, 1<<40, "the first event `SEQ` to deliver again (required)")
		},
		run: func(env *cmdEnv, opts *webhookReplayOpts, args []string) error {
			if err := noArgs(args, &opts.webhookFlags); err != nil {
				return err
			}
			if opts.from == 0 {
				return usageError("--from is required")
			}
			w, err := ask(opts.call, pb.NewAdminClient, pb.AdminClient.WebhookReplay, &pb.WebhookReplayRequest{Tenant: opts.tenant, FromSeq: opts.from})
			if err != nil {
				return err
			}
			if opts.json {
				return printJSON(env.stdout, webhookJSON(w))
			}
			fmt.Fprintf(env.stdout, "webhook of tenant %s delivers again from seq %d\n", w.Tenant, opts.from)
			return nil
		},
	}))
}

func noArgs(args []string, w *webhookFlags) error {
	if len(args) > 0 {
		return usageError("unexpected argument %q (the tenant is --tenant)", args[0])
	}
	return w.need()
}

func runWebhookSet(env *cmdEnv, opts *webhookSetOpts, args []string) error {
	if err := noArgs(args, &opts.webhookFlags); err != nil {
		return err
	}
	set := map[string]bool{}
	opts.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["grace"] && !opts.rotate {
		return usageError("--grace needs --rotate")
	}
	var out *pb.WebhookSetResponse
	err := opts.call(func(ctx context.Context, cc grpc.ClientConnInterface) error {
		admin := pb.NewAdminClient(cc)
		req := &pb.WebhookSetRequest{Tenant: opts.tenant, Rotate: opts.rotate}
		cur, err := admin.WebhookGet(ctx, &pb.WebhookGetRequest{Tenant: opts.tenant})
		switch {
		case err == nil:
			req.Url, req.Kinds = cur.Url, cur.Kinds
		case status.Code(err) == codes.NotFound && client.Reason(err) != pb.Reason_TENANT_UNKNOWN.String():
			// The tenant is there (its refusal would name TENANT_UNKNOWN):
			// it has no webhook yet.
			if !set["url"] {
				return usageError("tenant %q has no webhook yet: --url is required", opts.tenant)
			}
		default:
			return err
		}
		if set["url"] {
			req.Url = opts.url
		}
		if set["kinds"] {
			req.Kinds = nil
			for _, k := range strings.Split(opts.kinds, ",") {
				if k = strings.TrimSpace(k); k != "" {
					req.Kinds = append(req.Kinds, k)
				}
			}
		}
		if opts.rotate {
			g := opts.grace.Milliseconds()
			req.GraceMs = &g
		}
		out, err = admin.WebhookSet(ctx, req)
		return err
	})
	if err != nil {
		return err
	}
	if opts.json {
		m := webhookJSON(out.Webhook)
		m["created"] = out.Created
		if out.Secret != "" {
			m["secret"] = out.Secret
			m["previous_secret_kept"] = out.PreviousSecretKept
		}
		return printJSON(env.stdout, m)
	}
	verb := "updated"
	switch {
	case out.Created:
		verb = "created"
	case opts.rotate:
		verb = "updated, secret rotated"
	}
	fmt.Fprintf(env.stdout, "webhook of tenant %s %s\n", out.Webhook.Tenant, verb)
	printTable(env.stdout, webhookRows(out.Webhook))
	if out.Secret != "" {
		fmt.Fprintf(env.stdout, "\nsecret: %s\n", out.Secret)
		fmt.Fprintln(env.stdout, "(shown once and never stored: keep it where your receiver reads it)")
		if opts.rotate && !out.PreviousSecretKept && !out.Created {
			fmt.Fprintln(env.stdout, "the previous secret is no longer accepted")
		}
	}
	return nil
}

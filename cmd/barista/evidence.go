package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/internal/evidence"
	"github.com/baristahq/barista/internal/termtext"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/snapshot"
)

// The evidence of fairness on the command line (docs/fairness.md):
// barista usage statement, barista usage certificate, barista verify.

// windowFlags choose a window of the log: by index or by cluster time.
type windowFlags struct {
	fromIndex, toIndex uint64
	fromMs, toMs       int64
	last               time.Duration
}

func (w *windowFlags) register(fs *flag.FlagSet) {
	numFlag(fs, &w.fromIndex, "from-index", 0, 0, 1<<63, "the window's first log `INDEX` (0: the oldest the node can replay)")
	numFlag(fs, &w.toIndex, "to-index", 0, 0, 1<<63, "the window's last log `INDEX` (0: the last the node applied)")
	numFlag(fs, &w.fromMs, "from-ms", 0, 0, 1<<62, "the window's start in cluster time, `MS` (instead of indexes)")
	numFlag(fs, &w.toMs, "to-ms", 0, 0, 1<<62, "the window's end in cluster time, `MS`, exclusive (0: up to the last entry applied)")
	msFlag(fs, &w.last, "last", 0, time.Millisecond, 10*365*24*time.Hour, "", "the last `DURATION` of cluster time, up to now")
}

// spec returns the window; now reads the cluster time (for --last).
func (w *windowFlags) spec(now func() (int64, error)) (*pb.EvidenceWindow, error) {
	byIndex := w.fromIndex != 0 || w.toIndex != 0
	byTime := w.fromMs != 0 || w.toMs != 0
	switch {
	case byIndex && (byTime || w.last != 0), byTime && w.last != 0:
		return nil, usageError("give indexes (--from-index, --to-index), times (--from-ms, --to-ms) or --last, one kind only")
	case w.toIndex != 0 && w.toIndex < w.fromIndex:
		return nil, usageError("--to-index %d is before --from-index %d", w.toIndex, w.fromIndex)
	case w.toMs != 0 && w.toMs <= w.fromMs:
		return nil, usageError("--to-ms %d is not after --from-ms %d", w.toMs, w.fromMs)
	case w.last != 0:
		n, err := now()
		if err != nil {
			return nil, err
		}
		return &pb.EvidenceWindow{ByTime: true, FromMs: max(n-w.last.Milliseconds(), 0)}, nil
	case byTime:
		return &pb.EvidenceWindow{ByTime: true, FromMs: w.fromMs, ToMs: w.toMs}, nil
	}
	return &pb.EvidenceWindow{FromIndex: w.fromIndex, ToIndex: w.toIndex}, nil
}

// windowSpec is the same window for a replay.
func (w *windowFlags) windowSpec() (snapshot.WindowSpec, error) {
	if w.last != 0 {
		return snapshot.WindowSpec{}, usageError("--last needs a cluster: give --from-ms and --to-ms")
	}
	pw, err := w.spec(nil)
	if err != nil {
		return snapshot.WindowSpec{}, err
	}
	return snapshot.WindowSpec{FromIndex: pw.FromIndex, ToIndex: pw.ToIndex, ByTime: pw.ByTime, FromMs: pw.FromMs, ToMs: pw.ToMs}, nil
}

type statementOpts struct {
	tenantFlags
	windowFlags
	csv bool
}

type certificateOpts struct {
	tenantFlags
	windowFlags
	out string
}

func init() {
	register("usage statement", typed(&spec[statementOpts]{
		synopsis: "Print a tenant's usage statement over a window of the log",
		usage:    "[--tenant NAME] [--from-index N] [--to-index N | --from-ms MS --to-ms MS | --last DURATION] [--json | --csv]",
		help: `Prints the tenant's usage statement (docs/fairness.md) over a window of
the log: its CPU by pool, size and class (the runs that ended in the
window, their outcomes), how long its dispatched jobs had waited
(p50, p95, max), and per pool and class the CPU charged and billed
against the class's, beside its entitled share. The node answering
derives it by replaying the window from its own snapshots and log:
every node, and barista replay --statement on any node's data directory,
give the same bytes for the same closed window (say --to-index, or
--to-ms in the past). The window defaults to everything the node can
replay (its oldest retained snapshot on, up to the last entry it
applied); a window before that is OUT_OF_RANGE. --json prints the JSON
document, --csv the CSV (one figure a row: section, pool, size, class,
metric, value). A client token sees its own tenant's only.`,
		flags: func(fs *flag.FlagSet, o *statementOpts) {
			o.tenantFlags.clientFlags.register(fs)
			fs.StringVar(&o.tenant, "tenant", os.Getenv("BARISTA_TENANT"), "`TENANT` (may be omitted with a client token; $BARISTA_TENANT)")
			o.windowFlags.register(fs)
			fs.BoolVar(&o.csv, "csv", false, "print the CSV document")
		},
		run: runStatement,
	}))
	register("usage certificate", typed(&spec[certificateOpts]{
		synopsis: "Export a tenant's certificate of fairness over a window of the log",
		usage:    "[--tenant NAME] [--from-index N] [--to-index N | --from-ms MS --to-ms MS | --last DURATION] [-o FILE]",
		help: `Writes the tenant's certificate of fairness (docs/fairness.md) over a
window of the log, as JSON, to standard output or FILE: every dispatch
in the tenant's pools while it had a job that could go, the key of the
job chosen beside the key of each of its candidates and the rule that
put the chosen one first, other tenants under opaque names, the state
hashes at the window's ends, and a digest over it all. barista verify
FILE checks it, with no cluster. The window is chosen as for barista
usage statement.`,
		flags: func(fs *flag.FlagSet, o *certificateOpts) {
			o.tenantFlags.clientFlags.register(fs)
			fs.StringVar(&o.tenant, "tenant", os.Getenv("BARISTA_TENANT"), "`TENANT` (may be omitted with a client token; $BARISTA_TENANT)")
			o.windowFlags.register(fs)
			fs.StringVar(&o.out, "o", "", "write the certificate to `FILE` (default: standard output)")
		},
		run: runCertificate,
	}))
	register("verify", typed(&spec[verifyOpts]{
		synopsis: "Check a certificate of fairness",
		usage:    "FILE [--json]",
		help: `Checks a certificate of fairness (barista usage certificate; docs/fairness.md,
"Checking a certificate") without a cluster: its digest (nothing was
changed after it was issued), that its lines are in log order inside its
window, and that at every dispatch the job chosen went before each of
the tenant's candidates by a rule of the order: a lower key, a higher
class, a deadline, or a worker that could not take the candidate (its
size, or prefer-fit). Prints what it checked, and each failure; exits 1
if any. --json prints the report: {"lines", "candidates", "failures":
[{"line", "index", "job", "why"}]}. FILE "-" reads standard input.`,
		flags: func(fs *flag.FlagSet, o *verifyOpts) { fs.BoolVar(&o.json, "json", false, "print the report as JSON") },
		run:   runVerify,
	}))
}

// clusterNow reads the cluster time from a node (TenantUsage's clock).
func clusterNow(opts *tenantFlags) func() (int64, error) {
	return func() (int64, error) {
		u, err := withCall(opts.with, (*client.Client).TenantUsage, &pb.TenantUsageRequest{Tenant: opts.tenant, Read: &pb.ReadOptions{Stale: true}})
		if err != nil {
			return 0, err
		}
		return u.GetNow().GetClusterMs(), nil
	}
}

func runStatement(env *cmdEnv, opts *statementOpts, args []string) error {
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	if opts.csv && opts.json {
		return usageError("--csv and --json: choose one")
	}
	w, err := opts.windowFlags.spec(clusterNow(&opts.tenantFlags))
	if err != nil {
		return err
	}
	format := "json"
	if opts.csv {
		format = "csv"
	}
	resp, err := withCall(opts.with, (*client.Client).UsageStatement, &pb.UsageStatementRequest{Tenant: opts.tenant, Window: w, Format: format})
	if err != nil {
		return err
	}
	if opts.json || opts.csv {
		_, err = io.WriteString(env.stdout, resp.Document)
		return err
	}
	st, err := client.ParseStatement([]byte(resp.Document))
	if err != nil {
		return err
	}
	printStatement(env.stdout, st)
	return nil
}

// printStatement prints a statement as tables.
func printStatement(w io.Writer, st *client.Statement) {
	win := st.Window
	open := ""
	if win.Open {
		open = " (open: up to the last entry this node applied)"
	}
	fmt.Fprintf(w, "usage statement of %s: log indexes %d..%d, cluster time %d..%d ms%s\n\n", termtext.Safe(st.Tenant, false), win.FromIndex, win.ToIndex,
		win.FromMs, win.ToMs, open)
	fmt.Fprintf(w, "%-12s %-4s %-8s %12s %6s %6s %6s %6s %6s %6s %6s %6s %10s %10s %10s\n", "POOL", "SIZE", "CLASS", "CPU_MS", "OK", "FAILED", "CANCEL", "SNOOZE",
		"LOST", "UNSTRT", "ZOMBIE", "DISP", "WAIT_P50", "WAIT_P95", "WAIT_MAX")
	for _, u := range st.CPU {
		o := u.Runs
		fmt.Fprintf(w, "%-12s %-4s %-8s %12d %6d %6d %6d %6d %6d %6d %6d %6d %10s %10s %10s\n", u.Pool, u.Size, u.Class, u.CPUMs, o.OK, o.Failed, o.Cancelled, o.Snoozed,
			o.Lost, o.Unstarted, o.Zombie, u.Dispatches, msText(u.Waiting.P50Ms), msText(u.Waiting.P95Ms), msText(u.Waiting.MaxMs))
	}
	o := st.Runs
	fmt.Fprintf(w, "%-12s %-4s %-8s %12d %6d %6d %6d %6d %6d %6d %6d %6d %10s %10s %10s\n", "total", "", "", st.CPUMs, o.OK, o.Failed, o.Cancelled, o.Snoozed,
		o.Lost, o.Unstarted, o.Zombie, st.Waiting.Dispatches, msText(st.Waiting.P50Ms), msText(st.Waiting.P95Ms), msText(st.Waiting.MaxMs))
	if len(st.Shares) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%-12s %-8s %12s %16s %9s %9s %9s\n", "POOL", "CLASS", "CHARGED_MS", "CLASS_CHARGED_MS", "RECEIVED", "BILLED", "ENTITLED")
	for _, sh := range st.Shares {
		fmt.Fprintf(w, "%-12s %-8s %12d %16d %9s %9s %9s\n", sh.Pool, sh.Class, sh.ChargedMs, sh.ClassChargedMs, share(sh.Received), share(sh.Billed), share(sh.Entitled))
	}
}

func share(f *evidence.Fixed) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(*f))
}

func msText(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

func runCertificate(env *cmdEnv, opts *certificateOpts, args []string) error {
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	w, err := opts.windowFlags.spec(clusterNow(&opts.tenantFlags))
	if err != nil {
		return err
	}
	resp, err := withCall(opts.with, (*client.Client).FairnessCertificate, &pb.FairnessCertificateRequest{Tenant: opts.tenant, Window: w})
	if err != nil {
		return err
	}
	if opts.out == "" {
		_, err = io.WriteString(env.stdout, resp.Document)
		return err
	}
	if err := os.WriteFile(opts.out, []byte(resp.Document), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "wrote %s (digest %s)\n", opts.out, resp.Digest)
	return nil
}

type verifyOpts struct{ json bool }

func runVerify(env *cmdEnv, opts *verifyOpts, args []string) error {
	if len(args) != 1 {
		return usageError("verify needs one FILE")
	}
	in, err := openInput(args[0])
	if err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(in, 1<<30))
	in.Close()
	if err != nil {
		return err
	}
	cert, err := client.ParseCertificate(b)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	rep := client.VerifyCertificate(cert)
	if opts.json {
		if err := printJSON(env.stdout, rep); err != nil {
			return err
		}
	} else {
		win := cert.Window
		fmt.Fprintf(env.stdout, "certificate of tenant %s, log indexes %d..%d (cluster time %d..%d ms), %s, clamp %s\n", termtext.Safe(cert.Tenant, false),
			win.FromIndex, win.ToIndex, win.FromMs, win.ToMs, cert.Policy, cert.Clamp)
		fmt.Fprintf(env.stdout, "state hashes %s .. %s\n", win.StartHash, win.EndHash)
		fmt.Fprintf(env.stdout, "%d dispatches, %d candidates of the tenant's checked\n", rep.Lines, rep.Candidates)
		for _, f := range rep.Failures {
			at := "the certificate"
			if f.Line >= 0 {
				at = fmt.Sprintf("line %d (log index %d)", f.Line+1, f.Index)
			}
			fmt.Fprintf(env.stdout, "FAIL %s: %s\n", at, termtext.Safe(f.Why, false))
		}
		if rep.OK() {
			fmt.Fprintln(env.stdout, "verified: every dispatch kept the order")
		}
	}
	if !rep.OK() {
		return &silentError{code: 1}
	}
	return nil
}

// placeRow says a place in line on one row of barista job.
func placeRow(pl *pb.PlaceInLine, now *pb.ClockNow) string {
	ahead := fmt.Sprint(pl.Ahead)
	if !pl.Complete {
		ahead = "at least " + ahead
	}
	s := fmt.Sprintf("%s jobs go before it on the workers of its size (%d of its tenant's)", ahead, pl.OwnAhead)
	if pl.EstimatedStartMs != 0 {
		s += "; estimated start " + clusterWhen(now, pl.EstimatedStartMs) + " (an estimate)"
	}
	return s
}

// placeJSON is a place in line's JSON form (barista job --json, explain
// --json): ahead, own_ahead, complete, and estimated_start_ms with the
// rate and share it used when there is an estimate.
func placeJSON(pl *pb.PlaceInLine) map[string]any {
	m := map[string]any{"ahead": pl.Ahead, "own_ahead": pl.OwnAhead, "complete": pl.Complete}
	if pl.EstimatedStartMs != 0 {
		m["estimated_start_ms"], m["rate_per_minute"], m["share"] = pl.EstimatedStartMs, pl.RatePerMinute, pl.Share
	}
	return m
}

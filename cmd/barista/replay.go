package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/baristahq/barista/fsm"
	"github.com/baristahq/barista/fsm/fairness"
	"github.com/baristahq/barista/snapshot"
	"github.com/baristahq/barista/snapshot/scenario"
)

type replayOpts struct {
	script  string
	dataDir string
	until   uint64
	dump    bool
	json    bool
	audit   bool
	report  bool
	// statement and certificate name a tenant whose usage statement or
	// certificate of fairness to print, over the window.
	statement, certificate string
	csv                    bool
	window                 windowFlags
}

func init() {
	register("replay", typed(&spec[replayOpts]{
		synopsis: "Rebuild state from a data directory, or replay a scenario script",
		usage:    "--data-dir DIR [--until INDEX] [--dump | --audit | --report [--json]] | --script FILE [--report] [--json] | (--data-dir DIR | --script FILE) (--statement TENANT [--csv] | --certificate TENANT) [window]",
		help: `With --data-dir, rebuilds a node's state from the newest snapshot and the
Raft log in DIR without starting Raft (the node must be stopped), and
prints "index=N hash=HEX". By default it replays up to the applied index
the node recorded at its last snapshot or clean shutdown; --until INDEX
replays up to another index (entries past the recorded one may never have
been committed, and the output says so). --dump prints every applied entry
as a JSON line (commands and results) before the summary. --audit
replays the whole log from index 1 (snapshots ignored; the log must not
be compacted) one command at a time and prints one JSON fact per line
before the summary: kind "entry" (index, virtual_now, verify: the
counter self-check's error if any), "submit", "dispatch" (the tenant's
counters after it and the caps in force; the job's class, deadline,
deadline_missed and start tag; "backlogged", the tenants with queued jobs
just before it, and "backlogged_in", as tenant:class, the classes where
each had queued jobs without a deadline; "eligible", the classes with an
eligible job the worker fits just before it, "high:deadline" for a job
with a deadline; the job's form and kind, the worker and what it runs),
"finish" (accepted reports, with their outcome), "terminal" (a job's
terminal transition), "redrive" (a job a Redrive queued again, with its
attempt), "hello" (a worker's new session and what became of the run it
held), and finally "job" (every job in the table). The chaos checker
reads them (docs/chaos.md): caps, fairness inside each class, class and
deadline order at every dispatch, and kinds. A log with a
restored backup in it is audited only up to the backup (--until).

A restored backup leaves a gap in the log: a replay to an index past it
starts from a snapshot at or after the gap (the one the restore
installed, while it is retained).

A data directory's state is at the cluster's feature level of its log
(docs/operations.md, "Upgrades"): a log that never raised it replays at
level 1, as the previous build would.

With --script, runs a scenario script (see docs/replay.md) through the replicated
state machine's Apply (each line is one command, stamped with the script's
time) and prints one line per dispatch request:

  dispatch N tenant=NAME job=ID size=S start=TAG_MS
  dispatch N none

(with group=, pool= and worker= where they apply), then the final state
hash as "hash=HEX". Workers, kinds and their retry policies are lines of
the script too (worker ID size=S [commands] [kinds=a,b], submit ...
kind=K | command, kind TENANT|* KIND max_attempts=N ...). A line the
scheduler refuses prints "error LINE: reason" and the command exits 1
after the run. With --json each line is a JSON object (keys n, tenant,
job, size, start_ms, none, group, pool, worker; error, line; hash). "-"
reads the script from standard input.

--report, with --script or --data-dir, prints the fairness report of the
whole run instead (docs/scheduling.md, "The fairness report"): for each
class and tenant with work, the CPU billed (the actual CPU of its finished
runs), its share of all CPU billed in the class, its entitlement (its
weight over the weights of the tenants with eligible work in the class,
weighted by cluster time) and the ratio of the two, as a table:

  CLASS   TENANT  CPU_BILLED_MS  SHARE   ENTITLED  RATIO
  normal  gold    16000          0.8889  0.8889    1.0000

or with --json one object per line:

  {"tenant": "gold", "pool": "default", "class": "normal", "cpu_billed_ms": 16000, "share": 0.8889, "entitled": 0.8889, "ratio": 1.0000}

("-" or null: undefined, e.g. no cluster time passed with eligible work).
Every pool is its own fair share (docs/scheduling.md, "Pools"): each
JSON line names its pool ("pool" after "tenant"); the table has a POOL
column when the run used a pool other than default.
A script's refused lines are printed on standard error. A data directory
is replayed from index 1 when its log reaches back to it and holds no
restored backup (barista operator snapshot restore leaves a gap in the
log where it installs the backup), else from its newest snapshot, and a
note on standard error says where the report starts.

--statement TENANT and --certificate TENANT, with --script or
--data-dir, print the tenant's usage statement (JSON, or with --csv CSV)
or its certificate of fairness over a window of the log
(docs/fairness.md): byte for byte what a node of the cluster issues for
the same window (barista usage statement --json, barista usage
certificate). The window is chosen with --from-index and --to-index, or
--from-ms and --to-ms (cluster time), as for barista usage statement; by
default everything the directory can replay from its oldest retained
snapshot (or index 1) to its recorded applied index. A script's log is
its lines, one entry each.`,
		flags: func(fs *flag.FlagSet, o *replayOpts) {
			fs.StringVar(&o.script, "script", "", "scenario script to run (`FILE`, - for stdin)")
			fs.StringVar(&o.dataDir, "data-dir", "", "a stopped node's data `DIR` to rebuild")
			numFlag(fs, &o.until, "until", 0, 0, math.MaxUint64, "replay up to this log `INDEX` (0: the recorded applied index)")
			fs.BoolVar(&o.dump, "dump", false, "print every applied entry as a JSON line")
			fs.BoolVar(&o.audit, "audit", false, "replay the whole log command by command and print audit facts as JSON lines")
			fs.BoolVar(&o.report, "report", false, "print the fairness report of the whole run (CPU billed, share, entitlement, ratio per class and tenant)")
			fs.BoolVar(&o.json, "json", false, "print JSON")
			fs.StringVar(&o.statement, "statement", "", "print `TENANT`'s usage statement over the window")
			fs.StringVar(&o.certificate, "certificate", "", "print `TENANT`'s certificate of fairness over the window")
			fs.BoolVar(&o.csv, "csv", false, "with --statement: print it as CSV")
			o.window.register(fs)
		},
		run: runReplay,
	}))
}

func runReplay(env *cmdEnv, opts *replayOpts, args []string) error {
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	if (opts.script == "") == (opts.dataDir == "") {
		return usageError("replay needs exactly one of --script FILE and --data-dir DIR")
	}
	if opts.statement != "" || opts.certificate != "" {
		return replayEvidence(env, opts)
	}
	if opts.csv || opts.window != (windowFlags{}) {
		return usageError("--csv and the window's flags go with --statement or --certificate")
	}
	if opts.dataDir != "" {
		return replayDataDir(env, opts)
	}
	in, err := openInput(opts.script)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer in.Close()
	if opts.report {
		m := scenario.NewMachine()
		_, err = scenario.Run(in, m, env.stderr, scenario.Options{JSON: opts.json, Quiet: true})
		if err != nil && !errors.Is(err, scenario.ErrScript) {
			return fmt.Errorf("replay: %w", err)
		}
		if werr := fairness.WriteBilled(env.stdout, m.F.Fairness(true).Rows, opts.json); werr != nil {
			return werr
		}
		if err != nil {
			return &silentError{code: 1}
		}
		return nil
	}
	_, err = scenario.Run(in, scenario.NewMachine(), env.stdout, scenario.Options{JSON: opts.json})
	if errors.Is(err, scenario.ErrScript) {
		return &silentError{code: 1}
	}
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

func replayDataDir(env *cmdEnv, opts *replayOpts) error {
	var dump io.Writer
	if opts.dump {
		dump = env.stdout
	}
	if opts.audit && opts.dump {
		return usageError("--dump and --audit cannot be combined")
	}
	if opts.report && (opts.dump || opts.audit) {
		return usageError("--report cannot be combined with --dump or --audit")
	}
	if opts.report {
		return replayReport(env, opts)
	}
	var res snapshot.ReplayResult
	var err error
	if opts.audit {
		enc := json.NewEncoder(env.stdout)
		res, err = snapshot.Audit(opts.dataDir, opts.until, func(f snapshot.AuditFact) { enc.Encode(f) })
	} else {
		res, err = snapshot.Replay(opts.dataDir, opts.until, dump)
	}
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	note := replayNote(res)
	if opts.json {
		out := map[string]any{"index": res.Index, "hash": hex.EncodeToString(res.Hash[:]), "snapshot_index": res.SnapshotAt, "last_log_index": res.LastLogIndex}
		if res.Recorded != nil {
			out["recorded_index"], out["recorded_hash"] = res.Recorded.Index, res.Recorded.Hash
		}
		if note != "" {
			out["note"] = note
		}
		return printJSON(env.stdout, out)
	}
	if note != "" {
		fmt.Fprintln(env.stderr, "note:", note)
	}
	fmt.Fprintf(env.stdout, "index=%d hash=%x\n", res.Index, res.Hash)
	return nil
}

// replayReport prints a data directory's fairness report of the whole
// replayed log.
func replayReport(env *cmdEnv, opts *replayOpts) error {
	res, f, err := snapshot.ReplayWhole(opts.dataDir, opts.until)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	if res.SnapshotAt > 0 {
		fmt.Fprintf(env.stderr, "note: the log before index %d is compacted: the report covers entries %d to %d, from the snapshot at index %d\n",
			res.SnapshotAt+1, res.SnapshotAt+1, res.Index, res.SnapshotAt)
	}
	if note := replayNote(res); note != "" {
		fmt.Fprintln(env.stderr, "note:", note)
	}
	return fairness.WriteBilled(env.stdout, f.Fairness(true).Rows, opts.json)
}

// replayNote says what a data directory's replay may include beyond the
// committed log ("" when nothing).
func replayNote(res snapshot.ReplayResult) string {
	switch {
	case res.Recorded == nil:
		return "no applied index was recorded (the node never snapshotted or stopped cleanly); replayed the whole log, which may include uncommitted entries"
	case res.Uncommitted:
		return fmt.Sprintf("replayed past the recorded applied index %d: entries after it may never have been committed", res.Recorded.Index)
	}
	return ""
}

// replayEvidence prints a tenant's statement or certificate over a
// window of a data directory's log or a script's.
func replayEvidence(env *cmdEnv, opts *replayOpts) error {
	switch {
	case opts.statement != "" && opts.certificate != "":
		return usageError("--statement and --certificate: one at a time")
	case opts.report || opts.audit || opts.dump || opts.until != 0:
		return usageError("--statement and --certificate cannot be combined with --report, --audit, --dump or --until")
	case opts.csv && opts.certificate != "":
		return usageError("--csv goes with --statement")
	}
	spec, err := opts.window.windowSpec()
	if err != nil {
		return err
	}
	var src snapshot.Source
	if opts.dataDir != "" {
		dir, closeLog, err := snapshot.OpenDirSource(opts.dataDir)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		defer closeLog()
		src = dir
	} else {
		in, err := openInput(opts.script)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		defer in.Close()
		m := scenario.NewMachine()
		m.Record = true
		if _, err := scenario.Run(in, m, env.stderr, scenario.Options{Quiet: true}); err != nil && !errors.Is(err, scenario.ErrScript) {
			return fmt.Errorf("replay: %w", err)
		}
		src = &snapshot.MemorySource{New: func() *fsm.FSM { return fsm.NewAtLevel(scenario.DefaultLevel) }, Entries: m.Entries}
	}
	if opts.certificate != "" {
		cert, err := snapshot.Certificate(src, opts.certificate, spec)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		_, err = env.stdout.Write(cert.JSON())
		return err
	}
	st, err := snapshot.Statement(src, opts.statement, spec)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	doc := st.JSON()
	if opts.csv {
		doc = st.CSV()
	}
	_, err = env.stdout.Write(doc)
	return err
}

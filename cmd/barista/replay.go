package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"

	"barista/snapshot"
	"barista/snapshot/scenario"
)

type replayOpts struct {
	script  string
	dataDir string
	until   uint64
	dump    bool
	json    bool
	audit   bool
}

func init() {
	register("replay", &command{
		synopsis: "Rebuild state from a data directory, or replay a scenario script",
		usage:    "--data-dir DIR [--until INDEX] [--dump | --audit] | --script FILE [--json]",
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
with a deadline), "finish" (accepted reports), "terminal" (a job's
terminal transition), and finally "job" (every job in the table). The
chaos checker reads them (docs/chaos.md): caps, fairness inside each
class, and class and deadline order at every dispatch.

A data directory's state is at the cluster's feature level of its log
(docs/operations.md, "Upgrades"): a log that never raised it replays at
level 1, as the previous build would.

With --script, runs a scenario script (see docs/replay.md) through the replicated
state machine's Apply (each line is one command, stamped with the script's
time) and prints one line per dispatch request:

  dispatch N tenant=NAME job=ID size=S start=TAG_MS
  dispatch N none

then the final state hash as "hash=HEX". A line the scheduler refuses prints
"error LINE: reason" and the command exits 1 after the run. With --json each
line is a JSON object (keys n, tenant, job, size, start_ms, none; error,
line; hash). "-" reads the script from standard input.`,
		flags: func(fs *flag.FlagSet) any {
			o := &replayOpts{}
			fs.StringVar(&o.script, "script", "", "scenario script to run (`FILE`, - for stdin)")
			fs.StringVar(&o.dataDir, "data-dir", "", "a stopped node's data `DIR` to rebuild")
			numFlag(fs, &o.until, "until", 0, 0, math.MaxUint64, "replay up to this log `INDEX` (0: the recorded applied index)")
			fs.BoolVar(&o.dump, "dump", false, "print every applied entry as a JSON line")
			fs.BoolVar(&o.audit, "audit", false, "replay the whole log command by command and print audit facts as JSON lines")
			fs.BoolVar(&o.json, "json", false, "print JSON")
			return o
		},
		run: runReplay,
	})
}

func runReplay(env *cmdEnv, o any, args []string) error {
	opts := o.(*replayOpts)
	if len(args) > 0 {
		return usageError("unexpected argument %q", args[0])
	}
	if (opts.script == "") == (opts.dataDir == "") {
		return usageError("replay needs exactly one of --script FILE and --data-dir DIR")
	}
	if opts.dataDir != "" {
		return replayDataDir(env, opts)
	}
	in, err := openInput(opts.script)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer in.Close()
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
	note := ""
	switch {
	case res.Recorded == nil:
		note = "no applied index was recorded (the node never snapshotted or stopped cleanly); replayed the whole log, which may include uncommitted entries"
	case res.Uncommitted:
		note = fmt.Sprintf("replayed past the recorded applied index %d: entries after it may never have been committed", res.Recorded.Index)
	}
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

package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/baristahq/barista/proto/clusterpb"
)

type debugApplyOpts struct {
	clientFlags
	file          string
	unsafeVersion uint32
}

func init() {
	register("debug apply", typed(&spec[debugApplyOpts]{
		synopsis: "Propose raw state-machine commands through the leader (admin)",
		usage:    "[--server ADDR] [--file FILE] [COMMAND_JSON ...]",
		help: `Proposes commands, written as protobuf JSON (see proto/commands.proto), as
one Raft log entry, and prints one result per command as a JSON line.
Commands come from the arguments, or one per line from --file (- for
stdin). Examples:

  barista debug apply '{"tenantUpsert":{"name":"acme","tier":"GOLD"}}'
  barista debug apply '{"submit":{"tenant":"acme","size":"MD","estCostMs":"60000"}}'

--unsafe-version proposes the entry with another envelope version; every
node then stops on it (the server must run with --unsafe-debug).`,
		flags: func(fs *flag.FlagSet, o *debugApplyOpts) {
			o.register(fs)
			fs.StringVar(&o.file, "file", "", "read commands from `FILE`, one JSON object per line (- for stdin)")
			numFlag(fs, &o.unsafeVersion, "unsafe-version", 0, 0, math.MaxUint32, "propose with this envelope `VERSION` (tests of the fatal path)")
		},
		run: runDebugApply,
	}))
}

func runDebugApply(env *cmdEnv, opts *debugApplyOpts, args []string) error {
	lines := args
	if opts.file != "" {
		in, err := openInput(opts.file)
		if err != nil {
			return err
		}
		defer in.Close()
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				lines = append(lines, l)
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	if len(lines) == 0 {
		return usageError("no commands given")
	}
	req := &clusterpb.ApplyRequest{UnsafeVersion: opts.unsafeVersion}
	for i, l := range lines {
		c := &clusterpb.Command{}
		if err := protojson.Unmarshal([]byte(l), c); err != nil {
			return usageError("command %d: %v", i+1, err)
		}
		req.Commands = append(req.Commands, c)
	}
	resp, err := ask(opts.call, clusterpb.NewNodeClient, clusterpb.NodeClient.Apply, req)
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range resp.Results {
		b, _ := protojson.MarshalOptions{EmitUnpopulated: false}.Marshal(r)
		fmt.Fprintf(env.stdout, "{\"index\":%d,\"result\":%s}\n", resp.Index, b)
		if r.Code != clusterpb.Code_CODE_OK {
			failed++
		}
	}
	if failed > 0 {
		return &silentError{code: 1}
	}
	return nil
}

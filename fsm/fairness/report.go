package fairness

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/baristahq/barista/internal/termtext"
	"github.com/baristahq/barista/sfq"
)

// WriteBilled writes the whole-run report (barista replay --report): for
// each line, the CPU billed to the tenant in its class (its finished
// runs), that as a share of all CPU billed in the class, its
// time-weighted entitlement, and their ratio, with four decimals ("-", or
// null in JSON, when undefined). As a table, one row per line under a
// header; with asJSON, one object per line:
//
//	{"tenant": "acme", "pool": "default", "class": "normal", "cpu_billed_ms": 123000, "share": 0.5123, "entitled": 0.5161, "ratio": 0.9926}
//	{"tenant": "acme", "pool": "gpu", "class": "normal", "cpu_billed_ms": 9000, "share": 0.5000, "entitled": 0.5000, "ratio": 1.0000}
//
// Every JSON line names its pool ("pool" after "tenant", SPEC §3
// "Pools"); the table of a run with no pool but default is as before
// pools, and has a POOL column otherwise.
func WriteBilled(w io.Writer, lines []Line, asJSON bool) error {
	if asJSON {
		bw := bufio.NewWriter(w)
		for i := range lines {
			l := &lines[i]
			share, sok := l.Whole.BilledShare()
			ent, eok := l.Whole.Entitled()
			ratio, rok := l.Whole.BilledRatio()
			name, _ := json.Marshal(l.Name)
			pool, _ := json.Marshal(cmp.Or(l.Pool, sfq.DefaultPoolName))
			fmt.Fprintf(bw, `{"tenant": %s, "pool": %s, "class": "%s", "cpu_billed_ms": %d, "share": %s, "entitled": %s, "ratio": %s}`+"\n",
				name, pool, l.Class, l.Whole.BilledMs, fixed(share, sok, "null"), fixed(ent, eok, "null"), fixed(ratio, rok, "null"))
		}
		return bw.Flush()
	}
	pools := slices.ContainsFunc(lines, func(l Line) bool { return l.Pool != "" })
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if pools {
		fmt.Fprint(tw, "CLASS\tPOOL\tTENANT\tCPU_BILLED_MS\tSHARE\tENTITLED\tRATIO\n")
	} else {
		fmt.Fprint(tw, "CLASS\tTENANT\tCPU_BILLED_MS\tSHARE\tENTITLED\tRATIO\n")
	}
	for i := range lines {
		l := &lines[i]
		share, sok := l.Whole.BilledShare()
		ent, eok := l.Whole.Entitled()
		ratio, rok := l.Whole.BilledRatio()
		name := termtext.Safe(l.Name, false)
		if l.Deleted {
			name += " (deleted)"
		}
		fmt.Fprint(tw, l.Class, "\t")
		if pools {
			fmt.Fprint(tw, cmp.Or(l.Pool, sfq.DefaultPoolName), "\t")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", name, l.Whole.BilledMs, fixed(share, sok, "-"), fixed(ent, eok, "-"), fixed(ratio, rok, "-"))
	}
	return tw.Flush()
}

// fixed prints v with four decimals, or none if it is undefined.
func fixed(v float64, ok bool, none string) string {
	if !ok {
		return none
	}
	return fmt.Sprintf("%.4f", v)
}

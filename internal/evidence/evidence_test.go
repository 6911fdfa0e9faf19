package evidence

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update-vectors", false, "rewrite testdata/vectors")

func key(tenant string, job uint64, class, size string, deadline int64, start string, tier int) Key {
	return Key{Tenant: tenant, Job: job, Class: class, Size: size, DeadlineAtMs: deadline, Start: start, Tier: tier}
}

// TestReasons: each reason holds exactly where SPEC §3's order says the
// chosen job goes first.
func TestReasons(t *testing.T) {
	fit := &Certificate{Policy: "prefer-fit"}
	res := &Certificate{Policy: "reserve", MarginUs: 500}
	for _, tc := range []struct {
		cert   *Certificate
		ws     string
		c, m   Key
		reason string // the first that holds; "" none
	}{
		{fit, "md", key("t1", 1, "normal", "md", 0, "100", 0), key("", 2, "normal", "lg", 0, "0", 4), ReasonSize},
		{fit, "md", key("t1", 1, "high", "sm", 0, "900", 0), key("", 2, "normal", "md", 0, "0", 4), ReasonClass},
		{fit, "md", key("t1", 1, "normal", "sm", 0, "900", 0), key("", 2, "high", "md", 0, "0", 4), ""},
		{fit, "md", key("t1", 1, "normal", "sm", 5000, "900", 0), key("", 2, "normal", "md", 0, "0", 4), ReasonDeadline},
		{fit, "md", key("t1", 1, "normal", "md", 0, "0", 4), key("", 2, "normal", "sm", 5000, "900", 0), ""},
		{fit, "md", key("t1", 3, "normal", "sm", 5000, "900", 0), key("", 2, "normal", "md", 6000, "0", 4), ReasonKey},
		{fit, "md", key("t1", 3, "normal", "sm", 5000, "900", 0), key("", 2, "normal", "md", 5000, "0", 4), ""}, // same deadline, higher ID
		{fit, "md", key("t1", 3, "normal", "md", 0, "100", 0), key("", 2, "normal", "md", 0, "200", 4), ReasonKey},
		{fit, "md", key("t1", 3, "normal", "md", 0, "100", 4), key("", 2, "normal", "md", 0, "100", 3), ReasonKey}, // tier
		{fit, "md", key("t1", 3, "normal", "md", 0, "100", 3), key("", 2, "normal", "md", 0, "100", 3), ""},        // ID
		{fit, "lg", key("t1", 3, "normal", "md", 0, "100", 3), key("", 2, "normal", "sm", 0, "100", 3), ReasonKey}, // both smaller: size
		{fit, "md", key("t1", 3, "normal", "md", 0, "900", 0), key("", 2, "normal", "sm", 0, "0", 4), ReasonFit},
		{fit, "md", key("t1", 3, "normal", "sm", 0, "0", 4), key("", 2, "normal", "md", 0, "900", 0), ""},
		{res, "md", key("t1", 3, "normal", "md", 0, "900", 0), key("", 2, "normal", "sm", 0, "400", 4), ReasonFit},
		{res, "md", key("t1", 3, "normal", "md", 0, "901", 0), key("", 2, "normal", "sm", 0, "400", 4), ""},
		{res, "md", key("t1", 3, "normal", "sm", 0, "399", 0), key("", 2, "normal", "md", 0, "900", 4), ReasonReserve},
		{res, "md", key("t1", 3, "normal", "sm", 0, "400", 0), key("", 2, "normal", "md", 0, "900", 4), ""},
		{fit, "md", key("t1", 3, "normal", "md", 0, "18446744073709551616", 0), key("", 2, "normal", "md", 0, "18446744073709551617", 0), ReasonKey},
	} {
		if got := tc.cert.ReasonFor(tc.ws, &tc.c, &tc.m); got != tc.reason {
			t.Errorf("%s worker, %+v before %+v (%s): reason %q, want %q", tc.ws, tc.c, tc.m, tc.cert.Policy, got, tc.reason)
		}
	}
}

// vectors are certificates and what a verifier says of them: the Go
// verifier here, and the Python and TypeScript SDKs' ports, which read
// the same files (testdata/vectors; -update-vectors rewrites them).
func vectors() map[string]*Certificate {
	base := func(policy string, margin int64) *Certificate {
		return &Certificate{Tenant: "acme", Policy: policy, MarginUs: margin, Clamp: "activation",
			Window: Window{FromIndex: 10, ToIndex: 40, FromMs: 1000, ToMs: 9000, StartHash: strings.Repeat("ab", 32), EndHash: strings.Repeat("cd", 32)}}
	}
	line := func(index uint64, at int64, ws string, c Key, mine ...Key) Line {
		return Line{Index: index, AtMs: at, Pool: "default", WorkerSize: ws, Chosen: c, Mine: mine}
	}
	withReason := func(cert *Certificate) *Certificate {
		for i := range cert.Lines {
			l := &cert.Lines[i]
			for k := range l.Mine {
				l.Mine[k].Reason = cert.ReasonFor(l.WorkerSize, &l.Chosen, &l.Mine[k])
			}
		}
		cert.Seal()
		return cert
	}
	valid := base("prefer-fit", 0)
	valid.Lines = []Line{
		line(11, 1000, "md", key("t1", 5, "normal", "md", 0, "0", 4), key("", 7, "normal", "md", 0, "0", 0), key("", 9, "normal", "lg", 0, "0", 0)),
		line(12, 1000, "md", key(Self, 7, "normal", "md", 0, "0", 0), key("", 9, "normal", "lg", 0, "250000", 0)),
		line(15, 2000, "sm", key("t2", 11, "high", "sm", 0, "90000", 1), key("", 8, "normal", "sm", 0, "250000", 0)),
		line(16, 2000, "md", key("t1", 12, "normal", "sm", 8000, "500000", 4), key("", 8, "normal", "sm", 0, "250000", 0)),
		line(20, 3000, "md", key("t2", 13, "normal", "md", 0, "260000", 1), key("", 8, "normal", "sm", 0, "250000", 0), key("", 14, "normal", "md", 0, "250000", 0)),
		line(31, 4000, "lg", key("t1", 15, "normal", "md", 0, "240000", 4), key("", 8, "normal", "sm", 0, "250000", 0), key("", 9, "normal", "lg", 0, "250000", 0)),
	}
	// The unfair vector breaks the order twice: on line 4 job 13 (start
	// 260000) went before the tenant's job 14 of the worker's size (start
	// 250000); on line 5 an lg worker took an md job over the tenant's lg
	// job 9 (prefer-fit). The valid one has job 13 start lower and an lg
	// job 15 on line 5.
	unfair := withReason(cloneCert(valid))
	valid.Lines[4].Chosen.Start = "240000"
	valid.Lines[5] = line(31, 4000, "lg", key("t1", 15, "normal", "lg", 0, "240000", 4), key("", 8, "normal", "sm", 0, "250000", 0), key("", 9, "normal", "lg", 0, "250000", 0))
	withReason(valid)
	swapped := cloneCert(valid)
	swapped.Lines[1], swapped.Lines[2] = swapped.Lines[2], swapped.Lines[1]
	edited := cloneCert(valid)
	edited.Lines[0].Chosen.Start = "300000" // the digest no longer matches, nor the order
	reserve := base("reserve", 100_000)
	reserve.Lines = []Line{
		line(11, 1000, "md", key("t1", 5, "normal", "sm", 0, "0", 4), key("", 7, "normal", "md", 0, "150000", 0)),
		line(12, 1000, "md", key("t1", 6, "normal", "md", 0, "150000", 4), key("", 7, "normal", "sm", 0, "60000", 0)),
	}
	withReason(reserve)
	return map[string]*Certificate{"valid": valid, "unfair": unfair, "swapped": swapped, "edited": edited, "reserve": reserve}
}

func cloneCert(c *Certificate) *Certificate {
	d := *c
	d.Lines = slices.Clone(c.Lines)
	for i := range d.Lines {
		d.Lines[i].Mine = slices.Clone(c.Lines[i].Mine)
	}
	return &d
}

// Expected is a vector's verdict: the failures' lines (-1: the whole
// certificate), in order.
type Expected struct {
	OK       bool  `json:"ok"`
	Failures []int `json:"failure_lines"`
}

func TestVectors(t *testing.T) {
	want := map[string]Expected{
		"valid": {OK: true, Failures: []int{}}, "reserve": {OK: true, Failures: []int{}},
		"unfair":  {Failures: []int{4, 5}}, // 5: an lg worker took a smaller job over the tenant's lg one
		"swapped": {Failures: []int{-1, 2}},
		"edited":  {Failures: []int{-1, 0}},
	}
	dir := filepath.Join("testdata", "vectors")
	if *update {
		os.MkdirAll(dir, 0o755)
	}
	for name, cert := range vectors() {
		path := filepath.Join(dir, name+".json")
		if *update {
			if err := os.WriteFile(path, cert.JSON(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, cert.JSON()) {
			t.Errorf("%s differs from what the test builds (go test -update-vectors)", path)
		}
		parsed, err := ParseCertificate(b)
		if err != nil {
			t.Fatal(err)
		}
		rep := Verify(parsed)
		got := Expected{OK: rep.OK(), Failures: []int{}}
		for _, f := range rep.Failures {
			got.Failures = append(got.Failures, f.Line)
		}
		if w := want[name]; got.OK != w.OK || !slices.Equal(got.Failures, w.Failures) {
			t.Errorf("%s: verdict %+v (%+v), want %+v", name, got, rep.Failures, w)
		}
	}
	manifest, _ := json.MarshalIndent(want, "", "  ")
	manifest = append(manifest, '\n')
	path := filepath.Join(dir, "expected.json")
	if *update {
		os.WriteFile(path, manifest, 0o644)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, manifest) {
		t.Errorf("%s differs (go test -update-vectors)", path)
	}
}

// TestStatementDocuments: the JSON and CSV of a statement.
func TestStatementDocuments(t *testing.T) {
	st := &Statement{Tenant: "acme", Window: Window{FromIndex: 1, ToIndex: 9, FromMs: 0, ToMs: 60000}}
	st.CPU = []Usage{{Pool: "default", Size: "md", Class: "normal", CPUMs: 3000}}
	st.CPU[0].Runs.Add("ok")
	st.CPU[0].Runs.Add("zombie")
	for _, w := range []int64{10, 40, 20, 30} {
		st.CPU[0].AddWait(w)
	}
	st.Shares = []Share{{Pool: "default", Class: "normal", ChargedMs: 1, ClassChargedMs: 4, BusyMs: 1000, EntitledQ24: 500 << 24}}
	st.Finish()
	if st.Waiting != (Waiting{Dispatches: 4, P50Ms: 20, P95Ms: 40, MaxMs: 40}) || st.Runs.Total() != 2 || st.CPUMs != 3000 {
		t.Errorf("totals %+v %+v %d", st.Waiting, st.Runs, st.CPUMs)
	}
	csv := string(st.CSV())
	for _, line := range []string{"section,pool,size,class,metric,value\n", "cpu,default,md,normal,zombie,1\n", "total,,,,wait_p95_ms,40\n",
		"share,default,,normal,received,0.250000\n", "share,default,,normal,billed,\n", "share,default,,normal,entitled,0.500000\n"} {
		if !strings.Contains(csv, line) {
			t.Errorf("CSV has no line %q:\n%s", line, csv)
		}
	}
	js := string(st.JSON())
	for _, frag := range []string{`"received": 0.250000`, `"billed": null`, `"p50_ms": 20`} {
		if !strings.Contains(js, frag) {
			t.Errorf("JSON has no %q:\n%s", frag, js)
		}
	}
	st.Tenant = "=HYPERLINK(1)"
	if !strings.Contains(string(st.CSV()), "\ntenant,,,,name,'=HYPERLINK(1)\n") {
		t.Errorf("a formula in the CSV:\n%s", st.CSV())
	}
	back, err := ParseStatement(st.JSON())
	if err != nil || back.CPUMs != 3000 || *back.Shares[0].Entitled != 0.5 {
		t.Errorf("parsed back: %+v %v", back, err)
	}
}

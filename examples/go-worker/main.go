// Command go-worker is an example worker written in Go with the typed
// SDK (packages client and worker): it runs the jobs of kind
// "count-words" as calls of a Go function in its own process, with no
// child process, and reports the function's answer as the job's output.
//
//	go-worker --server 10.0.0.1:7400,10.0.0.2:7400 --token-file worker.token --id words --concurrency 4
//
// A job of kind count-words carries {"text": "..."} and ends with the
// output {"words": N, "lines": N}; a text of more than a million bytes
// is discarded (it fails with no retry), and a text that starts with
// "later" is snoozed once for 2 s (tried again without a failure
// counted). The worker tells the cluster it runs count-words: it is given
// only jobs of that kind (and jobs submitted with no form), never a
// command job or a job of another kind, which wait for a worker that runs
// them; a job of no form of another kind fails at once, saying which kinds
// this worker runs. A cancelled job's function sees its context end.
//
// With --concurrency N it runs N jobs at once, as workers ID-1 .. ID-N
// (the worker token's binding must cover them). The first SIGINT or
// SIGTERM stops it gracefully (it finishes the jobs it runs, takes no
// other, and exits 0); a second cancels the running jobs (they are
// retried elsewhere) and exits.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/baristahq/barista/client"
	"github.com/baristahq/barista/worker"
)

// CountWords is the arguments of a job of kind count-words: its payload
// is this struct as JSON. A program inserts one with
// client.Insert(ctx, CountWords{Text: "..."}, nil).
type CountWords struct {
	Text string `json:"text"`
}

// Kind names the job type workers route by.
func (CountWords) Kind() string { return "count-words" }

func main() {
	os.Exit(run())
}

// countWords is the work: one job, one call.
func countWords(ctx context.Context, job *worker.Job[CountWords]) error {
	if len(job.Args.Text) > 1<<20 {
		return worker.Discard(fmt.Errorf("text of %d bytes: at most 1 MiB", len(job.Args.Text)))
	}
	if strings.HasPrefix(job.Args.Text, "later") && job.Attempt == 1 {
		return worker.Snooze(2 * time.Second)
	}
	var out struct {
		Words int `json:"words"`
		Lines int `json:"lines"`
	}
	sc := bufio.NewScanner(strings.NewReader(job.Args.Text))
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return err // cancelled: stop here
		}
		out.Lines++
		out.Words += len(strings.Fields(sc.Text()))
	}
	b, _ := json.Marshal(out)
	job.Output(string(b))
	fmt.Printf("job %d of %s: %d words\n", job.ID, job.Tenant, out.Words)
	return nil
}

func run() int {
	servers := flag.String("server", env("BARISTA_ADDR", "127.0.0.1:7400"), "gRPC `ADDR[,ADDR...]` of any nodes")
	tokenFile := flag.String("token-file", "", "read the worker token from `FILE` (otherwise $BARISTA_TOKEN)")
	tlsCA := flag.String("tls-ca", os.Getenv("BARISTA_TLS_CA"), "verify the nodes with this CA `FILE` (enables TLS)")
	insecureGRPC := flag.Bool("insecure-grpc", false, "send the token without TLS to nodes that are not on this machine (refused otherwise)")
	id := flag.String("id", "go-worker", "worker `ID` (with --concurrency N > 1: ID-1 .. ID-N; a worker token's binding must cover them)")
	size := flag.String("size", "sm", "largest job size it runs: sm, md or lg")
	concurrency := flag.Int("concurrency", 1, "jobs it runs at once (`N`)")
	flag.Parse()

	token := os.Getenv("BARISTA_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "--token-file:", err)
			return 2
		}
		token = strings.TrimSpace(string(b))
	}
	switch sz := worker.Size(*size); sz {
	case worker.SizeSM, worker.SizeMD, worker.SizeLG:
	default:
		fmt.Fprintf(os.Stderr, "--size: %q (want sm, md or lg)\n", *size)
		return 2
	}
	var tlsCfg *tls.Config
	if *tlsCA != "" {
		cfg, err := client.TLSConfig(*tlsCA, "", "")
		if err != nil {
			fmt.Fprintln(os.Stderr, "--tls-ca:", err)
			return 2
		}
		tlsCfg = cfg
	}
	dial := client.DialOptions(token, tlsCfg)
	if tlsCfg == nil && *insecureGRPC {
		dial = client.InsecureDialOptions(token)
	}
	kinds := worker.NewKinds()
	worker.Register(kinds, countWords)
	w, err := worker.NewWorker(worker.Config{
		ID:            *id,
		Size:          worker.Size(*size),
		Servers:       strings.Split(*servers, ","),
		Dial:          dial,
		Runner:        kinds,
		MaxConcurrent: *concurrency,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Println("stopping: finishing the running jobs")
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-sigs
			fmt.Println("stopping now: cancelling the running jobs")
			cancel()
		}()
		w.Stop(ctx)
	}()
	fmt.Printf("worker %s (%s) runs %s from %s\n", strings.Join(w.IDs(), ", "), strings.ToLower(*size), strings.Join(kinds.Kinds(), ", "), *servers)
	if err := w.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err) // a refusal for good (worker.ErrRefused): a bad token, an unknown pool
		return 1
	}
	fmt.Println("stopped")
	return 0
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

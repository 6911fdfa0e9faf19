// Command go-worker is an example worker written in Go (package worker):
// it runs every job it is given as a call of a Go function in its own
// process, with no child process, and reports the function's answer as
// the job's output.
//
//	go-worker --server 10.0.0.1:7400,10.0.0.2:7400 --token-file worker.token --id words-1
//
// Its jobs count the words of a text: the payload is {"text": "..."} and
// the output {"words": N, "lines": N}. A payload that is not such JSON
// can never run: the job fails at once, with no retry. A cancelled job's
// function sees its context end. The first SIGINT or SIGTERM drains the
// worker (it finishes the job it runs, takes no other, and exits 0); a
// second stops it at once.
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

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/worker"
)

func main() {
	os.Exit(run())
}

// countWords is the work: one job, one call.
func countWords(ctx context.Context, job *pb.Assign) (worker.FuncResult, error) {
	var in struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(job.Payload, &in); err != nil || in.Text == nil {
		return worker.FuncResult{}, fmt.Errorf(`payload: want {"text": "..."} (%w)`, worker.ErrUnrunnable)
	}
	var out struct {
		Words int `json:"words"`
		Lines int `json:"lines"`
	}
	sc := bufio.NewScanner(strings.NewReader(*in.Text))
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return worker.FuncResult{}, err // cancelled: stop here
		}
		out.Lines++
		out.Words += len(strings.Fields(sc.Text()))
	}
	b, _ := json.Marshal(out)
	fmt.Printf("job %d of %s: %d words\n", job.Job, job.Tenant, out.Words)
	return worker.FuncResult{Output: string(b)}, nil
}

func run() int {
	servers := flag.String("server", env("BARISTA_ADDR", "127.0.0.1:7400"), "gRPC `ADDR[,ADDR...]` of any nodes")
	tokenFile := flag.String("token-file", "", "read the worker token from `FILE` (otherwise $BARISTA_TOKEN)")
	tlsCA := flag.String("tls-ca", os.Getenv("BARISTA_TLS_CA"), "verify the nodes with this CA `FILE` (enables TLS)")
	id := flag.String("id", "go-worker-1", "worker `ID` (a worker token's worker_id binding must cover it)")
	size := flag.String("size", "sm", "largest job size it runs: sm, md or lg")
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
	sz, ok := pb.Size_value[strings.ToUpper(*size)]
	if !ok || sz == 0 {
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
	a, err := worker.New(worker.Config{
		ID:      *id,
		Size:    pb.Size(sz),
		Servers: strings.Split(*servers, ","),
		Dial:    client.DialOptions(token, tlsCfg),
		Runner:  worker.Func(countWords),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Println("draining: finishing the current job")
		a.Drain()
		<-sigs
		stop()
	}()
	fmt.Printf("worker %s (%s) runs jobs from %s\n", *id, strings.ToLower(*size), *servers)
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
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

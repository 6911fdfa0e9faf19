package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/baristahq/barista/client"
	pb "github.com/baristahq/barista/proto"
	"github.com/baristahq/barista/worker"
)

// A Go function as a worker: it reads a JSON payload, and its answer is
// the job's output. A payload it cannot read fails the job for good.
func ExampleFunc() {
	upper := worker.Func(func(ctx context.Context, job *pb.Assign) (worker.FuncResult, error) {
		var req struct{ Text string }
		if err := json.Unmarshal(job.Payload, &req); err != nil {
			return worker.FuncResult{}, fmt.Errorf("payload: %w (%w)", err, worker.ErrUnrunnable)
		}
		if err := ctx.Err(); err != nil {
			return worker.FuncResult{}, err // cancelled
		}
		return worker.FuncResult{Output: strings.ToUpper(req.Text)}, nil
	})
	a, err := worker.New(worker.Config{
		ID:      "upper-1",
		Size:    worker.SizeSM,
		Servers: []string{"127.0.0.1:7400"},
		Dial:    client.DialOptions("", nil),
		Runner:  upper,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

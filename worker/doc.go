// Package worker is what runs on a worker machine: the agent that holds
// one gRPC stream to the cluster's leader and runs one job at a time, and
// the runners that run the jobs. `barista worker` is its command-line
// front (a ProcessRunner: every job a child process, see package runner);
// a Go program can be a worker of its own with a Func.
//
// The agent runs one job at a time, heartbeats its lease with the job's
// measured CPU, stops the job on Cancel (SIGTERM, then SIGKILL after the
// grace), kills it at once on Reject or when it has lost contact for
// self_kill_after, and follows the leader across failovers. Contact is the
// send time of the last heartbeat the leader acknowledged (or the last
// Welcome): a worker partitioned from the cluster kills its job before the
// job's lease can expire and the job run elsewhere.
//
// # A worker in Go
//
// Kinds routes jobs to Go functions by their kind (job_type), decoding
// each job's JSON payload into the function's typed arguments, and
// NewWorker runs MaxConcurrent of them at once, with a graceful Stop
// (docs/sdk-go.md):
//
//	kinds := worker.NewKinds()
//	worker.Register(kinds, func(ctx context.Context, j *worker.Job[Resize]) error {
//		if busy(j.Args.Image) {
//			return worker.Snooze(30 * time.Second) // again later, no failure counted
//		}
//		return resize(ctx, j.Args)
//	})
//	w, err := worker.NewWorker(worker.Config{ID: "thumbs", MaxConcurrent: 4, Size: worker.SizeMD,
//		Servers: servers, Dial: client.DialOptions(token, tlsCfg), Runner: kinds})
//	go w.Run(ctx)
//	...
//	err = w.Stop(shutdownCtx) // finish the running jobs, take no new one
//
// A function ends its job for good with Discard(err) (failed, no retry:
// no run can succeed) or Cancel(err) (cancelled, as River's JobCancel:
// the registry asks the cluster to cancel the job through the client
// given to Kinds.CancelWith; without one, as Discard). Config.Observer
// hears of every run's moments (an Observation: what happened, the job,
// its tenant and kind), and every line a slot logs names it (slot=ID-N).
//
// Below it, a Func runs each job as a call of a Go function in this process. It
// gets the job's payload and a context cancelled when the job is
// cancelled, and returns the job's result (kept as its output) or an
// error (the run failed; one wrapping ErrUnrunnable fails the job for
// good):
//
//	resize := worker.Func(func(ctx context.Context, job *pb.Assign) (worker.FuncResult, error) {
//		var req struct{ Image string }
//		if err := json.Unmarshal(job.Payload, &req); err != nil {
//			return worker.FuncResult{}, fmt.Errorf("payload: %w (%w)", err, worker.ErrUnrunnable)
//		}
//		url, err := thumbnail(ctx, req.Image) // stops when ctx is cancelled
//		return worker.FuncResult{Output: url}, err
//	})
//	a, err := worker.NewAgent(worker.Config{
//		ID:      "thumbs-1", // a worker token's binding must cover it
//		Size:    worker.SizeMD,
//		Servers: []string{"10.0.0.1:7400", "10.0.0.2:7400", "10.0.0.3:7400"},
//		Dial:    client.DialOptions(os.Getenv("BARISTA_WORKER_TOKEN"), tlsCfg),
//		Runner:  resize,
//	})
//	if err != nil { ... }
//	err = a.Run(ctx) // until ctx ends; Drain first to finish the current job
//	// err matches worker.ErrRefused when the cluster refuses the worker
//	// for good (an unknown pool, a token it does not take).
//
// The agent logs through log/slog: slog.Default() unless Config.Logger
// names another.
//
// The run's CPU, which the tenant is billed, is the FuncResult's CPU when
// the function reports one, otherwise the wall time the call took. The
// function must return soon after its context ends: a goroutine cannot be
// killed, and the worker holds the job until it returns.
//
// The package imports no server code of barista: only its protocol
// (package proto), the Go client (package client, whose JobArgs it
// shares) and the rules a worker shares with the cluster.
package worker

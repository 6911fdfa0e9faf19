//go:build !unix

package worker

import "os"

// privateDir makes dir with mode if it is missing. Jobs only run on Linux.
func privateDir(dir string, mode os.FileMode) error { return os.MkdirAll(dir, mode) }

// reachable reports nothing: jobs only run on Linux.
func reachable(string, *JobUser) error { return nil }

// Package netns holds what the multi-process tests that make network
// namespaces share (test/chaos's partitions, test/noisy's attacker): the
// ip command, and the removal of what a dead run left behind.
package netns

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// IP runs the ip command (iproute2) with args.
func IP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Batch runs ip commands in namespace ns in one process (ip -batch).
func Batch(ns string, lines []string) error {
	cmd := exec.Command("ip", "-n", ns, "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip -batch: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// RemoveStale deletes the namespaces named prefix+PID+sep+... and the
// links named prefix+PID of runs whose process PID is gone.
func RemoveStale(prefix, sep string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, sep)
		pid, err := strconv.Atoi(pidText)
		if err != nil {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue
		}
		IP("netns", "del", name)
		IP("link", "del", prefix+pidText)
	}
}

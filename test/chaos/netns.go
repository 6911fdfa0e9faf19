package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"github.com/baristahq/barista/test/netns"
)

// Net puts every member (a server or a worker) in its own network
// namespace, joined by veth pairs to a bridge in the test's namespace,
// so that links can be cut one way or both: a blackhole route in the
// sender's namespace drops what it sends to one address. The test process
// (the clients) is the member "host". Every namespace, link and route is
// deleted by Close, and namespaces left by a dead run are removed by the
// next.
type Net struct {
	tag    string // "bc" + the creating PID
	subnet string // "10.213.N"
	mu     sync.Mutex
	ips    map[string]string // member -> address
	ns     map[string]string // member -> namespace ("" = host)
	next   int
	cuts   map[[2]string]bool
}

// NetAvailable says why partitions cannot run here ("" when they can).
func NetAvailable() string {
	if os.Geteuid() != 0 {
		return "network partitions need root (network namespaces); run the chaos tests as root to include them"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "network partitions need iproute2 (the ip command): apt-get install iproute2"
	}
	return ""
}

func ip(args ...string) error { return netns.IP(args...) }

// removeStale deletes namespaces and bridges of runs whose process is gone.
func removeStale() { netns.RemoveStale("bc", "m") }

// NewNet creates the bridge of this run.
func NewNet() (*Net, error) {
	if why := NetAvailable(); why != "" {
		return nil, errors.New(why)
	}
	removeStale()
	pid := os.Getpid()
	n := &Net{tag: fmt.Sprintf("bc%d", pid), subnet: fmt.Sprintf("10.213.%d", pid%250+1),
		ips: map[string]string{"host": ""}, ns: map[string]string{"host": ""}, next: 10, cuts: map[[2]string]bool{}}
	n.ips["host"] = n.subnet + ".1"
	if err := ip("link", "add", n.tag, "type", "bridge"); err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"addr", "add", n.ips["host"] + "/24", "dev", n.tag}, {"link", "set", n.tag, "up"}} {
		if err := ip(args...); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// Add creates member's namespace and returns its address.
func (n *Net) Add(member string) (string, error) {
	n.mu.Lock()
	k := n.next
	n.next++
	n.mu.Unlock()
	ns := fmt.Sprintf("%sm%d", n.tag, k)
	host, peer := fmt.Sprintf("v%dh%d", os.Getpid(), k), fmt.Sprintf("v%dp%d", os.Getpid(), k)
	addr := fmt.Sprintf("%s.%d", n.subnet, k)
	steps := [][]string{
		{"netns", "add", ns},
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", ns},
		{"link", "set", host, "master", n.tag},
		{"link", "set", host, "up"},
		{"-n", ns, "addr", "add", addr + "/24", "dev", peer},
		{"-n", ns, "link", "set", peer, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return "", err
		}
	}
	n.mu.Lock()
	n.ips[member], n.ns[member] = addr, ns
	n.mu.Unlock()
	return addr, nil
}

// Exec is the command prefix that runs a program in member's namespace.
func (n *Net) Exec(member string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return []string{"ip", "netns", "exec", n.ns[member]}
}

// IP returns member's address.
func (n *Net) IP(member string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ips[member]
}

func (n *Net) route(op, from, to string) error {
	n.mu.Lock()
	ns, addr := n.ns[from], n.ips[to]
	n.mu.Unlock()
	args := []string{"route", op, "blackhole", addr + "/32"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	return ip(args...)
}

// Cut drops what from sends to to (one way).
func (n *Net) Cut(from, to string) error {
	n.mu.Lock()
	done := n.cuts[[2]string{from, to}]
	n.mu.Unlock()
	if done {
		return nil
	}
	if err := n.route("add", from, to); err != nil {
		return err
	}
	n.mu.Lock()
	n.cuts[[2]string{from, to}] = true
	n.mu.Unlock()
	return nil
}

// Heal restores every cut link.
func (n *Net) Heal() error {
	n.mu.Lock()
	var cuts [][2]string
	for c := range n.cuts {
		cuts = append(cuts, c)
	}
	n.cuts = map[[2]string]bool{}
	n.mu.Unlock()
	var first error
	for _, c := range cuts {
		if err := n.route("del", c[0], c[1]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Members lists the members other than the host.
func (n *Net) Members() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for m := range n.ns {
		if m != "host" {
			out = append(out, m)
		}
	}
	return out
}

// Close deletes every namespace and the bridge (the veth pairs go with
// their namespaces).
func (n *Net) Close() {
	n.Heal()
	n.mu.Lock()
	defer n.mu.Unlock()
	for m, ns := range n.ns {
		if ns != "" {
			ip("netns", "del", ns)
		}
		delete(n.ns, m)
	}
	ip("link", "del", n.tag)
}

package noisy

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/baristahq/barista/test/netns"
)

// The test's network: a bridge in the test's namespace, and hosts in
// network namespaces of their own joined to it by veth pairs — the three
// servers, each on an IPv4 and an IPv6 address of its own, and the
// attacker, which holds many addresses: an IPv4 address in each of
// attackNets4 /24s, one in each of attackNets6 /48s, and one in each of
// the 256 /64s of one /48 (a site's prefix: one network). The test
// process (tenant B and its worker) speaks from the bridge's own
// addresses. Every namespace and the bridge are deleted by close, and
// those of a dead run by the next.
type testNet struct {
	tag   string   // "bn" + the creating PID
	hosts []string // namespaces made
}

const (
	// The bridge's addresses: 10.215.0.1/16 and fd15::1/32.
	net4, net6  = "10.215", "fd15"
	attackNets4 = 100 // /24s 10.215.10.0 .. 10.215.109.0
	attackNets6 = 64  // /48s fd15:100:: .. fd15:13f::
	attackSite  = 256 // /64s of fd15:0:1::/48
)

func netAvailable() string {
	if os.Geteuid() != 0 {
		return "the noisy-neighbour test needs root (network namespaces)"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "the noisy-neighbour test needs iproute2 (the ip command): apt-get install iproute2"
	}
	return ""
}

func ipCmd(args ...string) error { return netns.IP(args...) }

func newTestNet() (*testNet, error) {
	if why := netAvailable(); why != "" {
		return nil, errors.New(why)
	}
	netns.RemoveStale("bn", "h")
	n := &testNet{tag: fmt.Sprintf("bn%d", os.Getpid())}
	steps := [][]string{
		{"link", "add", n.tag, "type", "bridge"},
		{"addr", "add", net4 + ".0.1/16", "dev", n.tag},
		{"addr", "add", net6 + "::1/32", "dev", n.tag, "nodad"},
		{"link", "set", n.tag, "up"},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			n.close()
			return nil, err
		}
	}
	return n, nil
}

// addHost makes a namespace joined to the bridge with the addresses
// given (IPv4 in the /16, IPv6 in the /32), and returns its name.
func (n *testNet) addHost(name string, addrs []string) (string, error) {
	k := len(n.hosts)
	ns := fmt.Sprintf("%sh%d", n.tag, k)
	host, peer := fmt.Sprintf("v%dn%d", os.Getpid(), k), fmt.Sprintf("v%dq%d", os.Getpid(), k)
	for _, s := range [][]string{
		{"netns", "add", ns},
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", ns},
		{"link", "set", host, "master", n.tag},
		{"link", "set", host, "up"},
		{"-n", ns, "link", "set", peer, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if err := ipCmd(s...); err != nil {
			return "", fmt.Errorf("host %s: %w", name, err)
		}
	}
	n.hosts = append(n.hosts, ns)
	var lines []string
	for _, a := range addrs {
		if strings.Contains(a, ":") {
			lines = append(lines, fmt.Sprintf("addr add %s/32 dev %s nodad", a, peer))
		} else {
			lines = append(lines, fmt.Sprintf("addr add %s/16 dev %s", a, peer))
		}
	}
	if err := netns.Batch(ns, lines); err != nil {
		return "", fmt.Errorf("host %s: %w", name, err)
	}
	return ns, nil
}

// exec is the command prefix that runs a program in namespace ns.
func (n *testNet) exec(ns string) []string { return []string{"ip", "netns", "exec", ns} }

func (n *testNet) close() {
	for _, ns := range n.hosts {
		ipCmd("netns", "del", ns)
	}
	ipCmd("link", "del", n.tag)
}

// serverAddrs are server i's (1..3) addresses.
func serverAddrs(i int) (v4, v6 string) {
	return fmt.Sprintf("%s.0.%d", net4, 10+i), fmt.Sprintf("%s::%d", net6, 10+i)
}

// attackAddrs are the attacker's addresses, by kind: an IPv4 address in
// each of attackNets4 /24s ("v4"), an IPv6 address in each of
// attackNets6 /48s ("v6"), one in each /64 of one /48 ("site").
func attackAddrs() map[string][]string {
	out := map[string][]string{}
	for k := range attackNets4 {
		out["v4"] = append(out["v4"], fmt.Sprintf("%s.%d.2", net4, 10+k))
	}
	for k := range attackNets6 {
		out["v6"] = append(out["v6"], fmt.Sprintf("%s:%x::2", net6, 0x100+k))
	}
	for k := range attackSite {
		out["site"] = append(out["site"], fmt.Sprintf("%s:0:1:%x00::2", net6, k))
	}
	return out
}

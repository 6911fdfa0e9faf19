package connlimit

import (
	"net/netip"
	"time"

	"github.com/baristahq/barista/internal/ratelimit"
	"github.com/baristahq/barista/sfq"
)

// The accept rate. A connection costs the server a TLS handshake before
// it can make a call, and the bounds of connections held do not bound
// how fast a caller without a token makes new ones (each one it is
// refused or loses its place, it opens again). So new connections from
// a network that holds no connection which has made a call with a token
// are admitted at most Config.AcceptRate a second in all, and a
// sixteenth of that (at least 4) from one network, each with a burst of
// one second's worth (ratelimit's GCRA, each network a key, and one key
// for them all); past it they are closed at accept, before any
// handshake. A network that holds a connection with a token's call (a
// client, a worker fleet, a NAT in front of them) is not bounded so, nor
// is a loopback address (a local process is no flood from a network).

// acceptAllKey is the key of every network together (no network's
// key is spelled so).
const acceptAllKey = "all"

// perNetworkRate is the accept rate of one network: a sixteenth of the
// total, at least 4.
func perNetworkRate(total int) int { return max(total/16, 4) }

// perSecond is n a second, in bursts of n.
func perSecond(n int) sfq.RateLimit {
	return sfq.RateLimit{N: uint32(n), PeriodMs: 1000, Burst: uint32(n)}
}

// acceptRefused reports whether a new connection from addr (of network
// n) is over the accept rate, and counts it in when it is not (under
// l.mu). The network's own rate is taken first: a connection its network
// may make but the total refuses costs that network its place in the
// second, never the others theirs.
func (l *Limiter) acceptRefused(n netip.Prefix, addr netip.Addr) bool {
	if l.cfg.AcceptRate <= 0 || l.authedByNet[n] > 0 || l.exempt(addr) {
		return false
	}
	if ok, _ := l.accepts.Take(n.String(), perSecond(perNetworkRate(l.cfg.AcceptRate)), 1); ok == 0 {
		return true
	}
	ok, _ := l.accepts.Take(acceptAllKey, perSecond(l.cfg.AcceptRate), 1)
	return ok == 0
}

// newAcceptRate is the accept rate's limiter, on l's clock.
func (l *Limiter) newAcceptRate() *ratelimit.Limiter {
	return ratelimit.New(func() time.Time { return l.now() }, nil)
}

package connlimit

import (
	"net/netip"
	"time"
)

// The accept rate. A connection costs the server a TLS handshake before
// it can make a call, and the bounds of connections held do not bound
// how fast a caller without a token makes new ones (each one it is
// refused or loses its place, it opens again). So new connections from
// a network that holds no connection which has made a call with a token
// are admitted at most Config.AcceptRate a second in all, and a
// sixteenth of that (at least 4) from one network, each with a burst of
// one second's worth; past it they are closed at accept, before any
// handshake. A network that holds a connection with a token's call (a
// client, a worker fleet, a NAT in front of them) is not bounded so, nor
// is a loopback address (a local process is no flood from a network).

// maxRateNetworks bounds the networks whose accept rate is tracked at
// once: past it, idle ones are forgotten, and a new network is refused
// while every one of them is busy.
const maxRateNetworks = 4096

// bucket is a token bucket: tokens as of at.
type bucket struct {
	tokens float64
	at     time.Time
}

// fill adds what rate per second has earned since b.at, up to burst.
func (b *bucket) fill(now time.Time, rate float64) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(rate, b.tokens+d.Seconds()*rate)
		b.at = now
	}
}

// perNetworkRate is the accept rate of one network: a sixteenth of the
// total, at least 4.
func perNetworkRate(total int) float64 { return float64(max(total/16, 4)) }

// acceptRefused reports whether a new connection from addr (of network
// n) is over the accept rate, and takes its tokens when it is not
// (under l.mu).
func (l *Limiter) acceptRefused(n netip.Prefix, addr netip.Addr) bool {
	if l.cfg.AcceptRate <= 0 || l.authedByNet[n] > 0 || l.exempt(addr) {
		return false
	}
	now := l.now()
	total, per := float64(l.cfg.AcceptRate), perNetworkRate(l.cfg.AcceptRate)
	b := l.acceptByNet[n]
	if b == nil {
		if len(l.acceptByNet) >= maxRateNetworks {
			l.forgetIdleNetworks(now, per)
			if len(l.acceptByNet) >= maxRateNetworks {
				return true
			}
		}
		b = &bucket{tokens: per, at: now}
		l.acceptByNet[n] = b
	}
	b.fill(now, per)
	l.acceptAll.fill(now, total)
	if b.tokens < 1 || l.acceptAll.tokens < 1 {
		return true
	}
	b.tokens--
	l.acceptAll.tokens--
	return false
}

// forgetIdleNetworks drops the buckets that are full again: their
// networks have made no new connection for a second or more.
func (l *Limiter) forgetIdleNetworks(now time.Time, per float64) {
	for n, b := range l.acceptByNet {
		if b.fill(now, per); b.tokens >= per {
			delete(l.acceptByNet, n)
		}
	}
}

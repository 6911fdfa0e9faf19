package web

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/baristahq/barista/internal/auth"
	"github.com/baristahq/barista/internal/share"
	"github.com/baristahq/barista/internal/wire"
)

// The HTTP/JSON API's capacity is shared per identity (docs/security.md,
// "Shared at the edge"). Every /v1/ call travels to the node's gRPC
// server over the gateway's one connection, whose streams
// (limits.streams_per_connection) every caller shares: before a call
// takes one, it takes a place among its caller's requests in progress
// (limits.http_requests_per_identity) and the node's
// (limits.http_requests), and a read naming a log index this node has
// not applied yet (X-Barista-Min-Index, held until it has) a place among
// its caller's held reads (limits.http_held_reads_per_identity). Over a
// bound the call is answered at once — 429 for the caller's own, 503 for
// the node's, with Retry-After — so that a caller at its bounds never
// makes another wait for a stream. Watches (GET /v1/events) have bounds
// of their own (limits.watch_streams_per_identity, limits.watch_streams),
// which keep them within the streams the others leave.

// eventsPath is the API's one stream, the watch.
const eventsPath = "/v1/events"

// apiShares takes the caller's places before the gateway.
func (s *Server) apiShares(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == eventsPath {
			next.ServeHTTP(w, r)
			return
		}
		key := ""
		if id, err := s.auth.Authenticate(r.Header.Values("Authorization")); err == nil {
			key = id.Key()
		}
		release, which := s.apiCalls.Take(key)
		if which != share.None {
			s.refuseShare(w, r, which,
				fmt.Sprintf("this caller has %d requests in progress on this node, the most it may (limits.http_requests_per_identity); retry once some have ended", s.apiCalls.PerIdentity()),
				fmt.Sprintf("this node serves %d HTTP/JSON requests, the most it may (limits.http_requests); retry, or ask another node", s.apiCalls.Total()))
			return
		}
		defer release()
		if index := minIndexHeader(r); index > 0 {
			if _, applied := s.node.FSM.Clock(); applied < index {
				release, which := s.heldReads.Take(key)
				if which != share.None {
					s.refuseShare(w, r, which,
						fmt.Sprintf("this caller has %d reads waiting for this node to apply its last write, the most it may (limits.http_held_reads_per_identity); this one waits for index %d: retry, or read from the leader",
							s.heldReads.PerIdentity(), index), "")
					return
				}
				defer release()
			}
		}
		next.ServeHTTP(w, r)
	})
}

// minIndexHeader is the log index a request asks its read to have
// applied (0: none, or not a number: the gRPC server reads it the same
// way).
func minIndexHeader(r *http.Request) uint64 {
	index, err := strconv.ParseUint(r.Header.Get(wire.HeaderMinIndex), 10, 64)
	if err != nil {
		return 0
	}
	return index
}

// refuseShare answers a request over a bound of its share, unread: 429
// for the caller's own bound, 503 for the node's, with Retry-After (the
// share counts the refusal: barista_http_requests_in_progress_refused_total,
// barista_http_held_reads_refused_total).
func (s *Server) refuseShare(w http.ResponseWriter, r *http.Request, which share.Which, mine, node string) {
	w.Header().Set("Retry-After", "1")
	closeUnread(w, r)
	if which == share.PerIdentity {
		writeHTTPError(w, newHTTPErr(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", mine))
		return
	}
	writeHTTPError(w, newHTTPErr(http.StatusServiceUnavailable, "UNAVAILABLE", node))
}

// connAuthenticated marks the connection of a request with a credential
// as one with a token's call (internal/connlimit): it leaves the places
// of the connections without one, and a client token's counts for its
// tenant (limits.connections_per_identity). A tenant that holds its
// bound of connections already is answered 429, and the connection
// closed. It reports whether the request may go on.
func (s *Server) connAuthenticated(w http.ResponseWriter, r *http.Request, id auth.Identity) bool {
	conns := s.srv.Conns()
	if conns == nil {
		return true
	}
	key := ""
	if id.Role == auth.RoleClient {
		key = id.Key()
	}
	if conns.Authenticated(r.Context(), key) {
		return true
	}
	w.Header().Set("Connection", "close")
	writeHTTPError(w, newHTTPErr(http.StatusTooManyRequests, "RESOURCE_EXHAUSTED",
		"this token holds its bound of connections to this node (limits.connections_per_identity); reuse them"))
	return false
}

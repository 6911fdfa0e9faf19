// Command hookrecv is the webhook receiver of the multi-process tests: a
// real HTTP server that verifies every request's signature (on its own,
// as a customer's receiver would, without barista's code), refuses
// requests older than five minutes, and answers as its mode says: "ok"
// (200), "500", or "sleep" (answers only after --sleep, past the
// servers' request timeout). It counts what it saw:
//
//	POST /hook                 the endpoint
//	POST /control/mode?m=MODE  ok, 500 or sleep
//	POST /control/secret       the body is the secret to verify with
//	GET  /stats                the counts, as JSON
//
// An event counts as delivered only from a request answered 200 that the
// sender did not give up on. A delivered event seen before is a
// duplicate; one not seen before but below the highest seq seen is out of
// order.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

type event struct {
	Seq     uint64 `json:"seq"`
	JobID   uint64 `json:"job_id"`
	Tenant  string `json:"tenant"`
	Kind    string `json:"kind"`
	Attempt uint32 `json:"attempt"`
	AtMs    int64  `json:"at_ms"`
	FromSeq uint64 `json:"from_seq,omitempty"`
	ToSeq   uint64 `json:"to_seq,omitempty"`
}

// Stats are the receiver's counts.
type Stats struct {
	Requests      int            `json:"requests"`
	ByStatus      map[string]int `json:"by_status"`
	GaveUp        int            `json:"gave_up"` // the sender ended the request before the answer
	BadSignatures int            `json:"bad_signatures"`
	Stale         int            `json:"stale"`
	Events        int            `json:"events"` // delivered, repeats included
	Duplicates    int            `json:"duplicates"`
	OutOfOrder    int            `json:"out_of_order"`
	Gaps          int            `json:"gaps"`
	Seqs          []uint64       `json:"seqs"` // delivered, in the order first seen
	Tenants       []string       `json:"tenants"`
}

type receiver struct {
	mu     sync.Mutex
	mode   string
	secret string
	sleep  time.Duration
	st     Stats
	seen   map[uint64]bool
	max    uint64
	tenant map[string]bool
}

// verify checks "t=MS,v1=HEX[,v1=HEX...]": a v1 equal to
// HMAC_SHA256(secret, t + "." + body), t within five minutes.
func verify(header string, body []byte, secret string, now time.Time) (ok, fresh bool) {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false, false
	}
	age := now.Sub(time.UnixMilli(ms))
	fresh = age <= 5*time.Minute && age >= -5*time.Minute
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := hex.EncodeToString(mac.Sum(nil))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true, fresh
		}
	}
	return false, fresh
}

func (r *receiver) hook(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 16<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.st.Requests++
	mode, secret, sleep := r.mode, r.secret, r.sleep
	ok, fresh := verify(req.Header.Get("Barista-Signature"), body, secret, time.Now())
	if !ok {
		r.st.BadSignatures++
	}
	if !fresh {
		r.st.Stale++
	}
	r.mu.Unlock()
	if !ok || !fresh {
		r.answer(w, http.StatusUnauthorized)
		return
	}
	switch mode {
	case "500":
		r.answer(w, http.StatusInternalServerError)
		return
	case "sleep":
		select {
		case <-time.After(sleep):
		case <-req.Context().Done():
		}
		if req.Context().Err() != nil {
			r.mu.Lock()
			r.st.GaveUp++
			r.mu.Unlock()
			return
		}
	}
	var p struct {
		Events []event `json:"events"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		r.answer(w, http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, e := range p.Events {
		r.st.Events++
		if !r.tenant[e.Tenant] {
			r.tenant[e.Tenant] = true
			r.st.Tenants = append(r.st.Tenants, e.Tenant)
		}
		if e.Kind == "gap" {
			r.st.Gaps++
		}
		switch {
		case r.seen[e.Seq]:
			r.st.Duplicates++
		case e.Seq < r.max:
			r.st.OutOfOrder++
			fallthrough
		default:
			r.seen[e.Seq] = true
			r.st.Seqs = append(r.st.Seqs, e.Seq)
			r.max = max(r.max, e.Seq)
		}
	}
	r.mu.Unlock()
	r.answer(w, http.StatusOK)
}

func (r *receiver) answer(w http.ResponseWriter, code int) {
	r.mu.Lock()
	r.st.ByStatus[strconv.Itoa(code)]++
	r.mu.Unlock()
	w.WriteHeader(code)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen `HOST:PORT`")
	sleep := flag.Duration("sleep", 5*time.Second, "how long the sleep mode waits before it answers")
	flag.Parse()
	r := &receiver{mode: "ok", sleep: *sleep, seen: map[uint64]bool{}, tenant: map[string]bool{}, st: Stats{ByStatus: map[string]int{}}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", r.hook)
	mux.HandleFunc("POST /control/mode", func(w http.ResponseWriter, req *http.Request) {
		m := req.URL.Query().Get("m")
		if m != "ok" && m != "500" && m != "sleep" {
			http.Error(w, "mode: ok, 500 or sleep", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.mode = m
		r.mu.Unlock()
	})
	mux.HandleFunc("POST /control/secret", func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.secret = strings.TrimSpace(string(b))
		r.mu.Unlock()
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		b, _ := json.Marshal(r.st)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "hookrecv listening on %s\n", *addr)
	log.Fatal(srv.ListenAndServe())
}

package web

import (
	"encoding/base64"
	"fmt"
	"testing"
)

// TestPayloadTooLarge: a payload over the cluster's max_payload_bytes is
// refused as the permanent refusal it is — HTTP 413 (it was 429, which
// asks for a retry), INVALID_ARGUMENT naming the size and the limit — and
// one at the limit is taken.
func TestPayloadTooLarge(t *testing.T) {
	_, ts := gatewayNode(t)
	body := func(n int) string {
		return fmt.Sprintf(`{"size":"SM","est_cost_ms":"7","payload":%q}`, base64.StdEncoding.EncodeToString(make([]byte, n)))
	}
	r := gwDo(t, ts, "POST", "/v1/jobs", gwAcme, body(1<<20+1))
	want := `{"code":"INVALID_ARGUMENT","message":"payload: 1048577 bytes, over the cluster's limit of 1048576 (max_payload_bytes)","reason":"TOO_LARGE","field":"payload","retry_after_ms":0}`
	if r.status != 413 || canonical(t, r.body) != canonical(t, want) {
		t.Errorf("a payload over the limit: %d %s\nwant 413 %s", r.status, r.body, want)
	}
	if r := gwDo(t, ts, "POST", "/v1/jobs", gwAcme, body(1<<20)); r.status != 200 {
		t.Errorf("a payload at the limit: %d %s", r.status, r.body)
	}
}

package rpc

import "testing"

func TestSelfDialAddr(t *testing.T) {
	for bind, want := range map[string]string{
		"127.0.0.1:7400": "127.0.0.1:7400", "0.0.0.0:7400": "127.0.0.1:7400", ":7400": "127.0.0.1:7400",
		"[::]:7400": "[::1]:7400", "10.1.2.3:7400": "10.1.2.3:7400", "n1.barista:7400": "n1.barista:7400",
	} {
		if got, err := selfDialAddr(bind); err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", bind, got, err, want)
		}
	}
	if _, err := selfDialAddr("nonsense"); err == nil || err.Error() != `gRPC address "nonsense": address nonsense: missing port in address` {
		t.Errorf("nonsense: %v", err)
	}
}

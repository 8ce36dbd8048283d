package hoppertype

import (
	"testing"
	"time"
)

func TestRetryPolicyStoredForm(t *testing.T) {
	p := RetryPolicy{Attempts: 4, Backoff: "linear", Base: time.Second, Factor: 1.5, Max: time.Minute, Jitter: 0.25}
	for range 2 { // the second round reads both caches
		s, err := EncodeRetryPolicy(p)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"attempts":4,"backoff":"linear","base":1000000000,"factor":1.5,"max":60000000000,"jitter":0.25}`
		if s != want {
			t.Fatalf("stored form %s, want %s", s, want)
		}
		got, err := DecodeRetryPolicy(s)
		if err != nil || got != p {
			t.Fatalf("decode(string) = %+v, %v; want %+v", got, err, p)
		}
		got, err = DecodeRetryPolicy([]byte(s))
		if err != nil || got != p {
			t.Fatalf("decode([]byte) = %+v, %v; want %+v", got, err, p)
		}
	}
	if _, err := DecodeRetryPolicy(`{"attempts":`); err == nil {
		t.Fatal("a truncated policy decoded")
	}
	// A buffer reused by the caller after decoding must not change what
	// the cache holds.
	buf := []byte(`{"attempts":9,"backoff":"constant","base":5,"factor":1,"max":5,"jitter":0}`)
	first, err := DecodeRetryPolicy(buf)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, `{"attempts":1`)
	again, err := DecodeRetryPolicy(`{"attempts":9,"backoff":"constant","base":5,"factor":1,"max":5,"jitter":0}`)
	if err != nil || again != first {
		t.Fatalf("cached policy changed with the caller's buffer: %+v, %v", again, err)
	}
}

func TestRetryPolicyCacheIsBounded(t *testing.T) {
	for i := range retryCacheMax + 10 {
		p := RetryPolicy{Attempts: 1000 + i, Backoff: "constant"}
		s, err := EncodeRetryPolicy(p)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := DecodeRetryPolicy(s); err != nil || got != p {
			t.Fatalf("policy %d: %+v, %v", i, got, err)
		}
	}
	retryCache.mu.RLock()
	defer retryCache.mu.RUnlock()
	if len(retryCache.enc) > retryCacheMax || len(retryCache.dec) > retryCacheMax {
		t.Fatalf("cache grew past %d: %d encodings, %d decodings", retryCacheMax, len(retryCache.enc), len(retryCache.dec))
	}
}

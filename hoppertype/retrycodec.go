package hoppertype

import (
	"encoding/json"
	"sync"
)

// Retry policies repeat across jobs (one per job type, usually), so the
// stored forms are cached both ways, up to retryCacheMax entries each: a
// claim or a finish of many jobs decodes each distinct policy once.
const retryCacheMax = 1024

var retryCache struct {
	mu  sync.RWMutex
	enc map[RetryPolicy]string
	dec map[string]RetryPolicy
}

// EncodeRetryPolicy returns the stored form (JSON) of a retry policy.
func EncodeRetryPolicy(p RetryPolicy) (string, error) {
	retryCache.mu.RLock()
	s, ok := retryCache.enc[p]
	retryCache.mu.RUnlock()
	if ok {
		return s, nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	s = string(b)
	retryCache.mu.Lock()
	if retryCache.enc == nil {
		retryCache.enc = make(map[RetryPolicy]string)
	}
	if len(retryCache.enc) < retryCacheMax {
		retryCache.enc[p] = s
	}
	retryCache.mu.Unlock()
	return s, nil
}

// DecodeRetryPolicy parses the stored form of a retry policy.
func DecodeRetryPolicy[T ~string | ~[]byte](stored T) (RetryPolicy, error) {
	retryCache.mu.RLock()
	p, ok := retryCache.dec[string(stored)]
	retryCache.mu.RUnlock()
	if ok {
		return p, nil
	}
	if err := json.Unmarshal([]byte(stored), &p); err != nil {
		return RetryPolicy{}, err
	}
	retryCache.mu.Lock()
	if retryCache.dec == nil {
		retryCache.dec = make(map[string]RetryPolicy)
	}
	if len(retryCache.dec) < retryCacheMax {
		retryCache.dec[string(stored)] = p
	}
	retryCache.mu.Unlock()
	return p, nil
}

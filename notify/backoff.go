package notify

import "time"

const (
	backoffBase = time.Second
	backoffCap  = 5 * time.Minute
)

// backoff is the wait before try+1 after try failed: "full jitter", a
// uniform draw from [0, min(cap, base·2^(try-1))]. Full jitter spreads the
// retries of many lanes that failed together (a network blip) instead of
// sending them back in lockstep. randN(n) returns a value in [0, n).
func backoff(try int, randN func(int64) int64) time.Duration {
	ceiling := backoffCap
	if try < 30 { // past that the shift overflows; the cap holds long before
		ceiling = min(backoffCap, backoffBase<<max(try-1, 0))
	}
	return time.Duration(randN(int64(ceiling) + 1))
}

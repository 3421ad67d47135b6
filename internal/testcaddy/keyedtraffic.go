package testcaddy

import (
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

// KeyedTraffic sends n requests to url from 4 clients, each with the
// header X-K: user:<k>, half of them to the first hot keys and half over
// all keys, picked by a generator seeded with seed (the same traffic every
// run). It returns how many were refused (429); any other status than 200
// or 429, or a failed request, fails the test. Safe from the test's
// goroutine only (it waits for its clients).
func KeyedTraffic(t testing.TB, url string, n, keys, hot int, seed uint64) (refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for range n / 4 {
				k := rng.IntN(keys)
				if rng.IntN(2) == 0 {
					k = rng.IntN(hot)
				}
				code, err := keyedGet(url, "user:"+strconv.Itoa(k))
				mu.Lock()
				switch {
				case err != nil:
					t.Error(err)
				case code == http.StatusTooManyRequests:
					refused++
				case code != http.StatusOK:
					t.Errorf("GET %s: status %d", url, code)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return refused
}

func keyedGet(url, key string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-K", key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

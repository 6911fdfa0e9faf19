package cluster

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scrape reads a Prometheus text page (url is the whole /metrics URL)
// into its samples, keyed by the series as written: name{labels}.
func Scrape(url string) (map[string]float64, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 || strings.HasPrefix(line, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// Series reports whether key (as Scrape keys it) is a series of metric.
func Series(key, metric string) bool {
	return key == metric || strings.HasPrefix(key, metric+"{")
}

package cluster

import (
	"context"

	"github.com/baristahq/barista/web"
)

// Scrape reads a server's /metrics page (url is the whole URL) into its
// samples, keyed by the series as written: name{labels}.
func Scrape(url string) (map[string]float64, error) {
	return web.Scrape(context.Background(), url, "")
}

// Series reports whether key (as Scrape keys it) is a series of metric.
func Series(key, metric string) bool { return web.Series(key, metric) }

package schedule

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"sync"
	"time"
)

// The time zone database every build reads: the IANA database as Go's
// distribution compiles it (lib/time/zoneinfo.zip, release 2025c),
// embedded in the binary. time.LoadLocation would look first at the
// machine's /usr/share/zoneinfo, which differs between hosts and
// updates: two leaders of one cluster could then compute different slots
// for the same spec. Here every binary of a release reads the same rules
// whatever its host; a new release of the database is a new copy of the
// file (`make tzdata`), said in the release notes.

//go:embed zoneinfo.zip
var zoneinfo []byte

// TZDataVersion names the release of the embedded database.
const TZDataVersion = "2025c"

var zones struct {
	once  sync.Once
	files map[string]*zip.File
	err   error
	mu    sync.Mutex
	cache map[string]*time.Location
}

// LoadZone returns the zone of an IANA name from the embedded database:
// "" and "UTC" are UTC. A name it does not hold is an error that says
// so.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	zones.once.Do(func() {
		r, err := zip.NewReader(bytes.NewReader(zoneinfo), int64(len(zoneinfo)))
		if err != nil {
			zones.err = fmt.Errorf("the embedded time zone database: %w", err)
			return
		}
		zones.files = make(map[string]*zip.File, len(r.File))
		for _, f := range r.File {
			zones.files[f.Name] = f
		}
		zones.cache = map[string]*time.Location{}
	})
	if zones.err != nil {
		return nil, zones.err
	}
	zones.mu.Lock()
	defer zones.mu.Unlock()
	if loc, ok := zones.cache[name]; ok {
		return loc, nil
	}
	f, ok := zones.files[name]
	if !ok {
		return nil, fmt.Errorf("zone %q is not an IANA time zone name (tz database %s); for example UTC, Europe/Berlin, America/New_York", name, TZDataVersion)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("zone %q: %w", name, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("zone %q: %w", name, err)
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, fmt.Errorf("zone %q: %w", name, err)
	}
	zones.cache[name] = loc
	return loc, nil
}

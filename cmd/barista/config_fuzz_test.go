package main

import "testing"

// FuzzConfigFile feeds arbitrary bytes to the configuration file loader
// and merges what it accepts as a server would: nothing may panic, and a
// configuration accepted whole is one raftnode.New accepts too. The seed
// corpus (testdata/fuzz/FuzzConfigFile) holds a file setting every key
// (fullConfig) and files with each kind of refusal.
func FuzzConfigFile(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parseConfigFile("fuzz.toml", data)
		if err != nil {
			if file != nil {
				t.Fatal("a refused file came back")
			}
			return
		}
		// As if the command line gave what a server needs; the file may
		// still override it.
		c := defaultServerConfig()
		c.Node.ID, c.Node.DataDir, c.InsecureDev = "n1", "/var/lib/barista", true
		list := c.settings()
		if err := mergeConfig(&c, list, map[string]bool{}, file, ""); err != nil {
			return
		}
		if err := c.Node.Validate(); err != nil {
			t.Fatalf("merged and validated, but raftnode refuses it: %v", err)
		}
	})
}

// Command barista is the tiered, fair-share job dispatcher: server, worker,
// client and operator commands in one binary. Run "barista help" for the
// list.
package main

import "os"

func main() { os.Exit(Run(os.Args[1:], os.Stdout, os.Stderr)) }

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/baristahq/barista/internal/version"
)

// command is one subcommand, registered in commands under its path
// ("replay", "operator raft list-peers").
type command struct {
	synopsis string
	usage    string // the argument part of the usage line
	help     string // longer description, shown by --help
	flags    func(fs *flag.FlagSet) any
	run      func(env *cmdEnv, opts any, args []string) error
}

// cmdEnv is what a running command writes to.
type cmdEnv struct {
	stdout, stderr io.Writer
}

var commands = map[string]*command{}

// spec is a command whose options are a T: flags binds them to the flag
// set (and sets defaults), run gets them. typed makes it a command, with
// the one conversion from the options' dynamic type in the program.
type spec[T any] struct {
	synopsis string
	usage    string
	help     string
	flags    func(fs *flag.FlagSet, o *T)
	run      func(env *cmdEnv, opts *T, args []string) error
}

// flagRegistrar is options that define their own flags.
type flagRegistrar interface{ register(fs *flag.FlagSet) }

// typed makes a command of s; without s.flags, options that define their
// own flags (clientFlags and the like) get those.
func typed[T any](s *spec[T]) *command {
	return &command{synopsis: s.synopsis, usage: s.usage, help: s.help,
		flags: func(fs *flag.FlagSet) any {
			o := new(T)
			if s.flags != nil {
				s.flags(fs, o)
			} else if r, ok := any(o).(flagRegistrar); ok {
				r.register(fs)
			}
			return o
		},
		run: func(env *cmdEnv, o any, args []string) error { return s.run(env, o.(*T), args) },
	}
}

func register(path string, c *command) { commands[path] = c }

// exitError carries an exit code other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// usageError marks bad command-line usage (exit code 2).
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// silentError exits with the code without printing anything more.
type silentError struct{ code int }

func (e *silentError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Run runs the barista command line and returns the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	env := &cmdEnv{stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, path := lookup(args[1:]); c != nil {
				printHelp(stdout, path, c, nil)
				return 0
			}
		}
		printOverview(stdout)
		return 0
	}
	if args[0] == "--version" {
		fmt.Fprintln(stdout, "barista", version.String())
		return 0
	}
	c, path := lookup(args)
	if c == nil {
		fmt.Fprintf(stderr, "barista: unknown command %q\n\n", strings.Join(args, " "))
		printOverview(stderr)
		return 2
	}
	rest := args[len(strings.Fields(path)):]
	fs := flag.NewFlagSet("barista "+path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var opts any
	if c.flags != nil {
		opts = c.flags(fs)
	}
	if err := fs.Parse(interleave(fs, rest)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout, path, c, fs)
			return 0
		}
		fmt.Fprintf(stderr, "barista %s: %s\n", path, flagError(err))
		fmt.Fprintf(stderr, "usage: barista %s %s (see --help)\n", path, c.usage)
		return 2
	}
	if err := c.run(env, opts, fs.Args()); err != nil {
		var se *silentError
		if errors.As(err, &se) {
			return se.code
		}
		fmt.Fprintln(stderr, err.Error())
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.code == 2 {
				fmt.Fprintf(stderr, "usage: barista %s %s (see --help)\n", path, c.usage)
			}
			return ee.code
		}
		return 1
	}
	return 0
}

// flagError words the flag package's errors like every other refusal:
// the flag first, with two dashes ("--cap: 4294967297 is out of range
// (0..4294967295)").
func flagError(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"invalid value ", "invalid boolean value "} {
		rest, ok := strings.CutPrefix(msg, prefix)
		if !ok {
			continue
		}
		q, qerr := strconv.QuotedPrefix(rest)
		if qerr != nil {
			break
		}
		rest = strings.TrimPrefix(strings.TrimPrefix(rest[len(q):], " for"), " flag")
		if name, why, ok := strings.Cut(strings.TrimPrefix(rest, " -"), ": "); ok {
			return "--" + name + ": " + why
		}
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + name
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "--" + name + " needs a value"
	}
	return msg
}

// interleave lets flags follow positional arguments ("job 7 --json"),
// stopping at "--" so a job's own command line is left alone.
func interleave(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := fs.Lookup(name); f != nil {
				if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
					continue
				}
				if i+1 < len(args) {
					flags = append(flags, args[i+1])
					i++
				}
			}
			continue
		}
		pos = append(pos, a)
	}
	if len(pos) > 0 && pos[0] != "--" {
		return append(append(flags, "--"), pos...)
	}
	return append(flags, pos...)
}

// lookup finds the longest registered command path that prefixes args.
func lookup(args []string) (*command, string) {
	for n := len(args); n > 0; n-- {
		path := strings.Join(args[:n], " ")
		if c, ok := commands[path]; ok {
			return c, path
		}
	}
	return nil, ""
}

func printOverview(w io.Writer) {
	fmt.Fprintln(w, "barista: a tiered, fair-share job dispatcher replicated by Raft.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: barista COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	paths := make([]string, 0, len(commands))
	for p := range commands {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(w, "  %-34s %s\n", p, commands[p].synopsis)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "barista COMMAND --help" for a command's flags.`)
}

func printHelp(w io.Writer, path string, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: barista %s %s\n\n%s\n", path, c.usage, c.synopsis)
	if c.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.help))
	}
	if fs == nil {
		fs = flag.NewFlagSet(path, flag.ContinueOnError)
		if c.flags != nil {
			c.flags(fs)
		}
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		if name == "value" {
			// A value without a `NAME` in its usage: name it by its kind.
			name = valueName(f.Value)
		}
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%-30s %s", line, usage)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// valueName names a flag's value in --help when its usage does not.
func valueName(v flag.Value) string {
	switch v.(type) {
	case interface{ isDuration() }:
		return "DURATION"
	case interface{ isInteger() }:
		return "N"
	case *listVal:
		return "LIST"
	}
	return "VALUE"
}

// openInput opens a named file, or standard input for "-".
func openInput(path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(path)
}
